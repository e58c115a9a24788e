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

import hashlib
import sqlite3
import threading
import uuid
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt

from charlie import db as database
from charlie.db import now, transaction
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.jsonvalue import JSONObject
from charlie.notes.files import (
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
from charlie.retrieval import embeddings, index_file, postings
from charlie.retrieval.chunking import chunk_text
from charlie.retrieval.embeddings import Embedder
from charlie.retrieval.postings import Postings
from charlie.retrieval.vectors import VectorTable
from charlie.text import plural

CHUNK_WORDS = 120
CHUNK_OVERLAP = 30
EMBED_BATCH = 256
REEMBED = "reembedded_upto"  # index_state: "<model> <last chunk id>" while re-embedding
WORD_BATCH = 2000  # chunks whose words are kept in one transaction (`_word_chunks`)
STOP_EVERY = 64  # chunks embedded between two looks at the stop flag
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
    """Every chunk vector in memory, searched by cosine (`table`, see `retrieval.vectors`).
    Rows are grouped by project, so one project's vectors are one contiguous slice
    (`spans`)."""

    chunk_ids: npt.NDArray[np.int64]
    note_ids: npt.NDArray[np.int64]
    project_ids: npt.NDArray[np.int64]
    table: VectorTable
    spans: dict[int, tuple[int, int]] = field(default_factory=dict)  # project id → rows

    @property
    def matrix(self) -> Matrix:
        """One unit row per chunk, in the order of `chunk_ids`."""
        return self.table.matrix

    def rows_of(self, project_ids: Sequence[int]) -> list[tuple[int, int]]:
        """The row ranges of these projects (none for a project without vectors)."""
        return [self.spans[p] for p in dict.fromkeys(project_ids) if p in self.spans]


def scope_token(project_id: int) -> str:
    """The project as one FTS5 token (`p12`): a search in some projects puts them in the
    MATCH, so FTS5 intersects posting lists instead of reading every match's row."""
    return f"p{project_id}"


def status(home: Home) -> JSONObject:
    """The index as the health check reports it, read without building or repairing it:
    its counts, its `state` ("ready", "not built", "damaged" or "unavailable", with an
    `error` saying what happens next) and `rebuilt`, when and why a damaged or old index
    was last replaced."""
    out: JSONObject = {"notes": 0, "chunks": 0, "problems": 0, "model": None}
    out |= {"state": "not built", "rebuilt": None, "incomplete": None}
    path = home.index_path
    if not path.exists():
        return out
    try:
        with closing(sqlite3.connect(path, timeout=database.BUSY_TIMEOUT)) as db:
            out |= Index.stats_of(db)
            rebuilt = db.execute("SELECT value FROM index_state WHERE key = 'rebuilt'")
            out["rebuilt"] = next((str(row[0]) for row in rebuilt), None)
            filling = db.execute(
                "SELECT 1 FROM index_state WHERE key = ?", (index_file.FILLING,)
            ).fetchone()
    except sqlite3.DatabaseError as exc:
        damaged = index_file.is_damage(exc) or index_file.error_code(exc) == index_file.SQLITE_ERROR
        out["state"] = "damaged" if damaged else "unavailable"
        out["error"] = f"The search index cannot be read ({exc}). " + (
            "The next search builds it again from the note files, or run `charlie reindex`."
            if damaged
            else "Searches fail until this is fixed; no note is lost."
        )
        return out
    notes = int(str(out["notes"]))
    if filling is not None and not (notes == 0 and nothing_to_index(home)):
        state = "rebuilding" if out["rebuilt"] else "building"
        out |= {"state": state, "incomplete": incomplete_in_words(state, notes)}
        return out
    out["state"] = "ready"
    return out


def nothing_to_index(home: Home) -> bool:
    """Whether no project has a note file (a new home): an index still filling then misses
    nothing, and saying its results are incomplete would be false."""
    return not any(find(project).files for project in list_projects(home))


def incomplete_in_words(state: str, notes: int) -> str:
    """What to tell the person while the index fills: results are incomplete, and why."""
    doing = "being rebuilt" if state == "rebuilding" else "being built"
    return (
        f"The search index is {doing} from the note files ({notes} {plural(notes, 'note')}"
        " in so far): search results are incomplete until it is "
        "done. No note is lost."
    )


def _sha256_of(path: Path) -> str:
    """The sha256 of a note file's bytes, never read through a link: "" when it has gone,
    grown too big or become a link since it was read (it is then read again next time)."""
    try:
        data = read_bytes(path, MAX_NOTE_BYTES)
    except OSError:
        return ""
    return "" if data is None else hashlib.sha256(data).hexdigest()


@dataclass
class NoteIndex:
    """What one process keeps of the notes index across the homes it opens (`home.shared`,
    which the web app shares across requests)."""

    # Taken by the process's threads to refresh the index or replace its file.
    lock: threading.RLock = field(default_factory=threading.RLock)
    embedder: Embedder | None = None  # the embedding model, loaded once
    vectors: tuple[str, Vectors] | None = None  # (the index generation, its vectors)
    postings: tuple[str, Postings | None] | None = None  # (the generation, its chunks' words)
    stop: threading.Event = field(default_factory=threading.Event)  # set: the server stops


def lock_of(home: Home) -> threading.RLock:
    """The lock the threads of one process take to refresh the index or replace its file."""
    return home.shared.of(NoteIndex).lock


def embedder_of(home: Home) -> Embedder:
    """The process's embedding model, loaded on first use (notes and messages share it)."""
    kept = home.shared.of(NoteIndex)
    if kept.embedder is None:
        with kept.lock:
            if kept.embedder is None:
                kept.embedder = embeddings.from_settings(home.settings)
    return kept.embedder


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
        db = cast(index_file.Connection | None, self.home.index_db)
        if db is not None and db.inode == index_file.inode_of(path):
            return db
        if db is not None:
            db.close()
            self.home.index_db = None
        legacy = (
            isinstance(self.home.db, sqlite3.Connection)
            and self.home.db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'index_state'"
            ).fetchone()
        )  # an index an older Charlie kept in charlie.db (never in PostgreSQL)
        try:
            with index_file.file_lock(path):
                db = index_file.open_index_file(path, locked=True)
                carried = index_file.carry_over(db, self.home.settings.db_path) if legacy else None
            self.home.index_db = db
            if carried is not None:
                index_file.mark_rebuilt(db, carried)
        except sqlite3.DatabaseError as exc:
            raise self.unusable(exc) from exc
        if legacy and isinstance(self.home.db, sqlite3.Connection):
            with database.storage_errors(self.home.settings.db_path):
                dropped = index_file.drop_legacy(self.home.db)
            if dropped is not None:
                index_file.mark_rebuilt(db, dropped)
        return db

    def _replace(self, reason: str) -> None:
        """Start a new, empty index file in place of the one this process has open —
        unless another process has replaced it already, then just open theirs."""
        path = self.home.index_path
        db = cast(index_file.Connection | None, self.home.index_db)
        if db is not None:
            db.close()
            self.home.index_db = None
            with index_file.file_lock(path):
                if db.inode == index_file.inode_of(path):
                    index_file.delete_files(path)
        index_file.mark_rebuilt(self._open(), reason)
        self._bump()

    def recover(self, exc: sqlite3.DatabaseError) -> None:
        """After `exc` from the index file: reopen it if another process has replaced it,
        and if it is damaged start a new one and fill it from the note files. Any other
        failure (a full disk, a busy file) is raised as the error to show the person.

        Either way the notes are then checked against the file: a file another process has
        just made may still be filling, and its notes must be there before this search
        (what is already indexed is not indexed twice)."""
        with self.lock:
            self._recover_file(exc)
            self.refresh()

    def _recover_file(self, exc: sqlite3.DatabaseError) -> bool:
        """Reopen or replace the index file after `exc`; whether it was replaced."""
        db = self.home.index_db
        if db is None or cast(index_file.Connection, db).inode != index_file.inode_of(
            self.home.index_path
        ):
            self._open()  # another process has replaced it: theirs is new
            return False
        try:
            damaged = index_file.is_damage(exc) or (
                index_file.error_code(exc) == index_file.SQLITE_ERROR
                and index_file.what_is_wrong(db) is not None
            )
        except sqlite3.DatabaseError as again:
            raise self.unusable(again) from exc
        if not damaged:
            raise self.unusable(exc) from exc
        self._replace(f"the index was damaged ({exc})")
        return True

    def unusable(self, exc: sqlite3.Error) -> CharlieError:
        """The error to show when the index file cannot be used, even after a rebuild."""
        path = self.home.index_path
        if index_file.is_damage(exc):
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

    def state(self, key: str) -> str | None:
        """A value of the index's own state (`index_state`), None when never set."""
        row = self.db.execute("SELECT value FROM index_state WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_state(self, key: str, value: str) -> None:
        """Set a value of the index's state (inside the caller's transaction, if any)."""
        self.db.execute(
            "INSERT INTO index_state VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = ?",
            (key, value, value),
        )

    @property
    def model(self) -> str | None:
        """The embedding model that built the stored vectors."""
        return self.state("embedder")

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
        after = self._reembed_after()
        if after is not None:
            reembedded = self._reembed(after)
            if reembedded is None:
                return report  # the server stops: the rest is embedded at the next start
            report.reembedded = reembedded
        chosen = list_projects(self.home) if projects is None else list(projects)
        for project in chosen:
            self._refresh_project(project, report)
        if projects is None:
            known = {(p.slug, p.id) for p in chosen}
            indexed = self.db.execute("SELECT DISTINCT project, project_id FROM notes")
            for slug, project_id in indexed.fetchall():
                if (slug, project_id) not in known:
                    self._remove_project(slug, project_id, report)
        worded = self._word_chunks()
        if worded is None:
            return report  # the server stops: the rest is done at the next check
        if self.model != self.embedder.name:
            self.set_state("embedder", self.embedder.name)
        whole = projects is None and not self.home.shared.of(NoteIndex).stop.is_set()
        if whole and self.state(index_file.FILLING) is not None:  # every project is in
            self.db.execute("DELETE FROM index_state WHERE key = ?", (index_file.FILLING,))
        if report.changed or worded:
            self._bump()
        return report

    def _word_chunks(self) -> int | None:
        """Keep the words of the chunks stored before their words were kept
        (`charlie.retrieval.postings`; an index file from an older Charlie), a batch per
        transaction, so a process stopped mid-way goes on from there. How many chunks; None
        when the server stopped it."""
        if self.state(index_file.UNWORDED) is None:
            return 0
        stop = self.home.shared.of(NoteIndex).stop
        done = last = 0
        while True:
            if stop.is_set():
                return None
            rows = self.db.execute(
                "SELECT chunks.id, CASE WHEN chunks.ord = 0 THEN notes.title ELSE '' END, "
                "chunks.text, notes.project_id FROM chunks JOIN notes ON notes.id = chunks.note_id "
                "LEFT JOIN chunk_terms ON chunk_terms.chunk_id = chunks.id "
                "WHERE chunks.id > ? AND chunk_terms.chunk_id IS NULL ORDER BY chunks.id LIMIT ?",
                (last, WORD_BATCH),
            ).fetchall()
            if not rows:
                self.db.execute("DELETE FROM index_state WHERE key = ?", (index_file.UNWORDED,))
                return done
            with transaction(self.db) as db:
                postings.store(db, [(r[0], r[1], r[2], scope_token(r[3])) for r in rows])
            done, last = done + len(rows), rows[-1][0]

    def reembedding(self) -> tuple[int, int] | None:
        """(passages done, passages in all) while the notes are to be embedded again for
        this model, or None when every stored vector is this model's."""
        after = self._reembed_after()
        if after is None:
            return None
        done, total = self.db.execute(
            "SELECT coalesce(sum(id <= ?), 0), count(*) FROM chunks", (after,)
        ).fetchone()
        return int(done), int(total)

    def incomplete(self) -> str | None:
        """Why this index's results are incomplete (it is still being filled, or its notes
        are being embedded again for this model), or None."""
        reembedding = self.reembedding()
        if reembedding is not None:
            done, total = reembedding
            return (
                f"The notes are being embedded again for the model {self.embedder.name} "
                f"({done} of {total} {plural(total, 'passage')} so far): until it is "
                "done, search results may miss some notes or rank them differently. No note is "
                "lost."
            )
        if self.state(index_file.FILLING) is None:
            return None
        notes = int(self.db.execute("SELECT count(*) FROM notes").fetchone()[0])
        if notes == 0 and nothing_to_index(self.home):
            return None
        return incomplete_in_words("rebuilding" if self.state("rebuilt") else "building", notes)

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
            with transaction(db):
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
        with transaction(db):
            for path in before.keys() - problems.keys():
                db.execute("DELETE FROM note_problems WHERE path = ?", (path,))
            for path, reason in problems.items():
                if before.get(path) != reason:
                    db.execute(
                        "INSERT OR REPLACE INTO note_problems VALUES (?, ?, ?, ?)",
                        (path, project.slug, reason, now()),
                    )

    def _embed(
        self, texts: list[str], stop: threading.Event | None
    ) -> npt.NDArray[np.float32] | None:
        """The texts' vectors, a slice at a time so a stop (`stop`, the server stopping) is
        heard within a second or two even in a long document; None when stopped."""
        if stop is None:
            return self.embedder.embed(texts)
        parts = []
        for start in range(0, len(texts), STOP_EVERY):
            if stop.is_set():
                return None
            parts.append(self.embedder.embed(texts[start : start + STOP_EVERY]))
        return np.concatenate(parts) if parts else self.embedder.embed([])

    def _store(
        self, project: Project, changed: list[tuple[Note, str, int, int]], report: RefreshReport
    ) -> None:
        """Chunk and embed the changed notes, then write them in one transaction per batch.

        What is indexed is read again inside the transaction: another process may have
        stored the same note while this one was embedding."""
        db = self.db
        stop = self.home.shared.of(NoteIndex).stop  # set: the server stops
        for start in range(0, len(changed), EMBED_BATCH):
            if stop.is_set():
                return  # the rest waits for the next check: the files are the truth
            batch = changed[start : start + EMBED_BATCH]
            pieces = [
                (note, chunk_text(note.body, CHUNK_WORDS, CHUNK_OVERLAP)) for note, *_ in batch
            ]
            texts = [
                f"{note.title}\n{chunk}" for note, chunks in pieces for chunk in chunks or [""]
            ]
            vectors = self._embed(texts, stop)
            if vectors is None:
                return  # the server stops: the rest waits for the next check
            with transaction(db):
                row = 0
                worded: list[tuple[int, str, str, str]] = []
                for (note, sha, mtime, size), (_, chunks) in zip(batch, pieces, strict=True):
                    same = db.execute(
                        "SELECT id FROM notes WHERE project_id = ? AND name = ? AND sha256 = ?",
                        (project.id, note.name, sha),
                    ).fetchone()
                    if same is not None:  # another process stored this very note meanwhile:
                        row += len(chunks or [""])  # keep its rows (a search may hold their ids)
                        db.execute(
                            "UPDATE notes SET mtime_ns = ?, size = ? WHERE id = ?",
                            (mtime, size, same[0]),
                        )
                        continue
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
                        title, scope = note.title if ord_ == 0 else "", scope_token(project.id)
                        db.execute(
                            "INSERT INTO chunks_fts (rowid, title, text, project, scope) "
                            "VALUES (?, ?, ?, ?, ?)",
                            (chunk_id, title, chunk, project.slug, scope),
                        )
                        worded.append((int(chunk_id or 0), title, chunk, scope))
                    (report.updated if existed else report.added).append(note.key)
                postings.store(db, worded)  # the batch's words at once: 0.3 ms a chunk

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
        db.execute(
            "DELETE FROM chunk_terms WHERE chunk_id IN (SELECT id FROM chunks WHERE note_id = ?)",
            (note_id,),
        )
        db.execute("DELETE FROM chunks WHERE note_id = ?", (note_id,))
        db.execute("DELETE FROM notes WHERE id = ?", (note_id,))

    def _remove_project(self, slug: str, project_id: int, report: RefreshReport) -> None:
        with transaction(self.db) as db:
            rows = db.execute(
                "SELECT id, name FROM notes WHERE project = ? AND project_id = ?",
                (slug, project_id),
            ).fetchall()
            for row in rows:
                self._delete_note(row["id"])
                report.removed.append(f"{slug}/{row['name']}")

    def _reembed_after(self) -> int | None:
        """The chunk id after which chunks must be embedded again with this model (0: all),
        or None when every stored vector is this model's.

        A re-embedding stores with each batch a mark of how far it got (`REEMBED`: the
        model's name and the last chunk id); this model's mark says where to go on, another
        model's says that a re-embedding to it was cut short and its first chunks hold its
        vectors."""
        name = self.embedder.name
        model, _, last = (self.state(REEMBED) or "").rpartition(" ")
        if model == name and last.isdigit():
            return int(last)
        if model or self.model not in (None, name):
            return 0
        return None

    def _reembed(self, after: int) -> int | None:
        """Vectors from another model are stale: embed every chunk after the id `after`
        again with this one, each batch stored with its mark in the same transaction, so a
        process killed or stopped mid-way goes on from there next time and embeds no chunk
        twice. The number of chunks this call embedded; None when the server stopped it."""
        name = self.embedder.name
        rows = self.db.execute(
            "SELECT chunks.id, notes.title, chunks.text FROM chunks JOIN notes ON "
            "notes.id = chunks.note_id WHERE chunks.id > ? ORDER BY chunks.id",
            (after,),
        ).fetchall()
        stop = self.home.shared.of(NoteIndex).stop
        for start in range(0, len(rows), EMBED_BATCH):
            if stop.is_set():
                return None
            batch = rows[start : start + EMBED_BATCH]
            vectors = self.embedder.embed([f"{r['title']}\n{r['text']}" for r in batch])
            with transaction(self.db) as db:
                db.executemany(
                    "UPDATE chunks SET vector = ? WHERE id = ?",
                    [
                        (v.astype(np.float32).tobytes(), r["id"])
                        for v, r in zip(vectors, batch, strict=True)
                    ],
                )
                self.set_state(REEMBED, f"{name} {batch[-1]['id']}")
        self.db.execute("DELETE FROM index_state WHERE key = ?", (REEMBED,))
        return len(rows)

    # ------------------------------------------------------------ reading

    def _bump(self) -> None:
        """Mark the index changed, so every process's cached vectors are reloaded."""
        self.set_state("generation", uuid.uuid4().hex)

    @property
    def generation(self) -> str:
        """A mark that changes whenever the indexed notes do, whichever process changed them."""
        return self.state("generation") or ""

    def vectors(self) -> Vectors:
        """All chunk vectors in memory, shared through the home's cache until the index changes
        (another process's refresh included: the generation mark lives in the database)."""
        generation = self.state("generation") or ""
        kept = self.home.shared.of(NoteIndex)
        cached = kept.vectors
        if (
            cached is not None
            and cached[0] == generation
            and cached[1].table.dim == self.embedder.dim
        ):
            return cached[1]
        with self.lock:
            db = self.db
            db.execute("BEGIN")  # the mark and the rows from one snapshot
            try:
                generation = self.state("generation") or ""
                rows = db.execute(
                    "SELECT chunks.id, chunks.note_id, notes.project_id, chunks.vector FROM "
                    "chunks JOIN notes ON notes.id = chunks.note_id "
                    "ORDER BY notes.project_id, chunks.id"
                ).fetchall()
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")
            # A re-embedding to a model of another size, cut short, leaves vectors of both
            # sizes: this model's are searched, the rest wait for it (their words are found).
            size = 4 * self.embedder.dim
            rows = [row for row in rows if row[3] is not None and len(row[3]) == size]
            blob = b"".join(row[3] for row in rows)  # one copy, not one per row
            matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), self.embedder.dim)
            project_ids = np.array([r[2] for r in rows], dtype=np.int64)
            starts = np.flatnonzero(np.r_[True, project_ids[1:] != project_ids[:-1]])
            ends = np.r_[starts[1:], len(rows)]
            vectors = Vectors(
                np.array([r[0] for r in rows], dtype=np.int64),
                np.array([r[1] for r in rows], dtype=np.int64),
                project_ids,
                VectorTable(matrix),
                {
                    int(project_ids[a]): (int(a), int(b))
                    for a, b in zip(starts, ends, strict=True)
                    if len(rows)
                },
            )
            kept.vectors = (generation, vectors)
            return vectors

    def postings(self) -> Postings | None:
        """Every chunk's words as posting lists (`charlie.retrieval.postings`), shared like
        `vectors` until the index changes; None while some chunk's words are not kept yet
        (the next refresh keeps them), when searches rank with FTS5's bm25() instead."""
        generation = self.state("generation") or ""
        kept = self.home.shared.of(NoteIndex)
        cached = kept.postings
        if cached is not None and cached[0] == generation:
            return cached[1]
        with self.lock:
            db = self.db
            db.execute("BEGIN")  # the mark and the rows from one snapshot
            try:
                generation = self.state("generation") or ""
                records = db.execute(
                    "SELECT chunks.id, chunks.note_id, notes.project_id, chunk_terms.length, "
                    "chunk_terms.pairs FROM chunks JOIN notes ON notes.id = chunks.note_id "
                    "JOIN chunk_terms ON chunk_terms.chunk_id = chunks.id ORDER BY chunks.id"
                ).fetchall()
                rows = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")
            built = Postings.build(records) if len(records) == rows else None
            kept.postings = (generation, built)
            return built

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
