"""Archives: chosen projects (and one person's private channel) in a zip to take elsewhere.

An archive holds, per project:

- `projects/<slug>/`: project.toml, memory.md, the notes and the originals of documents
  brought in as notes (`attachments/`), byte for byte;
- `conversations/<slug>.md`: its threads, to read;
- `conversations/<slug>.jsonl`: every message of every thread (alternatives set aside
  included), one a line, in the format of `charlie import jsonl` plus what makes a restore
  whole: the thread, who spoke (by name), images, the tool trace, the incomplete and
  distill flags, the id it had where it was imported from, and the branch it is on;
- `conversations/<slug>.threads.jsonl`: each thread's title, times, archived or trash
  state, how far it was distilled, and the notes pinned into it;
- `conversations/<slug>.suggestions.jsonl`: the notes suggested in it, and what became of them;
- `memory_revisions/<slug>.jsonl`: its memory's revisions;

and `usage/<person>.jsonl`, each person's usage events. A private channel is included only
when its owner asks for it, and only theirs: `private/<name>.md`, `.jsonl`, `.threads.jsonl`,
`.suggestions.jsonl` and `.revisions.jsonl`. `manifest.json` names every file with its size
and sha256, and the people the archive names. Never in an archive: passwords, sign-in
sessions, API tokens, Discord links, `charlie.toml` (it may hold the model server's key),
and the search index (derived data: `charlie reindex` rebuilds it).

`open_archive` checks every file against the manifest before anything is written;
`charlie.transfer.restore` brings a checked archive into a data home.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from charlie import __version__, conversations
from charlie import db as database
from charlie.conversations import Holder, StoredThread
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.jsonvalue import JSON, JSONObject
from charlie.memory import layers as memory
from charlie.notes.documents import ATTACHMENTS_DIR
from charlie.notes.files import NOTES_DIR
from charlie.projects import (
    CONFIG_FILE,
    MEMORY_FILE,
    Project,
    get_project,
    list_projects,
    validate_slug,
)
from charlie.retrieval import suggestions, usage
from charlie.users import User, get_user, list_users

MANIFEST = "manifest.json"
FORMAT = 2  # 1: one conversation per project, messages as `charlie import jsonl` reads them
CHUNK = 1 << 20
MAX_MANIFEST = 64 << 20  # bytes: a manifest larger than this is not one Charlie wrote
# A thread's columns that say whose it is, or that belong to one running process: never
# copied from an archive (the restore sets the first ones itself).
THREAD_OWN = {"id", "project_id", "owner_id", "private", "distilled_upto"}
THREAD_SKIPPED = {"distill_claim", "distill_claimed_at"}


@dataclass
class ExportResult:
    path: Path
    projects: list[str]
    private: str | None
    messages: int
    files: int
    skipped: list[str] = field(default_factory=list)  # paths, with why
    threads: int = 0


# ---------------------------------------------------------------- export


def export_archive(
    home: Home,
    target: Path,
    *,
    slugs: list[str] | None = None,
    exporter: str,
    private: bool = False,
) -> ExportResult:
    """Write the archive to `target`: the projects `slugs` (every project when None) and,
    with `private`, the private channel of `exporter` — never anyone else's."""
    projects = (
        [get_project(home, validate_slug(s)) for s in dict.fromkeys(slugs)]
        if slugs
        else list_projects(home)
    )
    person = get_user(home.db, exporter) if private else None
    target = target.expanduser().absolute()
    if target.is_dir():
        raise CharlieError(f"{target} is a folder; name the zip file to write, e.g. -o home.zip.")
    if target.resolve().is_relative_to(home.settings.projects_dir.resolve()):
        raise CharlieError(
            f"{target} is inside the projects folder being exported; choose a place outside "
            f"{home.settings.projects_dir}."
        )
    try:
        handle, partial_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".partial", dir=target.parent
        )
    except OSError as exc:
        raise CharlieError(
            f"Cannot write {target} ({exc.strerror or exc}): choose a folder that exists and "
            "that you may write to."
        ) from exc
    os.close(handle)
    partial = Path(partial_name)
    try:
        result = _write(home, partial, projects, person, exporter)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)  # a half-written archive is never left behind
        raise
    result.path = target
    return result


class _Writer:
    """Adds members to the zip, each written as it is made (a conversation of 100,000
    messages is never held whole), remembering each one's size and sha256 for the manifest."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.entries: list[dict[str, str | int]] = []

    def add(self, name: str, data: bytes) -> None:
        self.add_chunks(name, [data])

    def add_chunks(self, name: str, chunks: Iterable[bytes]) -> None:
        digest = hashlib.sha256()
        size = 0
        with self.archive.open(name, "w") as member:
            for chunk in chunks:
                member.write(chunk)
                digest.update(chunk)
                size += len(chunk)
        self.entries.append({"path": name, "size": size, "sha256": digest.hexdigest()})

    def add_lines(self, name: str, items: Iterable[JSONObject]) -> None:
        self.add_chunks(name, _joined(json.dumps(i, ensure_ascii=False) + "\n" for i in items))


def _joined(texts: Iterable[str], size: int = CHUNK) -> Iterator[bytes]:
    """`texts` encoded and gathered into chunks of about `size` bytes."""
    parts: list[bytes] = []
    held = 0
    for text in texts:
        data = text.encode("utf-8")
        parts.append(data)
        held += len(data)
        if held >= size:
            yield b"".join(parts)
            parts, held = [], 0
    if parts:
        yield b"".join(parts)


def _write(
    home: Home, partial: Path, projects: list[Project], person: User | None, exporter: str
) -> ExportResult:
    result = ExportResult(
        partial, [p.slug for p in projects], person.name if person else None, 0, 0
    )
    people = [user for user, _ in list_users(home.db)]
    names = _Names({user.id: user.name for user in people})
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        out = _Writer(archive)
        for project in projects:
            _add_tree(out, project.path, f"projects/{project.slug}", result.skipped)
            threads = _add_holder(
                home,
                out,
                Holder(project.id, None),
                f"conversations/{project.slug}",
                project.config.name,
                result,
                names,
            )
            out.add_lines(
                f"memory_revisions/{project.slug}.jsonl", memory.stored_revisions(home, threads)
            )
        if person is not None:
            base = f"private/{person.name}"
            title = f"{person.name}'s private channel"
            holder = Holder(None, person.id)
            threads = _add_holder(home, out, holder, base, title, result, names)
            out.add_lines(f"{base}.revisions.jsonl", memory.stored_revisions(home, threads))
            names.named.add(person.name)
        names.named |= set(_add_usage(home, out, {p.slug for p in projects}, people, person))
        manifest = {
            "format": FORMAT,
            "charlie_version": __version__,
            "database_user_version": database.schema_version(home.db),
            "created_at": database.now(),
            "exported_by": exporter,
            "projects": result.projects,
            "private": result.private,
            "users": sorted(names.named, key=str.lower),
            "files": out.entries,
            "skipped": result.skipped,
        }
        archive.writestr(MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False))
        result.files = len(out.entries)
    with open(partial, "rb") as done:
        os.fsync(done.fileno())
    return result


def _add_tree(out: _Writer, folder: Path, shown: str, skipped: list[str]) -> None:
    """project.toml, memory.md, the notes and the documents' originals, as they are; a
    symbolic link is never followed (it could lead anywhere on the computer), so it is
    skipped and named."""
    for name in (CONFIG_FILE, MEMORY_FILE):
        path = folder / name
        if path.is_symlink():
            skipped.append(f"{shown}/{name} (a symbolic link, not followed)")
        elif path.is_file():
            out.add(f"{shown}/{name}", path.read_bytes())
    _add_notes(out, folder / NOTES_DIR, f"{shown}/{NOTES_DIR}", skipped)
    _add_notes(out, folder / ATTACHMENTS_DIR, f"{shown}/{ATTACHMENTS_DIR}", skipped)


def _add_notes(out: _Writer, folder: Path, shown: str, skipped: list[str]) -> None:
    if folder.is_symlink():
        skipped.append(f"{shown} (a symbolic link, not followed)")
        return
    if not folder.is_dir():
        return
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            name = f"{shown}/{entry.name}"
            if entry.is_symlink():
                skipped.append(f"{name} (a symbolic link, not followed)")
            elif entry.is_dir(follow_symlinks=False):
                _add_notes(out, Path(entry.path), name, skipped)
            elif entry.is_file(follow_symlinks=False):
                out.add(name, Path(entry.path).read_bytes())
            else:
                skipped.append(f"{name} (not a regular file)")


@dataclass
class _Names:
    """The people's names by account id; each one an archive gives is kept in `named` (the
    manifest lists them, and a restore makes an account for each one it lacks)."""

    of: dict[int, str]
    named: set[str] = field(default_factory=set)

    def __call__(self, user_id: int) -> str:
        name = self.of[user_id]
        self.named.add(name)
        return name


def _add_holder(
    home: Home,
    out: _Writer,
    holder: Holder,
    base: str,
    title: str,
    result: ExportResult,
    names: _Names,
) -> list[int]:
    """The holder's threads: readable, their messages, the threads themselves, and the
    suggestions made in them. Returns the threads' ids."""
    threads = conversations.stored_threads(home, holder)
    ids = [t.id for t in threads]
    out.add_chunks(f"{base}.md", _joined(_readable(home, title, threads)))
    counted = _Count()
    out.add_lines(f"{base}.jsonl", counted(_messages(home, ids, names.named)))
    out.add_lines(f"{base}.threads.jsonl", (_thread(home, t, names) for t in threads))
    out.add_lines(f"{base}.suggestions.jsonl", _suggestions(home, ids, names))
    result.messages += counted.n
    result.threads += len(threads)
    return ids


class _Count:
    """Counts what passes through it."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, items: Iterable[JSONObject]) -> Iterator[JSONObject]:
        for item in items:
            self.n += 1
            yield item


def _messages(home: Home, thread_ids: list[int], named: set[str]) -> Iterator[JSONObject]:
    for thread_id in thread_ids:
        for row in conversations.export_rows(home, thread_id):
            if row["user_name"] is not None:
                named.add(str(row["user_name"]))
            yield {
                "id": row["source_id"] or f"m{row['id']}",
                "speaker": row["speaker"],
                "role": row["role"],
                "text": row["content"],
                "time": row["created_at"],
                "key": row["id"],
                "thread": thread_id,
                "user": row["user_name"],
                "source_id": row["source_id"],
                "images": json.loads(row["images"]),
                "trace": None if row["trace"] is None else json.loads(row["trace"]),
                "incomplete": bool(row["incomplete"]),
                "distill": bool(row["distill"]),
                "parent": row["parent_id"],
                "hidden": bool(row["hidden"]),
            }


def _thread(home: Home, thread: StoredThread, names: _Names) -> JSONObject:
    pins: list[JSON] = [
        {"note": pin.note, "user": names(pin.user_id), "pinned_at": pin.pinned_at}
        for pin in suggestions.pins_in(home, thread.id)
    ]
    own = THREAD_OWN | THREAD_SKIPPED
    return {
        "key": thread.id,
        "fields": {k: v for k, v in thread.columns.items() if k not in own},
        "distilled_upto": thread.distilled_upto,
        "pins": pins,
    }


def _suggestions(home: Home, thread_ids: list[int], names: _Names) -> Iterator[JSONObject]:
    for thread_id in thread_ids:
        for made in suggestions.made_in(home, thread_id):
            yield {
                "thread": thread_id,
                "message": made.message_id,
                "user": names(made.user_id),
                "note": made.note,
                "title": made.title,
                "why": made.why,
                "status": made.status,
                "created_at": made.created_at,
                "decided_at": made.decided_at,
            }


def _readable(home: Home, title: str, threads: list[StoredThread]) -> Iterator[str]:
    """The conversation as markdown, the branch kept in each thread; each thread under its
    title when there are several."""
    yield f"# {title}\n"
    for thread in threads:
        states = [
            s
            for s, at in (("archived", thread.archived_at), ("in the trash", thread.deleted_at))
            if at
        ]
        aside = f" ({', '.join(states)})" if states else ""
        if len(threads) > 1 or aside:
            yield f"\n## {thread.title or 'New chat'}{aside}\n"
        for row in conversations.shown_in_time(home, thread.id):
            when = str(row["created_at"])[:16].replace("T", " ")
            yield f"\n**{row['speaker']}** · {when} UTC\n\n{row['content']}\n"


def _add_usage(
    home: Home, out: _Writer, slugs: set[str], people: list[User], person: User | None
) -> list[str]:
    """Each person's usage events about the exported projects' notes (and tags); events from
    a private channel only for the person exporting theirs. Returns every person named."""
    names: list[str] = []
    for user in people:
        mine = person is not None and user.id == person.id
        events = [
            asdict(e)
            for e in usage.events_of(home.db, user, private=mine)
            if e.note is None or e.note.split("/", 1)[0] in slugs
        ]
        if events or mine:
            out.add_lines(f"usage/{user.name}.jsonl", events)
            names.append(user.name)
    return names


# ---------------------------------------------------------------- reading one back


@dataclass(frozen=True)
class Archive:
    """An archive whose every file matched its manifest when it was opened."""

    path: Path
    manifest: dict[str, Any]

    def read(self, name: str) -> bytes:
        with zipfile.ZipFile(self.path) as archive:
            return archive.read(name)

    def names(self) -> list[str]:
        return [str(entry["path"]) for entry in self.manifest["files"]]


def open_archive(path: Path) -> Archive:
    """Read the manifest and check every file's size and sha256, before anything is
    written: an archive that is damaged or was changed is refused whole."""
    try:
        with zipfile.ZipFile(path) as archive:
            manifest = _manifest(path, archive)
            listed = {str(e["path"]): e for e in manifest["files"]}
            present = [i.filename for i in archive.infolist() if not i.is_dir()]
            extra = sorted(set(present) - set(listed) - {MANIFEST})
            if extra or len(present) != len(set(present)):
                raise CharlieError(
                    f"{path} holds {extra[0] if extra else 'a file twice'}, which its manifest "
                    "does not list: it was changed after it was made. Nothing was restored."
                )
            for name, entry in listed.items():
                _check_name(path, name)
                _check_member(path, archive, name, entry)
    except zipfile.BadZipFile as exc:
        raise CharlieError(
            f"{path} is not a readable zip file ({exc}). Nothing was restored."
        ) from exc
    except FileNotFoundError as exc:
        raise CharlieError(f"There is no file {path}. Nothing was restored.") from exc
    except OSError as exc:
        raise CharlieError(f"{path} cannot be read ({exc.strerror or exc}).") from exc
    return Archive(path, manifest)


def _manifest(path: Path, archive: zipfile.ZipFile) -> dict[str, Any]:
    try:
        info = archive.getinfo(MANIFEST)
        if info.file_size > MAX_MANIFEST:
            raise ValueError("too large")
        manifest = json.loads(archive.read(info))
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
            raise ValueError("no list of files")
        if not all(
            isinstance(e, dict) and isinstance(e.get("path"), str) for e in manifest["files"]
        ):
            raise ValueError("a file without a path")
    except (KeyError, ValueError) as exc:
        raise CharlieError(
            f"{path} has no readable {MANIFEST} ({exc}): it is not an archive written by "
            "`charlie export`. Nothing was restored."
        ) from exc
    return manifest


def _check_name(path: Path, name: str) -> None:
    """Only the places an archive has, and no path that could leave the data home."""
    parts = PurePosixPath(name).parts
    bad = (
        name.startswith("/")
        or "\\" in name
        or any(p in ("", ".", "..") for p in parts)
        or len(parts) < 2
        or parts[0] not in ("projects", "conversations", "memory_revisions", "private", "usage")
        or (parts[0] == "projects" and (len(parts) < 3 or not _slug_ok(parts[1])))
    )
    if bad:
        raise CharlieError(
            f"{path} names a file {name!r} that Charlie will not write. Nothing was restored."
        )


def _slug_ok(slug: str) -> bool:
    try:
        validate_slug(slug)
    except CharlieError:
        return False
    return True


def _check_member(path: Path, archive: zipfile.ZipFile, name: str, entry: dict[str, Any]) -> None:
    digest = hashlib.sha256()
    size = 0
    try:
        with archive.open(name) as member:
            while chunk := member.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
    except KeyError:
        raise CharlieError(
            f"{path} lacks {name}, which its manifest lists. Nothing was restored."
        ) from None
    except zipfile.BadZipFile as exc:
        raise CharlieError(f"{name} in {path} is damaged ({exc}). Nothing was restored.") from exc
    if size != entry.get("size") or digest.hexdigest() != entry.get("sha256"):
        raise CharlieError(
            f"{name} in {path} does not match its manifest (size or sha256 differs): the "
            "archive was damaged or changed after it was made. Nothing was restored."
        )


def is_empty(home: Home) -> bool:
    """Whether the data home holds nothing yet: no project folder, no message, no memory."""
    if any(home.settings.projects_dir.iterdir()):
        return False
    return not (
        conversations.newest_stored_id(home)
        or memory.any_revision(home)
        or usage.any_events(home.db)
    )
