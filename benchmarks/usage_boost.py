"""Usage boost, on a scripted scenario: does use lift the right notes, modestly, and fade?

A data home with one shared project of real scientific abstracts (a subset of BEIR SciFact:
every abstract relevant to a *test* claim, plus hard negatives — the abstracts BM25 ranks
highest for those claims without being relevant to any — up to `--notes`) is indexed with
the local model and searched with `charlie.retrieval.search.Searcher` (default mode, fusion;
the other modes too) for every test claim, as different people:

- bob: never used anything: his ranking is the plain one (and is checked to stay so);
- alice: worked on 40 *train* claims that share evidence with test claims: she viewed each of
  their abstracts 2–5 times and cited half of them, over the last three weeks; she also
  read 30 unrelated abstracts (relevant to no test claim) heavily: 6–12 views and 1–2
  citations each;
- carol: only alice's unrelated reading (use that can only mislead);
- dave: the worst case for the ceiling: 10 views and 2 citations of *every* distractor
  (hard negative);
- alice-d7 … alice-d365: alice's exact history, shifted that many days into the past.

It reports (a) how far the abstracts alice used move for the related test claims (ranks and
scores), (b) over every claim and every pair (boosted note that is not relevant, relevant
note), how often the boosted one overtakes a relevant one whose similarity is more than
1.3× its own (the ×1.3 ceiling says never) and how often one within 1.3×, (c) how the lift
fades with the age of the use (and that `UsageModel.boosts(now=…)` agrees), (d) that bob's
rankings are identical before and after the others' use, and nDCG@10 with and without use.

    .venv/bin/python benchmarks/usage_boost.py [--data ../shared/data/scifact] [--notes 1000]

The SciFact files are read from the shared data folder and never copied into the repository;
the abstracts' vectors are cached in benchmarks/out/ (git-ignored) so a second run does not
embed again. Writes benchmarks/out/usage-boost.json and, with matplotlib,
docs/benchmarks/usage-boost-ranks.png and docs/benchmarks/usage-boost-fade.png.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from support import code_fingerprint

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "scifact"
DEFAULT_OUT = ROOT / "benchmarks" / "out" / "usage-boost.json"
DEFAULT_PLOTS = ROOT / "docs" / "benchmarks"
PROJECT = "papers"
LIMIT = 200  # results kept per search: every candidate with a score above 0
HISTORY_CLAIMS = 40
NOISE_NOTES = 30
FADE_AGES = [0, 7, 30, 60, 90, 180, 365]
MODES = ("fusion", "vector", "keyword", "fallback")
CEILING = 1.3

Qrels = dict[str, set[str]]


# ----------------------------------------------------------------------------- data


@dataclass
class SciFact:
    docs: dict[str, tuple[str, str]]  # id -> (title, text)
    queries: dict[str, str]
    train: Qrels
    test: Qrels


def load(data_dir: Path) -> SciFact:
    docs: dict[str, tuple[str, str]] = {}
    with (data_dir / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            docs[str(doc["_id"])] = (doc.get("title") or "", doc.get("text") or "")
    queries: dict[str, str] = {}
    with (data_dir / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            query = json.loads(line)
            queries[str(query["_id"])] = query["text"]

    def qrels(split: str) -> Qrels:
        out: Qrels = {}
        with (data_dir / "qrels" / f"{split}.tsv").open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                if int(row["score"]) > 0:
                    out.setdefault(row["query-id"], set()).add(row["corpus-id"])
        return out

    return SciFact(docs, queries, qrels("train"), qrels("test"))


def choose_corpus(data: SciFact, notes: int, seed: int) -> tuple[list[str], list[str]]:
    """(every abstract relevant to a test claim, distractors: hard negatives).

    The distractors are the abstracts that BM25 (SQLite FTS5, Charlie's tokenizer, the
    claim's terms OR'ed) ranks highest for the test claims without being relevant to any
    test claim, taken round-robin over the claims until the corpus has `notes` abstracts:
    papers on the same subjects, as a person's own library would hold.
    """
    from charlie.retrieval.keywords import FTS5_TOKENIZE, match_expression, terms

    relevant = sorted({d for docs in data.test.values() for d in docs} & data.docs.keys())
    taken = set(relevant)
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE docs USING fts5(id UNINDEXED, title, text, tokenize = "
               f"'{FTS5_TOKENIZE}')")  # fmt: skip
    db.executemany("INSERT INTO docs VALUES (?, ?, ?)", [(k, *v) for k, v in data.docs.items()])
    ranked: list[list[str]] = []
    for qid in sorted(data.test, key=int):
        expression = match_expression(terms(data.queries[qid]))
        if expression is None:
            continue
        rows = db.execute(
            "SELECT id FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT 60", (expression,)
        ).fetchall()
        ranked.append([r[0] for r in rows if r[0] not in taken])
    db.close()
    random.Random(f"corpus-{seed}").shuffle(ranked)
    distractors: list[str] = []
    depth = 0
    while len(taken) < notes and any(depth < len(r) for r in ranked):
        for candidates in ranked:
            if depth < len(candidates) and candidates[depth] not in taken and len(taken) < notes:
                taken.add(candidates[depth])
                distractors.append(candidates[depth])
        depth += 1
    return relevant, sorted(distractors)


def key(doc_id: str) -> str:
    return f"{PROJECT}/doc-{doc_id}"


# ----------------------------------------------------------------------------- embedding


class CachedEmbedder:
    """The local model with an on-disk cache of the vectors of texts it has embedded."""

    def __init__(self, inner: Any, path: Path) -> None:
        self.inner = inner
        self.path = path
        self.cache: dict[str, npt.NDArray[np.float32]] = {}
        self.embedded = 0
        self.seconds = 0.0
        if path.exists():
            with np.load(path, allow_pickle=False) as data:
                if str(data["model"]) == inner.name:
                    self.cache = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self.cache]
        if missing:
            start = time.perf_counter()
            vectors = self.inner.embed([texts[i] for i in missing])
            self.seconds += time.perf_counter() - start
            self.embedded += len(missing)
            for i, vector in zip(missing, vectors, strict=True):
                self.cache[keys[i]] = vector
        return np.stack([self.cache[k] for k in keys]).astype(np.float32)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = sorted(self.cache)
        np.savez(
            self.path,
            model=np.array(self.inner.name),
            keys=np.array(keys),
            vectors=np.stack([self.cache[k] for k in keys]),
        )


# ----------------------------------------------------------------------------- scenario


@dataclass
class Event:
    kind: str
    note: str
    days_ago: float


@dataclass
class Scenario:
    history_claims: list[str]
    used_related: set[str]  # note keys alice used through the history
    noise: set[str]  # note keys alice (and carol) used that no test claim needs
    alice: list[Event] = field(default_factory=list)
    carol: list[Event] = field(default_factory=list)
    dave: list[Event] = field(default_factory=list)


def make_scenario(
    data: SciFact, relevant: list[str], distractors: list[str], seed: int
) -> Scenario:
    rng = random.Random(f"scenario-{seed}")
    in_corpus = set(relevant) | set(distractors)
    test_docs = set(relevant)
    # Train claims whose evidence is all in the corpus and shares an abstract with a test claim.
    candidates = sorted(
        q for q, docs in data.train.items() if docs <= in_corpus and docs & test_docs
    )
    history = sorted(rng.sample(candidates, min(HISTORY_CLAIMS, len(candidates))))
    scenario = Scenario(history, set(), set())
    for claim in history:
        for doc in sorted(data.train[claim]):
            note = key(doc)
            scenario.used_related.add(note)
            for _ in range(rng.randint(2, 5)):
                scenario.alice.append(Event("view", note, rng.uniform(1, 21)))
            if rng.random() < 0.5:
                scenario.alice.append(Event("cited", note, rng.uniform(1, 21)))
    for doc in rng.sample(distractors, min(NOISE_NOTES, len(distractors))):
        note = key(doc)
        scenario.noise.add(note)
        for _ in range(rng.randint(6, 12)):
            scenario.carol.append(Event("view", note, rng.uniform(1, 14)))
        for _ in range(rng.randint(1, 2)):
            scenario.carol.append(Event("cited", note, rng.uniform(1, 14)))
    scenario.alice += scenario.carol
    for doc in distractors:
        note = key(doc)
        scenario.dave += [Event("view", note, 1 + i) for i in range(10)]
        scenario.dave += [Event("cited", note, 2.5), Event("cited", note, 5.5)]
    return scenario


def record_events(home: Any, user_id: int, events: list[Event], now: datetime, shift: float) -> int:
    from charlie.retrieval import usage

    home.db.execute("BEGIN")
    for event in events:
        at = now - timedelta(days=event.days_ago + shift)
        usage.record(home.db, user_id, event.kind, note=event.note, at=at)
    home.db.execute("COMMIT")
    return len(events)


# ----------------------------------------------------------------------------- searching


@dataclass
class Row:
    key: str
    rank: int  # 1-based
    score: float
    similarity: float
    boost: float


Ranking = list[Row]


def search_all(searcher: Any, user: Any, queries: dict[str, str], mode: str) -> dict[str, Ranking]:
    out: dict[str, Ranking] = {}
    for qid, text in queries.items():
        result = searcher.search(text, user, (), limit=LIMIT, mode=mode, explain=False)
        out[qid] = [
            Row(h.key, i + 1, h.score, h.similarity, h.boost) for i, h in enumerate(result.hits)
        ]
    return out


def ndcg10(rankings: dict[str, Ranking], qrels: Qrels) -> float:
    scores = []
    for qid, relevant in qrels.items():
        keys = {key(d) for d in relevant}
        dcg = sum(
            1.0 / math.log2(row.rank + 1) for row in rankings.get(qid, [])[:10] if row.key in keys
        )
        ideal = sum(1.0 / math.log2(i + 2) for i in range(min(10, len(keys))))
        scores.append(dcg / ideal if ideal else 0.0)
    return round(float(np.mean(scores)), 4)


def identical(a: dict[str, Ranking], b: dict[str, Ranking]) -> dict[str, Any]:
    same = 0
    worst = 0.0
    for qid in a:
        ka = [(r.key, r.score) for r in a[qid]]
        kb = [(r.key, r.score) for r in b[qid]]
        if [k for k, _ in ka] == [k for k, _ in kb]:
            same += 1
            worst = max([worst, *(abs(x[1] - y[1]) for x, y in zip(ka, kb, strict=True))])
        else:
            worst = math.inf
    return {"queries": len(a), "identical_order": same, "max_abs_score_diff": worst}


def movement(
    before: dict[str, Ranking], after: dict[str, Ranking], qrels: Qrels, used: set[str]
) -> dict[str, Any]:
    """Rank and score moves of used relevant notes in the test claims they are relevant to."""
    pairs: list[dict[str, Any]] = []
    bystanders: list[int] = []  # rank change of relevant notes that were not used
    for qid, docs in sorted(qrels.items()):
        b = {r.key: r for r in before[qid]}
        a = {r.key: r for r in after[qid]}
        keys = {key(d) for d in docs}
        if not keys & used:
            continue
        for note in sorted(keys):
            rb, ra = b.get(note), a.get(note)
            if note not in used:
                if rb and ra:
                    bystanders.append(rb.rank - ra.rank)
                continue
            passed_by = []
            if rb and ra and ra.rank > rb.rank:  # who passed it, and why
                for row in after[qid][: ra.rank - 1]:
                    if row.key in b and b[row.key].rank > rb.rank:
                        role = "relevant" if row.key in keys else "not relevant"
                        role += ", used by alice" if row.key in used else ""
                        passed_by.append(
                            f"{row.key} ({role}; similarity {row.similarity:.4f}, "
                            f"boost {row.boost:.3f})"
                        )
            pairs.append(
                {
                    "passed_by": passed_by,
                    "query": qid,
                    "note": note,
                    "rank_before": rb.rank if rb else None,
                    "rank_after": ra.rank if ra else None,
                    "score_before": round(rb.score, 4) if rb else None,
                    "score_after": round(ra.score, 4) if ra else None,
                    "similarity": round(ra.similarity, 4) if ra else None,
                    "boost": round(ra.boost, 3) if ra else None,
                }
            )
    found = [p for p in pairs if p["rank_before"] and p["rank_after"]]
    gains = [p["rank_before"] - p["rank_after"] for p in found]
    lower = [p for p in found if p["rank_before"] > 1]
    ratios = [p["score_after"] / p["score_before"] for p in found if p["score_before"]]
    return {
        "pairs": len(pairs),
        "queries": len({p["query"] for p in pairs}),
        "in_both_rankings": len(found),
        "moved_up": sum(g > 0 for g in gains),
        "unchanged": sum(g == 0 for g in gains),
        "moved_down": sum(g < 0 for g in gains),
        "rank_gain_median": float(np.median(gains)) if gains else None,
        "rank_gain_mean": round(float(np.mean(gains)), 2) if gains else None,
        "rank_gain_max": max(gains) if gains else None,
        "median_rank_before": float(np.median([p["rank_before"] for p in found]))
        if found
        else None,
        "median_rank_after": float(np.median([p["rank_after"] for p in found])) if found else None,
        "top1_before": sum(p["rank_before"] == 1 for p in found),
        "top1_after": sum(p["rank_after"] == 1 for p in found),
        "top10_before": sum(p["rank_before"] <= 10 for p in found),
        "top10_after": sum(p["rank_after"] <= 10 for p in found),
        "score_ratio_median": round(float(np.median(ratios)), 4) if ratios else None,
        "score_ratio_max": round(max(ratios), 4) if ratios else None,
        "boost_median": float(np.median([p["boost"] for p in found])) if found else None,
        "not_first_before": len(lower),
        "not_first_moved_up": sum(p["rank_before"] > p["rank_after"] for p in lower),
        "not_first_rank_gain_mean": round(
            float(np.mean([p["rank_before"] - p["rank_after"] for p in lower])), 2
        )
        if lower
        else None,
        "similarity_unchanged": all(abs(p["similarity"] - p["score_before"]) < 1e-9 for p in found),
        "bystander_rank_change_mean": round(float(np.mean(bystanders)), 2) if bystanders else None,
        "bystanders": len(bystanders),
        "detail": pairs,
    }


def overtakes(rankings: dict[str, Ranking], qrels: Qrels) -> dict[str, Any]:
    """Pairs (boosted note not relevant to the claim, relevant note) in one claim's results."""
    clear = clear_over = close = close_over = 0
    top10_intrusions = 0
    worst_ratio = 0.0  # the largest sim_r / sim_n among overtakes
    for qid, docs in qrels.items():
        keys = {key(d) for d in docs}
        rows = rankings[qid]
        relevant = [r for r in rows if r.key in keys]
        boosted = [r for r in rows if r.key not in keys and r.boost > 0 and r.similarity > 0]
        for n in boosted:
            for r in relevant:
                if r.similarity <= n.similarity:
                    continue
                over = n.score > r.score
                if r.similarity > CEILING * n.similarity:
                    clear += 1
                    clear_over += over
                else:
                    close += 1
                    close_over += over
                if over:
                    worst_ratio = max(worst_ratio, r.similarity / n.similarity)
        top10_intrusions += sum(1 for n in boosted if n.rank <= 10)
    return {
        "pairs_clearly_higher": clear,
        "overtaken_clearly_higher": clear_over,
        "pairs_within_ceiling": close,
        "overtaken_within_ceiling": close_over,
        "max_similarity_ratio_overtaken": round(worst_ratio, 4),
        "boosted_unrelated_in_top10": top10_intrusions,
    }


def displaced(
    before: dict[str, Ranking], after: dict[str, Ranking], qrels: Qrels
) -> dict[str, int]:
    """Relevant notes that left the top 10 / the claims whose top 10 lost one."""
    lost = queries = 0
    for qid, docs in qrels.items():
        keys = {key(d) for d in docs}
        b = {r.key for r in before[qid][:10]} & keys
        a = {r.key for r in after[qid][:10]} & keys
        lost += len(b - a)
        queries += bool(b - a)
    return {"relevant_left_top10": lost, "claims_affected": queries}


# ----------------------------------------------------------------------------- driver


def run(args: argparse.Namespace, home_dir: Path) -> dict[str, Any]:
    os.environ["CHARLIE_HOME"] = str(home_dir)
    from charlie.config import load_settings
    from charlie.home import Home
    from charlie.notes.files import notes_dir, render
    from charlie.projects import create_project
    from charlie.retrieval.embeddings import LocalEmbedder
    from charlie.retrieval.index import Index
    from charlie.retrieval.search import DEFAULT_MODE, Searcher
    from charlie.retrieval.usage import UsageModel
    from charlie.users import ensure_user

    data = load(args.data)
    relevant, distractors = choose_corpus(data, args.notes, args.seed)
    queries = {q: data.queries[q] for q in sorted(data.test, key=int)}
    qrels = {q: data.test[q] for q in queries}
    home = Home.open(load_settings(home=home_dir))
    project = create_project(home, "Papers", slug=PROJECT)
    folder = notes_dir(project)
    folder.mkdir(parents=True, exist_ok=True)
    for doc in relevant + distractors:
        title, text = data.docs[doc]
        meta = {"title": title.strip() or f"SciFact {doc}", "tags": ["scifact"]}
        (folder / f"doc-{doc}.md").write_text(render(meta, text), encoding="utf-8")

    cache = args.out.parent / "usage-boost-vectors.npz"
    embedder = CachedEmbedder(LocalEmbedder(), cache)
    index = Index(home, embedder)
    start = time.perf_counter()
    index.refresh()
    index_seconds = time.perf_counter() - start
    embedder.save()
    stats = index.stats()
    print(
        f"indexed {stats['notes']} notes, {stats['chunks']} chunks in {index_seconds:.0f} s "
        f"({embedder.embedded} embedded now)",
        file=sys.stderr,
    )
    model = UsageModel(
        half_life_days=home.settings.usage_half_life_days, weight=home.settings.usage_weight
    )
    searcher = Searcher(home, index, usage=model)
    scenario = make_scenario(data, relevant, distractors, args.seed)

    users = {name: ensure_user(home.db, name) for name in ("alice", "bob", "carol", "dave")}
    for age in FADE_AGES[1:]:
        users[f"alice-d{age}"] = ensure_user(home.db, f"alice-d{age}")

    mode = DEFAULT_MODE
    start = time.perf_counter()
    before = {m: search_all(searcher, users["bob"], queries, m) for m in MODES}
    alice_before = search_all(searcher, users["alice"], queries, mode)

    now = datetime.now(UTC)
    counts = {
        "alice": record_events(home, users["alice"].id, scenario.alice, now, 0),
        "carol": record_events(home, users["carol"].id, scenario.carol, now, 0),
        "dave": record_events(home, users["dave"].id, scenario.dave, now, 0),
    }
    for age in FADE_AGES[1:]:
        record_events(home, users[f"alice-d{age}"].id, scenario.alice, now, age)

    after: dict[str, dict[str, dict[str, Ranking]]] = {}
    for name in ("bob", "alice", "carol", "dave"):
        after[name] = {m: search_all(searcher, users[name], queries, m) for m in MODES}
    for age in FADE_AGES[1:]:
        after[f"alice-d{age}"] = {mode: search_all(searcher, users[f"alice-d{age}"], queries, mode)}
    search_seconds = time.perf_counter() - start

    # (a) the used notes, in the claims they are relevant to
    lift = movement(before[mode], after["alice"][mode], qrels, scenario.used_related)
    lift_by_mode = {
        m: {
            k: v
            for k, v in movement(before[m], after["alice"][m], qrels, scenario.used_related).items()
            if k != "detail"
        }
        for m in MODES
    }
    # (b) the ceiling
    ceiling = {
        name: overtakes(after[name][mode], qrels)
        | displaced(before[mode], after[name][mode], qrels)
        for name in ("alice", "carol", "dave")
    }
    ceiling_by_mode = {m: overtakes(after["dave"][m], qrels) for m in MODES}
    # (c) fading
    tags: dict[str, list[str]] = {k: [] for k in sorted(scenario.used_related | scenario.noise)}
    fade = []
    for age in FADE_AGES:
        name = "alice" if age == 0 else f"alice-d{age}"
        boosts = model.boosts(home.db, users[name].id, tags, now=now, explain=False)
        shifted = model.boosts(
            home.db, users["alice"].id, tags, now=now + timedelta(days=age), explain=False
        )
        agree = max(abs(boosts[k].value - shifted[k].value) for k in tags)
        moved = movement(before[mode], after[name][mode], qrels, scenario.used_related)
        fade.append(
            {
                "age_days": age,
                "boost_used_related_mean": round(
                    float(np.mean([boosts[k].value for k in scenario.used_related])), 4
                ),
                "boost_noise_mean": round(
                    float(np.mean([boosts[k].value for k in scenario.noise])), 4
                ),
                "boost_vs_now_shift_max_diff": agree,
                "rank_gain_mean": moved["rank_gain_mean"],
                "top1": moved["top1_after"],
                "top10": moved["top10_after"],
                "score_ratio_median": moved["score_ratio_median"],
                "ndcg10": ndcg10(after[name][mode], qrels),
            }
        )
    # (d) bob
    isolation = {
        "bob_before_vs_after": {m: identical(before[m], after["bob"][m]) for m in MODES},
        "alice_before_vs_bob_before": identical(before[mode], alice_before),
    }
    ndcg = {
        m: {"no use (bob, before)": ndcg10(before[m], qrels)}
        | {name: ndcg10(after[name][m], qrels) for name in ("bob", "alice", "carol", "dave")}
        for m in MODES
    }
    related = {q for q, docs in qrels.items() if {key(d) for d in docs} & scenario.used_related}
    split = {
        "related claims": {q: d for q, d in qrels.items() if q in related},
        "other claims": {q: d for q, d in qrels.items() if q not in related},
    }
    ndcg_split = {
        m: {
            part: {"no use": ndcg10(before[m], sub)}
            | {name: ndcg10(after[name][m], sub) for name in ("alice", "carol", "dave")}
            for part, sub in split.items()
        }
        for m in MODES
    }
    examples = sorted(
        (p for p in lift["detail"] if p["rank_before"] and p["rank_after"]),
        key=lambda p: (-(p["rank_before"] - p["rank_after"]), p["query"]),
    )
    for p in examples:
        p["claim"] = queries[p["query"]]
    home.close()
    return {
        "corpus": {
            "notes": stats["notes"],
            "chunks": stats["chunks"],
            "relevant_to_test": len(relevant),
            "distractors": len(distractors),
            "test_claims": len(queries),
            "index_seconds": round(index_seconds, 1),
            "texts_embedded_now": embedder.embedded,  # chunks and queries not cached yet
        },
        "scenario": {
            "history_claims": len(scenario.history_claims),
            "used_related_notes": len(scenario.used_related),
            "noise_notes": len(scenario.noise),
            "events": counts,
            "fade_ages_days": FADE_AGES,
            "half_life_days": model.half_life_days,
            "weight": model.weight,
        },
        "mode": mode,
        "search_seconds": round(search_seconds, 1),
        "a_lift": lift,
        "a_lift_by_mode": lift_by_mode,
        "a_examples": examples[:8] + examples[-3:],
        "b_ceiling": ceiling,
        "b_ceiling_dave_by_mode": ceiling_by_mode,
        "c_fade": fade,
        "d_isolation": isolation,
        "ndcg10": ndcg,
        "ndcg10_split": ndcg_split,
        "related_claims": len(related),
    }


def report(data: dict[str, Any]) -> None:
    lift = data["a_lift"]
    print(f"\n(a) {lift['pairs']} (claim, used relevant note) pairs in {lift['queries']} claims:")
    for k in (
        "moved_up", "unchanged", "moved_down", "rank_gain_median", "rank_gain_mean",
        "median_rank_before", "median_rank_after", "top1_before", "top1_after",
        "top10_before", "top10_after", "score_ratio_median", "score_ratio_max", "boost_median",
        "bystander_rank_change_mean", "not_first_before", "not_first_moved_up",
        "not_first_rank_gain_mean",
    ):  # fmt: skip
        print(f"    {k}: {lift[k]}")
    print("(b) ceiling:")
    for name, c in data["b_ceiling"].items():
        print(f"    {name}: {c}")
    print("(c) fade:")
    for row in data["c_fade"]:
        print(f"    {row}")
    print("(d) isolation:")
    print(f"    {data['d_isolation']}")
    print("nDCG@10:")
    for mode, row in data["ndcg10"].items():
        print(f"    {mode}: {row}")
        for part, values in data["ndcg10_split"][mode].items():
            print(f"        {part}: {values}")


def plot(data: dict[str, Any], folder: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return []
    folder.mkdir(parents=True, exist_ok=True)
    pairs = [p for p in data["a_lift"]["detail"] if p["rank_before"] and p["rank_after"]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), dpi=120)
    ax = axes[0]
    before = np.array([p["rank_before"] for p in pairs])
    after = np.array([p["rank_after"] for p in pairs])
    jitter = np.random.default_rng(0).uniform(-0.12, 0.12, len(pairs))
    colour = ["tab:green" if a < b else "tab:grey" if a == b else "tab:red"
              for a, b in zip(after, before, strict=True)]  # fmt: skip
    ax.scatter(before * np.exp(jitter), after * np.exp(-jitter), s=14, c=colour, alpha=0.8)
    top = max(before.max(), after.max()) * 1.3
    ax.plot([1, top], [1, top], color="black", lw=0.6)
    ax.axhline(10.5, color="grey", lw=0.5, ls=":")
    ax.axvline(10.5, color="grey", lw=0.5, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rank without use (bob)")
    ax.set_ylabel("rank with alice's use")
    ax.set_title("Used abstracts, in the test claims they answer\n(below the line = moved up)")
    up, down = int((after < before).sum()), int((after > before).sum())
    ax.text(0.03, 0.97, f"{len(pairs)} pairs: {up} up, {len(pairs) - up - down} same, "
            f"{down} down", transform=ax.transAxes, va="top", fontsize=8)  # fmt: skip
    ax = axes[1]
    ratios = [p["score_after"] / p["score_before"] for p in pairs]
    ax.scatter([p["boost"] for p in pairs], ratios, s=14, color="tab:blue")
    xs = np.linspace(0, 1, 50)
    ax.plot(xs, 1 + 0.3 * xs, color="black", lw=0.6, label="1 + 0.3 × boost")
    ax.axhline(CEILING, color="red", lw=0.6, ls=":", label="ceiling ×1.3")
    ax.set_xlabel("alice's boost of the note")
    ax.set_ylabel("score with use / score without")
    ax.set_title("Score change = similarity × (1 + 0.3 × boost)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    ranks_path = folder / "usage-boost-ranks.png"
    fig.savefig(ranks_path)
    plt.close(fig)

    fade = data["c_fade"]
    ages = [row["age_days"] for row in fade]
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    ax.plot(ages, [row["boost_used_related_mean"] for row in fade], marker="o",
            label="mean boost: abstracts used for related claims")  # fmt: skip
    ax.plot(ages, [row["boost_noise_mean"] for row in fade], marker="o", ls="--",
            label="mean boost: unrelated abstracts read heavily")  # fmt: skip
    ax.plot(ages, [row["ndcg10"] for row in fade], marker="s", label="nDCG@10, all test claims")
    baseline = data["ndcg10"][data["mode"]]["no use (bob, before)"]
    ax.axhline(baseline, color="grey", ls=":", lw=0.8, label=f"nDCG@10 without use ({baseline})")
    ax2 = ax.twinx()
    ax2.plot(ages, [row["score_ratio_median"] for row in fade], marker="^", color="tab:red",
             label="median score ratio of used abstracts (right)")  # fmt: skip
    ax2.set_ylabel("score with use / without")
    ax2.set_ylim(0.98, 1.3)
    ax.set_xlabel("age of alice's use (days); half-life 30 days")
    ax.set_ylabel("boost, nDCG@10")
    ax.set_ylim(0, 1)
    ax.set_title("Boosts fade with time")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="center right")
    fig.tight_layout()
    fade_path = folder / "usage-boost-fade.png"
    fig.savefig(fade_path)
    plt.close(fig)
    return [ranks_path, fade_path]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="BEIR SciFact folder")
    parser.add_argument("--notes", type=int, default=1000, help="notes in the corpus")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--plots", type=Path, default=DEFAULT_PLOTS)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    if not (args.data / "corpus.jsonl").is_file():
        parser.error(f"{args.data} has no corpus.jsonl: give the BEIR SciFact folder with --data")

    started = time.perf_counter()
    code = code_fingerprint()  # before the run: other people edit charlie/ meanwhile
    with tempfile.TemporaryDirectory(prefix="charlie-usage-") as tmp:
        results = run(args, Path(tmp) / "home")
    data = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
        },
        "config": {"notes": args.notes, "seed": args.seed},
        "code": code,
        "wall_seconds": round(time.perf_counter() - started, 1),
        **results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    report(data)
    print(f"\nwrote {args.out}")
    if not args.no_plot:
        for path in plot(data, args.plots):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
