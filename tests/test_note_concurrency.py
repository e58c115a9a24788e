"""Notes written at the same moment: by several requests of one server, by several threads
and processes, and by a person saving the file in an editor meanwhile. Nothing is lost."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any

import httpx
import pytest
from live_server import live_server, signed_in_client, together
from web_support import PASSWORD

from charlie import projects
from charlie.config import load_settings
from charlie.conversations import shared_channel
from charlie.errors import Conflict
from charlie.home import Home
from charlie.notes import files as notes
from charlie.projects import Project
from charlie.tools import registry as tools
from charlie.tools.builtin import registry
from charlie.tools.registry import ToolContext
from charlie.users import ensure_user, set_password


@pytest.fixture
def kitchen(home: Home) -> Project:
    made = projects.create_project(home, "Kitchen")
    notes.create_note(made, "Plumber", "The plumber comes on Tuesday.", ["home"])
    return made


@pytest.fixture
def server(home: Home, kitchen: Project) -> Iterator[httpx.Client]:
    """A live server and a client signed in as alice."""
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    with live_server() as url, closing(signed_in_client(url, "alice")) as client:
        yield client


def same_session(client: httpx.Client) -> httpx.Client:
    """Another connection of the signed-in person (sign-in is limited; the session is not)."""
    return httpx.Client(
        base_url=client.base_url, cookies=client.cookies, headers=client.headers, timeout=60
    )


def test_notes_created_at_once_with_one_title_are_all_kept(
    server: httpx.Client, kitchen: Project
) -> None:
    clients = [same_session(server) for _ in range(30)]

    def create(i: int) -> httpx.Response:
        return clients[i].post(
            "/api/notes", json={"project": "kitchen", "title": "Groceries", "body": f"list {i}"}
        )

    answers = together(30, create)
    for client in clients:
        client.close()
    assert [a.status_code for a in answers] == [201] * 30, [a.text for a in answers]
    ids = [a.json()["id"] for a in answers]
    assert len(set(ids)) == 30
    files = sorted(notes.notes_dir(kitchen).glob("groceries*.md"))
    assert len(files) == 30
    for answer in answers:  # each answer names the file that holds its own text
        written = notes.get_note(kitchen, answer.json()["name"])
        assert written.body == answer.json()["body"]
    assert sorted(notes.get_note(kitchen, f.stem).body for f in files) == sorted(
        f"list {i}\n" for i in range(30)
    )
    assert not [p for p in notes.notes_dir(kitchen).iterdir() if p.name.startswith(".")]


def test_tags_added_at_once_are_all_kept(server: httpx.Client) -> None:
    clients = [same_session(server) for _ in range(10)]

    def tag(i: int) -> int:
        return (
            clients[i].post("/api/notes/kitchen/plumber/tags", json={"add": [f"t{i}"]}).status_code
        )

    assert together(10, tag) == [200] * 10
    for client in clients:
        client.close()
    tags = server.get("/api/notes/kitchen/plumber").json()["tags"]
    assert sorted(tags) == sorted(["home", *(f"t{i}" for i in range(10))])


def test_appends_by_the_model_from_many_chats_at_once_are_all_kept(kitchen: Project) -> None:
    def append(i: int) -> tools.Outcome:  # each chat has its own connection to the data home
        with Home.open(load_settings()) as home:
            channel = shared_channel(home, projects.get_project(home, "kitchen"))
            context = ToolContext(home, channel, ensure_user(home.db, f"user{i}"))
            tool = registry().tools["append_to_note"]
            return tools.run_tool(tool, context, {"note": "plumber", "text": f"APPEND-{i}"})

    outcomes = together(8, append)
    assert [o.summary for o in outcomes] == ["appended to kitchen/plumber"] * 8
    body = notes.get_note(kitchen, "plumber").body
    assert sorted(line for line in body.splitlines() if line.startswith("APPEND-")) == sorted(
        f"APPEND-{i}" for i in range(8)
    )
    assert body.startswith("The plumber comes on Tuesday.")


APPENDER = """
import sys
from charlie import projects
from charlie.notes import files as notes
from charlie.config import load_settings
from charlie.home import Home
with Home.open(load_settings()) as home:
    kitchen = projects.get_project(home, "kitchen")
    for i in range(15):
        notes.append_to_note(kitchen, "plumber", f"{sys.argv[1]}-{i}")
"""


def test_appends_from_two_processes_are_all_kept(kitchen: Project) -> None:
    runs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, who], stderr=subprocess.PIPE)
        for who in ("web", "discord")
    ]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err.decode()
    lines = notes.get_note(kitchen, "plumber").body.splitlines()
    expected = [f"{who}-{i}" for who in ("web", "discord") for i in range(15)]
    assert sorted(line for line in lines if "-" in line) == sorted(expected)


def hand_edit_after_first_read(
    monkeypatch: pytest.MonkeyPatch, project: Project, name: str, edit: Callable[[str], str]
) -> list[str]:
    """Make a person save note `name` in an editor just after Charlie's first read of it,
    before Charlie writes; returns the texts each read saw."""
    reads: list[str] = []
    real_get = notes.get_note

    def get_then_person_saves(project_: Project, name_: str) -> notes.Note:
        note = real_get(project_, name_)
        reads.append(note.body)
        if len(reads) == 1:
            note.path.write_text(edit(note.path.read_text()))
        return note

    monkeypatch.setattr(notes, "get_note", get_then_person_saves)
    return reads


def test_a_hand_edit_during_an_append_is_kept(
    kitchen: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = hand_edit_after_first_read(
        monkeypatch, kitchen, "plumber", lambda text: text + "\nHAND-EDIT from Obsidian\n"
    )
    written = notes.append_to_note(kitchen, "plumber", "APPENDED by Charlie")
    assert len(reads) == 2  # read again after the person's save, and appended to that
    body = kitchen.path.joinpath("notes", "plumber.md").read_text()
    assert "HAND-EDIT from Obsidian" in body and "APPENDED by Charlie" in body
    assert written.body.index("HAND-EDIT") < written.body.index("APPENDED")


def test_a_hand_edit_during_tagging_is_kept(
    kitchen: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    hand_edit_after_first_read(
        monkeypatch, kitchen, "plumber", lambda text: text.replace("Tuesday", "Wednesday")
    )
    notes.tag_note(kitchen, "plumber", add=["urgent"])
    monkeypatch.undo()
    note = notes.get_note(kitchen, "plumber")
    assert note.body == "The plumber comes on Wednesday.\n"
    assert note.tags == ["home", "urgent"]


def test_a_put_never_overwrites_an_edit_it_did_not_see(
    server: httpx.Client, kitchen: Project
) -> None:
    opened = server.get("/api/notes/kitchen/plumber").json()
    path = notes.notes_dir(kitchen) / "plumber.md"
    path.write_text(path.read_text().replace("Tuesday", "Friday"))  # saved by hand meanwhile
    refused = server.put(
        "/api/notes/kitchen/plumber",
        json={"body": "Typed in the app.", "base_sha256": opened["sha256"]},
    )
    assert refused.status_code == 409
    assert "changed" in refused.json()["error"] and "not saved" in refused.json()["error"]
    assert "Friday" in path.read_text() and "Typed in the app." not in path.read_text()

    current = server.get("/api/notes/kitchen/plumber").json()
    saved = server.put(
        "/api/notes/kitchen/plumber",
        json={"body": "Typed in the app.", "base_sha256": current["sha256"]},
    )
    assert saved.status_code == 200, saved.text
    assert saved.json()["body"] == "Typed in the app.\n"
    assert saved.json()["sha256"] != current["sha256"]
    assert saved.json()["sha256"] == server.get("/api/notes/kitchen/plumber").json()["sha256"]


def test_a_put_with_its_base_refuses_a_hand_edit_between_read_and_write(
    kitchen: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = notes.get_note(kitchen, "plumber").sha256
    hand_edit_after_first_read(monkeypatch, kitchen, "plumber", lambda t: t + "\nBY HAND\n")
    with pytest.raises(Conflict, match="was changed"):
        notes.update_note(kitchen, "plumber", body="from the editor", base_sha256=base)
    assert "BY HAND" in notes.notes_dir(kitchen).joinpath("plumber.md").read_text()


def test_a_note_with_windows_line_ends_can_be_changed(kitchen: Project) -> None:
    path = notes.notes_dir(kitchen) / "crlf.md"
    path.write_bytes(b"---\r\ntitle: Windows\r\n---\r\n\r\nFirst line.\r\n")
    note = notes.get_note(kitchen, "crlf")
    assert notes.update_note(kitchen, "crlf", title="Renamed", base_sha256=note.sha256)
    assert notes.append_to_note(kitchen, "crlf", "Second line.").body == (
        "First line.\n\nSecond line.\n"
    )


def test_a_note_that_keeps_changing_is_left_as_last_saved(
    kitchen: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_get = notes.get_note
    saves = iter(range(100))

    def person_saves_after_every_read(project: Project, name: str) -> notes.Note:
        note = real_get(project, name)
        note.path.write_text(note.path.read_text() + f"\nsave {next(saves)}\n")
        return note

    monkeypatch.setattr(notes, "get_note", person_saves_after_every_read)
    with pytest.raises(Conflict, match="kept changing"):
        notes.tag_note(kitchen, "plumber", add=["lost"])
    text = notes.notes_dir(kitchen).joinpath("plumber.md").read_text()
    assert "save 2" in text and "lost" not in text


def test_changes_wait_for_the_note_lock_kept_outside_the_notes_folder(
    kitchen: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = threading.Event()
    with notes.writing(kitchen):
        worker = threading.Thread(
            target=lambda: (notes.tag_note(kitchen, "plumber", add=["later"]), done.set())
        )
        worker.start()
        assert not done.wait(0.5)  # held off while the lock is held
    worker.join(10)
    assert done.is_set() and notes.get_note(kitchen, "plumber").tags == ["home", "later"]
    assert sorted(p.name for p in notes.notes_dir(kitchen).iterdir()) == ["plumber.md"]
    assert (kitchen.path.parent.parent / "locks" / "notes" / "kitchen.lock").exists()

    monkeypatch.setattr(notes, "LOCK_WAIT", 0.2)
    with notes.writing(kitchen):
        started = time.monotonic()
        with pytest.raises(Conflict, match="Another change to the notes of project kitchen"):
            notes.append_to_note(kitchen, "plumber", "never written")
        assert time.monotonic() - started < 5
    assert "never written" not in notes.get_note(kitchen, "plumber").body


def test_without_hard_links_a_new_note_still_never_replaces_one(
    kitchen: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_hard_links(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_hard_links)
    made = notes.create_note(kitchen, "Plumber", "A second plumber note.")
    assert made.name == "plumber-2"
    assert notes.get_note(kitchen, "plumber").body == "The plumber comes on Tuesday.\n"
    assert notes.get_note(kitchen, "plumber-2").body == "A second plumber note.\n"
    assert sorted(p.name for p in notes.notes_dir(kitchen).iterdir()) == [
        "plumber-2.md",
        "plumber.md",
    ]
