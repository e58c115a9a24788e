"""The web app's smaller hardening: a reserved slug, GETs that write nothing, bad names and
ids, chunked bodies, per-person stream limits, header timeouts, broken project folders, and
settings read from the right home."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from live_server import live_server
from llm_double import ScriptedLLMServer, TextReply
from web_support import PASSWORD, signed_in

from charlie import projects
from charlie.adapters.web import cli as web_cli
from charlie.adapters.web.deps import STREAMS_PER_PERSON
from charlie.config import load_settings
from charlie.conversations import shared_channel
from charlie.errors import InvalidName
from charlie.home import Home
from charlie.memory import layers as memory
from charlie.users import ensure_user, set_password


@pytest.fixture
def accounts(home: Home) -> Home:
    for name in ("alice", "bob"):
        ensure_user(home.db, name)
        set_password(home.db, name, PASSWORD)
    projects.create_project(home, "Auth")
    return home


@pytest.fixture
def alice(accounts: Home) -> Iterator[TestClient]:
    with signed_in("alice") as client:
        yield client


# ---------------------------------------------------------------- the reserved slug


def test_private_is_not_a_project_name(alice: TestClient, accounts: Home, charlie: object) -> None:
    for name in ("Private", "private", "  PRIVATE!  "):
        refused = alice.post("/api/projects", json={"name": name})
        assert refused.status_code == 400, name
        assert "private channel" in refused.json()["error"]
    with pytest.raises(InvalidName):
        projects.create_project(accounts, "Mine", slug="private")

    result = charlie("projects", "create", "Private")  # type: ignore[operator]
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: 'Private' would look like each person's own")


def test_a_private_folder_made_by_hand_does_not_hijack_the_private_channel(
    alice: TestClient, accounts: Home
) -> None:
    folder = accounts.settings.projects_dir / "private"
    folder.mkdir()
    (folder / "project.toml").write_text('name = "Private"\n')
    listed = alice.get("/api/projects").json()
    assert [p["slug"] for p in listed["projects"]] == ["auth"]
    assert listed["problems"] == [{"path": str(folder), "reason": listed["problems"][0]["reason"]}]
    assert "'private' is reserved" in listed["problems"][0]["reason"]
    memory_of = alice.get("/api/channels/private/memory").json()
    assert memory_of["markdown"] is None  # alice's private channel, not the folder


# ---------------------------------------------------------------- GET writes nothing


def test_get_memory_writes_nothing(alice: TestClient, accounts: Home) -> None:
    made = projects.create_project(accounts, "Garden")  # no memory.md yet
    answer = alice.get("/api/channels/garden/memory")
    assert answer.status_code == 200
    assert answer.json() == {
        "summary": "",
        "decisions": [],
        "quotes": [],
        "superseded": [],
        "summary_html": "",
        "markdown": None,
        "error": None,
    }
    assert not made.memory_path.exists()
    assert memory.revisions(accounts, shared_channel(accounts, made)) == []

    created = alice.post("/api/projects", json={"name": "Shed"})  # a POST may write it
    assert created.status_code == 201
    assert (accounts.settings.projects_dir / "shed" / "memory.md").is_file()


# ---------------------------------------------------------------- bad names, ids, bodies


def test_a_note_name_with_nul_is_a_bad_request(alice: TestClient) -> None:
    for answer in (
        alice.get("/api/notes/auth/a%00b"),
        alice.put("/api/notes/auth/a%00b", json={"body": "x"}),
        alice.post("/api/notes/auth/a%00b/tags", json={"add": ["x"]}),
    ):
        assert answer.status_code == 400, answer.text
        assert "control character" in answer.json()["error"]


def test_an_oversized_suggestion_id_is_not_found(alice: TestClient) -> None:
    for action in ("accept", "dismiss"):
        answer = alice.post(f"/api/suggestions/{10**30}/{action}")
        assert answer.status_code == 404, answer.text


def test_a_chunked_body_over_the_limit_gets_413(alice: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"name": "'
        for _ in range(17):
            yield b"x" * (1024 * 1024)
        yield b'"}'

    answer = alice.post(
        "/api/projects", content=chunks(), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 413
    assert answer.json() == {"error": "The request is larger than 16 MB.", "kind": "TooLarge"}


# ---------------------------------------------------------------- broken project folders


def test_a_broken_project_toml_is_a_problem_not_a_crash(
    alice: TestClient, accounts: Home, charlie: object
) -> None:
    broken = accounts.settings.projects_dir / "broken"
    broken.mkdir()
    (broken / "project.toml").write_text("name = \n")
    listed = alice.get("/api/projects").json()
    assert [p["slug"] for p in listed["projects"]] == ["auth"]
    assert listed["problems"][0]["path"] == str(broken)
    assert "is not valid TOML" in listed["problems"][0]["reason"]
    assert [p.slug for p in projects.list_projects(accounts)] == ["auth"]

    result = charlie("projects")  # type: ignore[operator]
    assert result.exit_code == 0
    assert result.stdout == "auth\tevery 5\tAuth\n"
    assert result.stderr.startswith(f"Skipped {broken}: {broken / 'project.toml'} is not valid")


# ---------------------------------------------------------------- settings of another home


def test_load_settings_reads_the_given_homes_file_only(tmp_path: Path, charlie_home: Path) -> None:
    charlie_home.mkdir(parents=True)
    (charlie_home / "charlie.toml").write_text('llm_model = "from-the-env-home"\n')
    other = tmp_path / "other"
    other.mkdir()
    (other / "charlie.toml").write_text('llm_model = "from-the-other-home"\n')
    assert load_settings().llm_model == "from-the-env-home"
    assert load_settings(home=other).llm_model == "from-the-other-home"
    bare = tmp_path / "bare"
    assert load_settings(home=bare).llm_model == ""  # not the env home's file


# ---------------------------------------------------------------- a real server


def test_one_persons_slow_streams_do_not_starve_others(
    accounts: Home, llm: ScriptedLLMServer
) -> None:
    llm.default = lambda request: TextReply("A slow answer, word by word.", 3, 0.2)
    with live_server() as url:
        alice = httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_connections=60))
        bob = httpx.Client(base_url=url, timeout=60)
        for client, name in ((alice, "alice"), (bob, "bob")):
            assert client.post("/api/login", json={"name": name, "password": PASSWORD})
            client.headers["X-CSRF-Token"] = client.cookies["charlie_csrf"]
        start = threading.Barrier(46)
        answers: list[httpx.Response] = []

        def chat() -> None:
            start.wait()
            answers.append(alice.post("/api/channels/auth/chat", json={"text": "Hello?"}))

        threads = [threading.Thread(target=chat) for _ in range(45)]
        for thread in threads:
            thread.start()
        start.wait()
        time.sleep(0.5)  # alice's streams are running
        began = time.monotonic()
        me = bob.get("/api/me")
        waited = time.monotonic() - began
        for thread in threads:
            thread.join()
        alice.close()
        bob.close()
    assert me.status_code == 200 and waited < 1.5, waited
    counted = Counter(a.status_code for a in answers)
    assert counted == {200: STREAMS_PER_PERSON, 429: 45 - STREAMS_PER_PERSON}
    refused = next(a for a in answers if a.status_code == 429).json()
    assert refused == {
        "error": f"alice already has {STREAMS_PER_PERSON} answers on their way; wait for one "
        "to finish (or stop it), then send again.",
        "kind": "TooManyStreams",
    }
    finished = [a for a in answers if a.status_code == 200]
    assert all(a.text.rstrip().endswith("event: done\ndata: {}") for a in finished)


def test_serve_closes_a_connection_whose_headers_never_finish(
    accounts: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_cli, "HEADER_SECONDS", 1)
    with live_server() as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
            slow.sendall(b"GET /api/me HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and no more
            began = time.monotonic()
            assert slow.recv(1024) == b""  # closed by the server
            assert time.monotonic() - began < 5
        assert httpx.get(f"{url}/api/me").status_code == 401  # others are served as usual


def test_serve_closes_a_connection_whose_body_never_finishes(
    accounts: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_cli, "HEADER_SECONDS", 1)
    monkeypatch.setattr(web_cli, "BODY_SECONDS", 1)
    with live_server() as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
            slow.sendall(
                b"POST /api/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                b'\r\nContent-Length: 100\r\n\r\n{"name": '  # and the rest never comes
            )
            began = time.monotonic()
            assert slow.recv(1024) == b""  # closed by the server
            assert time.monotonic() - began < 6
        assert httpx.get(f"{url}/api/me").status_code == 401  # others are served as usual
