"""Server quirks Charlie handles (tests/test_server_quirks.py has each against the double),
where the real llama.cpp server can show them."""

from __future__ import annotations

import pytest

from .real_llm_support import long_text, real_client

pytestmark = pytest.mark.real_llm


def test_a_cached_prefix_is_still_counted_so_no_truncation_is_claimed() -> None:
    """Charlie catches a server that silently drops the start of a long prompt (Ollama:
    ollama/ollama#4967) by comparing usage.prompt_tokens with what it sent. That holds only
    if the count is the whole prompt: llama.cpp counts the tokens it took from its prompt
    cache too (and says how many in prompt_tokens_details.cached_tokens), so the second
    turn over the same prefix reports more tokens, not just the new ones."""
    prompt = [
        {"role": "system", "content": long_text(7, 1600)},
        {"role": "user", "content": "Say ok."},
    ]
    with real_client(max_tokens=8) as client:
        first = client.chat(prompt)
        follow_up = [
            *prompt,
            {"role": "assistant", "content": first.content.strip() or "ok"},
            {"role": "user", "content": "Say ok again."},
        ]
        second = client.chat(follow_up)
        estimate = client.observed.last_prompt_estimate
    details = second.usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens", 0) if isinstance(details, dict) else 0
    assert cached > 0, f"the server did not reuse its prompt cache: {second.usage}"
    assert second.usage["prompt_tokens"] > first.usage["prompt_tokens"]
    assert second.usage["prompt_tokens"] > cached
    assert second.usage["prompt_tokens"] >= estimate  # what the check compares
