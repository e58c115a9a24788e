"""Personal bearer tokens: made once, stored as a hash, verified, listed and revoked by their
owner (or an administrator), from the core, the CLI and the web API."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from conftest import Cli
from fastapi.testclient import TestClient
from web_support import PASSWORD, signed_in

from charlie.adapters.cli import cli
from charlie.adapters.web.app import create_app
from charlie.adapters.web.deps import status_of
from charlie.config import load_settings
from charlie.errors import CharlieError, Forbidden, NotFound, Unauthorized
from charlie.home import Home
from charlie.household import tokens
from charlie.users import User, ensure_user, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


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


@pytest.mark.sqlite_only
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


# ---------------------------------------------------------------- the CLI


def test_the_cli_makes_a_token_and_shows_its_secret_once(
    home: Home, alice: User, charlie: Cli
) -> None:
    made = charlie("tokens", "add", "alice", "--label", "Claude Desktop", "--read-only")
    assert made.exit_code == 0, made.output
    (token,) = tokens.list_tokens(home.db)
    secret = made.output.split("\n")[2]
    assert made.output == (
        f"Made token {token.id} for alice (read-only, 'Claude Desktop'):\n\n{secret}\n\n"
        "Copy it now: it will not be shown again. An app sends it with every request:\n"
        f"  Authorization: Bearer {secret}\n"
        f"Revoke it with `charlie tokens revoke {token.id}`.\n"
    )
    assert tokens.verify(home.db, secret)[0] == alice
    listed = charlie("tokens", "list").output
    assert secret not in listed and secret[len(tokens.PREFIX) :] not in listed


def test_the_cli_refuses_a_token_for_nobody(home: Home, charlie: Cli) -> None:
    refused = CliRunner().invoke(cli, ["tokens", "add", "zed"])
    assert refused.exit_code == 1
    assert refused.output == (
        "Error: There is no user named 'zed'. Add them first with `charlie users add zed`.\n"
    )
    assert tokens.list_tokens(home.db) == []


def test_the_cli_lists_everyones_tokens_or_one_persons(
    home: Home, alice: User, bob: User, charlie: Cli
) -> None:
    assert charlie("tokens", "list").output == (
        "No tokens yet. Make one with `charlie tokens add NAME`.\n"
    )
    first, secret = tokens.create(home.db, alice, label="laptop")
    second, _ = tokens.create(home.db, bob, read_only=True)
    tokens.verify(home.db, secret)
    tokens.revoke(home.db, second.id, by=bob)
    first, second = tokens.list_tokens(home.db)[::-1]
    assert first.last_used_at and second.revoked_at

    def when(stamp: str) -> str:
        return stamp[:16].replace("T", " ")

    header = "ID\tPERSON\tLABEL\tACCESS\tCREATED\tLAST USED\tREVOKED\n"
    alice_row = (
        f"{first.id}\talice\tlaptop\tread-write\t{when(first.created_at)}\t"
        f"{when(first.last_used_at)}\t-\n"
    )
    bob_row = (
        f"{second.id}\tbob\t-\tread-only\t{when(second.created_at)}\tnever\t"
        f"{when(second.revoked_at)}\n"
    )
    assert charlie("tokens", "list").output == header + bob_row + alice_row
    assert charlie("tokens", "list", "--user", "alice").output == header + alice_row


def test_the_cli_revokes_anyones_token(home: Home, alice: User, charlie: Cli) -> None:
    token, secret = tokens.create(home.db, alice, label="phone")
    revoked = charlie("tokens", "revoke", str(token.id))
    assert revoked.output == (
        f"Revoked token {token.id} of alice (phone); apps using it are refused now.\n"
    )
    with pytest.raises(Unauthorized, match="revoked"):
        tokens.verify(home.db, secret)
    unknown = CliRunner().invoke(cli, ["tokens", "revoke", "99"])
    assert (unknown.exit_code, unknown.output) == (
        1,
        "Error: There is no token with id 99; `charlie tokens list` shows them.\n",
    )


# ---------------------------------------------------------------- the web API


@pytest.fixture
def web_home(home: Home) -> Home:
    for name in ("alice", "bob", "carol"):
        ensure_user(home.db, name, is_admin=name == "carol")
        set_password(home.db, name, PASSWORD)
    return home


@pytest.fixture
def alice_web(web_home: Home) -> Iterator[TestClient]:
    with signed_in("alice") as client:
        yield client


@pytest.fixture
def bob_web(web_home: Home) -> Iterator[TestClient]:
    with signed_in("bob") as client:
        yield client


@pytest.fixture
def carol_web(web_home: Home) -> Iterator[TestClient]:
    with signed_in("carol") as client:
        yield client


def test_a_person_makes_lists_and_revokes_their_tokens_on_the_web(
    web_home: Home, alice_web: TestClient
) -> None:
    made = alice_web.post("/api/tokens", json={"label": "Claude Desktop", "read_only": True})
    assert made.status_code == 201, made.text
    body = made.json()
    secret, token = body["secret"], body["token"]
    assert (token["user"], token["label"], token["read_only"], token["active"]) == (
        "alice",
        "Claude Desktop",
        True,
        True,
    )
    assert tokens.verify(web_home.db, secret)[0].name == "alice"
    listed = alice_web.get("/api/tokens")
    assert [t["id"] for t in listed.json()["tokens"]] == [token["id"]]
    assert secret not in listed.text and "hash" not in listed.text
    revoked = alice_web.delete(f"/api/tokens/{token['id']}")
    assert revoked.status_code == 200
    assert revoked.json()["token"]["active"] is False
    assert alice_web.get("/api/tokens").json()["tokens"][0]["revoked_at"]


def test_token_routes_need_a_session_and_csrf(web_home: Home, alice_web: TestClient) -> None:
    stranger = TestClient(create_app(load_settings()))
    assert stranger.get("/api/tokens").status_code == 401
    assert stranger.post("/api/tokens", json={}).status_code == 401
    del alice_web.headers["X-CSRF-Token"]
    assert alice_web.post("/api/tokens", json={}).status_code == 403
    assert tokens.list_tokens(web_home.db) == []


def test_bob_cannot_see_or_revoke_alices_tokens(
    web_home: Home, alice_web: TestClient, bob_web: TestClient
) -> None:
    made = alice_web.post("/api/tokens", json={"label": "alice's laptop"}).json()
    assert bob_web.get("/api/tokens").json() == {"tokens": []}
    refused = bob_web.get("/api/tokens", params={"all": "true"})
    assert refused.status_code == 403 and "laptop" not in refused.text
    refused = bob_web.delete(f"/api/tokens/{made['token']['id']}")
    assert refused.status_code == 403 and "laptop" not in refused.text
    assert tokens.verify(web_home.db, made["secret"])[0].name == "alice"


def test_an_administrator_sees_and_revokes_everyones(
    web_home: Home, alice_web: TestClient, carol_web: TestClient
) -> None:
    made = alice_web.post("/api/tokens", json={"label": "laptop"}).json()
    own = carol_web.post("/api/tokens", json={}).json()
    assert carol_web.get("/api/tokens").json()["tokens"] == [own["token"]]
    everyone = carol_web.get("/api/tokens", params={"all": "true"}).json()["tokens"]
    assert [t["user"] for t in everyone] == ["carol", "alice"]
    assert carol_web.delete(f"/api/tokens/{made['token']['id']}").status_code == 200
    assert alice_web.get("/api/tokens").json()["tokens"][0]["active"] is False


def test_an_unknown_token_id_and_a_long_label_are_told(alice_web: TestClient) -> None:
    missing = alice_web.delete("/api/tokens/999")
    assert missing.status_code == 404 and "no token with id 999" in missing.json()["error"]
    long = alice_web.post("/api/tokens", json={"label": "x" * 81})
    assert long.status_code == 400 and "at most 80 characters" in long.json()["error"]


def test_an_invalid_token_maps_to_401() -> None:
    assert status_of(Unauthorized("This token is not valid")) == 401
