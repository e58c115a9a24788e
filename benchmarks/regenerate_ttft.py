"""Time to first token: regenerating a reply against sending a fresh message.

Starts a real `charlie serve` on loopback, pointed at the scripted OpenAI-compatible test
double (`tests/llm_double.py`, in this process) that waits a fixed `--model-delay` before
it streams each answer, as a model's prompt processing would. Signed in as alice, it sends
a message into one thread (`POST /api/channels/kitchen/chat?thread=ID`), then regenerates
the reply just made (`POST …/threads/ID/messages/MID/regenerate`), `--rounds` times, and
measures from the request to the first `token` event of each stream. What is left after
the model's delay is Charlie's own work before the first word.

    .venv/bin/python benchmarks/regenerate_ttft.py [--rounds 15] [--model-delay 0.2]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
CHARLIE = str(Path(sys.executable).parent / "charlie")
PASSWORD = "correct horse battery"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def first_token(http: httpx.Client, path: str, body: dict[str, str] | None) -> float:
    """Seconds from sending the request to the first `token` event of its stream (the
    rest of the stream is read to its end)."""
    started = time.perf_counter()
    seen: float | None = None
    lines: list[str] = []
    with http.stream("POST", path, json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            lines.append(line)
            if seen is None and line == "event: token":
                seen = time.perf_counter() - started
    if seen is None:
        raise RuntimeError(f"{path} streamed no token: {' | '.join(lines)[-600:]}")
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--model-delay", type=float, default=0.2)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from llm_double import ScriptedLLMServer

    from charlie import projects
    from charlie.config import load_settings
    from charlie.home import Home
    from charlie.users import add_user

    with tempfile.TemporaryDirectory(prefix="charlie-ttft-") as folder, ScriptedLLMServer() as llm:
        home_dir = Path(folder) / "home"
        with Home.open(load_settings(home=home_dir)) as home:
            add_user(home.db, "alice", PASSWORD, is_admin=True)
            projects.create_project(home, "Kitchen")
        port = free_port()
        env = dict(
            os.environ,
            CHARLIE_HOME=str(home_dir),
            CHARLIE_LLM_BASE_URL=llm.base_url,
            CHARLIE_LLM_MODEL="test-model",
            CHARLIE_TOOL_MODE="native",  # the scripted replies are answers, not tool steps
        )
        server = subprocess.Popen(
            [CHARLIE, "serve", "--port", str(port)], env=env, stderr=subprocess.DEVNULL
        )
        base = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(base_url=base, timeout=60) as http:
                for _ in range(300):
                    try:
                        http.get("/api/health", timeout=1)
                        break
                    except httpx.TransportError:
                        time.sleep(0.1)
                http.post("/api/login", json={"name": "alice", "password": PASSWORD})
                http.headers["X-CSRF-Token"] = http.cookies["charlie_csrf"]
                thread = http.post("/api/channels/kitchen/threads", json={}).json()["id"]
                fresh, again = [], []
                for number in range(args.rounds):
                    llm.delay(args.model_delay)
                    llm.reply(f"Oak, oiled twice a year ({number}).")
                    fresh.append(
                        first_token(
                            http,
                            f"/api/channels/kitchen/chat?thread={thread}",
                            {"text": f"Which wood for shelf {number}?"},
                        )
                    )
                    shown = http.get(f"/api/channels/kitchen/messages?thread={thread}").json()
                    llm.delay(args.model_delay)
                    llm.reply(f"Walnut, waxed ({number}).")
                    again.append(
                        first_token(
                            http,
                            f"/api/channels/kitchen/threads/{thread}/messages/"
                            f"{shown[-1]['id']}/regenerate",
                            None,
                        )
                    )
        finally:
            server.terminate()
            server.wait(timeout=30)
    delay_ms = args.model_delay * 1000
    print(f"{args.rounds} rounds, the model waits {delay_ms:.0f} ms before its first token")
    print(f"load average {os.getloadavg()}")
    print(f"{'':12} {'median ms':>10} {'best ms':>8} {'Charlie, median ms':>20}")
    for name, times in (("fresh", fresh), ("regenerate", again)):
        ms = [t * 1000 for t in times]
        print(
            f"{name:12} {statistics.median(ms):10.0f} {min(ms):8.0f} "
            f"{statistics.median(ms) - delay_ms:20.0f}"
        )


if __name__ == "__main__":
    main()
