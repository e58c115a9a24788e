"""`charlie import jsonl`: history from a JSONL file, stored once, in time, never distilled
unless asked, and nothing already stored touched."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from hypothesis import given
from hypothesis import strategies as st
from llm_double import ScriptedLLMServer
from support.distilling import distill_answer, is_distillation, naming_answer

from charlie import conversations
from charlie.conversations import private_channel, shared_channel
from charlie.home import Home
from charlie.llm import budget
from charlie.memory import batches
from charlie.projects import create_project, get_project
from charlie.transfer import jsonl as importing
from charlie.users import ensure_user

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)

HISTORY = [
    {"id": "m1", "speaker": "Sam", "text": "Oak or marble?", "time": "2023-05-08T13:56:00Z"},
    {"id": "m2", "role": "assistant", "text": "Oak is warmer.", "time": "2023-05-08T13:56:30Z"},
    {"id": 3, "speaker": "Ana", "role": "user", "text": "Oak it is.", "time": "2023-05-08T14:00Z"},
]


def write(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
        encoding="utf-8",
    )
    return path


def rows(home: Home) -> list[dict[str, Any]]:
    return [dict(r) for r in home.db.execute("SELECT * FROM messages ORDER BY id")]


@pytest.fixture
def kitchen(home: Home) -> Home:
    create_project(home, "Kitchen")
    return home


def test_import_into_a_project(charlie: Cli, kitchen: Home, tmp_path: Path) -> None:
    result = charlie("import", "jsonl", str(write(tmp_path / "h.jsonl", HISTORY)), "-p", "kitchen")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Imported 3 messages into project kitchen.\n"
    project = get_project(kitchen, "kitchen")
    stored = rows(kitchen)
    assert [(r["role"], r["speaker"], r["content"], r["source_id"]) for r in stored] == [
        ("user", "Sam", "Oak or marble?", "m1"),
        ("assistant", "Charlie", "Oak is warmer.", "m2"),
        ("user", "Ana", "Oak it is.", "3"),
    ]
    assert {(r["project_id"], r["private"], r["user_id"], r["distill"]) for r in stored} == {
        (project.id, 0, None, 0)
    }
    channel = shared_channel(kitchen, project)
    assert {r["conversation_id"] for r in stored} == {channel.conversation_id}
    assert [m.created_at for m in conversations.recent(kitchen, channel, 10)] == [
        "2023-05-08T13:56:00.000+00:00",
        "2023-05-08T13:56:30.000+00:00",
        "2023-05-08T14:00:00.000+00:00",
    ]


def test_importing_again_adds_nothing(charlie: Cli, kitchen: Home, tmp_path: Path) -> None:
    lines = [*HISTORY, {"speaker": "Sam", "text": "No id here.", "time": "2023-05-09"}]
    path = write(tmp_path / "h.jsonl", lines)
    assert charlie("import", "jsonl", str(path), "-p", "kitchen").exit_code == 0
    before = rows(kitchen)
    again = charlie("import", "jsonl", str(path), "-p", "kitchen")
    assert again.exit_code == 0
    assert again.stdout == "Imported 0 messages into project kitchen (4 already there).\n"
    assert rows(kitchen) == before
    assert before[3]["source_id"].startswith("sha256:")


def test_broken_lines_are_reported_and_the_rest_imported(
    charlie: Cli, kitchen: Home, tmp_path: Path
) -> None:
    lines = [
        HISTORY[0],
        "{not json",
        {"speaker": "Sam", "time": "2023-05-08"},
        "",
        {"speaker": "Sam", "role": "system", "text": "x", "time": "2023-05-08"},
        {"speaker": "Sam", "text": "x", "time": "last tuesday"},
        '["a", "list"]',
        {"speaker": "Sam", "text": 42, "time": "2023-05-08"},
        {"text": "Who said this?", "time": "2023-05-08"},
        {"speaker": "Sam", "text": "x" * 100_001, "time": "2023-05-08"},
        {"id": True, "speaker": "Sam", "text": "x", "time": "2023-05-08"},
        HISTORY[1],
    ]
    result = charlie("import", "jsonl", str(write(tmp_path / "h.jsonl", lines)), "-p", "kitchen")
    assert result.exit_code == 0
    assert result.stdout == (
        "Imported 2 messages into project kitchen (9 lines skipped).\n"
        "  line 2: not valid JSON (Expecting property name enclosed in double quotes at "
        "column 2)\n"
        '  line 3: "text" is missing\n'
        '  line 5: "role" must be "user" or "assistant", not "system"\n'
        '  line 6: "time" "last tuesday" is not an ISO-8601 time such as 2023-05-08T13:56:00Z\n'
        "  line 7: not a JSON object but a list\n"
        '  line 8: "text" must be a string, not a number\n'
        '  line 9: "speaker" is missing: in a shared project a person\'s message says who\n'
        '  line 10: "text" is longer than 100,000 characters\n'
        '  line 11: "id" must be a non-empty string or an integer, not true\n'
    )
    assert [r["source_id"] for r in rows(kitchen)] == ["m1", "m2"]


def test_nothing_already_stored_changes(charlie: Cli, kitchen: Home, tmp_path: Path) -> None:
    channel = shared_channel(kitchen, get_project(kitchen, "kitchen"))
    alice = ensure_user(kitchen.db, "alice")
    conversations.add_message(kitchen, channel, "user", "Oak or marble?", user=alice)
    conversations.add_message(kitchen, channel, "assistant", "Oak.")
    kitchen.db.execute("UPDATE messages SET source_id = 'm1' WHERE id = 1")
    before = rows(kitchen)
    lines = [*HISTORY, {**HISTORY[2], "text": "The same id, said again."}]
    result = charlie("import", "jsonl", str(write(tmp_path / "h.jsonl", lines)), "-p", "kitchen")
    assert result.stdout == "Imported 2 messages into project kitchen (2 already there).\n"
    after = rows(kitchen)
    assert after[:2] == before
    assert [r["content"] for r in after[2:]] == ["Oak is warmer.", "Oak it is."]


def test_private_import_goes_to_that_persons_channel_only(
    charlie: Cli, home: Home, tmp_path: Path
) -> None:
    lines = [
        {"id": 1, "text": "My own plans.", "time": "2023-05-08T10:00:00"},
        {"id": 2, "role": "assistant", "text": "Noted.", "time": "2023-05-08T10:00:01"},
    ]
    path = write(tmp_path / "h.jsonl", lines)
    result = charlie("import", "jsonl", str(path), "--private", "--user", "bob")
    assert result.stdout == "Imported 2 messages into bob's private channel.\n"
    bob = ensure_user(home.db, "bob")
    alice = ensure_user(home.db, "alice")
    mine = conversations.recent(home, private_channel(home, bob), 10)
    assert [(m.speaker, m.user_id, m.content) for m in mine] == [
        ("bob", bob.id, "My own plans."),
        ("Charlie", None, "Noted."),
    ]
    assert conversations.recent(home, private_channel(home, alice), 10) == []
    assert {(r["private"], r["project_id"]) for r in rows(home)} == {(1, None)}


def test_times_become_utc_in_the_database_format_and_take_their_place(
    charlie: Cli, kitchen: Home, tmp_path: Path
) -> None:
    channel = shared_channel(kitchen, get_project(kitchen, "kitchen"))
    conversations.add_message(kitchen, channel, "assistant", "Said today.")
    lines = [
        {"id": "a", "speaker": "Sam", "text": "offset", "time": "2023-05-08T13:56:00.123456+02:00"},
        {"id": "b", "speaker": "Sam", "text": "naive", "time": "2023-05-08T09:00:00"},
        {"id": "c", "speaker": "Sam", "text": "date", "time": "2023-05-08"},
        {"id": "d", "speaker": "Sam", "text": "zulu", "time": "2023-05-08T12:00:00Z"},
    ]
    result = charlie("import", "jsonl", str(write(tmp_path / "h.jsonl", lines)), "-p", "kitchen")
    assert result.exit_code == 0
    assert [(m.content, m.created_at) for m in conversations.recent(kitchen, channel, 10)] == [
        ("date", "2023-05-08T00:00:00.000+00:00"),
        ("naive", "2023-05-08T09:00:00.000+00:00"),
        ("offset", "2023-05-08T11:56:00.123+00:00"),
        ("zulu", "2023-05-08T12:00:00.000+00:00"),
        ("Said today.", rows(kitchen)[0]["created_at"]),
    ]


YEARS = st.datetimes(datetime(2, 1, 1), datetime(2025, 12, 31), timezones=st.timezones())


@given(YEARS, YEARS)
def test_stored_times_are_the_same_instants_and_sort_as_they_do(a: datetime, b: datetime) -> None:
    first, second = (importing._time(t.isoformat()) for t in (a, b))
    assert len(first) == len("2023-05-08T13:56:00.000+00:00") and first.endswith("+00:00")
    assert timedelta(0) <= a - datetime.fromisoformat(first) < timedelta(milliseconds=1)
    if abs(a - b) >= timedelta(milliseconds=1):
        assert (first < second) == (a < b)


def test_json_report(charlie: Cli, kitchen: Home, tmp_path: Path) -> None:
    path = write(tmp_path / "h.jsonl", [*HISTORY, "null"])
    charlie("import", "jsonl", str(path), "-p", "kitchen")
    result = charlie("import", "jsonl", str(path), "-p", "kitchen", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "channel": "project kitchen",
        "added": 0,
        "already": 3,
        "skipped": 1,
        "problems": [{"line": 4, "reason": "not a JSON object but null"}],
        "first_time": "2023-05-08T13:56:00.000+00:00",
        "last_time": "2023-05-08T14:00:00.000+00:00",
        "indexing": {"background": False, "waiting": 0},  # a few: indexed before it returns
    }


def test_a_missing_file_is_an_error(charlie: Cli, kitchen: Home, tmp_path: Path) -> None:
    result = charlie("import", "jsonl", str(tmp_path / "nope.jsonl"), "-p", "kitchen")
    assert result.exit_code == 1
    assert (
        result.stderr
        == f"Error: There is no file {tmp_path / 'nope.jsonl'}. Nothing was imported.\n"
    )


def test_a_file_not_in_utf8_stores_nothing(charlie: Cli, kitchen: Home, tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(
        json.dumps(HISTORY[0]).encode() + b'\n{"speaker": "Jos\xe9", "text": "x", "time": "2023"}\n'
    )
    result = charlie("import", "jsonl", str(path), "-p", "kitchen")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {path} is not UTF-8 text (line 2 holds bytes that are not): save it as UTF-8 "
        "and import it again. Nothing was imported.\n"
    )
    assert rows(kitchen) == []


def test_a_bom_crlf_and_blank_lines_are_read(charlie: Cli, kitchen: Home, tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    text = "\r\n".join([json.dumps(HISTORY[0]), "", "  ", json.dumps(HISTORY[1]), "[]"])
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    result = charlie("import", "jsonl", str(path), "-p", "kitchen")
    assert result.stdout == (
        "Imported 2 messages into project kitchen (1 line skipped).\n"
        "  line 5: not a JSON object but a list\n"
    )


def test_a_line_too_long_is_skipped_and_the_next_read(
    charlie: Cli, kitchen: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importing, "MAX_LINE", 200)
    long = {"speaker": "Sam", "text": "x" * 1000, "time": "2023-05-08"}
    path = write(tmp_path / "h.jsonl", [long, HISTORY[0]])
    result = charlie("import", "jsonl", str(path), "-p", "kitchen")
    assert result.stdout == (
        "Imported 1 message into project kitchen (1 line skipped).\n"
        "  line 1: longer than 200 characters\n"
    )


def test_a_project_is_named_and_must_exist(charlie: Cli, tmp_path: Path) -> None:
    path = str(write(tmp_path / "h.jsonl", HISTORY))
    nowhere = charlie("import", "jsonl", path)
    assert nowhere.exit_code == 1
    assert nowhere.stderr == "Error: Say where the messages go: -p PROJECT, or --private.\n"
    missing = charlie("import", "jsonl", path, "-p", "garden")
    assert missing.exit_code == 1
    assert missing.stderr.startswith(
        "Error: There is no project 'garden'. Create it with `charlie projects create garden`"
    )


@pytest.mark.sqlite_only
def test_a_stop_midway_leaves_whole_batches_and_importing_again_completes(
    kitchen: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importing, "BATCH", 2)
    lines = [
        {"id": n, "speaker": "Sam", "text": f"message {n}", "time": "2023-05-08"} for n in range(5)
    ]
    path = write(tmp_path / "h.jsonl", lines)
    kitchen.db.execute(
        "CREATE TEMP TRIGGER crash BEFORE INSERT ON messages WHEN NEW.content = 'message 3' "
        "BEGIN SELECT RAISE(ABORT, 'crash'); END"
    )
    channel = shared_channel(kitchen, get_project(kitchen, "kitchen"))
    with pytest.raises(sqlite3.IntegrityError):
        importing.import_jsonl(kitchen, channel, path)
    assert [r["source_id"] for r in rows(kitchen)] == ["0", "1"]
    kitchen.db.execute("DROP TRIGGER crash")
    report = importing.import_jsonl(kitchen, channel, path)
    assert (report.added, report.already) == (3, 2)
    assert report.message_ids == [r["id"] for r in rows(kitchen)][2:]
    assert [r["source_id"] for r in rows(kitchen)] == ["0", "1", "2", "3", "4"]


def test_imported_messages_are_not_distilled_unless_asked(
    charlie: Cli, kitchen: Home, llm: ScriptedLLMServer, tmp_path: Path
) -> None:
    path = write(tmp_path / "h.jsonl", HISTORY)
    assert charlie("import", "jsonl", str(path), "-p", "kitchen").exit_code == 0
    channel = shared_channel(kitchen, get_project(kitchen, "kitchen"))
    assert conversations.undistilled(kitchen, channel) == []
    assert llm.requests == []


def test_distill_folds_the_import_into_memory_in_batches(
    charlie: Cli,
    kitchen: Home,
    llm: ScriptedLLMServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(batches, "MAX_BATCH", 2)
    llm.default = lambda req: naming_answer(req) if is_distillation(req) else "?"
    path = write(tmp_path / "h.jsonl", HISTORY)
    result = charlie("import", "jsonl", str(path), "-p", "kitchen", "--distill")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "Imported 3 messages into project kitchen.\n"
        "(memory updated from messages 1-2: 0 decisions, 0 quotes)\n"  # a question decides nothing
        "(memory updated from messages 3-3: 1 decisions, 0 quotes)\n"
    )
    channel = shared_channel(kitchen, get_project(kitchen, "kitchen"))
    assert conversations.undistilled(kitchen, channel) == []
    assert len([r for r in llm.requests if is_distillation(r)]) == 2
    assert "Oak or marble?" in str(llm.requests[0]["messages"])
    assert "- Oak worktops" in charlie("memory", "show", "-p", "kitchen").stdout


def test_distill_with_the_model_down_keeps_the_messages(
    charlie: Cli, kitchen: Home, dead_url: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "h.jsonl", HISTORY)
    result = charlie("import", "jsonl", str(path), "-p", "kitchen", "--distill")
    assert result.exit_code == 1
    assert result.stdout == "Imported 3 messages into project kitchen.\n"
    assert result.stderr.startswith(
        f"Error: Memory was not updated: Cannot reach the language model server at {dead_url}"
    )
    assert result.stderr.endswith(
        "The imported messages are stored: once that is fixed, run this import again with "
        "--distill (nothing is added twice), or `charlie distill -p kitchen`.\n"
    )
    channel = shared_channel(kitchen, get_project(kitchen, "kitchen"))
    assert [m.content for m in conversations.undistilled(kitchen, channel)] == [
        "Oak or marble?",
        "Oak is warmer.",
        "Oak it is.",
    ]


def test_distill_batches_fit_the_models_window(
    charlie: Cli,
    kitchen: Home,
    llm: ScriptedLLMServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHARLIE_LLM_CONTEXT", "2048")
    llm.default = lambda req: distill_answer() if is_distillation(req) else "?"
    lines = [
        {
            "id": n,
            "speaker": "Sam",
            "text": f"Topic {n}: " + "oak worktops " * 150,
            "time": "2023-05-08",
        }
        for n in range(4)
    ]
    path = write(tmp_path / "h.jsonl", lines)
    result = charlie("import", "jsonl", str(path), "-p", "kitchen", "--distill")
    assert result.exit_code == 0, result.output
    sent = [r for r in llm.requests if is_distillation(r)]
    assert len(sent) > 1
    for request in sent:
        assert budget.request_tokens(request["messages"], None) + request["max_tokens"] <= 2048
    told = "".join(str(r["messages"]) for r in sent)
    assert all(f"Topic {n}:" in told for n in range(4))
    channel = shared_channel(kitchen, get_project(kitchen, "kitchen"))
    assert conversations.undistilled(kitchen, channel) == []


def test_help_shows_the_line_format(charlie: Cli) -> None:
    for command in (["import"], ["import", "jsonl"]):
        result = charlie(*command, "--help")
        assert result.exit_code == 0 and result.stdout.startswith("Usage: ")
    assert '"text" and "time" are required' in charlie("import", "jsonl", "--help").stdout


def test_a_lone_surrogate_a_nul_or_a_future_time_is_a_broken_line(
    charlie: Cli, kitchen: Home, tmp_path: Path
) -> None:
    path = tmp_path / "h.jsonl"
    lines = [
        json.dumps(HISTORY[0]),
        '{"id": "b", "speaker": "Sam", "text": "lone \\ud800 surrogate", "time": "2023-01-01"}',
        json.dumps({"id": "c", "speaker": "Sam", "text": "nul \x00 here", "time": "2023-01-01"}),
        json.dumps({"id": "d", "speaker": "Sam", "text": "far", "time": "9999-12-31T23:59:59Z"}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = charlie("import", "jsonl", str(path), "-p", "kitchen")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        "Imported 1 message into project kitchen (3 lines skipped)."
    )
    assert "line 2: \"text\" holds '\\ud800', which is not text" in result.stdout
    assert 'line 3: "text" holds a NUL character' in result.stdout
    assert 'line 4: "time" "9999-12-31T23:59:59Z" is in the future' in result.stdout


@pytest.mark.sqlite_only
def test_an_index_that_runs_out_of_room_says_every_message_was_stored(
    charlie: Cli, kitchen: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charlie.retrieval import index_file

    assert charlie("reindex").exit_code == 0  # the index file exists, with its tables
    real_connect = index_file.connect

    def cramped(path: Path) -> Any:  # the index's disk is nearly full: SQLite's own error
        db = real_connect(path)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages + 4}")
        return db

    monkeypatch.setattr(index_file, "connect", cramped)
    kitchen.close()
    many = [
        {
            "id": f"m{n}",
            "speaker": "Sam",
            "text": f"Note {n}: " + "tiles and grout " * 10,
            "time": f"2023-05-08T13:{n // 60:02d}:{n % 60:02d}Z",
        }
        for n in range(200)
    ]
    result = charlie("import", "jsonl", str(write(tmp_path / "h.jsonl", many)), "-p", "kitchen")
    assert result.exit_code != 0
    said = result.output
    assert "200 messages were stored in project kitchen; they are safe in charlie.db" in said
    assert "indexing them for recall stopped" in said and "full" in said.lower()
    assert "charlie reindex" in said
    with sqlite3.connect(kitchen.settings.db_path) as db:
        assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 200
