"""The search index: note chunks, their vectors and an FTS5 table, all derived from the files.

Nothing here is a source of truth, so the index lives in its own SQLite file beside
`charlie.db` (`index.db`): whatever state that file is in, it can be thrown away and built
again from the note files. `refresh` brings the index up to date with the note files cheaply
(a stat per file; only changed files are read, chunked and embedded), `rebuild` starts a new
file and reads every note again. The index remembers which embedding model built its vectors
and re-embeds when the model changes. Indexing never writes to a note file.

Several threads and processes (the web server, the Discord bot, the CLI) share one index:
- threads of one process take one lock, kept in `home.shared`, to refresh;
- every write re-reads what is indexed inside its own write transaction, so two processes
  refreshing at once never insert the same note twice;
- a damaged file (SQLITE_CORRUPT, SQLITE_NOTADB, a missing or unreadable table) is replaced
  by a new one and refilled from the files. Opening and replacing the file hold an advisory
  lock on `index.db.lock`, and a process replaces only the file it found damaged (same
  inode): one that finds a newer file at the path just reopens it;
- an index left in `charlie.db` by an older Charlie is carried over into `index.db` without
  embedding again when it can be read, then dropped from `charlie.db` (when its tables are
  too damaged to drop, their schema entries are removed and the pages left unused).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from charlie import db as database
from charlie.chunking import chunk_text
from charlie.db import now, run_script
from charlie.embeddings import Embedder
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.keywords import FTS5_TOKENIZE
from charlie.notes import (
    LINK_REASON,
    MAX_NOTE_BYTES,
    Note,
    NoteFormatError,
    find,
    notes_dir,
    read_bytes,
    read_note,
)
from charlie.projects import Project, list_projects

INDEX_VERSION = "2"  # 2: chunks_fts gained `scope`, the project as one indexed token
CHUNK_WORDS = 120
CHUNK_OVERLAP = 30
EMBED_BATCH = 256
SQLITE_ERROR = 1  # the primary code of "no such table", "vtable constructor failed"…

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS index_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL,
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    title TEXT NOT NULL,
    tags TEXT NOT NULL,
    path TEXT NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    indexed_at TEXT NOT NULL,
    UNIQUE (project_id, name)
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
    ord INTEGER NOT NULL,
    text TEXT NOT NULL,
    vector BLOB
);
CREATE INDEX IF NOT EXISTS chunks_note ON chunks(note_id);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    title, text, project UNINDEXED, scope, tokenize = '{FTS5_TOKENIZE}'
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts, 'row');
CREATE TABLE IF NOT EXISTS note_problems (
    path TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    reason TEXT NOT NULL,
    seen_at TEXT NOT NULL
);
"""
# Reads that touch the root page of every table, so a damaged file is found on open.
PROBES = [
    "SELECT value FROM index_state WHERE key = 'version'",
    "SELECT id, project_id, name, mtime_ns, size, sha256 FROM notes LIMIT 1",
    "SELECT id, note_id, ord, text, vector FROM chunks LIMIT 1",
    "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'probe'",
    "SELECT path FROM note_problems LIMIT 1",
]
# The tables an older Charlie kept in charlie.db (FTS5's own shadow tables included).
LEGACY_TABLES = ["chunks_vocab", "chunks_fts", "chunks", "notes", "note_problems", "index_state"]
LEGACY_SHADOWS = [f"chunks_fts_{part}" for part in ("data", "idx", "content", "docsize", "config")]

Matrix = npt.NDArray[np.float32]


class _Connection(sqlite3.Connection):
    """A connection to the index file that remembers which file it opened (its inode), so
    a process can tell the file it found damaged from a new one another process made."""

    inode: int | None = None


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold the advisory lock that opening and replacing the index file take, across the
    processes of a data home."""
    with open(f"{path}.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _delete_files(path: Path) -> None:
    """Remove the index file and its write-ahead log. A process that still has the old file
    open keeps reading it, and SQLite never checkpoints into a file that has moved."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction: committed when the block ends, rolled back if it raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        if db.in_transaction:  # SQLite may have rolled back already (a damaged page)
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _is_damage(exc: sqlite3.Error) -> bool:
    """Whether `exc` says the file is damaged; SQLITE_ERROR ("no such table", "vtable
    constructor failed") only counts when the probes fail too (see `_problem`)."""
    return _code(exc) in database.DAMAGED


def _problem(db: sqlite3.Connection) -> str | None:
    """What is wrong with the index in `db` (a table that cannot be read, another index
    version), or None when it is sound."""
    try:
        version = db.execute(PROBES[0]).fetchone()
        for probe in PROBES[1:]:
            db.execute(probe).fetchall()
    except sqlite3.DatabaseError as exc:
        if _is_damage(exc) or _code(exc) == SQLITE_ERROR:
            return str(exc)
        raise  # busy, full, I/O: the file may be fine
    if version is None:
        return "it has no version"
    if version[0] != INDEX_VERSION:
        return f"it is index version {version[0]}, not {INDEX_VERSION}"
    return None


def _connect(path: Path) -> _Connection:
    db = sqlite3.connect(
        path,
        timeout=database.BUSY_TIMEOUT,
        isolation_level=None,
        check_same_thread=False,
        factory=_Connection,
    )
    try:
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode = WAL")  # reads the header: a non-database fails here
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        db.close()
        raise
    db.inode = _inode(path)
    return db


def _create(db: sqlite3.Connection) -> None:
    """Create the tables of a new (or emptied) index file."""
    with _transaction(db):
        run_script(db, SCHEMA)
        db.execute(
            "INSERT INTO index_state VALUES ('version', ?) ON CONFLICT(key) DO NOTHING",
            (INDEX_VERSION,),
        )


def open_index_file(path: Path, *, locked: bool = False) -> _Connection:
    """A connection to a sound index file at `path`: created when missing, and replaced
    by a new, empty one when it is damaged or from another index version (saying so in
    its `rebuilt` state). `locked`: the caller holds the file lock already."""
    replaced: str | None = None
    with nullcontext() if locked else _file_lock(path):  # nobody replaces it meanwhile
        for attempt in (1, 2):
            try:
                db = _connect(path)
            except sqlite3.DatabaseError as exc:
                if attempt == 2 or not _is_damage(exc):
                    raise
                replaced = str(exc)
                _delete_files(path)
                continue
            try:
                if _problem(db) is not None:
                    _create(db)  # a new file; or a damaged one, which stays damaged
                problem = _problem(db)
            except sqlite3.DatabaseError as exc:
                if attempt == 2 or not (_is_damage(exc) or _code(exc) == SQLITE_ERROR):
                    db.close()
                    raise
                problem = str(exc)
            if problem is None:
                if replaced is not None:
                    _mark_rebuilt(db, f"the index file was damaged or out of date ({replaced})")
                return db
            db.close()
            replaced = problem
            _delete_files(path)
    raise CharlieError(
        f"The search index {path} could not be created: stop Charlie, delete it, and start "
        "again; it is rebuilt from your note files."
    )


def _mark_rebuilt(db: sqlite3.Connection, why: str) -> None:
    """Record when and why the index was last started afresh (the health check shows it)."""
    value = f"{now()}: {why}; it is built again from the note files"
    db.execute(
        "INSERT INTO index_state VALUES ('rebuilt', ?) ON CONFLICT(key) DO UPDATE SET value = ?",
        (value, value),
    )


@dataclass
class RefreshReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    reembedded: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.reembedded)


@dataclass(frozen=True)
class Vectors:
    """Every chunk vector in memory, for brute-force cosine search. Rows are grouped by
    project, so one project's vectors are one contiguous slice (`spans`)."""

    chunk_ids: npt.NDArray[np.int64]
    note_ids: npt.NDArray[np.int64]
    project_ids: npt.NDArray[np.int64]
    matrix: Matrix
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)  # project id → rows

    def rows_of(self, project_ids: Sequence[int]) -> list[tuple[int, int]]:
        """The row ranges of these projects (none for a project without vectors)."""
        return [self.spans[p] for p in dict.fromkeys(project_ids) if p in self.spans]


def scope_token(project_id: int) -> str:
    """The project as one FTS5 token (`p12`): a search in some projects puts them in the
    MATCH, so FTS5 intersects posting lists instead of reading every match's row."""
    return f"p{project_id}"


FTS_FROM_CHUNKS = (
    "INSERT INTO chunks_fts (rowid, title, text, project, scope) "
    "SELECT chunks.id, CASE WHEN chunks.ord = 0 THEN notes.title ELSE '' END, chunks.text, "
    "notes.project, 'p' || notes.project_id FROM chunks JOIN notes ON notes.id = chunks.note_id"
)


def _carry_over(db: sqlite3.Connection, legacy: Path) -> str | None:
    """Copy the index an older Charlie kept in `legacy` (charlie.db) into this new, empty
    index file, vectors included, so nothing is embedded again. Returns why it could not
    be, for the person (the index is then built from the files)."""
    if db.execute("SELECT 1 FROM notes LIMIT 1").fetchone() is not None:
        return None  # another process has already built or carried over the index
    db.execute("ATTACH DATABASE ? AS legacy", (str(legacy),))
    try:
        with _transaction(db):
            version = db.execute(
                "SELECT value FROM legacy.index_state WHERE key = 'version'"
            ).fetchone()
            if version is None or version[0] not in ("1", "2"):
                raise _Skipped(f"it has an unknown version {version and version[0]!r}")
            db.execute(
                "INSERT INTO main.notes SELECT id, project_id, project, name, title, tags, path,"
                " mtime_ns, size, sha256, indexed_at FROM legacy.notes"
            )
            db.execute(
                "INSERT INTO main.chunks SELECT id, note_id, ord, text, vector FROM legacy.chunks"
            )
            db.execute(FTS_FROM_CHUNKS)
            db.execute(
                "INSERT OR REPLACE INTO main.index_state SELECT key, value FROM "
                "legacy.index_state WHERE key = 'embedder'"
            )
    except (sqlite3.DatabaseError, _Skipped) as exc:
        return f"the index an older Charlie left in charlie.db could not be carried over ({exc})"
    finally:
        db.execute("DETACH DATABASE legacy")
    return None


class _Skipped(Exception):
    """The old index is not one this version can carry over."""


def drop_legacy(db: sqlite3.Connection) -> str | None:
    """Drop the index tables an older Charlie kept in charlie.db (`db`). Tables too damaged
    to drop lose their schema entries instead, their pages left unused (a `VACUUM` of
    charlie.db reclaims them); returns a line saying so, or None."""
    try:
        with _transaction(db):
            for table in LEGACY_TABLES:
                db.execute(f"DROP TABLE IF EXISTS {table}")
        return None
    except sqlite3.DatabaseError as exc:
        if not (_is_damage(exc) or _code(exc) == SQLITE_ERROR):
            raise
        damage = exc
    names = [*LEGACY_TABLES, *LEGACY_SHADOWS]
    with _transaction(db):
        version = db.execute("PRAGMA schema_version").fetchone()[0]
        db.execute("PRAGMA writable_schema = ON")
        try:
            db.execute(
                f"DELETE FROM sqlite_master WHERE tbl_name IN ({', '.join('?' for _ in names)})",
                names,
            )
            db.execute(f"PRAGMA schema_version = {int(version) + 1}")
        finally:
            db.execute("PRAGMA writable_schema = OFF")
    return (
        f"the index an older Charlie left in charlie.db was damaged ({damage}); its tables "
        "were removed from charlie.db, their space left unused until `sqlite3 charlie.db "
        "VACUUM`"
    )


def status(home: Home) -> dict[str, Any]:
    """The index as the health check reports it, read without building or repairing it:
    its counts, its `state` ("ready", "not built", "damaged" or "unavailable", with an
    `error` saying what happens next) and `rebuilt`, when and why a damaged or old index
    was last replaced."""
    out: dict[str, Any] = {"notes": 0, "chunks": 0, "problems": 0, "model": None}
    out |= {"state": "not built", "rebuilt": None}
    path = home.index_path
    if not path.exists():
        return out
    try:
        with closing(sqlite3.connect(path, timeout=database.BUSY_TIMEOUT)) as db:
            out |= Index.stats_of(db)
            rebuilt = db.execute("SELECT value FROM index_state WHERE key = 'rebuilt'")
            out["rebuilt"] = next((str(row[0]) for row in rebuilt), None)
    except sqlite3.DatabaseError as exc:
        damaged = _is_damage(exc) or _code(exc) == SQLITE_ERROR
        out["state"] = "damaged" if damaged else "unavailable"
        out["error"] = f"The search index cannot be read ({exc}). " + (
            "The next search builds it again from the note files, or run `charlie reindex`."
            if damaged
            else "Searches fail until this is fixed; no note is lost."
        )
        return out
    out["state"] = "ready"
    return out


def _sha256_of(path: Path) -> str:
    """The sha256 of a note file's bytes, never read through a link: "" when it has gone,
    grown too big or become a link since it was read (it is then read again next time)."""
    try:
        data = read_bytes(path, MAX_NOTE_BYTES)
    except OSError:
        return ""
    return "" if data is None else hashlib.sha256(data).hexdigest()


def lock_of(home: Home) -> threading.RLock:
    """The lock the threads of one process take to refresh the index or replace its file:
    one per process, kept in `home.shared` (which the web app shares across requests)."""
    lock: threading.RLock = home.shared.setdefault("index_lock", threading.RLock())
    return lock


class Index:
    """The derived search index of a data home's notes."""

    def __init__(self, home: Home, embedder: Embedder) -> None:
        self.home = home
        self.embedder = embedder
        self.lock = lock_of(home)
        with self.lock:
            self._open()

    @property
    def db(self) -> sqlite3.Connection:
        """The connection to the index file (`home.index_db`)."""
        db = self.home.index_db
        return db if db is not None else self._open()

    # ------------------------------------------------------------ the file

    def _open(self) -> sqlite3.Connection:
        """The home's connection to the index file: kept while the file at the path is the
        one it opened, else (re)opened — and an index left in charlie.db carried over."""
        path = self.home.index_path
        db = cast(_Connection | None, self.home.index_db)
        if db is not None and db.inode == _inode(path):
            return db
        if db is not None:
            db.close()
            self.home.index_db = None
        legacy = self.home.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'index_state'"
        ).fetchone()
        try:
            with _file_lock(path):
                db = open_index_file(path, locked=True)
                carried = _carry_over(db, self.home.settings.db_path) if legacy else None
            self.home.index_db = db
            if carried is not None:
                _mark_rebuilt(db, carried)
        except sqlite3.DatabaseError as exc:
            raise self.unusable(exc) from exc
        if legacy:
            with database.storage_errors(self.home.settings.db_path):
                dropped = drop_legacy(self.home.db)
            if dropped is not None:
                _mark_rebuilt(db, dropped)
        return db

    def _replace(self, reason: str) -> None:
        """Start a new, empty index file in place of the one this process has open —
        unless another process has replaced it already, then just open theirs."""
        path = self.home.index_path
        db = cast(_Connection | None, self.home.index_db)
        if db is not None:
            db.close()
            self.home.index_db = None
            with _file_lock(path):
                if db.inode == _inode(path):
                    _delete_files(path)
        _mark_rebuilt(self._open(), reason)
        self._bump()

    def recover(self, exc: sqlite3.DatabaseError) -> None:
        """After `exc` from the index file: reopen it if another process has replaced it,
        and if it is damaged start a new one and fill it from the note files. Any other
        failure (a full disk, a busy file) is raised as the error to show the person."""
        with self.lock:
            if self._recover_file(exc):
                self.refresh()

    def _recover_file(self, exc: sqlite3.DatabaseError) -> bool:
        """Reopen or replace the index file after `exc`; whether it was replaced."""
        db = self.home.index_db
        if db is None or cast(_Connection, db).inode != _inode(self.home.index_path):
            self._open()  # another process has replaced it: theirs is new
            return False
        try:
            damaged = _is_damage(exc) or (_code(exc) == SQLITE_ERROR and _problem(db) is not None)
        except sqlite3.DatabaseError as again:
            raise self.unusable(again) from exc
        if not damaged:
            raise self.unusable(exc) from exc
        self._replace(f"the index was damaged ({exc})")
        return True

    def unusable(self, exc: sqlite3.Error) -> CharlieError:
        """The error to show when the index file cannot be used, even after a rebuild."""
        path = self.home.index_path
        if _is_damage(exc):
            return CharlieError(
                f"The search index {path} is damaged and could not be rebuilt ({exc}). Stop "
                "Charlie, delete that file and start Charlie again: it is built again from "
                "your note files, and no note is lost."
            )
        return database.explain(exc, path) or CharlieError(
            f"The search index {path} could not be used ({exc}). Run `charlie reindex` to "
            "rebuild it from your note files; no note is lost."
        )

    # ------------------------------------------------------------ state

    def _state(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM index_state WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_state(self, key: str, value: str) -> None:
        self.db.execute(
            "INSERT INTO index_state VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = ?",
            (key, value, value),
        )

    @property
    def model(self) -> str | None:
        """The embedding model that built the stored vectors."""
        return self._state("embedder")

    # ------------------------------------------------------------ refresh

    def rebuild(self) -> RefreshReport:
        """Forget the whole index (a new file) and read every note file again."""
        with self.lock:
            self._replace("`charlie reindex` was asked to")
            return self.refresh()

    def refresh(self, projects: Sequence[Project] | None = None) -> RefreshReport:
        """Bring the index up to date with the note files of `projects` (default: all).

        A damaged index file is replaced and filled again from the files."""
        with self.lock:
            try:
                self._open()  # another process may have replaced the file
                return self._refresh(projects)
            except sqlite3.DatabaseError as exc:
                self._recover_file(exc)
            try:
                return self._refresh(projects)
            except sqlite3.DatabaseError as exc:
                raise self.unusable(exc) from exc

    def _refresh(self, projects: Sequence[Project] | None) -> RefreshReport:
        report = RefreshReport()
        if self.model not in (None, self.embedder.name):
            report.reembedded = self._reembed()
        chosen = list_projects(self.home) if projects is None else list(projects)
        for project in chosen:
            self._refresh_project(project, report)
        if projects is None:
            known = {(p.slug, p.id) for p in chosen}
            indexed = self.db.execute("SELECT DISTINCT project, project_id FROM notes")
            for slug, project_id in indexed.fetchall():
                if (slug, project_id) not in known:
                    self._remove_project(slug, project_id, report)
        if self.model != self.embedder.name:
            self._set_state("embedder", self.embedder.name)
        if report.changed:
            self._bump()
        return report

    def _refresh_project(self, project: Project, report: RefreshReport) -> None:
        db = self.db
        root = notes_dir(project)
        indexed = {
            row["name"]: row
            for row in db.execute(
                "SELECT id, name, mtime_ns, size, sha256 FROM notes WHERE project_id = ?",
                (project.id,),
            )
        }
        found = find(project)
        problems = {str(link): LINK_REASON for link in found.links}  # never followed
        changed: list[tuple[Note, str, int, int]] = []
        seen: set[str] = set()
        for file in found.files:
            name, path = file.name, file.path
            row = indexed.get(name)
            if row is not None and (row["mtime_ns"], row["size"]) == (file.mtime_ns, file.size):
                seen.add(name)
                continue
            try:
                note = read_note(path, project.slug, root)
            except NoteFormatError as exc:
                problems[str(path)] = str(exc).removeprefix(f"{path}: ")
                continue
            seen.add(name)
            sha = _sha256_of(path)
            if row is not None and row["sha256"] == sha:
                db.execute(
                    "UPDATE notes SET mtime_ns = ?, size = ? WHERE id = ?",
                    (file.mtime_ns, file.size, row["id"]),
                )
                continue
            changed.append((note, sha, file.mtime_ns, file.size))
        self._store(project, changed, report)
        gone = [name for name in indexed if name not in seen]
        if gone:
            with _transaction(db):
                for name in gone:
                    if self._delete_named(project.id, name):
                        report.removed.append(f"{project.slug}/{name}")
        self._record_problems(project, problems, report)

    def _record_problems(
        self, project: Project, problems: dict[str, str], report: RefreshReport
    ) -> None:
        """Keep the project's note problems as found now (writing only what changed)."""
        report.problems += sorted(problems.items())
        db = self.db
        before = {
            row[0]: row[1]
            for row in db.execute(
                "SELECT path, reason FROM note_problems WHERE project = ?", (project.slug,)
            )
        }
        if before == problems:
            return
        with _transaction(db):
            for path in before.keys() - problems.keys():
                db.execute("DELETE FROM note_problems WHERE path = ?", (path,))
            for path, reason in problems.items():
                if before.get(path) != reason:
                    db.execute(
                        "INSERT OR REPLACE INTO note_problems VALUES (?, ?, ?, ?)",
                        (path, project.slug, reason, now()),
                    )

    def _store(
        self, project: Project, changed: list[tuple[Note, str, int, int]], report: RefreshReport
    ) -> None:
        """Chunk and embed the changed notes, then write them in one transaction per batch.

        What is indexed is read again inside the transaction: another process may have
        stored the same note while this one was embedding."""
        db = self.db
        for start in range(0, len(changed), EMBED_BATCH):
            batch = changed[start : start + EMBED_BATCH]
            pieces = [
                (note, chunk_text(note.body, CHUNK_WORDS, CHUNK_OVERLAP)) for note, *_ in batch
            ]
            texts = [
                f"{note.title}\n{chunk}" for note, chunks in pieces for chunk in chunks or [""]
            ]
            vectors = self.embedder.embed(texts)
            with _transaction(db):
                row = 0
                for (note, sha, mtime, size), (_, chunks) in zip(batch, pieces, strict=True):
                    existed = self._delete_named(project.id, note.name)
                    cursor = db.execute(
                        "INSERT INTO notes (project_id, project, name, title, tags, path, mtime_ns,"
                        " size, sha256, indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            project.id,
                            project.slug,
                            note.name,
                            note.title,
                            " ".join(note.tags),
                            str(note.path),
                            mtime,
                            size,
                            sha,
                            now(),
                        ),
                    )
                    note_id = cursor.lastrowid
                    for ord_, chunk in enumerate(chunks or [""]):
                        blob = vectors[row].astype(np.float32).tobytes()
                        row += 1
                        chunk_id = db.execute(
                            "INSERT INTO chunks (note_id, ord, text, vector) VALUES (?, ?, ?, ?)",
                            (note_id, ord_, chunk, blob),
                        ).lastrowid
                        db.execute(
                            "INSERT INTO chunks_fts (rowid, title, text, project, scope) "
                            "VALUES (?, ?, ?, ?, ?)",
                            (
                                chunk_id,
                                note.title if ord_ == 0 else "",
                                chunk,
                                project.slug,
                                scope_token(project.id),
                            ),
                        )
                    (report.updated if existed else report.added).append(note.key)

    def _delete_named(self, project_id: int, name: str) -> bool:
        """Delete note `name` of the project, if indexed (inside the caller's transaction)."""
        row = self.db.execute(
            "SELECT id FROM notes WHERE project_id = ? AND name = ?", (project_id, name)
        ).fetchone()
        if row is not None:
            self._delete_note(row[0])
        return row is not None

    def _delete_note(self, note_id: int) -> None:
        db = self.db
        db.execute(
            "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE note_id = ?)",
            (note_id,),
        )
        db.execute("DELETE FROM chunks WHERE note_id = ?", (note_id,))
        db.execute("DELETE FROM notes WHERE id = ?", (note_id,))

    def _remove_project(self, slug: str, project_id: int, report: RefreshReport) -> None:
        with _transaction(self.db) as db:
            rows = db.execute(
                "SELECT id, name FROM notes WHERE project = ? AND project_id = ?",
                (slug, project_id),
            ).fetchall()
            for row in rows:
                self._delete_note(row["id"])
                report.removed.append(f"{slug}/{row['name']}")

    def _reembed(self) -> int:
        """Vectors from another model are stale: embed every chunk again with this one."""
        rows = self.db.execute(
            "SELECT chunks.id, notes.title, chunks.text FROM chunks JOIN notes ON "
            "notes.id = chunks.note_id ORDER BY chunks.id"
        ).fetchall()
        for start in range(0, len(rows), EMBED_BATCH):
            batch = rows[start : start + EMBED_BATCH]
            vectors = self.embedder.embed([f"{r['title']}\n{r['text']}" for r in batch])
            with _transaction(self.db) as db:
                db.executemany(
                    "UPDATE chunks SET vector = ? WHERE id = ?",
                    [
                        (v.astype(np.float32).tobytes(), r["id"])
                        for v, r in zip(vectors, batch, strict=True)
                    ],
                )
        return len(rows)

    # ------------------------------------------------------------ reading

    def _bump(self) -> None:
        """Mark the index changed, so every process's cached vectors are reloaded."""
        self._set_state("generation", uuid.uuid4().hex)

    def vectors(self) -> Vectors:
        """All chunk vectors in memory, shared through the home's cache until the index changes
        (another process's refresh included: the generation mark lives in the database)."""
        generation = self._state("generation") or ""
        cached = self.home.shared.get("vectors")
        if cached is not None and cached[0] == generation:
            return cast(Vectors, cached[1])
        with self.lock:
            db = self.db
            db.execute("BEGIN")  # the mark and the rows from one snapshot
            try:
                generation = self._state("generation") or ""
                rows = db.execute(
                    "SELECT chunks.id, chunks.note_id, notes.project_id, chunks.vector FROM "
                    "chunks JOIN notes ON notes.id = chunks.note_id "
                    "ORDER BY notes.project_id, chunks.id"
                ).fetchall()
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")
            blob = b"".join(row[3] for row in rows)  # one copy, not one per row
            matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), self.embedder.dim)
            project_ids = np.array([r[2] for r in rows], dtype=np.int64)
            starts = np.flatnonzero(np.r_[True, project_ids[1:] != project_ids[:-1]])
            ends = np.r_[starts[1:], len(rows)]
            vectors = Vectors(
                np.array([r[0] for r in rows], dtype=np.int64),
                np.array([r[1] for r in rows], dtype=np.int64),
                project_ids,
                matrix,
                {
                    int(project_ids[a]): (int(a), int(b))
                    for a, b in zip(starts, ends, strict=True)
                    if len(rows)
                },
            )
            self.home.shared["vectors"] = (generation, vectors)
            return vectors

    def problems(self) -> list[tuple[str, str]]:
        return [
            (row[0], row[1])
            for row in self.db.execute("SELECT path, reason FROM note_problems ORDER BY path")
        ]

    def stats(self) -> dict[str, int | str | None]:
        return self.stats_of(self.db)

    @staticmethod
    def stats_of(db: sqlite3.Connection) -> dict[str, int | str | None]:
        """Counts of an index in `db` (which must exist), and the model that built it."""
        model = db.execute("SELECT value FROM index_state WHERE key = 'embedder'").fetchone()
        return {
            "notes": db.execute("SELECT count(*) FROM notes").fetchone()[0],
            "chunks": db.execute("SELECT count(*) FROM chunks").fetchone()[0],
            "problems": db.execute("SELECT count(*) FROM note_problems").fetchone()[0],
            "model": None if model is None else str(model[0]),
        }
