"""Distillation in batches that fit the model: its window, and its answer cap.

One request folds a batch of messages into the memory: the prompt holds the instructions,
the memory and the batch; the answer holds the whole memory rewritten, plus what the batch
adds. Both must fit. A batch is therefore bounded by the room the prompt leaves (a message
too long on its own is shortened) and by the answer: a small model's answer grows with
every message it is given, and an answer cut at the cap is refused — so a batch holds at
most as many messages as the answer has room for (`ANSWER_PER_MESSAGE` tokens each).

`distill_all` is what `charlie distill`, `/distill`, Discord's /distill and imports use:
every pending message, oldest first, in such batches, under one claim.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from charlie import conversations
from charlie.conversations import Channel, Message
from charlie.errors import AlreadyDistilled, CharlieError, MemoryFormatError
from charlie.home import Home
from charlie.llm import budget
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.memory.distill import DistillResult

DISTILL_GROWTH = 512  # tokens a distillation's answer may add to the memory it rewrites
DISTILL_FRAME = 128  # tokens of a distillation prompt around the memory and the messages
ANSWER_PER_MESSAGE = 48  # answer tokens a message may add (a decision, a quote, a line)
MIN_BATCH = 4  # however tight the answer, a batch this big is always allowed
MAX_BATCH = 100  # messages folded into memory by one request at most


def _memory_tokens(home: Home, channel: Channel) -> int:
    try:
        current = memory.as_prompt(memory.load(home, channel))
    except MemoryFormatError:
        assert channel.project is not None
        current = channel.project.memory_path.read_text(encoding="utf-8", errors="replace")
    return budget.estimate(current)


def plan(home: Home, channel: Channel, llm: LLMClient) -> tuple[int, int, int]:
    """For one distillation of `channel`: the answer's token cap, the room left for the
    messages in the prompt, and the most messages one batch may hold."""
    window = llm.context_window()
    memory_tokens = _memory_tokens(home, channel)
    answer = min(max(llm.max_tokens, memory_tokens + DISTILL_GROWTH), window // 2)
    room = (
        budget.Budget(window, answer).prompt
        - budget.estimate(distill.SYSTEM_PROMPT)
        - memory_tokens
        - DISTILL_FRAME
    )
    most = max(MIN_BATCH, (answer - memory_tokens) // ANSWER_PER_MESSAGE)
    return answer, room, min(most, MAX_BATCH)


def fitted(
    home: Home, channel: Channel, llm: LLMClient, pending: list[Message]
) -> tuple[LLMClient, list[Message]]:
    """The client (capped for the answer) and the oldest of `pending` that fit one
    distillation whole, at most as many as the answer allows; a message too long to fit
    on its own is shortened. Nothing is shortened that could go in the next batch."""
    answer, room, most = plan(home, channel, llm)
    batch: list[Message] = []
    used = 0
    for message in pending[:most]:
        size = budget.estimate(message.content) + budget.MESSAGE_TOKENS
        if batch and used + size > room:
            break
        if size > room:
            message = replace(
                message, content=budget.shorten(message.content, room - budget.MESSAGE_TOKENS)
            )
        batch.append(message)
        used += size
    return llm.with_max_tokens(answer), batch


def distill_all(home: Home, channel: Channel, llm: LLMClient) -> Iterator[DistillResult]:
    """Fold every message of `channel` awaiting distillation into memory, oldest first, in
    batches that fit (`fitted`), under one claim; nothing when none awaits. Raises what
    `distill.distill` raises; what is folded in stays folded."""
    token = distill.claim(home, channel)
    if token is None:
        raise CharlieError(f"A distillation of {channel.label} is running; try again soon.")
    try:
        while pending := conversations.undistilled(home, channel, limit=MAX_BATCH):
            client, batch = fitted(home, channel, llm, pending)
            try:
                result = distill.distill(home, channel, client, batch)
            except AlreadyDistilled:
                continue  # folded in meanwhile: what still awaits is read again
            yield result
    finally:
        distill.release(home, channel, token)


def requests_needed(home: Home, channels: list[Channel], llm: LLMClient) -> tuple[int, int]:
    """How many messages await distillation in `channels`, and about how many requests to
    the model folding them in will take (the batches `distill_all` will send)."""
    calls = messages = 0
    for channel in channels:
        pending = conversations.undistilled(home, channel)
        messages += len(pending)
        _, room, most = plan(home, channel, llm)
        used = count = 0
        for message in pending:
            size = min(budget.estimate(message.content) + budget.MESSAGE_TOKENS, room)
            if count and (used + size > room or count >= most):
                calls += 1
                used = count = 0
            used += size
            count += 1
        calls += int(count > 0)
    return messages, calls
