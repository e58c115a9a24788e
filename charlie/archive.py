"""Archives: chosen projects (and one person's private channel) in a zip to take elsewhere.

An archive holds, per project, `projects/<slug>/` (project.toml, memory.md and the notes, byte
for byte), its conversation as `conversations/<slug>.md` (to read) and `.jsonl` (the format
of `charlie import jsonl`), its memory's revisions in `memory_revisions/<slug>.jsonl`, and the
usage events in `usage/<person>.jsonl`. A private channel is included only when its owner
asks for it, and only theirs: `private/<name>.md`, `.jsonl` and `.revisions.jsonl`.
`manifest.json` names every file with its size and sha256.

Restoring checks every file against the manifest before writing anything, then brings the
messages in the way `charlie import jsonl` does, so their times, speakers and ids are kept
and restoring again adds nothing. The search index is not in the archive: it is derived
data, and `charlie reindex` rebuilds it from what was restored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from charlie import __version__, importing
from charlie import db as database
from charlie.conversations import Channel, private_channel, shared_channel
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.notes import NOTES_DIR
from charlie.projects import CONFIG_FILE, MEMORY_FILE, get_project, list_projects, validate_slug
from charlie.users import NAME_RE, User, ensure_user, get_user

MANIFEST = "manifest.json"
FORMAT = 1
CHUNK = 1 << 20
MAX_MANIFEST = 64 << 20  # bytes: a manifest larger than this is not one Charlie wrote
USAGE_COLUMNS = ("kind", "note", "tag", "private", "at")
UNDO_RE = re.compile(r"^undo:(\d+)$")


@dataclass
class ExportResult:
    path: Path
    projects: list[str]
    private: str | None
    messages: int
    files: int
    skipped: list[str] = field(default_factory=list)  # paths, with why


@dataclass
class RestoreResult:
    projects: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    messages: int = 0
    already: int = 0  # messages found stored already
    revisions: int = 0
    usage_events: int = 0
    files: int = 0
    skipped: list[str] = field(default_factory=list)  # what was kept as it was, and why


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
    """Adds members to the zip, remembering each one's size and sha256 for the manifest."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.entries: list[dict[str, Any]] = []

    def add(self, name: str, data: bytes) -> None:
        self.archive.writestr(name, data)
        self.entries.append(
            {"path": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        )

    def add_lines(self, name: str, items: Iterable[dict[str, Any]]) -> None:
        text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)
        self.add(name, text.encode("utf-8"))


def _write(
    home: Home, partial: Path, projects: list[Any], person: User | None, exporter: str
) -> ExportResult:
    result = ExportResult(
        partial, [p.slug for p in projects], person.name if person else None, 0, 0
    )
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        out = _Writer(archive)
        for project in projects:
            _add_tree(out, project.path, f"projects/{project.slug}", result.skipped)
            channel = shared_channel(home, project)
            result.messages += _add_channel(
                home, out, channel, f"conversations/{project.slug}", project.config.name
            )
            out.add_lines(f"memory_revisions/{project.slug}.jsonl", _revisions(home, channel))
        if person is not None:
            channel = private_channel(home, person)
            base = f"private/{person.name}"
            result.messages += _add_channel(
                home, out, channel, base, f"{person.name}'s private channel"
            )
            out.add_lines(f"{base}.revisions.jsonl", _revisions(home, channel))
        users = _add_usage(home, out, {p.slug for p in projects}, person)
        users = sorted(set(users) | _speakers(home, projects), key=str.lower)
        manifest = {
            "format": FORMAT,
            "charlie_version": __version__,
            "database_user_version": int(home.db.execute("PRAGMA user_version").fetchone()[0]),
            "created_at": database.now(),
            "exported_by": exporter,
            "projects": result.projects,
            "private": result.private,
            "users": users,
            "files": out.entries,
            "skipped": result.skipped,
        }
        archive.writestr(MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False))
        result.files = len(out.entries)
    with open(partial, "rb") as done:
        os.fsync(done.fileno())
    return result


def _add_tree(out: _Writer, folder: Path, shown: str, skipped: list[str]) -> None:
    """project.toml, memory.md and the notes, as they are; a symbolic link is never followed
    (it could lead anywhere on the computer), so it is skipped and named."""
    for name in (CONFIG_FILE, MEMORY_FILE):
        path = folder / name
        if path.is_symlink():
            skipped.append(f"{shown}/{name} (a symbolic link, not followed)")
        elif path.is_file():
            out.add(f"{shown}/{name}", path.read_bytes())
    _add_notes(out, folder / NOTES_DIR, f"{shown}/{NOTES_DIR}", skipped)


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


def _add_channel(home: Home, out: _Writer, channel: Channel, base: str, title: str) -> int:
    rows = home.db.execute(
        "SELECT id, role, speaker, content, created_at, source_id FROM messages "
        "WHERE conversation_id = ? ORDER BY created_at, id",
        (channel.conversation_id,),
    ).fetchall()
    out.add(f"{base}.md", _readable(title, rows).encode("utf-8"))
    out.add_lines(
        f"{base}.jsonl",
        (
            {
                "id": row["source_id"] or f"m{row['id']}",
                "speaker": row["speaker"],
                "role": row["role"],
                "text": row["content"],
                "time": row["created_at"],
            }
            for row in rows
        ),
    )
    return len(rows)


def _speakers(home: Home, projects: list[Any]) -> set[str]:
    """The people who spoke in the exported projects, so that a restore knows them."""
    ids = json.dumps([p.id for p in projects])
    rows = home.db.execute(
        "SELECT DISTINCT u.name FROM messages m JOIN users u ON u.id = m.user_id "
        "WHERE m.private = 0 AND m.project_id IN (SELECT value FROM json_each(?))",
        (ids,),
    )
    return {str(row[0]) for row in rows}


def _readable(title: str, rows: list[Any]) -> str:
    parts = [f"# {title}\n"]
    for row in rows:
        when = str(row["created_at"])[:16].replace("T", " ")
        parts.append(f"\n**{row['speaker']}** · {when} UTC\n\n{row['content']}\n")
    return "".join(parts)


def _revisions(home: Home, channel: Channel) -> Iterator[dict[str, Any]]:
    rows = home.db.execute(
        "SELECT * FROM memory_revisions WHERE conversation_id = ? ORDER BY id",
        (channel.conversation_id,),
    )
    for row in rows:
        yield dict(row)


def _add_usage(home: Home, out: _Writer, slugs: set[str], person: User | None) -> list[str]:
    """Each person's usage events about the exported projects' notes (and tags); events from
    a private channel only for the person exporting theirs. Returns every person named."""
    names: list[str] = []
    for user in home.db.execute("SELECT id, name FROM users ORDER BY name").fetchall():
        mine = person is not None and user["id"] == person.id
        rows = home.db.execute(
            f"SELECT {', '.join(USAGE_COLUMNS)} FROM usage_events WHERE user_id = ? "
            "AND (private = 0 OR ?) ORDER BY at, id",
            (user["id"], int(mine)),
        ).fetchall()
        events = [dict(r) for r in rows if r["note"] is None or r["note"].split("/", 1)[0] in slugs]
        if events or mine:
            out.add_lines(f"usage/{user['name']}.jsonl", events)
            names.append(str(user["name"]))
    return names


# ---------------------------------------------------------------- restore


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
    for table in ("messages", "memory_revisions", "usage_events"):
        if home.db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
            return False
    return True


def restore(home: Home, archive: Archive, *, merge: bool = False) -> RestoreResult:
    """Bring the checked `archive` into `home`. Without `merge` the home must be empty; with
    it, nothing already there is replaced: existing files and memories are kept and listed
    in `skipped`, and messages already stored are not added again."""
    if not merge and not is_empty(home):
        raise CharlieError(
            f"The data home {home.settings.home} already holds projects or messages. Restore "
            "into an empty one (set CHARLIE_HOME to a new folder), or add --merge to bring "
            "the archive in beside what is there (nothing there is replaced)."
        )
    result = RestoreResult()
    manifest = archive.manifest
    names = set(archive.names())
    for name in dict.fromkeys([*manifest.get("users", []), manifest.get("private")]):
        if isinstance(name, str) and NAME_RE.match(name):
            ensure_user(home.db, name)
            result.users.append(name)
    for slug in manifest.get("projects", []):
        validate_slug(slug)
        result.files += _restore_files(home, archive, slug, result.skipped)
        channel = shared_channel(home, get_project(home, slug))
        _restore_channel(home, archive, channel, f"conversations/{slug}", names, result)
        _restore_revisions(home, archive, channel, f"memory_revisions/{slug}.jsonl", result)
        result.projects.append(slug)
    owner = manifest.get("private")
    if isinstance(owner, str) and NAME_RE.match(owner):
        channel = private_channel(home, get_user(home.db, owner))
        _restore_channel(home, archive, channel, f"private/{owner}", names, result)
        _restore_revisions(home, archive, channel, f"private/{owner}.revisions.jsonl", result)
    for name in sorted(n for n in names if n.startswith("usage/") and n.endswith(".jsonl")):
        _restore_usage(home, archive, name, result)
    return result


def _restore_files(home: Home, archive: Archive, slug: str, skipped: list[str]) -> int:
    prefix = f"projects/{slug}/"
    root = home.settings.projects_dir.resolve()
    written = 0
    for name in archive.names():
        if not name.startswith(prefix):
            continue
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
        tmp.write_bytes(archive.read(name))
        os.replace(tmp, dest)
        written += 1
    return written


def _restore_channel(
    home: Home,
    archive: Archive,
    channel: Channel,
    base: str,
    names: set[str],
    result: RestoreResult,
) -> None:
    """The messages, through `charlie import jsonl`'s own path: ids, times and speakers are
    kept, and a message whose id the channel holds already is not added twice."""
    name = f"{base}.jsonl"
    if name not in names:
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "messages.jsonl"
        path.write_bytes(archive.read(name))
        report = importing.import_jsonl(home, channel, path)
    result.messages += report.added
    result.already += report.already
    for line, reason in report.problems:
        result.skipped.append(f"{name} line {line} ({reason})")


def _restore_revisions(
    home: Home, archive: Archive, channel: Channel, name: str, result: RestoreResult
) -> None:
    """Every revision in its order; a channel whose memory has revisions already keeps its
    own (it is never overwritten)."""
    if name not in set(archive.names()):
        return
    rows = [json.loads(line) for line in archive.read(name).decode("utf-8").splitlines() if line]
    if not rows:
        return
    held = home.db.execute(
        "SELECT 1 FROM memory_revisions WHERE conversation_id = ? LIMIT 1",
        (channel.conversation_id,),
    ).fetchone()
    if held:
        result.skipped.append(f"{name} (this memory has its own history already; kept)")
        return
    owner = channel.owner.id if channel.owner else None
    new_ids: dict[int, int] = {}
    with _transaction(home):
        for row in rows:
            source = str(row["source"])
            undo = UNDO_RE.match(source)
            if undo and int(undo[1]) in new_ids:
                source = f"undo:{new_ids[int(undo[1])]}"
            cursor = home.db.execute(
                "INSERT INTO memory_revisions (conversation_id, owner_id, source, layers, "
                "file_sha256, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    channel.conversation_id,
                    owner,
                    source,
                    row["layers"],
                    row.get("file_sha256"),
                    row["created_at"],
                ),
            )
            assert cursor.lastrowid is not None
            new_ids[int(row["id"])] = cursor.lastrowid
    result.revisions += len(rows)


def _restore_usage(home: Home, archive: Archive, name: str, result: RestoreResult) -> None:
    """A person's usage events; one identical to an event held already is not added twice."""
    person = PurePosixPath(name).stem
    if not NAME_RE.match(person):
        return
    user = ensure_user(home.db, person)
    lines = archive.read(name).decode("utf-8").splitlines()
    with _transaction(home):
        for line in lines:
            if not line:
                continue
            event = json.loads(line)
            values = (user.id, *(event.get(c) for c in USAGE_COLUMNS))
            cursor = home.db.execute(
                "INSERT INTO usage_events (user_id, kind, note, tag, private, at) "
                "SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE NOT EXISTS (SELECT 1 FROM usage_events WHERE "
                "user_id = ?1 AND kind = ?2 AND note IS ?3 AND tag IS ?4 AND private = ?5 "
                "AND at = ?6)",
                values,
            )
            result.usage_events += cursor.rowcount


class _transaction:
    """One write transaction (or the caller's, when one is open already)."""

    def __init__(self, home: Home) -> None:
        self.db = home.db
        self.own = False

    def __enter__(self) -> None:
        if not self.db.in_transaction:
            self.db.execute("BEGIN IMMEDIATE")
            self.own = True

    def __exit__(self, kind: object, *rest: object) -> None:
        if not self.own:
            return
        if kind is None:
            self.db.execute("COMMIT")
        elif self.db.in_transaction:
            self.db.execute("ROLLBACK")
