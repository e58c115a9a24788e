"""BEIR SciFact through Charlie itself: notes on disk, the real index, the real `Searcher`.

`benchmarks/scifact.py` studies the retrieval choices on in-memory copies of the signals;
this script checks that the shipped product gives the same quality end to end: every
SciFact document becomes a note file in a temporary data home, `Index.refresh()` indexes
them exactly as it would a person's notes, and each test query runs through
`Searcher.search` in every mode.

    .venv/bin/python benchmarks/scifact_product.py [--split test] [--data ../shared/data/scifact]

Writes benchmarks/out/scifact_product.json (or --out). The data stays in ../shared (never
copied into the repository); the temporary data home (in --work, default the system's temp
folder) is deleted afterwards unless --keep is given.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import time
from pathlib import Path

from support import work_folder

from charlie.config import load_settings
from charlie.home import Home
from charlie.projects import create_project
from charlie.retrieval.embeddings import LocalEmbedder
from charlie.retrieval.index import Index
from charlie.retrieval.search import MODES, Searcher
from charlie.users import ensure_user

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "scifact"
DEFAULT_OUT = ROOT / "benchmarks" / "out" / "scifact_product.json"


def ndcg_at_10(ranked: list[str], relevant: dict[str, int]) -> float:
    gains = [relevant.get(doc, 0) for doc in ranked[:10]]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    wanted = {doc for doc, grade in relevant.items() if grade > 0}
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines()[1:]:
        query, doc, grade = line.split("\t")
        qrels.setdefault(query, {})[doc] = int(grade)
    return qrels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--split", default="test", choices=["train", "test"])
    parser.add_argument("--keep", action="store_true", help="keep the temporary data home")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--work", type=Path, help="where the temporary data home goes")
    args = parser.parse_args()

    qrels = load_qrels(args.data / "qrels" / f"{args.split}.tsv")
    queries = {
        q["_id"]: q["text"]
        for q in map(json.loads, (args.data / "queries.jsonl").read_text().splitlines())
        if q["_id"] in qrels
    }
    folder = work_folder(args.work, "charlie-scifact-")
    os.environ["CHARLIE_HOME"] = str(folder)
    home = Home.open(load_settings(home=folder))
    project = create_project(home, "SciFact")
    notes_dir = project.path / "notes"
    notes_dir.mkdir()
    for line in (args.data / "corpus.jsonl").read_text().splitlines():
        doc = json.loads(line)
        title = doc["title"].replace("\n", " ").strip() or doc["_id"]
        front = json.dumps(title)  # a JSON string is valid YAML
        (notes_dir / f"{doc['_id']}.md").write_text(f"---\ntitle: {front}\n---\n\n{doc['text']}\n")

    index = Index(home, LocalEmbedder())
    started = time.perf_counter()
    report = index.refresh()
    indexing = time.perf_counter() - started
    print(f"indexed {len(report.added)} notes in {indexing:.0f} s, {len(report.problems)} skipped")

    searcher = Searcher(home, index)
    user = ensure_user(home.db, "bench")
    results: dict[str, dict[str, float]] = {}
    for mode in MODES:
        ndcg = recall = 0.0
        started = time.perf_counter()
        for qid, text in queries.items():
            hits = searcher.search(text, user, limit=100, mode=mode, explain=False).hits
            ranked = [hit.name for hit in hits]
            ndcg += ndcg_at_10(ranked, qrels[qid])
            recall += recall_at(ranked, qrels[qid], 100)
        seconds = time.perf_counter() - started
        results[mode] = {
            "ndcg@10": ndcg / len(queries),
            "recall@100": recall / len(queries),
            "ms_per_query": 1000 * seconds / len(queries),
        }
        row = results[mode]
        print(
            f"{mode:9s} nDCG@10 {row['ndcg@10']:.4f}  Recall@100 {row['recall@100']:.4f}  "
            f"{row['ms_per_query']:.1f} ms/query"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "split": args.split,
                "queries": len(queries),
                "notes": len(report.added),
                "indexing_seconds": indexing,
                "config": searcher.config.__dict__,
                "results": results,
            },
            indent=2,
        )
    )
    home.close()
    if not args.keep:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
