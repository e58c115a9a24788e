"""Contract tests against a real llama.cpp server (./scripts/real-llm)."""
