"""Words that follow a number: "1 note", "3 notes", said one way everywhere."""

from __future__ import annotations


def plural(count: int, word: str, words: str | None = None) -> str:
    """`word` for one (or minus one), otherwise `words` (by default `word` + "s").

    The count is the caller's to write, so it can be written as it likes ("4,000"):
    `f"{n} {plural(n, 'note')}"` is "1 note" or "0 notes"."""
    if abs(count) == 1:
        return word
    return words if words is not None else word + "s"
