"""A message answered 200 is never lost: the web app stores the person's message (committed)
before the response starts, and the stream's first event, `saved`, says so with its id.

The app runs in-process behind a recorder of what it sends: at the moment the response
starts, and at the moment the first event goes out, charlie.db is read by a connection of
its own — what a kill -9 at that instant would leave on disk."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from web_support import PASSWORD, events

from charlie import projects
from charlie.adapters.web import apitypes, schemas
from charlie.adapters.web.app import create_app
from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.conversations import shared_channel
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.users import ensure_user, get_user, set_password

Stored = list[tuple[int, str, str]]  # (id, role, content) of every message on disk


def on_disk() -> Stored:
    """Every message in charlie.db, read by a connection of its own (committed rows only)."""
    with sqlite3.connect(load_settings().db_path) as db:
        rows = db.execute("SELECT id, role, content FROM messages ORDER BY id").fetchall()
    return [(int(i), str(role), str(text)) for i, role, text in rows]


class Recorder:
    """The app, with what charlie.db holds when a chat's response starts and when its first
    event is sent."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.at_start: Stored | None = None
        self.first_event: str | None = None
        self.at_first_event: Stored | None = None

    async def __call__(self, scope: Any, receive: Callable[..., Any], send: Any) -> None:
        watched = scope["type"] == "http" and scope["path"].endswith(("/chat", "/edit"))

        async def recording(message: dict[str, Any]) -> None:
            if watched and message["type"] == "http.response.start":
                self.at_start = on_disk()
            body = message.get("body", b"")
            sent = watched and message["type"] == "http.response.body" and body
            if sent and self.first_event is None:
                self.first_event = body.decode().split("\n\n")[0]
                self.at_first_event = on_disk()
            await send(message)

        await self.app(scope, receive, recording)


@pytest.fixture
def household(home: Home) -> Home:
    for name in ("alice", "bob"):
        ensure_user(home.db, name, is_admin=name == "alice")
        set_password(home.db, name, PASSWORD)
    projects.create_project(home, "Kitchen")
    return home


@pytest.fixture
def recorded(household: Home, llm: ScriptedLLMServer) -> Recorder:
    return Recorder(create_app(load_settings()))


def signed_in_to(app: Any) -> TestClient:
    client = TestClient(app)
    response = client.post("/api/login", json={"name": "alice", "password": PASSWORD})
    assert response.status_code == 200, response.text
    client.headers["X-CSRF-Token"] = client.cookies["charlie_csrf"]
    return client


def first_event(recorder: Recorder) -> tuple[str, dict[str, Any]]:
    assert recorder.first_event is not None
    lines = dict(line.split(": ", 1) for line in recorder.first_event.splitlines())
    return lines["event"], json.loads(lines["data"])


def test_the_message_is_on_disk_before_the_response_starts_and_the_first_event_says_so(
    recorded: Recorder, llm: ScriptedLLMServer
) -> None:
    llm.reply("Oak, as decided.")
    with signed_in_to(recorded) as client:
        response = client.post("/api/channels/kitchen/chat", json={"text": "Which worktop?"})
        assert response.status_code == 200
    assert recorded.at_start is not None
    assert [(role, text) for _, role, text in recorded.at_start] == [("user", "Which worktop?")]
    kind, data = first_event(recorded)
    assert kind == "saved"
    saved = data["message"]
    assert recorded.at_first_event == [(saved["id"], "user", "Which worktop?")]
    assert schemas.SavedEvent.model_validate(data).message.id == saved["id"]
    assert saved["role"] == "user" and saved["speaker"] == "alice"
    assert saved["content"] == "Which worktop?" and isinstance(saved["thread"], int)
    kinds = [kind for kind, _ in events(response)]
    assert kinds[0] == "saved" and kinds.count("saved") == 1
    assert kinds[-2:] == ["reply", "done"]
    assert [m[1:] for m in on_disk()] == [
        ("user", "Which worktop?"),
        ("assistant", "Oak, as decided."),
    ]


def test_the_message_is_saved_first_even_when_the_model_is_down(
    household: Home, dead_url: str
) -> None:
    with signed_in_to(create_app(load_settings())) as client:
        response = client.post("/api/channels/kitchen/chat", json={"text": "Anyone there?"})
    found = events(response)
    assert found[0][0] == "saved" and [kind for kind, _ in found[-2:]] == ["error", "done"]
    assert found[0][1]["message"]["id"] == on_disk()[0][0]
    assert "Your message is saved" in found[-2][1]["error"]


def test_an_edited_message_is_on_disk_before_the_response_starts(
    recorded: Recorder, llm: ScriptedLLMServer
) -> None:
    llm.reply("Oak.")
    llm.reply("Marble.")
    with signed_in_to(recorded) as client:
        client.post("/api/channels/kitchen/chat", json={"text": "Oak or marble?"})
        first, _ = on_disk()[:2]
        thread = client.get("/api/channels/kitchen/messages").json()[0]["thread"]
        recorded.first_event = None
        response = client.post(
            f"/api/channels/kitchen/threads/{thread}/messages/{first[0]}/edit",
            json={"text": "Marble or granite?"},
        )
        assert response.status_code == 200
    assert recorded.at_start is not None
    assert ("user", "Marble or granite?") in [m[1:] for m in recorded.at_start]
    kind, data = first_event(recorded)
    assert kind == "saved" and data["message"]["content"] == "Marble or granite?"
    assert (data["message"]["id"], "user", "Marble or granite?") in on_disk()


def test_a_refused_stream_stores_nothing(recorded: Recorder, household: Home) -> None:
    """Past the streams a person may have at once, the 429 comes before the message is
    stored: sending it again later makes no duplicate."""
    with signed_in_to(recorded) as client:
        slots = recorded.app.state.streams
        alice = get_user(household.db, "alice")
        held = [slots.take(alice) for _ in range(slots.limit)]
        response = client.post("/api/channels/kitchen/chat", json={"text": "One more?"})
        for release in held:
            release()
    assert response.status_code == 429
    assert on_disk() == []


def test_every_front_end_gets_saved_first_from_the_core(home: Home, llm: ScriptedLLMServer) -> None:
    alice = ensure_user(home.db, "alice")
    channel = shared_channel(home, projects.create_project(home, "Garden"))
    llm.reply("Tulips.")
    client = LLMClient(llm.base_url, "test-model", retries=0)
    try:
        turned = list(chat.turn(home, client, channel, alice, "What to plant?"))
    finally:
        client.close()
    assert isinstance(turned[0], chat.Saved)
    assert turned[0].message.content == "What to plant?" and turned[0].message.role == "user"
    assert not any(isinstance(e, chat.Saved) for e in turned[1:])


def test_the_saved_event_is_in_the_apps_types(household: Home) -> None:
    """The app's JSDoc types (`./scripts/api-types`) describe the event's data too."""
    written = apitypes.typedefs(create_app(load_settings()).openapi())
    typedef = written[written.index(" * @typedef {Object} SavedEvent") :].split(" */")[0]
    assert typedef.splitlines() == [
        " * @typedef {Object} SavedEvent",
        " * @property {MessageOut} message",
    ]
