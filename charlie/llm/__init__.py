"""Talking to the model: the OpenAI-compatible client, what a prompt may hold, reading
tool calls written as text, guards against runaway replies, and the doctor's probes."""
