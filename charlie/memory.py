"""The three memory layers: Summary (orientation), Decisions (commitments), Recent quotes.

A shared project keeps them in `projects/<slug>/memory.md`, readable and hand-editable; a
private channel keeps them only in SQLite rows owned by its person. Every change is a
revision in SQLite, so any earlier state can be shown or restored.

The file format, which a person may edit freely:

    # <Project name> — memory

    ## Summary
    A paragraph or two.

    ## Decisions
    - One commitment per item.

    ## Recent quotes
    - alice: "A line said in the conversation, verbatim."

Text before the first section and any other `## ` sections are kept exactly as written.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import asdict, dataclass, field

from charlie.conversations import Channel
from charlie.db import now
from charlie.errors import MemoryFormatError, NotFound
from charlie.files import sha256_text, write_atomic
from charlie.home import Home

SECTION_NAMES = {"summary": "summary", "decisions": "decisions", "recent quotes": "quotes"}
QUOTES_ALIASES = {"quotes": "quotes", "recent quotes": "quotes"}
QUOTE_RE = re.compile(r'^[-*+]\s+(?P<speaker>[^:"]{1,60}?)\s*:\s*(?P<text>.+?)\s*$')
ITEM_RE = re.compile(r"^(?:[-*+]|\d+[.)])\s+(?P<text>.*)$")


@dataclass(frozen=True)
class Quote:
    speaker: str
    text: str


@dataclass
class Memory:
    summary: str = ""
    decisions: list[str] = field(default_factory=list)
    quotes: list[Quote] = field(default_factory=list)
    preamble: str = ""
    extra: str = ""

    def is_empty(self) -> bool:
        return not (self.summary or self.decisions or self.quotes)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> Memory:
        data = json.loads(raw)
        data["quotes"] = [Quote(**q) for q in data.get("quotes", [])]
        return cls(**data)


def normalise(text: str) -> str:
    """Whitespace-collapsed text, the form in which quotes and decisions are compared."""
    return " ".join(text.split())


# ---------------------------------------------------------------- markdown


def render(memory: Memory, title: str) -> str:
    preamble = memory.preamble.strip() or (
        f"# {title} — memory\n\n"
        "<!-- Kept by Charlie and yours to edit: your edits win. "
        "Keep the three sections below; add any others you like. -->"
    )
    parts = [preamble, "## Summary", memory.summary.strip() or "_Nothing yet._", "## Decisions"]
    parts.append("\n".join(f"- {normalise(d)}" for d in memory.decisions) or "_None yet._")
    parts.append("## Recent quotes")
    quotes = [f'- {q.speaker}: "{normalise(q.text)}"' for q in memory.quotes]
    parts.append("\n".join(quotes) or "_None yet._")
    if memory.extra.strip():
        parts.append(memory.extra.strip())
    return "\n\n".join(parts) + "\n"


def as_prompt(memory: Memory) -> str:
    """The layers as the model reads them: compact, without the file's preamble."""
    decisions = "\n".join(f"- {d}" for d in memory.decisions) or "(none yet)"
    quotes = "\n".join(f'- {q.speaker}: "{q.text}"' for q in memory.quotes) or "(none yet)"
    extra = f"\n\n{memory.extra.strip()}" if memory.extra.strip() else ""
    return (
        f"## Summary\n{memory.summary.strip() or '(nothing yet)'}\n\n## Decisions\n{decisions}"
        f"\n\n## Recent quotes\n{quotes}{extra}"
    )


def _is_placeholder(line: str) -> bool:
    return line.strip() in {"_Nothing yet._", "_None yet._"}


def parse(text: str) -> Memory:
    """Read memory.md. Raises `MemoryFormatError` naming the line and what to fix."""
    sections: dict[str, list[tuple[int, str]]] = {}
    preamble: list[str] = []
    extra: list[str] = []
    current: list[tuple[int, str]] | None = None
    in_extra = False
    for number, line in enumerate(text.splitlines(), start=1):
        heading = re.match(r"^##\s+(.+?)\s*#*\s*$", line)
        if heading:
            name = SECTION_NAMES.get(heading.group(1).strip().lower()) or QUOTES_ALIASES.get(
                heading.group(1).strip().lower()
            )
            if name is None:
                in_extra, current = True, None
                extra.append(line)
                continue
            if name in sections:
                raise MemoryFormatError(
                    f"memory.md line {number}: a second '## {heading.group(1)}' section. "
                    "Merge the two into one and save the file."
                )
            in_extra, current = False, []
            sections[name] = current
        elif current is not None:
            current.append((number, line))
        elif in_extra:
            extra.append(line)
        else:
            preamble.append(line)

    summary = "\n".join(
        line for _, line in sections.get("summary", []) if not _is_placeholder(line)
    ).strip()
    return Memory(
        summary=summary,
        decisions=_parse_items(sections.get("decisions", [])),
        quotes=_parse_quotes(sections.get("quotes", [])),
        preamble="\n".join(preamble).strip(),
        extra="\n".join(extra).strip(),
    )


def _parse_items(lines: list[tuple[int, str]]) -> list[str]:
    """List items; an indented or plain continuation line joins the item above it."""
    items: list[str] = []
    for _, line in lines:
        if not line.strip() or _is_placeholder(line):
            continue
        match = ITEM_RE.match(line.strip())
        if match and not line.startswith((" ", "\t")):
            items.append(match.group("text").strip())
        elif items and line.startswith((" ", "\t")):
            items[-1] = f"{items[-1]} {line.strip()}"
        else:
            items.append(line.strip())
    return [normalise(item) for item in items if item.strip()]


def _parse_quotes(lines: list[tuple[int, str]]) -> list[Quote]:
    quotes: list[Quote] = []
    for number, line in lines:
        if not line.strip() or _is_placeholder(line):
            continue
        match = QUOTE_RE.match(line.strip())
        if not match:
            raise MemoryFormatError(
                f"memory.md line {number}: {line.strip()[:60]!r} is not a quote. Write quotes "
                'as `- speaker: "what they said"`, one per line, and save the file.'
            )
        text = match.group("text").strip()
        if len(text) >= 2 and text[0] in '"“' and text[-1] in '"”':
            text = text[1:-1]
        quotes.append(Quote(match.group("speaker").strip(), normalise(text)))
    return quotes


# ---------------------------------------------------------------- storage


@dataclass(frozen=True)
class Revision:
    id: int
    source: str
    memory: Memory
    created_at: str
    file_sha256: str | None


def _revision(row: sqlite3.Row) -> Revision:
    return Revision(
        row["id"],
        row["source"],
        Memory.from_json(row["layers"]),
        row["created_at"],
        row["file_sha256"],
    )


def _owner_id(channel: Channel) -> int | None:
    return channel.owner.id if channel.owner else None


def revisions(home: Home, channel: Channel) -> list[Revision]:
    """Every revision of the channel's memory, newest first."""
    rows = home.db.execute(
        "SELECT * FROM memory_revisions WHERE conversation_id = ? AND owner_id IS ? "
        "ORDER BY id DESC",
        (channel.conversation_id, _owner_id(channel)),
    )
    return [_revision(row) for row in rows]


def last_revision(home: Home, channel: Channel) -> Revision | None:
    row = home.db.execute(
        "SELECT * FROM memory_revisions WHERE conversation_id = ? AND owner_id IS ? "
        "ORDER BY id DESC LIMIT 1",
        (channel.conversation_id, _owner_id(channel)),
    ).fetchone()
    return _revision(row) if row else None


def last_charlie_revision(home: Home, channel: Channel) -> Revision | None:
    """The newest revision Charlie wrote (not a person's edit)."""
    row = home.db.execute(
        "SELECT * FROM memory_revisions WHERE conversation_id = ? AND owner_id IS ? "
        "AND source NOT IN ('hand_edit', 'edit') ORDER BY id DESC LIMIT 1",
        (channel.conversation_id, _owner_id(channel)),
    ).fetchone()
    return _revision(row) if row else None


def _add_revision(
    home: Home, channel: Channel, memory: Memory, source: str, file_sha: str | None
) -> Revision:
    created = now()
    cursor = home.db.execute(
        "INSERT INTO memory_revisions (conversation_id, owner_id, source, layers, file_sha256, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (channel.conversation_id, _owner_id(channel), source, memory.to_json(), file_sha, created),
    )
    assert cursor.lastrowid is not None
    return Revision(cursor.lastrowid, source, memory, created, file_sha)


def read_file_text(channel: Channel) -> str | None:
    """The raw memory.md of a shared channel, or None when it does not exist yet."""
    assert channel.project is not None
    path = channel.project.memory_path
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise MemoryFormatError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8."
        ) from exc


def sync_hand_edits(home: Home, channel: Channel) -> Revision | None:
    """Record a hand edit of memory.md as a revision; return it, or None if unchanged.

    Raises `MemoryFormatError` when the edited file cannot be read as memory: the file is
    left exactly as the person wrote it.
    """
    if channel.private:
        return None
    text = read_file_text(channel)
    last = last_revision(home, channel)
    if text is None or (last is not None and last.file_sha256 == sha256_text(text)):
        return None
    memory = parse(text)
    if last is None and memory.is_empty():
        return None
    return _add_revision(home, channel, memory, "hand_edit", sha256_text(text))


def load(home: Home, channel: Channel) -> Memory:
    """The channel's current memory, hand edits of memory.md included."""
    if channel.private:
        last = last_revision(home, channel)
        return last.memory if last else Memory()
    text = read_file_text(channel)
    if text is None:
        return Memory()
    return parse(text)


def save(home: Home, channel: Channel, memory: Memory, source: str) -> Revision:
    """Store `memory` as the channel's new state: a revision, plus memory.md when shared.

    A hand edit made since Charlie last wrote is recorded first, so it is never lost.
    """
    if channel.private:
        return _add_revision(home, channel, memory, source, None)
    assert channel.project is not None
    sync_hand_edits(home, channel)
    text = render(memory, channel.project.config.name)
    sha = write_atomic(channel.project.memory_path, text)
    return _add_revision(home, channel, memory, source, sha)


def undo(home: Home, channel: Channel, to: int | None = None) -> Revision:
    """Restore the revision before the current one (or revision `to`) as a new revision."""
    if not channel.private:
        sync_hand_edits(home, channel)
    history = revisions(home, channel)
    if to is None:
        if len(history) < 2:
            raise NotFound(f"There is no earlier memory to go back to in {channel.label}.")
        target = history[1]
    else:
        matches = [r for r in history if r.id == to]
        if not matches:
            raise NotFound(
                f"There is no revision {to} in {channel.label}; see `charlie memory history`."
            )
        target = matches[0]
    return save(home, channel, target.memory, f"undo:{target.id}")


def ensure_file(home: Home, channel: Channel) -> None:
    """Give a shared project an (empty) memory.md to look at and edit."""
    if channel.project is not None and not channel.project.memory_path.exists():
        save(home, channel, Memory(), "initial")
