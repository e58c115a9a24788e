"""One chat turn, end to end: log, assemble context, stream the reply, distill when due.

Context is bounded: persona + the project's response style + the three memory layers +
the messages since the last distillation (with the last exchange always included) —
never the whole transcript, so a long conversation costs no more per turn than a short one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from charlie import conversations, distill, memory
from charlie.conversations import Channel, Message
from charlie.errors import CharlieError, DistillationError, LLMError, MemoryFormatError
from charlie.home import Home
from charlie.llm import Completion, Delta, LLMClient, ThinkFilter, image_part
from charlie.users import User

MIN_RECENT = 4  # the last exchange stays verbatim even right after a distillation
MAX_CONTEXT_MESSAGES = 60  # a ceiling if distillation keeps failing

BASE_PERSONA = (
    "You are Charlie, a personal assistant for a household. You keep an explicit memory of "
    "each project, shown below; the person can read and edit it, and their edits are true."
)


@dataclass(frozen=True)
class Token:
    """A piece of the reply, to show as it arrives."""

    text: str


@dataclass(frozen=True)
class Reply:
    """The reply, complete and stored."""

    message: Message
    prompt_tokens: int | None
    llm_seconds: float


@dataclass(frozen=True)
class Distilled:
    """Memory was rewritten from the conversation."""

    result: distill.DistillResult


@dataclass(frozen=True)
class Notice:
    """Something the person should know that did not stop the turn."""

    text: str


Event = Token | Reply | Distilled | Notice


def cadence(channel: Channel) -> int:
    return channel.project.config.distill_every if channel.project else 5


def system_prompt(home: Home, channel: Channel, user: User, layers: str) -> str:
    parts = [BASE_PERSONA]
    if channel.project is not None:
        config = channel.project.config
        parts.append(f'This is the project "{config.name}".')
        if config.persona.strip():
            parts.append(config.persona.strip())
        if config.style.strip():
            parts.append(f"Response style for this project: {config.style.strip()}")
    else:
        parts.append(f"This is {user.name}'s private channel: nobody else sees it.")
    parts.append(f"You are talking with {user.name}. Today is {datetime.now(UTC):%A %Y-%m-%d}.")
    parts.append(f"<memory>\n{layers.strip()}\n</memory>")
    parts.append("The messages that follow are the conversation since that memory was written.")
    return "\n\n".join(parts)


def _memory_text(home: Home, channel: Channel) -> tuple[str, str | None]:
    """The memory as the model should see it, and a warning when memory.md is unreadable."""
    try:
        current = memory.load(home, channel)
    except MemoryFormatError as exc:
        assert channel.project is not None
        raw = channel.project.memory_path.read_text(encoding="utf-8", errors="replace")
        return raw, f"{exc} Until then distillation is paused; the file is used as written."
    return memory.as_prompt(current), None


def context(
    home: Home, channel: Channel, user: User, images: list[Path] | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """The messages to send for the next reply (the newest stored message is the person's)."""
    layers, warning = _memory_text(home, channel)
    pending = conversations.undistilled(home, channel)
    count = min(max(len(pending), MIN_RECENT), MAX_CONTEXT_MESSAGES)
    history = conversations.recent(home, channel, count)
    speakers = {m.speaker for m in history if m.role == "user"}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(home, channel, user, layers)}
    ]
    for position, message in enumerate(history):
        text = message.content
        if message.role == "user" and len(speakers) > 1:
            text = f"{message.speaker}: {text}"
        is_current = position == len(history) - 1 and message.role == "user"
        if message.images and is_current and images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
            parts += [image_part(path) for path in images]
            messages.append({"role": message.role, "content": parts})
        else:
            if message.images:
                text += f"\n[{len(message.images)} image(s) were attached]"
            messages.append({"role": message.role, "content": text})
    return messages, warning


def turn(
    home: Home,
    llm: LLMClient,
    channel: Channel,
    user: User,
    text: str,
    images: list[Path] | None = None,
) -> Iterator[Event]:
    """Take the person's message and yield the reply as it streams, then any distillation.

    The message is stored first: if the model fails, the `LLMError` propagates and the
    message is kept for the next turn.
    """
    if channel.private and (channel.owner is None or channel.owner.id != user.id):
        raise CharlieError("A private channel can only be used by its owner.")
    if not text.strip() and not images:
        raise CharlieError("The message is empty: type something to send.")
    images = images or []
    image_parts = [image_part(path) for path in images]  # fail on a bad image before storing
    del image_parts
    memory.ensure_file(home, channel)
    conversations.add_message(
        home, channel, "user", text, user=user, images=[str(p) for p in images]
    )
    messages, warning = context(home, channel, user, images)
    if warning:
        yield Notice(warning)
    visible = ThinkFilter()
    completion = Completion()
    try:
        for item in llm.stream(messages):
            if isinstance(item, Delta):
                shown = visible.feed(item.text)
                if shown:
                    yield Token(shown)
            else:
                completion = item
    except LLMError as exc:
        raise type(exc)(
            f"{exc} Your message is saved and will be part of the conversation when you "
            "send the next one."
        ) from exc
    tail = visible.flush()
    if tail:
        yield Token(tail)
    reply_text = ThinkFilter().feed(completion.content).strip()
    if not reply_text:
        reply_text = "(The model returned an empty reply.)"
        yield Notice("The model returned an empty reply; try rephrasing or another model.")
    stored = conversations.add_message(home, channel, "assistant", reply_text)
    yield Reply(stored, completion.usage.get("prompt_tokens"), completion.seconds)
    yield from distill_due(home, llm, channel)


def distill_due(home: Home, llm: LLMClient, channel: Channel) -> Iterator[Event]:
    """Distill every full batch of `cadence` undistilled messages, oldest first."""
    every = cadence(channel)
    while True:
        batch = conversations.undistilled(home, channel, limit=every)
        if len(batch) < every:
            return
        try:
            result = distill.distill(home, channel, llm, batch)
        except (DistillationError, LLMError, MemoryFormatError) as exc:
            yield Notice(f"Memory was not updated: {exc}")
            return
        yield Distilled(result)
