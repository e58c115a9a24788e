"""Conversation history brought in from elsewhere: a JSONL file of messages.

One message per line, such as

    {"id": "D1:3", "speaker": "Caroline", "role": "user", "text": "…", "time": "2023-05-08T13:56Z"}

- `text` (a non-empty string, at most 100,000 characters) and `time` are required. `time` is
  ISO-8601 with `Z` or an offset; a time without one is taken as UTC, a date alone
  ("2023-05-08") as midnight UTC. It is stored in the format of every table (`db.now()`), so
  the history takes its place in time among the messages already there.
- `role` is "user" (the default) or "assistant".
- `speaker` defaults to Charlie for the assistant and, in a private channel, to its owner; in
  a shared project a person's message must say who spoke.
- `id` (a string or an integer) is the message's id where it came from; without one, a hash
  of the message stands in. Either way, importing a file again adds nothing.

A line that cannot be read is reported with its number and skipped (a blank one silently).
Rows are written in batches, each in its own transaction: an import that stops midway (a full
disk, a crash) leaves whole batches only, and running it again completes it. Nothing already
stored is changed, and imported messages are not distilled unless that is asked for.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

from charlie import conversations
from charlie import db as database
from charlie.conversations import ASSISTANT, Channel, ImportedMessage
from charlie.errors import CharlieError, DatabaseError, NotFound
from charlie.home import Home

BATCH = 1000  # rows per transaction
MAX_TEXT = 100_000  # characters of one message
MAX_LINE = 2_000_000  # characters of one line: room for MAX_TEXT written as \u escapes
MAX_PROBLEMS = 1000  # broken lines reported one by one; the rest are only counted
ROLES = ("user", "assistant")
FUTURE_SLACK = timedelta(days=1)  # clocks differ; a message from after tomorrow is refused


class BadLine(ValueError):
    """Why one line of the file cannot be imported."""


@dataclass
class ImportReport:
    added: int = 0
    already: int = 0  # messages of the file found stored (by an earlier import or the file)
    skipped: int = 0  # lines that could not be read; the first MAX_PROBLEMS are in `problems`
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)
    message_ids: list[int] = field(default_factory=list)  # of the added messages
    first_time: str | None = None  # the earliest and latest time of the file's messages
    last_time: str | None = None

    def skip(self, line: int, reason: str) -> None:
        self.skipped += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append((line, reason))


def import_jsonl(
    home: Home, channel: Channel, path: Path, *, to_memory: bool = False
) -> ImportReport:
    """Add the messages of the JSONL file at `path` to `channel`; `to_memory` marks them to
    be folded into memory by distillation (see `distill_pending`)."""
    _check_utf8(path)
    report = ImportReport()
    rows: list[ImportedMessage] = []
    try:
        with path.open(encoding="utf-8-sig", newline="\n") as handle:
            for number, line in _lines(handle):
                if line is not None and not line.strip():
                    continue
                try:
                    rows.append(_row(line, channel, to_memory, report))
                except BadLine as exc:
                    report.skip(number, str(exc))
                if len(rows) >= BATCH:
                    _store(home, rows, report)
                    rows = []
        _store(home, rows, report)
        if report.added:
            conversations.settle_imported(home, channel)
        if to_memory and report.already:  # imported before without --distill: fold in now
            conversations.distill_imported(home, channel)
    except (OSError, UnicodeDecodeError) as exc:  # the file changed or went away meanwhile
        raise CharlieError(
            f"{path} could not be read to the end ({exc}). {_so_far(report)}"
        ) from exc
    except DatabaseError as exc:
        raise type(exc)(f"{exc} {_so_far(report)}") from exc
    return report


def _so_far(report: ImportReport) -> str:
    return (
        f"{report.added:,} messages were imported before it stopped; import the file again "
        "once that is fixed: only what is missing is added."
    )


def _check_utf8(path: Path) -> None:
    """Read the whole file once before storing anything: one that is missing, unreadable or
    not UTF-8 text is refused whole, not imported up to the bad byte."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line = 1
    try:
        with path.open("rb") as raw:
            while True:
                chunk = raw.read(1 << 20)
                try:
                    decoder.decode(chunk, final=not chunk)
                except UnicodeDecodeError as exc:
                    line += chunk[: exc.start].count(b"\n")
                    raise CharlieError(
                        f"{path} is not UTF-8 text (line {line} holds bytes that are not): save "
                        "it as UTF-8 and import it again. Nothing was imported."
                    ) from exc
                if not chunk:
                    return
                line += chunk.count(b"\n")
    except FileNotFoundError as exc:
        raise NotFound(f"There is no file {path}. Nothing was imported.") from exc
    except OSError as exc:
        raise CharlieError(
            f"{path} cannot be read ({exc.strerror}). Nothing was imported."
        ) from exc


def _lines(handle: IO[str]) -> Iterator[tuple[int, str | None]]:
    """(number, line) for each line, read one at a time; None for a line too long to hold a
    message, whose rest is read past without being kept."""
    number = 0
    while line := handle.readline(MAX_LINE):
        number += 1
        if len(line) == MAX_LINE and not line.endswith("\n"):
            while (rest := handle.readline(MAX_LINE)) and not rest.endswith("\n"):
                pass
            yield number, None
        else:
            yield number, line


def _row(
    line: str | None, channel: Channel, to_memory: bool, report: ImportReport
) -> ImportedMessage:
    """The message to store for one line, or `BadLine` saying what is wrong with it."""
    if line is None:
        raise BadLine(f"longer than {MAX_LINE:,} characters")
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadLine(f"not valid JSON ({exc.msg} at column {exc.colno})") from exc
    except RecursionError as exc:
        raise BadLine("not valid JSON (nested too deeply)") from exc
    if not isinstance(item, dict):
        raise BadLine(f"not a JSON object but {kind(item)}")
    role = item.get("role", "user")
    if role not in ROLES:
        raise BadLine(f'"role" must be "user" or "assistant", not {_shown(role)}')
    text = _text(item, "text")
    if len(text) > MAX_TEXT:
        raise BadLine(f'"text" is longer than {MAX_TEXT:,} characters')
    time = _time(item.get("time"))
    owner = channel.owner
    if "speaker" in item:
        speaker = _text(item, "speaker").strip()
    elif role == "assistant":
        speaker = ASSISTANT
    elif owner is not None:
        speaker = owner.name
    else:
        raise BadLine('"speaker" is missing: in a shared project a person\'s message says who')
    source_id = _source_id(item.get("id"), speaker, role, time, text)
    report.first_time = min(time, report.first_time or time)
    report.last_time = max(time, report.last_time or time)
    return ImportedMessage(
        channel.conversation_id,
        channel.project.id if channel.project else None,
        int(channel.private),
        role,
        owner.id if owner is not None and role == "user" else None,
        speaker,
        text,
        time,
        source_id,
        int(to_memory),
    )


def _text(item: Mapping[str, object], key: str) -> str:
    value = item.get(key)
    if value is None:
        raise BadLine(f'"{key}" is missing')
    if not isinstance(value, str):
        raise BadLine(f'"{key}" must be a string, not {kind(value)}')
    if not value.strip():
        raise BadLine(f'"{key}" is empty')
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate, written as an escape (\ud800)
        piece = ascii(exc.object[exc.start : exc.end])  # shown escaped: it cannot be printed
        raise BadLine(f'"{key}" holds {piece}, which is not text') from None
    if "\x00" in value:
        raise BadLine(f'"{key}" holds a NUL character')
    return value


def _time(value: object) -> str:
    """`value` as a time in the database's format (UTC, milliseconds)."""
    example = "such as 2023-05-08T13:56:00Z"
    if value is None:
        raise BadLine(f'"time" is missing (an ISO-8601 time {example})')
    if not isinstance(value, str):
        raise BadLine(f'"time" must be an ISO-8601 string {example}, not {kind(value)}')
    try:
        parsed = datetime.fromisoformat(value.strip())
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        parsed = parsed.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise BadLine(f'"time" {_shown(value)} is not an ISO-8601 time {example}') from exc
    if parsed > datetime.now(UTC) + FUTURE_SLACK:  # it would stay "the latest" for ever
        raise BadLine(f'"time" {_shown(value)} is in the future')
    return parsed.isoformat(timespec="milliseconds")


def _source_id(value: object, speaker: str, role: str, time: str, text: str) -> str:
    if value is None:
        content = json.dumps([speaker, role, time, text], ensure_ascii=False)
        return "sha256:" + hashlib.sha256(content.encode()).hexdigest()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    raise BadLine(f'"id" must be a non-empty string or an integer, not {_shown(value)}')


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def kind(value: object) -> str:
    """What a JSON value is, in words: "an object", "a list", "a string", "a number"…"""
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false"}
    return "null" if value is None else names.get(type(value), "a number")


def _store(home: Home, rows: list[ImportedMessage], report: ImportReport) -> None:
    """Insert one batch in one transaction; a row whose id the conversation holds already
    (stored before, or earlier in the file) is left out and counted as already there."""
    if not rows:
        return
    added: list[int] = []
    with database.storage_errors(home.settings.db_path), database.transaction(home.db):
        for row in rows:
            new_id = conversations.add_imported(home, row)
            if new_id is not None:
                added.append(new_id)
    report.added += len(added)
    report.already += len(rows) - len(added)
    report.message_ids += added
