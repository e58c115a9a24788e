"""Pinned notes: bounded in number and in the prompt, and a way to take them out again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from web_support import PASSWORD, signed_in

from charlie import conversations
from charlie.conversations import Channel, shared_channel
from charlie.errors import Conflict, NotFound
from charlie.home import Home
from charlie.notes import files as notes
from charlie.projects import Project, create_project
from charlie.retrieval import suggestions
from charlie.users import User, ensure_user, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


@pytest.fixture
def kitchen(home: Home) -> Project:
    made = create_project(home, "Kitchen")
    for letter in "abcdefg":
        notes.create_note(made, letter, letter * 4000)
    return made


@pytest.fixture
def alice(home: Home) -> User:
    user = ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    return user


def offer(home: Home, channel: Channel, user: User, note: str) -> int:
    """A suggestion of `note` to `user` after a message in `channel`, as `offer` stores it."""
    message = conversations.add_message(home, channel, "user", "hi", user=user)
    cursor = home.db.execute(
        "INSERT INTO suggestions (message_id, conversation_id, user_id, note, title, why, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (message.id, channel.conversation_id, user.id, note, note, "related", "2026-01-01"),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def pin(home: Home, channel: Channel, user: User, note: str) -> str:
    return suggestions.accept(home, user, offer(home, channel, user, note))


def test_pins_are_bounded_and_can_be_taken_out(home: Home, kitchen: Project, alice: User) -> None:
    channel = shared_channel(home, kitchen)
    for letter in "abcde":
        pin(home, channel, alice, f"kitchen/{letter}")
    with pytest.raises(Conflict) as refused:
        pin(home, channel, alice, "kitchen/f")
    assert str(refused.value) == (
        "5 notes are pinned into this conversation already (kitchen/a, kitchen/b, kitchen/c, "
        "kitchen/d, kitchen/e); unpin one first, then accept kitchen/f."
    )
    suggestions.unpin(home, channel, "kitchen/a")
    assert pin(home, channel, alice, "kitchen/f") == "kitchen/f"
    assert [key for key, _ in suggestions.pins(home, channel)][-1] == "kitchen/f"
    with pytest.raises(NotFound, match="kitchen/a is not pinned"):
        suggestions.unpin(home, channel, "kitchen/a")


def test_pinned_notes_are_bounded_in_the_prompt(home: Home, kitchen: Project, alice: User) -> None:
    channel = shared_channel(home, kitchen)
    for letter in "abc":
        pin(home, channel, alice, f"kitchen/{letter}")
    text = suggestions.pinned_text(home, channel)
    assert text.count("a") >= suggestions.PIN_CHARS  # the first note, cut to PIN_CHARS
    assert "a" * (suggestions.PIN_CHARS + 1) not in text
    body_chars = sum(text.count(letter * 100) * 100 for letter in "abc")
    assert body_chars <= suggestions.PINNED_CHARS
    assert '<note id="kitchen/c">\n(left out: the pinned notes are long)\n</note>' in text


def test_suggestion_ids_out_of_range_are_not_found(home: Home, alice: User) -> None:
    with pytest.raises(NotFound):
        suggestions.accept(home, alice, 2**70)
    with pytest.raises(NotFound):
        suggestions.dismiss(home, alice, -1)


@pytest.fixture
def client(home: Home, kitchen: Project, alice: User) -> Iterator[TestClient]:
    with signed_in("alice") as made:
        yield made


def test_unpin_over_the_api(home: Home, kitchen: Project, alice: User, client: TestClient) -> None:
    channel = shared_channel(home, kitchen)
    pin(home, channel, alice, "kitchen/a")
    pin(home, channel, alice, "kitchen/b")
    listed = client.get("/api/channels/kitchen/pins").json()
    assert [p["note"] for p in listed] == ["kitchen/a", "kitchen/b"]
    gone = client.delete("/api/channels/kitchen/pins/kitchen/a")
    assert gone.status_code == 200 and gone.json() == {"ok": True, "pins": ["kitchen/b"]}
    again = client.delete("/api/channels/kitchen/pins/kitchen/a")
    assert again.status_code == 404 and "is not pinned" in again.json()["error"]
    assert client.delete("/api/channels/private/pins/kitchen/b").status_code == 404
    full = client.post(f"/api/suggestions/{2**70}/accept")
    assert full.status_code in (400, 404)


def test_unpin_in_the_chat_repl(home: Home, kitchen: Project, alice: User, charlie: object) -> None:
    channel = shared_channel(home, kitchen)
    pin(home, channel, alice, "kitchen/a")
    result = charlie(  # type: ignore[operator]
        "chat", "-p", "kitchen", input="/unpin kitchen/a\n/unpin kitchen/a\n/pins\n"
    )
    assert result.exit_code == 0, result.output
    assert "Unpinned kitchen/a." in result.stdout
    assert "Error: kitchen/a is not pinned into" in result.stderr
    assert suggestions.pins(home, channel) == []
