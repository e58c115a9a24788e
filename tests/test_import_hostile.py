"""`charlie import chatgpt|claude` given a hostile or damaged export: a conversation nested
300,000 levels deep, or with fields of the wrong type, is named and skipped, the others go in,
and memory stays bounded."""

from __future__ import annotations

import copy
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from charlie.home import Home
from charlie.projects import create_project
from charlie.transfer import chat_exports as exports

FIXTURES = Path(__file__).parent / "fixtures" / "exports"
CHATGPT = FIXTURES / "chatgpt-conversations.json"
CLAUDE = FIXTURES / "claude-conversations.json"
MEMORY_LIMIT = 1 << 30  # bytes of address space the import may take: 1 GiB
DEEP = 300_000  # levels: ijson's paths made this 21 GB and an out-of-memory kill


@pytest.fixture
def kitchen(home: Home) -> Home:
    create_project(home, "Kitchen")
    return home


def fixture(path: Path) -> list[dict[str, Any]]:
    items = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(items, list)
    return items


def chatgpt_export(folder: Path, broken: dict[str, Any]) -> Path:
    """The fixture's two good ChatGPT conversations with `broken` between them."""
    good = fixture(CHATGPT)
    path = folder / "conversations.json"
    path.write_text(json.dumps([good[0], broken, good[4]]), encoding="utf-8")
    return path


def bad_chatgpt(change: str) -> dict[str, Any]:
    """The fixture's kitchen conversation, renamed, with `change` made to it."""
    item = copy.deepcopy(fixture(CHATGPT)[0])
    item |= {"title": "Bad shape", "id": "conv-bad", "conversation_id": "conv-bad"}
    u1 = item["mapping"]["u1"]
    match change:
        case "author a string":
            u1["message"]["author"] = "user"
        case "content a string":
            u1["message"]["content"] = "Oak or marble?"
        case "parts a number":
            u1["message"]["content"]["parts"] = 42
        case "parts an object":
            u1["message"]["content"]["parts"] = {"0": "Oak or marble?"}
        case "role a list":
            u1["message"]["author"]["role"] = ["user"]
        case "metadata a list":
            u1["message"]["metadata"] = []
        case "message a string":
            u1["message"] = "Oak or marble?"
        case "parent a list":
            u1["parent"] = ["sys"]
        case "current_node a list":
            item["current_node"] = ["a3"]
        case "mapping a list":
            item["mapping"] = list(item["mapping"].values())
        case "node a number":
            item["mapping"]["u1"] = 7
    return item


CHATGPT_SHAPES = {
    "author a string": 'message u1: "author" is a string, not an object',
    "content a string": 'message u1: "content" is a string, not an object',
    "parts a number": 'message u1: "content.parts" is a number, not a list',
    "parts an object": 'message u1: "content.parts" is an object, not a list',
    "role a list": 'message u1: "author.role" is a list, not a string',
    "metadata a list": 'message u1: "metadata" is a list, not an object',
    "message a string": 'message u1: "message" is a string, not an object',
    "parent a list": 'message u1: "parent" is a list, not a string',
    "current_node a list": '"current_node" is a list, not a string',
    "mapping a list": '"mapping" is a list, not an object',
    "node a number": "message u1 is a number, not an object",
}


@pytest.mark.parametrize("change", CHATGPT_SHAPES)
def test_a_chatgpt_conversation_of_the_wrong_shape_is_named_and_the_rest_go_in(
    charlie: Cli, kitchen: Home, tmp_path: Path, change: str
) -> None:
    path = chatgpt_export(tmp_path, bad_chatgpt(change))
    result = charlie("import", "chatgpt", str(path), "-p", "kitchen")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "Imported 6 messages from 2 ChatGPT conversations into project kitchen.\n"
        "  2023-11-14  Kitchen worktop: 4 added\n"
        "  2023-11-18  Garden plans: 2 added\n"
        "Skipped 1 conversation:\n"
        f"  Bad shape: {CHATGPT_SHAPES[change]}\n"
    )
    assert result.stderr == ""
    assert kitchen.db.execute("SELECT count(*) FROM messages").fetchone()[0] == 6


def bad_claude(change: str) -> dict[str, Any]:
    """The fixture's Lisbon conversation, renamed, with `change` made to its first message."""
    item = copy.deepcopy(fixture(CLAUDE)[0])
    item |= {"name": "Bad shape", "uuid": "bad-1"}
    first = item["chat_messages"][0]
    match change:
        case "sender a list":
            first["sender"] = ["human"]
        case "text a number":
            first["text"] = 12
        case "content a string":
            first["content"] = "Three days in Lisbon"
        case "content block a string":
            first["content"] = ["Three days in Lisbon"]
        case "block text a list":
            first["content"] = [{"type": "text", "text": ["Three days"]}]
        case "uuid a number":
            first["uuid"] = 5
        case "message a string":
            item["chat_messages"][0] = "Three days in Lisbon"
        case "chat_messages an object":
            item["chat_messages"] = {"0": first}
    return item


CLAUDE_SHAPES = {
    "sender a list": 'message m-1: "sender" is a list, not a string',
    "text a number": 'message m-1: "text" is a number, not a string',
    "content a string": 'message m-1: "content" is a string, not a list',
    "content block a string": 'message m-1: "content" holds a string, not an object',
    "block text a list": 'message m-1: "content.text" is a list, not a string',
    "uuid a number": 'message 1: "uuid" is a number, not a string',
    "message a string": "message 1 is a string, not an object",
    "chat_messages an object": '"chat_messages" is an object, not a list',
}


@pytest.mark.parametrize("change", CLAUDE_SHAPES)
def test_a_claude_conversation_of_the_wrong_shape_is_named_and_the_rest_go_in(
    charlie: Cli, kitchen: Home, tmp_path: Path, change: str
) -> None:
    good = fixture(CLAUDE)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([good[0], bad_claude(change), good[2]]), encoding="utf-8")
    result = charlie("import", "claude", str(path), "-p", "kitchen")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "Imported 4 messages from 2 Claude conversations into project kitchen.\n"
        "  2024-03-01  Trip to Lisbon: 2 added\n"
        "  2024-03-03  Sourdough: 2 added\n"
        "Skipped 1 conversation:\n"
        f"  Bad shape: {CLAUDE_SHAPES[change]}\n"
    )
    assert kitchen.db.execute("SELECT count(*) FROM messages").fetchone()[0] == 4


def test_list_names_what_cannot_be_imported(charlie: Cli, tmp_path: Path) -> None:
    path = chatgpt_export(tmp_path, bad_chatgpt("author a string"))
    result = charlie("import", "chatgpt", str(path), "--list")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "2023-11-14  Kitchen worktop  (4 messages)\n"
        "2023-11-18  Garden plans  (2 messages)\n"
        "2 conversations in this ChatGPT export; 1 cannot be imported:\n"
        '  Bad shape: message u1: "author" is a string, not an object\n'
    )
    listed = json.loads(charlie("import", "chatgpt", str(path), "--list", "--json").stdout)
    assert listed["skipped"] == [
        {
            "conversation": "Bad shape",
            "reason": 'message u1: "author" is a string, not an object',
        }
    ]


# ------------------------------------------------------------------ nested past any bound


def deep_export(folder: Path, depth: int) -> Path:
    """Three conversations; the second holds, in a field Charlie ignores and before its
    title, an array nested `depth` levels deep: about 2 bytes a level."""
    good = fixture(CHATGPT)
    deep = copy.deepcopy(good[0])
    del deep["title"]
    deep["mapping"]["u1"]["message"]["metadata"]["junk"] = "@DEEP@"
    deep |= {"id": "conv-deep", "conversation_id": "conv-deep", "title": "Deep one"}
    text = json.dumps([good[0], deep, good[4]])
    path = folder / "conversations.json"
    path.write_text(text.replace('"@DEEP@"', "[" * depth + "]" * depth), encoding="utf-8")
    return path


DEEP_REASON = (
    f"its JSON nests deeper than {exports.MAX_DEPTH} levels "
    "(at mapping.u1.message.metadata.junk), deeper than any export needs: it was read past, "
    "not imported. Remove that part of the file and import again to add it"
)


def bounded(*args: str) -> subprocess.CompletedProcess[str]:
    """`charlie …` as its own process, as a person would run it, allowed 1 GiB of address
    space and 120 s: an import that grows past that is killed or fails here."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "charlie", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        preexec_fn=limit,
    )


def test_a_conversation_nested_300000_deep_is_refused_in_bounded_memory(
    charlie: Cli, kitchen: Home, tmp_path: Path
) -> None:
    path = deep_export(tmp_path, DEEP)
    assert path.stat().st_size > 2 * DEEP
    listed = bounded("import", "chatgpt", str(path), "--list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert listed.stdout == (
        "2023-11-14  Kitchen worktop  (4 messages)\n"
        "2023-11-18  Garden plans  (2 messages)\n"
        "2 conversations in this ChatGPT export; 1 cannot be imported:\n"
        f"  Deep one: {DEEP_REASON}\n"
    )
    done = bounded("import", "chatgpt", str(path), "-p", "kitchen")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == (
        "Imported 6 messages from 2 ChatGPT conversations into project kitchen.\n"
        "  2023-11-14  Kitchen worktop: 4 added\n"
        "  2023-11-18  Garden plans: 2 added\n"
        "Skipped 1 conversation:\n"
        f"  Deep one: {DEEP_REASON}\n"
    )
    sources = [r[0] for r in kitchen.db.execute("SELECT source_id FROM messages ORDER BY id")]
    assert len(sources) == 6 and not any("conv-deep" in s for s in sources)


def test_a_deep_first_conversation_still_tells_the_service(tmp_path: Path) -> None:
    path = deep_export(tmp_path, exports.MAX_DEPTH + 1)
    items = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps([items[1], items[0]]), encoding="utf-8")
    export = exports.read_export(path)  # which service, told from the deep one's keys
    assert export.service == exports.CHATGPT
    assert [c.title for c in export.conversations] == ["Kitchen worktop"]
    assert export.skipped == [("Deep one", DEEP_REASON)]


def test_depth_and_size_are_bounded_item_by_item(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_limit = "[" * exports.MAX_DEPTH + "]" * exports.MAX_DEPTH
    past = "[" * (exports.MAX_DEPTH + 1) + "]" * (exports.MAX_DEPTH + 1)
    path = tmp_path / "items.json"
    path.write_text(f'[{at_limit}, {past}, {{"a": {past}, "name": "x", "n": [1]}}, 3]')
    with path.open("rb") as stream:
        found = list(exports.json_items(stream))
    nested: Any = found[0]
    for _ in range(exports.MAX_DEPTH - 1):  # built whole, to the last level
        [nested] = nested
    assert nested == []
    assert isinstance(found[1], exports.Refused) and found[1].fields == {}
    assert isinstance(found[2], exports.Refused)
    assert found[2].fields == {"a": None, "name": "x", "n": None}  # read on after the cut
    assert "(at a)" in found[2].why
    assert found[3] == 3
    with path.open("rb") as stream:
        assert sum(1 for _ in exports.skim_items(stream)) == 4

    monkeypatch.setattr(exports, "MAX_VALUES", 10)
    path.write_text('[{"title": "Many", "v": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}, [1, 2]]')
    with path.open("rb") as stream:
        many, small = exports.json_items(stream)
    assert isinstance(many, exports.Refused) and many.fields == {"title": "Many", "v": None}
    assert many.why.startswith("it holds more than 10 JSON values")
    assert small == [1, 2]


def test_what_follows_the_list_is_still_refused(tmp_path: Path) -> None:
    text = json.dumps(fixture(CHATGPT))
    path = tmp_path / "conversations.json"
    path.write_text(text + ' {"more": 1}', encoding="utf-8")
    with pytest.raises(exports.CharlieError, match="is not valid JSON"):
        exports.open_export(path, exports.CHATGPT).check()
    with pytest.raises(exports.CharlieError, match="is not valid JSON"):
        exports.read_export(path, exports.CHATGPT)
