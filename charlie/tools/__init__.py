"""The tools the model may call: the registry, and the built-in tools."""
