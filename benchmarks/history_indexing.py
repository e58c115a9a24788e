"""A long history imported: when the command returns, and when recall by meaning has it all.

It writes the ChatGPT-format export of `benchmarks/import_speed.py` (default 200 MB of
conversations.json), then, each in a fresh data home:

- **now**: `charlie import chatgpt export.zip -p bench --json` with this checkout. The
  command returns once every message is stored and findable by its words; the vectors are
  left to the detached `charlie reindex --catch-up` it starts. Timed: the command's return,
  then the moment every message has its vector (index.db polled every few seconds, read
  only), and `charlie reindex --status --json` at both points;
- **before** (with `--before DIR`, a checkout of earlier code, e.g. `git worktree add
  /tmp/before <commit>`): the same command with that code, which indexes every message
  before it returns. An hour at 200 MB, so it runs at most `--before-seconds`: the messages
  indexed are counted as it goes, and its rate (from the first indexed batch to the last)
  gives the projected total, marked as projected.

The ratio of the two full-indexing times is the figure. The load average is recorded
before and after; both runs should be made on the same quiet machine, one after the other.

    .venv/bin/python benchmarks/history_indexing.py [--megabytes 200] [--before DIR]
        [--before-seconds 900] [--work DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from import_speed import SETUP, write_zip  # noqa: E402
from support import machine, work_folder  # noqa: E402

POLL_SECONDS = 5.0
DEFAULT_OUT = ROOT / "benchmarks/out/history-indexing.json"


def indexed(home: Path) -> int:
    """Messages with a vector in the home's index.db (0 while it does not exist yet)."""
    path = home / "index.db"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as db:
            return int(db.execute("SELECT count(*) FROM messages").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0


def status(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "charlie", "reindex", "--status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def now(export: Path, home: Path, env: dict[str, str], limit: float) -> dict[str, Any]:
    """This checkout: the import's return, then the background indexer's end."""
    env = env | {"CHARLIE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", SETUP], env=env, check=True, cwd=ROOT)
    command = [sys.executable, "-m", "charlie", "import", "chatgpt", str(export)]
    began = time.perf_counter()
    done = subprocess.run([*command, "-p", "bench", "--json"], env=env, capture_output=True)
    returned = time.perf_counter() - began
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    report = json.loads(done.stdout)
    at_return = status(env)
    total = at_return["total"]
    print("now: returned", round(returned, 1), json.dumps(at_return), flush=True)
    series: list[tuple[float, int]] = []
    while (count := indexed(home)) < total and time.perf_counter() - began < limit:
        series.append((round(time.perf_counter() - began, 1), count))
        time.sleep(POLL_SECONDS)
    finished = time.perf_counter() - began
    at_end = status(env)
    print("now: indexed", round(finished, 1), json.dumps(at_end), flush=True)
    return {
        "command_returned_s": round(returned, 1),
        "added": report["added"],
        "status_at_return": at_return,
        "fully_indexed_s": round(finished, 1) if at_end["done"] else None,
        "status_at_end": at_end,
        "messages_per_s_indexing": round(total / max(finished - returned, 1e-9), 1),
        "series": series[:: max(1, len(series) // 60)],
    }


def before(
    export: Path, home: Path, code: Path, env: dict[str, str], limit: float, total: int
) -> dict[str, Any]:
    """Earlier code: the import that indexes before it returns, at most `limit` seconds;
    `total` is how many messages are to be indexed (what the new code's status counted)."""
    env = env | {"CHARLIE_HOME": str(home), "PYTHONPATH": str(code)}
    # Run from that checkout: `python -m` puts the working folder first on the path.
    subprocess.run([sys.executable, "-c", SETUP], env=env, check=True, cwd=code)
    command = [sys.executable, "-m", "charlie", "import", "chatgpt", str(export)]
    began = time.perf_counter()
    running = subprocess.Popen(
        [*command, "-p", "bench", "--json"],
        env=env,
        cwd=code,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    series: list[tuple[float, int]] = []
    while running.poll() is None and time.perf_counter() - began < limit:
        series.append((time.perf_counter() - began, indexed(home)))
        time.sleep(POLL_SECONDS)
    finished = running.poll() is not None
    elapsed = time.perf_counter() - began
    if not finished:
        running.kill()
    running.wait()
    last = indexed(home)
    series.append((elapsed, last))
    moving = [(t, n) for t, n in series if n > 0]
    first_t, first_n = moving[0] if moving else (elapsed, 0)
    rate = (last - first_n) / (elapsed - first_t) if elapsed > first_t else 0.0
    projected = first_t + (total - first_n) / rate if rate > 0 else None
    result = {
        "finished": finished,
        "ran_s": round(elapsed, 1),
        "messages_to_index": total,
        "messages_indexed": last,
        "first_indexed_at_s": round(first_t, 1),
        "messages_per_s_indexing": round(rate, 1),
        "fully_indexed_s": round(elapsed, 1) if finished else None,
        "fully_indexed_projected_s": None if projected is None else round(projected),
        "series": [(round(t, 1), n) for t, n in series[:: max(1, len(series) // 60)]],
    }
    print("before:", json.dumps({k: v for k, v in result.items() if k != "series"}), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=200.0)
    parser.add_argument("--before", type=Path, help="a checkout of earlier code to compare")
    parser.add_argument("--before-seconds", type=float, default=900.0)
    parser.add_argument("--limit", type=float, default=3600.0, help="longest wait for now")
    parser.add_argument(
        "--before-only",
        type=int,
        metavar="TOTAL",
        help="run only the earlier code; TOTAL messages to index (the export's, as counted)",
    )
    parser.add_argument("--work", type=Path, help="folder for the export and the data homes")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    work = work_folder(args.work, "charlie-history-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARLIE_")}
    env |= {"CHARLIE_USER": "bench"}

    plain, export = work / "conversations.json", work / "chatgpt-export.zip"
    made = write_zip(export, plain, args.megabytes)
    plain.unlink()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    result: dict[str, Any] = {"machine_before": machine(), "commit": commit, "export": made}
    print(json.dumps(made), flush=True)
    if args.before_only is None:
        result["now"] = now(export, work / "now", env, args.limit)
    if args.before is not None:
        code = args.before.resolve()
        result["before_commit"] = subprocess.run(
            ["git", "-C", str(code), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        total = args.before_only or result["now"]["status_at_end"]["total"]
        result["before"] = before(export, work / "before", code, env, args.before_seconds, total)
        old = result["before"]["fully_indexed_s"] or result["before"]["fully_indexed_projected_s"]
        new = result["now"]["fully_indexed_s"] if "now" in result else None
        if old and new:
            result["speedup_full_indexing"] = round(old / new, 2)
    result["machine_after"] = machine()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    shown = {k: v for k, v in result.items() if k not in ("now", "before")}
    print(json.dumps(shown, indent=2))


if __name__ == "__main__":
    main()
