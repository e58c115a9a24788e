"""Conversation recall on LoCoMo: evidence recall@5/@10 of the shipped code, end to end.

For each of the LoCoMo dev conversations (../shared/data/locomo-dev, never copied here):

1. `benchmarks/locomo_jsonl.py` turns it into an import file and a queries file;
2. `charlie projects create` and `charlie import jsonl` bring it into a fresh data home,
   which indexes every message (the time this takes is the import rate);
3. `charlie recall --queries FILE --json --limit 10` answers every question with the
   shipped defaults — that is the headline figure;
4. the same index is then asked in-process with other settings (vector only, keyword only,
   other fusion weights, no neighbours' context), and plain BM25 (`bm25s`, English stop
   words and Snowball stemmer, over "Speaker: text" of each turn) is run on the same turns.

Scoring as the LoCoMo paper: per question, the share of its evidence turns found in the top
k (a question without evidence counts 1), averaged over all questions.

    .venv/bin/pip install bm25s PyStemmer   # the reference, benchmark only
    .venv/bin/python benchmarks/locomo.py [--out benchmarks/out/locomo-recall.json] [--plot]

`--quick` (a smoke run, given a small `--data`) leaves out the BM25 reference (bm25s is not
installed with Charlie) and asks one variant besides the shipped defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import locomo_jsonl  # noqa: E402
from support import work_folder  # noqa: E402

from charlie import conversations, projects  # noqa: E402
from charlie.config import load_settings  # noqa: E402
from charlie.home import Home  # noqa: E402
from charlie.retrieval import embeddings  # noqa: E402
from charlie.retrieval.index import Index  # noqa: E402
from charlie.retrieval.message_index import MessageIndex  # noqa: E402
from charlie.retrieval.recall import RecallConfig, Recaller  # noqa: E402
from charlie.users import ensure_user  # noqa: E402

CHARLIE = ROOT / ".venv" / "bin" / "charlie"
KS = (5, 10)


def evidence_recall(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    if not evidence:
        return 1.0
    return len(set(ranked[:k]) & set(evidence)) / len(set(evidence))


def score(runs: dict[str, list[str]], questions: list[dict[str, Any]]) -> dict[str, float]:
    out = {}
    for k in KS:
        values = [evidence_recall(runs[q["id"]], q["evidence"], k) for q in questions]
        out[f"recall@{k}"] = round(100 * float(np.mean(values)), 1)
    return out


def charlie(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(CHARLIE), *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"charlie {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def bm25s_run(turns: list[dict[str, str]], questions: list[dict[str, Any]]) -> dict[str, list[str]]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    texts = [f"{t['speaker']}: {t['text']}" for t in turns]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False))
    ids = [t["id"] for t in turns]
    runs = {}
    for q in questions:
        tokens = bm25s.tokenize([q["query"]], stopwords="en", stemmer=stemmer, show_progress=False)
        words = {v: k for k, v in tokens.vocab.items()}
        scores = retriever.get_scores([words[i] for i in tokens.ids[0]])
        runs[q["id"]] = [ids[i] for i in np.argsort(-scores)[:10]]
    return runs


def variants() -> dict[str, RecallConfig]:
    base = RecallConfig()
    out = {
        "vector": replace(base, alpha=1.0),
        "keyword": replace(base, alpha=0.0),
        "fusion, no neighbours' words": replace(base, context_weight=0.0),
        "fusion, keyword side matching at most 500": replace(base, max_matches=500),
        "fusion, common terms kept": replace(base, common_share=1.0),
        "fusion, terms in over 2% left out": replace(base, common_share=0.02),
    }
    for alpha in (0.4, 0.6):
        out[f"fusion alpha={alpha}"] = replace(base, alpha=alpha)
    for weight in (1.0,):
        out[f"fusion context weight {weight}"] = replace(base, context_weight=weight)
    return out


def in_process(
    home_dir: Path, sample: str, questions: list[dict[str, Any]], config: RecallConfig
) -> dict[str, list[str]]:
    settings = load_settings(home=home_dir)
    home = Home.open(settings)
    try:
        index = MessageIndex(Index(home, embeddings.from_settings(settings)))
        user = ensure_user(home.db, "bench")
        channel = conversations.shared_channel(home, projects.get_project(home, sample))
        recaller = Recaller(home, index, config)
        return {
            q["id"]: [
                h.message.source_id or ""
                for h in recaller.recall(user, [channel], q["query"], limit=10, around=0).hits
            ]
            for q in questions
        }
    finally:
        home.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=locomo_jsonl.DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/locomo-recall.json")
    parser.add_argument("--no-variants", action="store_true", help="Only the shipped defaults.")
    parser.add_argument("--plot", type=Path, help="Write a bar chart (PNG) here.")
    parser.add_argument("--work", type=Path, help="folder for the data home (default: a temp dir)")
    parser.add_argument(
        "--quick", action="store_true", help="no BM25 reference, one variant: a smoke run"
    )
    args = parser.parse_args()

    data = json.loads(args.data.read_text())
    work = work_folder(args.work, "charlie-locomo-")
    env = {**os.environ, "CHARLIE_HOME": str(work / "home"), "CHARLIE_USER": "bench"}
    env.pop("CHARLIE_EMBEDDINGS", None)
    with Home.open(load_settings(home=work / "home")) as home:
        ensure_user(home.db, "bench", is_admin=True)  # an import needs an account to exist
    all_questions: list[dict[str, Any]] = []
    runs: dict[str, dict[str, list[str]]] = {}
    import_seconds, imported = 0.0, 0
    for item in data:
        sample = item["sample_id"]
        turns = locomo_jsonl.messages(item["conversation"])
        questions = locomo_jsonl.queries(sample, item["qa"])
        locomo_jsonl.write_jsonl(work / f"{sample}.jsonl", turns)
        locomo_jsonl.write_jsonl(work / f"{sample}.queries.jsonl", questions)
        charlie(env, "projects", "create", sample)
        began = time.perf_counter()
        charlie(env, "import", "jsonl", str(work / f"{sample}.jsonl"), "-p", sample)
        import_seconds += time.perf_counter() - began
        imported += len(turns)
        began = time.perf_counter()
        lines = charlie(
            env,
            "recall",
            "--queries",
            str(work / f"{sample}.queries.jsonl"),
            "--json",
            "-p",
            sample,
            "--limit",
            "10",
        ).splitlines()
        took = time.perf_counter() - began
        shipped = runs.setdefault("charlie (shipped defaults, CLI)", {})
        for line in lines:
            answer = json.loads(line)
            shipped[answer["id"]] = [r["source_id"] for r in answer["results"]]
        print(
            f"{sample}: {len(turns)} turns, {len(questions)} questions, recall CLI {took:.1f} s",
            flush=True,
        )
        if not args.quick:
            reference = runs.setdefault("BM25 (bm25s, single turns)", {})
            reference |= bm25s_run(turns, questions)
        if not args.no_variants:
            chosen = variants()
            if args.quick:
                chosen = dict(list(chosen.items())[:1])
            for name, config in chosen.items():
                runs.setdefault(name, {}).update(
                    in_process(work / "home", sample, questions, config)
                )
        all_questions += questions

    table = {name: score(run, all_questions) for name, run in runs.items()}
    by_category = {
        name: {
            str(c): score(run, [q for q in all_questions if q["category"] == c])["recall@10"]
            for c in sorted({q["category"] for q in all_questions})
        }
        for name, run in runs.items()
    }
    print(
        f"\n{len(all_questions)} questions; import with indexing: "
        f"{imported / import_seconds:.0f} messages/s (CLI, process start included)"
    )
    print(f"{'method':45} recall@5 recall@10")
    for name, figures in table.items():
        print(f"{name:45} {figures['recall@5']:8} {figures['recall@10']:9}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "questions": len(all_questions),
                "table": table,
                "recall@10_by_category": by_category,
                "import_messages_per_second": imported / import_seconds,
            },
            indent=2,
        )
    )
    if args.plot:
        plot(table, args.plot)


def plot(table: dict[str, dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(table)
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(names) + 1.2))
    y = np.arange(len(names))
    ax.barh(y - 0.2, [table[n]["recall@10"] for n in names], 0.4, label="recall@10")
    ax.barh(y + 0.2, [table[n]["recall@5"] for n in names], 0.4, label="recall@5")
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.axvline(72, color="grey", linestyle="--", linewidth=1, label="target recall@10 = 72")
    ax.set_xlabel("evidence recall (%)")
    ax.set_title("LoCoMo dev (5 conversations): finding the turns that hold the answer")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
