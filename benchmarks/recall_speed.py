"""Conversation recall at scale on 2 cores: a project holding 200,000 messages.

What it measures, each with the shipped code (`charlie.transfer.jsonl`,
`charlie.retrieval.message_index`, `charlie.retrieval.recall`):

- **import with embeddings**: the LoCoMo dev turns (2,960 distinct messages) imported into
  an empty project and indexed with the packaged model — messages/s, storage and indexing;
- **scale**: N messages (default 200,000) made by cycling through those turns, one per
  ~5 minutes of 2 years, imported into one project and indexed. Their vectors are the
  packaged model's vectors of their texts, each distinct text embedded once (the texts
  repeat, so embedding them all again would only cost time); everything else — SQLite,
  FTS5, the contexts, the in-memory tables — is built for all N;
- **indexing one new message**: a message added to that project and indexed (real model,
  neighbours' context rewritten), median of 50;
- **recall latency**: the LoCoMo dev questions asked against that project, query embedding
  included, after one warm-up question (vectors loaded): p50 / p99;
- **the first recall of a new process** (its model loaded before the clock starts): with
  every vector read from the index file, and mapped from the file the indexer keeps beside
  it (`charlie.retrieval.message_vectors`).

    .venv/bin/python benchmarks/recall_speed.py [--messages 200000] [--out FILE]

`--quick` (a smoke run, given a small `--data`): 300 messages unless `--messages` says
otherwise, and 5 single-message indexings instead of 50.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import locomo_jsonl  # noqa: E402
from support import work_folder  # noqa: E402

from charlie import conversations  # noqa: E402
from charlie.config import load_settings  # noqa: E402
from charlie.home import Home  # noqa: E402
from charlie.projects import create_project  # noqa: E402
from charlie.retrieval import message_vectors  # noqa: E402
from charlie.retrieval.embeddings import LocalEmbedder, Vectors  # noqa: E402
from charlie.retrieval.index import Index  # noqa: E402
from charlie.retrieval.message_index import MessageIndex  # noqa: E402
from charlie.retrieval.recall import Recaller  # noqa: E402
from charlie.transfer import jsonl as importing  # noqa: E402
from charlie.users import ensure_user  # noqa: E402


class OncePerText:
    """The packaged model, embedding each distinct text once (same name, same vectors)."""

    def __init__(self, model: LocalEmbedder) -> None:
        self.model = model
        self.cache: dict[str, np.ndarray] = {}
        self.name, self.dim = model.name, model.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        for text, vector in zip(new, self.model.embed(new), strict=True):
            self.cache[text] = vector
        return np.stack([self.cache[t] for t in texts]) if texts else self.model.embed([])


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def write_history(path: Path, turns: list[dict[str, str]], count: int) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    step = timedelta(days=730) / count
    with path.open("w", encoding="utf-8") as out:
        for n in range(count):
            turn = turns[n % len(turns)]
            at = (start + step * n).isoformat()
            line = {"id": f"m{n}", "speaker": turn["speaker"], "text": turn["text"], "time": at}
            out.write(json.dumps(line) + "\n")


FIRST_RECALL = """
import json, sys, time
from charlie import conversations, projects
from charlie.config import load_settings
from charlie.home import Home
from charlie.retrieval.embeddings import LocalEmbedder
from charlie.retrieval.index import Index
from charlie.retrieval.message_index import MessageIndex
from charlie.retrieval.recall import Recaller
from charlie.users import ensure_user
home = Home.open(load_settings())
model = LocalEmbedder()
model.embed(["warm up"])
index = MessageIndex(Index(home, model))
channel = conversations.shared_channel(home, projects.get_project(home, "big"))
user = ensure_user(home.db, "bench")
began = time.perf_counter()
index.vectors()
loaded = time.perf_counter() - began
Recaller(home, index).recall(user, [channel], sys.argv[1], limit=10, around=1)
print(json.dumps({"vectors_s": loaded, "first_recall_s": time.perf_counter() - began}))
"""


def first_recall(home: Path, question: str) -> dict[str, float]:
    """A new process's first recall in the big project (its model loaded first): seconds to
    have every vector, and to the answer."""
    env = os.environ | {"CHARLIE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", FIRST_RECALL, question],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=ROOT,
    )
    return {k: round(v, 3) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, help="default 200,000 (--quick: 300)")
    parser.add_argument("--data", type=Path, default=locomo_jsonl.DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/recall-speed.json")
    parser.add_argument("--work", type=Path, help="folder for the data home (default: a temp dir)")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 300 messages, 5 single indexings"
    )
    args = parser.parse_args()
    if args.messages is None:
        args.messages = 300 if args.quick else 200_000
    singles_count = 5 if args.quick else 50

    data = json.loads(args.data.read_text())
    turns = [t for item in data for t in locomo_jsonl.messages(item["conversation"])]
    questions = [
        q["query"] for item in data for q in locomo_jsonl.queries(item["sample_id"], item["qa"])
    ]
    work = work_folder(args.work, "charlie-recall-speed-")
    os.environ["CHARLIE_HOME"] = str(work / "home")
    home = Home.open(load_settings())
    model = LocalEmbedder()
    model.embed(["warm up"])
    figures: dict[str, object] = {"messages": args.messages, "load_before": os.getloadavg()}

    # 1. import with real embeddings: distinct messages
    small = work / "small.jsonl"
    write_history(small, turns, len(turns))
    channel = conversations.shared_channel(home, create_project(home, "small"))
    began = time.perf_counter()
    importing.import_jsonl(home, channel, small)
    stored = time.perf_counter() - began
    index = MessageIndex(Index(home, model))
    indexed = index.refresh()
    took = time.perf_counter() - began
    figures["import_with_embeddings_per_s"] = indexed / took
    figures["import_storage_share"] = stored / took
    print(
        f"import with embeddings: {indexed} messages in {took:.1f} s = {indexed / took:.0f}/s "
        f"(storage {stored:.1f} s)",
        flush=True,
    )

    # 2. a project of N messages
    big = work / "big.jsonl"
    write_history(big, turns, args.messages)
    channel = conversations.shared_channel(home, create_project(home, "big"))
    began = time.perf_counter()
    importing.import_jsonl(home, channel, big)
    figures["storage_only_per_s"] = args.messages / (time.perf_counter() - began)
    cached = OncePerText(model)
    cached.cache = {}
    began = time.perf_counter()
    MessageIndex(Index(home, cached)).refresh()
    figures["index_n_seconds_cached_vectors"] = time.perf_counter() - began
    print(
        f"{args.messages} messages stored at {figures['storage_only_per_s']:.0f}/s, indexed in "
        f"{figures['index_n_seconds_cached_vectors']:.0f} s (each distinct text embedded once)",
        flush=True,
    )

    # 3. indexing one new message, real model
    index = MessageIndex(Index(home, model))
    user = ensure_user(home.db, "bench")
    recaller = Recaller(home, index)
    recaller.recall(user, [channel], "warm up", limit=10)  # loads the vectors, builds the table
    singles = []
    for n in range(singles_count):
        conversations.add_message(home, channel, "user", f"{turns[n]['text']} ({n})", user=user)
        began = time.perf_counter()
        index.refresh()
        singles.append((time.perf_counter() - began) * 1000)
    figures["index_one_message_ms"] = {
        "p50": statistics.median(singles),
        "p99": percentile(singles, 99),
    }
    print(f"index one new message: p50 {statistics.median(singles):.1f} ms", flush=True)

    # 4. recall latency
    recaller.recall(user, [channel], questions[0], limit=10)
    times = []
    for question in questions:
        began = time.perf_counter()
        recaller.recall(user, [channel], question, limit=10, around=1)
        times.append((time.perf_counter() - began) * 1000)
    figures["recall_ms"] = {
        "p50": statistics.median(times),
        "p99": percentile(times, 99),
        "questions": len(times),
    }
    figures["load_after"] = os.getloadavg()
    print(
        f"recall in one project of {args.messages} messages: "
        f"p50 {statistics.median(times):.1f} ms, "
        f"p99 {percentile(times, 99):.1f} ms ({len(times)} questions); load {os.getloadavg()}"
    )

    # 5. the first recall of a new process: every vector read from the index, or mapped
    # from the file the indexer keeps beside it
    kept = message_vectors.file_path(home.index_path)
    kept.unlink(missing_ok=True)
    firsts: dict[str, object] = {"from the index": first_recall(work / "home", questions[1])}
    index.keep_file()
    firsts["from the file"] = first_recall(work / "home", questions[1])
    figures["first_recall_of_a_process"] = firsts
    for where, seconds in firsts.items():
        print(f"first recall of a new process, vectors {where}: {seconds}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2))
    home.close()


if __name__ == "__main__":
    main()
