"""PostgreSQL as the store of charlie.db's rows (`CHARLIE_DATABASE_URL`): the statements
Charlie writes for SQLite, translated; a real server (tests/support/postgres.py) for the
rest — write transactions that take turns across connections, a distillation claimed once
by two processes' homes racing, a server that does not answer, and what `charlie status`
says. The storage, retrieval, forget and privacy tests run on both stores besides
(the `both_stores` mark: each runs once a store, `[sqlite]` and `[postgres]`)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Cli, postgres_url
from support.leaks import places_holding

from charlie import conversations, db, projects, store, users
from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.errors import Conflict, DatabaseBusy, UnstorableText
from charlie.home import Home
from charlie.household import forget, tokens
from charlie.memory import distill
from charlie.retrieval import recall
from charlie.store.postgres import translate

TABLES = frozenset({"users", "messages"})


def sql(text: str) -> str:
    return translate(text, TABLES).sql


def test_parameters_strings_and_percent_signs_are_psycopgs() -> None:
    assert sql("SELECT * FROM users WHERE id = ? AND name = ?") == (
        "SELECT * FROM users WHERE id = %s AND name = %s"
    )
    named = translate("SELECT :now - julianday(at) FROM usage_events WHERE user_id = :user", TABLES)
    assert named.named and named.sql == (
        "SELECT %(now)s - julianday(at) FROM usage_events WHERE user_id = %(user)s"
    )
    # a ? or :word inside a string stays text; every % is doubled, in strings or not
    assert sql("SELECT 'a?b :c 10%' || ? FROM users WHERE id % 2 = 0") == (
        "SELECT 'a?b :c 10%%' || %s FROM users WHERE id %% 2 = 0"
    )


def test_sqlites_own_words_become_postgresqls() -> None:
    assert (
        sql("SELECT ifnull(max(id), 0) FROM messages")
        == "SELECT coalesce(max(id), 0) FROM messages"
    )
    assert sql("UPDATE t SET n = max(n, ?) WHERE m = min(a, b)") == (
        "UPDATE t SET n = GREATEST(n, %s) WHERE m = LEAST(a, b)"
    )
    assert sql("SELECT max(id) FROM t WHERE name LIKE ?") == (
        "SELECT max(id) FROM t WHERE name ILIKE %s"  # SQLite's LIKE ignores case
    )
    assert sql("SELECT 1 FROM t WHERE owner_id IS ? AND other IS NOT ?") == (
        "SELECT 1 FROM t WHERE owner_id IS NOT DISTINCT FROM %s AND other IS DISTINCT FROM %s"
    )
    assert sql("SELECT id FROM t WHERE id IN () OR id NOT IN ()") == (
        "SELECT id FROM t WHERE id = ANY ('{}') OR id <> ALL ('{}')"
    )


def test_an_insert_returns_its_id_and_ignoring_is_on_conflict() -> None:
    made = translate("INSERT INTO users (name) VALUES (?)", TABLES)
    assert made.sql == "INSERT INTO users (name) VALUES (%s) RETURNING id" and made.returns_id
    ignored = translate("INSERT OR IGNORE INTO messages (id, content) VALUES (?, ?)", TABLES)
    assert ignored.sql == (
        "INSERT INTO messages (id, content) VALUES (%s, %s) ON CONFLICT DO NOTHING RETURNING id"
    )
    assert ignored.sets_id  # an id given: the table's counter is moved past it
    pinned = translate("INSERT OR IGNORE INTO pins (note) VALUES (?)", TABLES)
    assert pinned.sql == "INSERT INTO pins (note) VALUES (%s) ON CONFLICT DO NOTHING"
    with pytest.raises(Exception, match="INSERT OR REPLACE"):
        translate("INSERT OR REPLACE INTO pins (note) VALUES (?)", TABLES)


def test_text_with_a_nul_character_is_refused_plainly_on_postgresql(pg_home: Home) -> None:
    """SQLite keeps a NUL character in text; PostgreSQL cannot: the write is refused with a
    sentence saying so, and nothing of it is stored."""
    home = pg_home
    alice = users.add_user(home.db, "alice", None)
    kitchen = conversations.shared_channel(home, projects.create_project(home, "Kitchen"))
    with pytest.raises(UnstorableText, match=r"NUL character .* PostgreSQL cannot store"):
        conversations.add_message(home, kitchen, "user", "pasted \x00 junk", user=alice)
    assert conversations.recent(home, kitchen, 5) == []
    assert users.find_user(home.db, "alice\x00") is None  # a read: no one, as in SQLite


def test_a_url_that_cannot_be_read_is_said_plainly_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cli = Cli()
    for url in ("postgresql://bob:s3cr3t%PW@/db?host=/nowhere", "postgresql://bob@/db?foo=1"):
        monkeypatch.setenv("CHARLIE_DATABASE_URL", url)
        result = cli("status")
        assert result.exit_code == 1
        assert "could not be read as a database address" in result.output
        assert "s3cr3t" not in result.output and "Traceback" not in result.output


def test_a_url_is_shown_without_its_password() -> None:
    assert store.shown("postgresql://bob@/db?host=/tmp/s&password=s3cr3t") == (
        "postgresql://bob@/db?host=/tmp/s&password=***"
    )
    assert store.shown("postgresql://charlie:s3cret@db.home.arpa:5432/charlie") == (
        "postgresql://charlie:***@db.home.arpa:5432/charlie"
    )
    assert (
        store.shown("postgresql://charlie@/x?host=/tmp/s") == "postgresql://charlie@/x?host=/tmp/s"
    )


@pytest.fixture
def pg_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    monkeypatch.setenv("CHARLIE_DATABASE_URL", postgres_url())
    with Home.open(load_settings()) as home:
        yield home


def test_rows_read_by_position_or_name_and_ids_never_given_twice(pg_home: Home) -> None:
    home = pg_home
    alice = users.add_user(home.db, "Alice", "correct horse battery")
    assert users.get_user(home.db, "ALICE") == alice  # names compared without case
    with pytest.raises(Conflict):
        users.add_user(home.db, "alice", "correct horse battery")
    channel = conversations.shared_channel(home, projects.create_project(home, "Kitchen"))
    first = conversations.add_message(home, channel, "user", "Oak or marble?", user=alice)
    row = home.db.execute("SELECT id, content FROM messages WHERE id = ?", (first.id,)).fetchone()
    assert row[0] == row["id"] == first.id and dict(row) == {
        "id": first.id,
        "content": "Oak or marble?",
    }
    home.db.execute("DELETE FROM messages WHERE id = ?", (first.id,))
    second = conversations.add_message(home, channel, "user", "Marble.", user=alice)
    assert second.id > first.id
    assert not (home.settings.home / "charlie.db").exists()  # nothing of it went to SQLite


def test_write_transactions_take_turns_across_connections(pg_home: Home) -> None:
    """`BEGIN IMMEDIATE` holds the database's one write lock, as SQLite's file lock does:
    a second writer waits until the first commits."""
    one, other = pg_home, Home.open(pg_home.settings)
    one.db.execute("BEGIN IMMEDIATE")
    began: list[float] = []

    def second() -> None:
        other.db.execute("BEGIN IMMEDIATE")
        began.append(time.monotonic())
        other.db.execute("COMMIT")

    waiting = threading.Thread(target=second)
    waiting.start()
    time.sleep(0.5)
    assert not began  # still waiting for the first
    committed = time.monotonic()
    one.db.execute("COMMIT")
    waiting.join(10)
    other.close()
    assert began and began[0] >= committed


def test_messages_are_stored_in_turn_so_their_ids_commit_in_order(pg_home: Home) -> None:
    """Storing a message takes the write lock, as on SQLite: it waits for a writer holding
    it, and its id comes after that writer's. Were it to take an id at once and commit
    after a higher one, the search index, which reads "every message up to this id", would
    never see it."""
    one, other = pg_home, Home.open(pg_home.settings)
    channel = conversations.shared_channel(one, projects.create_project(one, "Kitchen"))
    one.db.execute("BEGIN IMMEDIATE")
    lone: list[int] = []
    waiting = threading.Thread(
        target=lambda: lone.append(conversations.add_message(other, channel, "user", "Oak.").id)
    )
    waiting.start()
    time.sleep(0.5)
    assert not lone  # still waiting for the writer holding the lock
    held = conversations.add_message(one, channel, "user", "Marble.")
    one.db.execute("COMMIT")
    waiting.join(10)
    other.close()
    assert lone and lone[0] > held.id


def test_a_write_that_fails_in_a_transaction_undoes_itself_only(pg_home: Home) -> None:
    """As in SQLite: a refused write inside a transaction leaves the rest of it to commit."""
    home = pg_home
    users.add_user(home.db, "alice", None)
    home.db.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.IntegrityError):
        home.db.execute(
            "INSERT INTO users (name, is_admin, created_at) VALUES ('ALICE', 0, '2026-12-06')"
        )
    home.db.execute(
        "INSERT INTO users (name, is_admin, created_at) VALUES ('bob', 0, '2026-12-06')"
    )
    home.db.execute("COMMIT")
    assert [u.name for u, _ in users.list_users(home.db)] == ["alice", "bob"]


def test_a_writer_held_up_past_the_busy_timeout_is_told_so(
    pg_home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write transaction left open elsewhere holds the lock; the next writer waits as long
    as SQLite's would (`db.BUSY_TIMEOUT`), then is told the database is busy."""
    monkeypatch.setattr(db, "BUSY_TIMEOUT", 0.3)
    with Home.open(pg_home.settings) as other:
        pg_home.db.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        with pytest.raises(DatabaseBusy, match="is busy: another Charlie process held"):
            other.db.execute("BEGIN IMMEDIATE")
        assert 0.25 < time.monotonic() - started < 5
        assert not other.db.in_transaction  # the failed BEGIN began nothing
        pg_home.db.execute("COMMIT")
        other.db.execute("BEGIN IMMEDIATE")  # free again
        other.db.execute("COMMIT")


def test_two_homes_racing_claim_a_distillation_once(pg_home: Home) -> None:
    """Two processes' homes on one database (two connections), each trying to claim the same
    channel's distillation at once, many times: exactly one wins each time."""
    home = pg_home
    channel = conversations.shared_channel(home, projects.create_project(home, "Kitchen"))
    homes = [Home.open(home.settings) for _ in range(2)]

    def race(racer: Home, start: threading.Barrier, won: list[str]) -> None:
        start.wait()
        token = distill.claim(racer, channel)
        if token is not None:
            won.append(token)

    for _ in range(20):
        won: list[str] = []
        start = threading.Barrier(2)
        racers = [threading.Thread(target=race, args=(h, start, won)) for h in homes]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(10)
        assert len(won) == 1
        distill.release(home, channel, won[0])
    for other in homes:
        other.close()


def test_a_server_that_does_not_answer_is_said_plainly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = Cli()
    monkeypatch.setenv("CHARLIE_DATABASE_URL", f"postgresql://charlie@/none?host={tmp_path}")
    result = cli("status")
    assert result.exit_code == 1
    assert "did not answer" in result.output and "CHARLIE_DATABASE_URL" in result.output
    assert "Traceback" not in result.output


def test_a_url_that_is_not_postgresql_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    cli = Cli()
    monkeypatch.setenv("CHARLIE_DATABASE_URL", "mysql://charlie@db/charlie")
    result = cli("status")
    assert result.exit_code != 0
    assert "CHARLIE_DATABASE_URL" in result.output and "postgresql://" in result.output


def test_status_names_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = Cli()
    assert "Database: SQLite," in cli("status").output
    url = postgres_url()
    monkeypatch.setenv("CHARLIE_DATABASE_URL", url)
    result = cli("status")
    assert result.exit_code == 0, result.output
    assert f"Database: PostgreSQL, {url}" in result.output
    assert "own files" not in result.output  # one machine: everything in the data home
    monkeypatch.setenv("CHARLIE_LOCAL_DIR", str(tmp_path / "here"))
    result = cli("status", "--json")
    assert json.loads(result.output)["local"] == str(tmp_path / "here")
    assert f"This machine's own files: {tmp_path / 'here'}" in cli("status").output


def test_a_sqlite_home_moves_into_postgresql_and_back_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moving a home is `charlie export` from one store and `charlie restore` into the
    other: the archives made from SQLite, from PostgreSQL and from SQLite again hold the
    same bytes (the manifest aside, which dates itself), private channel included."""
    cli = Cli()
    monkeypatch.delenv("CHARLIE_DATABASE_URL", raising=False)
    with Home.open(load_settings()) as home:
        a_household(home)
    archives = [tmp_path / f"{n}.zip" for n in ("sqlite", "postgres", "sqlite-again")]
    assert cli("export", "-o", str(archives[0]), "--private").exit_code == 0
    for archive, made, url in (
        (archives[0], archives[1], postgres_url()),
        (archives[1], archives[2], ""),
    ):
        monkeypatch.setenv("CHARLIE_HOME", str(tmp_path / made.stem))
        if url:
            monkeypatch.setenv("CHARLIE_DATABASE_URL", url)
        else:
            monkeypatch.delenv("CHARLIE_DATABASE_URL")
        restored = cli("restore", str(archive))
        assert restored.exit_code == 0, restored.output
        assert "31 messages" in restored.output
        assert cli("export", "-o", str(made), "--private").exit_code == 0
    members = []
    for archive in archives:
        with zipfile.ZipFile(archive) as z:
            members.append({n: z.read(n) for n in z.namelist() if n != "manifest.json"})
    assert members[0] == members[1] == members[2]
    assert any(b"4471" in data for data in members[1].values())  # alice's channel went along


def test_a_forget_scrubs_every_machines_index_on_one_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two machines on one database and one data home each keep their own search index
    (CHARLIE_LOCAL_DIR); a message forgotten on one is scrubbed from the other's too, at its
    next look, with the context its neighbours held."""
    monkeypatch.setenv("CHARLIE_DATABASE_URL", postgres_url())
    one, other = (Home.open(load_settings(local_dir=tmp_path / m)) for m in ("one", "other"))
    assert one.settings.home == other.settings.home and one.index_path != other.index_path
    alice = users.add_user(one.db, "alice", None)
    mine = conversations.private_channel(one, alice)
    said = [
        conversations.add_message(one, mine, "user", text, user=alice).id
        for text in ("Tiles are green.", "The gate code is QUAIL9182.", "The oven is fine.")
    ]
    for home in (one, other):
        list(chat.index_messages(home))
        hits = recall.recaller_for(home).recall(alice, [mine], "QUAIL9182", limit=5).hits
        assert said[1] in {h.message.id for h in hits}
    assert places_holding(other.index_path.parent, "QUAIL9182")  # the other's index has it
    forget.forget(one, mine, alice, said[1])
    assert places_holding(one.index_path.parent, "QUAIL9182") == []
    hits = recall.recaller_for(other).recall(alice, [mine], "QUAIL9182", limit=5).hits
    assert [h.message.id for h in hits if h.bm25 > 0] == []
    assert places_holding(other.index_path.parent, "QUAIL9182") == []  # nor neighbours' context
    assert not (one.settings.home / "index.db").exists()
    for home in (one, other):  # and the next look finds nothing more to do
        assert recall.recaller_for(home).index.scrub() == 0
        home.close()


def a_household(home: Home) -> tuple[str, str]:
    """People with a password and a token, a shared thread, a private channel and a memory
    revision; (alice's password, her token's secret)."""
    password = "correct horse battery"
    alice = users.add_user(home.db, "alice", password, is_admin=True)
    bob = users.add_user(home.db, "bob", None)
    _, secret = tokens.create(home.db, alice, label="laptop")
    kitchen = conversations.shared_channel(home, projects.create_project(home, "Kitchen"))
    for n in range(30):
        conversations.add_message(
            home, kitchen, "user", f"Oak worktops, take {n}: 10% off?", user=(alice, bob)[n % 2]
        )
    mine = conversations.private_channel(home, alice)
    conversations.add_message(home, mine, "user", "The door code is 4471.", user=alice)
    return password, secret


def test_store_copy_moves_every_row_to_postgresql_and_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`charlie store copy --to URL` copies charlie.db whole — passwords, tokens and private
    channels too, which an archive leaves out — checked table by table; `--from URL` copies
    it back into a new charlie.db, the same rows."""
    cli = Cli()
    monkeypatch.delenv("CHARLIE_DATABASE_URL", raising=False)
    with Home.open(load_settings()) as home:
        password, secret = a_household(home)
        before = {t: home.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in COUNTED}
    url = postgres_url()
    moved = cli("store", "copy", "--to", url)
    assert moved.exit_code == 0, moved.output
    assert "Copied " in moved.output and "messages" in moved.output and "✓" in moved.output
    assert f"set CHARLIE_DATABASE_URL={url}" in moved.output
    monkeypatch.setenv("CHARLIE_DATABASE_URL", url)
    with Home.open(load_settings()) as pg:
        assert users.authenticate(pg.db, "alice", password) is not None  # her password came
        assert tokens.verify(pg.db, secret)[0].name == "alice"  # and her token
        after = {t: pg.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in COUNTED}
        assert after == before
        alice = users.get_user(pg.db, "alice")
        kitchen = conversations.shared_channel(pg, projects.get_project(pg, "kitchen"))
        newer = conversations.add_message(pg, kitchen, "user", "And one more.", user=alice)
        assert newer.id == before["messages"] + 1  # the ids go on from the copied ones
    monkeypatch.setenv("CHARLIE_HOME", str(tmp_path / "back"))
    monkeypatch.delenv("CHARLIE_DATABASE_URL")
    back = cli("store", "copy", "--from", url)
    assert back.exit_code == 0, back.output
    with Home.open(load_settings()) as home:
        assert users.authenticate(home.db, "alice", password) is not None
        mine = conversations.private_channel(home, users.get_user(home.db, "alice"))
        assert [m.content for m in conversations.recent(home, mine, 5)] == [
            "The door code is 4471."
        ]
        assert home.db.execute("SELECT count(*) FROM messages").fetchone()[0] == 32


COUNTED = ("users", "api_tokens", "conversations", "messages")


def test_store_copy_goes_into_an_empty_target_only_and_a_failed_one_leaves_it_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = Cli()
    monkeypatch.delenv("CHARLIE_DATABASE_URL", raising=False)
    with Home.open(load_settings()) as home:
        a_household(home)
        alice = users.get_user(home.db, "alice")
        kitchen = conversations.shared_channel(home, projects.get_project(home, "kitchen"))
        conversations.add_message(home, kitchen, "user", "A NUL \x00 inside.", user=alice)
    url = postgres_url()
    failed = cli("store", "copy", "--to", url)  # PostgreSQL's text holds no NUL character
    assert failed.exit_code == 1 and "Traceback" not in failed.output
    with Home.open(load_settings(database_url=url)) as pg:
        assert pg.db.execute("SELECT count(*) FROM users").fetchone()[0] == 0  # nothing kept
        users.add_user(pg.db, "carol", None)
    refused = cli("store", "copy", "--to", url)
    assert refused.exit_code == 1 and "already holds rows (users)" in refused.output
    monkeypatch.setenv("CHARLIE_HOME", str(tmp_path / "back"))
    assert cli("store", "copy", "--from", url).exit_code == 0
    again = cli("store", "copy", "--from", url)  # charlie.db is there now
    assert again.exit_code == 1 and "exists already" in again.output
