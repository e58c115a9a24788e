"""Personal bearer tokens: made once, stored as a hash, verified, listed and revoked by their
owner (or an administrator), from the core, the CLI and the web API."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from charlie import tokens
from charlie.errors import CharlieError, Forbidden, NotFound, Unauthorized
from charlie.home import Home
from charlie.users import User, ensure_user


@pytest.fixture
def alice(home: Home) -> User:
    return ensure_user(home.db, "alice")


@pytest.fixture
def bob(home: Home) -> User:
    return ensure_user(home.db, "bob")


@pytest.fixture
def admin(home: Home) -> User:
    return ensure_user(home.db, "carol", is_admin=True)


def stored(db: sqlite3.Connection) -> list[tuple[object, ...]]:
    return [tuple(row) for row in db.execute("SELECT * FROM api_tokens")]


# ---------------------------------------------------------------- the core


def test_a_new_token_verifies_as_its_owner(home: Home, alice: User) -> None:
    token, secret = tokens.create(home.db, alice, label="Claude Desktop", read_only=True)
    assert secret.startswith(tokens.PREFIX) and len(secret) == 47
    assert (token.user, token.label, token.read_only, token.active) == (
        "alice",
        "Claude Desktop",
        True,
        True,
    )
    assert token.last_used_at is None
    user, verified = tokens.verify(home.db, secret)
    assert user == alice
    assert verified.id == token.id and verified.read_only


def test_only_the_hash_is_stored(home: Home, alice: User) -> None:
    _, secret = tokens.create(home.db, alice)
    (row,) = stored(home.db)
    assert hashlib.sha256(secret.encode()).hexdigest() in row
    assert not any(secret in str(value) for value in row)
    assert not any(secret[len(tokens.PREFIX) :] in str(value) for value in row)


def test_every_secret_is_new(home: Home, alice: User) -> None:
    secrets = {tokens.create(home.db, alice)[1] for _ in range(20)}
    assert len(secrets) == 20


@pytest.mark.parametrize(
    "secret",
    [
        "",
        "chk_",
        "not-a-token",
        "chk_" + "A" * 43,  # well-formed, never given out
        "chk_" + "é" * 43,
        "Bearer chk_" + "A" * 43,
    ],
)
def test_an_unknown_or_malformed_token_is_refused_clearly(
    home: Home, alice: User, secret: str
) -> None:
    tokens.create(home.db, alice)
    with pytest.raises(Unauthorized, match="This token is not valid") as refused:
        tokens.verify(home.db, secret)
    assert "charlie tokens add NAME" in str(refused.value)


def test_a_token_that_differs_by_one_character_is_refused(home: Home, alice: User) -> None:
    _, secret = tokens.create(home.db, alice)
    other = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    with pytest.raises(Unauthorized, match="not valid"):
        tokens.verify(home.db, other)


def test_a_revoked_token_is_refused_with_its_date(home: Home, alice: User) -> None:
    token, secret = tokens.create(home.db, alice)
    revoked = tokens.revoke(home.db, token.id, by=alice)
    assert not revoked.active and revoked.revoked_at is not None
    today = datetime.now(UTC).date().isoformat()
    with pytest.raises(Unauthorized, match=f"This token was revoked on {today}"):
        tokens.verify(home.db, secret)


def test_revoking_twice_keeps_the_first_date(home: Home, alice: User) -> None:
    token, _ = tokens.create(home.db, alice)
    first = tokens.revoke(home.db, token.id, by=alice)
    assert tokens.revoke(home.db, token.id, by=alice).revoked_at == first.revoked_at


def test_last_used_is_kept_at_most_once_a_minute(home: Home, alice: User) -> None:
    token, secret = tokens.create(home.db, alice)
    writes: list[str] = []
    home.db.set_trace_callback(lambda s: writes.append(s) if s.startswith("UPDATE") else None)
    try:
        tokens.verify(home.db, secret)
        first = tokens.list_tokens(home.db)[0].last_used_at
        assert first is not None
        tokens.verify(home.db, secret)
        assert len(writes) == 1  # the second use, a moment later, writes nothing
        long_ago = (datetime.now(UTC) - timedelta(minutes=2)).isoformat(timespec="milliseconds")
        home.db.execute("UPDATE api_tokens SET last_used_at = ? WHERE id = ?", (long_ago, token.id))
        writes.clear()
        tokens.verify(home.db, secret)
        assert len(writes) == 1
    finally:
        home.db.set_trace_callback(None)
    assert (tokens.list_tokens(home.db)[0].last_used_at or "") > long_ago


def test_lists_are_newest_first_and_per_person(home: Home, alice: User, bob: User) -> None:
    first, _ = tokens.create(home.db, alice, label="one")
    second, _ = tokens.create(home.db, bob, label="two")
    third, _ = tokens.create(home.db, alice, label="three")
    assert [t.id for t in tokens.list_tokens(home.db, alice)] == [third.id, first.id]
    assert [t.id for t in tokens.list_tokens(home.db, bob)] == [second.id]
    assert [t.id for t in tokens.list_tokens(home.db)] == [third.id, second.id, first.id]


def test_someone_elses_token_cannot_be_revoked(home: Home, alice: User, bob: User) -> None:
    token, secret = tokens.create(home.db, alice, label="private laptop")
    with pytest.raises(Forbidden) as refused:
        tokens.revoke(home.db, token.id, by=bob)
    assert "private laptop" not in str(refused.value) and "alice" not in str(refused.value)
    assert tokens.verify(home.db, secret)[0] == alice  # still works


def test_an_administrator_can_revoke_anyones(home: Home, alice: User, admin: User) -> None:
    token, secret = tokens.create(home.db, alice)
    tokens.revoke(home.db, token.id, by=admin)
    with pytest.raises(Unauthorized, match="revoked"):
        tokens.verify(home.db, secret)


def test_an_unknown_id_is_not_found(home: Home, admin: User) -> None:
    with pytest.raises(NotFound, match="no token with id 42"):
        tokens.revoke(home.db, 42, by=admin)


def test_a_label_is_one_line_and_not_too_long(home: Home, alice: User) -> None:
    token, _ = tokens.create(home.db, alice, label="  my\nphone \t app ")
    assert token.label == "my phone app"
    with pytest.raises(CharlieError, match="at most 80 characters"):
        tokens.create(home.db, alice, label="x" * 81)
    assert len(tokens.list_tokens(home.db)) == 1
