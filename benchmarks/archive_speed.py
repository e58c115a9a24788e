"""Exporting and restoring a large data home: `charlie export` and `charlie restore` times,
archive size and peak memory.

It builds a data home with `--notes` notes (default 10,000, 100–400 words each, in four
projects, some in sub-folders) and `--messages` messages (default 100,000, in 25 threads: five
per project and five in one person's private channel), with what a real home holds beside
them: tool traces on a tenth of the replies, images on some questions, a regenerated reply
set aside now and then, memory revisions, pins and usage events. Messages are written with
SQL in bulk (building the home is not what is measured); notes are plain files.

Then, each in a child process whose own peak resident memory is read when it ends (`wait4`):

- **export**: `charlie export -o home.zip --private --user alice` (every project and alice's
  private channel);
- **restore**: `charlie restore home.zip` into an empty data home (the archive is checked
  against its manifest first, every file's sha256);
- **merge again**: `charlie restore home.zip --merge` into that home: nothing is added, every
  thread and message is found already there.

    .venv/bin/python benchmarks/archive_speed.py [--notes 10000] [--messages 100000] [--out FILE]

The figures depend on the machine's load: the load average is recorded with each.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from import_speed import WORDS, run  # noqa: E402
from support import machine, work_folder  # noqa: E402

from charlie.config import load_settings  # noqa: E402
from charlie.conversations import Channel, new_thread, private_channel, shared_channel  # noqa: E402
from charlie.home import Home  # noqa: E402
from charlie.memory import layers as memory  # noqa: E402
from charlie.memory.layers import Memory  # noqa: E402
from charlie.projects import create_project  # noqa: E402
from charlie.retrieval import usage  # noqa: E402
from charlie.users import ensure_user  # noqa: E402

PROJECTS = ("kitchen", "garden", "travel", "work")
THREADS = 5  # per project and in the private channel
PEOPLE = ("alice", "bob", "carol")
TRACE = [
    {"type": "suggested", "categories": ["notes"]},
    {
        "type": "tool_call",
        "name": "search_notes",
        "arguments": {"query": "tiles"},
        "ok": True,
        "summary": "3 notes",
        "ms": 4.2,
        "writes": False,
        "guard": None,
        "hits": None,
        "count": 3,
    },
]


def text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(low, high))).capitalize() + "."


def build(home: Home, notes: int, messages: int, seed: int = 11) -> dict[str, int]:
    """Fill `home`; what it holds."""
    rng = random.Random(seed)
    people = [ensure_user(home.db, name) for name in PEOPLE]
    channels: list[Channel] = []
    for slug in PROJECTS:
        project = create_project(home, slug.title(), slug=slug)
        first = shared_channel(home, project)
        channels += [first] + [
            new_thread(home, first, title=f"{slug} {n}") for n in range(1, THREADS)
        ]
        for _ in range(3):
            memory.save(home, first, Memory(summary=text(rng, 20, 60)), "distill")
        folder = project.path / "notes"
        for n in range(notes // len(PROJECTS)):
            place = folder / f"topic-{n % 20}" if n % 3 == 0 else folder
            place.mkdir(parents=True, exist_ok=True)
            body = (
                f"---\ntitle: Note {n}\ntags: [{rng.choice(WORDS)}]\n---\n{text(rng, 100, 400)}\n"
            )
            (place / f"note-{n:05d}.md").write_text(body, "utf-8")
    mine = private_channel(home, people[0])
    channels += [mine] + [new_thread(home, mine, title=f"mine {n}") for n in range(1, THREADS)]
    memory.save(home, mine, Memory(summary=text(rng, 20, 60)), "distill")
    per_thread = messages // len(channels)
    for channel in channels:
        _messages(home, channel, per_thread, people, rng)
    for n in range(5000):
        who = rng.choice(people)
        usage.record(home.db, who.id, "view", note=f"{rng.choice(PROJECTS)}/note-{n:05d}")
    for channel in channels[::THREADS]:
        home.db.execute(
            "INSERT INTO pins (conversation_id, note, user_id, pinned_at) VALUES (?, ?, ?, ?)",
            (channel.conversation_id, "kitchen/note-00001", people[0].id, "2024-05-01T10:00Z"),
        )
    count = home.db.execute("SELECT count(*) FROM messages").fetchone()[0]
    return {"notes": notes, "messages": int(count), "threads": len(channels)}


def _messages(
    home: Home, channel: Channel, count: int, people: list[Any], rng: random.Random
) -> None:
    """`count` messages in the thread, question and answer in turn, one transaction."""
    owner = channel.owner
    at = 1_650_000_000.0
    last = 0
    with cast(sqlite3.Connection, home.db):
        for n in range(count):
            at += rng.uniform(30, 3000)
            when = time.strftime("%Y-%m-%dT%H:%M:%S.000+00:00", time.gmtime(at))
            asking = n % 2 == 0
            person = owner or rng.choice(people)
            hidden = not asking and rng.random() < 0.03  # a reply regenerated: set aside
            cursor = home.db.execute(
                "INSERT INTO messages (conversation_id, project_id, private, role, user_id, "
                "speaker, content, images, created_at, trace, incomplete, distill, parent_id, "
                "hidden) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 1, ?, ?)",
                (
                    channel.conversation_id,
                    channel.project.id if channel.project else None,
                    int(channel.private),
                    "user" if asking else "assistant",
                    person.id if asking else None,
                    person.name if asking else "Charlie",
                    text(rng, 10, 40) if asking else text(rng, 40, 160),
                    json.dumps(["photo.jpg"] if asking and rng.random() < 0.02 else []),
                    when,
                    json.dumps(TRACE) if not asking and rng.random() < 0.1 else None,
                    last,
                    int(hidden),
                ),
            )
            if not hidden:
                last = int(cursor.lastrowid or 0)
        home.db.execute(
            "UPDATE conversations SET distilled_upto = ?, updated_at = ? WHERE id = ?",
            (last, when, channel.conversation_id),
        )


def counts(db_path: Path) -> dict[str, int]:
    with sqlite3.connect(db_path) as db:
        tables = ("messages", "conversations", "memory_revisions", "usage_events", "pins")
        return {t: int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/archive-speed.json")
    parser.add_argument("--work", type=Path, help="folder for the data homes and the archive")
    args = parser.parse_args()
    work = work_folder(args.work, "charlie-archive-speed-")
    charlie = [sys.executable, "-m", "charlie"]
    base = {k: v for k, v in os.environ.items() if not k.startswith("CHARLIE_")}
    base |= {"CHARLIE_USER": "alice", "PYTHONPATH": str(ROOT)}

    began = time.perf_counter()
    with Home.open(load_settings(home=work / "source")) as home:
        made = build(home, args.notes, args.messages)
    result: dict[str, Any] = {
        "machine": machine(),
        "commit": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "home": made | {"built_s": round(time.perf_counter() - began, 1)},
        "source_counts": counts(work / "source" / "charlie.db"),
    }
    print(json.dumps(result["home"]), flush=True)
    archive = work / "home.zip"

    def step(name: str, command: list[str], home: str) -> dict[str, Any]:
        done = run(command, base | {"CHARLIE_HOME": str(work / home)})
        done["output"] = done.pop("stdout").strip().splitlines()[:2]
        result[name] = done
        print(name, json.dumps(done), flush=True)
        return done

    step("export", [*charlie, "export", "-o", str(archive), "--private"], "source")
    result["archive_bytes"] = archive.stat().st_size
    step("restore", [*charlie, "restore", str(archive)], "restored")
    result["restored_counts"] = counts(work / "restored" / "charlie.db")
    step(
        "merge_again",
        [*charlie, "restore", str(archive), "--merge", "--private-owner", "alice"],
        "restored",
    )
    assert result["restored_counts"] == result["source_counts"], result
    assert counts(work / "restored" / "charlie.db") == result["source_counts"]
    for name in ("export", "restore", "merge_again"):
        result[name]["messages_per_s"] = round(made["messages"] / result[name]["seconds"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
