"""SciFact study: keyword (FTS5 BM25), vector (MiniLM), fallback and fusion retrieval.

Measures nDCG@10 and Recall@100 on BEIR SciFact for each way Charlie can retrieve, tunes
every knob on the *train* qrels and reports the *test* qrels with the knobs train chose:

- keyword: SQLite FTS5 `bm25()` over title and text columns (tokenizer
  `charlie.retrieval.keywords.FTS5_TOKENIZE`), queries made of `charlie.retrieval.keywords`
  terms OR'ed: all terms, all terms plus the pieces of compounds, or the top-k terms by IDF;
  title weight tuned;
- vector: `charlie.retrieval.embeddings.LocalEmbedder` over title + text (truncated at 256
  tokens) and over overlapping chunks (`charlie.retrieval.chunking.chunk_text`, each prefixed
  with the title), a document scoring as its whole text, its best chunk, or the mean of the
  two; chunk sizes given with --chunks (default 120 words, 30 overlapping: ~170 tokens with
  the title, inside the model's 256-token window) are tried too;
- fallback: vector, merged with keyword (RRF) when the best cosine is under a threshold or the
  query holds a literal (`charlie.retrieval.keywords.literals`);
- fusion: reciprocal-rank fusion (k=60); a convex combination of min-max normalised scores;
  and a blend of the raw cosine with BM25 divided by the query's best BM25;
- reference: BM25 from `bm25s` (Lucene k1=1.2, b=0.75, English stop words, Snowball stemmer),
  when `bm25s` and `PyStemmer` are installed (benchmark only: pip install bm25s PyStemmer).

The default mode is the fusion with the best train nDCG@10.

Corpus vectors are cached in benchmarks/out/ (git-ignored): the first run embeds 5,183
abstracts and ~12,600 chunks (120/30), about 10 minutes on 2 idle cores.

    .venv/bin/python benchmarks/scifact.py [--data DIR] [--out DIR] [--chunks 80/20,120/30]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from charlie.retrieval.chunking import chunk_text
from charlie.retrieval.embeddings import LocalEmbedder
from charlie.retrieval.keywords import (
    FTS5_TOKENIZE,
    literals,
    match_expression,
    terms,
    top_terms,
    with_parts,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "scifact"
DEFAULT_OUT = ROOT / "benchmarks" / "out"
DEPTH = 1000  # candidates taken from each side before fusion
CHUNK_WORDS, CHUNK_OVERLAP = 120, 30

Ranking = list[tuple[int, float]]  # (document index, score), best first
Run = dict[str, Ranking]  # query id -> ranking
Qrels = dict[str, dict[str, int]]  # query id -> document id -> relevance


# -- data -------------------------------------------------------------------------------------


@dataclass
class SciFact:
    doc_ids: list[str]
    titles: list[str]
    texts: list[str]
    queries: dict[str, str]
    qrels: dict[str, Qrels] = field(default_factory=dict)  # split -> qrels


def load(data_dir: Path) -> SciFact:
    data = SciFact([], [], [], {})
    with (data_dir / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            data.doc_ids.append(str(doc["_id"]))
            data.titles.append(doc.get("title") or "")
            data.texts.append(doc.get("text") or "")
    with (data_dir / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            query = json.loads(line)
            data.queries[str(query["_id"])] = query["text"]
    for split in ("train", "test"):
        qrels: Qrels = {}
        lines = (data_dir / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
        for line in lines[1:]:  # header: query-id corpus-id score
            qid, doc_id, score = line.split("\t")
            qrels.setdefault(qid, {})[doc_id] = int(score)
        data.qrels[split] = qrels
    return data


# -- metrics ----------------------------------------------------------------------------------


def ndcg_at(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    """Normalised discounted cumulative gain of the first `k` results (graded, log2)."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(rel / math.log2(i + 2) for i, rel in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], relevant: dict[str, int], k: int = 100) -> float:
    """Share of the relevant documents found in the first `k` results."""
    wanted = {doc for doc, rel in relevant.items() if rel > 0}
    return len(wanted.intersection(ranked[:k])) / len(wanted) if wanted else 0.0


def evaluate(run: Run, qrels: Qrels, doc_ids: list[str]) -> dict[str, float]:
    ndcg, recall = [], []
    for qid, relevant in qrels.items():
        ranked = [doc_ids[i] for i, _ in run.get(qid, [])]
        ndcg.append(ndcg_at(ranked, relevant, 10))
        recall.append(recall_at(ranked, relevant, 100))
    return {"ndcg@10": float(np.mean(ndcg)), "recall@100": float(np.mean(recall))}


# -- keyword side -----------------------------------------------------------------------------


class KeywordIndex:
    """The corpus in an in-memory FTS5 table: title and text columns, BM25 ranking."""

    def __init__(self, data: SciFact) -> None:
        self.size = len(data.doc_ids)
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            f"CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize='{FTS5_TOKENIZE}')"
        )
        with self.db:
            self.db.executemany(
                "INSERT INTO docs(rowid, title, body) VALUES (?, ?, ?)",
                zip(range(self.size), data.titles, data.texts, strict=True),
            )

    @functools.cache  # noqa: B019 - one index per run, kept for the whole run
    def idf(self, term: str) -> float:
        """BM25's IDF of `term` as FTS5 matches it (a phrase for compounds); 0 if absent."""
        expression = match_expression([term])
        if expression is None:
            return 0.0
        (count,) = self.db.execute(
            "SELECT count(*) FROM docs WHERE docs MATCH ?", (expression,)
        ).fetchone()
        if count == 0:
            return 0.0
        return math.log(1 + (self.size - count + 0.5) / (count + 0.5))

    def search(self, query_terms: list[str], title_weight: float, limit: int = DEPTH) -> Ranking:
        expression = match_expression(query_terms)
        if expression is None:
            return []
        rows = self.db.execute(
            "SELECT rowid, bm25(docs, ?, 1.0) AS rank FROM docs WHERE docs MATCH ? "
            "ORDER BY rank LIMIT ?",
            (title_weight, expression, limit),
        ).fetchall()
        return [(int(rowid), -float(rank)) for rowid, rank in rows]


def keyword_run(
    index: KeywordIndex, queries: dict[str, str], k: int | None, parts: bool, title_weight: float
) -> Run:
    """k=None: every term of the query, else its top-k terms by IDF; parts: add the pieces
    of compound terms (`charlie.retrieval.keywords.with_parts`)."""
    run: Run = {}
    for qid, text in queries.items():
        chosen = terms(text) if k is None else top_terms(text, index.idf, k)
        run[qid] = index.search(with_parts(chosen) if parts else chosen, title_weight)
    return run


def bm25s_run(data: SciFact, queries: dict[str, str]) -> Run | None:
    """Reference BM25 (Lucene variant) with bm25s, or None when it is not installed."""
    try:
        import bm25s
        import Stemmer
    except ImportError:
        return None
    stemmer = Stemmer.Stemmer("english")
    corpus = [f"{title} {text}" for title, text in zip(data.titles, data.texts, strict=True)]
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index(
        bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    qids = list(queries)
    tokens = bm25s.tokenize(
        [queries[q] for q in qids], stopwords="en", stemmer=stemmer, show_progress=False
    )
    docs, scores = retriever.retrieve(
        tokens, k=min(100, len(corpus)), show_progress=False, n_threads=1
    )
    return {
        qid: [(int(d), float(s)) for d, s in zip(docs[row], scores[row], strict=True) if s > 0]
        for row, qid in enumerate(qids)
    }


# -- vector side ------------------------------------------------------------------------------


def cached_vectors(path: Path, texts: list[str], embedder: LocalEmbedder) -> npt.NDArray[Any]:
    """Vectors of `texts`; those already in the cache at `path` (same text, same model) are
    read from it, the others embedded, and the cache rewritten."""
    keys = [hashlib.sha256(text.encode("utf-8")).hexdigest()[:32] for text in texts]
    known: dict[str, npt.NDArray[np.float32]] = {}
    if path.exists():
        cached = np.load(path)
        if str(cached["model"]) == embedder.name:
            known = dict(zip(cached["keys"].tolist(), cached["vectors"], strict=True))
    missing = [i for i, key in enumerate(keys) if key not in known]
    if missing:
        started = time.perf_counter()
        fresh = embedder.embed([texts[i] for i in missing])
        seconds = time.perf_counter() - started
        print(
            f"  embedded {len(missing)} texts in {seconds:.0f} s ({len(missing) / seconds:.1f}/s)"
        )
        known.update(zip((keys[i] for i in missing), fresh, strict=True))
        path.parent.mkdir(parents=True, exist_ok=True)
        vectors = np.stack([known[key] for key in keys])
        np.savez(path, vectors=vectors, keys=np.asarray(keys), model=embedder.name)
    return np.stack([known[key] for key in keys]).astype(np.float32, copy=False)


@dataclass
class DenseIndex:
    docs: npt.NDArray[np.float32]  # one row per document (title + text, truncated)
    chunks: npt.NDArray[np.float32]  # one row per chunk (title + chunk)
    owner: npt.NDArray[np.int64]  # chunk row -> document index (non-decreasing)

    def scores(self, query: npt.NDArray[np.float32], variant: str) -> npt.NDArray[np.float32]:
        """Cosine of the query to every document: whole, best chunk, or their mean."""
        whole = self.docs @ query
        if variant == "doc":
            return whole
        starts = np.flatnonzero(np.r_[True, self.owner[1:] != self.owner[:-1]])
        best_chunk = np.maximum.reduceat(self.chunks @ query, starts)
        chosen = best_chunk if variant == "chunk" else (whole + best_chunk) / 2
        return np.asarray(chosen, dtype=np.float32)


def build_dense(
    data: SciFact,
    embedder: LocalEmbedder,
    out: Path,
    chunk_words: int = CHUNK_WORDS,
    chunk_overlap: int = CHUNK_OVERLAP,
) -> DenseIndex:
    docs = [f"{t} {x}".strip() for t, x in zip(data.titles, data.texts, strict=True)]
    chunk_texts: list[str] = []
    owner: list[int] = []
    for number, (title, text) in enumerate(zip(data.titles, data.texts, strict=True)):
        for chunk in chunk_text(text, chunk_words, chunk_overlap) or [""]:
            chunk_texts.append(f"{title} {chunk}".strip())
            owner.append(number)
    chunks_file = out / f"scifact-chunks-{chunk_words}-{chunk_overlap}.npz"
    return DenseIndex(
        cached_vectors(out / "scifact-docs.npz", docs, embedder),
        cached_vectors(chunks_file, chunk_texts, embedder),
        np.asarray(owner, dtype=np.int64),
    )


def dense_run(
    dense: DenseIndex, query_vectors: dict[str, npt.NDArray[np.float32]], variant: str
) -> Run:
    run: Run = {}
    for qid, vector in query_vectors.items():
        scores = dense.scores(vector, variant)
        depth = min(DEPTH, len(scores) - 1)  # a corpus smaller than DEPTH: all but one
        top = np.argpartition(-scores, depth)[:depth]
        top = top[np.argsort(-scores[top])]
        run[qid] = [(int(i), float(scores[i])) for i in top]
    return run


# -- combining --------------------------------------------------------------------------------


def rrf(*rankings: Ranking, k: int = 60) -> Ranking:
    """Reciprocal-rank fusion: each list adds 1 / (k + rank) to a document."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (doc, _) in enumerate(ranking, start=1):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (k + rank)
    return _ranked(fused)


def convex_min_max(vector: Ranking, keyword: Ranking, alpha: float) -> Ranking:
    """alpha × vector + (1 − alpha) × keyword, each min-max normalised over its candidates
    (a document missing from one side gets 0 there)."""
    v, k = _min_max(vector), _min_max(keyword)
    return _ranked({d: alpha * v.get(d, 0.0) + (1 - alpha) * k.get(d, 0.0) for d in v.keys() | k})


def blend(vector: Ranking, keyword: Ranking, alpha: float) -> Ranking:
    """alpha × cosine + (1 − alpha) × BM25 / the query's best BM25.

    The cosine is kept as it is (it is already on a fixed scale, and stays comparable across
    queries and collections); only BM25, which has no fixed scale, is divided by its best
    score. A document missing from a side gets 0 there."""
    best = max((score for _, score in keyword), default=0.0) or 1.0
    k = {doc: score / best for doc, score in keyword}
    v = dict(vector)
    return _ranked({d: alpha * v.get(d, 0.0) + (1 - alpha) * k.get(d, 0.0) for d in v.keys() | k})


def fallback(vector: Ranking, keyword: Ranking, threshold: float, has_literal: bool) -> Ranking:
    """Vector alone when confident; merged with keyword (RRF) when the best cosine is under
    `threshold` or the query holds a literal."""
    best = vector[0][1] if vector else 0.0
    return rrf(vector, keyword) if has_literal or best < threshold else vector


def _min_max(ranking: Ranking) -> dict[int, float]:
    if not ranking:
        return {}
    scores = [score for _, score in ranking]
    low, high = min(scores), max(scores)
    return {doc: (score - low) / (high - low or 1.0) for doc, score in ranking}


def _ranked(scores: dict[int, float]) -> Ranking:
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def combine(runs: Sequence[Run], how: Callable[..., Ranking]) -> Run:
    """Apply `how` to each query's rankings, one from each run."""
    return {qid: how(*(run.get(qid, []) for run in runs)) for qid in runs[0]}


# -- the study --------------------------------------------------------------------------------


@dataclass
class Result:
    method: str
    params: str
    train: dict[str, float]
    test: dict[str, float]
    grid: dict[str, float] = field(default_factory=dict)  # train nDCG@10 of every candidate


class Study:
    """Scores runs on train and test, tunes on train only, and keeps the table."""

    def __init__(self, data: SciFact) -> None:
        self.data = data
        self.results: list[Result] = []

    def score(self, run: Run, split: str) -> dict[str, float]:
        return evaluate(run, self.data.qrels[split], self.data.doc_ids)

    def tune(self, method: str, candidates: dict[str, Run]) -> str:
        """Keep the candidate with the best train nDCG@10, report it on test; its params."""
        grid = {params: self.score(run, "train")["ndcg@10"] for params, run in candidates.items()}
        best = max(grid, key=lambda params: grid[params])
        train = self.score(candidates[best], "train")
        test = self.score(candidates[best], "test")
        self.results.append(Result(method, best, train, test, grid if len(grid) > 1 else {}))
        return best

    def print_table(self) -> None:
        print(f"\n{'method':<34} {'chosen on train':<28} {'train':>8} {'test':>8} {'test':>7}")
        print(f"{'':<34} {'':<28} {'nDCG@10':>8} {'nDCG@10':>8} {'R@100':>7}")
        for r in self.results:
            print(
                f"{r.method:<34} {r.params:<28} {r.train['ndcg@10']:>8.4f} "
                f"{r.test['ndcg@10']:>8.4f} {r.test['recall@100']:>7.4f}"
            )


def embedding_throughput(embedder: LocalEmbedder, texts: list[str]) -> float:
    started = time.perf_counter()
    embedder.embed(texts)
    return len(texts) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--chunks",
        default=f"{CHUNK_WORDS}/{CHUNK_OVERLAP}",
        help="chunk sizes to try, as words/overlap[,words/overlap…] (each is embedded once "
        "and cached; ~7 min per size on 2 cores)",
    )
    args = parser.parse_args()

    data = load(args.data)
    queries = {q: data.queries[q] for split in ("train", "test") for q in data.qrels[split]}
    print(f"SciFact: {len(data.doc_ids)} documents, {len(queries)} queries with qrels")
    study = Study(data)
    timings: dict[str, float] = {}
    chosen: dict[str, str] = {}

    reference = bm25s_run(data, queries)
    if reference is not None:
        study.tune("BM25, bm25s (reference)", {"k1=1.2 b=0.75": reference})

    started = time.perf_counter()
    index = KeywordIndex(data)
    timings["FTS5 index build, s"] = time.perf_counter() - started
    keyword_runs: dict[str, dict[str, Run]] = {}
    for label, k, parts in (
        ("all terms", None, False),
        ("all terms + parts", None, True),
        ("top-4 terms", 4, False),
        ("top-8 terms", 8, False),
        ("top-12 terms", 12, False),
    ):
        started = time.perf_counter()
        keyword_runs[label] = {
            f"title x{w:g}": keyword_run(index, queries, k, parts, w) for w in (1.0, 2.0, 3.0)
        }
        timings[f"keyword ({label}), ms/query"] = (
            1000 * (time.perf_counter() - started) / (3 * len(queries))
        )
        study.tune(f"keyword FTS5, {label}", keyword_runs[label])
    every_keyword = {f"{label}, {p}": r for label, g in keyword_runs.items() for p, r in g.items()}
    chosen["keyword"] = study.tune("keyword FTS5 (best on train)", every_keyword)
    keyword = every_keyword[chosen["keyword"]]

    embedder = LocalEmbedder()
    sizes = [tuple(int(n) for n in size.split("/")) for size in args.chunks.split(",")]
    denses = {f"{w}/{o}": build_dense(data, embedder, args.out, w, o) for w, o in sizes}
    qids = list(queries)
    timings["query embeddings/s"] = embedding_throughput(embedder, [queries[q] for q in qids])
    abstracts = [f"{t} {x}" for t, x in zip(data.titles[:200], data.texts[:200], strict=True)]
    timings["abstract embeddings/s"] = embedding_throughput(embedder, abstracts)
    query_vectors = dict(zip(qids, embedder.embed([queries[q] for q in qids]), strict=True))
    first = next(iter(denses.values()))
    dense_runs = {"doc": dense_run(first, query_vectors, "doc")}
    for size, dense in denses.items():
        for variant in ("chunk", "mean"):
            dense_runs[f"{variant} {size}"] = dense_run(dense, query_vectors, variant)
    study.tune("vector, whole document", {"doc": dense_runs["doc"]})
    chosen["vector"] = study.tune("vector (best on train)", dense_runs)
    vector = dense_runs[chosen["vector"]]

    has_literal = {qid: bool(literals(text)) for qid, text in queries.items()}
    chosen["fallback"] = study.tune(
        "fallback: vector, + keyword (RRF)",
        {
            f"cos < {t:.2f} or literal": {
                q: fallback(vector[q], keyword[q], t, has_literal[q]) for q in queries
            }
            for t in (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 1.01)
        },
    )
    # Fusion tunes its own keyword side: the best keyword family, at every title weight.
    sides = keyword_runs[chosen["keyword"].rsplit(", ", 1)[0]]
    alphas = [round(a, 2) for a in np.arange(0.3, 0.91, 0.05)]
    fusion = {
        "fusion: RRF": {f"k=60, {t}": combine([vector, kw], rrf) for t, kw in sides.items()},
        "fusion: convex, min-max": {
            f"alpha={a:.2f}, {t}": combine([vector, kw], functools.partial(convex_min_max, alpha=a))
            for t, kw in sides.items()
            for a in alphas
        },
        "fusion: cosine + BM25/max": {
            f"alpha={a:.2f}, {t}": combine([vector, kw], functools.partial(blend, alpha=a))
            for t, kw in sides.items()
            for a in alphas
        },
    }
    for method, candidates in fusion.items():
        study.tune(method, candidates)
    fused = {r.method: r for r in study.results if r.method in fusion}
    default = max(fused.values(), key=lambda r: r.train["ndcg@10"])
    chosen["default"] = f"{default.method} {default.params}"
    study.print_table()

    singles = [r for r in study.results if r.method.endswith("(best on train)")]
    best_single = max(r.test["ndcg@10"] for r in singles)
    literal_share = sum(has_literal.values()) / len(has_literal)
    print(f"\ndefault mode (best fusion on train): {chosen['default']}")
    print(
        f"  test nDCG@10 {default.test['ndcg@10']:.4f}; target 0.73: "
        f"{'met' if default.test['ndcg@10'] >= 0.73 else 'NOT met'}; "
        f"better single signal {best_single:.4f}: "
        f"{'above' if default.test['ndcg@10'] >= best_single else 'BELOW'}"
    )
    print(f"queries holding a literal: {literal_share:.0%}")
    for name, value in timings.items():
        print(f"{name}: {value:.1f}")

    args.out.mkdir(parents=True, exist_ok=True)
    report = {
        "embedder": embedder.name,
        "fts5_tokenize": FTS5_TOKENIZE,
        "chunk_sizes_tried": list(denses),
        "chosen_on_train": chosen,
        "results": [r.__dict__ for r in study.results],
        "literal_share": literal_share,
        "timings": timings,
    }
    (args.out / "scifact.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(f"wrote {args.out / 'scifact.json'}")


if __name__ == "__main__":
    main()
