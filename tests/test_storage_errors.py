"""A storage failure reaching a front end (a full disk, a read-only disk) is told as what it
is — on the web as a 503 problem or a stream's `error` event, on the CLI as `Error: …`, on
Discord as a reply — and nothing already saved is lost. Any other failure stays a bug."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from support.storage import sqlite_full
from web_support import PASSWORD, events, signed_in

from charlie import conversations, projects
from charlie.adapters.cli import cli
from charlie.adapters.discord import conversation
from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.conversations import shared_channel
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.notes import files as notes
from charlie.users import ensure_user, set_password


def no_space(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device", str(args[0]) if args else None)


@pytest.fixture
def household(home: Home) -> Home:
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    projects.create_project(home, "Kitchen", slug="kitchen")
    return home


def test_a_note_saved_on_a_full_disk_is_a_503_that_says_so(
    household: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = signed_in("alice")
    monkeypatch.setattr(notes, "write_atomic", no_space)
    response = client.post(
        "/api/notes", json={"project": "kitchen", "title": "Tiles", "body": "Green.", "tags": []}
    )
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["kind"] == "DiskFull"
    assert "is full" in body["error"] and "free some space" in body["error"]


def test_a_database_full_mid_request_is_a_503_that_says_so(
    household: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = signed_in("alice")
    error = sqlite_full()

    def full(*args: Any, **kwargs: Any) -> None:
        raise error

    monkeypatch.setattr(projects, "create_project", full)
    response = client.post("/api/projects", json={"name": "Garden"})
    assert response.status_code == 503, response.text
    assert response.json()["kind"] == "DiskFull"
    assert "move it aside" not in response.json()["error"]


def test_a_bug_is_still_a_500(household: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    client = signed_in("alice")  # the app re-raises a bug; TestClient surfaces it

    def bug(*args: Any, **kwargs: Any) -> None:
        raise sqlite3.IntegrityError("UNIQUE constraint failed: x")

    monkeypatch.setattr(projects, "create_project", bug)
    with pytest.raises(sqlite3.IntegrityError):
        client.post("/api/projects", json={"name": "Garden"})


def test_a_chat_on_a_full_disk_is_refused_before_the_stream_starts(
    household: Home, llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message is stored before the response starts (a 200 means it is kept), so a
    full disk is the answer itself: a 503 that says so, not a stream."""
    client = signed_in("alice")
    llm.reply("Green it is.")
    before = client.post("/api/channels/kitchen/chat", json={"text": "Green tiles?"})
    assert [kind for kind, _ in events(before)][-1] == "done"
    asked = len(llm.requests)
    error = sqlite_full()

    def full(*args: Any, **kwargs: Any) -> None:
        raise error

    with monkeypatch.context() as patched:
        patched.setattr(conversations, "add_message", full)
        response = client.post("/api/channels/kitchen/chat", json={"text": "And the grout?"})
    assert response.status_code == 503
    assert response.json()["kind"] == "DiskFull"
    assert "is full" in response.json()["error"]
    assert len(llm.requests) == asked  # the model is not asked about an unsaved message
    kept = client.get("/api/channels/kitchen/messages").json()
    assert [m["content"] for m in kept] == ["Green tiles?", "Green it is."]
    llm.reply("White grout.")
    after = client.post("/api/channels/kitchen/chat", json={"text": "And the grout?"})
    assert [kind for kind, _ in events(after)][-1] == "done"


def test_the_cli_says_the_disk_is_full(
    household: Home, charlie: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notes, "write_atomic", no_space)
    result = charlie.runner.invoke(
        cli, ["notes", "add", "Tiles", "-p", "kitchen", "--body", "Green."]
    )
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: The disk holding ")
    assert "is full" in result.output


def test_discord_says_the_disk_is_full(
    household: Home, llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = sqlite_full()

    def full(*args: Any, **kwargs: Any) -> Iterator[chat.Event]:
        raise error

    monkeypatch.setattr(chat, "turn", full)
    with Home.open(load_settings()) as home:
        alice = ensure_user(home.db, "alice")
        channel = shared_channel(home, projects.get_project(home, "kitchen"))
        client = LLMClient.from_settings(home.settings)
        try:
            answer = conversation._turn(home, client, channel, alice, "Green tiles?")
        finally:
            client.close()
    text = "\n".join(answer.parts)
    assert "⚠️ The disk holding" in text and "is full" in text


def test_a_bug_mid_stream_ends_it_with_an_error_and_logs_it(
    household: Home, llm: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    client = signed_in("alice")

    def broken(*args: Any, **kwargs: Any) -> Iterator[chat.Event]:
        yield chat.Token("Half an ans")
        raise RuntimeError("a bug")

    monkeypatch.setattr(chat, "reply_to", broken)
    response = client.post("/api/channels/kitchen/chat", json={"text": "Green tiles?"})
    found = events(response)
    assert [kind for kind, _ in found] == ["token", "error", "done"]
    assert "server's log" in found[1][1]["error"]
    assert "RuntimeError: a bug" in caplog.text
