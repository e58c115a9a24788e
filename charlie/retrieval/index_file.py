"""The index's own SQLite file (`index.db`): its schema, opening it, telling damage from
other failures, replacing a damaged file, and carrying over an index an older Charlie kept in
`charlie.db`. `charlie.retrieval.index` builds on it; nothing here knows about notes.

A damaged file (SQLITE_CORRUPT, SQLITE_NOTADB, a missing or unreadable table) is replaced by
a new one. Opening and replacing the file hold an advisory lock on `index.db.lock`, and a
process replaces only the file it found damaged (same inode): one that finds a newer file at
the path just reopens it.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from charlie import db as database
from charlie import files
from charlie.db import now, run_script, transaction
from charlie.errors import CharlieError, DatabaseNotWritable
from charlie.retrieval import message_vectors
from charlie.retrieval.keywords import FTS5_TOKENIZE
from charlie.retrieval.postings import TERM_SCHEMA

INDEX_VERSION = "2"  # 2: chunks_fts gained `scope`, the project as one indexed token
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
# Messages (`charlie.retrieval.message_index`): a vector per message, and its words with the
# words of the messages around it. Added to a version-2 file in place (`add_message_tables`).
MESSAGE_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL,
    at REAL NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_conversation ON messages(conversation_id, at);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    speaker, text, context, scope, tokenize = '{FTS5_TOKENIZE}'
);
"""
# Reads that touch the root page of every table, so a damaged file is found on open.
PROBES = [
    "SELECT value FROM index_state WHERE key = 'version'",
    "SELECT id, project_id, name, mtime_ns, size, sha256 FROM notes LIMIT 1",
    "SELECT id, note_id, ord, text, vector FROM chunks LIMIT 1",
    "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'probe'",
    "SELECT path FROM note_problems LIMIT 1",
    "SELECT id, conversation_id, at, vector FROM messages LIMIT 1",
    "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'probe'",
    "SELECT id, term FROM terms LIMIT 1",
    "SELECT chunk_id, length, pairs FROM chunk_terms LIMIT 1",
]
# The tables an older Charlie kept in charlie.db (FTS5's own shadow tables included).
LEGACY_TABLES = ["chunks_vocab", "chunks_fts", "chunks", "notes", "note_problems", "index_state"]
LEGACY_SHADOWS = [f"chunks_fts_{part}" for part in ("data", "idx", "content", "docsize", "config")]


class Connection(sqlite3.Connection):
    """A connection to the index file that remembers which file it opened (its inode), so
    a process can tell the file it found damaged from a new one another process made."""

    inode: int | None = None


def inode_of(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold the advisory lock that opening and replacing the index file take, across the
    processes of a data home."""
    folder = Path(path).parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # a new CHARLIE_LOCAL_DIR
        handle = open(f"{path}.lock", "a+b")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise DatabaseNotWritable(
            f"The search index cannot be kept in {folder} ({exc.strerror or exc}). Set "
            "CHARLIE_LOCAL_DIR to a folder this account may write, or leave it unset to keep "
            "the index in the data home."
        ) from exc
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def claim(path: Path, what: str, *, wait: bool) -> Iterator[bool]:
    """Hold the claim on `what` ("embedding", "indexer") of the index file at `path`, across
    the threads and processes of a data home: yields True once held, or False at once when
    another holds it and `wait` is false. A killed holder's claim ends with its process."""
    with files.locked(f"{path}.{what}.lock", wait=wait) as held:
        yield held


def delete_files(path: Path) -> None:
    """Remove the index file and its write-ahead log. A process that still has the old file
    open keeps reading it, and SQLite never checkpoints into a file that has moved."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    message_vectors.drop_file(message_vectors.file_path(path))


def error_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether `exc` says the file is damaged; SQLITE_ERROR ("no such table", "vtable
    constructor failed") only counts when the probes fail too (see `problem`)."""
    return error_code(exc) in database.DAMAGED


def what_is_wrong(db: sqlite3.Connection) -> str | None:
    """What is wrong with the index in `db` (a table that cannot be read, another index
    version), or None when it is sound."""
    try:
        version = db.execute(PROBES[0]).fetchone()
        for probe in PROBES[1:]:
            db.execute(probe).fetchall()
    except sqlite3.DatabaseError as exc:
        if is_damage(exc) or error_code(exc) == SQLITE_ERROR:
            return str(exc)
        raise  # busy, full, I/O: the file may be fine
    if version is None:
        return "it has no version"
    if version[0] != INDEX_VERSION:
        return f"it is index version {version[0]}, not {INDEX_VERSION}"
    return None


def connect(path: Path) -> Connection:
    database.keep_private(path)  # its FTS5 tables hold the words of private channels too
    db = sqlite3.connect(
        path,
        timeout=database.BUSY_TIMEOUT,
        isolation_level=None,
        check_same_thread=False,
        factory=Connection,
    )
    try:
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode = WAL")  # reads the header: a non-database fails here
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("PRAGMA secure_delete = ON")  # a forgotten message's words leave the file
    except BaseException:
        db.close()
        raise
    db.inode = inode_of(path)
    return db


# index_state key: set while some chunks may lack their words in `chunk_terms` (a file from
# before they were kept, an index carried over), gone once the refresh has kept them all.
UNWORDED = "unworded"
FILLING = "filling"  # index_state key: set when a file is made, gone once every project is in


def create(db: sqlite3.Connection) -> None:
    """Create the tables of a new (or emptied) index file, marked as still filling: until a
    check of every project's files has finished, searches say their results are incomplete."""
    with transaction(db):
        run_script(db, SCHEMA + MESSAGE_SCHEMA + TERM_SCHEMA)
        db.execute(
            "INSERT INTO index_state VALUES ('version', ?) ON CONFLICT(key) DO NOTHING",
            (INDEX_VERSION,),
        )
        db.execute(
            "INSERT INTO index_state VALUES (?, ?) ON CONFLICT(key) DO NOTHING", (FILLING, now())
        )


def open_index_file(path: Path, *, locked: bool = False) -> Connection:
    """A connection to a sound index file at `path`: created when missing, and replaced
    by a new, empty one when it is damaged or from another index version (saying so in
    its `rebuilt` state). `locked`: the caller holds the file lock already."""
    replaced: str | None = None
    with nullcontext() if locked else file_lock(path):  # nobody replaces it meanwhile
        for attempt in (1, 2):
            try:
                db = connect(path)
            except sqlite3.DatabaseError as exc:
                if attempt == 2 or not is_damage(exc):
                    raise
                replaced = str(exc)
                delete_files(path)
                continue
            try:
                add_message_tables(db)
                add_term_tables(db)
                if what_is_wrong(db) is not None:
                    create(db)  # a new file; or a damaged one, which stays damaged
                problem = what_is_wrong(db)
            except sqlite3.DatabaseError as exc:
                if attempt == 2 or not (is_damage(exc) or error_code(exc) == SQLITE_ERROR):
                    db.close()
                    raise
                problem = str(exc)
            if problem is None:
                if replaced is not None:
                    mark_rebuilt(db, f"the index file was damaged or out of date ({replaced})")
                return db
            db.close()
            replaced = problem
            delete_files(path)
    raise CharlieError(
        f"The search index {path} could not be created: stop Charlie, delete it, and start "
        "again; it is rebuilt from your note files."
    )


def add_message_tables(db: sqlite3.Connection) -> None:
    """Give an index file of this version made before messages were indexed its message
    tables, keeping its notes (nothing to embed again). A file with only one of the two is
    damaged, not old: that is left for the probes, as is any failure."""
    try:
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        if "index_state" in names and not names & {"messages", "messages_fts"}:
            with transaction(db):
                run_script(db, MESSAGE_SCHEMA)
    except sqlite3.DatabaseError:
        return


def add_term_tables(db: sqlite3.Connection) -> None:
    """Give an index file of this version made before each chunk's words were kept
    (`charlie.retrieval.postings`) its two empty tables: the next refresh fills them from the
    chunks, embedding nothing. A file with only one of the two lost the other: the words
    kept name their terms by id, so both start again empty, and are filled the same way."""
    try:
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        present = names & {"terms", "chunk_terms"}
        if "index_state" in names and len(present) < 2:
            with transaction(db):
                for name in sorted(present):
                    db.execute(f"DROP TABLE {name}")
                run_script(db, TERM_SCHEMA)
                db.execute("INSERT OR REPLACE INTO index_state VALUES (?, ?)", (UNWORDED, now()))
    except sqlite3.DatabaseError:
        return


def mark_rebuilt(db: sqlite3.Connection, why: str) -> None:
    """Record when and why the index was last started afresh (the health check shows it)."""
    value = f"{now()}: {why}; it is built again from the note files"
    db.execute(
        "INSERT INTO index_state VALUES ('rebuilt', ?) ON CONFLICT(key) DO UPDATE SET value = ?",
        (value, value),
    )


FTS_FROM_CHUNKS = (
    "INSERT INTO chunks_fts (rowid, title, text, project, scope) "
    "SELECT chunks.id, CASE WHEN chunks.ord = 0 THEN notes.title ELSE '' END, chunks.text, "
    "notes.project, 'p' || notes.project_id FROM chunks JOIN notes ON notes.id = chunks.note_id"
)


def carry_over(db: sqlite3.Connection, legacy: Path) -> str | None:
    """Copy the index an older Charlie kept in `legacy` (charlie.db) into this new, empty
    index file, vectors included, so nothing is embedded again. Returns why it could not
    be, for the person (the index is then built from the files)."""
    if db.execute("SELECT 1 FROM notes LIMIT 1").fetchone() is not None:
        return None  # another process has already built or carried over the index
    db.execute("ATTACH DATABASE ? AS legacy", (str(legacy),))
    try:
        with transaction(db):
            version = db.execute(
                "SELECT value FROM legacy.index_state WHERE key = 'version'"
            ).fetchone()
            if version is None or version[0] not in ("1", "2"):
                raise Skipped(f"it has an unknown version {version and version[0]!r}")
            db.execute(
                "INSERT INTO main.notes SELECT id, project_id, project, name, title, tags, path,"
                " mtime_ns, size, sha256, indexed_at FROM legacy.notes"
            )
            db.execute(
                "INSERT INTO main.chunks SELECT id, note_id, ord, text, vector FROM legacy.chunks"
            )
            db.execute(FTS_FROM_CHUNKS)
            db.execute("INSERT OR REPLACE INTO index_state VALUES (?, ?)", (UNWORDED, now()))
            db.execute(
                "INSERT OR REPLACE INTO main.index_state SELECT key, value FROM "
                "legacy.index_state WHERE key = 'embedder'"
            )
    except (sqlite3.DatabaseError, Skipped) as exc:
        return f"the index an older Charlie left in charlie.db could not be carried over ({exc})"
    finally:
        db.execute("DETACH DATABASE legacy")
    return None


class Skipped(Exception):
    """The old index is not one this version can carry over."""


def drop_legacy(db: sqlite3.Connection) -> str | None:
    """Drop the index tables an older Charlie kept in charlie.db (`db`). Tables too damaged
    to drop lose their schema entries instead, their pages left unused (a `VACUUM` of
    charlie.db reclaims them); returns a line saying so, or None."""
    try:
        with transaction(db):
            for table in LEGACY_TABLES:
                db.execute(f"DROP TABLE IF EXISTS {table}")
        return None
    except sqlite3.DatabaseError as exc:
        if not (is_damage(exc) or error_code(exc) == SQLITE_ERROR):
            raise
        damage = exc
    names = [*LEGACY_TABLES, *LEGACY_SHADOWS]
    with transaction(db):
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
