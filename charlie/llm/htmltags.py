"""Stray HTML tags a model writes into its answer (`<p>`, `</p>`, `<br>`, `<div>`), taken
out as the answer streams: Charlie's replies are markdown, rendered by one allow-list on
the server, so such a tag would only ever be shown as text. A paragraph or a line break
stays one (a newline); bold and italics become markdown's. What sits in code — a code span
or a fenced block showing HTML — is left as written, as is anything that is not an HTML
element's tag (`a < b`, `<3`, `<name>`).
"""

from __future__ import annotations

import re

BREAKS = ("br", "hr")
BLOCKS = (
    *("p", "div", "section", "article", "header", "footer", "main", "blockquote", "pre"),
    *("ul", "ol", "table", "thead", "tbody", "tr", "h1", "h2", "h3", "h4", "h5", "h6"),
)
INLINE = (*("span", "font", "u", "small", "big", "sup", "sub", "td", "th", "a", "code"),)
EMPHASIS = {"b": "**", "strong": "**", "i": "*", "em": "*"}
NAMES = (*BREAKS, *BLOCKS, *INLINE, *EMPHASIS, "li")
TAG = re.compile(r"<(/?)([a-z][a-z0-9]*)(?:\s[^<>]*)?/?>", re.IGNORECASE)
LONGEST = 200  # a tag's attributes past this: not a tag anyone meant


class TagFilter:
    """Feed streamed text, get it back without stray HTML tags. Text that may be the start
    of a tag (`<`, `<di`) or of a code fence (a run of backticks) waits for the next piece;
    `flush` gives back what still waits, as it is."""

    def __init__(self) -> None:
        self._pending = ""
        self._fence = ""  # the backticks that opened the code block we are in
        self._span = ""  # the backticks that opened the code span we are in
        self._last = "\n"  # the last character given out: no break doubled at a start

    def feed(self, text: str) -> str:
        self._pending += text
        out: list[str] = []
        while self._pending:
            taken, piece = self._step(self._pending)
            if taken == 0:
                break  # too short to tell
            out.append(piece)
            self._pending = self._pending[taken:]
            if piece:
                self._last = piece[-1]
        return "".join(out)

    def flush(self) -> str:
        rest, self._pending = self._pending, ""
        return rest

    def _step(self, text: str) -> tuple[int, str]:
        """How much of `text` is decided, and what of it is shown (0: wait for more)."""
        if text[0] == "`":
            run = len(text) - len(text.lstrip("`"))
            if run == len(text):
                return 0, ""  # the run of backticks may go on
            return run, self._backticks(text[:run])
        if text[0] != "<" or self._fence or self._span:
            stop = _next_special(text)
            return stop, text[:stop]
        found = TAG.match(text)
        if found is not None:
            closing, name = found.group(1), found.group(2).lower()
            if name not in NAMES:
                return 1, "<"
            return found.end(), self._replace(name, bool(closing))
        opened = re.match(r"</?([a-z][a-z0-9]*)?", text, re.IGNORECASE)
        assert opened is not None  # `<` at least
        name = (opened.group(1) or "").lower()
        if opened.end() == len(text) and (not name or any(n.startswith(name) for n in NAMES)):
            return 0, ""  # `<`, `</`, `<di`: may still become a tag
        rest = text[opened.end() :]
        if name in NAMES and rest == "/":
            return 0, ""  # `<br/`: the `>` still coming
        if name in NAMES and rest[:1].isspace() and ">" not in rest and len(text) < LONGEST:
            return (0, "") if "<" not in rest[1:] else (1, "<")  # attributes still coming
        return 1, "<"

    def _backticks(self, run: str) -> str:
        if self._fence:
            if len(run) >= len(self._fence) and self._last == "\n":
                self._fence = ""
        elif self._span:
            if run == self._span:
                self._span = ""
        elif len(run) >= 3 and self._last == "\n":
            self._fence = run
        else:
            self._span = run
        return run

    def _replace(self, name: str, closing: bool) -> str:
        if name in EMPHASIS:
            return EMPHASIS[name]
        if name == "li":
            return "\n" if closing else ("- " if self._last == "\n" else "\n- ")
        if name in BREAKS:
            return "\n"
        if name in BLOCKS:
            return "" if self._last == "\n" else "\n\n" if closing else "\n"
        return ""


def _next_special(text: str) -> int:
    """Where the next `<` or backtick is (the end when none), at least one character on."""
    for at in range(1, len(text)):
        if text[at] in "<`":
            return at
    return len(text)
