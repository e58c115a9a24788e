"""How many tokens of a message to embed: LoCoMo recall and embedding speed at each cap.

A message is embedded by its first `charlie.retrieval.message_index.MESSAGE_TOKENS` tokens
(its words are all in the keyword index whatever the cap). This measures, for each cap:

- **recall@5 / @10** on the LoCoMo dev split (../shared/data/locomo-dev, never copied
  here): every conversation imported into a fresh data home with the shipped code
  (`charlie.transfer.jsonl.import_jsonl`), indexed with the cap, every question asked
  through `charlie.retrieval.recall.Recaller` with the shipped defaults;
- **messages/s** of the packaged model at that cap, on the LoCoMo turns (short: p50 about
  31 tokens) and on ChatGPT-like messages (`benchmarks/import_speed.py`'s generator: half
  questions of 8–80 words, half answers of 60–300 words), best of three rounds.

    .venv/bin/python benchmarks/message_tokens.py [--caps 256 128 64 48 32] [--out FILE]

The load average is recorded before and after: on a busy machine every speed drops.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import locomo_jsonl  # noqa: E402
from import_speed import Maker  # noqa: E402
from locomo import score  # noqa: E402
from support import machine  # noqa: E402

from charlie import conversations, projects  # noqa: E402
from charlie.config import load_settings  # noqa: E402
from charlie.home import Home  # noqa: E402
from charlie.retrieval import message_index  # noqa: E402
from charlie.retrieval.embeddings import LocalEmbedder  # noqa: E402
from charlie.retrieval.index import Index  # noqa: E402
from charlie.retrieval.message_index import MessageIndex  # noqa: E402
from charlie.retrieval.recall import Recaller  # noqa: E402
from charlie.transfer import jsonl as importing  # noqa: E402
from charlie.users import ensure_user  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks/out/message-tokens.json"


def recall_at(cap: int, data: list[dict[str, Any]], work: Path) -> dict[str, float]:
    """LoCoMo evidence recall with messages embedded by their first `cap` tokens."""
    message_index.MESSAGE_TOKENS = cap
    settings = load_settings(home=work / f"home-{cap}")
    embedder = LocalEmbedder()
    runs: dict[str, list[str]] = {}
    questions: list[dict[str, Any]] = []
    with Home.open(settings) as home:
        user = ensure_user(home.db, "bench")
        index = MessageIndex(Index(home, embedder))
        recaller = Recaller(home, index)
        for item in data:
            sample = item["sample_id"]
            path = work / f"{sample}.jsonl"
            locomo_jsonl.write_jsonl(path, locomo_jsonl.messages(item["conversation"]))
            channel = conversations.shared_channel(home, projects.create_project(home, sample))
            importing.import_jsonl(home, channel, path)
            index.refresh()
            asked = locomo_jsonl.queries(sample, item["qa"])
            for q in asked:
                hits = recaller.recall(user, [channel], q["query"], limit=10, around=0).hits
                runs[q["id"]] = [h.message.source_id or "" for h in hits]
            questions += asked
    return score(runs, questions)


def speed(texts: list[str], cap: int, rounds: int) -> float:
    """Messages per second of the packaged model at `cap` tokens, best of `rounds`."""
    embedder = LocalEmbedder()
    embedder.embed(texts[:16], max_tokens=cap)  # the session started, the first run paid
    best = 0.0
    for _ in range(rounds):
        began = time.perf_counter()
        embedder.embed(texts, max_tokens=cap)
        best = max(best, len(texts) / (time.perf_counter() - began))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=locomo_jsonl.DEFAULT_DATA)
    parser.add_argument("--caps", type=int, nargs="+", default=[256, 128, 96, 64, 48, 32])
    parser.add_argument("--messages", type=int, default=1024, help="texts timed per set")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    data = json.loads(args.data.read_text())
    turns = [
        message_index.own_text(t["speaker"], t["text"])
        for item in data
        for t in locomo_jsonl.messages(item["conversation"])
    ][: args.messages]
    maker = Maker(7)
    chatgpt = [
        maker.text(8, 80) if i % 2 == 0 else maker.text(60, 300) for i in range(args.messages)
    ]
    before = machine()
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="charlie-message-tokens-") as work:
        for cap in args.caps:
            row: dict[str, float] = recall_at(cap, data, Path(work))
            row["locomo_messages_per_second"] = round(speed(turns, cap, args.rounds), 1)
            row["chatgpt_messages_per_second"] = round(speed(chatgpt, cap, args.rounds), 1)
            rows[str(cap)] = row
            print(f"cap {cap:4}: {json.dumps(row)}", flush=True)
    result = {"caps": rows, "machine_before": before, "machine_after": machine()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
