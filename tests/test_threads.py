"""Threads and message actions over the web API, in-process with a real SQLite home and the
scripted OpenAI-compatible test double: many conversations per project and per private
channel feeding one memory; regenerate, edit and resend, alternatives, retry."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from web_support import PASSWORD, events

from charlie import conversations, projects
from charlie.conversations import private_channel, shared_channel
from charlie.home import Home
from charlie.users import ensure_user, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


@pytest.fixture
def app_home(home: Home, llm: ScriptedLLMServer) -> Home:
    for name in ("alice", "bob"):
        ensure_user(home.db, name, is_admin=name == "alice")
        set_password(home.db, name, PASSWORD)
    projects.create_project(home, "Kitchen")
    return home


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def say(client: TestClient, llm: ScriptedLLMServer, thread: int, text: str, reply: str) -> None:
    llm.reply(reply)
    response = client.post(f"/api/channels/kitchen/chat?thread={thread}", json={"text": text})
    assert response.status_code == 200, response.text
    assert "error" not in [name for name, _ in events(response)], response.text


def shown(client: TestClient, thread: int, channel: str = "kitchen") -> list[dict[str, Any]]:
    return ok(client.get(f"/api/channels/{channel}/messages?thread={thread}"))


def test_new_threads_are_listed_titled_and_separate(
    alice: TestClient, llm: ScriptedLLMServer
) -> None:
    first = ok(alice.post("/api/channels/kitchen/threads", json={}), 201)
    second = ok(alice.post("/api/channels/kitchen/threads", json={}), 201)
    assert first["id"] != second["id"] and first["title"] == "New chat"
    say(alice, llm, first["id"], "Which oak worktop finish lasts longest?", "Hardwax oil.")
    say(alice, llm, second["id"], "Paint colour for the pantry door?", "Sage green.")
    listed = ok(alice.get("/api/channels/kitchen/threads"))
    assert [t["id"] for t in listed][:2] == [second["id"], first["id"]]  # newest first
    by_id = {t["id"]: t for t in listed}
    assert by_id[first["id"]]["title"] == "Which oak worktop finish lasts longest?"
    assert by_id[first["id"]]["messages"] == 2 and by_id[first["id"]]["snippet"] == "Hardwax oil."
    assert [m["content"] for m in shown(alice, first["id"])] == [
        "Which oak worktop finish lasts longest?",
        "Hardwax oil.",
    ]
    assert all(m["thread"] == second["id"] for m in shown(alice, second["id"]))


def test_rename_archive_trash_and_restore(alice: TestClient, llm: ScriptedLLMServer) -> None:
    made = ok(alice.post("/api/channels/kitchen/threads", json={"title": "Tiles"}), 201)
    thread = made["id"]
    say(alice, llm, thread, "Matte or gloss tiles?", "Matte hides water marks.")
    renamed = ok(alice.patch(f"/api/channels/kitchen/threads/{thread}", json={"title": "Tiling"}))
    assert renamed["title"] == "Tiling"
    say(alice, llm, thread, "And the grout?", "Light grey.")
    assert ok(alice.get("/api/channels/kitchen/threads"))[0]["title"] == "Tiling"  # kept
    ok(alice.patch(f"/api/channels/kitchen/threads/{thread}", json={"archived": True}))
    assert thread not in [t["id"] for t in ok(alice.get("/api/channels/kitchen/threads"))]
    archived = ok(alice.get("/api/channels/kitchen/threads?view=archived"))
    assert [t["id"] for t in archived] == [thread]
    ok(alice.delete(f"/api/channels/kitchen/threads/{thread}"))
    assert [t["id"] for t in ok(alice.get("/api/channels/kitchen/threads?view=trash"))] == [thread]
    gone = alice.get(f"/api/channels/kitchen/messages?thread={thread}")
    assert gone.status_code == 404 and "trash" in gone.text
    # in the trash, out of recall; restored, found again
    found = ok(alice.get("/api/channels/kitchen/recall", params={"q": "grout colour"}))
    assert all(r["thread"] != thread for r in found["results"])
    ok(alice.post(f"/api/channels/kitchen/threads/{thread}/restore"), 200)
    assert len(shown(alice, thread)) == 4
    found = ok(alice.get("/api/channels/kitchen/recall", params={"q": "grout colour"}))
    assert found["results"] and found["results"][0]["thread"] == thread


def test_every_thread_feeds_the_one_project_memory(app_home: Home, llm: ScriptedLLMServer) -> None:
    kitchen = projects.get_project(app_home, "kitchen")
    first = shared_channel(app_home, kitchen)
    other = conversations.new_thread(app_home, first)
    assert other.conversation_id != first.conversation_id
    assert other.memory_key == first.memory_key  # revisions and claims keyed to one thread
    alice = ensure_user(app_home.db, "alice")
    mine = private_channel(app_home, alice)
    side = conversations.new_thread(app_home, mine)
    assert side.memory_key == mine.memory_key != first.memory_key
    # recall from any thread reads all of the project's threads, never the private ones
    conversations.add_message(app_home, other, "user", "The hob is induction.", user=alice)
    conversations.add_message(app_home, side, "user", "ALICE-SECRET present", user=alice)
    from charlie.retrieval.recall import conversations_for

    ids = {c.conversation_id for c in conversations_for(app_home, alice, first)}
    assert ids == {first.conversation_id, other.conversation_id}
    ids = {c.conversation_id for c in conversations_for(app_home, alice, side, everywhere=True)}
    assert {mine.conversation_id, side.conversation_id, other.conversation_id} <= ids


def test_a_thread_of_another_channel_is_not_found(
    alice: TestClient, bob: TestClient, app_home: Home
) -> None:
    theirs = ok(alice.post("/api/channels/private/threads", json={"title": "Mine"}), 201)["id"]
    for path in (
        f"/api/channels/private/messages?thread={theirs}",
        f"/api/channels/kitchen/messages?thread={theirs}",
    ):
        assert bob.get(path).status_code == 404
    assert (
        bob.patch(f"/api/channels/private/threads/{theirs}", json={"title": "x"}).status_code == 404
    )
    assert bob.delete(f"/api/channels/private/threads/{theirs}").status_code == 404
    listed = ok(bob.get("/api/channels/private/threads"))
    assert theirs not in [t["id"] for t in listed]


def test_regenerate_keeps_the_old_reply_as_an_alternative(
    alice: TestClient, llm: ScriptedLLMServer, app_home: Home
) -> None:
    thread = ok(alice.post("/api/channels/kitchen/threads", json={}), 201)["id"]
    say(alice, llm, thread, "Best wood for a chopping board?", "Maple.")
    reply = shown(alice, thread)[-1]
    llm.reply("End-grain walnut.")
    response = alice.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{reply['id']}/regenerate"
    )
    assert response.status_code == 200, response.text
    assert "End-grain walnut." in [
        d["message"]["content"] for n, d in events(response) if n == "reply"
    ]
    now = shown(alice, thread)
    assert [m["content"] for m in now] == ["Best wood for a chopping board?", "End-grain walnut."]
    assert now[-1]["alternatives"] == [reply["id"], now[-1]["id"]]
    # the model was asked without the old reply
    assert all("Maple." not in str(m) for m in llm.requests[-1]["messages"])
    # page back: the first answer is kept, the second set aside
    back = ok(alice.post(f"/api/channels/kitchen/threads/{thread}/messages/{reply['id']}/choose"))
    assert [m["content"] for m in back] == ["Best wood for a chopping board?", "Maple."]
    assert (
        conversations.undistilled(
            app_home, shared_channel(app_home, projects.get_project(app_home, "kitchen"), thread)
        )[-1].content
        == "Maple."
    )


def test_a_regenerated_reply_shows_none_of_charlies_markup(
    alice: TestClient, llm: ScriptedLLMServer
) -> None:
    """A new answer goes through the same filters as the first: a model that echoes the
    data fences of its prompt, or writes a tool call as text, shows neither."""
    thread = ok(alice.post("/api/channels/kitchen/threads", json={}), 201)["id"]
    say(alice, llm, thread, "Best wood for a chopping board?", "Maple.")
    reply = shown(alice, thread)[-1]
    llm.reply('<note id="kitchen/boards" title="Boards">End-grain walnut.</note> It is walnut.')
    response = alice.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{reply['id']}/regenerate"
    )
    assert response.status_code == 200, response.text
    streamed = "".join(d.get("text", "") for n, d in events(response) if n == "token")
    stored = shown(alice, thread)[-1]
    for text in (streamed, stored["content"], stored["html"]):
        assert "<note" not in text and "&lt;note" not in text, text
    assert "walnut" in stored["content"]


def test_edit_and_resend_keeps_the_later_turns_as_a_branch(
    alice: TestClient, bob: TestClient, llm: ScriptedLLMServer
) -> None:
    thread = ok(alice.post("/api/channels/kitchen/threads", json={}), 201)["id"]
    say(alice, llm, thread, "Shelves in pine?", "Pine is soft.")
    say(alice, llm, thread, "Then what screws?", "Brass.")
    first = shown(alice, thread)[0]
    assert (
        bob.post(
            f"/api/channels/kitchen/threads/{thread}/messages/{first['id']}/edit",
            json={"text": "x"},
        ).status_code
        == 403
    )  # only your own messages
    llm.reply("Oak holds screws well.")
    response = alice.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{first['id']}/edit",
        json={"text": "Shelves in oak?"},
    )
    assert response.status_code == 200, response.text
    now = shown(alice, thread)
    assert [m["content"] for m in now] == ["Shelves in oak?", "Oak holds screws well."]
    assert now[0]["alternatives"] == [first["id"], now[0]["id"]]
    back = ok(alice.post(f"/api/channels/kitchen/threads/{thread}/messages/{first['id']}/choose"))
    assert [m["content"] for m in back] == [
        "Shelves in pine?",
        "Pine is soft.",
        "Then what screws?",
        "Brass.",
    ]


def test_retry_answers_a_message_whose_turn_failed(
    alice: TestClient, llm: ScriptedLLMServer
) -> None:
    thread = ok(alice.post("/api/channels/kitchen/threads", json={}), 201)["id"]
    llm.error(500, "model crashed")
    failed = alice.post(f"/api/channels/kitchen/chat?thread={thread}", json={"text": "Sink size?"})
    assert "error" in [name for name, _ in events(failed)]
    asked = shown(alice, thread)[-1]
    assert asked["content"] == "Sink size?"
    llm.reply("A 60 cm single bowl.")
    retried = alice.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{asked['id']}/regenerate"
    )
    assert retried.status_code == 200, retried.text
    assert [m["content"] for m in shown(alice, thread)] == ["Sink size?", "A 60 cm single bowl."]
    again = alice.post(f"/api/channels/kitchen/threads/{thread}/messages/{asked['id']}/regenerate")
    assert "already has an answer" in again.text


def test_migrated_single_thread_is_the_first_thread(app_home: Home) -> None:
    kitchen = projects.get_project(app_home, "kitchen")
    channel = shared_channel(app_home, kitchen)
    alice = ensure_user(app_home.db, "alice")
    for text in ("one", "two", "three"):
        conversations.add_message(app_home, channel, "user", text, user=alice)
    rows = app_home.db.execute(
        "SELECT id, parent_id FROM messages WHERE conversation_id = ? ORDER BY id",
        (channel.conversation_id,),
    ).fetchall()
    ids = [r[0] for r in rows]
    assert [r[1] for r in rows] == [0, *ids[:-1]]  # a chain from the root
    assert shared_channel(app_home, kitchen).conversation_id == channel.conversation_id


def test_threads_from_the_command_line(charlie: Any, llm: ScriptedLLMServer, home: Home) -> None:
    ensure_user(home.db, "alice", is_admin=True)
    assert charlie("projects", "create", "Kitchen").exit_code == 0
    llm.reply("Hardwax oil.")
    assert charlie("chat", "-p", "kitchen", "-m", "Oak worktop finish?").exit_code == 0
    llm.reply("Sage green.")
    result = charlie("chat", "-p", "kitchen", "--new", "-m", "Pantry door colour?")
    assert result.exit_code == 0, result.output
    listed = [
        json.loads(line)
        for line in charlie("threads", "-p", "kitchen", "--json").stdout.splitlines()
    ]
    assert [t["title"] for t in listed] == ["Pantry door colour?", "Oak worktop finish?"]
    older = listed[1]["id"]
    llm.reply("Two coats.")
    result = charlie("chat", "-p", "kitchen", "--thread", str(older), "-m", "How many coats?")
    assert result.exit_code == 0, result.output
    shown = charlie("threads", "-p", "kitchen").stdout.splitlines()
    assert shown[0].startswith("*") and f"{older}" in shown[0] and "(4 messages)" in shown[0]
    assert charlie("threads", "-p", "kitchen", "rename", str(older), "Worktops").exit_code == 0
    assert charlie("threads", "-p", "kitchen", "rm", str(older)).exit_code == 0
    assert "Worktops" not in charlie("threads", "-p", "kitchen").stdout
    assert "Worktops" in charlie("threads", "-p", "kitchen", "--trash").stdout
    missing = charlie("chat", "-p", "kitchen", "--thread", str(older), "-m", "hello?")
    assert missing.exit_code == 1 and "trash" in missing.stderr
    assert charlie("threads", "-p", "kitchen", "restore", str(older)).exit_code == 0
    assert "Worktops" in charlie("threads", "-p", "kitchen").stdout
    both = charlie("chat", "-p", "kitchen", "--new", "--thread", "1", "-m", "x")
    assert both.exit_code == 2 and "not both" in both.stderr


def test_a_regenerate_the_model_fails_changes_nothing(
    alice: TestClient, llm: ScriptedLLMServer
) -> None:
    thread = ok(alice.post("/api/channels/kitchen/threads", json={}), 201)["id"]
    say(alice, llm, thread, "Tap height?", "Tall enough for a pot.")
    say(alice, llm, thread, "Brass or steel?", "Steel.")
    before = shown(alice, thread)
    llm.error(500, "model crashed")
    failed = alice.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{before[1]['id']}/regenerate"
    )
    assert "error" in [name for name, _ in events(failed)]
    assert shown(alice, thread) == before  # the old reply and the turns after it stay
    llm.reply("A gooseneck, 30 cm.", cut_after=2)  # cut off mid-stream
    cut = alice.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{before[1]['id']}/regenerate"
    )
    assert "error" in [name for name, _ in events(cut)]
    after = shown(alice, thread)
    assert [m["content"] for m in after] == [m["content"] for m in before]
    assert len(after[1]["alternatives"]) == 2  # the part shown is kept, as an alternative


def test_a_reply_to_a_message_set_aside_meanwhile_is_set_aside(app_home: Home) -> None:
    kitchen = projects.get_project(app_home, "kitchen")
    channel = shared_channel(app_home, kitchen)
    alice = ensure_user(app_home.db, "alice")
    asked = conversations.add_message(app_home, channel, "user", "first", user=alice)
    conversations.set_aside(app_home, channel, asked)  # an edit, while the reply streamed
    late = conversations.add_message(app_home, channel, "assistant", "late", parent_id=asked.id)
    assert late.hidden
    after = conversations.add_message(app_home, channel, "user", "next", user=alice)
    assert not after.hidden and after.parent_id != late.id
    assert [m.content for m in conversations.recent(app_home, channel, 10)] == ["next"]


def test_no_one_sets_aside_someone_elses_turn(
    alice: TestClient, bob: TestClient, llm: ScriptedLLMServer
) -> None:
    thread = ok(alice.post("/api/channels/kitchen/threads", json={}), 201)["id"]
    say(alice, llm, thread, "Shall we tile the splashback?", "Yes, metro tiles.")
    say(bob, llm, thread, "I'd rather glass.", "Glass is easy to clean.")
    first, reply = shown(alice, thread)[:2]
    edit = alice.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{first['id']}/edit", json={"text": "x"}
    )
    assert edit.status_code == 409 and "bob wrote after it" in edit.text
    again = alice.post(f"/api/channels/kitchen/threads/{thread}/messages/{reply['id']}/regenerate")
    assert again.status_code == 409
    assert len(shown(alice, thread)) == 4
    last = shown(bob, thread)[-1]  # the newest reply is anyone's to regenerate
    llm.reply("Glass, back-painted.")
    regenerated = bob.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{last['id']}/regenerate"
    )
    assert regenerated.status_code == 200


def test_choosing_an_earlier_version_never_sets_aside_someone_elses_turn(
    alice: TestClient, bob: TestClient, llm: ScriptedLLMServer
) -> None:
    """`choose` set aside bob's later turn with a 200 (issue 23); it answers 409 now, as
    regenerate and edit do."""
    thread = ok(alice.post("/api/channels/kitchen/threads", json={}), 201)["id"]
    say(alice, llm, thread, "Shall we tile the splashback?", "Yes, metro tiles.")
    first_reply = shown(alice, thread)[1]
    llm.reply("Glass would be easier to clean.")
    regenerated = alice.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{first_reply['id']}/regenerate"
    )
    assert regenerated.status_code == 200
    say(bob, llm, thread, "Glass it is, then.", "Noted: glass.")
    before = [m["content"] for m in shown(alice, thread)]
    chosen = alice.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{first_reply['id']}/choose"
    )
    assert chosen.status_code == 409, chosen.text
    assert "bob wrote after it" in chosen.json()["error"]
    assert [m["content"] for m in shown(alice, thread)] == before  # nothing set aside
    assert "Glass it is, then." in before


def test_an_imported_thread_put_in_the_trash_stays_there(app_home: Home) -> None:
    channel = shared_channel(app_home, projects.get_project(app_home, "kitchen"))
    imported = conversations.new_thread(app_home, channel, title="Old", source_id="chatgpt:x")
    conversations.trash_thread(app_home, imported)
    again = conversations.new_thread(app_home, channel, title="Old", source_id="chatgpt:x")
    assert again.conversation_id == imported.conversation_id
    assert [t.id for t in conversations.threads(app_home, channel, trash=True)] == [
        imported.conversation_id
    ]
