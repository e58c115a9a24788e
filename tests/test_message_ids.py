"""Message ids and the chains they form: an id is never given twice (forgetting the newest
turn leaves its ids unused, so what comes next is still distilled); nothing is stored after a
forgotten message; and every walk over a thread's branches ends — on a database damaged by
hand too, with a clear error instead of a hang."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from support.distilling import distill_answer, is_distillation
from web_support import PASSWORD, signed_in

from charlie import conversations
from charlie.chat import turn as chat
from charlie.conversations import Channel, shared_channel
from charlie.errors import BrokenThread, MessageGone
from charlie.home import Home
from charlie.household import forget
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.projects import create_project
from charlie.users import User, ensure_user, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)

WALK_SECONDS = 10.0  # a walk that has not ended by then is taken to loop forever


@pytest.fixture
def me(home: Home) -> User:
    """alice, an administrator who can sign in."""
    user = ensure_user(home.db, "alice", is_admin=True)
    set_password(home.db, "alice", PASSWORD)
    return user


@pytest.fixture
def kitchen(home: Home, me: User) -> Channel:
    return shared_channel(home, create_project(home, "Kitchen"))


def ids(home: Home) -> list[int]:
    return [int(r[0]) for r in home.db.execute("SELECT id FROM messages ORDER BY id")]


def send(home: Home, client: LLMClient, channel: Channel, user: User, text: str) -> None:
    events = list(chat.turn(home, client, channel, user, text, distill_after=False))
    assert any(isinstance(e, chat.Reply) for e in events)


def test_the_newest_turn_forgotten_its_ids_are_not_given_again_and_what_follows_is_distilled(
    home: Home, me: User, kitchen: Channel, llm: ScriptedLLMServer, client: LLMClient
) -> None:
    def respond(request: dict[str, Any]) -> str:
        return distill_answer() if is_distillation(request) else "Noted."

    llm.default = respond
    send(home, client, kitchen, me, "Oak worktops, please.")
    send(home, client, kitchen, me, "The gate code is 5512.")
    distill.distill(home, kitchen, client)
    used = ids(home)
    assert conversations.distilled_upto(home, kitchen) == max(used)
    newest = conversations.recent(home, kitchen, 2)[0]
    forget.forget(home, kitchen, me, newest.id)  # the newest turn: message and answer

    send(home, client, kitchen, me, "Marble for the island.")
    fresh = [i for i in ids(home) if i not in used]
    assert len(fresh) == 2 and min(fresh) > max(used)  # above every id ever given
    assert [m.id for m in conversations.undistilled(home, kitchen)] == fresh
    result = distill.distill(home, kitchen, client)  # not "no new messages to distill"
    assert result.revision_id is not None
    assert conversations.distilled_upto(home, kitchen) == max(fresh)
    first_row = home.db.execute(
        "SELECT first_message_id, last_message_id FROM distillations ORDER BY id LIMIT 1"
    ).fetchone()
    assert first_row[1] == max(used) and first_row[1] not in ids(home)  # names no new message


def test_nothing_is_stored_after_a_forgotten_message(
    home: Home, me: User, kitchen: Channel
) -> None:
    asked = conversations.add_message(home, kitchen, "user", "The gate code is 5512.", user=me)
    forget.forget(home, kitchen, me, asked.id)
    with pytest.raises(MessageGone, match=f"Message {asked.id} was forgotten meanwhile"):
        conversations.add_message(home, kitchen, "assistant", "Noted: 5512.", parent_id=asked.id)
    assert ids(home) == []
    later = conversations.add_message(home, kitchen, "user", "Tiles?", user=me)
    assert later.id > asked.id and later.parent_id == 0


def test_a_reply_stored_while_forgetting_waited_goes_with_its_message(
    home: Home, me: User, kitchen: Channel
) -> None:
    asked = conversations.add_message(home, kitchen, "user", "The gate code is 5512.", user=me)
    taken = forget.planned(home, kitchen, me, asked.id)
    assert [m.id for m in taken] == [asked.id]  # no answer yet when it was planned
    conversations.add_message(home, kitchen, "assistant", "Noted: 5512.", parent_id=asked.id)
    done = forget.forget_messages_of(home, kitchen, me, taken)
    assert done.messages == 2 and ids(home) == []


def test_forgetting_one_message_only_keeps_an_answer_stored_meanwhile(
    home: Home, me: User, kitchen: Channel
) -> None:
    asked = conversations.add_message(home, kitchen, "user", "Oak or marble?", user=me)
    taken = forget.planned(home, kitchen, me, asked.id, only=True)
    reply = conversations.add_message(home, kitchen, "assistant", "Oak.", parent_id=asked.id)
    assert forget.forget_messages_of(home, kitchen, me, taken, answers=False).messages == 1
    assert ids(home) == [reply.id]


# ---------------------------------------------------------------- a damaged database


def branched(home: Home, channel: Channel, me: User) -> tuple[int, int, int]:
    """A question, its reply, and a regenerated reply beside it (an alternative)."""
    asked = conversations.add_message(home, channel, "user", "Oak or marble?", user=me)
    first = conversations.add_message(home, channel, "assistant", "Oak.", parent_id=asked.id)
    second = conversations.add_message(
        home, channel, "assistant", "Marble.", parent_id=asked.id, replacing=first
    )
    return asked.id, first.id, second.id


def corrupt(home: Home, *changes: tuple[int, int]) -> None:
    """Set message parents by hand, past the schema's guard, as a hand edit could (in
    PostgreSQL, whose checks cannot be turned off, the guard is dropped from this test's
    own database)."""
    if not isinstance(home.db, sqlite3.Connection):
        home.db.execute("ALTER TABLE messages DROP CONSTRAINT messages_check")
        for message_id, parent in changes:
            home.db.execute("UPDATE messages SET parent_id = ? WHERE id = ?", (parent, message_id))
        return
    home.db.execute("PRAGMA ignore_check_constraints = ON")
    try:
        for message_id, parent in changes:
            home.db.execute("UPDATE messages SET parent_id = ? WHERE id = ?", (parent, message_id))
    finally:
        home.db.execute("PRAGMA ignore_check_constraints = OFF")


def ends(work: Callable[[], object]) -> BaseException | None:
    """Run `work` and return what it raised; fail if it has not ended in WALK_SECONDS."""
    outcome: dict[str, BaseException | None] = {}

    def run() -> None:
        try:
            work()
            outcome["raised"] = None
        except BaseException as exc:  # handed to the test, which asserts on it
            outcome["raised"] = exc

    walker = threading.Thread(target=run, daemon=True)
    walker.start()
    walker.join(WALK_SECONDS)
    assert not walker.is_alive(), "the walk over the message chain did not end"
    return outcome["raised"]


def test_the_schema_refuses_a_message_that_follows_itself_or_a_later_one(
    home: Home, me: User, kitchen: Channel
) -> None:
    _, first, _ = branched(home, kitchen, me)
    for parent in (first, first + 1):
        with pytest.raises(sqlite3.IntegrityError, match=r"(?i)check"):
            home.db.execute("UPDATE messages SET parent_id = ? WHERE id = ?", (parent, first))
    with pytest.raises(sqlite3.IntegrityError, match=r"(?i)check"):
        home.db.execute(
            "INSERT INTO messages (id, conversation_id, private, role, speaker, content, "
            "created_at, parent_id) VALUES (100, ?, 0, 'user', 'alice', 'x', '2026-01-01', 100)",
            (kitchen.conversation_id,),
        )


def test_choosing_a_reply_that_follows_itself_ends_with_a_clear_error(
    home: Home, me: User, kitchen: Channel
) -> None:
    _, _, second = branched(home, kitchen, me)
    corrupt(home, (second, second))
    raised = ends(lambda: conversations.choose(home, kitchen, second))
    assert isinstance(raised, BrokenThread)
    assert f"Message {second} follows itself or a later message" in str(raised)
    assert str(home.settings.db_path) in str(raised)
    assert not home.db.in_transaction  # the write lock is given back
    conversations.add_message(home, kitchen, "user", "Still writable?", user=me)


def test_every_walk_over_a_loop_of_two_messages_ends(
    home: Home, me: User, kitchen: Channel
) -> None:
    asked, _, _ = branched(home, kitchen, me)
    later = conversations.add_message(home, kitchen, "user", "And the taps?", user=me)
    corrupt(home, (asked, later.id), (later.id, asked))  # each follows the other
    message = conversations.get_message(home, kitchen, asked)
    walks: list[Callable[[], object]] = [
        lambda: conversations.choose(home, kitchen, later.id),  # down: later -> asked -> …
        lambda: conversations.set_aside(home, kitchen, message),  # all that follows asked
        lambda: conversations.others_after(home, message, me),
        lambda: conversations.add_message(  # an edit sets aside what followed the message
            home, kitchen, "user", "Walnut?", user=me, parent_id=later.id, replacing=message
        ),
    ]
    for walk in walks:
        assert isinstance(ends(walk), BrokenThread)
    assert not home.db.in_transaction
    assert [m.content for m in conversations.recent(home, kitchen, 10)] == [
        "Oak or marble?",
        "Marble.",
        "And the taps?",
    ]  # nothing was changed, nothing stored


def test_the_app_answers_a_clear_error_when_a_thread_loops(
    home: Home, me: User, kitchen: Channel, llm: ScriptedLLMServer
) -> None:
    _, _, second = branched(home, kitchen, me)
    corrupt(home, (second, second))
    client: TestClient = signed_in("alice")
    path = f"/api/channels/kitchen/threads/{kitchen.conversation_id}/messages/{second}/choose"
    response: dict[str, Any] = {}
    assert ends(lambda: response.setdefault("r", client.post(path))) is None
    assert response["r"].status_code == 500
    assert response["r"].json()["kind"] == "BrokenThread"
    assert f"Message {second} follows itself" in response["r"].json()["error"]
    assert client.post("/api/login", json={"name": "alice", "password": PASSWORD}).is_success
