"""What a model gives back that is not an answer: Charlie's own prompt, a tool's own note,
or an earlier reply said again word for word.

A small model copies what is in front of it. Seen with Qwen2.5-1.5B: a tool's result
("Loaded the projects tools: list_projects, switch_project.") shown and stored as the reply
— then copied as the reply to the next 14 messages of the thread — and an answer that was a
sentence of the prompt ("This is the message that follows the conversation since the last
memory was written"). So, for each answer:

- `Hold` keeps back, as the reply streams, a start that may be one of these: a tool's note
  given back word for word, and a sentence that gives back one of Charlie's own — most of
  its words are one of those sentences' (`charlie.chat.prompt.own_words`), in any order —
  are taken out; an earlier reply of the thread is held while the answer could still be
  all of it — an answer that goes on past it (or differs) is shown whole. Only the start
  waits, and a sentence no longer than it takes to tell.
- `without_notes` and `without_own` take the same out of the complete answer, wherever
  they stand (a reply quoting the household's memory or notes is data, not Charlie's
  words, and stays).
- `judged` says whether what is left is an answer, and if not, what it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["bookkeeping", "prompt", "repeat"]
MIN_WORDS = 5  # a sentence shorter than this says too little to tell whose it is
SHARED = 0.7  # of a reply sentence's words, in one sentence of Charlie's own…
COVERED = 0.6  # …and of that sentence's words, in the reply sentence
MOST_OTHERS = 3  # words not of one of Charlie's sentences past which a start is shown
SENTENCE_END = re.compile(r"((?<=[.!?:])\s+|\n+)")
BLANK = re.compile(r"\{[^{}]*\}")


def normal(text: str) -> str:
    """`text` as compared: lower case, runs of white space as one space."""
    return " ".join(text.split()).lower()


def words(text: str) -> set[str]:
    """The words of `text`, lower case, a plural's `s` and a possessive's `'s` dropped."""
    found = re.findall(r"[a-z0-9]+", text.lower().replace("'s", ""))
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in found}


def sentences(texts: Iterable[str]) -> tuple[str, ...]:
    """The sentences of `texts` long enough to tell (a template's blanks left out)."""
    found: list[str] = []
    for text in texts:
        text = text.replace("{{", "{").replace("}}", "}")
        while BLANK.search(text):
            text = BLANK.sub(" ", text)
        found += [
            part.strip() for part in SENTENCE_END.split(text) if len(part.split()) >= MIN_WORDS
        ]
    return tuple(found)


@dataclass(frozen=True)
class Known:
    """What an answer of this turn must not be: tools' notes, Charlie's own sentences, the
    thread's earlier replies (those long enough to tell)."""

    notes: tuple[str, ...] = ()
    own: tuple[str, ...] = ()
    earlier: tuple[str, ...] = ()

    def with_notes(self, notes: Iterable[str]) -> Known:
        return Known((*self.notes, *notes), self.own, self.earlier)


@dataclass
class Hold:
    """Feed the answer's text as it streams; get back what may be shown. At its start, a
    tool's note given back word for word, and a sentence that gives back one of Charlie's
    own, are taken out; a start that may still turn out to be one of those, or the whole of
    an earlier reply, waits. The first text that can be none of them ends the holding: from
    there on all is shown. (A sentence of the answer waits at most until it ends, or until
    it holds words enough that no sentence of Charlie's could be most of it.)"""

    known: Known
    dropped: list[Kind] = field(default_factory=list)
    repeated: str = ""  # the earlier reply the whole answer was, word for word
    _pending: str = ""
    _open: bool = True

    def __post_init__(self) -> None:
        self._notes = [(_pattern(t), normal(t)) for t in self.known.notes if t.strip()]
        self._own = [words(sentence) for sentence in self.known.own]
        self._wholes = [(text, normal(text)) for text in self.known.earlier]

    def feed(self, text: str) -> str:
        if not self._open:
            return text
        self._pending += text
        while self._open:
            taken = self._taken_out()
            if taken:
                self._pending = self._pending[taken:]
                continue
            if self._may_become(self._pending):
                return ""
            self._open = False
        return self._release()

    def finish(self) -> str:
        """At the end of the stream: what still waits is shown, unless it is the whole of an
        earlier reply, or a sentence of Charlie's own."""
        if not self._open:
            return ""
        self._open = False
        said = normal(self._pending)
        if said and _parrots(self._pending, self._own):
            self._pending = ""
            self.dropped.append("prompt")
        for text, compared in self._wholes:
            if said and said == compared:
                self._pending = ""
                self.repeated = text
        return self._release()

    def _release(self) -> str:
        released, self._pending = self._pending, ""
        return released.lstrip() if self.dropped else released

    def _taken_out(self) -> int:
        """How much of the start is a tool's note, or a whole sentence of Charlie's own."""
        for pattern, _ in self._notes:
            found = pattern.match(self._pending)
            if found is not None:
                self.dropped.append("bookkeeping")
                return found.end()
        ended = SENTENCE_END.search(self._pending)
        if ended is not None and _parrots(self._pending[: ended.start()], self._own):
            self.dropped.append("prompt")
            return ended.end()
        return 0

    def _may_become(self, text: str) -> bool:
        said = normal(text)
        if not said:
            return True
        if any(c.startswith(said) for _, c in self._notes) or any(
            c.startswith(said) for _, c in self._wholes
        ):
            return True
        return SENTENCE_END.search(text) is None and _may_parrot(text, self._own)


def without_notes(reply: str, notes: Iterable[str]) -> str:
    """`reply` without any tool's note it gives back word for word, wherever it stands."""
    for note in notes:
        if note.strip():
            reply = _pattern(note, anchored=False).sub("", reply)
    return reply


def without_own(reply: str, own: Sequence[str]) -> str:
    """`reply` without the sentences that give back one of Charlie's own `own` sentences,
    word for word or in other words (most of its words are that sentence's)."""
    theirs = [words(sentence) for sentence in own]
    parts = SENTENCE_END.split(reply)
    kept: list[str] = []
    for at in range(0, len(parts), 2):
        sentence, gap = parts[at], parts[at + 1] if at + 1 < len(parts) else ""
        if _parrots(sentence, theirs):
            continue
        kept += [sentence, gap]
    return "".join(kept).strip()


def judged(reply: str, taken_out: Sequence[Kind], known: Known) -> tuple[Kind, str] | None:
    """Whether `reply` (complete, with what was `taken_out` of it gone) is not an answer:
    what it was, and why in words for the trace — else None (an empty reply of which
    nothing was taken out is for the caller)."""
    if not reply.strip():
        if taken_out:
            kind = taken_out[-1]
            return kind, DESCRIBED[kind]
        return None
    said = normal(reply)
    for earlier in known.earlier:
        if said == normal(earlier):
            return "repeat", DESCRIBED["repeat"]
    return None


DESCRIBED: dict[Kind, str] = {
    "bookkeeping": "the reply was only a tool's own note",
    "prompt": "the reply repeated Charlie's instructions",
    "repeat": "the reply repeated an earlier reply word for word",
}


def earlier_replies(replies: Iterable[str]) -> tuple[str, ...]:
    """The thread's replies an answer may not only repeat (those long enough to tell)."""
    return tuple(r for r in replies if len(r.split()) >= MIN_WORDS)


def _may_parrot(start: str, theirs: Sequence[set[str]]) -> bool:
    """Whether a sentence that starts with `start` may still give back one of `theirs`:
    so far, too few of its words are not that sentence's for most of it to be others'."""
    whole = start.split()
    if whole and not start[-1:].isspace():
        whole = whole[:-1]  # the last word may still be growing ("follo…")
    mine = words(" ".join(whole))
    for own in theirs:
        others = len(mine - own)
        if others <= min(len(own) * (1 - SHARED) / SHARED, MOST_OTHERS):
            return True
    return False


def _parrots(sentence: str, theirs: Sequence[set[str]]) -> bool:
    mine = words(sentence)
    if len(sentence.split()) < MIN_WORDS or not mine:
        return False
    for own in theirs:
        shared = len(mine & own)
        if shared >= SHARED * len(mine) and shared >= COVERED * len(own):
            return True
    return False


def _pattern(text: str, *, anchored: bool = True) -> re.Pattern[str]:
    """`text` word for word, any white space between its words, any case."""
    body = r"\s+".join(re.escape(word) for word in text.split())
    return re.compile((r"\s*" if anchored else "") + body, re.IGNORECASE)
