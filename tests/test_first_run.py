"""The first run, and the commands that add, remove and restore: nobody is made on the fly.

`charlie chat` on a data home with no one offers, at a terminal, to make the first account
(checked through a real pseudo-terminal with the real command); elsewhere, and for any name
nobody added, it says which command to run. The CLI runs in-process otherwise.
"""

from __future__ import annotations

import getpass
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import Cli
from llm_double import ScriptedLLMServer

from charlie import projects, users
from charlie.adapters.cli import cli
from charlie.adapters.cli import users as users_cli
from charlie.config import load_settings
from charlie.home import Home
from charlie.notes import files as notes


def run(*args: str, input: str | None = None) -> Result:
    """`charlie …` on whatever the data home holds (the `charlie` fixture adds people)."""
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def people() -> list[tuple[str, bool, bool]]:
    with Home.open(load_settings()) as home:
        return [(u.name, u.is_admin, can) for u, can in users.list_users(home.db)]


def test_chat_on_an_empty_home_says_how_to_make_the_first_account(llm: ScriptedLLMServer) -> None:
    result = run("chat", "-m", "Hello?")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: No one has an account yet: run `charlie users add alice --admin` to make the "
        "first one (an administrator), then try again.\n"
    )
    assert people() == []
    assert llm.requests == []
    other = run("chat", "--user", "carol", "-m", "Hello?")
    assert "`charlie users add carol --admin`" in other.stderr
    assert people() == []


def test_an_unknown_name_is_an_error_that_names_the_command(
    charlie: Cli, llm: ScriptedLLMServer
) -> None:
    for args in (
        ("chat", "--user", "carol", "-m", "Hello?"),
        ("memory", "show", "--private", "--user", "carol"),
        ("recall", "anything", "--user", "carol"),
    ):
        result = charlie(*args)
        assert result.exit_code == 1, args
        assert result.stderr == (
            "Error: There is no one named 'carol' in this household: add them with `charlie "
            "users add carol`, or say who you are with --user NAME (or CHARLIE_USER); "
            "`charlie users list` shows who there is.\n"
        ), args
    assert [name for name, _, _ in people()] == ["alice", "bob"]


def test_an_app_over_mcp_acts_only_as_someone_who_was_added(charlie: Cli) -> None:
    result = charlie("mcp", "--user", "carol")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: There is no one named 'carol' in this household")
    assert [name for name, _, _ in people()] == ["alice", "bob"]


def test_the_login_name_is_not_made_into_a_person(
    monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLMServer
) -> None:
    monkeypatch.delenv("CHARLIE_USER")  # the login name (root, say) is who speaks
    monkeypatch.setattr(getpass, "getuser", lambda: "root")
    run("users", "add", "alice", "--admin", "--password-stdin", input="long enough\n")
    run("users", "add", "bob", "--password-stdin", input="long enough\n")
    result = run("chat", "-m", "Hello?")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: Who is speaking? Your login name 'root' has no ")
    assert [name for name, _, _ in people()] == ["alice", "bob"]


def test_at_a_terminal_the_first_account_is_offered(
    monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLMServer
) -> None:
    monkeypatch.setattr(users_cli, "at_terminal", lambda: True)
    llm.reply("Hello, dana.")
    typed = "y\ndana\nshort\nlong enough\nnot the same\nlong enough\nlong enough\n"
    result = run("chat", "-m", "Hello?", input=typed)
    assert result.exit_code == 0, result.output
    assert "No one has an account in this Charlie yet." in result.stderr
    assert "Error: The password must be at least 8 characters long." in result.stderr
    assert "Error: the two passwords differ; try again." in result.stderr
    assert "Added dana (admin). Sign in to the app with that password." in result.stderr
    assert result.stdout.endswith("Hello, dana.\n")
    assert people() == [("dana", True, True)]
    with Home.open(load_settings()) as home:
        assert users.authenticate(home.db, "dana", "long enough") is not None


def test_declining_the_first_account_makes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(users_cli, "at_terminal", lambda: True)
    result = run("chat", "-m", "Hello?", input="n\n")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "Error: Nothing was made. `charlie users add alice --admin` makes the first account.\n"
    )
    assert people() == []


def read_until(fd: int, text: str, seen: bytearray, timeout: float = 20.0) -> str:
    """Read the terminal until `text` has appeared; all that was read so far."""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{text!r} never came; the terminal shows:\n{seen.decode()}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the command ended and closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"{text!r} never came; the terminal shows:\n{seen.decode()}")
            seen += chunk
    return seen.decode()


def test_the_first_run_on_a_real_terminal(charlie_home: Path, llm: ScriptedLLMServer) -> None:
    llm.reply("Hello! Nice to meet you.")
    controller, terminal = pty.openpty()
    command = subprocess.Popen(
        [sys.executable, "-m", "charlie", "chat", "-m", "Hello?"],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env=os.environ.copy(),
        close_fds=True,
    )
    os.close(terminal)
    seen = bytearray()
    try:
        read_until(controller, "Make the first one now (you, as the administrator)? [Y/n]", seen)
        os.write(controller, b"\n")
        read_until(controller, "Your name [alice]:", seen)
        os.write(controller, b"\n")
        read_until(controller, "Password for the app (Enter for none):", seen)
        os.write(controller, b"\n")
        shown = read_until(controller, "Nice to meet you.", seen)
        assert command.wait(timeout=20) == 0
    finally:
        if command.poll() is None:
            command.kill()
        os.close(controller)
    assert "Added alice (admin). Give yourself a password for the app later" in shown
    assert people() == [("alice", True, False)]


# ---------------------------------------------------------------- people


def test_removing_a_person_asks_first_and_says_what_goes(
    charlie: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = charlie("users", "rm", "bob")
    assert refused.exit_code == 1
    assert refused.stderr.endswith("Error: Add --yes to remove bob without being asked.\n")
    monkeypatch.setattr(users_cli, "at_terminal", lambda: True)
    kept = charlie("users", "rm", "bob", input="n\n")
    assert kept.exit_code == 1 and "Error: bob was not removed." in kept.stderr
    assert [name for name, _, _ in people()] == ["alice", "bob"]
    removed = charlie("users", "rm", "bob", input="y\n")
    assert removed.exit_code == 0, removed.output
    assert removed.stderr.startswith(
        "Removing bob deletes their private channel (0 messages) and its memory (0 revisions)"
    )
    assert removed.stdout == "Removed bob.\n"
    assert [name for name, _, _ in people()] == ["alice"]


def test_the_last_administrator_cannot_be_removed_or_demoted(charlie: Cli) -> None:
    result = charlie("users", "rm", "alice", "--yes")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: alice is the household's only administrator: make someone else an "
        "administrator first (`charlie users admin NAME`), then remove them.\n"
    )
    assert charlie("users", "admin", "alice", "--off").exit_code == 1
    assert charlie("users", "admin", "bob").stdout == "bob is an administrator.\n"
    assert charlie("users", "rm", "alice", "--yes").exit_code == 0
    assert people() == [("bob", True, False)]


def test_adding_a_person_with_a_bad_password_adds_no_one(charlie: Cli) -> None:
    result = charlie("users", "add", "carol", "--password-stdin", input="short\n")
    assert result.exit_code == 1
    assert result.stderr == "Error: The password must be at least 8 characters long.\n"
    assert [name for name, _, _ in people()] == ["alice", "bob"]


# ---------------------------------------------------------------- projects and the trash


def test_projects_go_to_the_trash_and_come_back(charlie: Cli, charlie_home: Path) -> None:
    charlie("projects", "create", "Kitchen")
    with Home.open(load_settings()) as home:
        notes.create_note(projects.get_project(home, "kitchen"), "Worktops", "Oak.")
    refused = charlie("projects", "rm", "kitchen")
    assert refused.exit_code == 1
    assert refused.stderr == "Error: Add --yes to delete project kitchen without being asked.\n"
    moved = charlie("projects", "rm", "kitchen", "--yes")
    assert moved.exit_code == 0, moved.output
    assert moved.stdout.startswith(f"Moved project kitchen to the trash ({charlie_home}/trash/")
    assert "`charlie projects restore kitchen` brings it back." in moved.stdout
    assert charlie("projects", "list").stdout.startswith("No projects yet.")
    listed = charlie("trash").stdout.splitlines()
    assert len(listed) == 1 and listed[0].startswith("project\tkitchen.")
    assert listed[0].endswith("\tKitchen")
    assert charlie("projects", "restore", "kitchen").stdout == (
        f"Restored project kitchen at {charlie_home}/projects/kitchen\n"
    )
    assert charlie("trash").stdout == "The trash is empty.\n"
    missing = charlie("projects", "restore", "kitchen")
    assert missing.stderr == (
        "Error: There is no project 'kitchen' in the trash; `charlie trash` lists it.\n"
    )


def test_a_deleted_note_is_listed_and_restored_by_its_id(charlie: Cli) -> None:
    charlie("projects", "create", "Kitchen")
    with Home.open(load_settings()) as home:
        notes.create_note(projects.get_project(home, "kitchen"), "Worktops", "Oak.")
    assert charlie("notes", "rm", "-p", "kitchen", "worktops").exit_code == 0
    line = charlie("trash").stdout.strip()
    kind, trash_id, _, title = line.split("\t")
    assert (kind, title) == ("note", "Worktops")
    assert trash_id.startswith("kitchen/worktops.")
    restored = charlie("trash", "restore", trash_id)
    assert restored.stdout.startswith("Restored note kitchen/worktops (")
    assert "Oak." in charlie("notes", "show", "-p", "kitchen", "worktops").stdout


def test_a_project_can_name_its_own_model(charlie: Cli, charlie_home: Path) -> None:
    charlie("projects", "create", "Kitchen")
    toml = charlie_home / "projects" / "kitchen" / "project.toml"
    charlie("projects", "set", "kitchen", "--model", "qwen3-8b")
    assert 'model = "qwen3-8b"' in toml.read_text()
    assert "model: qwen3-8b" in charlie("projects", "show", "kitchen").stdout
    charlie("projects", "set", "kitchen", "--model", "")
    assert "model" not in toml.read_text()


# ---------------------------------------------------------------- ./scripts/run


RUN = Path(__file__).resolve().parent.parent / "scripts" / "run"


def fake_checkout(tmp_path: Path, pip_fails_for: str = "") -> Path:
    """A checkout with scripts/run and a .venv whose python "installs" in a moment (failing
    for arguments that contain `pip_fails_for`) and whose charlie says what it was given."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "run").write_bytes(RUN.read_bytes())
    (root / "scripts" / "run").chmod(0o755)
    (root / "pyproject.toml").write_text("[project]\nname = 'charlie'\n")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    fails = f'[[ -n "{pip_fails_for}" && "$*" == *"{pip_fails_for}"* ]] && exit 1'
    (bin_dir / "python").write_text(
        f'#!/usr/bin/env bash\necho "pip $*"\nsleep 0.1\n{fails}\nexit 0\n'
    )
    (bin_dir / "charlie").write_text('#!/usr/bin/env bash\necho "charlie ran: $*"\n')
    for name in ("python", "charlie"):
        (bin_dir / name).chmod(0o755)
    return root


def machine_is(tmp_path: Path, system: str, arch: str) -> dict[str, str]:
    """An environment whose `uname` says this machine is `system` on `arch` (scripts/run
    installs the built-in model runtime only where it has a prebuilt wheel)."""
    shims = tmp_path / "shims"
    shims.mkdir(exist_ok=True)
    (shims / "uname").write_text(
        f"#!/usr/bin/env bash\ncase $1 in -s) echo {system} ;; -m) echo {arch} ;; esac\n"
    )
    (shims / "uname").chmod(0o755)
    rest = {k: v for k, v in os.environ.items() if k != "CHARLIE_EXTRAS"}
    return rest | {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}


def test_the_run_script_says_what_it_is_doing_while_it_installs(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path)
    first = subprocess.run(
        [str(root / "scripts" / "run"), "chat", "-m", "hi"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | {"CHARLIE_EXTRAS": "voice"},
    )
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines() == [
        "Installing Charlie and what it needs (with voice); this takes a minute or two …",
        "Charlie is installed. Starting: charlie chat -m hi",
    ]
    assert first.stdout == "charlie ran: chat -m hi\n"
    assert f"pip install -e {root}[voice]" in (root / ".venv" / "install.log").read_text()
    again = subprocess.run(
        [str(root / "scripts" / "run"), "doctor"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | {"CHARLIE_EXTRAS": "voice"},
    )
    assert (again.stderr, again.stdout) == ("", "charlie ran: doctor\n")  # installed: silent


def test_the_run_script_says_when_the_optional_parts_cannot_be_installed(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path, pip_fails_for="[voice,discord,local]")
    result = subprocess.run(
        [str(root / "scripts" / "run"), "doctor"],
        capture_output=True,
        text=True,
        timeout=60,
        env=machine_is(tmp_path, "Linux", "x86_64"),
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Installing Charlie and what it needs (with voice,discord,local)")
    assert lines[1] == (
        "The optional parts [voice,discord,local] could not be installed; installing Charlie "
        "without them …"
    )
    assert lines[2].startswith("Warning: the optional parts [voice,discord,local] could not be")
    assert lines[2].endswith(
        "without the built-in model runtime, Charlie uses a model server (LM Studio, Ollama, "
        "llama-server)."
    )
    assert result.stdout == "charlie ran: doctor\n"


@pytest.mark.parametrize(("system", "arch"), [("Linux", "x86_64"), ("Darwin", "arm64")])
def test_the_run_script_installs_the_builtin_model_runtime_where_it_has_a_wheel(
    tmp_path: Path, system: str, arch: str
) -> None:
    root = fake_checkout(tmp_path)
    result = subprocess.run(
        [str(root / "scripts" / "run"), "doctor"],
        capture_output=True,
        text=True,
        timeout=60,
        env=machine_is(tmp_path, system, arch),
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "Installing Charlie and what it needs (with voice,discord,local); this takes a minute "
        "or two …",
        "Charlie is installed. Starting: charlie doctor",
    ]
    assert (
        f"pip install -e {root}[voice,discord,local]"
        in (root / ".venv" / "install.log").read_text()
    )


def test_the_run_script_says_where_the_builtin_model_runtime_has_no_build(
    tmp_path: Path,
) -> None:
    root = fake_checkout(tmp_path)
    result = subprocess.run(
        [str(root / "scripts" / "run"), "doctor"],
        capture_output=True,
        text=True,
        timeout=60,
        env=machine_is(tmp_path, "Linux", "aarch64"),
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "Installing Charlie and what it needs (with voice,discord); this takes a minute or two …",
        "Note: Charlie's built-in model runtime (charlie[local]) has no prebuilt build for this "
        "machine (Linux-aarch64; there are for Linux x86_64 and macOS arm64), so it is not "
        "installed: Charlie will use a model server (LM Studio, Ollama or llama-server).",
        "Charlie is installed. Starting: charlie doctor",
    ]
    assert f"pip install -e {root}[voice,discord]" in (root / ".venv" / "install.log").read_text()
    assert result.stdout == "charlie ran: doctor\n"
