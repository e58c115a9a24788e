"""How a distillation changes the decisions: what it may add, what it may supersede, and
what it can never do — drop a decision, or rewrite a person's.

Every decision the memory holds stays, whoever made it, unless the new messages revise it.
A revision is explicit: the model names the decision it supersedes and the person's
message that changed it (a message about something else — no word of what the decision
is about — changes nothing) (a distilled decision is also superseded by a new one that says
the same with another number, day or name: "the plumber comes on Thursday" replaces "…
on Tuesday"). The old one moves to the earlier decisions, with the day it stopped holding
and that message. A new decision must come from a person's message — a question is none,
and neither is anything Charlie said — and one that repeats a decision already held is
not added twice. What was refused, and why, is returned to be logged with the run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from charlie.conversations import ASSISTANT, Message
from charlie.memory.layers import DISTILLED, Decision, Earlier, key, normalise

SAME = 0.8  # content words in common: the same decision said again
RELATED = 0.5  # … enough to be about the same thing (a revision, if a value differs)
VALUE = re.compile(
    r"^(\d[\d.,:/-]*|\d+(st|nd|rd|th)|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)$"
)
# Little words that say nothing of what a decision is about (numbers in words stay: values)
STOP = frozenset({
    "the", "a", "an", "and", "or", "but", "of", "to", "in", "on", "at", "by", "for", "with",
    "from", "is", "are", "was", "were", "be", "been", "will", "would", "we", "our", "us", "i",
    "you", "it", "its", "this", "that", "these", "those", "they", "them", "their", "there",
    "then", "than", "as", "so", "not", "no", "yes", "do", "does", "did", "have", "has", "had",
    "can", "could", "should", "may", "might", "must", "shall", "let", "lets", "let's", "all",
    "any", "each", "more", "most", "some", "such", "into", "over", "under", "about", "after",
    "before", "also", "just", "only",
})  # fmt: skip


@dataclass(frozen=True)
class Proposed:
    """A decision the model proposes, with the numbers of the messages it names."""

    text: str
    messages: tuple[int, ...] = ()


@dataclass(frozen=True)
class Revision:
    """An earlier decision the model says a message changes."""

    decision: str
    message: int | None


@dataclass
class Outcome:
    decisions: list[Decision]
    earlier: list[Earlier]
    refused: list[dict[str, str]] = field(default_factory=list)


def words(text: str) -> set[str]:
    """The content words of a decision, lower-cased and roughly stemmed ("tiles", "tiled"
    and "tile" are one), values such as days and numbers kept."""
    found = (w.strip(".,'-") for w in re.findall(r"\d[\d,.:/]*\d|[\w'£$€%.-]+", text.lower()))
    return {_stem(w) for w in found if w and w not in STOP}


def _stem(word: str) -> str:
    if VALUE.match(word):
        return word
    for ending in ("ing", "ed", "es", "s", "d"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return (
                word[: -len(ending)].rstrip("e") if ending in ("d", "ed") else word[: -len(ending)]
            )
    return word.rstrip("e") if len(word) > 4 else word


# Words of how a decision is told, not of what it is about ("cleo decided to fly from
# Bristol" and "cleo decided on Lisbon" are not about the same thing; nor are two decisions
# a small model words as "Charlie agreed to …"), as `words` stems them
TELLING = frozenset(words(
    "decide decided decision agree agreed choose chose chosen settle settled go going goes "
    f"went change changed plan people final answer {ASSISTANT}"
))  # fmt: skip


def about(text: str, names: frozenset[str] = frozenset()) -> set[str]:
    """A decision's content words less its values (days, numbers), the words of telling
    ("decided", "change", "plan") and the speakers' `names`: what it is about."""
    return {w for w in words(text) if not VALUE.match(w) and w not in TELLING and w not in names}


def overlap(one: str, other: str) -> float:
    a, b = words(one), words(other)
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def _values(text: str) -> set[str]:
    return {w for w in words(text) if VALUE.match(w)}


def revises(new: str, old: str) -> bool:
    """`new` says what `old` said with another value: about the same thing (most of their
    other words shared), with a number, a day or a month that differs."""
    if key(new) == key(old):
        return False
    plain_new, plain_old = words(new) - _values(new), words(old) - _values(old)
    if not plain_new or not plain_old:
        return False
    shared = len(plain_new & plain_old) / min(len(plain_new), len(plain_old))
    return shared >= RELATED and bool(_values(new) ^ _values(old))


def _day(message: Message) -> str:
    return message.created_at[:10]


def _match(named: str, decisions: Iterable[Decision]) -> Decision | None:
    """The held decision the model named: the same text, or the most alike (half its words)."""
    best, score = None, 0.0
    for decision in decisions:
        if key(decision.text) == key(named):
            return decision
        alike = overlap(named, decision.text)
        if alike > score:
            best, score = decision, alike
    return best if score >= RELATED else None


def _sources(proposed: Proposed, people: dict[int, Message]) -> tuple[int, ...]:
    """The person's messages a decision came from: those the model named, else the one it
    shares the most words with (at least half of its words, and one)."""
    named = tuple(i for i in proposed.messages if i in people)
    if named:
        return named
    wanted = words(proposed.text)
    scored = [(len(wanted & words(m.content)), m.id) for m in people.values()]
    best = max(scored, default=(0, 0))
    return (best[1],) if best[0] >= max(1, len(wanted) / 2) else ()


def apply(
    held: list[Decision],
    earlier: list[Earlier],
    proposed: list[Proposed],
    revisions: list[Revision],
    messages: list[Message],
    removed: set[str],
    *,
    start_over: Message | None = None,
) -> Outcome:
    """The decisions after a distillation of `messages`: `held` (every one stays unless
    revised), less those revised, plus the new ones `proposed` that come from a person.
    `removed` are keys the person deleted by hand meanwhile: never added back. With
    `start_over` (a person's message asking to forget, or to start again), the distilled
    decisions the model did not repeat are superseded by it."""
    people = {m.id: m for m in messages if m.role == "user"}
    kept, before = list(held), list(earlier)
    outcome = Outcome(kept, before)

    def supersede(old: Decision, by: Message) -> None:
        kept.remove(old)
        before.append(Earlier(old.text, old.since, old.by, old.sources, _day(by), changed_by=by.id))

    if start_over is not None:
        repeated = {key(p.text) for p in proposed}
        for old in [d for d in kept if d.by == DISTILLED and key(d.text) not in repeated]:
            supersede(old, start_over)
    names = frozenset(words(" ".join({m.speaker for m in people.values()})))
    for revision in revisions:
        target = _match(revision.decision, kept)
        changer = people.get(revision.message or -1)
        if target is None or changer is None:
            outcome.refused.append(
                {"superseded": revision.decision, "why": "no such decision, or no person's message"}
            )
            continue
        said = [changer.content, *(p.text for p in proposed if changer.id in p.messages)]
        if not any(about(target.text, names) & about(text, names) for text in said):
            outcome.refused.append(
                {"superseded": target.text, "why": "the message names something else"}
            )
            continue
        supersede(target, changer)
    for offer in proposed:
        text = normalise(offer.text)
        if not text or key(text) in removed:
            continue
        sources = _sources(offer, people)
        if not sources:
            outcome.refused.append({"decision": text, "why": "not from a person's message"})
            continue
        if all(people[i].content.rstrip().endswith("?") for i in sources):
            outcome.refused.append({"decision": text, "why": "a question, not a decision"})
            continue
        same = [d for d in kept if key(d.text) == key(text) or overlap(d.text, text) >= SAME]
        if same and not any(revises(text, d.text) for d in same):
            old = same[0]  # said again: one decision, its sources together
            merged = tuple(sorted({*old.sources, *sources})) if old.by == DISTILLED else old.sources
            kept[kept.index(old)] = replace(old, sources=merged)
            continue
        newest = max((people[i] for i in sources), key=lambda m: m.id)
        changed = [d for d in kept if revises(text, d.text)]
        if any(d.by != DISTILLED for d in changed):  # a person's is revised only when named
            outcome.refused.append(
                {"decision": text, "why": "it would change a person's decision unasked"}
            )
            continue
        for old in changed:
            supersede(old, newest)
        kept.append(Decision(text, _day(newest), DISTILLED, tuple(sorted(sources))))
    return outcome
