"""`charlie import chatgpt|claude`: another assistant's export, as the person saw it, stored
once, in time, into one channel."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from charlie import conversations
from charlie.adapters.cli.importing import ProgressBar
from charlie.conversations import private_channel, shared_channel
from charlie.errors import CharlieError, NotFound
from charlie.home import Home
from charlie.memory import batches
from charlie.projects import create_project, get_project
from charlie.transfer import chat_exports as exports
from charlie.transfer import jsonl as importing
from charlie.users import ensure_user

FIXTURES = Path(__file__).parent / "fixtures" / "exports"
CHATGPT = FIXTURES / "chatgpt-conversations.json"
CLAUDE = FIXTURES / "claude-conversations.json"


def zipped(path: Path, folder: Path) -> Path:
    """The export as the service sends it: a zip with conversations.json among other files."""
    out = folder / "export-2024.bin"  # the name says nothing: the content tells
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("user.json", '{"id": "user-1"}')
        archive.writestr("conversations.json", path.read_text(encoding="utf-8"))
    return out


def stored(home: Home) -> list[dict[str, Any]]:
    return [dict(r) for r in home.db.execute("SELECT * FROM messages ORDER BY created_at, id")]


@pytest.fixture
def kitchen(home: Home) -> Home:
    create_project(home, "Kitchen")
    return home


def test_chatgpt_keeps_the_branch_last_seen_in_order() -> None:
    export = exports.read_export(CHATGPT, exports.CHATGPT)
    assert export.service == exports.CHATGPT
    assert [c.title for c in export.conversations] == ["Kitchen worktop", "Garden plans"]
    kitchen = export.conversations[0]
    assert [(m.id, m.role, m.speaker, m.text) for m in kitchen.messages] == [
        ("u1", "user", None, "Oak or marble for the worktop?"),
        ("a1", "assistant", "ChatGPT", "Oak is warmer; marble stains."),
        ("u2", "user", None, "[image]\n\nAnd the price of this oak?"),
        ("a3", "assistant", "ChatGPT", "About 300 a metre."),
    ]
    # the edited question had no time: it takes the one before it, so the order holds
    assert kitchen.messages[2].time == kitchen.messages[1].time
    assert kitchen.created == "2023-11-14T22:13:20.000+00:00"


def test_empty_and_broken_chatgpt_conversations_are_skipped_with_a_reason() -> None:
    export = exports.read_export(CHATGPT)
    assert export.skipped == [
        ("Empty chat", "no messages"),
        ("Broken one", "message nowhere is not in its mapping"),
        ("Looping", "its messages loop back on themselves at l2"),
    ]


def test_claude_text_and_content_blocks() -> None:
    export = exports.read_export(CLAUDE)
    assert export.service == exports.CLAUDE
    [lisbon, sourdough] = export.conversations
    assert (lisbon.title, lisbon.created) == ("Trip to Lisbon", "2024-03-01T09:00:00.000000Z")
    assert [(m.id, m.role, m.speaker, m.text) for m in lisbon.messages] == [
        ("m-1", "user", None, "Three days in Lisbon: where first?"),
        ("m-2", "assistant", "Claude", "Start in Alfama.\n\nThen Belém for the tarts."),
    ]
    assert [m.text for m in sourdough.messages] == [
        "Why is my loaf flat?",
        "Your starter may be weak.",
    ]
    assert export.skipped == [("22222222-bbbb-4000-8000-000000000002", "no messages")]


def test_the_format_is_told_from_the_content(tmp_path: Path) -> None:
    with pytest.raises(CharlieError, match=r"is a Claude export .*`charlie import claude`"):
        exports.read_export(CLAUDE, exports.CHATGPT)
    with pytest.raises(CharlieError, match="is a ChatGPT export"):
        exports.read_export(zipped(CHATGPT, tmp_path), exports.CLAUDE)
    other = tmp_path / "conversations.json"
    other.write_text('[{"id": "x", "messages": []}]')
    with pytest.raises(CharlieError, match='a ChatGPT conversation has "mapping"'):
        exports.read_export(other, exports.CHATGPT)
    other.write_text('{"conversations": []}')
    with pytest.raises(CharlieError, match="should be a list of conversations"):
        exports.read_export(other)
    empty_zip = tmp_path / "e.zip"
    with zipfile.ZipFile(empty_zip, "w") as archive:
        archive.writestr("user.json", "{}")
    with pytest.raises(CharlieError, match=r"zip without conversations\.json"):
        exports.read_export(empty_zip)


def test_a_claude_export_given_as_chatgpt_is_refused(charlie: Cli, kitchen: Home) -> None:
    result = charlie("import", "chatgpt", str(CLAUDE), "-p", "kitchen")
    assert result.exit_code == 1
    assert "is a Claude export" in result.stderr
    assert "charlie import claude" in result.stderr
    assert stored(kitchen) == []


def test_import_chatgpt_zip_into_a_project(charlie: Cli, kitchen: Home, tmp_path: Path) -> None:
    result = charlie("import", "chatgpt", str(zipped(CHATGPT, tmp_path)), "-p", "kitchen")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "Imported 6 messages from 2 ChatGPT conversations into project kitchen.\n"
        "  2023-11-14  Kitchen worktop: 4 added\n"
        "  2023-11-18  Garden plans: 2 added\n"
        "Skipped 3 conversations:\n"
        "  Empty chat: no messages\n"
        "  Broken one: message nowhere is not in its mapping\n"
        "  Looping: its messages loop back on themselves at l2\n"
    )
    rows = stored(kitchen)
    assert [(r["role"], r["speaker"], r["source_id"]) for r in rows] == [
        ("user", "alice", "chatgpt:conv-kitchen:u1"),
        ("assistant", "ChatGPT", "chatgpt:conv-kitchen:a1"),
        ("user", "alice", "chatgpt:conv-kitchen:u2"),
        ("assistant", "ChatGPT", "chatgpt:conv-kitchen:a3"),
        ("user", "alice", "chatgpt:conv-garden:g1"),
        ("assistant", "ChatGPT", "chatgpt:conv-garden:g2"),
    ]
    channel = shared_channel(kitchen, get_project(kitchen, "kitchen"))
    threads = conversations.threads(kitchen, channel)  # each conversation its own thread
    by_title = {t.title: t for t in threads}
    assert {"Kitchen worktop", "Garden plans"} <= set(by_title)
    assert by_title["Kitchen worktop"].source_id == "chatgpt:conv-kitchen"
    assert by_title["Kitchen worktop"].messages == 4 and by_title["Garden plans"].messages == 2
    assert by_title["Kitchen worktop"].created_at.startswith("2023-11-14")
    assert [r["conversation_id"] for r in rows] == [by_title["Kitchen worktop"].id] * 4 + [
        by_title["Garden plans"].id
    ] * 2
    assert rows[0]["created_at"] == "2023-11-14T22:15:00.500+00:00"
    again = charlie("import", "chatgpt", str(zipped(CHATGPT, tmp_path)), "-p", "kitchen")
    assert again.exit_code == 0 and conversations.threads(kitchen, channel) == threads


def test_importing_twice_adds_nothing(charlie: Cli, kitchen: Home) -> None:
    assert charlie("import", "claude", str(CLAUDE), "-p", "kitchen").exit_code == 0
    before = stored(kitchen)
    again = charlie("import", "claude", str(CLAUDE), "-p", "kitchen", "--json")
    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert (report["format"], report["added"], report["already"]) == ("claude", 0, 4)
    assert [c["title"] for c in report["conversations"]] == ["Trip to Lisbon", "Sourdough"]
    assert report["skipped"] == [
        {"conversation": "22222222-bbbb-4000-8000-000000000002", "reason": "no messages"}
    ]
    assert stored(kitchen) == before
    assert [r["source_id"] for r in before][:2] == [
        "claude:11111111-aaaa-4000-8000-000000000001:m-1",
        "claude:11111111-aaaa-4000-8000-000000000001:m-2",
    ]


def test_list_shows_the_conversations_and_imports_nothing(charlie: Cli, home: Home) -> None:
    result = charlie("import", "chatgpt", str(CHATGPT), "--list")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "2023-11-14  Kitchen worktop  (4 messages)\n"
        "2023-11-18  Garden plans  (2 messages)\n"
        "2 conversations in this ChatGPT export; 3 cannot be imported:\n"
        "  Empty chat: no messages\n"
        "  Broken one: message nowhere is not in its mapping\n"
        "  Looping: its messages loop back on themselves at l2\n"
    )
    listed = json.loads(charlie("import", "claude", str(CLAUDE), "--list", "--json").stdout)
    assert listed["conversations"][0] == {
        "id": "11111111-aaaa-4000-8000-000000000001",
        "title": "Trip to Lisbon",
        "created": "2024-03-01T09:00:00.000000Z",
        "messages": 2,
    }
    assert stored(home) == []


def test_by_title_picks_by_substring_or_glob(charlie: Cli, kitchen: Home) -> None:
    listed = charlie("import", "chatgpt", str(CHATGPT), "--list", "--by-title", "GARDEN")
    assert listed.stdout.splitlines()[0] == "2023-11-18  Garden plans  (2 messages)"
    globbed = charlie("import", "claude", str(CLAUDE), "--list", "--by-title", "*lis?on")
    assert globbed.stdout.splitlines()[:2] == [
        "2024-03-01  Trip to Lisbon  (2 messages)",
        "1 conversation in this Claude export; 1 cannot be imported:",
    ]
    result = charlie("import", "claude", str(CLAUDE), "-p", "kitchen", "--by-title", "sour")
    assert result.exit_code == 0, result.output
    assert [r["content"] for r in stored(kitchen)] == [
        "Why is my loaf flat?",
        "Your starter may be weak.",
    ]


def test_private_import_goes_to_that_persons_channel_only(charlie: Cli, home: Home) -> None:
    result = charlie("import", "claude", str(CLAUDE), "--private", "--user", "bob")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "Imported 4 messages from 2 Claude conversations into bob's private channel.\n"
    )
    bob = ensure_user(home.db, "bob")
    alice = ensure_user(home.db, "alice")
    mine = [
        m
        for thread in conversations.thread_channels(home, private_channel(home, bob))
        for m in conversations.recent(home, thread, 10)
    ]
    assert [(m.speaker, m.user_id) for m in mine] == [
        ("bob", bob.id),
        ("Claude", None),
        ("bob", bob.id),
        ("Claude", None),
    ]
    assert conversations.recent(home, private_channel(home, alice), 10) == []
    assert {(r["private"], r["project_id"]) for r in stored(home)} == {(1, None)}


def test_imported_messages_can_be_recalled(charlie: Cli, kitchen: Home) -> None:
    assert charlie("import", "claude", str(CLAUDE), "-p", "kitchen").exit_code == 0
    found = charlie("recall", "tarts", "-p", "kitchen")
    assert found.exit_code == 0, found.output
    assert "Belém" in found.stdout


def test_where_to_import_must_be_said(charlie: Cli, home: Home) -> None:
    result = charlie("import", "claude", str(CLAUDE))
    assert result.exit_code == 1
    assert result.stderr == "Error: Say where the messages go: -p PROJECT, or --private.\n"


# ---------------------------------------------------------------- large exports, streaming


def chatgpt_items() -> list[Any]:
    items = json.loads(CHATGPT.read_text(encoding="utf-8"))
    assert isinstance(items, list)
    return items


def many(count: int) -> list[Any]:
    """`count` copies of the fixture's kitchen conversation, each with its own id and title."""
    kitchen = chatgpt_items()[0]
    return [
        kitchen | {"conversation_id": f"c{n}", "id": f"c{n}", "title": f"Worktop {n}"}
        for n in range(count)
    ]


def test_conversations_come_one_at_a_time_before_the_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(many(400)), encoding="utf-8")  # about 1 MB
    seen: list[exports.Progress] = []
    export = exports.open_export(path, exports.CHATGPT)
    stream = export.conversations(seen.append)
    first = next(stream)
    assert first.title == "Worktop 0" and len(first.messages) == 4
    assert 0 < seen[0].read < seen[0].total == path.stat().st_size  # the rest still unread
    rest = list(stream)
    assert len(rest) == 399 and seen[-1].read == seen[-1].total
    assert [p.conversations for p in seen] == list(range(1, 401))


def test_a_file_cut_short_is_refused_whole(charlie: Cli, kitchen: Home, tmp_path: Path) -> None:
    text = json.dumps(many(50))
    path = tmp_path / "conversations.json"
    path.write_text(text[: len(text) * 2 // 3], encoding="utf-8")  # cut mid-conversation
    result = charlie("import", "chatgpt", str(path), "-p", "kitchen")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path} is not valid JSON (parse error: ")
    assert "near byte" in result.stderr and "Nothing was imported." in result.stderr
    assert stored(kitchen) == []  # not even the conversations before the cut


def test_a_byte_order_mark_and_a_first_unknown_item_are_read_past(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    items = ["not a conversation", {"id": "odd"}, *chatgpt_items()]
    path.write_bytes(b"\xef\xbb\xbf \n" + json.dumps(items).encode())
    export = exports.read_export(path)
    assert export.service == exports.CHATGPT
    assert [c.title for c in export.conversations] == ["Kitchen worktop", "Garden plans"]
    assert export.skipped[:2] == [
        ("conversation 1", "not a JSON object"),
        ("odd", '"mapping" is missing'),
    ]


def test_an_empty_or_bare_file_says_what_it_is(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_text("  \n")
    with pytest.raises(CharlieError, match="is empty"):
        exports.open_export(path)
    path.write_text("[]")
    assert exports.read_export(path, exports.CLAUDE).conversations == []
    with pytest.raises(CharlieError, match="is not a ChatGPT or Claude export"):
        exports.open_export(path)
    with pytest.raises(NotFound, match="There is no file"):
        exports.open_export(tmp_path / "missing.zip")


def test_json_output_keeps_its_counts_and_stderr_stays_quiet(
    charlie: Cli, kitchen: Home, tmp_path: Path
) -> None:
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(many(30)), encoding="utf-8")
    result = charlie("import", "chatgpt", str(path), "-p", "kitchen", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    report = json.loads(result.stdout)
    assert (report["added"], report["already"], len(report["conversations"])) == (120, 0, 30)
    assert len(stored(kitchen)) == 120


def test_the_progress_bar_shows_bytes_conversations_and_messages() -> None:
    screen = io.StringIO()
    with ProgressBar(screen, enabled=True) as bar:
        bar.update(exports.Progress("checking", 500_000, 2_000_000, 10, None))
        bar.last = float("-inf")  # as if a tenth of a second had passed
        bar.stored(exports.ConversationReport(exports.Summary("c", "t", None, 4), report(4)))
        bar.update(exports.Progress("reading", 2_000_000, 2_000_000, 40, 40))
        drawn = screen.getvalue()
    assert drawn.split("\r")[1:3] == [
        "Checking 0.5 MB of 2.0 MB (25%) · 10 conversations",
        "Reading 2.0 MB of 2.0 MB (100%) · 40 of 40 conversations · 4 messages added",
    ]
    assert screen.getvalue().endswith("\r" + " " * len(drawn.split("\r")[2]) + "\r")
    quiet = io.StringIO()
    with ProgressBar(quiet, enabled=False) as bar:
        bar.update(exports.Progress("reading", 1, 2, 1, None))
    assert quiet.getvalue() == ""


def report(added: int) -> importing.ImportReport:
    return importing.ImportReport(added=added)


def test_distill_folds_each_conversation_in_order_and_resumes(
    charlie: Cli, kitchen: Home, llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.distilling import is_distillation, naming_answer

    monkeypatch.setattr(batches, "MAX_BATCH", 2)
    calls: list[str] = []
    failing = {"on": 2}  # the second request fails: an interruption

    def answer(request: dict[str, Any]) -> Any:
        if not is_distillation(request):
            return "?"
        calls.append(str(request["messages"]))
        if len(calls) == failing["on"]:
            return _broken_reply()
        ordinal = ["first", "second", "third", "fourth", "fifth"][len(calls) - 1]
        return naming_answer(request, summary=f"The {ordinal} summary.")

    llm.default = answer
    first = charlie("import", "claude", str(CLAUDE), "-p", "kitchen", "--distill")
    assert first.exit_code == 1, first.output
    assert "about 2 requests to the model" in first.stderr
    assert "run the same import again with --distill (-p kitchen)" in first.stderr
    assert "Lisbon" in calls[0]  # the older conversation first
    channel = shared_channel(kitchen, get_project(kitchen, "kitchen"))
    waiting = [
        m.content
        for t in conversations.thread_channels(kitchen, channel)
        for m in conversations.undistilled(kitchen, t)
    ]
    assert waiting and all("Lisbon" not in text for text in waiting)
    failing["on"] = 0
    again = charlie("import", "claude", str(CLAUDE), "-p", "kitchen", "--distill", "--json")
    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert (report["added"], report["distill_estimate"], report["distillations"]) == (0, 1, 1)
    assert all(
        conversations.undistilled(kitchen, t) == []
        for t in conversations.thread_channels(kitchen, channel)
    )
    assert "The third summary." in charlie("memory", "show", "-p", "kitchen").stdout


def _broken_reply() -> Any:
    from llm_double import ErrorReply

    return ErrorReply(500, "model crashed")
