"""What Charlie remembers about something, and why: the decisions about it (since when, by
whom, from which messages — and those it made before), the quotes, and what was said.

One answer for `charlie memory why "oak"`, the `explain_memory` tool the model can call
and the app. Everything comes from the channel's own memory and conversation: a private
channel's from its owner's only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from charlie import conversations
from charlie.conversations import Channel
from charlie.home import Home
from charlie.memory import decisions
from charlie.memory import layers as memory
from charlie.memory.layers import DISTILLED, HAND
from charlie.retrieval import recall
from charlie.users import User

Kind = Literal["decision", "earlier", "quote", "message"]
MESSAGES = 5


@dataclass(frozen=True)
class Source:
    """A message a piece of memory came from (or that mentions the topic)."""

    id: int
    speaker: str
    day: str
    text: str


@dataclass(frozen=True)
class Item:
    kind: Kind
    text: str
    why: str  # where it came from, in words
    sources: list[Source] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def _about(text: str, topic: str) -> bool:
    wanted = decisions.words(topic)
    return bool(wanted) and (
        topic.lower() in text.lower()
        or len(wanted & decisions.words(text)) >= max(1, len(wanted) // 2)
    )


def _who(by: str) -> str:
    if by == DISTILLED:
        return "distilled from the conversation"
    if by == HAND:
        return "written by hand in memory.md"
    return f"recorded by {by}" if by else "of unknown origin"


def _sources(home: Home, channel: Channel, ids: tuple[int, ...]) -> list[Source]:
    """The messages `ids` of this channel's threads (another channel's are never shown)."""
    if not ids:
        return []
    return [
        Source(i, speaker, at[:10], text)
        for i, speaker, at, text in conversations.sources_in(home, channel, ids)
    ]


def remembered(home: Home, channel: Channel, user: User, topic: str) -> list[Item]:
    """What the memory and the conversation hold about `topic`, each with where it came from."""
    layers = memory.load(home, channel)
    found: list[Item] = []
    for decision in layers.decisions:
        if _about(decision.text, topic):
            why = f"holds since {decision.since or 'an unknown day'}, {_who(decision.by)}"
            if decision.flag:
                why += f" ({decision.flag})"
            found.append(
                Item("decision", decision.text, why, _sources(home, channel, decision.sources))
            )
    for earlier in layers.earlier:
        if _about(earlier.text, topic):
            changed = (
                f"changed by message {earlier.changed_by}"
                if earlier.changed_by
                else "changed by hand"
            )
            why = (
                f"held from {earlier.since or 'an unknown day'} until {earlier.until or 'later'}, "
                f"{_who(earlier.by)}; {changed}"
            )
            ids = earlier.sources + ((earlier.changed_by,) if earlier.changed_by else ())
            found.append(Item("earlier", earlier.text, why, _sources(home, channel, ids)))
    for quote in layers.quotes:
        if _about(quote.text, topic):
            found.append(Item("quote", quote.text, f"said by {quote.speaker}"))
    recaller = recall.recaller_for(home)
    channels = recall.conversations_for(home, user, channel)
    try:
        hits = recaller.recall(user, channels, topic, limit=MESSAGES).hits
    except recall.RecallError:
        hits = []
    for hit in hits:
        message = hit.message
        source = Source(message.id, message.speaker, message.created_at[:10], message.content)
        found.append(
            Item("message", message.content, f"said by {message.speaker} on {source.day}", [source])
        )
    return found


def as_text(items: list[Item], topic: str) -> str:
    """The answer as lines a person (or a model) reads."""
    if not items:
        return f"Nothing in the memory or the conversation is about {topic!r}."
    titles = {
        "decision": "Decision",
        "earlier": "Earlier decision",
        "quote": "Quote",
        "message": "Said",
    }
    lines: list[str] = []
    for item in items:
        title = titles[item.kind]
        if item.kind == "message":  # its id, for `charlie forget`
            title += f" (message {item.sources[0].id})"
        lines.append(f"{title}: {item.text}")
        lines.append(f"  why: {item.why}")
        if item.kind != "message":
            for source in item.sources:
                said = f"{source.speaker}, {source.day}"
                lines.append(f"  from message {source.id} ({said}): {source.text[:160]}")
    return "\n".join(lines)
