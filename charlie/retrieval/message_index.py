"""The search index of messages: every stored message, found again by meaning and by words.

Messages live in `charlie.db` (the source of truth); this index is derived from them and kept
in the index file beside the notes' (`index.db`), so whatever happens to it, it is built
again from the messages. Each message gets:

- a vector of its own words ("Speaker: text"), embedded once, when it is indexed;
- an FTS5 row holding its speaker, its text and, as `context`, the messages just before and
  after it in the same conversation (when they are under `CONTEXT_GAP` apart). A question
  often names what the *other* turn said ("what did Ana recommend?" → "Try the bakery on
  Rua Augusta" answering "Where should I get pastéis?"); measured on LoCoMo, the neighbours
  lift keyword recall@10 from 57 to 71 (docs/retrieval.md). When a message arrives, its
  neighbours' context rows are rewritten — words only, nothing embedded again.

Indexing catches up by message id, in two steps with a mark each. Words first: every
message above `messages_words_upto` gets its FTS5 row (cheap: a 100,000-message import is
findable by its words within seconds). Then vectors: every message above `messages_upto`
(and at most the words mark) is embedded, a batch at a time, by whoever holds the
embedding claim (a lock file beside the index): one process embeds a batch, never two, so
nothing is embedded twice; the others find it done. A message stored by any process (the
web server, the Discord bot, an import) is found once any of them refreshes, and a crash
between storing and indexing loses nothing: the marks move in the transaction that writes
the rows. Messages that are gone from `charlie.db` are dropped from the index, and those
forgotten are scrubbed from it before anything else, their neighbours' context with them
(`scrub`); an index built by another embedding model is
emptied and built again.

Long histories are embedded in the background: `charlie serve` keeps an indexer thread
(`keep_indexed`), and `charlie import` starts a detached `charlie reindex --catch-up` when
no server runs; `progress` says how far it is and how long the rest should take. A message
is embedded by its first `MESSAGE_TOKENS` tokens (its words are all in the FTS5 row), and
identical texts in a batch are embedded once.

Private messages are indexed like any other; what keeps them private is the query, which
only ever reads the conversations it is given (`charlie.retrieval.recall` decides which).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from charlie import conversations
from charlie import db as database
from charlie.config import Settings
from charlie.db import transaction
from charlie.home import Home, Shared
from charlie.retrieval import index_file, message_vectors
from charlie.retrieval.embeddings import Embedder, embed_capped
from charlie.retrieval.index import Index, embedder_of
from charlie.retrieval.message_vectors import ConversationVectors, LoadedVectors
from charlie.store import Connection

log = logging.getLogger(__name__)

CONTEXT_GAP = 6 * 3600.0  # seconds: messages further apart are not each other's context
BATCH = 512  # messages embedded and written per transaction
WORDS_BATCH = 4096  # messages whose words are written per transaction
WORDS_PER_CALL = 20_000  # words a bounded refresh (a request's) writes at most
MESSAGE_TOKENS = 64  # a message is embedded by its first tokens (docs/retrieval.md)
UPTO = "messages_upto"  # every message up to this id has its vector (and its words)
WORDS = "messages_words_upto"  # every message up to this id has its words
PROGRESS = "messages_progress"  # the background indexer's last report (JSON)
MODEL = "messages_embedder"
GENERATION = "messages_generation"
FORGOTTEN = "forgotten_upto"  # the last record of `forgotten_messages` this index dealt with
CHECK_SECONDS = 10.0  # how often a process checks for lost words, deleted messages, a new model


def _waiting(db: Connection, after: int) -> tuple[int, list[int], list[int]]:
    """What forgetting left for an index to scrub (`MessageIndex.scrub`) since the record
    `after` it last saw: the last record's id, the forgotten messages' ids, and the messages
    beside them, to be given their context again."""
    rows = db.execute(
        "SELECT id, message_id, neighbours FROM forgotten_messages WHERE id > ? ORDER BY id",
        (after,),
    ).fetchall()
    ids = sorted({int(r[1]) for r in rows})
    beside = sorted({int(n) for r in rows for n in json.loads(r[2])} - set(ids))
    return max([after, *(int(r[0]) for r in rows)]), ids, beside


def record_forgotten(home: Home, ids: Sequence[int]) -> None:
    """Record the messages `ids`, about to be deleted in the caller's transaction, as
    forgotten (their ids, never their text) and not scrubbed from the search index yet: the
    index lives in another file, which may be busy, and is scrubbed by `MessageIndex.scrub`
    — by the forget or, failing that, by whoever uses the index next. With each goes its
    neighbours: the messages just before and after it in its conversation, in time order
    (unless forgotten too: theirs are recorded with them), whose index entries show its
    words as their context."""
    at = database.now()
    home.db.executemany(
        "INSERT INTO forgotten_messages (message_id, conversation_id, neighbours, forgotten_at) "
        "VALUES (?, ?, ?, ?)",
        [
            (b.message_id, b.conversation_id, json.dumps(b.neighbours), at)
            for b in conversations.beside(home, ids)
        ],
    )


def was_forgotten(home: Home, message_id: int, conversation_ids: Sequence[int]) -> bool:
    """Whether message `message_id` of one of these conversations was forgotten."""
    found = home.db.execute(
        "SELECT 1 FROM forgotten_messages WHERE message_id = ? AND conversation_id IN "
        f"({database.placeholders(conversation_ids)}) LIMIT 1",
        (message_id, *conversation_ids),
    ).fetchone()
    return found is not None


def conversation_token(conversation_id: int) -> str:
    """The conversation as one FTS5 token (`c12`), so a recall in some conversations makes
    FTS5 intersect posting lists rather than read every match's row."""
    return f"c{conversation_id}"


def seconds(created_at: str) -> float:
    """A stored ISO-8601 time as seconds since the epoch."""
    return datetime.fromisoformat(created_at).timestamp()


def own_text(speaker: str, content: str) -> str:
    """What a message's vector is made of."""
    return f"{speaker}: {content}"


@dataclass
class _Row:
    id: int
    conversation_id: int
    speaker: str
    content: str
    created_at: str

    @property
    def at(self) -> float:
        return seconds(self.created_at)


class MessageIndex:
    """The messages' part of a data home's index file (see the module docstring)."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.home = index.home
        self.embedder = index.embedder
        self.lock: threading.RLock = index.lock

    @property
    def db(self) -> sqlite3.Connection:
        return self.index.db

    def _state(self, key: str) -> str | None:
        return self.index.state(key)

    def _set_state(self, key: str, value: str) -> None:
        self.index.set_state(key, value)

    # ------------------------------------------------------------ indexing

    def refresh(self, limit: int | None = None, *, wait: bool = True) -> int:
        """Index the stored messages not indexed yet — their words, then their vectors (about
        `limit` vectors at most; all when None) — and drop those that are gone; how many got
        their vector. With `wait` false, vectors are left to whoever is embedding now (the
        background indexer) instead of waiting for it. A damaged index file is replaced and
        filled again. Embedding runs outside the index lock, so a recall in another thread
        never waits for someone else's catch-up."""
        try:
            self.index.refresh(projects=[])  # reopens a file another process replaced
            return self._refresh(limit, wait)
        except sqlite3.DatabaseError as exc:
            self.index.recover(exc)
        try:
            return self._refresh(limit, wait)
        except sqlite3.DatabaseError as exc:
            raise self.index.unusable(exc) from exc

    def index_words(self, limit: int | None = None) -> int:
        """Make the stored messages not indexed yet findable by their words (no embedding):
        how many were added. Their vectors come with the next `refresh`."""
        try:
            self.index.refresh(projects=[])
            with self.lock:
                self._check()
            return self._words(limit)
        except sqlite3.DatabaseError as exc:
            self.index.recover(exc)
        try:
            return self._words(limit)
        except sqlite3.DatabaseError as exc:
            raise self.index.unusable(exc) from exc

    def marks(self) -> tuple[int, int]:
        """(words, vectors): every message up to the first id has its words indexed, up to
        the second its vector too (an index made before words came first: both the same)."""
        vectors = int(self._state(UPTO) or 0)
        return max(int(self._state(WORDS) or 0), vectors), vectors

    def pending(self) -> bool:
        """Whether some stored message has no vector yet."""
        _, upto = self.marks()
        return (
            self.home.db.execute("SELECT 1 FROM messages WHERE id > ?", (upto,)).fetchone()
            is not None
        )

    def behind(self, conversation_ids: Sequence[int]) -> bool:
        """Whether some stored message of these conversations has no vector yet: one look
        through (conversation_id, id), where `progress` counts them all."""
        _, upto = self.marks()
        marks = ", ".join("?" * len(conversation_ids))
        found = self.home.db.execute(
            f"SELECT 1 FROM messages WHERE conversation_id IN ({marks}) AND id > ? LIMIT 1",
            (*conversation_ids, upto),
        ).fetchone()
        return found is not None

    def progress(self, conversation_ids: Sequence[int] | None = None) -> Progress:
        """How far embedding the stored messages is (see `Progress`): of these conversations
        only when given — what one person sees counts only what they may read."""
        return _progress(self.home, self._state, conversation_ids)

    def rebuild(self) -> int:
        """Forget every indexed message and index them all again."""
        with self.lock:
            with transaction(self.db) as db:
                self._empty(db)
            return self.refresh()

    def _empty(self, db: sqlite3.Connection) -> None:
        self.home.shared.of(KeptMessages).checked_at = float("-inf")
        self._drop_file()
        db.execute("DELETE FROM messages")
        db.execute("DELETE FROM messages_fts")
        self._set_state(UPTO, "0")
        self._set_state(WORDS, "0")
        self._set_state(GENERATION, uuid.uuid4().hex)

    def _refresh(self, limit: int | None, wait: bool) -> int:
        with self.lock:
            self._check()
        self._words(None if limit is None else WORDS_PER_CALL)
        added = seen = 0
        began, kept = time.monotonic(), self.home.shared.of(KeptMessages)
        if limit is None and self.pending():
            self._report(0, 0.0)  # running, its rate not known yet
        while (limit is None or seen < limit) and not kept.stop.is_set():
            with index_file.claim(self.home.index_path, "embedding", wait=wait) as mine:
                if not mine:  # another thread or process is embedding: it does these too
                    break
                words, upto = self.marks()  # read now: whoever held the claim moved it
                rows = self._rows(upto, words, BATCH if limit is None else min(BATCH, limit - seen))
                if not rows:
                    break
                seen += len(rows)
                added += self._store_vectors(rows)
                if limit is None:
                    self._report(seen, time.monotonic() - began)
        return added

    def _rows(self, above: int, upto: int | None, count: int) -> list[_Row]:
        """The stored messages above id `above` (and at most `upto`), `count` at most."""
        return [
            _Row(r[0], r[1], r[2], r[3], r[4])
            for r in self.home.db.execute(
                "SELECT id, conversation_id, speaker, content, created_at FROM messages "
                "WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
                (above, upto if upto is not None else 2**62, count),
            )
        ]

    def _words(self, limit: int | None) -> int:
        added = seen = 0
        while limit is None or seen < limit:
            words, _ = self.marks()
            rows = self._rows(
                words, None, WORDS_BATCH if limit is None else min(WORDS_BATCH, limit - seen)
            )
            if not rows:
                break
            seen += len(rows)
            added += self._store_words(rows)
        return added

    def _report(self, done: int, seconds: float) -> None:
        """What the background indexer did so far, for `progress` in any process: its rate,
        when, and which process (so a killed one is told apart at once, `_reporter_gone`)."""
        rate = done / seconds if seconds > 0 else 0.0
        report = {"rate": rate, "at": time.time(), "pid": os.getpid(), "host": socket.gethostname()}
        with self.lock, transaction(self.db):
            self._set_state(PROGRESS, json.dumps(report))

    def _check(self) -> None:
        """What a forget left for the index, always (a search must never find it); then
        every 10 s per process: lost words, deleted messages, another model."""
        self.scrub()
        stale = self._state(MODEL) != self.embedder.name
        kept = self.home.shared.of(KeptMessages)
        checked = kept.checked_at
        if not stale and time.monotonic() - checked >= CHECK_SECONDS:  # not on every recall
            _, upto = self.marks()
            (vectors,) = self.db.execute("SELECT count(*) FROM messages").fetchone()
            (newer,) = self.db.execute(
                "SELECT count(*) FROM messages_fts WHERE rowid > ?", (upto,)
            ).fetchone()
            stale = vectors != self._worded() - newer  # words lost (a table rebuilt empty)
            if not stale:
                self._drop_gone()
                kept.checked_at = time.monotonic()
        if stale:
            with transaction(self.db) as db:
                self._empty(db)
                self._set_state(MODEL, self.embedder.name)

    def _store_words(self, rows: list[_Row]) -> int:
        """The FTS5 rows of these new messages, and their neighbours' new context."""
        with self.lock, transaction(self.db) as db:
            words, _ = self.marks()  # another thread or process may have written them
            there = self._stored([r.id for r in rows])  # a message forgotten meanwhile
            fresh = [r for r in rows if r.id > words and r.id in there]
            contexts = self._contexts(fresh)  # read now: a neighbour may be gone
            db.executemany(  # words an older, half-undone index left behind
                "DELETE FROM messages_fts WHERE rowid = ?", [(r.id,) for r in fresh]
            )
            db.executemany(
                "INSERT INTO messages_fts (rowid, speaker, text, context, scope) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        r.id,
                        r.speaker,
                        r.content,
                        contexts.pop(r.id, ""),
                        conversation_token(r.conversation_id),
                    )
                    for r in fresh
                ],
            )
            db.executemany(  # neighbours indexed before: their context changed
                "UPDATE messages_fts SET context = ? WHERE rowid = ?",
                [(text, message_id) for message_id, text in contexts.items()],
            )
            self._set_state(WORDS, str(max(words, rows[-1].id)))
        return len(fresh)

    def _store_vectors(self, rows: list[_Row]) -> int:
        """Embed these messages (identical texts once) and write their vectors."""
        texts = [own_text(r.speaker, r.content) for r in rows]
        distinct = list(dict.fromkeys(texts))
        row_of = {text: i for i, text in enumerate(distinct)}
        embedded = embed_capped(self.embedder, distinct, MESSAGE_TOKENS)
        vectors = embedded[[row_of[text] for text in texts]]
        with self.lock, transaction(self.db) as db:
            _, upto = self.marks()
            there = self._stored([r.id for r in rows])  # a message forgotten while embedding
            fresh = [
                (r, v) for r, v in zip(rows, vectors, strict=True) if r.id > upto and r.id in there
            ]
            db.executemany(
                "INSERT OR REPLACE INTO messages (id, conversation_id, at, vector) "
                "VALUES (?, ?, ?, ?)",
                [(r.id, r.conversation_id, r.at, v.astype(np.float32).tobytes()) for r, v in fresh],
            )
            self._set_state(UPTO, str(max(upto, rows[-1].id)))
        return len(fresh)

    def _stored(self, ids: list[int]) -> set[int]:
        """Which of `ids` are still stored messages."""
        marks = ", ".join("?" * len(ids))
        rows = self.home.db.execute(f"SELECT id FROM messages WHERE id IN ({marks})", ids)
        return {int(row[0]) for row in rows}

    def _contexts(self, rows: list[_Row]) -> dict[int, str]:
        """The context text of each new message and of each neighbour it changes."""
        new = {r.id for r in rows}
        out: dict[int, str] = {}
        by_conversation: dict[int, list[_Row]] = {}
        for r in rows:
            by_conversation.setdefault(r.conversation_id, []).append(r)
        for conversation_id, mine in by_conversation.items():
            stretch = self._stretch(
                conversation_id, min(r.created_at for r in mine), max(r.created_at for r in mine)
            )
            for i, r in enumerate(stretch):
                around = [stretch[j] for j in (i - 1, i + 1) if 0 <= j < len(stretch)]
                if r.id in new or any(n.id in new for n in around):
                    out[r.id] = "\n".join(
                        own_text(n.speaker, n.content)
                        for n in around
                        if abs(n.at - r.at) <= CONTEXT_GAP
                    )
        return out

    def _stretch(self, conversation_id: int, first: str, last: str) -> list[_Row]:
        """The conversation's messages from time `first` to `last`, with one more on each
        side, in time order."""
        db = self.home.db
        middle = db.execute(
            "SELECT id, conversation_id, speaker, content, created_at FROM messages "
            "WHERE conversation_id = ? AND created_at >= ? AND created_at <= ? "
            "ORDER BY created_at, id",
            (conversation_id, first, last),
        ).fetchall()
        before = db.execute(
            "SELECT id, conversation_id, speaker, content, created_at FROM messages "
            "WHERE conversation_id = ? AND created_at < ? ORDER BY created_at DESC, id DESC "
            "LIMIT 1",
            (conversation_id, first),
        ).fetchall()
        after = db.execute(
            "SELECT id, conversation_id, speaker, content, created_at FROM messages "
            "WHERE conversation_id = ? AND created_at > ? ORDER BY created_at, id LIMIT 1",
            (conversation_id, last),
        ).fetchall()
        return [_Row(r[0], r[1], r[2], r[3], r[4]) for r in (*before, *middle, *after)]

    def _worded(self) -> int:
        """How many messages have their FTS5 row: counted in FTS5's own table of document
        sizes (one short row each), 2–10 ms at 200,000 where counting the FTS5 table reads
        every row's text (0.3–1.4 s)."""
        (count,) = self.db.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()
        return int(count)

    def count_matches(self, match: str, limit: int) -> int:
        """How many messages match the FTS5 expression `match`, counting no further than
        `limit`."""
        (count,) = self.db.execute(
            "SELECT count(*) FROM (SELECT rowid FROM messages_fts WHERE messages_fts "
            "MATCH ? LIMIT ?)",
            (match, limit),
        ).fetchone()
        return int(count)

    def bm25(self, match: str, weights: tuple[float, float, float]) -> dict[int, float]:
        """The BM25 (higher is better) of every message matching the FTS5 expression
        `match`, its speaker, text and context weighted by `weights`."""
        rows = self.db.execute(
            "SELECT rowid, -bm25(messages_fts, ?, ?, ?, 0.0) FROM messages_fts "
            "WHERE messages_fts MATCH ?",
            (*weights, match),
        )
        return dict(rows.fetchall())

    def _drop_gone(self) -> None:
        """Drop indexed messages that are no longer stored (cheap when none are gone)."""
        words, _ = self.marks()
        (stored,) = self.home.db.execute(
            "SELECT count(*) FROM messages WHERE id <= ?", (words,)
        ).fetchone()
        if self._worded() == stored:
            return
        kept = {
            r[0] for r in self.home.db.execute("SELECT id FROM messages WHERE id <= ?", (words,))
        }
        gone = [r[0] for r in self.db.execute("SELECT rowid FROM messages_fts") if r[0] not in kept]
        self.forget(gone)

    def scrub(self) -> int:
        """Finish forgetting in this index: the messages `charlie.household.forget` recorded
        as forgotten since the last record this index saw (`forgotten_messages` in
        charlie.db, written with their deletion: a to-do that outlives a busy index or a
        killed process, and that every data home's index reads for itself — several homes,
        on several machines, may share one PostgreSQL database) lose their rows, the
        messages that were beside them get their context again (it held the forgotten
        words), the words index is merged so no segment keeps them, and the write-ahead log
        is emptied. The marks of what is indexed are lowered where the forgotten messages
        were the newest (SQLite may give their ids to the next ones). How many messages it
        was scrubbed of (0, mostly: one look in charlie.db)."""
        stored = self.home.settings.db_path  # its failures name it; index.db's are raised
        seen = int(self._state(FORGOTTEN) or 0)
        with database.storage_errors(stored):
            last, ids, beside = _waiting(self.home.db, seen)
        if last == seen:
            return 0
        with self.lock:
            held = self._indexed(ids)  # one this index never held left no words in it
            if not held:
                with transaction(self.db):
                    self._set_state(FORGOTTEN, str(last))
                return 0
            self.forget(held)
            with transaction(self.db) as db:
                with database.storage_errors(stored):  # read now: a neighbour may have changed
                    rows = self._by_ids(beside)
                    contexts = self._contexts(rows) if rows else {}
                    (newest,) = self.home.db.execute(
                        "SELECT coalesce(max(id), 0) FROM messages"
                    ).fetchone()
                    again = self._stored(held)  # an id SQLite gave a new message: index it again
                back = min([int(newest), *(i - 1 for i in again)])
                db.executemany(
                    "UPDATE messages_fts SET context = ? WHERE rowid = ?",
                    [(text, message_id) for message_id, text in contexts.items()],
                )
                db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
                for mark in (UPTO, WORDS):
                    if int(self._state(mark) or 0) > back:
                        self._set_state(mark, str(back))
                self._set_state(FORGOTTEN, str(last))
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        with database.storage_errors(stored):  # when the first index was scrubbed of them
            self.home.db.execute(
                "UPDATE forgotten_messages SET scrubbed_at = ? "
                "WHERE id > ? AND id <= ? AND scrubbed_at IS NULL",
                (database.now(), seen, last),
            )
            # and charlie.db's log, which a forget killed before its own checkpoint left
            self.home.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return len(held)

    def unscrubbed(self) -> bool:
        """Whether a forget was recorded that this index has not dealt with yet."""
        seen = int(self._state(FORGOTTEN) or 0)
        found = self.home.db.execute(
            "SELECT 1 FROM forgotten_messages WHERE id > ? LIMIT 1", (seen,)
        ).fetchone()
        return found is not None

    def _indexed(self, ids: list[int]) -> list[int]:
        """Which of `ids` this index holds (their words, or their vector)."""
        held: set[int] = set()
        for at in range(0, len(ids), 500):  # a forgotten thread may be thousands
            part = ids[at : at + 500]
            marks = ", ".join("?" * len(part))
            held.update(
                int(r[0])
                for r in self.db.execute(
                    f"SELECT rowid FROM messages_fts WHERE rowid IN ({marks}) "
                    f"UNION SELECT id FROM messages WHERE id IN ({marks})",
                    (*part, *part),
                )
            )
        return sorted(held)

    def _by_ids(self, ids: list[int]) -> list[_Row]:
        """The stored messages among `ids`."""
        return [
            _Row(r[0], r[1], r[2], r[3], r[4])
            for r in self.home.db.execute(
                "SELECT id, conversation_id, speaker, content, created_at FROM messages "
                f"WHERE id IN ({', '.join('?' * len(ids))}) ORDER BY id",
                ids,
            )
        ]

    def forget(self, message_ids: Iterable[int]) -> None:
        """Drop these messages from the index (they were deleted, or are to be indexed again)."""
        ids = [(i,) for i in message_ids]
        if not ids:
            return
        self._drop_file()
        with transaction(self.db) as db:
            db.executemany("DELETE FROM messages WHERE id = ?", ids)
            db.executemany("DELETE FROM messages_fts WHERE rowid = ?", ids)
            self._set_state(GENERATION, uuid.uuid4().hex)
        self._drop_file()  # and one written meanwhile, from before the drop

    def _drop_file(self) -> None:
        message_vectors.drop_file(message_vectors.file_path(self.home.index_path))

    # ------------------------------------------------------------ reading

    def vectors(self) -> LoadedVectors:
        """Every indexed message vector, loaded once per process and topped up with the
        messages indexed since (by any process); loaded again after messages were dropped."""
        with self.lock:
            generation = self._state(GENERATION) or ""
            kept = self.home.shared.of(KeptMessages)
            loaded = kept.vectors
            if loaded is None or loaded.generation != generation:
                loaded = kept.vectors = self._from_file(generation) or LoadedVectors(generation)
            rows = self.db.execute(
                "SELECT id, conversation_id, at, vector FROM messages WHERE id > ? ORDER BY id",
                (loaded.upto,),
            ).fetchall()
            if not rows:
                return loaded
            dim = self.embedder.dim
            grouped: dict[int, list[sqlite3.Row]] = {}
            for row in rows:
                grouped.setdefault(row[1], []).append(row)
            for conversation_id, mine in grouped.items():
                table = loaded.conversations.setdefault(conversation_id, ConversationVectors(dim))
                matrix = np.frombuffer(b"".join(r[3] for r in mine), np.float32).reshape(-1, dim)
                table.append([r[0] for r in mine], [r[2] for r in mine], matrix)
            loaded.upto = rows[-1][0]
            return loaded

    def _from_file(self, generation: str) -> LoadedVectors | None:
        """The vectors kept in the file beside the index, when it matches the index (see
        `charlie.retrieval.message_vectors`); None when there is none or it cannot be read,
        and None with the file deleted when it no longer matches."""
        path = message_vectors.file_path(self.home.index_path)
        found = message_vectors.read_file(path) if generation else None
        if found is None:
            return None
        kept, loaded = found
        _, upto = self.marks()
        (count,) = self.db.execute(
            "SELECT count(*) FROM messages WHERE +id <= ?", (kept.upto,)
        ).fetchone()
        if (kept.generation, kept.model, kept.dim) != (
            generation,
            self.embedder.name,
            self.embedder.dim,
        ) or (kept.upto > upto or count != kept.count or self._state(GENERATION) != generation):
            message_vectors.drop_file(path)
            return None
        return loaded

    def keep_file(self) -> bool:
        """Load every message vector (this process then has them) and, when there are many
        and the file beside the index lacks more than `FILE_LAG` of them, write it again so
        the next process maps them instead of reading them; whether it was written."""
        loaded = self.vectors()
        total = loaded.count
        if total < message_vectors.FILE_MIN or not loaded.generation:
            return False
        path = message_vectors.file_path(self.home.index_path)
        found = message_vectors.read_file(path)
        kept = found[0].count if found and found[0].generation == loaded.generation else 0
        if total - kept <= message_vectors.FILE_LAG * total:
            return False
        for table in list(loaded.conversations.values()):
            table.tabulate()  # the first stages go into the file too
        with self.lock:
            taken = message_vectors.picture(loaded, self.embedder.name, self.embedder.dim)
        if not message_vectors.write_file(path, taken):
            return False
        with self.lock:  # messages dropped while it was written: `forget` may have missed it
            if (self._state(GENERATION) or "") != loaded.generation:
                message_vectors.drop_file(path)
                return False
        return True


@dataclass
class KeptMessages:
    """What one process keeps of the message index across the homes it opens."""

    checked_at: float = float("-inf")  # when this process last checked it all (monotonic)
    vectors: LoadedVectors | None = None  # every indexed message vector, topped up
    catcher: threading.Thread | None = None  # the background catch-up, once one was started
    indexer: threading.Thread | None = None  # `keep_indexed`'s thread, in a server
    stop: threading.Event = field(default_factory=threading.Event)  # background work: stop
    stops_at_exit: bool = False  # the catch-up is stopped, and waited for, at exit


REPORT_STALE = 60.0  # seconds: an indexer that has not reported for longer is not running
# (sooner when its process is gone: `_reporter_gone`)


@dataclass(frozen=True)
class Progress:
    """How far the stored messages are embedded: `indexed` of `total` have their vector;
    `unworded` are not even findable by their words yet; `rate` (messages/s) is what the
    background indexer last reported, `running` whether it reported in the last minute and
    its process is still there."""

    total: int
    indexed: int
    unworded: int
    rate: float
    running: bool

    @property
    def done(self) -> bool:
        return self.indexed >= self.total

    @property
    def share(self) -> float:
        return self.indexed / self.total if self.total else 1.0

    @property
    def seconds_left(self) -> float | None:
        """About how long the rest takes, while an indexer runs and has a rate."""
        if self.done or not self.running or self.rate <= 0:
            return None
        return (self.total - self.indexed) / self.rate

    def in_words(self) -> str:
        """ "indexing history: 41 % · about 6 min left" — or that it is done."""
        if self.done:
            return f"history indexed: {self.total:,} messages"
        line = f"indexing history: {int(self.share * 100)} %"
        left = self.seconds_left
        if not self.running:
            return line + " · waiting for the indexer (`charlie reindex --catch-up`)"
        if left is None:
            return line + " · starting"
        return line + f" · about {_duration(left)} left"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return "a minute"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _report(value: str | None) -> dict[str, object]:
    try:
        found = json.loads(value or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _reporter_gone(report: dict[str, object]) -> bool:
    """Whether the process that made `report` is gone (killed, or ended without finishing):
    known only for a process of this machine; a report from elsewhere, or from before
    reports named their process, ages out after `REPORT_STALE` instead."""
    pid = report.get("pid")
    if not isinstance(pid, int) or report.get("host") != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)  # signal 0: nothing is sent, only whether the process exists
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # another account's process: it exists
    return False


def _progress(
    home: Home, state: Callable[[str], str | None], conversation_ids: Sequence[int] | None
) -> Progress:
    vectors = int(state(UPTO) or 0)
    words = max(int(state(WORDS) or 0), vectors)
    where, scope = "", list(conversation_ids or [])
    if conversation_ids is not None:  # read through (conversation_id, id): only what is asked
        where = f"conversation_id IN ({', '.join('?' * len(scope))}) AND "

    def count(above: int) -> int:
        found = home.db.execute(
            f"SELECT count(*) FROM messages WHERE {where}id > ?", (*scope, above)
        ).fetchone()
        return int(found[0])

    total, waiting, unworded = count(0), count(vectors), count(words)
    report = _report(state(PROGRESS))
    rate = _number(report.get("rate"))
    fresh = time.time() - _number(report.get("at")) < REPORT_STALE
    return Progress(total, total - waiting, unworded, rate, fresh and not _reporter_gone(report))


def history_status(home: Home, conversation_ids: Sequence[int]) -> dict[str, object] | None:
    """How far these conversations' messages are indexed, for a health check: read with a
    connection of its own, never building or repairing the index (None when the index file
    cannot be read now; nothing indexed yet when there is none)."""
    path = home.index_path
    try:
        if not path.exists():
            progress = _progress(home, lambda key: None, conversation_ids)
        else:
            with closing(sqlite3.connect(path, timeout=database.BUSY_TIMEOUT)) as db:

                def state(key: str) -> str | None:
                    found = db.execute("SELECT value FROM index_state WHERE key = ?", (key,))
                    row = found.fetchone()
                    return None if row is None else str(row[0])

                progress = _progress(home, state, conversation_ids)
    except sqlite3.Error:
        return None
    return {
        "total": progress.total,
        "indexed": progress.indexed,
        "done": progress.done,
        "running": progress.running,
        "seconds_left": progress.seconds_left,
        "line": progress.in_words(),
    }


def catch_up(index: MessageIndex, limit: int | None = None) -> int:
    """What a request does before it recalls: index the words of what is new and the vectors
    of at most `limit` (default: one batch) new messages itself — unless the background
    indexer is embedding now — and leave any more (a large import, an index being rebuilt)
    to a background thread of this process, so the request answers from what is indexed
    instead of waiting for it all."""
    added = index.refresh(BATCH if limit is None else limit, wait=False)
    if index.pending():
        home = index.home
        with index.lock:
            kept = home.shared.of(KeptMessages)
            running = [t for t in (kept.catcher, kept.indexer) if t is not None and t.is_alive()]
            if not running:
                thread = threading.Thread(
                    target=_catch_up_all,
                    args=(home.settings, home.shared, index.embedder),
                    name="charlie-message-index",
                    daemon=True,  # never keeps a process alive; SQLite's transactions stay whole
                )
                kept.catcher = thread
                if not kept.stops_at_exit:
                    atexit.register(_stop_at_exit, kept)
                    kept.stops_at_exit = True
                thread.start()
    return added


EXIT_WAIT = 60.0  # seconds: at most one batch, even on a busy machine


def _stop_at_exit(kept: KeptMessages) -> None:
    """As the process exits (a CLI command that recalled): let the background catch-up end
    after its batch. A thread still inside the model while the interpreter finalizes makes
    the process abort ("terminate called without an active exception")."""
    kept.stop.set()
    if kept.catcher is not None:
        kept.catcher.join(EXIT_WAIT)


def index_all(index: MessageIndex) -> int:
    """Embed every message not indexed yet, as the one indexer of the data home: returns at
    once (0) when another process's indexer is at it, and carries on while messages keep
    arriving (a second import while this one runs). Stops after the batch it is on when
    asked (`KeptMessages.stop`); whatever is done stays done, and the next run goes on
    from there."""
    stop = index.home.shared.of(KeptMessages).stop
    added = 0
    while not stop.is_set():
        with index_file.claim(index.home.index_path, "indexer", wait=False) as mine:
            if not mine:
                return added
            added += index.refresh()
            if not index.pending():
                index.keep_file()
                return added
    return added


POLL_SECONDS = 5.0  # how often a server's indexer looks for messages stored by others
_STARTING = threading.Lock()


def keep_indexed(home: Home) -> None:
    """In a server: a thread of its own that embeds messages as they are stored by any
    process (an import from the command line, the Discord bot), until `stop_indexing`."""
    kept = home.shared.of(KeptMessages)
    with _STARTING:
        if kept.indexer is not None and kept.indexer.is_alive():
            return
        kept.stop.clear()
        kept.indexer = threading.Thread(
            target=_keep_indexed,
            args=(home.settings, home.shared, embedder_of(home)),
            name="charlie-message-indexer",
            daemon=True,
        )
        kept.indexer.start()


def stop_indexing(home: Home, timeout: float = 30.0) -> None:
    """Ask the background indexing of messages to stop after its batch, and wait a little."""
    kept = home.shared.of(KeptMessages)
    kept.stop.set()
    for thread in (kept.indexer, kept.catcher):
        if thread is not None:
            thread.join(timeout)


def _keep_indexed(settings: Settings, shared: Shared, embedder: Embedder) -> None:
    stop = shared.of(KeptMessages).stop
    while not stop.is_set():
        try:
            with Home.open(settings, shared=shared) as own:
                index: MessageIndex | None = None
                while not stop.wait(POLL_SECONDS):  # the server's start comes first
                    if index is None:  # opening may mend it; the first recall needs no load
                        index = MessageIndex(Index(own, embedder))
                        index.keep_file()
                    if index.pending() or index.unscrubbed():  # or a forget unfinished
                        index_all(index)
        except Exception:  # the next round tries again; recall says what is missing
            log.exception("Indexing the messages in the background failed")
            stop.wait(POLL_SECONDS * 6)


def _catch_up_all(settings: Settings, shared: Shared, embedder: Embedder) -> None:
    """Index every message not indexed yet, with connections of its own."""
    try:
        with Home.open(settings, shared=shared) as own:
            MessageIndex(Index(own, embedder)).refresh()
    except Exception:  # the next recall tries again in its own thread, and says what failed
        log.exception("Indexing the messages in the background failed")
