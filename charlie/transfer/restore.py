"""Restoring an archive written by `charlie export` (`charlie.transfer.export`) into a data home.

Every file was checked against the manifest when the archive was opened, before anything is
written. Then each project's files are written where nothing is (a file already there is kept
and named), and each thread comes back with its messages, pins and suggestions: a message's
thread, speaker, account, times, images, trace, flags and branch are kept, and restoring
again adds nothing (threads are matched by the id of the conversation they were imported
from, else by their creation time; messages by their source id, else by time, speaker and
words). People are found by name; an account is made, without a password, for anyone the
home does not have yet, and the result names them. A private channel is written only when
the archive's exporter is its owner and the home has no account of that name yet, unless
the person restoring names its owner (`private_owner`): an archive's manifest can be
rewritten, and a private channel holds someone's own words. Memory revisions are restored into a
memory that has none; usage events are added once. Archives written before threads
(format 1, one conversation per project) restore too.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from charlie import conversations
from charlie import db as database
from charlie.conversations import (
    ASSISTANT,
    Channel,
    Holder,
    ImportedMessage,
    private_channel,
    shared_channel,
)
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.memory import layers as memory
from charlie.projects import get_project, validate_slug
from charlie.retrieval import suggestions, usage
from charlie.trace import steps_from_json
from charlie.transfer.export import THREAD_OWN, THREAD_SKIPPED, Archive, is_empty
from charlie.users import NAME_RE, ensure_user, find_user, get_user

BATCH = 2000  # rows written per transaction
UNDO_RE = re.compile(r"^undo:(\d+)$")


@dataclass
class RestoreResult:
    projects: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)  # everyone the archive names
    new_users: list[str] = field(default_factory=list)  # accounts made, without a password
    threads: int = 0  # threads made
    messages: int = 0
    already: int = 0  # messages found stored already
    revisions: int = 0
    usage_events: int = 0
    pins: int = 0
    suggestions: int = 0
    files: int = 0
    skipped: list[str] = field(default_factory=list)  # what was kept as it was, and why
    private: str | None = None  # whose private channel was written
    private_messages: int = 0  # messages written into it


def channel_owner(archive: Archive) -> str | None:
    """Whose private channel `archive` holds, if any."""
    owner = archive.manifest.get("private")
    return owner if isinstance(owner, str) and NAME_RE.match(owner) else None


def check_private(home: Home, archive: Archive, confirmed: str | None) -> None:
    """Refuse to write a private channel whose owner is not plainly the one restoring it:
    one exported by someone else, or one for a person this home already has (the restore
    would put words in their channel as their own), unless `confirmed` names its owner."""
    owner = channel_owner(archive)
    if owner is None or (confirmed or "").casefold() == owner.casefold():
        return
    if confirmed is not None:
        raise CharlieError(
            f"This archive holds {owner}'s private channel, not {confirmed}'s. Nothing was written."
        )
    exporter = archive.manifest.get("exported_by")
    redo = (
        f"If you know it is {owner}'s own, restore again with --private-owner {owner}; "
        "or add --without-private to restore everything else."
    )
    if not isinstance(exporter, str) or exporter.casefold() != owner.casefold():
        raise CharlieError(
            f"This archive holds {owner}'s private channel, but its manifest says "
            f"{exporter!r} exported it, and only its owner can export a private channel: the "
            f"archive may have been altered. Nothing was written. {redo}"
        )
    if find_user(home.db, owner) is not None:
        raise CharlieError(
            f"This archive would write into {owner}'s private channel, and {owner} has an "
            f"account in this home: what it holds would appear there as {owner}'s own words. "
            f"Nothing was written. {redo}"
        )


def restore_archive(
    home: Home,
    archive: Archive,
    *,
    merge: bool = False,
    private_owner: str | None = None,
    without_private: bool = False,
) -> RestoreResult:
    """Bring the checked `archive` into `home`. Without `merge` the home must be empty; with
    it, nothing already there is replaced: existing files and memories are kept and listed
    in `skipped`, and threads and messages already stored are not added again. Its private
    channel is written only as `check_private` allows (`private_owner` names its owner to
    confirm it); `without_private` leaves it out."""
    if not merge and not is_empty(home):
        raise CharlieError(
            f"The data home {home.settings.home} already holds projects or messages. Restore "
            "into an empty one (set CHARLIE_HOME to a new folder), or add --merge to bring "
            "the archive in beside what is there (nothing there is replaced)."
        )
    owner = None if without_private else channel_owner(archive)
    if owner is not None:
        check_private(home, archive, private_owner)
    result = RestoreResult()
    manifest = archive.manifest
    names = set(archive.names())
    with zipfile.ZipFile(archive.path) as zipped:
        source = _Source(zipped, names)
        people = _People(home, result)
        for name in dict.fromkeys([*manifest.get("users", []), owner]):
            if isinstance(name, str) and NAME_RE.match(name):
                people.id(name)
                result.users.append(name)
        for slug in manifest.get("projects", []):
            validate_slug(slug)
            result.files += _restore_files(home, source, slug, result.skipped)
            project = get_project(home, slug)
            holder = Holder(project.id, None)
            _restore_threads(home, source, holder, f"conversations/{slug}", people, result)
            channel = shared_channel(home, project)
            _restore_revisions(home, source, channel, f"memory_revisions/{slug}.jsonl", result)
            result.projects.append(slug)
        if owner is not None:
            user = get_user(home.db, owner)
            base = f"private/{owner}"
            before = result.messages
            _restore_threads(home, source, Holder(None, user.id), base, people, result)
            channel = private_channel(home, user)
            _restore_revisions(home, source, channel, f"{base}.revisions.jsonl", result)
            result.private, result.private_messages = owner, result.messages - before
        for name in sorted(n for n in names if n.startswith("usage/") and n.endswith(".jsonl")):
            _restore_usage(home, source, name, people, result)
    return result


class _Source:
    """The members of the open archive, read one line at a time."""

    def __init__(self, zipped: zipfile.ZipFile, names: set[str]) -> None:
        self.zipped = zipped
        self.names = names

    def read(self, name: str) -> bytes:
        return self.zipped.read(name)

    def lines(self, name: str) -> Iterator[tuple[int, Any]]:
        """(line number, the line's JSON) for each line of member `name`; nothing when the
        archive has no such member. A line that is not JSON is given as `_Bad`."""
        if name not in self.names:
            return
        with self.zipped.open(name) as raw:
            for number, line in enumerate(io.TextIOWrapper(raw, encoding="utf-8"), 1):
                if not line.strip():
                    continue
                try:
                    yield number, json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    yield number, _Bad("not valid JSON")


@dataclass(frozen=True)
class _Bad:
    why: str


class _People:
    """The home's account for each name the archive gives; an account is made (without a
    password: passwords never travel in an archive) for anyone the home does not have."""

    def __init__(self, home: Home, result: RestoreResult) -> None:
        self.home = home
        self.result = result
        self.known: dict[str, int] = {}

    def id(self, name: object) -> int | None:
        if not isinstance(name, str) or not NAME_RE.match(name):
            return None
        key = name.casefold()
        if key not in self.known:
            user = find_user(self.home.db, name)
            if user is None:
                user = ensure_user(self.home.db, name)
                self.result.new_users.append(name)
            self.known[key] = user.id
        return self.known[key]


def _restore_files(home: Home, source: _Source, slug: str, skipped: list[str]) -> int:
    prefix = f"projects/{slug}/"
    root = home.settings.projects_dir.resolve()
    written = 0
    for name in sorted(n for n in source.names if n.startswith(prefix)):
        dest = root / name.removeprefix("projects/")
        if os.path.lexists(dest):
            skipped.append(f"{name} (already there; kept as it is)")
            continue
        if not dest.resolve().is_relative_to(root / slug) or any(
            p.is_symlink() for p in dest.parents if p.is_relative_to(root)
        ):
            skipped.append(f"{name} (its folder is a symbolic link; not followed)")
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.restoring")
        tmp.write_bytes(source.read(name))
        os.replace(tmp, dest)
        written += 1
    return written


@dataclass
class _Thread:
    """One thread of the archive, as restored: its id here, and whether it was there."""

    id: int
    existed: bool
    distilled_upto: int = 0  # in the archive's ids
    messages: dict[int, int] = field(default_factory=dict)  # archive id → id here


def _restore_threads(
    home: Home, source: _Source, holder: Holder, base: str, people: _People, result: RestoreResult
) -> None:
    """The holder's threads with their messages, pins and suggestions. A thread that is
    here already (the same imported conversation, or the same creation time) takes the
    messages it lacks; the others are made as they were."""
    columns = conversations.thread_columns(home)
    before = conversations.newest_thread_id(home)
    threads: dict[int | None, _Thread] = {}
    claimed: set[int] = set()
    pins: list[tuple[_Thread, dict[str, Any]]] = []
    for number, line in source.lines(f"{base}.threads.jsonl"):
        if not isinstance(line, dict) or not isinstance(line.get("key"), int):
            result.skipped.append(f"{base}.threads.jsonl line {number} (not a thread)")
            continue
        given = line.get("fields")
        fields: dict[str, Any] = given if isinstance(given, dict) else {}
        thread = _find_or_make(home, holder, fields, columns, before, claimed, result)
        thread.distilled_upto = int(line.get("distilled_upto") or 0)
        threads[line["key"]] = thread
        pins += [(thread, p) for p in line.get("pins") or [] if isinstance(p, dict)]
    if f"{base}.jsonl" in source.names and not threads:  # format 1: one thread, no keys
        threads[None] = _find_or_make(home, holder, {}, columns, before, claimed, result)
    _restore_messages(home, source, holder, f"{base}.jsonl", threads, people, result)
    with database.transaction(home.db):
        for thread in threads.values():
            if not thread.existed:
                done = [new for old, new in thread.messages.items() if old <= thread.distilled_upto]
                conversations.mark_distilled(home, Channel(thread.id), max(done, default=0))
        for thread, pin in pins:
            user = people.id(pin.get("user"))
            if user is None or not isinstance(pin.get("note"), str):
                continue
            pinned_at = str(pin.get("pinned_at") or database.now())
            result.pins += suggestions.pin(
                home, thread.id, suggestions.Pin(pin["note"], user, pinned_at)
            )
    _restore_suggestions(home, source, f"{base}.suggestions.jsonl", threads, people, result)


def _find_or_make(
    home: Home,
    holder: Holder,
    fields: dict[str, Any],
    columns: set[str],
    before: int,
    claimed: set[int],
    result: RestoreResult,
) -> _Thread:
    """The holder's thread that existed before this restore and is this one (its imported
    conversation's id, else its creation time; the first thread for a format-1 archive),
    or a new one with the archive's fields. Threads made in the same millisecond are paired
    in their order: `claimed` holds the ones matched already."""
    for found in conversations.threads_like(
        home,
        holder,
        upto=before,
        source_id=fields.get("source_id"),
        created_at=fields.get("created_at"),
    ):
        if found not in claimed:
            claimed.add(found)
            return _Thread(found, existed=True)
    copied = {
        k: v
        for k, v in fields.items()
        if k in columns - THREAD_OWN - THREAD_SKIPPED and isinstance(v, str | int | float | None)
    }
    copied.setdefault("created_at", database.now())
    if "updated_at" in columns:
        copied.setdefault("updated_at", copied["created_at"])
    with database.transaction(home.db):
        made = conversations.add_thread_as(home, holder, copied)
    result.threads += 1
    return _Thread(made, existed=False)


def _restore_messages(
    home: Home,
    source: _Source,
    holder: Holder,
    name: str,
    threads: dict[int | None, _Thread],
    people: _People,
    result: RestoreResult,
) -> None:
    """Every message in its order, in batches of one transaction each. One that its thread
    holds already (the same source id, or the same time, speaker and words) is counted, not
    added; one merged into a thread that was here already is not folded into its memory."""
    lines = source.lines(name)
    while batch := list(itertools.islice(lines, BATCH)):
        with database.transaction(home.db):
            for number, line in batch:
                try:
                    _restore_message(home, holder, line, threads, people, result)
                except _BadLine as exc:
                    result.skipped.append(f"{name} line {number} ({exc})")


class _BadLine(ValueError):
    """Why one line of an archive cannot be restored."""


def _restore_message(
    home: Home,
    holder: Holder,
    line: Any,
    threads: dict[int | None, _Thread],
    people: _People,
    result: RestoreResult,
) -> None:
    if isinstance(line, _Bad):
        raise _BadLine(line.why)
    if not isinstance(line, dict):
        raise _BadLine("not a message")
    thread = threads.get(line.get("thread"))
    if thread is None:
        raise _BadLine(f"its thread {line.get('thread')!r} is not in the archive")
    role, text, time = line.get("role", "user"), line.get("text"), line.get("time")
    if role not in ("user", "assistant") or not isinstance(text, str):
        raise _BadLine('"role" or "text" is missing or wrong')
    if not isinstance(time, str) or not _is_time(time):
        raise _BadLine('"time" is not an ISO-8601 time')
    owner_speaks = holder.owner_id is not None and role == "user"  # no one else's words
    user = holder.owner_id if owner_speaks else people.id(line.get("user"))
    speaker = line.get("speaker")
    if not isinstance(speaker, str) or not speaker.strip():
        speaker = ASSISTANT if role == "assistant" else None
        if speaker is None:
            raise _BadLine('"speaker" is missing')
    source_id = line.get("source_id") if "key" in line else line.get("id")
    if source_id is not None and not isinstance(source_id, str):
        source_id = str(source_id)
    message = ImportedMessage(
        thread.id,
        holder.project_id,
        holder.private,
        role,
        user,
        speaker,
        text,
        time,
        source_id,
        int(bool(line.get("distill")) and not thread.existed),
        images=json.dumps(_images(line.get("images"))),
        trace=_trace(line.get("trace")),
        incomplete=int(bool(line.get("incomplete"))),
        parent_id=_parent(line.get("parent"), thread),
        hidden=int(bool(line.get("hidden"))),
    )
    found = None
    if thread.existed and source_id is None:
        found = conversations.same_unsourced(home, thread.id, time, role, speaker, text)
    if found is None:
        new_id = conversations.add_imported(home, message)
        if new_id is not None:
            result.messages += 1
            _remember(thread, line, new_id)
            return
        found = conversations.imported_id(home, thread.id, source_id)
    result.already += 1
    if found is not None:
        _remember(thread, line, found)


def _remember(thread: _Thread, line: dict[str, Any], new_id: int) -> None:
    if isinstance(line.get("key"), int):
        thread.messages[line["key"]] = new_id


def _is_time(value: str) -> bool:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _images(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _BadLine('"images" is not a list of names')
    return value


def _trace(value: object) -> str | None:
    """The trace as stored, once it reads as one (a bad one would break the thread's page)."""
    if value is None:
        return None
    try:
        if not isinstance(value, list):
            raise TypeError("not a list")
        steps_from_json(value)
    except (ValueError, TypeError, AttributeError) as exc:
        raise _BadLine(f"its tool trace cannot be read ({exc})") from None
    return json.dumps(value, ensure_ascii=False)


def _parent(value: object, thread: _Thread) -> int | None:
    """The message this one follows, here: 0 stays "the first", an unknown one is None
    (as for imported history)."""
    if value == 0:
        return 0
    return thread.messages.get(value) if isinstance(value, int) else None


def _restore_suggestions(
    home: Home,
    source: _Source,
    name: str,
    threads: dict[int | None, _Thread],
    people: _People,
    result: RestoreResult,
) -> None:
    with database.transaction(home.db):
        for number, line in source.lines(name):
            thread = threads.get(line.get("thread")) if isinstance(line, dict) else None
            message = thread.messages.get(line.get("message")) if thread else None
            user = people.id(line.get("user")) if isinstance(line, dict) else None
            if thread is None or message is None or user is None:
                result.skipped.append(f"{name} line {number} (its message or person is not here)")
                continue
            said = [line.get(c) for c in ("note", "title", "why", "status", "created_at")]
            if not all(isinstance(v, str) for v in said):
                result.skipped.append(f"{name} line {number} (not a suggestion)")
                continue
            note, title, why, status, created_at = (str(v) for v in said)
            made = suggestions.Made(
                message, user, note, title, why, status, created_at, line.get("decided_at")
            )
            result.suggestions += suggestions.add_made(home, thread.id, made)


def _restore_revisions(
    home: Home, source: _Source, channel: Channel, name: str, result: RestoreResult
) -> None:
    """Every revision in its order; a memory that has revisions already keeps its own (it
    is never overwritten)."""
    rows = [line for _, line in source.lines(name) if isinstance(line, dict)]
    if not rows:
        return
    if memory.last_revision(home, channel) is not None:
        result.skipped.append(f"{name} (this memory has its own history already; kept)")
        return
    new_ids: dict[int, int] = {}
    with database.transaction(home.db):
        for row in rows:
            source_name = str(row["source"])
            undo = UNDO_RE.match(source_name)
            if undo and int(undo[1]) in new_ids:
                source_name = f"undo:{new_ids[int(undo[1])]}"
            new_ids[int(row["id"])] = memory.add_restored_revision(
                home, channel, source_name, row["layers"], row.get("file_sha256"), row["created_at"]
            )
    result.revisions += len(rows)


def _restore_usage(
    home: Home, source: _Source, name: str, people: _People, result: RestoreResult
) -> None:
    """A person's usage events; one identical to an event held already is not added twice."""
    user = people.id(PurePosixPath(name).stem)
    if user is None:
        return
    with database.transaction(home.db):
        for _, event in source.lines(name):
            if not isinstance(event, dict):
                continue
            # as the archive gives them: the table's checks refuse what is not an event
            values: list[Any] = [event.get(c) for c in ("kind", "note", "tag", "private", "at")]
            result.usage_events += usage.add_once(home.db, user, usage.Event(*values))
