from pathlib import Path
from typing import Any

import pytest
from llm_double import ScriptedLLMServer
from support.distilling import distill_answer, is_distillation, naming_answer
from support.images import tiny_png

from charlie import conversations
from charlie.chat import turn as chat
from charlie.conversations import private_channel, shared_channel
from charlie.errors import CharlieError, LLMUnavailable
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.projects import create_project
from charlie.users import ensure_user

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


def client(server: ScriptedLLMServer) -> LLMClient:
    return LLMClient(server.base_url, "test-model", retries=0)


def test_reply_streams_and_both_messages_are_stored(home: Home, llm: ScriptedLLMServer) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen", style="Answer in haiku."))
    alice = ensure_user(home.db, "alice")
    llm.reply("<think>Let me think about oak.</think>Oak is a fine choice for worktops.")
    events = list(chat.turn(home, client(llm), channel, alice, "Oak or marble?"))
    tokens = [e.text for e in events if isinstance(e, chat.Token)]
    assert len(tokens) > 2
    assert "".join(tokens) == "Oak is a fine choice for worktops."
    reply = next(e for e in events if isinstance(e, chat.Reply))
    assert reply.message.content == "Oak is a fine choice for worktops."
    stored = conversations.recent(home, channel, 10)
    assert [(m.role, m.speaker, m.content) for m in stored] == [
        ("user", "alice", "Oak or marble?"),
        ("assistant", "Charlie", "Oak is a fine choice for worktops."),
    ]
    system = llm.requests[0]["messages"][0]["content"]
    assert "Answer in haiku." in system and '"Kitchen"' in system and "<memory>" in system


def test_context_is_memory_plus_messages_since_last_distillation(
    home: Home, llm: ScriptedLLMServer
) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen", distill_every=4))
    alice = ensure_user(home.db, "alice")
    llm.default = lambda req: (
        naming_answer(req, summary="SUMMARY-MARKER", decisions=("DECISION-MARKER",))
        if is_distillation(req)
        else "Reply."
    )
    for number in range(1, 31):
        list(chat.turn(home, client(llm), channel, alice, f"Message number {number}."))
    last = [r for r in llm.requests if not is_distillation(r)][-1]["messages"]
    contents = [m["content"] for m in last[1:]]
    assert "SUMMARY-MARKER" in last[0]["content"] and "DECISION-MARKER" in last[0]["content"]
    assert contents[-1] == "Message number 30."
    assert "Message number 1." not in contents
    assert len(contents) <= 4 + 1  # undistilled messages (< cadence) plus the new one


def test_llm_down_keeps_the_message_and_says_what_to_do(home: Home, dead_url: str) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    alice = ensure_user(home.db, "alice")
    with pytest.raises(LLMUnavailable) as err:
        list(chat.turn(home, LLMClient(dead_url, "m", retries=0), channel, alice, "Still here?"))
    assert dead_url in str(err.value) and "Your message is saved" in str(err.value)
    assert [m.content for m in conversations.recent(home, channel, 5)] == ["Still here?"]


def test_unanswered_message_is_sent_with_the_next_one(home: Home, llm: ScriptedLLMServer) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    alice = ensure_user(home.db, "alice")
    llm.error(400, "context too long")
    with pytest.raises(CharlieError):
        list(chat.turn(home, client(llm), channel, alice, "First, unanswered."))
    llm.reply("Answering both.")
    list(chat.turn(home, client(llm), channel, alice, "Second."))
    sent = [m["content"] for m in llm.requests[-1]["messages"][1:]]
    assert sent == ["First, unanswered.", "Second."]


def test_image_goes_with_the_current_message_only(
    home: Home, llm: ScriptedLLMServer, tmp_path: Path
) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    alice = ensure_user(home.db, "alice")
    image = tiny_png(tmp_path / "tile.png")
    llm.reply("A green tile.")
    list(chat.turn(home, client(llm), channel, alice, "What colour?", [image]))
    parts = llm.requests[0]["messages"][-1]["content"]
    assert parts[0] == {"type": "text", "text": "What colour?"}
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    llm.reply("Yes.")
    list(chat.turn(home, client(llm), channel, alice, "Sure?"))
    earlier = llm.requests[1]["messages"][1]["content"]
    assert earlier == "What colour?\n[1 image(s) were attached]"


def test_private_channel_writes_no_markdown_and_is_its_owners_alone(
    home: Home, llm: ScriptedLLMServer
) -> None:
    alice, bob = ensure_user(home.db, "alice"), ensure_user(home.db, "bob")
    shared = shared_channel(home, create_project(home, "Kitchen", distill_every=2))
    llm.reply("Shared reply.")
    list(chat.turn(home, client(llm), shared, alice, "Shared words."))
    mine = private_channel(home, alice)
    llm.reply("Your secret is safe.")
    llm.reply(distill_answer(summary="PRIVATE-SUMMARY", quotes=(("alice", "SECRET-GIFT"),)))
    list(chat.turn(home, client(llm), mine, alice, "Buying a SECRET-GIFT for bob."))

    files = [p for p in home.settings.home.rglob("*") if p.is_file() and ".db" not in p.name]
    assert any(p.name == "memory.md" for p in files)
    for path in files:
        data = path.read_bytes()
        assert b"SECRET-GIFT" not in data and b"PRIVATE-SUMMARY" not in data, path

    with pytest.raises(CharlieError, match="only be used by its owner"):
        list(chat.turn(home, client(llm), mine, bob, "Let me in."))
    bobs = private_channel(home, bob)
    assert bobs.conversation_id != mine.conversation_id
    assert conversations.recent(home, bobs, 50) == []
    llm.reply("Hello bob.")
    list(chat.turn(home, client(llm), bobs, bob, "Hi."))
    everything_sent = str(llm.requests[-1])
    assert "SECRET-GIFT" not in everything_sent and "PRIVATE-SUMMARY" not in everything_sent


def test_multiple_speakers_in_a_shared_project_are_named(
    home: Home, llm: ScriptedLLMServer
) -> None:
    channel = shared_channel(home, create_project(home, "Trip"))
    alice, bob = ensure_user(home.db, "alice"), ensure_user(home.db, "bob")
    llm.reply("Ok.")
    list(chat.turn(home, client(llm), channel, alice, "Oslo?"))
    llm.reply("Ok.")
    list(chat.turn(home, client(llm), channel, bob, "Bergen!"))
    sent: list[Any] = [m["content"] for m in llm.requests[-1]["messages"][1:]]
    assert sent == ["alice: Oslo?", "Ok.", "bob: Bergen!"]
    assert "talking with bob" in llm.requests[-1]["messages"][0]["content"]


def test_empty_message_is_refused_and_not_stored(home: Home, llm: ScriptedLLMServer) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    with pytest.raises(CharlieError, match="empty"):
        list(chat.turn(home, client(llm), channel, ensure_user(home.db, "alice"), "   "))
    assert conversations.count_messages(home, channel) == 0
