"""The three memory layers: Summary (orientation), Decisions (commitments), Recent quotes.

A shared project keeps them in `projects/<slug>/memory.md`, readable and hand-editable; a
private channel keeps them only in database rows owned by its person (`charlie.db`, or
PostgreSQL: `charlie.store`). Every change is a revision in the database, so any earlier
state can be shown or restored.

The file format, which a person may edit freely:

    # <Project name> — memory

    ## Summary
    A paragraph or two.

    ## Decisions
    - One commitment per item. _(since 2026-11-02 · distilled from messages 12, 14)_
    - A decision a person wrote. _(since 2026-11-03 · by alice)_
    - A plain line typed by hand (a decision of the person's, dated the day it was seen)

    ## Recent quotes
    - alice: "A line said in the conversation, verbatim."

    ## Earlier decisions
    - What held before. _(since 2026-11-02 · until 2026-11-20 · distilled from message 12
      · changed by message 31)_   (one line in the file)

Each decision carries its provenance in a small italic note at the end of its line: since
when it holds, who made it (`distilled` from which messages, or `by` a person, or `by hand`
for a line typed into the file) and anything the person should settle (`source forgotten:
keep or drop?`). A line without such a note is the person's own, dated the day Charlie
first saw it; a note Charlie cannot read is part of the decision's text. A decision the
conversation revised moves to "Earlier decisions", with the day it stopped holding and the
message that changed it. Text before the first section and any other `## ` sections are
kept exactly as written.

Whatever Charlie writes, it reads back: `render` writes the `normalised` form of the layers,
which `parse` returns unchanged. Normalising does what a person would expect of a form
field: whitespace inside a decision or quote collapses to one space, a `## ` heading inside
the summary becomes `### ` (so it cannot start a section), a speaker's `"` becomes `'` and
`:` becomes `-`, and a speaker is at most 60 characters (`from_person` refuses a longer one).

Who wrote what is decided by content: a restore (`undo:N`) is written by whoever wrote
revision N, so a restored hand edit is still the person's and a restored distillation is
still Charlie's (`last_charlie_revision`).
"""

from __future__ import annotations

import errno
import json
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from charlie.conversations import Channel
from charlie.db import now, placeholders
from charlie.errors import Conflict, MemoryFormatError, NotFound
from charlie.files import FileChanged, not_written, sha256_text, text_sha, write_atomic
from charlie.home import Home
from charlie.jsonvalue import JSONObject
from charlie.store import Connection
from charlie.users import User

SECTION_NAMES = {
    "summary": "summary",
    "decisions": "decisions",
    "recent quotes": "quotes",
    "earlier decisions": "earlier",
}
QUOTES_ALIASES = {"quotes": "quotes", "recent quotes": "quotes"}
MAX_SPEAKER = 60
QUOTE_RE = re.compile(rf'^[-*+]\s+(?P<speaker>[^:"]{{1,{MAX_SPEAKER}}}?)\s*:\s*(?P<text>.+?)\s*$')
ITEM_RE = re.compile(r"^(?:[-*+]|\d+[.)])\s+(?P<text>.*)$")
HEADING_RE = re.compile(r"^##\s+(.+?)\s*#*\s*$")
PLACEHOLDERS = {"_Nothing yet._", "_None yet._"}
# Who wrote a revision, by its source; `undo:N` is written by whoever wrote revision N.
PERSON_SOURCES = ("hand_edit", "edit")
CHARLIE_SOURCES = ("distill", "initial")  # Charlie's own text (a tool's write is neither)


class MemoryChanged(Conflict):
    """memory.md was saved by hand while Charlie was replacing it: the person's file stays,
    and Charlie's change was not made (a distillation merges again; a save is refused)."""


DISTILLED = "distilled"  # `by` of a decision a distillation made
HAND = "hand"  # `by` of a line typed into memory.md (who typed it is not known)
SOURCE_FORGOTTEN = "source forgotten: keep or drop?"


@dataclass(frozen=True)
class Quote:
    speaker: str
    text: str


@dataclass(frozen=True)
class Decision:
    """A commitment, with where it came from: since when it holds (`since`, a day), who
    made it (`by`: `DISTILLED`, a person's name, or `HAND`), the messages it came from, and
    anything the person should settle (`flag`)."""

    text: str
    since: str = ""
    by: str = ""
    sources: tuple[int, ...] = ()
    flag: str = ""

    def as_json(self) -> JSONObject:
        return {
            "text": self.text,
            "since": self.since,
            "by": self.by,
            "sources": list(self.sources),
            "flag": self.flag,
        }


@dataclass(frozen=True)
class Earlier:
    """A decision that no longer holds: until when, and the message that changed it (None:
    changed by hand)."""

    text: str
    since: str = ""
    by: str = ""
    sources: tuple[int, ...] = ()
    until: str = ""
    changed_by: int | None = None

    def as_json(self) -> JSONObject:
        return {
            "text": self.text,
            "since": self.since,
            "by": self.by,
            "sources": list(self.sources),
            "until": self.until,
            "changed_by": self.changed_by,
        }


@dataclass
class Memory:
    summary: str = ""
    decisions: list[Decision] = field(default_factory=list)
    quotes: list[Quote] = field(default_factory=list)
    preamble: str = ""
    extra: str = ""
    earlier: list[Earlier] = field(default_factory=list)
    # The summary's sentences Charlie wrote (None: not recorded, in a revision from before
    # they were): kept only in the history, to tell a person's sentences from Charlie's
    # (`charlie.memory.summary`); never in memory.md, never compared.
    charlie_sentences: list[str] | None = field(default=None, compare=False)

    def is_empty(self) -> bool:
        return not (self.summary or self.decisions or self.quotes or self.earlier)

    @property
    def texts(self) -> list[str]:
        """The decisions' texts."""
        return [d.text for d in self.decisions]

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> Memory:
        """A stored revision; one from before decisions had provenance holds plain texts."""
        data = json.loads(raw)
        data["quotes"] = [Quote(**q) for q in data.get("quotes", [])]
        data["decisions"] = [_decision(d) for d in data.get("decisions", [])]
        data["earlier"] = [
            Earlier(**{**e, "sources": tuple(e.get("sources") or ())})
            for e in data.get("earlier", [])
        ]
        return cls(**data)


def _decision(value: str | dict[str, Any] | Decision) -> Decision:
    if isinstance(value, Decision):
        return value
    if isinstance(value, str):
        return Decision(value)
    return Decision(**{**value, "sources": tuple(value.get("sources") or ())})


def normalise(text: str) -> str:
    """Whitespace-collapsed text, the form in which quotes and decisions are compared."""
    return " ".join(_encodable(text).split())


def _encodable(text: str) -> str:
    """`text` without lone surrogates, which cannot be written as UTF-8."""
    return text.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(text) else text


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def normalise_speaker(speaker: str) -> str:
    """A speaker as a quote line can hold it: one line, no `"` or `:`, at most 60 characters."""
    text = normalise(speaker.replace('"', "'").replace(":", "-"))
    if len(text) > MAX_SPEAKER:
        text = text[: MAX_SPEAKER - 1].rstrip() + "…"
    return text or "someone"


def _block(text: str, *, keep: bool = False) -> str:
    """A free-text block (the summary, the preamble) as `parse` reads it back: no line that
    would start a section (`## x` becomes `### x`) and, unless `keep`, no placeholder line."""
    text = _encodable(text)
    while True:
        lines = [
            f"#{line}" if HEADING_RE.match(line) else line
            for line in text.strip().splitlines()
            if keep or line.strip() not in PLACEHOLDERS
        ]
        again = "\n".join(lines).strip()
        if again == text:
            return text
        text = again


def _extra(text: str) -> str:
    """Sections of the person's own, as `parse` reads them back: they start with a heading
    of their own and hold no heading of the three layers."""
    text = _encodable(text).strip()
    if not text:
        return ""
    lines = text.splitlines()
    for number, line in enumerate(lines):
        heading = HEADING_RE.match(line)
        if heading and _section(heading.group(1)) is not None:
            lines[number] = f"#{line}"
    if not HEADING_RE.match(lines[0]):
        lines.insert(0, "## Notes")
    return "\n".join(lines).strip()


# ---------------------------------------------------------------- provenance notes

DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
NOTE_RE = re.compile(r"\s+_\((?P<note>[^()_\n]+)\)_$")
_BY_RE = re.compile(
    r"^(?:(?P<distilled>distilled)|by (?P<name>[^·()_]+?)|)"
    r"(?:(?:^| )from messages? (?P<ids>\d+(?:, \d+)*))?$"
)
FLAGS = (SOURCE_FORGOTTEN,)


def _note_parts(note: str) -> dict[str, Any] | None:
    """The fields of a provenance note (`since … · distilled from messages … · …`), or None
    when it is not one Charlie wrote (then it is part of the text)."""
    fields: dict[str, Any] = {}
    for part in (p.strip() for p in note.split("·")):
        key, _, value = part.partition(" ")
        if key in ("since", "until") and DAY_RE.fullmatch(value) and key not in fields:
            fields[key] = value
        elif part in FLAGS and "flag" not in fields:
            fields["flag"] = part
        elif part == "changed by hand" and "changed" not in fields:
            fields["changed"] = None
        elif part.startswith("changed by message ") and part[19:].isdigit():
            fields["changed"] = int(part[19:])
        elif (match := _BY_RE.match(part)) and part and "by" not in fields:
            fields["by"] = DISTILLED if match["distilled"] else (match["name"] or "")
            ids = match["ids"]
            fields["sources"] = tuple(int(i) for i in ids.split(", ")) if ids else ()
        else:
            return None
    return fields


def _split_note(item: str) -> tuple[str, dict[str, Any]]:
    """A list item's text and the fields of its provenance note (none: `{}`)."""
    found = NOTE_RE.search(item)
    if found:
        fields = _note_parts(found["note"])
        if fields is not None:
            return item[: found.start()], fields
    return item, {}


def _plain(text: str) -> str:
    """Decision text that cannot be read as carrying a note: a trailing `_(…)_` that would
    read as one loses its underscores."""
    text = normalise(text)
    while True:
        bare, fields = _split_note(text)
        if not fields:
            return text
        text = f"{bare} ({NOTE_RE.search(text)['note']})"  # type: ignore[index]


def _by(by: str) -> str:
    """`by` as a note holds it: one line, none of `·()_`, at most 60 characters."""
    text = normalise(re.sub(r"[·()_]", "-", by))[:MAX_SPEAKER].strip()
    return text


def _note(since: str, by: str, sources: tuple[int, ...], *, until: str = "", tail: str = "") -> str:
    """A provenance note: `since … · until … · distilled from messages … · tail`."""
    who = DISTILLED if by == DISTILLED else (f"by {by}" if by else "")
    if sources:
        ids = ", ".join(str(i) for i in sources)
        who = f"{who} from message{'s' if len(sources) > 1 else ''} {ids}".strip()
    parts = [f"since {since}" if since else "", f"until {until}" if until else "", who, tail]
    return " · ".join(part for part in parts if part)


def decision_line(decision: Decision) -> str:
    note = _note(decision.since, decision.by, decision.sources, tail=decision.flag)
    return f"{decision.text} _({note})_" if note else decision.text


def earlier_line(earlier: Earlier) -> str:
    changed = (
        f"changed by message {earlier.changed_by}"
        if earlier.changed_by is not None
        else "changed by hand"
    )
    note = _note(earlier.since, earlier.by, earlier.sources, until=earlier.until, tail=changed)
    return f"{earlier.text} _({note})_"


def _clean_note(since: str, by: str, sources: tuple[int, ...]) -> tuple[str, str, tuple[int, ...]]:
    day = since if DAY_RE.fullmatch(since or "") else ""
    return day, _by(by or ""), tuple(sorted({int(i) for i in sources if int(i) > 0}))


def _norm_decision(decision: Decision) -> Decision:
    since, by, sources = _clean_note(decision.since, decision.by, decision.sources)
    flag = decision.flag if decision.flag in FLAGS else ""
    return Decision(_plain(decision.text), since, by, sources, flag)


def _norm_earlier(earlier: Earlier) -> Earlier:
    since, by, sources = _clean_note(earlier.since, earlier.by, earlier.sources)
    until = earlier.until if DAY_RE.fullmatch(earlier.until or "") else ""
    changed = earlier.changed_by if earlier.changed_by and earlier.changed_by > 0 else None
    return Earlier(_plain(earlier.text), since, by, sources, until, changed)


def normalised(memory: Memory) -> Memory:
    """`memory` as it reads back from memory.md: the form every revision is stored in."""
    decisions = [_norm_decision(_decision(d)) for d in memory.decisions]  # a str: no note
    earlier = [_norm_earlier(e) for e in memory.earlier]
    quotes = [
        Quote(normalise_speaker(q.speaker), normalise(q.text).strip())
        for q in memory.quotes
        if normalise(q.text)
    ]
    return Memory(
        summary=_block(memory.summary),
        decisions=[d for d in decisions if d.text],
        quotes=quotes,
        preamble=_block(memory.preamble, keep=True),
        extra=_extra(memory.extra),
        earlier=[e for e in earlier if e.text],
        charlie_sentences=(
            None
            if memory.charlie_sentences is None
            else [normalise(s) for s in memory.charlie_sentences if normalise(s)]
        ),
    )


def from_person(
    summary: str,
    decisions: list[str],
    quotes: list[tuple[str, str]],
    current: Memory,
    person: str = HAND,
    today: str = "",
) -> Memory:
    """The layers a person typed (a form, not the file), kept with `current`'s own sections
    and earlier decisions. A decision kept as it was keeps its provenance; one typed anew
    or changed is `person`'s, since `today`.

    Raises `MemoryFormatError` for what cannot be stored as typed: a speaker over 60
    characters. Everything else is normalised (see the module docstring).
    """
    for speaker, _ in quotes:
        if len(normalise(speaker)) > MAX_SPEAKER:
            raise MemoryFormatError(
                f"The speaker {normalise(speaker)[:40]!r}… is {len(normalise(speaker))} "
                f"characters long; a speaker can be at most {MAX_SPEAKER}. Shorten it and save."
            )
    typed = [Quote(speaker.strip() or "someone", text) for speaker, text in quotes]
    known = {key(d.text): d for d in current.decisions}
    kept = [
        known.get(key(_plain(text))) or Decision(text, today, person)
        for text in decisions
        if normalise(text)
    ]
    return normalised(
        Memory(summary, kept, typed, current.preamble, current.extra, current.earlier)
    )


def key(text: str) -> str:
    """The form in which two decisions are the same decision."""
    return normalise(text).lower()


# ---------------------------------------------------------------- markdown


def render(memory: Memory, title: str) -> str:
    """memory.md for `memory`: `parse` gives back `normalised(memory)`."""
    memory = normalised(memory)
    preamble = memory.preamble or (
        f"# {title} — memory\n\n"
        "<!-- Kept by Charlie and yours to edit: your edits win. "
        "Keep the three sections below; add any others you like. -->"
    )
    parts = [preamble, "## Summary", memory.summary or "_Nothing yet._", "## Decisions"]
    parts.append("\n".join(f"- {decision_line(d)}" for d in memory.decisions) or "_None yet._")
    parts.append("## Recent quotes")
    quotes = [f'- {q.speaker}: "{q.text}"' for q in memory.quotes]
    parts.append("\n".join(quotes) or "_None yet._")
    if memory.earlier:
        parts += ["## Earlier decisions", "\n".join(f"- {earlier_line(e)}" for e in memory.earlier)]
    if memory.extra:
        parts.append(memory.extra)
    return "\n\n".join(parts) + "\n"


def as_json(memory: Memory) -> JSONObject:
    """The layers as every front end gives them: `charlie memory show --json`, the API,
    MCP's read_memory. Each decision with its provenance; `superseded`, the earlier ones."""
    return {
        "summary": memory.summary,
        "decisions": [d.as_json() for d in memory.decisions],
        "quotes": [{"speaker": q.speaker, "text": q.text} for q in memory.quotes],
        "superseded": [e.as_json() for e in memory.earlier],
    }


def as_prompt(memory: Memory, *, earlier: bool = True) -> str:
    """The layers as the model reads them: compact, without the file's preamble; with the
    earlier decisions (and when each stopped holding) when `earlier`."""
    decisions = "\n".join(f"- {d.text}" for d in memory.decisions) or "(none yet)"
    quotes = "\n".join(f'- {q.speaker}: "{q.text}"' for q in memory.quotes) or "(none yet)"
    extra = f"\n\n{memory.extra.strip()}" if memory.extra.strip() else ""
    before = ""
    if earlier and memory.earlier:
        lines = "\n".join(
            f"- {e.text} (until {e.until})" if e.until else f"- {e.text}" for e in memory.earlier
        )
        before = f"\n\n## Earlier decisions (no longer hold)\n{lines}"
    return (
        f"## Summary\n{memory.summary.strip() or '(nothing yet)'}\n\n## Decisions\n{decisions}"
        f"\n\n## Recent quotes\n{quotes}{before}{extra}"
    )


def _is_placeholder(line: str) -> bool:
    return line.strip() in PLACEHOLDERS


def _section(heading: str) -> str | None:
    """The layer a `## heading` starts, or None for a section of the person's own."""
    name = heading.strip().lower()
    return SECTION_NAMES.get(name) or QUOTES_ALIASES.get(name)


def parse(text: str) -> Memory:
    """Read memory.md. Raises `MemoryFormatError` naming the line and what to fix."""
    sections: dict[str, list[tuple[int, str]]] = {}
    preamble: list[str] = []
    extra: list[str] = []
    current: list[tuple[int, str]] | None = None
    in_extra = False
    for number, line in enumerate(text.splitlines(), start=1):
        heading = HEADING_RE.match(line)
        if heading:
            name = _section(heading.group(1))
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
    decisions = []
    for item in _parse_items(sections.get("decisions", [])):
        text, note = _split_note(item)
        decisions.append(
            _norm_decision(
                Decision(
                    text,
                    note.get("since", ""),
                    note.get("by", ""),
                    note.get("sources", ()),
                    note.get("flag", ""),
                )
            )
        )
    earlier = []
    for item in _parse_items(sections.get("earlier", [])):
        text, note = _split_note(item)
        earlier.append(
            _norm_earlier(
                Earlier(
                    text,
                    note.get("since", ""),
                    note.get("by", ""),
                    note.get("sources", ()),
                    note.get("until", ""),
                    note.get("changed"),
                )
            )
        )
    return Memory(
        summary=summary,
        decisions=[d for d in decisions if d.text],
        quotes=_parse_quotes(sections.get("quotes", [])),
        preamble="\n".join(preamble).strip(),
        extra="\n".join(extra).strip(),
        earlier=[e for e in earlier if e.text],
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
        (channel.memory_key, _owner_id(channel)),
    )
    return [_revision(row) for row in rows]


def last_revision(home: Home, channel: Channel) -> Revision | None:
    row = home.db.execute(
        "SELECT * FROM memory_revisions WHERE conversation_id = ? AND owner_id IS ? "
        "ORDER BY id DESC LIMIT 1",
        (channel.memory_key, _owner_id(channel)),
    ).fetchone()
    return _revision(row) if row else None


def _origins(home: Home, channel: Channel) -> list[tuple[int, str]]:
    """Each revision's id and the source of the text it holds, oldest first: a restore
    (`undo:N`) holds the text of revision N, so it has N's origin."""
    rows = home.db.execute(
        "SELECT id, source FROM memory_revisions WHERE conversation_id = ? AND owner_id IS ? "
        "ORDER BY id",
        (channel.memory_key, _owner_id(channel)),
    )
    origin: dict[int, str] = {}
    for row in rows:
        source = str(row["source"])
        kind, _, restored = source.partition(":")
        origin[row["id"]] = origin.get(int(restored), source) if kind == "undo" else source
    return list(origin.items())


def last_charlie_revision(home: Home, channel: Channel) -> Revision | None:
    """The newest revision whose text Charlie wrote itself: a distillation, or a restore of
    one. A person's edit, or a restore of it, is the person's; a tool's write is neither."""
    charlie = [i for i, origin in _origins(home, channel) if origin in CHARLIE_SOURCES]
    if not charlie:
        return None
    row = home.db.execute("SELECT * FROM memory_revisions WHERE id = ?", (charlie[-1],))
    return _revision(row.fetchone())


def _add_revision(
    home: Home, channel: Channel, memory: Memory, source: str, file_sha: str | None
) -> Revision:
    created = now()
    added = _insert(home, channel, source, memory.to_json(), file_sha, created)
    return Revision(added, source, memory, created, file_sha)


def _insert(
    home: Home, channel: Channel, source: str, layers: str, file_sha: str | None, created: str
) -> int:
    cursor = home.db.execute(
        "INSERT INTO memory_revisions (conversation_id, owner_id, source, layers, file_sha256, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (channel.memory_key, _owner_id(channel), source, layers, file_sha, created),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def rewrite_revision(home: Home, revision_id: int, memory: Memory) -> None:
    """Store `memory` as what revision `revision_id` holds: for forgetting a message, whose
    words no revision may keep. Nothing else rewrites history."""
    home.db.execute(
        "UPDATE memory_revisions SET layers = ? WHERE id = ?", (memory.to_json(), revision_id)
    )


@contextmanager
def writing(home: Home) -> Iterator[None]:
    """Hold the database's write lock for a change of memory: the file and its revision are
    written together, and a check made inside holds until the change is done. Inside a
    transaction already (a distillation's), it simply joins it."""
    if home.db.in_transaction:
        yield
        return
    home.db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        home.db.execute("ROLLBACK")
        raise
    home.db.execute("COMMIT")


def read_file_text(channel: Channel) -> str | None:
    """The raw memory.md of a shared channel, or None when it does not exist yet.

    A memory.md that is a symbolic link is never read (it could lead to any file the server
    can read), and so never written either: every write reads the file first."""
    assert channel.project is not None
    path = channel.project.memory_path
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise MemoryFormatError(
                f"{path} is a symbolic link; Charlie does not follow links (one could lead "
                "anywhere on this computer): put the file itself there instead."
            ) from exc
        raise
    try:
        with open(fd, encoding="utf-8") as handle:  # universal newlines, as files.text_sha
            return handle.read()
    except UnicodeDecodeError as exc:
        raise MemoryFormatError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8."
        ) from exc


def _today() -> str:
    return now()[:10]


def with_provenance(home: Home, channel: Channel, memory: Memory) -> Memory:
    """`memory` with every decision's provenance known. One read back without a note (a
    line typed into memory.md, or a memory written before decisions had notes) takes the
    provenance the memory last recorded for it; else the day it first appears in the
    history, `distilled` if Charlie wrote it; else it is the person's, since today. A
    distilled decision whose text a person changed (the note kept) is theirs from today."""
    last = last_revision(home, channel)
    known = {key(d.text): d for d in last.memory.decisions} if last else {}
    history: dict[str, Decision] | None = None
    filled: list[Decision] = []
    for decision in memory.decisions:
        recorded = known.get(key(decision.text))
        if recorded is not None and (recorded.since or recorded.by):
            # What the memory recorded wins over a note the file still shows; the flag is
            # the file's (a person settles it by deleting it).
            filled.append(replace(recorded, text=decision.text, flag=decision.flag))
            continue
        if decision.since or decision.by:
            if decision.by == DISTILLED and last is not None:
                decision = replace(decision, since=_today(), by=HAND)  # its text edited by hand
            filled.append(decision)
            continue
        if history is None:
            history = _first_seen(home, channel)
        filled.append(history.get(key(decision.text)) or replace(decision, since=_today(), by=HAND))
    return replace(memory, decisions=filled)


def _first_seen(home: Home, channel: Channel) -> dict[str, Decision]:
    """Each decision's text (by key) as it first appears in the revisions: that day, and
    `distilled` when Charlie wrote that revision."""
    origins = dict(_origins(home, channel))
    first: dict[str, Decision] = {}
    for revision in reversed(revisions(home, channel)):
        by = DISTILLED if origins.get(revision.id) in CHARLIE_SOURCES else HAND
        for decision in revision.memory.decisions:
            first.setdefault(
                key(decision.text), Decision(decision.text, revision.created_at[:10], by)
            )
    return first


def sync_hand_edits(home: Home, channel: Channel) -> Revision | None:
    """Record a hand edit of memory.md as a revision; return it, or None if unchanged.

    Raises `MemoryFormatError` when the edited file cannot be read as memory: the file is
    left exactly as the person wrote it.
    """
    if channel.private or not _edited(home, channel):
        return None
    with writing(home):  # check again under the lock: another process may have recorded it
        if not _edited(home, channel):
            return None
        text = read_file_text(channel)
        assert text is not None
        memory = parse(text)
        if last_revision(home, channel) is None and memory.is_empty():
            return None
        memory = with_provenance(home, channel, memory)
        return _add_revision(home, channel, memory, "hand_edit", sha256_text(text))


def _edited(home: Home, channel: Channel) -> bool:
    """Whether memory.md differs from what its last revision recorded."""
    text = read_file_text(channel)
    last = last_revision(home, channel)
    return text is not None and (last is None or last.file_sha256 != sha256_text(text))


def load(home: Home, channel: Channel) -> Memory:
    """The channel's current memory, hand edits of memory.md included."""
    if channel.private:
        last = last_revision(home, channel)
        return with_provenance(home, channel, normalised(last.memory)) if last else Memory()
    text = read_file_text(channel)
    if text is None:
        return Memory()
    return with_provenance(home, channel, parse(text))


def save(home: Home, channel: Channel, memory: Memory, source: str) -> Revision:
    """Store `memory` (normalised) as the channel's new state: a revision, plus memory.md
    when shared, both or neither.

    A hand edit made since Charlie last wrote is recorded first, so it is never lost.
    """
    memory = normalised(memory)
    with writing(home):
        if channel.private:
            return _add_revision(home, channel, memory, source, None)
        assert channel.project is not None
        sync_hand_edits(home, channel)
        path = channel.project.memory_path
        last = last_revision(home, channel)  # the file as last recorded, hand edits synced
        seen = last.file_sha256 if last is not None and last.file_sha256 else text_sha(path)
        text = render(memory, channel.project.config.name)
        revision = _add_revision(home, channel, memory, source, sha256_text(text))
        try:
            write_atomic(path, text, replaces=seen)
        except FileChanged as exc:
            raise MemoryChanged(
                f"{path} was saved by hand while Charlie was writing it; your edit is kept "
                "as it is. Reload the memory and make the change again."
            ) from exc
        except OSError as exc:
            raise not_written(exc, path) from exc
        return revision


def undo(home: Home, channel: Channel, to: int | None = None) -> Revision:
    """Restore the revision before the current one (or revision `to`) as a new revision,
    `undo:<id>`: its text stays the work of whoever wrote revision `id`."""
    with writing(home):
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


def put_back(channel: Channel, written_sha: str | None, before: str | None) -> None:
    """Undo a write of memory.md whose revision was not recorded (the transaction failed
    after the file was written): put back `before`, unless the file no longer holds what
    was written (a hand edit since, which must stay). Raises `OSError` if it cannot."""
    if channel.project is None or written_sha is None:
        return
    now_text = read_file_text(channel)
    if now_text is None or sha256_text(now_text) != written_sha:
        return
    if before is None:
        channel.project.memory_path.unlink()
    else:
        write_atomic(channel.project.memory_path, before)


def ensure_file(home: Home, channel: Channel) -> None:
    """Give a shared project an (empty) memory.md to look at and edit."""
    if channel.project is not None and not channel.project.memory_path.exists():
        save(home, channel, Memory(), "initial")


# ---------------------------------------------------------------- archives, removal


def stored_revisions(home: Home, threads: Sequence[int]) -> list[JSONObject]:
    """Every revision kept for the threads `threads`, oldest first: every column as stored,
    for an archive (`charlie.transfer.export`)."""
    rows = home.db.execute(
        f"SELECT * FROM memory_revisions WHERE conversation_id IN ({placeholders(threads)}) "
        "ORDER BY id",
        list(threads),
    )
    return [dict(row) for row in rows]


def add_restored_revision(
    home: Home,
    channel: Channel,
    source: str,
    layers: str,
    file_sha256: str | None,
    created_at: str,
) -> int:
    """Store a revision of the channel's memory that an archive kept, as it was written then
    (its layers as their JSON text, its time); its id here."""
    return _insert(home, channel, source, layers, file_sha256, created_at)


def any_revision(home: Home) -> bool:
    """Whether any memory, in any project or channel, has a revision yet."""
    return home.db.execute("SELECT 1 FROM memory_revisions LIMIT 1").fetchone() is not None


def count_revisions_in(db: Connection, threads: Sequence[int]) -> int:
    """How many revisions the memories of the threads `threads` keep."""
    (count,) = db.execute(
        f"SELECT count(*) FROM memory_revisions WHERE conversation_id IN ({placeholders(threads)})",
        list(threads),
    ).fetchone()
    return int(count)


def delete_revisions_in(db: Connection, threads: Sequence[int]) -> None:
    """Delete the revisions of the threads' memories (their distillations went first)."""
    db.execute(
        f"DELETE FROM memory_revisions WHERE conversation_id IN ({placeholders(threads)})",
        list(threads),
    )


def detach_revisions(db: Connection, user: User) -> None:
    """Leave the revisions `user` made tied to no account (they are being removed)."""
    db.execute("UPDATE memory_revisions SET owner_id = NULL WHERE owner_id = ?", (user.id,))
