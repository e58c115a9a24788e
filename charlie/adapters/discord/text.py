"""What Charlie writes into Discord: messages cut to Discord's limit, compact trace lines.

Plain text in, plain text out: nothing here imports discord.py, so all of it is tested
without a client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import assert_never

from charlie.llm.client import preview
from charlie.trace import Called, Loaded, Moded, Preloaded, Step, Stopped

LIMIT = 2000  # characters in one Discord message
FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
MAX_TRACE_LINES = 6


def length(text: str) -> int:
    """The length as Discord's client counts it at worst (UTF-16 code units): an emoji
    counts twice, so a part never comes back refused for being a character too long."""
    return len(text.encode("utf-16-le")) // 2


@dataclass
class _Segment:
    lines: list[str]
    fence: str | None = None  # the opening fence line of a code block

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _closes(line: str, opener: str) -> bool:
    """Whether `line` closes a block opened with `opener` (same character, at least as
    many, nothing after it but spaces)."""
    match = FENCE_RE.match(line)
    if match is None:
        return False
    fence = match.group(1)
    return fence[0] == opener[0] and len(fence) >= len(opener) and not line[match.end() :].strip()


def _segments(text: str) -> list[_Segment]:
    """Paragraphs (split after blank lines) and whole fenced code blocks, in order."""
    segments: list[_Segment] = []
    prose: list[str] = []
    code: _Segment | None = None
    closer = ""
    for line in text.split("\n"):
        if code is not None:
            code.lines.append(line)
            if _closes(line, closer):
                segments.append(code)
                code = None
            continue
        match = FENCE_RE.match(line)
        if match:
            if prose:
                segments.append(_Segment(prose))
                prose = []
            closer = match.group(1)
            code = _Segment([line], fence=line)
            continue
        prose.append(line)
        if not line.strip() and any(p.strip() for p in prose):
            segments.append(_Segment(prose))
            prose = []
    if code is not None:
        segments.append(code)
    if prose:
        segments.append(_Segment(prose))
    return segments


def _hard_cut(line: str, limit: int) -> list[str]:
    """A line longer than `limit`, cut at the last space that fits (else anywhere)."""
    pieces = []
    while length(line) > limit:
        cut = limit
        while length(line[:cut]) > limit:
            cut -= 1
        space = line.rfind(" ", 0, cut + 1)
        if space > limit // 2:
            cut = space
        pieces.append(line[:cut].rstrip())
        line = line[cut:].lstrip(" ")
    pieces.append(line)
    return pieces


def _pack(lines: list[str], limit: int) -> list[str]:
    """Lines joined greedily into pieces of at most `limit`."""
    pieces: list[str] = []
    current: str | None = None
    for line in lines:
        for piece in _hard_cut(line, limit):
            joined = piece if current is None else f"{current}\n{piece}"
            if length(joined) <= limit:
                current = joined
            else:
                if current is not None:
                    pieces.append(current)
                current = piece
    if current is not None:
        pieces.append(current)
    return pieces


def _split_code(segment: _Segment, limit: int) -> list[str]:
    """A code block too long for one message: each piece closes the fence and the next one
    re-opens it with the same language, so every piece renders as code."""
    assert segment.fence is not None
    opener = segment.fence.strip()
    marker = FENCE_RE.match(segment.fence)
    assert marker is not None
    closer = marker.group(1)
    body = segment.lines[1:]
    if body and _closes(body[-1], closer):
        body = body[:-1]
    budget = limit - length(opener) - length(closer) - 2
    return [f"{opener}\n{piece}\n{closer}" for piece in _pack(body, budget)]


def split(text: str, limit: int = LIMIT) -> list[str]:
    """`text` in parts of at most `limit` characters, cut between paragraphs where it can,
    else between lines, else between words — and never inside a code block: a block that
    does not fit in one message is closed and re-opened across parts."""
    parts: list[str] = []
    current = ""

    def flush() -> None:
        nonlocal current
        if current.strip():
            parts.append(current.strip("\n"))
        current = ""

    for segment in _segments(text):
        chunk = segment.text
        joined = f"{current}\n{chunk}" if current else chunk
        if length(joined.strip("\n")) <= limit:
            current = joined
            continue
        if segment.fence is None and length(chunk.strip("\n")) > limit:
            # A paragraph too long for any message: fill this part up, then cut between
            # lines (or words). `current` fits, so it stays whole in the first piece.
            pieces = _pack(joined.strip("\n").split("\n"), limit)
        else:
            flush()
            if length(chunk.strip("\n")) <= limit:
                current = chunk
                continue
            pieces = _split_code(segment, limit)
        parts.extend(p for p in pieces[:-1] if p.strip())
        current = pieces[-1]
    flush()
    return parts


# ---------------------------------------------------------------- the tool trace

_VERBS: dict[str, tuple[str, str | None]] = {
    "search_notes": ("searched notes for {}", "query"),
    "read_note": ("read note {}", "note"),
    "read_memory": ("read the memory", None),
    "search_conversation": ("searched the conversation for {}", "query"),
    "create_note": ("created note {}", "title"),
    "append_to_note": ("added to note {}", "note"),
    "tag_note": ("tagged note {}", "note"),
    "record_decision": ("recorded a decision", None),
    "list_projects": ("listed the projects", None),
    "switch_project": ("looked into project {}", "project"),
    "now": ("checked the date", None),
    "date_add": ("counted days", None),
    "days_between": ("counted days", None),
}


def _quoted(value: object) -> str:
    return f"'{preview(str(value), 60)}'"


def trace_line(step: Step) -> str | None:
    """One short line for a step of the tool loop, e.g. "searched notes for 'JWT refresh'
    → 3 notes"; None for steps not worth a line."""
    match step:
        case Preloaded() | Moded():
            return None
        case Loaded(category=category, ok=ok):
            return f"loaded the {category} tools" if ok else None
        case Stopped(guard=guard, detail=detail):
            return f"stopped: {detail or guard}"
        case Called():
            return _call_line(step)
        case _:
            assert_never(step)


def _call_line(step: Called) -> str:
    arguments = step.arguments if isinstance(step.arguments, dict) else {}
    verb, key = _VERBS.get(step.name, (f"{step.name} {{}}", None))
    if key is not None and key in arguments:
        action = verb.format(_quoted(arguments[key]))
    elif "{}" in verb:
        action = verb.format("").strip()
    else:
        action = verb
    summary = preview(step.summary, 80)
    mark = "" if step.ok else "✗ "
    return f"{mark}{action} → {summary}" if summary else f"{mark}{action}"


def trace_block(steps: list[Step]) -> str:
    """The trace lines as Discord subtext (small grey lines), at most MAX_TRACE_LINES."""
    lines = [line for line in (trace_line(step) for step in steps) if line]
    if not lines:
        return ""
    shown = lines[:MAX_TRACE_LINES]
    if len(lines) > len(shown):
        shown.append(f"… and {len(lines) - len(shown)} more steps")
    return "\n".join(f"-# {line}" for line in shown)
