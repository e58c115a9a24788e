"""Linking Discord users to household members (CLI, one-time codes from the app) and binding
server channels to projects: real SQLite, no Discord client involved."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from conftest import Cli
from fastapi.testclient import TestClient

from charlie import projects
from charlie.adapters.web.app import create_app
from charlie.config import load_settings
from charlie.errors import Conflict, InvalidName, NotFound
from charlie.home import Home
from charlie.household import discord_links as links
from charlie.household import discord_places
from charlie.household.discord_places import Place
from charlie.users import ensure_user, set_password

ALICE_ID = "200000000000000002"
BOB_ID = "300000000000000003"


def test_cli_links_and_unlinks_a_discord_user(charlie: Cli, home: Home) -> None:
    ensure_user(home.db, "alice")
    result = charlie("users", "link-discord", "alice", ALICE_ID)
    assert result.exit_code == 0
    assert result.output == f"Linked Discord user {ALICE_ID} to alice.\n"
    found = links.user_for_discord(home.db, int(ALICE_ID))
    assert found is not None and found.name == "alice"
    assert "linked on Discord" in charlie("users", "list").output

    result = charlie("users", "unlink-discord", "alice", ALICE_ID)
    assert result.output == f"Unlinked Discord user {ALICE_ID} from alice.\n"
    assert links.user_for_discord(home.db, ALICE_ID) is None


def test_cli_explains_bad_ids_unknown_people_and_taken_ids(charlie: Cli, home: Home) -> None:
    ensure_user(home.db, "alice")
    ensure_user(home.db, "bob")
    bad = charlie("users", "link-discord", "alice", "@alice")
    assert bad.exit_code == 1
    assert bad.output.startswith("Error: '@alice' is not a Discord user id")
    assert "Copy User ID" in bad.output
    nobody = charlie("users", "link-discord", "carol", ALICE_ID)
    assert nobody.exit_code == 1 and nobody.output == "Error: There is no user named 'carol'.\n"
    assert charlie("users", "link-discord", "alice", ALICE_ID).exit_code == 0
    taken = charlie("users", "link-discord", "bob", ALICE_ID)
    assert taken.exit_code == 1
    assert taken.output == (
        f"Error: Discord user {ALICE_ID} is already linked to alice; unlink it first with "
        f"`charlie users unlink-discord alice {ALICE_ID}`.\n"
    )
    not_linked = charlie("users", "unlink-discord", "bob")
    assert not_linked.exit_code == 1
    assert not_linked.output == "Error: bob is not linked to any Discord user.\n"


def test_one_person_may_have_several_discord_accounts(home: Home) -> None:
    ensure_user(home.db, "alice")
    links.link_discord(home.db, "alice", ALICE_ID)
    links.link_discord(home.db, "alice", BOB_ID)
    links.link_discord(home.db, "alice", ALICE_ID)  # again: nothing changes
    alice = ensure_user(home.db, "alice")
    assert links.discord_ids(home.db, alice) == [ALICE_ID, BOB_ID]
    assert links.unlink_discord(home.db, "alice") == 2
    assert links.discord_ids(home.db, alice) == []


def test_a_code_links_once_and_only_before_it_expires(home: Home) -> None:
    alice = ensure_user(home.db, "alice")
    made = links.new_code(home.db, alice)
    assert re.fullmatch(r"[A-Z2-9]{4}-[A-Z2-9]{4}", made.code)
    stored = home.db.execute("SELECT code_hash FROM discord_link_codes").fetchall()
    assert len(stored) == 1 and made.code not in stored[0][0]  # only the hash is kept

    linked = links.redeem_code(home.db, made.code.lower().replace("-", " "), ALICE_ID)
    assert linked.name == "alice"
    with pytest.raises(NotFound, match="wrong or has expired"):
        links.redeem_code(home.db, made.code, BOB_ID)  # used up

    old = links.new_code(home.db, alice)
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat(timespec="milliseconds")
    home.db.execute("UPDATE discord_link_codes SET expires_at = ?", (past,))
    with pytest.raises(NotFound):
        links.redeem_code(home.db, old.code, BOB_ID)
    assert links.user_for_discord(home.db, BOB_ID) is None


def test_a_new_code_replaces_the_last_one(home: Home) -> None:
    alice = ensure_user(home.db, "alice")
    first = links.new_code(home.db, alice)
    second = links.new_code(home.db, alice)
    with pytest.raises(NotFound):
        links.redeem_code(home.db, first.code, ALICE_ID)
    assert links.redeem_code(home.db, second.code, ALICE_ID).name == "alice"


def test_guessing_codes_is_paused_after_five_tries(home: Home) -> None:
    alice = ensure_user(home.db, "alice")
    made = links.new_code(home.db, alice)
    for _ in range(links.MAX_CODE_FAILURES):
        with pytest.raises(NotFound):
            links.redeem_code(home.db, "AAAA-AAAA", BOB_ID)
    with pytest.raises(links.TooManyCodes):
        links.redeem_code(home.db, made.code, BOB_ID)  # even the right one, for a while
    assert links.redeem_code(home.db, made.code, ALICE_ID).name == "alice"  # others unaffected


def test_a_code_cannot_steal_an_id_linked_to_someone_else(home: Home) -> None:
    ensure_user(home.db, "alice")
    bob = ensure_user(home.db, "bob")
    links.link_discord(home.db, "alice", ALICE_ID)
    with pytest.raises(Conflict):
        links.redeem_code(home.db, links.new_code(home.db, bob).code, ALICE_ID)
    owner = links.user_for_discord(home.db, ALICE_ID)
    assert owner is not None and owner.name == "alice"


def test_discord_ids_are_checked() -> None:
    assert links.check_discord_id(" 200000000000000002 ") == ALICE_ID
    for bad in ("", "123", "alice#1234", "2" * 30):
        with pytest.raises(InvalidName):
            links.check_discord_id(bad)


def test_the_app_gives_the_signed_in_person_a_code(home: Home) -> None:
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", "correct horse battery")
    with TestClient(create_app(load_settings())) as client:
        assert client.post("/api/me/discord-code").status_code == 401
        client.post("/api/login", json={"name": "alice", "password": "correct horse battery"})
        refused = client.post("/api/me/discord-code")  # no CSRF token
        assert refused.status_code == 403
        client.headers["X-CSRF-Token"] = client.cookies["charlie_csrf"]
        answer = client.post("/api/me/discord-code")
    assert answer.status_code == 200
    body = answer.json()
    assert body["linked"] == 0 and body["expires_at"] > datetime.now(UTC).isoformat()
    assert links.redeem_code(home.db, body["code"], ALICE_ID).name == "alice"


def test_a_channel_is_bound_a_thread_inherits_and_a_dm_never_is(home: Home) -> None:
    alice = ensure_user(home.db, "alice")
    projects.create_project(home, "Kitchen")
    projects.create_project(home, "Garden")
    channel = Place(channel_id=10, guild_id=1)
    thread = Place(channel_id=11, guild_id=1, parent_id=10)
    assert discord_places.bound_slug(home, channel) is None
    discord_places.bind(home, channel, "kitchen", alice)
    assert discord_places.bound_slug(home, channel) == "kitchen"
    assert discord_places.bound_slug(home, thread) == "kitchen"
    discord_places.bind(home, thread, "garden", alice)
    assert discord_places.bound_slug(home, thread) == "garden"
    assert discord_places.bound_slug(home, channel) == "kitchen"
    with pytest.raises(NotFound, match="private channel"):
        discord_places.bind(home, Place(channel_id=10), "kitchen", alice)  # a DM with the same id
    assert discord_places.bound_slug(home, Place(channel_id=10)) is None
    with pytest.raises(NotFound, match="There is no project 'attic'"):
        discord_places.bind(home, channel, "attic", alice)
    assert discord_places.unbind(home, thread) == "garden"
    assert discord_places.bound_slug(home, thread) == "kitchen"
