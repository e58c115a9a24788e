"""Load benchmark: many household members chatting at once against the real web app.

Bounded and loopback only. Sets up a throw-away data home with `--users` people (each with a
password, hashed once at setup), one shared project with a few notes, then starts two child
processes so that neither competes with the load generator for the interpreter:

* the scripted OpenAI-compatible test double (`tests/llm_double.py`), answering every chat
  request with a streamed reply and every distillation request with a valid memory;
* the real FastAPI app (`create_app`) served by uvicorn on 127.0.0.1 (its stderr goes to a
  log file that is scanned for tracebacks afterwards).

The load generator (this process) runs one thread per person, each with its own
`httpx.Client`: sign in once, then until `--seconds` have passed (and at most `--max-chats`
chats each), alternate a chat in the shared project and in the person's private channel,
reading the whole SSE stream, and between chats call the non-LLM endpoints the PWA calls:
messages, memory, projects, notes and search. It records latency per endpoint (for chat: the
time to the first token and to the end of the stream) and every error (non-2xx, an `error`
event, a stream without `reply`/`done`, an exception).

Afterwards it checks persistence in the SQLite file: every message whose chat request was
accepted (HTTP 200) must be stored once, as a user message of that person in that channel's
conversation, and every reply the client received must be stored as an assistant message.

    .venv/bin/python benchmarks/load.py [--users 20] [--seconds 60] \
        [--out benchmarks/out/load.json]

The model's retries are off (CHARLIE_LLM_RETRIES=0) so that no failure is hidden.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import socket
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
from support import percentile

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
DEFAULT_OUT = ROOT / "benchmarks" / "out" / "load.json"
MODEL = "test-model"
PASSWORD = "correct horse battery"
PROJECT = "household"
DISTILL_MARKER = "You maintain the long-term memory"
REPLY = (
    "Noted. I will keep the plan as it is: the plumber comes on Tuesday, the new worktop is "
    "ordered, and the budget for the kitchen stays at about two thousand euros."
)
NOTES = (
    ("Kitchen renovation", "The plumber comes on Tuesday; the oak worktop is ordered.", "home"),
    ("Summer holiday", "Ferry booked for the 12th; the cottage is near the beach.", "travel"),
    ("Household budget", "Energy bill goes up in May; switch to the fixed-rate contract.", "money"),
    ("Vegetable garden", "Plant the tomatoes after the last frost; cover the seedlings.", "garden"),
    ("School activities", "Swimming lessons on Wednesday; the school trip costs 40 euros.", "kids"),
)
QUERIES = ("plumber", "worktop budget", "ferry cottage", "tomatoes frost", "swimming lessons")
TOPICS = ("the worktop", "the ferry", "the energy bill", "the tomatoes", "the swimming lessons")
NON_LLM = ("messages", "memory", "projects", "notes", "search")
HTTP_TIMEOUT = 60.0
MAX_ERROR_SAMPLES = 20


# -- the scripted model (child process) -----------------------------------------------------


def answer(request: dict[str, Any]) -> Any:
    """A streamed reply for a chat; a valid (small) memory for a distillation request."""
    from llm_double import TextReply

    messages = request["messages"]
    first = messages[0].get("content") if messages else ""
    if "response_format" in request or (
        isinstance(first, str) and first.startswith(DISTILL_MARKER)
    ):
        memory = {
            "summary": "The household uses this project to plan the kitchen and the holiday.",
            "decisions": ["The plumber comes on Tuesday."],
            "quotes": [],
        }
        return TextReply(json.dumps(memory))
    # a reply of its own to each message (Charlie refuses a model repeating itself)
    asked = next(m for m in reversed(messages) if m.get("role") == "user").get("content")
    return TextReply(f"{REPLY} You asked: {asked if isinstance(asked, str) else 'a picture'}")


def serve_llm(conn: Connection) -> None:
    """Child process: run the double until told to stop, then report what it received."""
    sys.path.insert(0, str(TESTS))
    from llm_double import ScriptedLLMServer

    with ScriptedLLMServer(model=MODEL) as server:
        server.default = answer
        conn.send(server.base_url)
        conn.recv()
        distills = sum("response_format" in body for body in server.requests)
        conn.send(
            {
                "requests": len(server.requests),
                "distill_requests": distills,
                "handler_errors": [repr(e) for e in server.handler_errors],
            }
        )


# -- the app (child process) ----------------------------------------------------------------


def serve_app(conn: Connection, env: dict[str, str], log_path: str) -> None:
    """Child process: the real app under uvicorn on 127.0.0.1; stderr goes to `log_path`."""
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    os.dup2(log.fileno(), 2)
    sys.stderr = log
    os.environ.update(env)
    import uvicorn

    from charlie.adapters.web.app import create_app
    from charlie.config import load_settings

    # A free port, then uvicorn binds it itself, as `charlie serve` does (a socket passed in
    # with `sockets=[...]` must say IPPROTO_TCP, or asyncio leaves Nagle's algorithm on and
    # every response on a kept-alive connection waits ~44 ms: tests/browser/pwa.py).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conn.send(port)
    config = uvicorn.Config(
        create_app(load_settings()),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        ws="none",
        timeout_graceful_shutdown=5,
    )
    uvicorn.Server(config).run()


# -- setup ----------------------------------------------------------------------------------


def setup_home(home_dir: Path, names: list[str]) -> None:
    from charlie import projects
    from charlie.config import load_settings
    from charlie.home import Home
    from charlie.notes import files as notes
    from charlie.users import ensure_user, set_password

    with Home.open(load_settings(home=home_dir)) as home:
        for name in names:
            ensure_user(home.db, name)
            set_password(home.db, name, PASSWORD)  # scrypt: ~0.5 s each, once
        project = projects.create_project(home, "Household", slug=PROJECT)
        for title, body, tag in NOTES:
            notes.create_note(project, title, body, [tag])


def wait_for_app(url: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/api/me", timeout=2.0).status_code == 401:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"the app at {url} did not start (see its log)")


# -- the load ---------------------------------------------------------------------------------


@dataclass
class Sent:
    user: str
    channel: str  # PROJECT or "private"
    text: str
    status: int
    reply_id: int | None


@dataclass
class Results:
    lock: threading.Lock = field(default_factory=threading.Lock)
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    calls: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)  # by endpoint
    error_messages: Counter[str] = field(default_factory=Counter)
    notices: Counter[str] = field(default_factory=Counter)
    sent: list[Sent] = field(default_factory=list)

    def timing(self, endpoint: str, seconds: float) -> None:
        with self.lock:
            self.latency[endpoint].append(seconds * 1000)
            self.calls[endpoint] += 1

    def error(self, endpoint: str, message: str) -> None:
        with self.lock:
            self.errors[endpoint] += 1
            self.error_messages[f"{endpoint}: {message[:300]}"] += 1


def read_sse(response: httpx.Response) -> tuple[list[tuple[str, Any]], float | None]:
    """The events of a stream, and when (perf_counter) the first token arrived."""
    found: list[tuple[str, Any]] = []
    first_token: float | None = None
    kind, data = "", ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif not line and kind:
            if kind == "token" and first_token is None:
                first_token = time.perf_counter()
            found.append((kind, json.loads(data)))
            kind, data = "", ""
    return found, first_token


def chat(client: httpx.Client, name: str, channel: str, text: str, results: Results) -> None:
    started = time.perf_counter()
    status, reply_id = 0, None
    try:
        with client.stream(
            "POST", f"/api/channels/{channel}/chat", json={"text": text}
        ) as response:
            status = response.status_code
            if status != 200:
                response.read()
                results.error("chat", f"HTTP {status}: {response.text[:200]}")
            else:
                found, first_token = read_sse(response)
                ended = time.perf_counter()
                kinds = [kind for kind, _ in found]
                for kind, data in found:
                    if kind == "error":
                        results.error("chat", f"error event {data.get('kind')}: {data['error']}")
                    elif kind == "notice":
                        with results.lock:
                            results.notices[data["text"][:200]] += 1
                    elif kind == "reply":
                        reply_id = data["message"]["id"]
                if reply_id is None or kinds[-1:] != ["done"]:
                    if "error" not in kinds:
                        results.error("chat", f"stream ended without reply/done: {kinds[-3:]}")
                else:
                    results.timing("chat_total", ended - started)
                    if first_token is not None:
                        results.timing("chat_first_token", first_token - started)
    except httpx.HTTPError as exc:
        results.error("chat", f"{type(exc).__name__}: {exc}")
    with results.lock:
        results.sent.append(Sent(name, channel, text, status, reply_id))


def call(client: httpx.Client, endpoint: str, url: str, results: Results) -> None:
    started = time.perf_counter()
    try:
        response = client.get(url)
    except httpx.HTTPError as exc:
        results.error(endpoint, f"{type(exc).__name__}: {exc}")
        return
    elapsed = time.perf_counter() - started
    if response.is_success:
        results.timing(endpoint, elapsed)
    else:
        results.error(endpoint, f"HTTP {response.status_code}: {response.text[:200]}")


def person(
    url: str,
    name: str,
    index: int,
    ready: threading.Barrier,
    deadline: list[float],
    max_chats: int,
    results: Results,
) -> None:
    rng = random.Random(index)
    with httpx.Client(base_url=url, timeout=HTTP_TIMEOUT) as client:
        started = time.perf_counter()
        try:
            response = client.post("/api/login", json={"name": name, "password": PASSWORD})
        except httpx.HTTPError as exc:
            response = None
            results.error("login", f"{type(exc).__name__}: {exc}")
        if response is not None:
            if response.status_code == 200:
                results.timing("login", time.perf_counter() - started)
                client.headers["X-CSRF-Token"] = client.cookies["charlie_csrf"]
            else:
                results.error("login", f"HTTP {response.status_code}: {response.text[:200]}")
                response = None
        ready.wait()  # everyone signed in: the timed phase starts together
        if response is None:
            return
        for number in range(max_chats):
            if time.monotonic() >= deadline[0]:
                break
            channel = PROJECT if number % 2 == 0 else "private"
            topic = rng.choice(TOPICS)
            text = f"[{name} #{number}] Can we settle {topic} before the weekend?"
            chat(client, name, channel, text, results)
            call(client, "messages", f"/api/channels/{channel}/messages?limit=50", results)
            call(client, "memory", f"/api/channels/{channel}/memory", results)
            call(client, "projects", "/api/projects", results)
            call(client, "notes", f"/api/notes?project={PROJECT}", results)
            call(client, "search", f"/api/search?q={rng.choice(QUERIES)}", results)


def warm_up(url: str, name: str) -> None:
    """Load the embedding model and the index before timing (one search, as one person)."""
    with httpx.Client(base_url=url, timeout=300.0) as client:
        client.post("/api/login", json={"name": name, "password": PASSWORD}).raise_for_status()
        client.get("/api/search", params={"q": "warm up"}).raise_for_status()


# -- checking ---------------------------------------------------------------------------------


def check_persistence(db_path: Path, sent: list[Sent]) -> dict[str, Any]:
    """Every accepted user message stored exactly once where it belongs; every reply stored."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        user_ids = dict(db.execute("SELECT name, id FROM users"))
        shared_conv = db.execute(
            "SELECT c.id FROM conversations c JOIN projects p ON p.id = c.project_id "
            "WHERE p.slug = ? AND c.private = 0",
            (PROJECT,),
        ).fetchone()[0]
        private_conv = dict(db.execute("SELECT owner_id, id FROM conversations WHERE private = 1"))
        accepted = [s for s in sent if s.status == 200]
        missing: list[str] = []
        duplicated: list[str] = []
        by_conversation: Counter[tuple[int, int]] = Counter()
        for item in accepted:
            uid = user_ids[item.user]
            conv = shared_conv if item.channel == PROJECT else private_conv.get(uid)
            by_conversation[(uid, conv or -1)] += 1
            (count,) = db.execute(
                "SELECT count(*) FROM messages WHERE role = 'user' AND user_id = ? "
                "AND conversation_id = ? AND content = ?",
                (uid, conv, item.text),
            ).fetchone()
            if count == 0:
                missing.append(f"{item.user}/{item.channel}: {item.text}")
            elif count > 1:
                duplicated.append(f"{item.user}/{item.channel}: {item.text} x{count}")
        # The database holds no user message the clients did not send (or saw refused).
        stored = Counter(
            (uid, conv)
            for uid, conv in db.execute(
                "SELECT user_id, conversation_id FROM messages WHERE role = 'user'"
            )
        )
        count_mismatch = {
            f"user {uid} conversation {conv}": {"stored": stored[(uid, conv)], "sent": n}
            for (uid, conv), n in by_conversation.items()
            if stored[(uid, conv)] != n
        }
        extra = sum(stored.values()) - len(accepted)
        reply_ids = [s.reply_id for s in accepted if s.reply_id is not None]
        stored_replies = {
            row[0] for row in db.execute("SELECT id FROM messages WHERE role = 'assistant'")
        }
        missing_replies = [i for i in reply_ids if i not in stored_replies]
        totals = dict(db.execute("SELECT role, count(*) FROM messages GROUP BY role"))
        distillations = dict(
            db.execute("SELECT status, count(*) FROM distillations GROUP BY status")
        )
        # Distillations whose message range overlaps an earlier one of the same conversation:
        # the same messages distilled twice (concurrent turns both finding a distillation due).
        ranges: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for conv, first, last in db.execute(
            "SELECT conversation_id, first_message_id, last_message_id FROM distillations "
            "WHERE status = 'ok' ORDER BY conversation_id, first_message_id, id"
        ):
            ranges[conv].append((first, last))
        overlapping = {"shared": 0, "private": 0}
        for conv, spans in ranges.items():
            kind = "shared" if conv == shared_conv else "private"
            upto = 0
            for first, last in spans:
                overlapping[kind] += first <= upto
                upto = max(upto, last)
        distillations["per_kind"] = {
            kind: sum(len(v) for c, v in ranges.items() if (c == shared_conv) == (kind == "shared"))
            for kind in ("shared", "private")
        }
        distillations["overlapping"] = overlapping
    finally:
        db.close()
    ok = not missing and not duplicated and not count_mismatch and not missing_replies
    return {
        "ok": ok,
        "chats_sent": len(sent),
        "chats_accepted": len(accepted),
        "user_messages_stored": totals.get("user", 0),
        "assistant_messages_stored": totals.get("assistant", 0),
        "replies_received": len(reply_ids),
        "missing_user_messages": missing[:MAX_ERROR_SAMPLES],
        "missing_user_messages_count": len(missing),
        "duplicated_user_messages": duplicated[:MAX_ERROR_SAMPLES],
        "count_mismatch": count_mismatch,
        "extra_user_messages": extra,
        "missing_replies": missing_replies[:MAX_ERROR_SAMPLES],
        "missing_replies_count": len(missing_replies),
        "distillations": distillations,
    }


def scan_log(path: Path) -> dict[str, Any]:
    text = path.read_text(errors="replace") if path.exists() else ""
    lines = text.splitlines()
    interesting = Counter(
        line.strip()[:300]
        for line in lines
        if "Error" in line or "error" in line or "locked" in line or "Exception" in line
    )
    return {
        "bytes": len(text),
        "tracebacks": text.count("Traceback (most recent call last)"),
        "database_locked": text.count("database is locked"),
        "top_lines": dict(interesting.most_common(MAX_ERROR_SAMPLES)),
    }


# -- reporting ------------------------------------------------------------------------------


def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 50), 2),
        "p99_ms": round(percentile(values, 99), 2),
        "mean_ms": round(sum(values) / len(values), 2),
        "max_ms": round(max(values), 2),
    }


def table(latency: dict[str, dict[str, float]], errors: dict[str, int]) -> str:
    rows = [f"{'endpoint':<18} {'n':>6} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9} {'errors':>7}"]
    for name in (*NON_LLM, "chat_first_token", "chat_total", "login"):
        s = latency.get(name, {"n": 0})
        err = errors.get("chat" if name.startswith("chat") else name, 0)
        if s["n"]:
            rows.append(
                f"{name:<18} {s['n']:>6} {s['p50_ms']:>9.1f} {s['p99_ms']:>9.1f} "
                f"{s['max_ms']:>9.1f} {err:>7}"
            )
        else:
            rows.append(f"{name:<18} {0:>6} {'-':>9} {'-':>9} {'-':>9} {err:>7}")
    return "\n".join(rows)


# -- main -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--max-chats", type=int, default=10_000, help="per person, a bound")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if not 1 <= args.users <= 200 or not 0 < args.seconds <= 3600:
        parser.error("--users must be 1-200 and --seconds 0-3600")
    names = [f"user{i:02d}" for i in range(1, args.users + 1)]

    with tempfile.TemporaryDirectory(prefix="charlie-load-") as tmp:
        home_dir = Path(tmp) / "home"
        log_path = Path(tmp) / "app.log"
        context = multiprocessing.get_context("spawn")

        llm_conn, llm_child = context.Pipe()
        llm_proc = context.Process(target=serve_llm, args=(llm_child,), daemon=True)
        llm_proc.start()
        llm_child.close()
        base_url = llm_conn.recv()

        env = {
            "CHARLIE_HOME": str(home_dir),
            "CHARLIE_LLM_BASE_URL": base_url,
            "CHARLIE_LLM_MODEL": MODEL,
            "CHARLIE_LLM_RETRIES": "0",
        }
        for key in [k for k in os.environ if k.startswith("CHARLIE_")]:
            del os.environ[key]  # no stray settings from the environment
        os.environ.update(env)

        started = time.perf_counter()
        setup_home(home_dir, names)
        print(
            f"setup ({len(names)} people, passwords hashed): {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )

        app_conn, app_child = context.Pipe()
        app_proc = context.Process(
            target=serve_app, args=(app_child, env, str(log_path)), daemon=True
        )
        app_proc.start()
        app_child.close()
        url = f"http://127.0.0.1:{app_conn.recv()}"
        llm_report: dict[str, Any] = {}
        try:
            wait_for_app(url)
            warm_up(url, names[0])
            results = Results()
            deadline = [float("inf")]

            def start_clock() -> None:
                deadline[0] = time.monotonic() + args.seconds

            ready = threading.Barrier(len(names), action=start_clock)
            threads = [
                threading.Thread(
                    target=person,
                    args=(url, name, i, ready, deadline, args.max_chats, results),
                    name=f"load:{name}",
                )
                for i, name in enumerate(names)
            ]
            print(f"{len(names)} people chatting for {args.seconds:g} s …", file=sys.stderr)
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.monotonic() - deadline[0] + args.seconds
        finally:
            app_proc.terminate()  # SIGTERM: uvicorn shuts down gracefully
            app_proc.join(timeout=15)
            if app_proc.is_alive():
                app_proc.kill()
            llm_conn.send("stop")
            llm_report = llm_conn.recv()
            llm_proc.join(timeout=10)

        persistence = check_persistence(home_dir / "charlie.db", results.sent)
        server_log = scan_log(log_path)

    latency = {name: stats(values) for name, values in sorted(results.latency.items())}
    errors = dict(results.errors)
    report = {
        "command": " ".join(["benchmarks/load.py", *sys.argv[1:]]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "users": args.users,
        "seconds": args.seconds,
        "wall_seconds": round(wall, 2),
        "chats": results.calls["chat_total"],
        "chats_per_second": round(results.calls["chat_total"] / wall, 2),
        "latency": latency,
        "errors_total": sum(errors.values()),
        "errors_by_endpoint": errors,
        "error_messages": dict(results.error_messages.most_common(MAX_ERROR_SAMPLES)),
        "notices": dict(results.notices.most_common(MAX_ERROR_SAMPLES)),
        "persistence": persistence,
        "llm_double": llm_report,
        "server_log": server_log,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")

    print(table(latency, errors))
    print(
        f"\nchats completed: {report['chats']} ({report['chats_per_second']}/s over "
        f"{wall:.1f} s); errors: {report['errors_total']}; notices: "
        f"{sum(results.notices.values())}"
    )
    for message, count in results.error_messages.most_common(MAX_ERROR_SAMPLES):
        print(f"  {count:>5} × {message}")
    print(
        f"persistence: {'OK' if persistence['ok'] else 'FAILED'} — "
        f"{persistence['chats_accepted']} accepted, {persistence['user_messages_stored']} user "
        f"messages stored, {persistence['replies_received']} replies received, "
        f"{persistence['assistant_messages_stored']} assistant messages stored, "
        f"{persistence['missing_user_messages_count']} missing, "
        f"{persistence['missing_replies_count']} replies missing"
    )
    print(
        f"server log: {server_log['tracebacks']} tracebacks, "
        f"{server_log['database_locked']} 'database is locked'"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
