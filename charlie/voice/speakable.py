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
FENCE_LINE = re.compile(r"^\s*(```|~~~)", re.M)
TABLE_ROW_START = re.compile(r"^\s*\|")
SETTLED_END = re.compile(r"[.!?…][\"')\]]*\s")
STRAY_MARKS = re.compile(r"\*\*|__|~~|(?<!\w)\*|\*(?!\w)")
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
    """One line as a sentence of its own: a line is a unit of meaning in markdown (a list
    item, a line before a code block), and a listener needs the pause."""
    text = BULLET.sub("", QUOTE.sub("", text)).strip()
    if text and text[-1] in ":;,":
        text = text[:-1].rstrip()
    if text and text[-1] not in ".!?…":
        text += "."
    return text


def speakable(markdown: str, max_sentences: int = 3, max_chars: int = 450) -> str:
    """A short, speakable version of `markdown` (never empty while there is text)."""
    sentences, left_out = _parts(markdown)
    if not sentences:
        return MORE if markdown.strip() else ""
    kept = sentences[:max_sentences]
    left_out = left_out or len(sentences) > len(kept)
    spoken = " ".join(kept)
    if len(spoken) > max_chars:
        left_out = True
        spoken = _cut(spoken, max_chars)
    if left_out:
        spoken = f"{spoken} {MORE}"
    return spoken


def _parts(markdown: str) -> tuple[list[str], bool]:
    """Every speakable sentence of `markdown`, and whether something was left out."""
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
    text = STRAY_MARKS.sub("", text)  # emphasis never closed
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    text = re.sub(r"([.!?])\.+", r"\1", text)
    return (_sentences(text) if text else []), left_out


class Unfolding:
    """The spoken reply of an answer that is still streaming: each sentence is handed out as
    soon as it is complete, so speech can start long before the model has finished.

    Only text that can no longer change how it is spoken counts: whole lines, and the whole
    sentences of the line being written — never the inside of an unfinished code block or
    table row. `finish` gives what is left once the answer is complete.
    """

    def __init__(self, max_sentences: int = 3, max_chars: int = 450) -> None:
        self.max_sentences, self.max_chars = max_sentences, max_chars
        self.text = ""
        self.said: list[str] = []
        self.chars = 0
        self.full = False  # the limits are reached: the rest waits for `finish`
        self.settled = 0  # length of the settled text last parsed

    def add(self, piece: str) -> list[str]:
        """New sentences ready to speak, after `piece` of the answer arrived."""
        self.text += piece
        if self.full:
            return []
        settled = _settled(self.text)
        if len(settled) == self.settled:
            return []  # nothing new has settled (inside a code block, say): no re-parse
        self.settled = len(settled)
        ready = []
        sentences, _ = _parts(settled)
        for sentence in sentences[len(self.said) :]:
            if len(self.said) >= self.max_sentences or self.chars + len(sentence) > self.max_chars:
                self.full = True
                break
            self.said.append(sentence)
            self.chars += len(sentence) + 1
            ready.append(sentence)
        return ready

    def finish(self, answer: str) -> tuple[str, list[str]]:
        """(everything spoken for this answer, the sentences still to speak)."""
        final = sentences_of(speakable(answer, self.max_sentences, self.max_chars))
        said = set(self.said)
        rest = [sentence for sentence in final if sentence not in said]
        return " ".join(self.said + rest), rest


def _settled(text: str) -> str:
    """The part of a streaming answer whose spoken form is final."""
    fences = list(FENCE_LINE.finditer(text))
    if len(fences) % 2:  # inside a code block: nothing from it on
        text = text[: fences[-1].start()]
    head, newline, line = text.rpartition("\n")
    if TABLE_ROW_START.match(line) or HEADING.match(line):
        return head + newline
    ends = [
        m.end()
        for m in SETTLED_END.finditer(line)
        if not line[: m.end()].rstrip().endswith(ABBREVIATIONS)
    ]
    return head + newline + (line[: ends[-1]] if ends else "")


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
