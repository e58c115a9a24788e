"""`GET /api/export`: the signed-in person's archive as a download, in-process, with a real
SQLite home: every shared project and their own private channel, never anyone else's."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from web_support import PASSWORD

from charlie import conversations, projects
from charlie.adapters.web.app import create_app
from charlie.config import load_settings
from charlie.conversations import private_channel, shared_channel
from charlie.home import Home
from charlie.notes import files as notes
from charlie.transfer import export as archive
from charlie.users import ensure_user, set_password

BOB_SECRET = "BOB-SECRET: the surprise party is on Friday."
ALICE_WORDS = "ALICE-PRIVATE: remember the library books."


@pytest.fixture
def app_home(home: Home, llm: ScriptedLLMServer) -> Home:
    for name in ("alice", "bob"):
        ensure_user(home.db, name)
        set_password(home.db, name, PASSWORD)
    alice, bob = ensure_user(home.db, "alice"), ensure_user(home.db, "bob")
    garden = projects.create_project(home, "Garden")
    projects.create_project(home, "Kitchen")
    notes.create_note(garden, "Tomatoes", "By the south fence.", ["plants"])
    conversations.add_message(
        home, shared_channel(home, garden), "user", "The hedge wants cutting.", user=bob
    )
    conversations.add_message(home, private_channel(home, alice), "user", ALICE_WORDS, user=alice)
    conversations.add_message(home, private_channel(home, bob), "user", BOB_SECRET, user=bob)
    return home


def test_alice_downloads_the_shared_projects_and_her_own_private_channel(
    alice: TestClient, tmp_path: Path
) -> None:
    answer = alice.get("/api/export")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/zip"
    disposition = answer.headers["content-disposition"]
    assert re.fullmatch(r'attachment; filename="charlie-export-alice-\d{8}\.zip"', disposition)

    with zipfile.ZipFile(io.BytesIO(answer.content)) as made:
        assert made.testzip() is None
        manifest = json.loads(made.read(archive.MANIFEST))
        names = set(made.namelist())
        assert made.read("private/alice.md").decode().count(ALICE_WORDS) == 1
    assert manifest["projects"] == ["garden", "kitchen"]
    assert manifest["private"] == "alice"
    assert manifest["exported_by"] == "alice"
    assert any(n.startswith("projects/garden/notes/") for n in names)
    assert not any("bob" in n and n.startswith("private/") for n in names)
    for member in manifest["files"]:
        assert member["path"] in names

    # What was sent is an archive `charlie restore` accepts as it is.
    saved = tmp_path / "download.zip"
    saved.write_bytes(answer.content)
    assert archive.open_archive(saved).manifest["private"] == "alice"


def test_the_deflated_members_hold_no_word_of_bob_s_channel(alice: TestClient) -> None:
    """The zip's bytes are compressed, so each member is read out and searched too."""
    answer = alice.get("/api/export")
    with zipfile.ZipFile(io.BytesIO(answer.content)) as made:
        for name in made.namelist():
            assert b"BOB-SECRET" not in made.read(name), name
            assert b"surprise party" not in made.read(name), name


def test_the_temporary_archive_is_removed_once_sent(
    alice: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    answer = alice.get("/api/export")
    assert answer.status_code == 200
    assert zipfile.is_zipfile(io.BytesIO(answer.content))
    assert list(scratch.iterdir()) == []


def test_without_a_session_nothing_is_exported(app_home: Home) -> None:
    with TestClient(create_app(load_settings())) as client:
        answer = client.get("/api/export")
    assert answer.status_code == 401
    assert answer.headers["content-type"].startswith("application/json")
    assert b"BOB-SECRET" not in answer.content
