"""Forgetting a message while Charlie is still answering it, against a real `charlie serve`
child process and a slow scripted model: the reply is dropped (the stream says the message
was forgotten), nothing is stored after the forgotten message, and the server keeps taking
writes. A child process, because what broke here hung the server: a hang stays in it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import free_port
from llm_double import ScriptedLLMServer, TextReply
from support.distilling import is_distillation
from web_support import PASSWORD

from charlie import projects
from charlie.config import load_settings
from charlie.home import Home
from charlie.users import ensure_user, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)

SECRET = "Should the gate code be QUAIL9182 from now on?"
ANSWER = "Yes: the gate code QUAIL9182 is noted."
WAIT = 30.0  # seconds any one step may take


class SlowModel:
    """The scripted model, holding each chat answer until the test lets it go."""

    def __init__(self, server: ScriptedLLMServer) -> None:
        self.asked = threading.Event()
        self.go = threading.Event()
        server.default = self.answer

    def answer(self, request: dict[str, Any]) -> Any:
        if is_distillation(request):
            return '{"summary": "The gate.", "decisions": [], "quotes": []}'
        self.asked.set()
        assert self.go.wait(WAIT)
        return TextReply(ANSWER, chunk_size=8)


@pytest.fixture
def served(charlie_home: Path, llm: ScriptedLLMServer) -> Iterator[str]:
    """alice (an administrator) and bob, project kitchen; `charlie serve` on them."""
    with Home.open(load_settings()) as home:
        for name in ("alice", "bob"):
            ensure_user(home.db, name, is_admin=name == "alice")
            set_password(home.db, name, PASSWORD)
        projects.create_project(home, "Kitchen", distill_every=1000)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "charlie", "serve", "--port", str(port)],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                if httpx.get(f"{url}/api/me", timeout=2).status_code == 401:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("charlie serve did not start")
            time.sleep(0.1)
        yield url
    finally:
        server.kill()  # a server stuck in a loop would not stop when asked
        server.communicate(timeout=WAIT)


@contextmanager
def client(url: str, name: str) -> Iterator[httpx.Client]:
    """A client of the server, signed in as `name`, with CSRF."""
    with httpx.Client(base_url=url, timeout=WAIT) as signed:
        response = signed.post("/api/login", json={"name": name, "password": PASSWORD})
        assert response.status_code == 200, response.text
        signed.headers["X-CSRF-Token"] = signed.cookies["charlie_csrf"]
        yield signed


def stream_events(response: httpx.Response) -> list[tuple[str, str]]:
    found, event = [], ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            found.append((event, line.removeprefix("data: ")))
    return found


def chains(db_path: Path) -> list[tuple[int, int | None, bool]]:
    """Each stored message: its id, its parent, whether that parent is stored (or 0/NULL)."""
    with sqlite3.connect(db_path) as db:
        ids = {r[0] for r in db.execute("SELECT id FROM messages")}
        return [
            (i, p, p in (None, 0) or p in ids)
            for i, p in db.execute("SELECT id, parent_id FROM messages ORDER BY id")
        ]


@pytest.mark.sqlite_only
def test_forgetting_a_message_charlie_is_answering_drops_the_reply(
    served: str, llm: ScriptedLLMServer
) -> None:
    model = SlowModel(llm)
    with client(served, "bob") as bob, client(served, "alice") as alice:
        forget_while_answering(bob, alice, model)


def forget_while_answering(bob: httpx.Client, alice: httpx.Client, model: SlowModel) -> None:
    thread = bob.post("/api/channels/kitchen/threads", json={}).json()["id"]
    outcome: dict[str, Any] = {}

    def chat() -> None:
        path = f"/api/channels/kitchen/chat?thread={thread}"
        with bob.stream("POST", path, json={"text": SECRET}) as response:
            outcome["status"] = response.status_code
            outcome["events"] = stream_events(response)

    chatting = threading.Thread(target=chat)
    chatting.start()
    try:
        assert model.asked.wait(WAIT)  # Charlie is answering; bob's message is stored
        messages = bob.get(f"/api/channels/kitchen/messages?thread={thread}").json()
        asked = messages[-1]["id"]
        assert messages[-1]["content"] == SECRET
        forgot = bob.post(
            f"/api/channels/kitchen/threads/{thread}/messages/{asked}/forget", json={}
        )
        assert forgot.status_code == 200, forgot.text
        assert forgot.json()["messages"] == 1
    finally:
        model.go.set()
        chatting.join(WAIT)
    assert not chatting.is_alive()

    assert outcome["status"] == 200
    kinds = [kind for kind, _ in outcome["events"]]
    assert "reply" not in kinds and kinds[-2:] == ["error", "done"], outcome["events"]
    error = outcome["events"][-2][1]
    assert '"kind": "MessageGone"' in error and "forgotten meanwhile" in error
    shown = bob.get(f"/api/channels/kitchen/messages?thread={thread}").json()
    assert shown == []  # neither the message nor a reply to it
    db_path = load_settings().db_path
    assert all(parent_stored for _, _, parent_stored in chains(db_path))
    assert all(p is None or p < i for i, p, _ in chains(db_path))

    # The household goes on: bob's next message takes a fresh id, and choosing works.
    model.go.set()
    again = bob.post(f"/api/channels/kitchen/chat?thread={thread}", json={"text": "Tiles?"})
    assert again.status_code == 200 and "event: reply" in again.text, again.text
    stored = bob.get(f"/api/channels/kitchen/messages?thread={thread}").json()
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert chains(db_path) == [(stored[0]["id"], 0, True), (stored[1]["id"], stored[0]["id"], True)]
    assert stored[0]["id"] > asked
    chose = bob.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{stored[1]['id']}/choose",
        timeout=10,
    )
    assert chose.status_code == 200, chose.text
    login = alice.post("/api/login", json={"name": "alice", "password": PASSWORD})
    assert login.status_code == 200  # a sign-in is a write: the database is not held
