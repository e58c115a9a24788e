"""The search index: note chunks, their vectors and an FTS5 table, all derived from the files.

Nothing here is a source of truth. `refresh` brings the index up to date with the note files
cheaply (a stat per file; only changed files are read, chunked and embedded), `rebuild`
drops everything and reads the files again. The index remembers which embedding model built
its vectors and re-embeds when the model changes. Indexing never writes to a note file.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt

from charlie.chunking import chunk_text
from charlie.db import now, run_script
from charlie.embeddings import Embedder
from charlie.home import Home
from charlie.keywords import FTS5_TOKENIZE
from charlie.notes import Note, NoteFormatError, notes_dir, read_note, scan
from charlie.projects import Project, list_projects

INDEX_VERSION = "2"  # 2: chunks_fts gained `scope`, the project as one indexed token
CHUNK_WORDS = 120
CHUNK_OVERLAP = 30
EMBED_BATCH = 256

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS index_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL REFERENCES projects(id),
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
TABLES = ["chunks_vocab", "chunks_fts", "chunks", "notes", "note_problems", "index_state"]

Matrix = npt.NDArray[np.float32]


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


def _drop(db: sqlite3.Connection) -> None:
    for table in TABLES:
        db.execute(f"DROP TABLE IF EXISTS {table}")


def scope_token(project_id: int) -> str:
    """The project as one FTS5 token (`p12`): a search in some projects puts them in the
    MATCH, so FTS5 intersects posting lists instead of reading every match's row."""
    return f"p{project_id}"


def _fts_from_chunks(db: sqlite3.Connection) -> None:
    """Version 1 → 2: rebuild only the full-text table from the stored chunks (the vectors
    are kept, so nothing is embedded again)."""
    db.execute("DROP TABLE IF EXISTS chunks_vocab")
    db.execute("DROP TABLE IF EXISTS chunks_fts")
    run_script(db, SCHEMA)
    db.execute(
        "INSERT INTO chunks_fts (rowid, title, text, project, scope) "
        "SELECT chunks.id, CASE WHEN chunks.ord = 0 THEN notes.title ELSE '' END, chunks.text, "
        "notes.project, 'p' || notes.project_id FROM chunks JOIN notes ON notes.id = chunks.note_id"
    )
    db.execute("UPDATE index_state SET value = ? WHERE key = 'version'", (INDEX_VERSION,))


def ensure_schema(db: sqlite3.Connection) -> None:
    """Create the index tables; a different index version (or a damaged table) is rebuilt."""
    try:
        run_script(db, SCHEMA)
        row = db.execute("SELECT value FROM index_state WHERE key = 'version'").fetchone()
        if row is not None and row[0] == "1":
            _fts_from_chunks(db)
            row = (INDEX_VERSION,)
        if row is not None and row[0] == INDEX_VERSION:
            db.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'probe'").fetchone()
            db.execute("SELECT id, note_id, ord, text, vector FROM chunks LIMIT 1").fetchall()
            return
    except sqlite3.DatabaseError:
        pass  # damaged or from another version: the index is derived, rebuild it
    _drop(db)
    run_script(db, SCHEMA)
    db.execute("INSERT INTO index_state VALUES ('version', ?)", (INDEX_VERSION,))


class Index:
    """The derived search index of a data home's notes."""

    def __init__(self, home: Home, embedder: Embedder) -> None:
        self.home = home
        self.embedder = embedder
        self._lock = threading.Lock()
        ensure_schema(home.db)

    # ------------------------------------------------------------ state

    def _state(self, key: str) -> str | None:
        row = self.home.db.execute("SELECT value FROM index_state WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_state(self, key: str, value: str) -> None:
        self.home.db.execute(
            "INSERT INTO index_state VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = ?",
            (key, value, value),
        )

    @property
    def model(self) -> str | None:
        """The embedding model that built the stored vectors."""
        return self._state("embedder")

    # ------------------------------------------------------------ refresh

    def rebuild(self) -> RefreshReport:
        """Forget the whole index and read every note file again."""
        with self._lock:
            _drop(self.home.db)
            ensure_schema(self.home.db)
            self._bump()
        return self.refresh()

    def refresh(self, projects: Sequence[Project] | None = None) -> RefreshReport:
        """Bring the index up to date with the note files of `projects` (default: all)."""
        report = RefreshReport()
        with self._lock:
            if self.model not in (None, self.embedder.name):
                report.reembedded = self._reembed()
            chosen = list_projects(self.home) if projects is None else list(projects)
            for project in chosen:
                self._refresh_project(project, report)
            if projects is None:
                known = {p.slug for p in chosen}
                for (name,) in self.home.db.execute("SELECT DISTINCT project FROM notes"):
                    if name not in known:
                        self._remove_project(name, report)
            self._set_state("embedder", self.embedder.name)
            if report.changed:
                self._bump()
        return report

    def _refresh_project(self, project: Project, report: RefreshReport) -> None:
        db = self.home.db
        root = notes_dir(project)
        indexed = {
            row["name"]: row
            for row in db.execute(
                "SELECT id, name, mtime_ns, size, sha256 FROM notes WHERE project_id = ?",
                (project.id,),
            )
        }
        changed: list[tuple[Note, str, int, int]] = []
        seen: set[str] = set()
        for file in scan(project):
            name, path = file.name, file.path
            row = indexed.get(name)
            if row is not None and (row["mtime_ns"], row["size"]) == (file.mtime_ns, file.size):
                seen.add(name)
                continue
            try:
                note = read_note(path, project.slug, root)
            except NoteFormatError as exc:
                reason = str(exc).removeprefix(f"{path}: ")
                report.problems.append((str(path), reason))
                db.execute(
                    "INSERT OR REPLACE INTO note_problems VALUES (?, ?, ?, ?)",
                    (str(path), project.slug, reason, now()),
                )
                continue
            seen.add(name)
            db.execute("DELETE FROM note_problems WHERE path = ?", (str(path),))
            sha = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""
            if row is not None and row["sha256"] == sha:
                db.execute(
                    "UPDATE notes SET mtime_ns = ?, size = ? WHERE id = ?",
                    (file.mtime_ns, file.size, row["id"]),
                )
                continue
            changed.append((note, sha, file.mtime_ns, file.size))
        self._store(project, changed, indexed, report)
        for name, row in indexed.items():
            if name not in seen:
                self._delete_note(row["id"])
                report.removed.append(f"{project.slug}/{name}")

    def _store(
        self,
        project: Project,
        changed: list[tuple[Note, str, int, int]],
        indexed: dict[str, sqlite3.Row],
        report: RefreshReport,
    ) -> None:
        """Chunk and embed the changed notes, then write them in one transaction."""
        for start in range(0, len(changed), EMBED_BATCH):
            batch = changed[start : start + EMBED_BATCH]
            pieces = [
                (note, chunk_text(note.body, CHUNK_WORDS, CHUNK_OVERLAP)) for note, *_ in batch
            ]
            texts = [
                f"{note.title}\n{chunk}" for note, chunks in pieces for chunk in chunks or [""]
            ]
            vectors = self.embedder.embed(texts)
            db = self.home.db
            db.execute("BEGIN IMMEDIATE")
            try:
                row = 0
                for (note, sha, mtime, size), (_, chunks) in zip(batch, pieces, strict=True):
                    old = indexed.get(note.name)
                    if old is not None:
                        self._delete_note(old["id"])
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
                    (report.updated if old is not None else report.added).append(note.key)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _delete_note(self, note_id: int) -> None:
        db = self.home.db
        db.execute(
            "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE note_id = ?)",
            (note_id,),
        )
        db.execute("DELETE FROM chunks WHERE note_id = ?", (note_id,))
        db.execute("DELETE FROM notes WHERE id = ?", (note_id,))

    def _remove_project(self, slug: str, report: RefreshReport) -> None:
        for row in self.home.db.execute("SELECT id, name FROM notes WHERE project = ?", (slug,)):
            self._delete_note(row["id"])
            report.removed.append(f"{slug}/{row['name']}")

    def _reembed(self) -> int:
        """Vectors from another model are stale: embed every chunk again with this one."""
        db = self.home.db
        rows = db.execute(
            "SELECT chunks.id, notes.title, chunks.text FROM chunks JOIN notes ON "
            "notes.id = chunks.note_id ORDER BY chunks.id"
        ).fetchall()
        for start in range(0, len(rows), EMBED_BATCH):
            batch = rows[start : start + EMBED_BATCH]
            vectors = self.embedder.embed([f"{r['title']}\n{r['text']}" for r in batch])
            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                "UPDATE chunks SET vector = ? WHERE id = ?",
                [
                    (v.astype(np.float32).tobytes(), r["id"])
                    for v, r in zip(vectors, batch, strict=True)
                ],
            )
            db.execute("COMMIT")
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
        with self._lock:
            rows = self.home.db.execute(
                "SELECT chunks.id, chunks.note_id, notes.project_id, chunks.vector FROM chunks "
                "JOIN notes ON notes.id = chunks.note_id ORDER BY notes.project_id, chunks.id"
            ).fetchall()
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
            for row in self.home.db.execute("SELECT path, reason FROM note_problems ORDER BY path")
        ]

    def stats(self) -> dict[str, int | str | None]:
        return self.stats_of(self.home.db)

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


def note_root(project: Project) -> Path:
    return notes_dir(project)
