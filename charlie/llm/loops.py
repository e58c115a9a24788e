"""Runaway replies: a streamed answer that has started repeating itself.

Small local models fall into loops — the same sentence, line or phrase over and over until
the answer cap or the context window is full. `LoopGuard` watches the end of the text as it
streams: when a unit of 20 to 1,200 characters ends the text repeated exactly, enough times
in a row, the reply is looping. What came before the second copy is the useful part.

How many copies count as a loop falls with the unit's length: a short unit must fill at
least 320 characters (a 20-character unit 16 times, an 80-character line 4 times), a unit
over 200 characters 3 times. Lists, tables and code repeat their *shape* but rarely the
same 80 characters four times running, so they pass.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_UNIT, MAX_UNIT = 20, 1200
MIN_SPAN = 240  # characters a loop of short units must fill
MIN_COPIES, LONG_COPIES = 4, 3  # copies of a unit up to 200 characters, and of a longer one
CHECK_EVERY = 24  # characters of new text between two checks


def copies_needed(unit: int) -> int:
    return LONG_COPIES if unit > 200 else max(MIN_COPIES, -(-MIN_SPAN // unit))


@dataclass(frozen=True)
class Loop:
    """A loop found at the end of a text."""

    unit: int  # characters of the repeated unit
    copies: int  # how many times it repeats in a row
    keep: int  # characters of the text worth keeping: through the first copy


def find_loop(text: str) -> Loop | None:
    """The loop that ends `text`, if one does."""
    window = MAX_UNIT * LONG_COPIES
    offset = max(len(text) - window, 0)
    tail = text[offset:]
    if len(tail) < MIN_UNIT * copies_needed(MIN_UNIT):
        return None
    probe = tail[-MIN_UNIT:]
    end = len(tail) - MIN_UNIT  # where the probe starts
    at = tail.rfind(probe, 0, end + MIN_UNIT - 1)
    while at >= 0:
        unit = end - at
        if unit > MAX_UNIT:
            return None
        if unit >= MIN_UNIT and _has_words(tail[-unit:]):
            copies = 1
            while tail[-(copies + 1) * unit : len(tail) - copies * unit] == tail[-unit:]:
                copies += 1
            if copies >= copies_needed(unit):
                start = len(tail) - copies * unit
                while start > 0 and tail[start - 1] == tail[start - 1 + unit]:
                    start -= 1  # the loop began mid-unit
                keep = start + unit
                while (
                    keep < len(tail) and not tail[keep - 1].isspace() and not tail[keep].isspace()
                ):
                    keep += 1  # to the end of the word the first copy ends in
                while keep > 0 and tail[keep - 1].isspace():
                    keep -= 1
                return Loop(unit, copies, offset + keep)
        at = tail.rfind(probe, 0, at + MIN_UNIT - 1)
    return None


def _has_words(unit: str) -> bool:
    """A row of dashes or spaces is layout, not a loop."""
    return sum(c.isalnum() for c in unit) >= 4


class LoopGuard:
    """Feed it the reply as it streams; it says when the reply has started looping."""

    def __init__(self) -> None:
        self.text = ""
        self.loop: Loop | None = None
        self._checked = 0

    def feed(self, text: str) -> bool:
        """Add streamed text; True once the reply is looping."""
        self.text += text
        if self.loop is None and len(self.text) - self._checked >= CHECK_EVERY:
            self._checked = len(self.text)
            self.loop = find_loop(self.text)
        return self.loop is not None

    @property
    def useful(self) -> str:
        """The text up to the end of the loop's first copy (all of it when none)."""
        return self.text if self.loop is None else self.text[: self.loop.keep]
