"""Spoken-length compression: a written answer turned into a few sentences worth hearing.

Two halves. The model is asked for a short spoken answer (`instruction`); whatever it sends,
`speakable` then makes it sayable deterministically — code blocks, tables, headings and raw
URLs are left out (the chat keeps them), markdown marks are dropped, lists become sentences —
and caps it at a few sentences and a number of characters. The full answer stays in the
conversation as written.
"""

from __future__ import annotations

import re
from urllib.parse import urlparse

MORE = "The rest is in the chat."

INSTRUCTION = (
    "The person is talking to you by voice and will hear your answer read aloud. Answer in "
    "at most {sentences} short spoken sentences of plain words: no markdown, lists, tables, "
    "code or links. Put the most useful thing first."
)

FENCE = re.compile(r"^\s*(```|~~~).*?^\s*\1[^\n]*$", re.S | re.M)
OPEN_FENCE = re.compile(r"^\s*(```|~~~).*\Z", re.S | re.M)  # an unclosed block to the end
IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
URL = re.compile(r"\b(?:https?://|www\.)[^\s<>()\"']+", re.I)
HTML = re.compile(r"</?[a-zA-Z][^>]*>")
INLINE_CODE = re.compile(r"`([^`]*)`")
EMPHASIS = re.compile(r"(\*\*|__|\*|_|~~)(?=\S)(.+?)(?<=\S)\1")
BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
QUOTE = re.compile(r"^\s*>\s?")
TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9\x00])")
ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "Mr.", "Mrs.", "Ms.", "Dr.", "St.", "vs.", "approx.")


def instruction(sentences: int) -> str:
    return INSTRUCTION.format(sentences=sentences)


def _url_words(match: re.Match[str]) -> str:
    whole = match.group(0)
    raw = whole.rstrip(".,;:!?")
    host = urlparse(raw if "://" in raw else f"http://{raw}").hostname or ""
    host = host.removeprefix("www.")
    return (f"a link to {host}" if host else "a link") + whole[len(raw) :]


def _line(text: str) -> str:
    text = QUOTE.sub("", text)
    bullet = BULLET.match(text) is not None
    text = BULLET.sub("", text).strip()
    if (bullet or text) and text and text[-1] not in ".!?…:;,":
        text += "."
    return text


def speakable(markdown: str, max_sentences: int = 3, max_chars: int = 450) -> str:
    """A short, speakable version of `markdown` (never empty while there is text)."""
    left_out = False
    text, count = FENCE.subn("\n", markdown.replace("\r\n", "\n"))
    text, unclosed = OPEN_FENCE.subn("\n", text)
    left_out = bool(count or unclosed)
    lines = []
    for line in text.split("\n"):
        if TABLE_ROW.match(line):
            left_out = True
            continue
        if RULE.match(line) or HEADING.match(line):  # headings help a reader, not a listener
            continue
        lines.append(_line(line))
    text = " ".join(line for line in lines if line)
    text = IMAGE.sub(lambda m: m.group(1), text)
    text = LINK.sub(lambda m: m.group(1), text)
    text = URL.sub(_url_words, text)
    text = HTML.sub("", text)
    text = INLINE_CODE.sub(lambda m: m.group(1), text)
    for _ in range(2):  # nested emphasis
        text = EMPHASIS.sub(lambda m: m.group(2), text)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    text = re.sub(r"([.!?])\.+", r"\1", text)
    if not text:
        return MORE if markdown.strip() else ""
    sentences = _sentences(text)
    kept = sentences[:max_sentences]
    left_out = left_out or len(sentences) > len(kept)
    spoken = " ".join(kept)
    if len(spoken) > max_chars:
        left_out = True
        spoken = _cut(spoken, max_chars)
    if left_out:
        spoken = f"{spoken} {MORE}"
    return spoken


def _sentences(text: str) -> list[str]:
    protected = text
    for number, abbreviation in enumerate(ABBREVIATIONS):
        protected = protected.replace(abbreviation, f"\x00{number}\x00")
    parts = [p.strip() for p in SENTENCE_END.split(protected) if p.strip()]
    restored = []
    for part in parts:
        for number, abbreviation in enumerate(ABBREVIATIONS):
            part = part.replace(f"\x00{number}\x00", abbreviation)
        restored.append(part)
    return restored


def _cut(text: str, limit: int) -> str:
    """Cut at the last sentence end, else clause, else word, that fits; end with a full stop."""
    head = text[: limit + 1]
    for marks in (".!?", ";:,"):
        at = max(head.rfind(mark) for mark in marks)
        if at >= limit // 2:
            return head[:at].rstrip() + "."
    at = head.rfind(" ")
    return (head[:at] if at > 0 else head[:limit]).rstrip(" ,;:") + "."


def sentences_of(text: str) -> list[str]:
    """The sentences to synthesise one by one (so the first can play while the rest render)."""
    return _sentences(text) or ([text] if text.strip() else [])
