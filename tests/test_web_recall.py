"""Conversation recall over the web API: `GET /api/channels/{channel}/recall` and the
messages around one (`messages?around=ID`), in-process, with a real SQLite home."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from web_support import PASSWORD

from charlie import conversations, projects
from charlie.adapters.web.app import create_app
from charlie.config import load_settings
from charlie.conversations import private_channel, shared_channel
from charlie.home import Home
from charlie.transfer.jsonl import import_jsonl
from charlie.users import ensure_user, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)

GARDEN = [
    {"id": "g1", "speaker": "Caroline", "text": "The seedlings are finally big enough.",
     "time": "2023-05-08T13:50:00Z"},
    {"id": "g2", "speaker": "Caroline", "text": "We planted the tomatoes by the south fence.",
     "time": "2023-05-08T13:56:00Z"},
    {"id": "g3", "speaker": "Melanie", "text": "Good, they need the afternoon sun.",
     "time": "2023-05-08T14:02:00Z"},
    {"id": "g4", "speaker": "Melanie", "text": "The hedge wants cutting again.",
     "time": "2023-08-14T09:00:00Z"},
    {"id": "g5", "speaker": "Melanie", "text": "We planted the tomatoes by the south fence.",
     "time": "2023-08-14T09:05:00Z"},
    {"id": "g6", "speaker": "Caroline", "text": "Then the shed can go on the north side.",
     "time": "2023-08-14T09:10:00Z"},
]  # fmt: skip


@pytest.fixture
def app_home(home: Home, llm: ScriptedLLMServer, tmp_path: Path) -> Home:
    for name in ("alice", "bob"):
        ensure_user(home.db, name, is_admin=name == "alice")
        set_password(home.db, name, PASSWORD)
    garden = projects.create_project(home, "Garden")
    history = tmp_path / "garden.jsonl"
    history.write_text("".join(json.dumps(line) + "\n" for line in GARDEN))
    report = import_jsonl(home, shared_channel(home, garden), history)
    assert report.added == len(GARDEN)
    alice = ensure_user(home.db, "alice")
    mine = private_channel(home, alice)
    conversations.add_message(home, mine, "user", "Ordinary morning.", user=alice)
    conversations.add_message(
        home, mine, "user", "ALICE-SECRET: the birthday present is a kayak.", user=alice
    )
    conversations.add_message(home, mine, "assistant", "Your kayak secret is safe with me.")
    return home


def recall(client: TestClient, channel: str, q: str, **params: Any) -> Any:
    answer = client.get(f"/api/channels/{channel}/recall", params={"q": q, **params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def message_id(home: Home, text: str) -> int:
    row = home.db.execute("SELECT id FROM messages WHERE content LIKE ?", (f"%{text}%",))
    return int(row.fetchone()[0])


def test_recall_finds_an_imported_message_with_its_date_and_neighbours(
    alice: TestClient,
) -> None:
    found = recall(alice, "garden", "where did we put the tomatoes?", limit=3)
    assert found["query"] == "where did we put the tomatoes?"
    assert found["when"] is None
    assert found["searched"] == ["project garden"]
    assert "tomatoes" in found["terms"]
    best = found["results"][0]
    assert best["text"] == "We planted the tomatoes by the south fence."
    assert best["source_id"] in ("g2", "g5")
    assert best["time"].startswith(("2023-05-08T13:56", "2023-08-14T09:05"))
    assert best["channel"] == "project garden" and best["project"] == "garden"
    assert best["in_time"] is None and best["why"].startswith("score ")
    assert len(best["around"]) == 3  # one before, the hit, one after
    assert best["around"][1]["message_id"] == best["message_id"]
    assert set(best["around"][0]) == {"message_id", "speaker", "role", "time", "text"}
    wider = recall(alice, "garden", "tomatoes fence", limit=1, around=2)["results"][0]
    assert len(wider["around"]) in (4, 5)  # the last message of a day has only one after


def test_a_time_in_the_question_prefers_that_time(alice: TestClient) -> None:
    found = recall(alice, "garden", "when were the tomatoes planted by the fence in May 2023?")
    assert found["when"] is not None and "May 2023" in found["when"]
    tomatoes = [r for r in found["results"] if "tomatoes" in r["text"]]
    assert [r["source_id"] for r in tomatoes] == ["g2", "g5"]
    assert tomatoes[0]["in_time"] is True and tomatoes[1]["in_time"] is False
    assert tomatoes[0]["time"].startswith("2023-05-08T13:56")
    assert [m["text"] for m in tomatoes[0]["around"]] == [
        "The seedlings are finally big enough.",
        "We planted the tomatoes by the south fence.",
        "Good, they need the afternoon sun.",
    ]
    august = recall(alice, "garden", "the tomatoes by the fence in August 2023")
    assert august["results"][0]["source_id"] == "g5"


def test_private_messages_are_recalled_by_their_owner_only(
    alice: TestClient, bob: TestClient
) -> None:
    mine = recall(alice, "private", "birthday present kayak")
    assert mine["results"][0]["text"].startswith("ALICE-SECRET")
    assert mine["results"][0]["channel"] == "private"
    assert mine["results"][0]["project"] is None
    for channel in ("private", "garden"):
        for everywhere in ("false", "true"):
            answer = bob.get(
                f"/api/channels/{channel}/recall",
                params={"q": "ALICE-SECRET birthday present kayak", "all": everywhere},
            )
            assert answer.status_code == 200
            results = json.dumps(answer.json()["results"])
            assert "ALICE" not in results and "kayak" not in results
            assert "alice" not in json.dumps(answer.json()["searched"])
    # From a shared channel, even alice's own private messages are left out.
    shared = recall(alice, "garden", "birthday present kayak", all="true")
    assert "kayak" not in json.dumps(shared["results"])
    assert shared["searched"] == ["project garden"]
    everywhere = recall(alice, "private", "tomatoes by the fence", all="true")
    assert everywhere["searched"] == ["alice's private channel", "project garden"]
    assert everywhere["results"][0]["project"] == "garden"
    for bad in ("alice", "private:alice", "..%2Fprivate"):
        answer = bob.get(f"/api/channels/{bad}/recall", params={"q": "kayak"})
        assert answer.status_code in (400, 404)
        assert "results" not in answer.json()


def test_messages_around_one_stay_in_their_channel(
    alice: TestClient, bob: TestClient, app_home: Home
) -> None:
    secret = message_id(app_home, "ALICE-SECRET")
    shown = alice.get("/api/channels/private/messages", params={"around": secret}).json()
    assert [m["content"] for m in shown] == [
        "Ordinary morning.",
        "ALICE-SECRET: the birthday present is a kayak.",
        "Your kayak secret is safe with me.",
    ]
    assert {"id", "role", "speaker", "content", "created_at", "trace", "thread"} <= set(shown[0])
    one = alice.get(
        "/api/channels/private/messages", params={"around": secret, "before": 0, "after": 0}
    )
    assert [m["id"] for m in one.json()] == [secret]
    for channel in ("private", "garden"):
        answer = bob.get(f"/api/channels/{channel}/messages", params={"around": secret})
        assert answer.status_code == 404
        assert answer.json() == {
            "error": f"There is no message {secret} in this conversation.",
            "kind": "NotFound",
        }
    tomatoes = message_id(app_home, "seedlings")
    assert (
        alice.get("/api/channels/private/messages", params={"around": tomatoes}).status_code == 404
    )
    garden = bob.get("/api/channels/garden/messages", params={"around": tomatoes, "after": 1})
    assert [m["content"] for m in garden.json()] == [
        "The seedlings are finally big enough.",
        "We planted the tomatoes by the south fence.",
    ]
    latest = bob.get("/api/channels/garden/messages", params={"limit": 2}).json()
    assert [m["content"] for m in latest][-1] == "Then the shed can go on the north side."


def test_bad_questions_are_400_with_what_to_do(alice: TestClient) -> None:
    empty = alice.get("/api/channels/garden/recall", params={"q": "   "})
    assert empty.status_code == 400
    assert empty.json() == {
        "error": "The question is empty: give some words to look for.",
        "kind": "RecallError",
    }
    assert alice.get("/api/channels/garden/recall").status_code == 400  # no q at all
    long = recall(alice, "garden", "tomatoes " * 400, limit=500, around=99)
    assert long["truncated"] is True and len(long["query"]) == 2000
    assert len(long["results"]) == 6  # at most 50 asked for; the garden has 6 messages
    assert all(len(r["around"]) <= 11 for r in long["results"])


def test_recall_needs_a_session(app_home: Home) -> None:
    client = TestClient(create_app(load_settings()))
    assert client.get("/api/channels/garden/recall", params={"q": "tomatoes"}).status_code == 401
