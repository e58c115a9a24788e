import re
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import Cli
from llm_double import ScriptedLLMServer
from support.distilling import distill_answer, is_distillation

COMMANDS = [
    [],
    ["chat"],
    ["projects"],
    ["projects", "create"],
    ["projects", "set"],
    ["projects", "list"],
    ["projects", "show"],
    ["memory"],
    ["memory", "show"],
    ["memory", "edit"],
    ["memory", "history"],
    ["memory", "undo"],
    ["distill"],
    ["notes"],
    ["notes", "add"],
    ["notes", "list"],
    ["notes", "show"],
    ["notes", "tag"],
    ["notes", "rm"],
    ["notes", "import"],
    ["reindex"],
    ["search"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "charlie")
def test_every_command_has_help(charlie: Cli, command: list[str]) -> None:
    result = charlie(*command, "--help")
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: ")


def test_one_message_from_the_command_line(
    charlie: Cli, llm: ScriptedLLMServer, charlie_home: Path
) -> None:
    assert charlie("projects", "create", "Kitchen").exit_code == 0
    llm.reply("Hello! Oak is a good choice.")
    result = charlie("chat", "-p", "kitchen", "-m", "Oak or marble?")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Hello! Oak is a good choice.\n"
    assert (charlie_home / "projects" / "kitchen" / "memory.md").is_file()
    assert "Oak or marble?" in str(llm.requests[0]["messages"])


def test_memory_appears_after_the_cadence(
    charlie: Cli, llm: ScriptedLLMServer, charlie_home: Path
) -> None:
    assert charlie("projects", "create", "Kitchen", "--every", "2").exit_code == 0
    llm.reply("Noted.")
    llm.reply(distill_answer(quotes=(("alice", "Oak worktops, final answer."),)))
    result = charlie("chat", "-p", "kitchen", "-m", "Oak worktops, final answer.", "--wait")
    assert result.stderr == (
        "(updating memory from the latest messages…)\n"
        "(memory updated from messages 1-2: 1 decisions, 1 quotes)\n"
    )
    shown = charlie("memory", "show", "-p", "kitchen")
    assert "## Decisions\n\n- Oak worktops _(since " in shown.stdout  # with where it came from
    assert '- alice: "Oak worktops, final answer."' in shown.stdout
    history = charlie("memory", "history", "-p", "kitchen").stdout.splitlines()
    assert [line.split("\t")[2] for line in history] == ["distill", "initial"]
    undone = charlie("memory", "undo", "-p", "kitchen")
    assert re.fullmatch(
        r"Restored memory as it was in revision 1 \(new revision 3\)\.\n", undone.stdout
    )
    assert "Oak worktops" not in charlie("memory", "show", "-p", "kitchen").stdout


def test_one_message_returns_with_its_reply_and_memory_is_updated_in_the_background(
    charlie: Cli, llm: ScriptedLLMServer, charlie_home: Path
) -> None:
    """`charlie chat -m` sat silent for a minute while it distilled (issue 23)."""
    assert charlie("projects", "create", "Kitchen", "--every", "2").exit_code == 0
    llm.reply("Noted.")
    llm.delay(3.0)  # a slow model: the distillation takes a while
    llm.reply(distill_answer(quotes=(("alice", "Oak worktops, final answer."),)))
    began = time.monotonic()
    result = charlie("chat", "-p", "kitchen", "-m", "Oak worktops, final answer.")
    took = time.monotonic() - began
    assert result.exit_code == 0, result.output
    assert result.stdout == "Noted.\n"
    assert "updating memory in the background; `charlie memory show -p kitchen`" in result.stderr
    assert took < 3.0, took  # it did not wait for the distillation
    deadline = time.monotonic() + 60
    while "Oak worktops" not in charlie("memory", "show", "-p", "kitchen").stdout:
        assert time.monotonic() < deadline, "the background distillation never landed"
        time.sleep(0.2)
    assert len(llm.requests) == 2  # one distillation, by the process in the background


def test_a_background_distillation_that_failed_is_said_by_the_next_message(
    charlie: Cli, llm: ScriptedLLMServer, charlie_home: Path
) -> None:
    assert charlie("projects", "create", "Kitchen", "--every", "2").exit_code == 0
    llm.default = lambda request: (
        "this is not the JSON a distillation asks for" if is_distillation(request) else "Noted."
    )
    charlie("chat", "-p", "kitchen", "-m", "Oak worktops.")
    deadline = time.monotonic() + 60
    with sqlite3.connect(charlie_home / "charlie.db") as db:
        while not db.execute("SELECT 1 FROM distillations WHERE status = 'failed'").fetchone():
            assert time.monotonic() < deadline, "the background distillation never ended"
            time.sleep(0.2)
    again = charlie("chat", "-p", "kitchen", "-m", "And the tiles?")
    assert again.stdout == "Noted.\n"
    assert "Note: the last update of this thread's memory failed:" in again.stderr
    assert "`charlie distill` tries now" in again.stderr


def test_llm_down_prints_an_error_and_keeps_the_message(
    charlie: Cli, dead_url: str, charlie_home: Path
) -> None:
    assert charlie("projects", "create", "Kitchen").exit_code == 0
    result = charlie("chat", "-p", "kitchen", "-m", "Are you there?")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: Cannot reach the language model server at {dead_url}")
    assert "Your message is saved" in result.stderr
    assert result.stdout == ""


def test_a_project_that_does_not_exist_is_not_made_on_the_fly(
    charlie: Cli, llm: ScriptedLLMServer, charlie_home: Path
) -> None:
    """`charlie chat -p nosuch -m hi` made a project "Nosuch" (issue 23)."""
    assert charlie("projects", "create", "Kitchen renovation").exit_code == 0
    result = charlie("chat", "-p", "kitchen", "-m", "hi")
    assert result.exit_code == 1 and llm.requests == []
    assert result.stderr == (
        "Error: There is no project 'kitchen'. Did you mean kitchen-renovation? Create it with "
        "`charlie projects create kitchen`, or see `charlie projects list`.\n"
    )
    typo = charlie("chat", "-p", "kitchen-renovatoin", "-m", "hi")
    assert "Did you mean kitchen-renovation?" in typo.stderr
    assert not (charlie_home / "projects" / "kitchen").exists()
    assert not (charlie_home / "projects" / "kitchen-renovatoin").exists()


def test_bad_project_name_is_an_error(charlie: Cli, llm: ScriptedLLMServer) -> None:
    result = charlie("chat", "-p", "../../etc", "-m", "hi")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: '../../etc' is not a valid project name")
    assert llm.requests == []


def test_bad_setting_is_an_error(charlie: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHARLIE_LLM_BASE_URL", "lmstudio")
    result = charlie("projects", "list")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: setting CHARLIE_LLM_BASE_URL: Value error, 'lmstudio'")


def test_projects_create_list_set_show(charlie: Cli) -> None:
    assert charlie("projects").stdout == (
        "No projects yet. Create one with `charlie projects create NAME`.\n"
    )
    created = charlie("projects", "create", "Trip to Oslo", "--style", "Brief.")
    assert created.stdout.startswith("Created project trip-to-oslo at ")
    assert charlie("projects", "set", "trip-to-oslo", "--every", "7").exit_code == 0
    assert charlie("projects", "list").stdout == "trip-to-oslo\tevery 7\tTrip to Oslo\n"
    shown = charlie("projects", "show", "trip-to-oslo").stdout
    assert "style: Brief.\n" in shown and "distill_every: 7\n" in shown
    bad = charlie("projects", "set", "trip-to-oslo", "--every", "0")
    assert bad.exit_code == 1 and bad.stderr.startswith("Error: Cannot set distill_every")
    dup = charlie("projects", "create", "Trip to Oslo")
    assert dup.exit_code == 1 and "already exists" in dup.stderr


def test_memory_of_a_missing_project_is_an_error(charlie: Cli) -> None:
    result = charlie("memory", "show", "-p", "nope")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: There is no project 'nope'. Create it with `charlie projects create nope`, "
        "or see `charlie projects list`.\n"
    )


def test_malformed_memory_file_is_reported_by_show(charlie: Cli, charlie_home: Path) -> None:
    charlie("projects", "create", "Kitchen")
    charlie("memory", "history", "-p", "kitchen")
    path = charlie_home / "projects" / "kitchen" / "memory.md"
    path.write_text("## Recent quotes\nnot a quote line\n")
    result = charlie("memory", "show", "-p", "kitchen")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: memory.md line 2: 'not a quote line' is not a quote.")
    assert path.read_text() == "## Recent quotes\nnot a quote line\n"


def test_private_memory_edit_and_show_are_per_person(charlie: Cli) -> None:
    edited = charlie("memory", "edit", "--private", input="## Summary\nAlice's private plans.\n")
    assert edited.exit_code == 0, edited.output
    assert "Alice's private plans." in charlie("memory", "show", "--private").stdout
    bob = charlie("memory", "show", "--private", "--user", "bob").stdout
    assert "Alice" not in bob and "## Summary" in bob


def test_distill_now(charlie: Cli, llm: ScriptedLLMServer) -> None:
    assert charlie("projects", "create", "Kitchen").exit_code == 0
    llm.reply("Hi.")
    charlie("chat", "-p", "kitchen", "-m", "We picked oak worktops.")
    llm.reply(distill_answer())
    result = charlie("distill", "-p", "kitchen")
    assert result.stdout == "(memory updated from messages 1-2: 1 decisions, 0 quotes)\n"
    again = charlie("distill", "-p", "kitchen")
    assert again.exit_code == 0  # nothing failed: said plainly
    assert again.stdout == (
        "There are no new messages to distill in project kitchen: its memory is up to date.\n"
    )


def test_interactive_chat(charlie: Cli, llm: ScriptedLLMServer) -> None:
    assert charlie("projects", "create", "Kitchen").exit_code == 0
    llm.reply("First answer.")
    llm.reply("Second answer.")
    result = charlie("chat", "-p", "kitchen", input="hello\n/memory\nagain\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "First answer.\n" in result.stdout and "Second answer.\n" in result.stdout
    assert "## Summary" in result.stdout
    assert len(llm.requests) == 2
