"""Migrations: a blank database, an upgrade from every earlier version, two processes at
once, and an up-to-date database opened without a write lock (in the spirit of simonw/llm's
tests/test_migrate.py)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from charlie import db
from charlie.config import load_settings
from charlie.home import Home

NAMES = [migration.__name__ for migration in db.MIGRATIONS]


def schema(path: Path) -> list[tuple[str, str, str]]:
    """Every table and index as SQLite stores it (`ALTER TABLE` edits the stored SQL too)."""
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
            "ORDER BY type, name"
        ).fetchall()


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def recorded(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT name FROM migrations ORDER BY rowid")]


def user_version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        return version


def old_charlie(path: Path, upto: int) -> sqlite3.Connection:
    """A database as a Charlie that knew only the first `upto` migrations left it: the
    migrations recorded by name, `user_version` never set."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for migration in db.MIGRATIONS[:upto]:
        conn.execute("BEGIN")
        migration(conn)
        conn.execute("INSERT INTO migrations VALUES (?, ?)", (migration.__name__, db.now()))
        conn.execute("COMMIT")
    return conn


CONVERSATION = "INSERT INTO conversations "
CONVERSATION += "(id, project_id, owner_id, private, distilled_upto, created_at) VALUES "
MESSAGE = "INSERT INTO messages (id, conversation_id, project_id, private, role, user_id, "
MESSAGE += "speaker, content, images, created_at) VALUES "

# Representative rows of each table, by the migration that created the table or column.
ROWS: dict[str, list[str]] = {
    "m001_initial": [
        "INSERT INTO users VALUES (1, 'alice', 1, 'scrypt$x', '2026-01-01')",
        "INSERT INTO users VALUES (2, 'bob', 0, NULL, '2026-01-01')",
        "INSERT INTO projects VALUES (1, 'kitchen', '2026-01-01')",
        CONVERSATION + "(1, 1, NULL, 0, 0, '2026-01-01')",
        CONVERSATION + "(2, NULL, 1, 1, 4, '2026-01-01')",
        MESSAGE + "(1, 1, 1, 0, 'user', 2, 'bob', 'oak or marble?', '[]', '2026-01-02')",
        MESSAGE + "(2, 2, NULL, 1, 'user', 1, 'alice', 'my private words', '[]', '2026-01-02')",
        "INSERT INTO memory_revisions VALUES (1, 2, 1, 'distill', "
        """'{"summary": "private summary"}', NULL, '2026-01-03')""",
        "INSERT INTO distillations (id, conversation_id, owner_id, status, first_message_id, "
        "last_message_id, attempts, structured, rejected_quotes, error, revision_id, "
        "started_at, finished_at) VALUES (1, 2, 1, 'ok', 1, 2, 1, 1, '[]', NULL, 1, "
        "'2026-01-03', '2026-01-03')",
    ],
    "m002_usage": [
        "INSERT INTO usage_events VALUES (1, 1, 'view', 'kitchen/oak', NULL, 0, '2026-01-04')",
        "INSERT INTO usage_events VALUES (2, 1, 'tag', NULL, 'worktops', 0, '2026-01-04')",
    ],
    "m003_traces_and_suggestions": [
        MESSAGE.replace(") VALUES", ", trace) VALUES")
        + "(3, 1, 1, 0, 'assistant', NULL, 'Charlie', 'Oak.', '[]', "
        """'2026-01-05', '[{"type": "suggested", "categories": []}]')""",
        "INSERT INTO suggestions VALUES (1, 3, 1, 1, 'kitchen/oak', 'Oak', 'same words', "
        "'accepted', '2026-01-05', '2026-01-05')",
        "INSERT INTO pins VALUES (1, 'kitchen/oak', 1, '2026-01-05')",
    ],
    "m004_sessions": [
        "INSERT INTO sessions VALUES ('hash', 1, 'csrf', '2026-01-06', '2026-02-06')",
        "INSERT INTO login_failures VALUES (1, 'bob@127.0.0.1', '2026-01-06')",
    ],
    "m005_distill_claim": [
        "UPDATE conversations SET distill_claim = 'token', distill_claimed_at = '2026-01-07' "
        "WHERE id = 1",
    ],
    "m006_discord": [
        "INSERT INTO discord_links VALUES ('1234', 1, '2026-01-08')",
        "INSERT INTO discord_link_codes VALUES ('codehash', 2, '2026-01-09')",
        "INSERT INTO discord_bindings VALUES ('555', '777', 'kitchen', 1, '2026-01-08')",
        "INSERT INTO discord_suggestion_messages VALUES ('999', 1, 'accepted')",
    ],
    "m007_incomplete_replies": [
        MESSAGE + "(4, 1, 1, 0, 'assistant', NULL, 'Charlie', 'Oak is', '[]', '2026-01-10')",
        "UPDATE messages SET incomplete = 1 WHERE id = 4",
    ],
    "m008_imported_messages": [
        MESSAGE + "(5, 1, 1, 0, 'user', NULL, 'Ana', 'Lisbon in May', '[]', '2025-05-01')",
        "UPDATE messages SET source_id = 'chat-1', distill = 0 WHERE id = 5",
    ],
    "m009_api_tokens": [
        "INSERT INTO api_tokens VALUES (1, 1, 'laptop', 'hash1', 0, '2026-01-11', NULL, NULL)",
        "INSERT INTO api_tokens VALUES (2, 2, '', 'hash2', 1, '2026-01-11', '2026-01-12', "
        "'2026-01-13')",
    ],
    "m010_threads_and_branches": [
        CONVERSATION.replace(") VALUES", ", title, updated_at, source_id) VALUES")
        + "(3, 1, NULL, 0, 0, '2026-01-14', 'Imported', '2026-01-14', 'chatgpt:abc')",
        MESSAGE.replace(") VALUES", ", parent_id, hidden) VALUES")
        + "(9, 1, 1, 0, 'assistant', NULL, 'Charlie', 'Marble.', '[]', '2026-01-14', 3, 1)",
    ],
    "m011_model_habits_and_distill_backoff": [
        "INSERT INTO model_habits (key, native_calls, text_calls, json_schema, misses, "
        "last_miss, updated_at) VALUES ('http://127.0.0.1:8080/v1 qwen', 1, NULL, 1, 2, "
        "'a tool call Charlie could not read', '2026-12-01')",
        "UPDATE conversations SET distill_failed_at = 9, distill_failures = 2 WHERE id = 3",
    ],
    "m012_forget_log_and_refused_decisions": [
        "INSERT INTO forget_log VALUES (1, '2026-12-01', 1, 'project kitchen', 2)",
        """UPDATE distillations SET refused_decisions = '[{"decision": "x", "why": "y"}]'""",
    ],
    "m013_message_ids_never_reused": [
        MESSAGE.replace(") VALUES", ", parent_id) VALUES")
        + "(10, 1, 1, 0, 'user', 2, 'bob', 'and the taps?', '[]', '2026-12-02', 9)",
    ],
    "m014_forgotten_messages": [
        "INSERT INTO forgotten_messages VALUES (1, 6, 1, '[5, 9]', '2026-12-02', NULL)",
        "INSERT INTO forgotten_messages VALUES (2, 7, 1, '[]', '2026-12-02', '2026-12-02')",
    ],
    "m015_model_size_and_clean_answers": [
        "UPDATE model_habits SET params = 1500000000, params_source = 'its name', clean = 1",
    ],
}


def test_every_migration_has_representative_rows() -> None:
    assert list(ROWS) == NAMES, "add rows for a new migration to ROWS"


def test_a_blank_database_gets_the_whole_schema(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    conn = db.connect(path)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {
        "migrations",
        "users",
        "projects",
        "conversations",
        "messages",
        "memory_revisions",
        "distillations",
        "usage_events",
        "suggestions",
        "pins",
        "sessions",
        "login_failures",
        "discord_links",
        "discord_link_codes",
        "discord_bindings",
        "discord_suggestion_messages",
        "api_tokens",
        "model_habits",
        "forget_log",
        "sqlite_sequence",  # AUTOINCREMENT's record of the highest message id ever given
        "forgotten_messages",
    }
    assert columns(conn, "messages") == [
        "id",
        "conversation_id",
        "project_id",
        "private",
        "role",
        "user_id",
        "speaker",
        "content",
        "images",
        "created_at",
        "trace",
        "incomplete",
        "source_id",
        "distill",
        "parent_id",
        "hidden",
    ]
    assert columns(conn, "conversations")[-10:] == [
        "distill_claim",
        "distill_claimed_at",
        "title",
        "title_set",
        "updated_at",
        "archived_at",
        "deleted_at",
        "source_id",
        "distill_failed_at",
        "distill_failures",
    ]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert recorded(path) == NAMES
    assert user_version(path) == len(NAMES)


@pytest.mark.parametrize("upto", range(1, len(NAMES) + 1))
def test_an_upgrade_from_every_earlier_version_keeps_every_row(tmp_path: Path, upto: int) -> None:
    blank = tmp_path / "blank.db"
    db.connect(blank).close()
    path = tmp_path / "charlie.db"
    conn = old_charlie(path, upto)
    for name in NAMES[:upto]:
        for statement in ROWS[name]:
            conn.execute(statement)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    before = {t: (columns(conn, t), conn.execute(f"SELECT * FROM {t}").fetchall()) for t in tables}
    conn.close()

    upgraded = db.connect(path)
    for table, (names, rows) in before.items():
        if table == "migrations":
            continue
        kept = upgraded.execute(f"SELECT {', '.join(names)} FROM {table}").fetchall()
        assert [tuple(r) for r in kept] == rows, table
    upgraded.close()
    assert schema(path) == schema(blank)
    assert recorded(path) == NAMES
    assert user_version(path) == len(NAMES)


def test_a_failed_migration_leaves_nothing_half_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def m999_broken(conn: sqlite3.Connection) -> None:
        db.run_script(conn, "CREATE TABLE half (id INTEGER);\nCREATE TABLE half (id INTEGER);")

    path = tmp_path / "charlie.db"
    db.connect(path).close()
    monkeypatch.setattr(db, "MIGRATIONS", [*db.MIGRATIONS, m999_broken])
    with pytest.raises(sqlite3.OperationalError, match="already exists"):
        db.migrate(sqlite3.connect(path, isolation_level=None))
    assert recorded(path) == NAMES
    assert user_version(path) == len(NAMES)
    assert "half" not in {name for _, name, _ in schema(path)}


RACER = textwrap.dedent(
    """
    import sqlite3, sys, time
    from pathlib import Path

    real_connect = sqlite3.connect

    def slow_to_lock(statement):
        # Widen the moment between looking at the database and locking it, as a busy
        # machine would.
        if statement.startswith("BEGIN IMMEDIATE"):
            time.sleep(0.3)

    def connect(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(slow_to_lock)
        return conn

    sqlite3.connect = connect
    from charlie import db

    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
    db.connect(Path(sys.argv[1])).close()
    print("ok")
    """
)


@pytest.mark.parametrize("upto", [0, len(NAMES) - 1])
def test_two_processes_migrating_at_once_both_succeed(tmp_path: Path, upto: int) -> None:
    """The web server and the Discord bot starting together on a new migration."""
    path = tmp_path / "charlie.db"
    if upto:
        old_charlie(path, upto).close()
    start = time.time() + 3.0
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(path), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [racer.communicate(timeout=60) for racer in racers]
    assert [(racer.returncode, out) for racer, (out, _) in zip(racers, results, strict=True)] == [
        (0, "ok\n"),
        (0, "ok\n"),
    ], [err for _, err in results]
    assert recorded(path) == NAMES  # each exactly once, in order
    assert user_version(path) == len(NAMES)


def test_an_up_to_date_database_is_checked_with_one_read(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    db.connect(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    db.migrate(conn)
    assert statements == ["PRAGMA user_version"]


def test_a_database_from_before_user_version_is_recognised_as_up_to_date(
    tmp_path: Path,
) -> None:
    path = tmp_path / "charlie.db"
    old_charlie(path, len(NAMES)).close()
    applied_at = sqlite3.connect(path).execute("SELECT applied_at FROM migrations").fetchall()
    db.connect(path).close()
    assert user_version(path) == len(NAMES)
    assert sqlite3.connect(path).execute("SELECT applied_at FROM migrations").fetchall() == (
        applied_at
    )


def test_opening_an_up_to_date_home_takes_no_write_lock(charlie_home: Path) -> None:
    settings = load_settings()
    Home.open(settings).close()
    writer = sqlite3.connect(settings.db_path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process writing, say a distillation
    try:
        started = time.perf_counter()
        with Home.open(settings) as home:
            assert home.db.execute("SELECT count(*) FROM users").fetchone()[0] == 0
        assert time.perf_counter() - started < 1.0  # the busy timeout is 10 s
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_database_newer_than_this_charlie_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    db.connect(path).close()
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("INSERT INTO migrations VALUES ('m999_future', '2027-01-01')")
        conn.execute(f"PRAGMA user_version = {len(NAMES) + 1}")
    db.connect(path).close()
    assert user_version(path) == len(NAMES) + 1
    assert recorded(path) == [*NAMES, "m999_future"]


def test_the_threads_migration_chains_each_conversation_and_dates_it(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    conn = old_charlie(path, 9)
    for name in NAMES[:9]:
        for statement in ROWS[name]:
            conn.execute(statement)
    conn.close()
    upgraded = db.connect(path)
    chain = upgraded.execute(
        "SELECT id, parent_id, hidden FROM messages WHERE conversation_id = 1 ORDER BY id"
    ).fetchall()
    ids = [r[0] for r in chain]
    assert [r[1] for r in chain] == [0, *ids[:-1]] and {r[2] for r in chain} == {0}
    assert [r[1] for r in upgraded.execute("SELECT id, parent_id FROM messages WHERE id = 2")] == [
        0
    ]
    latest = upgraded.execute("SELECT updated_at FROM conversations WHERE id = 1").fetchone()[0]
    assert latest == max(
        r[0] for r in upgraded.execute("SELECT created_at FROM messages WHERE conversation_id = 1")
    )
    upgraded.close()


def at_version_12(path: Path) -> sqlite3.Connection:
    """A database as the Charlie before message ids were never reused left it: a thread
    distilled up to message 6 whose messages 4 to 6 were forgotten since, a suggestion under
    message 2, and a reply that took the id of the message it answered (forgotten while it
    was written) and so follows itself."""
    conn = old_charlie(path, 12)
    conn.execute("INSERT INTO users VALUES (2, 'bob', 0, NULL, '2026-01-01')")
    conn.execute("INSERT INTO projects VALUES (1, 'kitchen', '2026-01-01')")
    conn.execute(CONVERSATION + "(1, 1, NULL, 0, 6, '2026-01-01')")
    with_parent = MESSAGE.replace(") VALUES", ", parent_id) VALUES")
    conn.execute(with_parent + "(1, 1, 1, 0, 'user', 2, 'bob', 'oak?', '[]', '2026-01-02', 0)")
    conn.execute(
        with_parent + "(2, 1, 1, 0, 'assistant', NULL, 'Charlie', 'Oak.', '[]', '2026-01-02', 1)"
    )
    conn.execute(
        with_parent + "(3, 1, 1, 0, 'assistant', NULL, 'Charlie', 'Tiles.', '[]', '2026-01-03', 3)"
    )
    conn.execute(
        "INSERT INTO distillations (conversation_id, status, first_message_id, last_message_id, "
        "attempts, structured, started_at, finished_at) VALUES (1, 'ok', 1, 6, 1, 1, "
        "'2026-01-03', '2026-01-03')"
    )
    conn.execute(
        "INSERT INTO suggestions VALUES (1, 2, 1, 2, 'kitchen/oak', 'Oak', 'same words', "
        "'shown', '2026-01-05', NULL)"
    )
    return conn


def test_after_the_ids_migration_no_message_id_is_given_twice(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    old = at_version_12(path)
    before = old.execute("SELECT * FROM messages ORDER BY id").fetchall()
    suggestions = old.execute("SELECT * FROM suggestions").fetchall()
    old.close()

    upgraded = db.connect(path)
    assert upgraded.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # on again
    assert upgraded.execute("PRAGMA foreign_key_check").fetchall() == []
    after = [tuple(r) for r in upgraded.execute("SELECT * FROM messages ORDER BY id")]
    assert after[:2] == before[:2]  # every row, id and reference kept
    assert after[2] == (*before[2][:-2], 2, 0)  # the reply that followed itself: after 2
    assert [tuple(r) for r in upgraded.execute("SELECT * FROM suggestions")] == suggestions

    def add(parent: int) -> int:
        cursor = upgraded.execute(
            "INSERT INTO messages (conversation_id, project_id, private, role, user_id, "
            "speaker, content, created_at, parent_id) "
            "VALUES (1, 1, 0, 'user', 2, 'bob', 'again', '2026-02-01', ?)",
            (parent,),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    new = add(3)
    assert new == 7  # above the distilled mark and the distillation's messages, not 4
    upgraded.execute("DELETE FROM messages WHERE id = ?", (new,))
    assert add(3) == 8  # the newest forgotten: its id is not given again
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        add(9)  # a message follows one stored before it, never itself or a later one
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        upgraded.execute("UPDATE messages SET parent_id = id WHERE id = 8")
    upgraded.close()


def test_the_ids_migration_runs_on_a_database_with_no_messages(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    old_charlie(path, 12).close()
    upgraded = db.connect(path)
    found = upgraded.execute("SELECT name, seq FROM sqlite_sequence").fetchall()
    assert [tuple(r) for r in found] == [("messages", 0)]
    upgraded.close()


def test_the_ids_migration_gives_no_id_the_search_index_still_names(tmp_path: Path) -> None:
    """A forget that could not reach the search index left its words and marks there: a new
    message taking a forgotten id would be found by the forgotten words."""
    path = tmp_path / "charlie.db"
    old = at_version_12(path)
    old.execute("UPDATE conversations SET distilled_upto = 0")
    old.execute("DELETE FROM distillations")
    old.close()
    with sqlite3.connect(tmp_path / "index.db") as index:
        index.execute("CREATE TABLE index_state (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        index.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, vector BLOB)")
        index.execute("CREATE VIRTUAL TABLE messages_fts USING fts5(speaker, text)")
        index.execute("INSERT INTO index_state VALUES ('messages_upto', '8')")
        index.execute("INSERT INTO index_state VALUES ('messages_words_upto', '9')")
        index.execute("INSERT INTO messages_fts (rowid, speaker, text) VALUES (11, 'bob', 'x')")
    upgraded = db.connect(path)
    assert upgraded.execute("SELECT seq FROM sqlite_sequence").fetchone()[0] == 11
    upgraded.close()


def test_the_ids_migration_reads_past_a_search_index_it_cannot_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "charlie.db"
    at_version_12(path).close()
    (tmp_path / "index.db").write_bytes(b"not a database" * 100)
    upgraded = db.connect(path)  # the index is built again when it is next opened
    assert upgraded.execute("SELECT seq FROM sqlite_sequence").fetchone()[0] == 6
    upgraded.close()
    assert "could not be read" in caplog.text
