"""The words of every note chunk in memory, ranked by BM25 the way FTS5's `bm25()` ranks them.

FTS5 finds the chunks with a word fast, but `bm25()` costs about 0.85 µs for each chunk it
ranks and counts every phrase's chunks again for its IDF, on every query: at 100,000 notes the
keyword side of a search took 10 ms. So each chunk's words are also kept as FTS5's own
tokenizer cuts them (a scratch in-memory FTS5 table with the same columns and tokenizer, read
through `fts5vocab`), in `chunk_terms` of the index file: one record per (word, chunk), with
how often the word is in the title and in the text, and the chunk's length in tokens. In
memory they are posting lists (`Postings`): the chunks of each word, in chunk order, from which
a query's BM25 is a few array operations, with FTS5's formula, constants and column weights —
the same scores `bm25()` gives, to rounding.

Phrases of several words (`refresh_token` is the phrase "refresh token") need positions,
which are not kept: their part of the score is still asked of FTS5, one phrase at a time
(BM25 is a sum over phrases, each part depending only on its own counts).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from charlie.retrieval.keywords import FTS5_TOKENIZE

# One (word, chunk) record in `chunk_terms.pairs`: the word's id in `terms`, and how often it
# is in the chunk's title and in its text. Searches match only those two columns (never the
# `scope` token), so a word found only elsewhere has no record; it counts in the length.
PAIR = np.dtype([("term", "<u4"), ("title", "<u2"), ("text", "<u2")])
K1, B = 1.2, 0.75  # FTS5's bm25() constants
MIN_IDF = 1e-6  # FTS5's IDF for a word in more than half the rows
TERMS_PER_STATEMENT = 500
MAX_REMEMBERED_ITEMS = 4096

TERM_SCHEMA = """
CREATE TABLE IF NOT EXISTS terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS chunk_terms (
    chunk_id INTEGER PRIMARY KEY,
    length INTEGER NOT NULL,
    pairs BLOB NOT NULL
);
"""

Rows = npt.NDArray[np.int64]
Scores = npt.NDArray[np.float64]


class Tokenizer:
    """FTS5's tokenizer (`FTS5_TOKENIZE`), run on a scratch in-memory table shaped like
    `chunks_fts`, so a word is cut and stemmed exactly as the index cuts it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.executescript(
            "CREATE VIRTUAL TABLE scratch USING fts5(title, text, project UNINDEXED, scope, "
            f"tokenize = '{FTS5_TOKENIZE}');"
            "CREATE VIRTUAL TABLE scratch_words USING fts5vocab(scratch, 'instance');"
        )
        self._items: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def chunks(
        self, rows: Sequence[tuple[int, str, str, str]]
    ) -> tuple[dict[int, int], list[tuple[int, str, int, int]]]:
        """For rows of (chunk id, title, text, scope) as they go into `chunks_fts`: each
        chunk's length in tokens (every column's), and (chunk id, word, in the title, in the
        text) for each word of a chunk's title or text, in chunk order."""
        with self._lock:
            db = self._db
            try:
                db.executemany(
                    "INSERT INTO scratch (rowid, title, text, project, scope) "
                    "VALUES (?, ?, ?, '', ?)",
                    rows,
                )
                lengths = dict.fromkeys((row[0] for row in rows), 0)
                lengths.update(db.execute("SELECT doc, count(*) FROM scratch_words GROUP BY doc"))
                words = db.execute(
                    "SELECT doc, term, sum(col = 'title') AS title, sum(col = 'text') AS text "
                    "FROM scratch_words GROUP BY doc, term HAVING title + text > 0 "
                    "ORDER BY doc"
                ).fetchall()
            finally:
                db.execute("DELETE FROM scratch")
        return lengths, words

    def items(self, items: Sequence[str]) -> list[tuple[str, ...]]:
        """The tokens FTS5 makes of each query item (a word, or a phrase of several)."""
        missing = [item for item in dict.fromkeys(items) if item not in self._items]
        with self._lock:
            if missing:
                db = self._db
                try:
                    db.executemany(
                        "INSERT INTO scratch (rowid, text) VALUES (?, ?)",
                        list(enumerate(missing, start=1)),
                    )
                    tokens: dict[int, list[str]] = {}
                    for doc, term in db.execute(
                        "SELECT doc, term FROM scratch_words ORDER BY doc, offset"
                    ):
                        tokens.setdefault(doc, []).append(term)
                finally:
                    db.execute("DELETE FROM scratch")
                for number, item in enumerate(missing, start=1):
                    self._items[item] = tuple(tokens.get(number, ()))
                while len(self._items) > MAX_REMEMBERED_ITEMS:
                    self._items.popitem(last=False)
            return [self._items.get(item, ()) for item in items]


_tokenizer: Tokenizer | None = None
_tokenizer_lock = threading.Lock()


def tokenizer() -> Tokenizer:
    """The process's tokenizer, made on first use."""
    global _tokenizer
    if _tokenizer is None:
        with _tokenizer_lock:
            if _tokenizer is None:
                _tokenizer = Tokenizer()
    return _tokenizer


def term_ids(db: sqlite3.Connection, terms: Iterable[str], *, add: bool) -> dict[str, int]:
    """The ids of `terms` in the index file's `terms`; with `add`, new words get one."""
    wanted = list(dict.fromkeys(terms))
    ids: dict[str, int] = {}
    for start in range(0, len(wanted), TERMS_PER_STATEMENT):
        part = wanted[start : start + TERMS_PER_STATEMENT]
        if add:
            db.executemany("INSERT OR IGNORE INTO terms (term) VALUES (?)", [(t,) for t in part])
        marks = ", ".join("?" for _ in part)
        ids.update(db.execute(f"SELECT term, id FROM terms WHERE term IN ({marks})", part))
    return ids


def store(db: sqlite3.Connection, rows: Sequence[tuple[int, str, str, str]]) -> None:
    """Keep the words of these chunks, (chunk id, title, text, scope) as they go into
    `chunks_fts`, in `chunk_terms` (inside the caller's transaction)."""
    if not rows:
        return
    lengths, words = tokenizer().chunks(rows)
    ids = term_ids(db, (w[1] for w in words), add=True)
    pairs = np.array(
        [(ids[term], min(title, 65535), min(text, 65535)) for _, term, title, text in words],
        dtype=PAIR,
    )
    owners = np.fromiter((w[0] for w in words), np.int64, len(words))
    chunk_ids = list(lengths)
    ends = np.searchsorted(owners, chunk_ids, side="right")
    starts = np.searchsorted(owners, chunk_ids, side="left")
    records = [
        (chunk_id, lengths[chunk_id], pairs[a:b].tobytes())
        for chunk_id, a, b in zip(chunk_ids, starts.tolist(), ends.tolist(), strict=True)
    ]
    db.executemany(
        "INSERT OR REPLACE INTO chunk_terms (chunk_id, length, pairs) VALUES (?, ?, ?)", records
    )


@dataclass(frozen=True)
class Postings:
    """Every chunk's words as posting lists, for BM25 over the whole index.

    Chunks are numbered 0..n-1 in chunk id order (`chunk_ids`); `starts[t]:starts[t + 1]`
    are word t's records: `rows` (chunk numbers, ascending) with its counts in the title and
    the text. `total` and `average` are FTS5's row count and mean row length."""

    chunk_ids: Rows
    note_ids: Rows
    project_ids: Rows
    lengths: Scores
    average: float
    starts: Rows
    rows: npt.NDArray[np.int32]
    title: npt.NDArray[np.uint16]
    text: npt.NDArray[np.uint16]

    @property
    def total(self) -> int:
        return len(self.chunk_ids)

    @classmethod
    def build(cls, records: Sequence[tuple[int, int, int, int, bytes]]) -> Postings:
        """From rows of (chunk id, note id, project id, length, pairs), in chunk id order."""
        blobs = [r[4] for r in records]
        pairs = np.frombuffer(b"".join(blobs), dtype=PAIR)
        counts = np.fromiter((len(b) // PAIR.itemsize for b in blobs), np.int64, len(blobs))
        owners = np.repeat(np.arange(len(records), dtype=np.int32), counts)
        order = _by_term(pairs["term"])
        terms = pairs["term"][order]
        top = int(terms[-1]) + 1 if len(terms) else 0
        starts = np.zeros(top + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=top), out=starts[1:])
        lengths = np.fromiter((r[3] for r in records), np.float64, len(records))
        return cls(
            np.fromiter((r[0] for r in records), np.int64, len(records)),
            np.fromiter((r[1] for r in records), np.int64, len(records)),
            np.fromiter((r[2] for r in records), np.int64, len(records)),
            lengths,
            float(lengths.sum()) / len(records) if len(records) else 0.0,
            starts,
            owners[order],
            pairs["title"][order],
            pairs["text"][order],
        )

    def segment(self, term_id: int) -> slice:
        if term_id + 1 >= len(self.starts):
            return slice(0, 0)
        return slice(int(self.starts[term_id]), int(self.starts[term_id + 1]))

    def hits(self, term_id: int) -> int:
        """How many chunks have word `term_id` in their title or text."""
        where = self.segment(term_id)
        return int(where.stop - where.start)

    def idf(self, hits: int) -> float:
        """FTS5's IDF for a phrase found in `hits` rows."""
        idf = float(np.log((self.total - hits + 0.5) / (hits + 0.5)))
        return idf if idf > 0 else MIN_IDF

    def part(
        self, term_id: int, title_weight: float, at: Rows | None = None
    ) -> tuple[Rows, Scores]:
        """The chunks with word `term_id` (only those of `at`, chunk numbers in ascending
        order, when given) and the word's part of their BM25."""
        where = self.segment(term_id)
        rows = self.rows[where].astype(np.int64)
        picked: slice | npt.NDArray[np.int64] = slice(None)
        if at is not None:
            found = np.searchsorted(rows, at)
            inside = found < len(rows)
            inside[inside] = rows[found[inside]] == at[inside]
            picked = found[inside]
        weighted = title_weight * self.title[where][picked] + self.text[where][picked]
        rows = rows[picked]
        norm = K1 * (1 - B + B * self.lengths[rows] / self.average)
        idf = self.idf(where.stop - where.start)
        return rows, idf * weighted * (K1 + 1) / (weighted + norm)

    def numbers(self, chunk_ids: Rows) -> Rows:
        """The chunk numbers of these chunk ids (each must be here)."""
        return np.searchsorted(self.chunk_ids, chunk_ids).astype(np.int64)


def ranked(
    postings: Postings,
    scoring: Sequence[tuple[Rows, Scores]],
    also: Sequence[tuple[Rows, Scores] | int],
    title_weight: float,
    project_ids: Sequence[int],
    limit: int,
) -> list[tuple[int, float]]:
    """The `limit` best chunks (chunk number, BM25), best first, of those in `scoring` (each
    a phrase's chunks and its part of their BM25): every phrase of `also` (the same, or a
    word id, scored only where asked) adds its part in the chunks `scoring` found. Only
    chunks of `project_ids`, when some are given."""
    if not scoring:
        return []
    matched = np.unique(np.concatenate([rows for rows, _ in scoring]))
    if project_ids:
        matched = matched[np.isin(postings.project_ids[matched], list(project_ids))]
    if not len(matched):
        return []
    score = np.zeros(len(matched), dtype=np.float64)
    for rows, values in scoring:
        _add(score, matched, rows, values)
    for phrase in also:
        rows, values = (
            postings.part(phrase, title_weight, matched) if isinstance(phrase, int) else phrase
        )
        _add(score, matched, rows, values)
    keep = min(limit, len(matched))
    best = np.argpartition(-score, keep - 1)[:keep] if keep < len(matched) else np.arange(keep)
    best = best[np.lexsort((matched[best], -score[best]))]
    return [(int(matched[i]), float(score[i])) for i in best]


def _by_term(terms: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
    """The order of the records by word, chunk order kept within a word: a stable sort on
    16-bit keys (numpy's radix sort, 2-3x a sort on 32 bits), in two passes past 65,535."""
    if not len(terms) or int(terms.max()) < 1 << 16:
        return np.argsort(terms.astype(np.uint16), kind="stable")
    order = np.argsort((terms & 0xFFFF).astype(np.uint16), kind="stable")
    return order[np.argsort((terms[order] >> 16).astype(np.uint16), kind="stable")]


def _add(score: Scores, matched: Rows, rows: Rows, values: Scores) -> None:
    """score[i] += the value of matched[i] in (rows, values), where it has one."""
    if not len(rows):
        return
    order = np.argsort(rows, kind="stable")
    rows, values = rows[order], values[order]
    found = np.searchsorted(rows, matched)
    inside = found < len(rows)
    inside[inside] = rows[found[inside]] == matched[inside]
    score[inside] += values[found[inside]]
