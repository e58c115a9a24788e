"""The trash and the per-project model, over the web API (in-process, real data home, the
scripted LLM server on loopback)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from web_support import PASSWORD, events, signed_in

from charlie import conversations, projects, users
from charlie.conversations import shared_channel
from charlie.home import Home
from charlie.memory import layers as memory
from charlie.memory.layers import Memory
from charlie.notes import files as notes


@pytest.fixture
def app_home(home: Home, llm: ScriptedLLMServer) -> Home:
    users.add_user(home.db, "alice", PASSWORD, is_admin=True)
    users.add_user(home.db, "bob", PASSWORD)
    kitchen = projects.create_project(home, "Kitchen")
    notes.create_note(kitchen, "Worktops", "Oiled oak worktops, twice a year.", ["oak"])
    channel = shared_channel(home, kitchen)
    alice = users.get_user(home.db, "alice")
    conversations.add_message(home, channel, "user", "Oak or marble?", user=alice)
    conversations.add_message(home, channel, "assistant", "Oak: warmer.")
    memory.save(home, channel, Memory(summary="Chose oiled oak."), "edit")
    projects.create_project(home, "Garden")
    return home


def slugs(client: TestClient) -> list[str]:
    return [p["slug"] for p in client.get("/api/projects").json()["projects"]]


def found(client: TestClient, query: str) -> list[str]:
    return [hit["id"] for hit in client.get("/api/search", params={"q": query}).json()["results"]]


def test_a_deleted_project_is_gone_from_view_and_comes_back_whole(
    alice: TestClient, app_home: Home
) -> None:
    assert found(alice, "oak worktops") == ["kitchen/worktops"]
    history = alice.get("/api/channels/kitchen/memory/history").json()
    deleted = alice.delete("/api/projects/kitchen")
    assert deleted.status_code == 200, deleted.text
    entry = deleted.json()["trashed"]["id"]
    assert entry.startswith("kitchen.")

    folder = app_home.settings.home / "trash" / "_projects" / entry
    assert (folder / "notes" / "worktops.md").is_file()  # moved, never destroyed
    assert (folder / "memory.md").read_text().count("Chose oiled oak.") == 1
    assert not (app_home.settings.projects_dir / "kitchen").exists()
    assert slugs(alice) == ["garden"]
    assert alice.get("/api/projects/kitchen").status_code == 404
    assert alice.get("/api/channels/kitchen/messages").status_code == 404
    chat = alice.post("/api/channels/kitchen/chat", json={"text": "Still there?"})
    assert chat.status_code == 404
    assert found(alice, "oak worktops") == []
    everywhere = alice.get("/api/channels/garden/recall", params={"q": "oak marble", "all": 1})
    assert everywhere.json()["results"] == []
    listed = alice.get("/api/trash").json()
    assert [(p["id"], p["name"]) for p in listed["projects"]] == [(entry, "Kitchen")]

    restored = alice.post("/api/trash/restore", json={"kind": "project", "id": "kitchen"})
    assert restored.status_code == 200, restored.text
    assert slugs(alice) == ["garden", "kitchen"]
    said = [m["content"] for m in alice.get("/api/channels/kitchen/messages").json()]
    assert said == ["Oak or marble?", "Oak: warmer."]
    assert alice.get("/api/channels/kitchen/memory/history").json() == history
    assert alice.get("/api/channels/kitchen/memory").json()["summary"] == "Chose oiled oak."
    assert found(alice, "oak worktops") == ["kitchen/worktops"]
    assert alice.get("/api/trash").json()["projects"] == []


def test_a_new_project_of_the_same_name_starts_afresh_and_is_never_replaced(
    alice: TestClient, app_home: Home
) -> None:
    alice.delete("/api/projects/kitchen")
    again = alice.post("/api/projects", json={"name": "Kitchen"})
    assert again.status_code == 201
    assert alice.get("/api/channels/kitchen/messages").json() == []  # not the old talk
    refused = alice.post("/api/trash/restore", json={"kind": "project", "id": "kitchen"})
    assert refused.status_code == 409
    assert "There is a project 'kitchen' now" in refused.json()["error"]
    assert len(alice.get("/api/trash").json()["projects"]) == 1  # still in the trash
    assert alice.delete("/api/projects/kitchen").status_code == 200  # the new one
    entries = [p["id"] for p in alice.get("/api/trash").json()["projects"]]
    assert len(entries) == 2
    older = entries[1]
    back = alice.post("/api/trash/restore", json={"kind": "project", "id": older})
    assert back.status_code == 200
    said = [m["content"] for m in alice.get("/api/channels/kitchen/messages").json()]
    assert said == ["Oak or marble?", "Oak: warmer."]


def test_notes_go_to_the_trash_and_back_without_replacing_a_newer_note(
    bob: TestClient, app_home: Home
) -> None:
    deleted = bob.delete("/api/notes/kitchen/worktops")
    assert deleted.status_code == 200, deleted.text
    trashed = deleted.json()["trashed"]
    assert (trashed["project"], trashed["name"], trashed["title"]) == (
        "kitchen",
        "worktops",
        "Worktops",
    )
    assert bob.get("/api/notes/kitchen/worktops").status_code == 404
    assert found(bob, "oak worktops") == []
    assert [n["id"] for n in bob.get("/api/trash").json()["notes"]] == [trashed["id"]]
    made = bob.post("/api/notes", json={"project": "kitchen", "title": "Worktops", "body": "New"})
    assert made.json()["id"] == "kitchen/worktops"
    back = bob.post("/api/trash/restore", json={"kind": "note", "id": trashed["id"]})
    assert back.status_code == 200, back.text
    assert back.json() == {"kind": "note", "id": "kitchen/worktops-restored", "title": "Worktops"}
    assert bob.get("/api/notes/kitchen/worktops").json()["body"].strip() == "New"
    old = bob.get("/api/notes/kitchen/worktops-restored").json()
    assert old["body"].strip() == "Oiled oak worktops, twice a year."
    assert bob.get("/api/trash").json()["notes"] == []


def test_restoring_what_is_not_in_the_trash_says_so_and_changes_nothing(
    bob: TestClient, app_home: Home
) -> None:
    for body in (
        {"kind": "note", "id": "kitchen/nothing.20240101T000000000000.md"},
        {"kind": "note", "id": "../../etc/passwd"},
    ):
        answer = bob.post("/api/trash/restore", json=body)
        assert answer.status_code == 404, body
        assert "in the trash" in answer.json()["error"]
    assert bob.delete("/api/notes/kitchen/no-such-note").status_code == 404
    assert bob.delete("/api/notes/nowhere/worktops").status_code == 404
    assert [n.name for n in notes.list_notes(projects.get_project(app_home, "kitchen"))[0]] == [
        "worktops"
    ]


def test_a_note_of_a_deleted_project_waits_for_its_project(
    alice: TestClient, app_home: Home
) -> None:
    note = alice.delete("/api/notes/kitchen/worktops").json()["trashed"]["id"]
    alice.delete("/api/projects/kitchen")
    early = alice.post("/api/trash/restore", json={"kind": "note", "id": note})
    assert early.status_code == 404
    assert "restore it first" in early.json()["error"]
    alice.post("/api/trash/restore", json={"kind": "project", "id": "kitchen"})
    assert alice.post("/api/trash/restore", json={"kind": "note", "id": note}).status_code == 200
    assert alice.get("/api/notes/kitchen/worktops").status_code == 200


def test_each_project_can_use_its_own_model(
    alice: TestClient, bob: TestClient, app_home: Home, llm: ScriptedLLMServer
) -> None:
    llm.models.append("big-model")
    listed = bob.get("/api/models").json()
    assert listed["models"] == ["test-model", "big-model"]
    assert listed["default"] == "test-model"

    unknown = bob.put("/api/projects/kitchen/model", json={"model": "no-such-model"})
    assert unknown.status_code == 400
    assert unknown.json()["error"] == (
        "The model server has no model 'no-such-model'; it offers: test-model, big-model. "
        "Nothing was changed."
    )
    toml = app_home.settings.projects_dir / "kitchen" / "project.toml"
    assert "model" not in toml.read_text()

    chosen = bob.put("/api/projects/kitchen/model", json={"model": "big-model"})
    assert chosen.json() == {"slug": "kitchen", "model": "big-model"}
    assert 'model = "big-model"' in toml.read_text()
    assert bob.get("/api/projects/kitchen").json()["model"] == "big-model"

    llm.reply("From the big one.")
    llm.reply("From the default one.")
    kitchen = events(bob.post("/api/channels/kitchen/chat", json={"text": "Hello?"}))
    garden = events(bob.post("/api/channels/garden/chat", json={"text": "Hello?"}))
    assert ("done", {}) in kitchen and ("done", {}) in garden
    asked = [request["model"] for request in llm.requests]
    assert asked == ["big-model", "test-model"]

    unset = bob.put("/api/projects/kitchen/model", json={"model": ""})
    assert unset.json() == {"slug": "kitchen", "model": None}
    assert "model" not in toml.read_text()


def test_a_model_cannot_be_chosen_while_the_server_is_unreachable(
    app_home: Home, dead_url: str
) -> None:
    client = signed_in("alice")
    listed = client.get("/api/models")
    assert listed.status_code == 503
    assert "Cannot reach the language model server" in listed.json()["error"]
    chosen = client.put("/api/projects/kitchen/model", json={"model": "big-model"})
    assert chosen.status_code == 503
    assert projects.get_project(app_home, "kitchen").config.model is None
