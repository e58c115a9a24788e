"""Note names no file can have (too long for the file system) are refused with a clear 400,
wherever they come from — a URL, the command line, or the model — and a tool that meets a
file error never cuts the answer short."""

from __future__ import annotations

import errno
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from web_support import PASSWORD, events, signed_in

from charlie import projects
from charlie.conversations import shared_channel
from charlie.errors import InvalidName
from charlie.home import Home
from charlie.notes import files as notes
from charlie.projects import Project
from charlie.tools import registry as tools
from charlie.tools.registry import Result, Tool, ToolContext
from charlie.users import ensure_user, set_password

LONG = "a" * 300


@pytest.fixture
def kitchen(home: Home) -> Project:
    made = projects.create_project(home, "Kitchen")
    notes.create_note(made, "Plumber", "The plumber comes on Tuesday.")
    return made


@pytest.fixture
def alice(home: Home, kitchen: Project) -> Iterator[TestClient]:
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    with signed_in("alice") as client:
        yield client


@pytest.mark.parametrize(
    "name",
    [LONG, "漢" * 70, f"recipes/{LONG}", "/".join(["abc"] * 300)],
    ids=["300 letters", "210 bytes", "a long part in a folder", "1,200 characters"],
)
def test_a_name_too_long_for_a_file_is_refused_on_every_note_route(
    alice: TestClient, name: str
) -> None:
    for method, path, body in [
        ("GET", f"/api/notes/kitchen/{name}", None),
        ("PUT", f"/api/notes/kitchen/{name}", {"body": "x"}),
        ("POST", f"/api/notes/kitchen/{name}/tags", {"add": ["x"]}),
    ]:
        answer = alice.request(method, path, json=body)
        assert answer.status_code == 400, (method, answer.text)
        assert "is not a note name: it is too long" in answer.json()["error"]
        assert "at most 200 bytes" in answer.json()["error"]


def test_the_longest_allowed_name_is_only_not_found(alice: TestClient) -> None:
    answer = alice.get(f"/api/notes/kitchen/{'a' * 200}")
    assert answer.status_code == 404


def test_names_are_checked_in_the_core(kitchen: Project) -> None:
    with pytest.raises(InvalidName, match="it is too long"):
        notes.get_note(kitchen, LONG)
    with pytest.raises(InvalidName, match="control character"):
        notes.get_note(kitchen, "nul\x00byte")
    assert notes.validate_name("a" * 200 + ".md") == "a" * 200


def test_a_long_title_makes_a_file_name_any_file_system_takes(kitchen: Project) -> None:
    title = "𠀀" * 80  # four bytes each in UTF-8: 80 of them would not fit in 255
    first = notes.create_note(kitchen, title, "first")
    second = notes.create_note(kitchen, title, "second")
    assert second.name == f"{first.name}-2"
    for made in (first, second):
        assert len(made.path.name.encode("utf-8")) <= notes.MAX_PART_BYTES + 3
        assert notes.get_note(kitchen, made.name).title == title


def test_the_model_asking_for_a_name_too_long_gets_an_error_and_the_answer_goes_on(
    llm: ScriptedLLMServer, alice: TestClient
) -> None:  # llm first: the app reads the model's address when it is made
    llm.tool_calls([("read_note", {"note": LONG})])
    llm.tool_calls([("append_to_note", {"note": LONG, "text": "x"})])
    llm.reply("There is no such note.")
    response = alice.post(
        "/api/channels/kitchen/chat", json={"text": "Read the note, then write it down in it."}
    )
    found = events(response)
    assert [kind for kind, _ in found][-2:] == ["reply", "done"], found
    steps = [data for kind, data in found if kind == "trace" and data.get("type") == "tool_call"]
    assert [(s["name"], s["ok"]) for s in steps] == [
        ("read_note", False),
        ("append_to_note", False),
    ]
    assert all("is not a note name: it is too long" in s["summary"] for s in steps), [
        s["summary"] for s in steps
    ]
    stored = alice.get("/api/channels/kitchen/messages").json()
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "Read the note, then write it down in it."),
        ("assistant", "There is no such note."),
    ]


def test_a_file_error_in_a_tool_is_an_error_outcome(home: Home, kitchen: Project) -> None:
    def broken(context: ToolContext) -> Result:
        """Read a file that cannot be read."""
        raise OSError(errno.EIO, "Input/output error", "/data/notes/x.md")

    tool = Tool.from_function(broken, "memory")
    context = ToolContext(home, shared_channel(home, kitchen), ensure_user(home.db, "alice"))
    outcome = tools.run_tool(tool, context, {})
    assert outcome.error
    assert outcome.content == "Error: broken could not use a file (Input/output error)."
    assert outcome.summary == "error: broken could not use a file (Input/output error)"


def test_a_tool_that_gives_back_no_result_is_an_error_outcome(home: Home, kitchen: Project) -> None:
    def careless(context: ToolContext) -> Result:
        """Give back a bare string."""
        return "a bare string"  # type: ignore[return-value]

    tool = Tool.from_function(careless, "memory")
    context = ToolContext(home, shared_channel(home, kitchen), ensure_user(home.db, "alice"))
    outcome = tools.run_tool(tool, context, {})
    assert outcome.error
    assert outcome.content == "Error: careless gave back str, not a Result."
