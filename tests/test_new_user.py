"""What a new user meets on a fresh clone with the README alone (issue 39, item 8): the
login `root` on a one-person household, adding an account without a terminal, hints that
name the command as it can be run here (./scripts/run, `python -m charlie`), message ids
where the help says they are, and an empty home that does not say its search is incomplete.
The CLI as a person runs it: in-process with exact output, or as a process of its own where
the terminal or PATH is what is tested."""

from __future__ import annotations

import getpass
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Cli
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from support.history import say
from web_support import PASSWORD

from charlie import projects, users
from charlie.adapters.web.app import create_app
from charlie.config import load_settings
from charlie.conversations import shared_channel
from charlie.home import Home
from charlie.retrieval.embeddings import LocalEmbedder
from charlie.retrieval.index import Index

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Logged in as `root`, with no CHARLIE_USER: the login name is who speaks."""
    monkeypatch.delenv("CHARLIE_USER")
    monkeypatch.setattr(getpass, "getuser", lambda: "root")


def add(home: Home, *names: str) -> None:
    for name in names:
        users.add_user(home.db, name, None, is_admin=name == names[0])


# ------------------------------------------------------------------ the login `root`


ONLY_MEMBER = (
    "(Speaking as alice, the household's only member: the login name 'root' has no account. "
    "`export CHARLIE_USER=alice` says so and ends this note.)\n"
)


def test_root_on_a_one_person_household_speaks_as_that_person_and_is_told_once(
    home: Home, as_root: None, llm: ScriptedLLMServer
) -> None:
    add(home, "alice")
    shown = Cli()("memory", "show", "--private")
    assert shown.exit_code == 0, shown.output
    assert shown.stderr == ONLY_MEMBER
    llm.reply("Hello, Alice.")
    chatted = Cli()("chat", "-m", "Hello?", "--private")
    assert chatted.exit_code == 0, chatted.output
    assert chatted.stdout == "Hello, Alice.\n"
    assert chatted.stderr.count("Speaking as alice") == 1
    assert [u.name for u, _ in users.list_users(home.db)] == ["alice"]  # root is no one


def test_root_among_several_is_told_how_to_say_who_they_are_once(
    home: Home, as_root: None, charlie_home: Path
) -> None:
    add(home, "alice", "bob")
    result = Cli()("memory", "show")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: Who is speaking? Your login name 'root' has no account in this household "
        "(alice, bob). Say who you are once for every command with `export CHARLIE_USER=NAME` "
        f'(or user = "NAME" in {charlie_home / "charlie.toml"}), or each time with --user NAME.\n'
    )


def test_a_name_given_on_purpose_is_never_swapped_for_the_only_member(
    home: Home, charlie_home: Path
) -> None:
    add(home, "alice")
    result = Cli()("memory", "show", "--user", "root")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: There is no one named 'root' in this household")


# ------------------------------------------------------------------ no terminal


def charlie_process(*args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m charlie …` as a process of its own, with no terminal at all (a script, a
    container): stdin is `stdin`, and the session has no controlling terminal."""
    return subprocess.run(
        [sys.executable, "-m", "charlie", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"PYTHONPATH": str(ROOT)} | env,
        start_new_session=True,
    )


def test_adding_an_account_without_a_terminal_says_to_use_password_stdin(
    charlie_home: Path,
) -> None:
    done = charlie_process("users", "add", "alice", "--admin", CHARLIE_LAUNCHER="./scripts/run")
    assert done.returncode == 1
    assert done.stderr == (
        "Error: There is no terminal here to type the password at: give it on standard input "
        "instead, e.g. `printf '%s\\n' \"$PASSWORD\" | ./scripts/run users add alice --admin "
        "--password-stdin`.\n"
    )
    added = charlie_process(
        "users", "add", "alice", "--admin", "--password-stdin", stdin="long enough\n"
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout == "Added alice (admin).\n"


# ------------------------------------------------------------------ hints as run here


def test_under_scripts_run_hints_name_scripts_run(
    charlie: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHARLIE_LAUNCHER", "./scripts/run")  # what ./scripts/run sets
    result = charlie("memory", "show", "--user", "carol")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: There is no one named 'carol' in this household: add them with `./scripts/run "
        "users add carol`, or say who you are with --user NAME (or CHARLIE_USER); "
        "`./scripts/run users list` shows who there is.\n"
    )
    assert charlie("projects", "list").stdout == (
        "No projects yet. Create one with `./scripts/run projects create NAME`.\n"
    )


def test_scripts_run_says_how_it_was_started(tmp_path: Path) -> None:
    """The real script, in a copy of the checkout whose .venv is already set up: it passes
    the command as typed (`./scripts/run`) to Charlie in CHARLIE_LAUNCHER."""
    (tmp_path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "run", tmp_path / "scripts" / "run")
    (tmp_path / "pyproject.toml").write_text("")
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    for name, body in (("python", "exit 0"), ("charlie", 'echo "$CHARLIE_LAUNCHER $*"')):
        (venv / "bin" / name).write_text(f"#!/bin/sh\n{body}\n")
        (venv / "bin" / name).chmod(0o755)
    stamp = venv / ".charlie-installed-voice-discord"  # installed, after pyproject.toml
    stamp.touch()
    os.utime(tmp_path / "pyproject.toml", (1, 1))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARLIE_")}
    done = subprocess.run(
        ["./scripts/run", "users", "list"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "./scripts/run users list\n"


def test_python_dash_m_without_charlie_on_path_says_python_dash_m(charlie_home: Path) -> None:
    done = charlie_process("memory", "show", "--user", "carol", PATH="/nonexistent")
    assert done.returncode == 1
    python = shlex.quote(sys.executable)  # not on that PATH: the whole path
    assert done.stderr == (
        f"Error: No one has an account yet: run `{python} -m charlie users add carol --admin` "
        "to make the first one (an administrator), then try again.\n"
    )


# ------------------------------------------------------------------ message ids


def test_the_ids_forget_needs_are_where_its_help_says(home: Home, charlie: Cli) -> None:
    boat = shared_channel(home, projects.create_project(home, "boat"))
    said = say(home, boat, "alice", "The mooring fee went up to 900 a year.", "2023-06-11T09:00Z")
    say(home, boat, "bob", "Blue antifouling paint for the hull.", "2023-06-12T09:00Z")
    helped = " ".join(charlie("forget", "--help").stdout.split())
    assert (
        'Message ids are shown as "message 42" by `charlie recall` and `charlie memory why` '
        '(and as "message_id" by `charlie recall --json`); in the app, each message has its '
        "own Forget button." in helped
    )
    recalled = charlie("recall", "mooring fee", "-p", "boat", "--limit", "1").stdout
    assert recalled == (
        f"1. [2023-06-11 09:00] alice (message {said}): The mooring fee went up to 900 a year.\n"
    )
    why = charlie("memory", "why", "mooring fee", "-p", "boat").stdout.splitlines()
    assert f"Said (message {said}): The mooring fee went up to 900 a year." in why
    assert charlie("forget", str(said), "-p", "boat", "--yes").exit_code == 0


# ------------------------------------------------------------------ an empty home


def test_an_empty_home_does_not_say_its_search_is_incomplete(home: Home) -> None:
    """The server's message indexer opens the index file (marked "filling" until every
    project's notes are in) before any note was checked: with no note anywhere, nothing is
    missing. A note file not in yet is still said."""
    users.add_user(home.db, "alice", PASSWORD, is_admin=True)
    garden = projects.create_project(home, "Garden")
    Index(home, LocalEmbedder())  # the file, as the first opener (any process) makes it
    with TestClient(create_app(load_settings())) as client:
        client.post("/api/login", json={"name": "alice", "password": PASSWORD})
        health = client.get("/api/health").json()["index"]
        assert (health["state"], health["incomplete"]) == ("ready", None)
        notes_dir = garden.path / "notes"
        notes_dir.mkdir(parents=True, exist_ok=True)
        (notes_dir / "roses.md").write_text("# Roses\n\nPrune in March.\n")
        health = client.get("/api/health").json()["index"]
        assert health["state"] == "building"
        assert health["incomplete"] == (
            "The search index is being built from the note files (0 notes in so far): search "
            "results are incomplete until it is done. No note is lost."
        )
        found = client.get("/api/search", params={"q": "roses"}).json()  # checks every file
        assert found["incomplete"] is None and [r["title"] for r in found["results"]] == ["Roses"]
