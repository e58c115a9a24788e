"""Weak hits: where does the cosine of a note that answers a question end, and that of a note
that merely shares the language begin? It sets `SearchConfig.min_vector`, the cosine under
which a note that no query word finds is not a match at all (a search for "hello" lists
nothing instead of every note at 0.03).

    .venv/bin/python benchmarks/weak_hits.py [--data ../shared/data/scifact]

Three sets, each embedded as the index embeds notes (title, a newline, each chunk; a note
scores as its best chunk) with the packaged model:
- SciFact (BEIR, test and train qrels): the cosine of each relevant abstract to its claim;
  only the relevant abstracts are embedded, so this is the side a floor could lose;
- the household of the scorecard (benchmarks/household.py): the cosine of the note that
  answers each note question, beside the best cosine of a note that does not;
- small talk (greetings, thanks, chat that asks nothing of the notes) against the household
  notes: the best cosine any note gets, the side a floor should drop.

For each candidate floor: the share of answering notes under it (lost, if no query word
matched them either) and the share of small-talk queries that still list a note.
`--quick` leaves SciFact out (the suite's smoke run). Writes benchmarks/out/weak_hits.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from household import NOTES, TASKS
from scifact import load
from support import machine

from charlie.projects import slugify
from charlie.retrieval.chunking import chunk_text
from charlie.retrieval.embeddings import LocalEmbedder

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "scifact"
DEFAULT_OUT = ROOT / "benchmarks" / "out" / "weak_hits.json"
FLOORS = (0.10, 0.15, 0.20, 0.25, 0.30, 0.35)
SMALL_TALK = (
    "hello",
    "hi there",
    "hey Charlie",
    "good morning",
    "good night",
    "thanks!",
    "thank you so much",
    "ok",
    "cool",
    "great, cheers",
    "what's up",
    "how are you?",
    "lol",
    "never mind",
    "yes please",
    "no thanks",
    "tell me a joke",
    "who are you?",
    "are you there?",
    "sounds good",
    "bye",
    "see you later",
    "test",
    "asdf",
    "what can you do?",
    "I'm bored",
    "nice one",
    "hmm",
    "sorry",
    "well done",
)


def best_chunk(embedder: LocalEmbedder, titled: list[tuple[str, str]]) -> list[np.ndarray]:
    """Each (title, body) as the index holds it: one unit vector per chunk."""
    pieces = [[f"{title}\n{c}" for c in chunk_text(body) or [""]] for title, body in titled]
    flat = embedder.embed([p for piece in pieces for p in piece])
    out, at = [], 0
    for piece in pieces:
        out.append(np.asarray(flat[at : at + len(piece)]))
        at += len(piece)
    return out


def cosine(query: np.ndarray, chunks: np.ndarray) -> float:
    return float(np.max(chunks @ query))


def shares(values: list[float], floors: tuple[float, ...], below: bool) -> dict[str, float]:
    """For each floor, the share of `values` under it (below) or at or over it."""
    array = np.asarray(values)
    return {
        f"{floor:.2f}": round(float(np.mean(array < floor if below else array >= floor)), 4)
        for floor in floors
    }


def percentiles(values: list[float]) -> dict[str, float]:
    array = np.asarray(values)
    return {f"p{q}": round(float(np.percentile(array, q)), 3) for q in (0, 1, 5, 10, 50, 90)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--quick", action="store_true", help="without SciFact: a smoke run")
    args = parser.parse_args()
    started = time.time()
    embedder = LocalEmbedder()
    result: dict[str, Any] = {"machine": machine(), "model": embedder.name, "floors": FLOORS}

    if not args.quick and (args.data / "corpus.jsonl").exists():
        data = load(args.data)
        where = {doc: i for i, doc in enumerate(data.doc_ids)}
        pairs = [
            (qid, doc)
            for split in ("test", "train")
            for qid, relevant in data.qrels[split].items()
            for doc, grade in relevant.items()
            if grade > 0 and doc in where
        ]
        docs = sorted({doc for _, doc in pairs})
        chunks = dict(
            zip(
                docs,
                best_chunk(embedder, [(data.titles[where[d]], data.texts[where[d]]) for d in docs]),
                strict=True,
            )
        )
        qids = sorted({qid for qid, _ in pairs})
        queries = dict(zip(qids, embedder.embed([data.queries[q] for q in qids]), strict=True))
        relevant = [cosine(queries[q], chunks[d]) for q, d in pairs]
        result["scifact"] = {
            "pairs": len(pairs),
            "relevant_cosine": percentiles(relevant),
            "relevant_under_floor": shares(relevant, FLOORS, below=True),
        }
    else:
        result["scifact"] = {"skipped": "--quick" if args.quick else f"no SciFact at {args.data}"}

    notes = best_chunk(embedder, [(title, body) for title, body, _ in NOTES])
    keys = [slugify(title) for title, _, _ in NOTES]
    asked = [t for t in TASKS if t.kind == "note" and t.note]
    vectors = embedder.embed([t.question for t in asked])
    answering, others = [], []
    for task, vector in zip(asked, vectors, strict=True):
        scores = [cosine(vector, c) for c in notes]
        mine = keys.index(task.note.rsplit("/", 1)[-1])
        answering.append(scores[mine])
        others.append(max(s for i, s in enumerate(scores) if i != mine))
    talk = [max(cosine(v, c) for c in notes) for v in embedder.embed(list(SMALL_TALK))]
    result["household"] = {
        "questions": len(asked),
        "answering_cosine": percentiles(answering),
        "answering_under_floor": shares(answering, FLOORS, below=True),
        "best_other_cosine": percentiles(others),
    }
    result["small_talk"] = {
        "queries": len(SMALL_TALK),
        "best_cosine": percentiles(talk),
        "still_listing_a_note": shares(talk, FLOORS, below=False),
        "worst": sorted(zip(talk, SMALL_TALK, strict=True), reverse=True)[:5],
    }
    result["seconds"] = round(time.time() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))


if __name__ == "__main__":
    main()
