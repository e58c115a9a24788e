"""Backups of the data home: a consistent copy taken while Charlie keeps running.

A backup is a folder `charlie-backup-YYYYmmdd-HHMMSS` (UTC) holding `charlie.db`, the
`projects/` tree, the data home's settings file `charlie.toml` when there is one, and
`manifest.json` (every file's size and sha256). The backup is the whole household: the
database holds password hashes, and `charlie.toml` may hold the model server's key and the
Discord bot's token, so keep backups where only you can read them (the folder is made
readable by its owner only). The database is copied
with SQLite's online backup API from one read snapshot, so a running `charlie serve` keeps
writing meanwhile and the copy holds exactly what was committed when the backup began. The
search index (`index.db`) is left out: it is derived, and `charlie reindex` rebuilds it. So
are locks and the trash, which live outside `projects/`.

The folder is filled under a hidden `.partial` name and renamed only once complete and
checked, so an interrupted or failed backup never looks like a backup.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from charlie import __version__, conversations, files
from charlie import db as database
from charlie.config import SETTINGS_FILE, Settings
from charlie.errors import CharlieError

PREFIX = "charlie-backup-"
NAME_RE = re.compile(r"^charlie-backup-(\d{8}-\d{6})(?:-(\d+))?$")
DATABASE = "charlie.db"
PROJECTS = "projects"
MANIFEST = "manifest.json"
PAGES_PER_STEP = 1024  # 4 MiB of a database of 4 KiB pages per step of the online backup
STEP_PAUSE = 0.002  # seconds between steps, so other threads and processes get their turn
CHUNK = 1 << 20


@dataclass
class BackupResult:
    """What `make_backup` wrote, for the person to read."""

    path: Path
    database_bytes: int
    project_files: int
    project_bytes: int
    messages: int
    user_version: int
    settings_file: bool = False  # whether charlie.toml was copied
    skipped: list[str] = field(default_factory=list)  # relative paths, with why
    removed: list[Path] = field(default_factory=list)  # older backups deleted by `keep`


def make_backup(settings: Settings, target: Path, *, keep: int | None = None) -> BackupResult:
    """Back up the data home of `settings` into a new folder inside `target`; then, with
    `keep`, delete the oldest complete backups in `target` beyond that many."""
    if keep is not None and keep < 1:
        raise CharlieError("--keep must be at least 1: the backup just made is always kept.")
    if settings.database_url:
        raise CharlieError(
            "This household's rows are in PostgreSQL (CHARLIE_DATABASE_URL), which `charlie "
            "backup` does not copy: back the database up with pg_dump and the data home's "
            "files with your usual tool, or take everything out with `charlie export` "
            "(docs/postgresql.md)."
        )
    source = settings.db_path
    if not source.is_file():
        raise CharlieError(
            f"There is no database at {source}, so there is nothing to back up. Check CHARLIE_HOME."
        )
    target = target.expanduser().absolute()
    if target.resolve().is_relative_to(settings.projects_dir.resolve()):
        raise CharlieError(
            f"{target} is inside the projects folder being backed up; choose a folder "
            f"outside {settings.projects_dir}."
        )
    with _writable(target):
        target.mkdir(exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{PREFIX}", suffix=".partial", dir=target))
    try:
        with _writable(partial):
            result = _fill(settings, partial)
            done = _rename(partial, target, datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)  # its hidden name already says "not a backup"
        raise
    result.path = done
    if keep is not None:
        result.removed = prune(target, keep)
    return result


def _fill(settings: Settings, folder: Path) -> BackupResult:
    copy = folder / DATABASE
    _copy_database(settings.db_path, copy)
    messages, user_version = _check_copy(copy)
    skipped: list[str] = []
    _copy_tree(settings.projects_dir, folder / PROJECTS, Path(PROJECTS), skipped)
    settings_file = _copy_settings(settings.home / SETTINGS_FILE, folder / SETTINGS_FILE, skipped)
    entries = _describe(folder)
    _write_manifest(folder, entries, user_version, messages, skipped)
    project_entries = [e for e in entries if str(e["path"]).startswith(f"{PROJECTS}/")]
    return BackupResult(
        path=folder,
        database_bytes=copy.stat().st_size,
        project_files=len(project_entries),
        project_bytes=sum(int(e["size"]) for e in project_entries),
        messages=messages,
        user_version=user_version,
        settings_file=settings_file,
        skipped=skipped,
    )


def _copy_settings(source: Path, dest: Path, skipped: list[str]) -> bool:
    """Copy the data home's charlie.toml as it is (the settings Charlie runs with); a
    symbolic link is not followed, as in `projects/`. Whether it was copied."""
    if source.is_symlink():
        skipped.append(f"{SETTINGS_FILE} (a symbolic link, not followed)")
        return False
    if not source.is_file():
        return False
    shutil.copy2(source, dest, follow_symlinks=False)
    return True


# ---------------------------------------------------------------- the database


def _copy_database(source: Path, copy: Path) -> None:
    """Copy the live database page by page from one read snapshot.

    The open read transaction pins the snapshot: other connections' commits (WAL mode never
    blocks them) do not restart the copy, and the copy holds exactly what was committed
    when it began.
    """
    with database.storage_errors(source):
        src = sqlite3.connect(
            f"file:{source}?mode=rw", uri=True, timeout=database.BUSY_TIMEOUT, isolation_level=None
        )
    try:
        with database.storage_errors(source):
            src.execute("BEGIN")
            src.execute("SELECT count(*) FROM sqlite_master").fetchone()
        with database.storage_errors(copy):
            database.keep_private(copy)
            dst = sqlite3.connect(copy, isolation_level=None)
            try:
                src.backup(dst, pages=PAGES_PER_STEP, progress=_pause)
                # A plain rollback-journal file: the copy stands alone, with no -wal beside it.
                dst.execute("PRAGMA journal_mode = DELETE")
            finally:
                dst.close()
    finally:
        src.close()


def _pause(status: int, remaining: int, total: int) -> None:
    time.sleep(STEP_PAUSE)


def _check_copy(copy: Path) -> tuple[int, int]:
    """Run `PRAGMA integrity_check` on the copy; return its message count and user_version."""
    with database.storage_errors(copy):
        db = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
        try:
            verdict = [row[0] for row in db.execute("PRAGMA integrity_check")]
            if verdict != ["ok"]:
                found = "; ".join(verdict[:3])
                raise CharlieError(
                    f"The copy of the database failed its integrity check ({found}), "
                    "so no backup was kept. The database itself may be damaged: run "
                    "`sqlite3 charlie.db 'PRAGMA integrity_check'` in the data home, and keep "
                    "a copy of the file before changing anything."
                )
            messages = conversations.count_stored(db)
            user_version = int(db.execute("PRAGMA user_version").fetchone()[0])
        finally:
            db.close()
    return messages, user_version


# ---------------------------------------------------------------- the files


def _copy_tree(source: Path, dest: Path, shown: Path, skipped: list[str]) -> None:
    """Copy regular files and folders under `source`, never following a symbolic link: a
    link may point anywhere (outside the data home, or back into it), so it is skipped and
    named in `skipped`."""
    dest.mkdir()
    if not source.is_dir():
        return
    with os.scandir(source) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            name = shown / entry.name
            if entry.is_symlink():
                skipped.append(f"{name} (a symbolic link, not followed)")
            elif entry.is_dir(follow_symlinks=False):
                _copy_tree(Path(entry.path), dest / entry.name, name, skipped)
            elif entry.is_file(follow_symlinks=False):
                try:
                    shutil.copy2(entry.path, dest / entry.name, follow_symlinks=False)
                except FileNotFoundError:
                    if os.path.lexists(entry.path):
                        raise
                    # deleted (or moved to the trash) since the folder was listed: not in
                    # the backup, as if the backup had begun a moment later
            else:
                skipped.append(f"{name} (not a regular file)")


def _describe(folder: Path) -> list[dict[str, str | int]]:
    """Every file in the backup folder with its size and sha256; each is fsync'd on the way,
    so the rename that completes the backup comes after its contents are on disk."""
    described: list[dict[str, str | int]] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
            os.fsync(handle.fileno())
        described.append(
            {
                "path": path.relative_to(folder).as_posix(),
                "size": path.stat().st_size,
                "sha256": digest.hexdigest(),
            }
        )
    return described


def _write_manifest(
    folder: Path,
    entries: list[dict[str, str | int]],
    user_version: int,
    messages: int,
    skipped: list[str],
) -> None:
    manifest = {
        "charlie_version": __version__,
        "created_at": database.now(),
        "database_user_version": user_version,
        "messages": messages,
        "files": entries,
        "skipped": skipped,
    }
    files.write_atomic(folder / MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False))


def _rename(partial: Path, target: Path, stamp: str) -> Path:
    """Give the finished folder its backup name; a second backup in the same second gets a
    `-2` (`-3`, …) suffix rather than replacing the first."""
    for n in range(1, 1000):
        done = target / (f"{PREFIX}{stamp}" if n == 1 else f"{PREFIX}{stamp}-{n}")
        if done.exists():
            continue
        try:
            os.rename(partial, done)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                continue
            raise
        dir_fd = os.open(target, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return done
    raise CharlieError(f"Too many backups named {PREFIX}{stamp}* in {target}.")


# ---------------------------------------------------------------- keeping the newest


def complete_backups(target: Path) -> list[Path]:
    """The complete backups in `target`, oldest first: folders named like a backup (not a
    link) that hold a manifest. Anything else in `target` is not Charlie's to touch."""
    found: list[tuple[str, int, Path]] = []
    for path in target.iterdir():
        match = NAME_RE.match(path.name)
        if match is None or path.is_symlink() or not path.is_dir():
            continue
        if (path / MANIFEST).is_file():
            found.append((match[1], int(match[2] or 1), path))
    return [path for _, _, path in sorted(found)]


def prune(target: Path, keep: int) -> list[Path]:
    """Delete the oldest complete backups in `target` beyond the newest `keep`."""
    doomed = complete_backups(target)[:-keep]
    for path in doomed:
        shutil.rmtree(path)
    return doomed


@contextmanager
def _writable(path: Path) -> Iterator[None]:
    """Say plainly when the backup folder cannot be written (missing, not ours, disk full)."""
    try:
        yield
    except OSError as exc:
        if exc.errno in files.DISK_ERRNOS:
            raise files.not_written(exc, Path(exc.filename) if exc.filename else path) from exc
        if exc.errno in (errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR):
            raise CharlieError(
                f"Cannot write the backup in {path} ({exc.strerror or exc}). Choose a folder "
                "that exists and that the account running Charlie may write to; nothing was "
                "kept."
            ) from exc
        raise
