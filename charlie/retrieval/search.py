"""Hybrid retrieval over notes: vector search for meaning, keyword search for literals,
usage for what has mattered before — and an explanation for every result.

Modes (all selectable; `DEFAULT_MODE` was chosen by measurement, see docs/retrieval.md):
- `vector`: cosine similarity of the query to each note's best chunk (clipped at 0);
- `keyword`: SQLite FTS5 BM25 over the query's few most meaningful terms (OR semantics),
  divided by the query's best BM25;
- `fallback`: vector first; keyword search joins when the best cosine is under
  `threshold` or the query carries a literal (a quoted phrase, `JWT`, `refresh_token`…),
  and then the two are mixed as in `fusion`;
- `fusion`: both signals always, mixed as `alpha × cosine + (1 − alpha) × BM25 / best BM25`.
  Not min-max normalised: the cosine stays absolute (clipped at 0, so a weak match stays
  weak) and BM25, which has no upper bound, is only divided by the query's best BM25 (no
  minimum is subtracted); a note found by one signal scores 0 on the other.

Whatever the mode, the final score is `similarity × (1 + boost × weight)` with the person's
usage boost in [0, 1] (`charlie.retrieval.usage`).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import numpy as np

from charlie.errors import CharlieError
from charlie.home import Home
from charlie.notes.markup import plain_text
from charlie.projects import Project
from charlie.retrieval.deferred import Deferred
from charlie.retrieval.index import Index, Vectors, scope_token
from charlie.retrieval.keywords import (
    literals,
    match_expression,
    phrases,
    top_terms,
    with_parts,
)
from charlie.retrieval.postings import Postings, Rows, Scores, ranked, term_ids, tokenizer
from charlie.retrieval.usage import DEFAULT_WEIGHT, UsageModel, Use, days_ago
from charlie.users import User

Mode = Literal["vector", "keyword", "fallback", "fusion"]
MODES: tuple[Mode, ...] = ("vector", "keyword", "fallback", "fusion")
DEFAULT_MODE: Mode = "fusion"
MAX_QUERY_CHARS = 2000
MAX_COUNTED_TERMS = 100_000  # then the cache starts again


class QueryError(CharlieError):
    """A query that cannot be searched (empty, say)."""


@dataclass(frozen=True)
class SearchConfig:
    mode: Mode = DEFAULT_MODE
    threshold: float = 0.70  # fallback: below this best cosine, keyword search joins
    # A note no query word finds is no match under this cosine ("hello" finds nothing):
    # answering notes sit at 0.50+ (household) and 98% of SciFact's relevant abstracts at
    # 0.25+, small talk's best note at 0.15-0.29 (benchmarks/weak_hits.py).
    min_vector: float = 0.25
    alpha: float = 0.70  # fusion: weight of the cosine against the scaled BM25
    keyword_terms: int = 12  # how many of the query's most meaningful terms to search
    title_weight: float = 2.0  # BM25 weight of a title hit against a body hit
    candidates: int = 100  # per signal, before fusion and the usage boost
    # keyword side: a term found in more than this share of the chunks (and in more than
    # `common_min_chunks`) is *common*: it still counts in every chunk's BM25, but only the
    # chunks holding one of the other terms are ranked. Scoring every chunk that has
    # "kitchen" is what made the keyword side slow at 100k notes; a chunk with nothing but
    # common terms almost never ranks in the top few hundred anyway. 1.0: none is common.
    common_share: float = 0.02
    common_min_chunks: int = 1000
    parallel: bool = True  # fusion: the keyword side in a thread of its own, beside the vectors


@dataclass
class Hit:
    key: str
    project: str
    name: str
    title: str
    path: str
    score: float
    similarity: float
    vector: float | None = None
    bm25: float | None = None
    terms: list[str] = field(default_factory=list)
    boost: float = 0.0
    boost_causes: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    snippet: str = ""
    weight: float = DEFAULT_WEIGHT  # how far a full boost lifts the score (the usage model's)
    uses: list[Use] = field(default_factory=list)  # what the boost came from (when explained)

    def why(self) -> str:
        """The numbers behind this note's rank, on one line (`Searcher.legend` names them)."""
        parts = [f"score {self.score:.3f} = similarity {self.similarity:.3f}"]
        if self.boost:
            parts[0] += f" × (1 + boost {self.boost:.2f} × weight {self.weight:g})"
        if self.vector is not None:
            parts.append(f"cosine {self.vector:.3f}")
        if self.bm25 is not None:
            parts.append(f"BM25 {self.bm25:.2f} on {', '.join(self.terms) or '—'}")
        if self.boost_causes:
            parts.append("used: " + "; ".join(self.boost_causes[:3]))
        return " · ".join(parts)

    def in_words(self) -> str:
        """Why this note was found, said plainly, e.g. "matches 'oak', 'worktops' · close in
        meaning · you opened it 4×, most recently today". The words need a search run with
        `explain=True` (which finds the terms matched and the uses behind the boost)."""
        parts = []
        if self.bm25 is not None and self.terms:
            shown = ", ".join(f"'{term}'" for term in self.terms[:MAX_TERMS_SAID])
            more = len(self.terms) - MAX_TERMS_SAID
            parts.append(f"matches {shown}" + (f" and {more} more" if more > 0 else ""))
        if self.vector is not None:
            meaning = next((words for low, words in MEANING if self.vector >= low), None)
            if meaning:
                parts.append(meaning)
        ranked = sorted(self.uses, key=lambda use: -abs(use.amount))
        parts.extend(use_in_words(use) for use in ranked[:MAX_USES_SAID])
        return " · ".join(parts) or "a loose match for your words"

    def public(self) -> PublicHit:
        """This hit as every front end shows it: the web API's search results, `charlie
        search --json` and the MCP tool `search_notes` all draw on this one shape."""
        return PublicHit(
            id=self.key,
            title=self.title,
            project=self.project,
            name=self.name,
            score=self.score,
            similarity=self.similarity,
            vector=self.vector,
            bm25=self.bm25,
            terms=list(self.terms),
            boost=self.boost,
            boost_causes=list(self.boost_causes),
            tags=list(self.tags),
            snippet=self.snippet,
            why=self.why(),
            in_words=self.in_words(),
        )


@dataclass(frozen=True)
class PublicHit:
    """A search hit as Charlie's front ends show it: the web API's search results (this is
    their schema), `charlie search --json` and the MCP tool `search_notes`. `Hit.public`
    makes it."""

    id: str  # project/name
    title: str
    project: str
    name: str
    score: float
    similarity: float
    vector: float | None
    bm25: float | None
    terms: list[str]
    boost: float
    boost_causes: list[str]
    tags: list[str]
    snippet: str
    why: str  # the numbers behind the rank (`Hit.why`)
    in_words: str  # why it was found, said plainly (`Hit.in_words`)


# How a cosine is said in words (all-MiniLM-L6-v2: unrelated texts mostly score under 0.2).
MEANING = ((0.6, "very close in meaning"), (0.4, "close in meaning"), (0.25, "related in meaning"))
MAX_TERMS_SAID = 4
MAX_USES_SAID = 2


def use_in_words(use: Use) -> str:
    """One use behind a boost, as the person would say it: "you opened it 4×, most
    recently today", "you used its tag #jwt yesterday"."""
    when = days_ago(use.last_age_days)
    once = use.events == 1
    lately = f" {when}" if once else f" {use.events}×, most recently {when}"
    if use.kind == "cited":
        answers = "an answer" if once else f"{use.events} answers"
        return f"Charlie drew on it in {answers}" + (
            f" {when}" if once else f", most recently {when}"
        )
    if use.kind == "dismissed":
        return f"you dismissed it{lately}, so it ranks lower"
    what = {
        "view": "you opened it",
        "accepted": "you pinned it from a suggestion",
        "tag": f"you used its tag #{use.tag}",
        "shown": "it was suggested to you",
    }[use.kind]
    return what + lately


@dataclass
class SearchResult:
    query: str
    mode: Mode
    hits: list[Hit]
    terms: list[str]
    literals: list[str]
    best_cosine: float | None = None
    keyword_used: bool = False
    fallback_reason: str | None = None
    truncated: bool = False
    incomplete: str | None = None  # why results may be missing: the index is still filling


@dataclass
class _Candidate:
    note_id: int
    vector: float | None = None
    vector_chunk: int | None = None
    bm25: float | None = None
    keyword_chunk: int | None = None


class Searcher:
    """Runs searches over one index with one configuration."""

    def __init__(
        self,
        home: Home,
        index: Index,
        config: SearchConfig | None = None,
        usage: UsageModel | None = None,
    ) -> None:
        self.home = home
        self.index = index
        self.config = config or SearchConfig()
        self.usage = usage or UsageModel(
            half_life_days=home.settings.usage_half_life_days, weight=home.settings.usage_weight
        )

    # ------------------------------------------------------------ signals

    def count(self, term: str) -> int:
        """How many chunks `term` occurs in, as FTS5 matches it. Kept until the index
        changes, in `home.shared`: a web request's new searcher finds its terms counted."""
        vectors = self.index.vectors()
        fresh = self.home.shared.of(TermCounts)
        cached = fresh.counted
        if cached is None or cached[0] is not vectors or len(cached[1]) >= MAX_COUNTED_TERMS:
            cached = fresh.counted = (vectors, {})
        counts = cached[1]
        if term not in counts:
            expression = match_expression([term])
            count = 0
            lists = self.index.postings()
            tokens = tokenizer().items([term])[0] if lists is not None else ()
            if lists is not None and len(tokens) == 1:  # one word: its posting list's length
                found = term_ids(self.index.db, tokens, add=False).get(tokens[0])
                count = 0 if found is None else lists.hits(found)
            elif expression is not None and len(vectors.chunk_ids):
                count = self.index.db.execute(
                    "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                    (in_text(expression),),
                ).fetchone()[0]
            counts[term] = int(count)
        return counts[term]

    def idf(self, term: str) -> float:
        """BM25's IDF of `term` in the index, as FTS5 matches it; 0 when it never occurs."""
        count = self.count(term)
        total = len(self.index.vectors().chunk_ids)
        return float(np.log(1 + (total - count + 0.5) / (count + 0.5))) if count else 0.0

    def common(self, terms: list[str]) -> list[str]:
        """Those of `terms` found in so many chunks that they only add to the score of the
        chunks the others match (`SearchConfig.common_share`); never the rarest term."""
        total = len(self.index.vectors().chunk_ids)
        most = max(self.config.common_share * total, self.config.common_min_chunks)
        if self.config.common_share >= 1.0 or not terms or most >= total:
            return []
        counts = {term: self.count(term) for term in terms}
        rarest = min(terms, key=lambda term: counts[term])
        return [term for term in terms if counts[term] > most and term != rarest]

    def _vector_side(
        self, query: str, project_ids: Sequence[int], vectors: Vectors
    ) -> dict[int, tuple[float, int]]:
        if not len(vectors.chunk_ids):
            return {}
        spans = vectors.rows_of(project_ids) if project_ids else None  # only their slices
        if spans == []:
            return {}
        q = self.index.embedder.embed([query])[0]
        # The best chunks, a few per wanted note, since a note's chunks often rank together.
        rows, sims = vectors.table.top(q, self.config.candidates * 4, spans)
        found: dict[int, tuple[float, int]] = {}
        for row, sim in zip(rows.tolist(), sims.tolist(), strict=True):
            note = int(vectors.note_ids[row])
            if note not in found:
                found[note] = (sim, int(vectors.chunk_ids[row]))
                if len(found) >= self.config.candidates:
                    break
        return found

    def _keyword_side(
        self, terms: list[str], project_ids: Sequence[int]
    ) -> dict[int, tuple[float, int]]:
        """The best notes by BM25 of `terms` (chunks with a term that is not common; every
        term scored), each with its score and best chunk: from the posting lists in memory
        (`charlie.retrieval.postings`), or FTS5's bm25() while they are not all kept."""
        lists = self.index.postings()
        if lists is None:
            return self._keyword_side_fts(terms, project_ids)
        common = set(self.common(terms))
        items = phrases(terms)
        weight = self.config.title_weight
        tokenized = tokenizer().items(items)
        ids = term_ids(self.index.db, (t for tokens in tokenized for t in tokens), add=False)
        scoring: list[tuple[Rows, Scores]] = []
        also: list[tuple[Rows, Scores] | int] = []
        for item, tokens in zip(items, tokenized, strict=True):
            if len(tokens) == 1:
                if tokens[0] not in ids:
                    continue
                part: tuple[Rows, Scores] | int = ids[tokens[0]]
            elif tokens:  # a phrase: FTS5 finds it, and scores it alone
                part = self._phrase_part(lists, item)
            else:
                continue
            if item in common:
                also.append(part)
            else:
                scoring.append(lists.part(part, weight) if isinstance(part, int) else part)
        best = ranked(lists, scoring, also, weight, project_ids, self.config.candidates * 4)
        found: dict[int, tuple[float, int]] = {}
        for row, score in best:
            note_id = int(lists.note_ids[row])
            if note_id not in found or score > found[note_id][0]:
                found[note_id] = (score, int(lists.chunk_ids[row]))
        return dict(list(found.items())[: self.config.candidates])

    def _phrase_part(self, lists: Postings, phrase: str) -> tuple[Rows, Scores]:
        """The chunks with this phrase of several words, and its part of their BM25."""
        expression = match_expression([phrase])
        rows = self.index.db.execute(
            "SELECT rowid, -bm25(chunks_fts, ?, 1.0, 0.0, 0.0) FROM chunks_fts "
            "WHERE chunks_fts MATCH ?",
            (self.config.title_weight, in_text(expression or '""')),
        ).fetchall()
        chunk_ids = np.array([r[0] for r in rows], dtype=np.int64)
        return lists.numbers(chunk_ids), np.array([r[1] for r in rows], dtype=np.float64)

    def _keyword_side_fts(
        self, terms: list[str], project_ids: Sequence[int]
    ) -> dict[int, tuple[float, int]]:
        common = self.common(terms)
        expression = match_expression([term for term in terms if term not in common])
        if expression is None:
            return {}
        # The chunks with a term that is not common: with a common one (every term scored)
        # and without (no common term there to score), so BM25 is the whole query's.
        matches = [in_text(expression)]
        also = match_expression(common)
        if also is not None:
            rare, scored = matches[0], in_text(also)
            matches = [f"({rare}) AND ({scored})", f"({rare}) NOT ({scored})"]
        if project_ids:  # in the MATCH, so FTS5 intersects instead of filtering every hit
            scope = f"scope : ({' OR '.join(scope_token(p) for p in project_ids)})"
            matches = [f"({match}) AND {scope}" for match in matches]
        ranked = " UNION ALL ".join(
            "SELECT rowid, bm25(chunks_fts, ?, 1.0, 0.0, 0.0) AS rank FROM chunks_fts "
            "WHERE chunks_fts MATCH ?"
            for _ in matches
        )
        rows = self.index.db.execute(
            f"SELECT chunks.note_id, -f.rank, f.rowid FROM ({ranked} ORDER BY rank LIMIT ?) "
            "AS f JOIN chunks ON chunks.id = f.rowid",
            (
                *(x for match in matches for x in (self.config.title_weight, match)),
                self.config.candidates * 4,
            ),
        ).fetchall()
        found: dict[int, tuple[float, int]] = {}
        for note_id, score, chunk_id in rows:
            if note_id not in found or score > found[note_id][0]:
                found[note_id] = (float(score), int(chunk_id))
        return dict(list(found.items())[: self.config.candidates])

    # ------------------------------------------------------------ search

    def legend(self, result: SearchResult) -> list[str]:
        """What each symbol of `Hit.why` means for `result`, with this searcher's values."""
        alpha = self.config.alpha
        if not result.keyword_used:
            similarity = "similarity = cosine"
        elif result.mode == "keyword":
            similarity = "similarity = BM25 ÷ the query's best BM25"
        else:
            similarity = (
                f"similarity = {alpha:g} × cosine + {1 - alpha:g} × BM25 ÷ the query's best BM25"
            )
        return [
            f"score = similarity × (1 + boost × weight), weight = {self.usage.weight:g} "
            "(CHARLIE_USAGE_WEIGHT); " + similarity,
            "cosine: closeness in meaning, 0 to 1 · BM25: how well the words match, higher is "
            "better, 'on' the words found · boost: 0 to 1, from your use of the note (opened, "
            f"tagged, pinned, cited), halving every {self.usage.half_life_days:g} days unused",
        ]

    def search(
        self,
        query: str,
        user: User,
        projects: Sequence[Project] = (),
        *,
        limit: int = 10,
        mode: Mode | None = None,
        explain: bool = True,
    ) -> SearchResult:
        """The `limit` best notes for `query` in `projects` (all when empty), for `user`.

        A damaged index is rebuilt from the note files and the search run again on it."""
        try:
            return self._search(query, user, projects, limit, mode, explain)
        except sqlite3.DatabaseError as exc:
            self.index.recover(exc)  # raises the error to show when it cannot heal
        try:
            return self._search(query, user, projects, limit, mode, explain)
        except sqlite3.DatabaseError as exc:
            raise self.index.unusable(exc) from exc

    def _search(
        self,
        query: str,
        user: User,
        projects: Sequence[Project],
        limit: int,
        mode: Mode | None,
        explain: bool,
    ) -> SearchResult:
        mode = mode or self.config.mode
        if mode not in MODES:
            raise QueryError(f"Unknown search mode {mode!r}; use one of: {', '.join(MODES)}.")
        text = " ".join(query.split())
        if not text:
            raise QueryError("The search query is empty: give some words to look for.")
        if limit < 1:
            raise QueryError("The number of results must be at least 1.")
        truncated = len(text) > MAX_QUERY_CHARS
        text = text[:MAX_QUERY_CHARS]

        found_literals = [lit.text for lit in literals(text)]
        terms = top_terms(text, self.idf, self.config.keyword_terms)
        keyword_terms = with_parts([*found_literals, *terms])
        result = SearchResult(text, mode, [], keyword_terms, found_literals, truncated=truncated)
        project_ids = [p.id for p in projects]

        vectors = self.index.vectors()
        # Fusion always needs both signals: the keyword side's query runs in a thread of its
        # own while this one embeds the query and multiplies (SQLite, onnxruntime and numpy
        # all let go of the GIL), and from here until it is done this thread uses no SQL.
        parallel = mode == "fusion" and self.config.parallel
        with Deferred(partial(self._keyword_side, keyword_terms, project_ids), parallel) as keyword:
            candidates = self._vector_candidates(mode, text, project_ids, vectors, result)
            use_keyword = mode in ("keyword", "fusion")
            if mode == "fallback":
                if found_literals:
                    result.fallback_reason = f"the query has literals: {', '.join(found_literals)}"
                elif (result.best_cosine or 0.0) < self.config.threshold:
                    result.fallback_reason = (
                        f"best cosine {result.best_cosine:.3f} < threshold {self.config.threshold}"
                    )
                use_keyword = result.fallback_reason is not None
            if use_keyword:
                result.keyword_used = True
                for note_id, (score, chunk) in keyword.result().items():
                    candidate = candidates.setdefault(note_id, _Candidate(note_id))
                    candidate.bm25, candidate.keyword_chunk = score, chunk

        similarity = self._combine(mode, candidates, result.keyword_used)
        for note_id in [i for i in similarity if _weak(candidates[i], self.config.min_vector)]:
            del similarity[note_id]
        result.hits = self._rank(candidates, similarity, user, limit, keyword_terms, explain)
        result.incomplete = self.index.incomplete()
        return result

    def _vector_candidates(
        self,
        mode: Mode,
        text: str,
        project_ids: Sequence[int],
        vectors: Vectors,
        result: SearchResult,
    ) -> dict[int, _Candidate]:
        candidates: dict[int, _Candidate] = {}
        if mode != "keyword":
            for note_id, (cos, chunk) in self._vector_side(text, project_ids, vectors).items():
                candidates[note_id] = _Candidate(note_id, vector=cos, vector_chunk=chunk)
            result.best_cosine = max((c.vector or 0.0 for c in candidates.values()), default=0.0)
        return candidates

    def _combine(
        self, mode: Mode, candidates: dict[int, _Candidate], keyword_used: bool
    ) -> dict[int, float]:
        """Each candidate's similarity in [0, 1] before the usage boost."""
        vec = {i: c.vector for i, c in candidates.items() if c.vector is not None}
        kw = {i: c.bm25 for i, c in candidates.items() if c.bm25 is not None}
        if mode == "vector" or not keyword_used:
            return {i: max(v, 0.0) for i, v in vec.items()}
        if mode == "keyword":
            top = max(kw.values(), default=1.0) or 1.0
            return {i: s / top for i, s in kw.items()}
        # Blend: alpha × cosine + (1 − alpha) × BM25 / the query's best BM25. Cosine stays
        # absolute (a weak match stays weak); BM25 is scaled per query, as it is unbounded.
        alpha = self.config.alpha
        top = max(kw.values(), default=0.0)
        return {
            i: alpha * max(vec.get(i, 0.0), 0.0)
            + (1 - alpha) * (kw.get(i, 0.0) / top if top else 0)
            for i in candidates
        }

    def _rank(
        self,
        candidates: dict[int, _Candidate],
        similarity: dict[int, float],
        user: User,
        limit: int,
        terms: list[str],
        explain: bool,
    ) -> list[Hit]:
        if not similarity:
            return []
        ids = self._contenders(similarity, limit)
        rows = self._note_rows(ids)
        if len(rows) < len(ids) < len(similarity):  # a contender's note is gone meanwhile:
            ids = list(similarity)  # one that was left out may take its place
            rows = self._note_rows(ids)
        keys = {i: f"{rows[i]['project']}/{rows[i]['name']}" for i in ids if i in rows}
        tags = {i: rows[i]["tags"].split() for i in keys}
        boosts = self.usage.boosts(
            self.home.db, user.id, {keys[i]: tags[i] for i in keys}, explain=False
        )
        scored = sorted(
            ((self.usage.apply(similarity[i], boosts[keys[i]].value), i) for i in keys),
            key=lambda pair: (-pair[0], pair[1]),
        )
        scored = [(score, i) for score, i in scored if score > 0][:limit]
        explained = (
            self.usage.boosts(self.home.db, user.id, {keys[i]: tags[i] for _, i in scored})
            if explain
            else {}
        )
        hits: list[Hit] = []
        for score, i in scored:
            row, candidate = rows[i], candidates[i]
            boost = explained.get(keys[i], boosts[keys[i]])
            hits.append(
                Hit(
                    key=keys[i],
                    project=row["project"],
                    name=row["name"],
                    title=row["title"],
                    path=row["path"],
                    score=score,
                    similarity=similarity[i],
                    vector=candidate.vector,
                    bm25=candidate.bm25,
                    boost=boost.value,
                    boost_causes=boost.causes if explain else [],
                    tags=tags[i],
                    weight=self.usage.weight,
                    uses=list(boost.uses) if explain else [],
                )
            )
        if explain:
            self._explain(hits, candidates, scored, terms)
        return hits

    def _contenders(self, similarity: dict[int, float], limit: int) -> list[int]:
        """The candidates that can still be among the `limit` best once boosted. A boost
        multiplies a similarity by 1 to 1 + weight, so one under the `limit`-th best
        similarity ÷ (1 + weight) can never pass it: its note and its uses are not read."""
        weight = self.usage.weight
        if weight < 0 or len(similarity) <= limit:
            return list(similarity)
        floor = sorted(similarity.values(), reverse=True)[limit - 1] / (1 + weight)
        floor -= abs(floor) * 1e-9  # a tie after rounding stays in
        return [i for i, value in similarity.items() if value >= floor]

    def _note_rows(self, ids: list[int]) -> dict[int, sqlite3.Row]:
        return {
            row["id"]: row
            for row in self.index.db.execute(
                f"SELECT id, project, name, title, tags, path FROM notes WHERE id IN "
                f"({', '.join('?' for _ in ids)})",
                ids,
            )
        }

    def _explain(
        self,
        hits: list[Hit],
        candidates: dict[int, _Candidate],
        scored: list[tuple[float, int]],
        terms: list[str],
    ) -> None:
        """Fill in the snippet and which keyword terms each shown note matches."""
        for hit, (_, note_id) in zip(hits, scored, strict=True):
            candidate = candidates[note_id]
            if candidate.bm25 is not None:
                for term in terms:
                    expression = match_expression([term])
                    if expression is None:
                        continue
                    hit_row = self.index.db.execute(
                        "SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid IN "
                        "(SELECT id FROM chunks WHERE note_id = ?) LIMIT 1",
                        (in_text(expression), note_id),
                    ).fetchone()
                    if hit_row:
                        hit.terms.append(term)
            chunk = candidate.keyword_chunk or candidate.vector_chunk
            if chunk is not None:
                row = self.index.db.execute("SELECT text FROM chunks WHERE id = ?", (chunk,))
                text = row.fetchone()  # None if another process has just re-indexed the note
                hit.snippet = _snippet(plain_text(text[0]), hit.terms or terms) if text else ""


def _weak(candidate: _Candidate, floor: float) -> bool:
    """Found by no query word, and only faintly like the query: not a match."""
    return candidate.bm25 is None and (candidate.vector or 0.0) < floor


def _snippet(text: str, terms: Sequence[str], size: int = 200) -> str:
    """About `size` characters of `text` (its words, markup gone), around the first place a
    query term appears."""
    flat = re.sub(r"\s+", " ", text).strip()
    if len(flat) <= size:
        return flat
    lower = flat.lower()
    found = [lower.find(term.lower()[:5]) for term in terms if len(term) >= 3]
    at = min((f for f in found if f >= 0), default=0)
    start = max(0, at - size // 3)
    if start:
        start = flat.find(" ", start) + 1 or start
    piece = flat[start : start + size]
    if start + size < len(flat):
        piece = piece.rsplit(" ", 1)[0] + "…"
    return ("…" if start else "") + piece


@dataclass
class TermCounts:
    """How many chunks hold each query word, for the vectors counted in (in `home.shared`)."""

    counted: tuple[Vectors, dict[str, int]] | None = None


def in_text(expression: str) -> str:
    """A MATCH expression limited to the words of notes (title and text), never the scope."""
    return f"{{title text}} : ({expression})"
