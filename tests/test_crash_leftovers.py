"""What a crash leaves behind: a distillation claim held by a process that was killed, a
reply the model's server cut off mid-stream, a disk that filled up mid-distillation."""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from support.distilling import distill_answer, is_distillation
from web_support import PASSWORD, events, signed_in

from charlie import conversations
from charlie.conversations import Channel, shared_channel
from charlie.errors import DiskFull, LLMUnavailable
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.projects import create_project
from charlie.users import ensure_user, set_password

# ---------------------------------------------------------------- a claim left by kill -9

DISTILLER = textwrap.dedent(
    """
    from charlie.memory import distill
    from charlie.config import load_settings
    from charlie.conversations import shared_channel
    from charlie.home import Home
    from charlie.llm.client import LLMClient
    from charlie.projects import get_project

    settings = load_settings()
    with Home.open(settings) as home:
        channel = shared_channel(home, get_project(home, "kitchen"))
        token = distill.claim(home, channel)
        print("claimed" if token else "refused", flush=True)
        distill.distill(home, channel, LLMClient.from_settings(settings))  # killed in here
    """
)


def test_a_claim_left_by_a_killed_process_is_taken_over_at_once(
    home: Home, llm: ScriptedLLMServer, charlie: Cli
) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    conversations.add_message(home, channel, "user", "Oak.", user=ensure_user(home.db, "alice"))
    asked, go = threading.Event(), threading.Event()

    def stall(request: dict[str, Any]) -> str:
        asked.set()
        go.wait(20)
        return distill_answer()

    llm.respond(stall)
    child = subprocess.Popen(
        [sys.executable, "-c", DISTILLER], stdout=subprocess.PIPE, text=True, env=os.environ
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "claimed\n"
        assert asked.wait(20), "the child never asked the model"
        refused = charlie("distill", "-p", "kitchen")  # the child is alive: its claim holds
        assert refused.stderr == (
            "Error: A distillation of project kitchen is running; try again soon.\n"
        )
        child.send_signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        go.set()
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    llm.reply(distill_answer(summary="Oak worktops for the kitchen."))
    result = charlie("distill", "-p", "kitchen")
    assert result.exit_code == 0, result.output
    assert memory.load(home, channel).summary == "Oak worktops for the kitchen."


def test_a_claim_from_another_machine_waits_for_its_expiry(home: Home) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    elsewhere = '{"boot": "", "host": "another-machine", "pid": 1, "start": ""}'
    home.db.execute(
        "UPDATE conversations SET distill_claim = ?, distill_claimed_at = ? WHERE id = ?",
        (f"token {elsewhere}", conversations.now(), channel.conversation_id),
    )
    assert distill.claim(home, channel) is None


# ---------------------------------------------------------------- a reply cut mid-stream


@pytest.fixture
def alice(home: Home, llm: ScriptedLLMServer) -> Iterator[TestClient]:
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    with signed_in("alice") as client:
        yield client


def kitchen(home: Home, every: int) -> Channel:
    channel = shared_channel(home, create_project(home, "Kitchen", distill_every=every))
    memory.ensure_file(home, channel)
    return channel


@pytest.mark.parametrize("drop", [False, True], ids=["stream-ended", "connection-dropped"])
def test_a_reply_cut_mid_stream_is_kept_marked_and_never_distilled(
    home: Home, llm: ScriptedLLMServer, alice: TestClient, drop: bool
) -> None:
    channel = kitchen(home, every=2)
    llm.reply("Oak is warm and durable, but it needs oiling", chunk_size=10, cut_after=2, drop=drop)
    cut = events(alice.post("/api/channels/kitchen/chat", json={"text": "Oak or marble?"}))
    assert "".join(d["text"] for k, d in cut if k == "token") == "Oak is warm and dura"
    assert [k for k, _ in cut if k in ("reply", "error", "done")] == ["error", "done"]
    error = next(d for k, d in cut if k == "error")
    assert error["kind"] == "LLMUnavailable"
    assert "The reply was cut off" in error["error"] and "Send your message again" in error["error"]

    stored = conversations.recent(home, channel, 10)
    assert [(m.role, m.content, m.incomplete) for m in stored] == [
        ("user", "Oak or marble?", False),
        ("assistant", "Oak is warm and dura", True),
    ]
    assert [m.content for m in conversations.undistilled(home, channel)] == ["Oak or marble?"]

    llm.reply("Oak, then.")  # the answer sees that the last reply was cut off
    llm.default = lambda request: distill_answer() if is_distillation(request) else "?"
    whole = events(alice.post("/api/channels/kitchen/chat", json={"text": "Again please."}))
    assert [k for k, _ in whole if k in ("reply", "error", "distilled")] == ["reply", "distilled"]
    answered = llm.requests[1]["messages"]
    assert answered[2] == {
        "role": "assistant",
        "content": "Oak is warm and dura\n[this reply was cut off before it finished]",
    }
    transcript = next(r for r in llm.requests if is_distillation(r))["messages"][1]["content"]
    assert "] alice: Oak or marble?\n[" in transcript and "] alice: Again please." in transcript
    assert "Oak is warm" not in transcript


def test_a_stream_without_its_end_is_an_error_of_the_client(llm: ScriptedLLMServer) -> None:
    llm.reply("Half a rep", cut_after=1)
    client = LLMClient(llm.base_url, "test-model", retries=0)
    try:
        with pytest.raises(LLMUnavailable, match="ended the stream before the reply was finished"):
            list(client.stream([{"role": "user", "content": "hi"}]))
    finally:
        client.close()


# ---------------------------------------------------------------- a full disk mid-distillation


def full_disk(path: Path, text: str, **options: object) -> str:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def full_database(home: Home, channel: Channel, upto: int) -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL  # as SQLite sets it
    raise full


@pytest.mark.parametrize("where", ["memory.md", "database"])
def test_a_full_disk_mid_distillation_ends_the_stream_with_an_error_and_loses_nothing(
    home: Home,
    llm: ScriptedLLMServer,
    alice: TestClient,
    charlie: Cli,
    where: str,
) -> None:
    channel = kitchen(home, every=2)
    path = channel.project.memory_path  # type: ignore[union-attr]
    before = path.read_bytes()
    llm.reply("Oak it is.")
    llm.reply(distill_answer())
    with pytest.MonkeyPatch.context() as disk:
        if where == "memory.md":
            disk.setattr(memory, "write_atomic", full_disk)
        else:
            disk.setattr(conversations, "mark_distilled", full_database)
        streamed = events(alice.post("/api/channels/kitchen/chat", json={"text": "Oak worktops."}))
    kinds = [k for k, _ in streamed]
    assert kinds[-3:] == ["reply", "error", "done"], kinds
    error = streamed[-2][1]
    assert error["kind"] == "DiskFull"
    assert error["error"].startswith("The memory of project kitchen was not updated: The disk")
    assert "is full" in error["error"] and "free some space" in error["error"]
    assert "folded in after your next message, or at once with /distill" in error["error"]

    assert distill.claim(home, channel) is not None, "the claim was released"
    home.db.execute("UPDATE conversations SET distill_claim = NULL")
    assert path.read_bytes() == before
    assert [m.content for m in conversations.undistilled(home, channel)] == [
        "Oak worktops.",
        "Oak it is.",
    ]
    failed = home.db.execute("SELECT status, error FROM distillations").fetchall()
    assert [(r["status"], "is full" in r["error"]) for r in failed] == [("failed", True)]

    llm.reply(distill_answer(summary="Oak worktops for the kitchen."))
    result = charlie("distill", "-p", "kitchen")
    assert result.exit_code == 0, result.output
    assert memory.load(home, channel).summary == "Oak worktops for the kitchen."


def test_a_claim_that_could_not_be_given_back_is_given_back_by_the_next_turn(
    home: Home, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk can fail the release itself (a write): the claim stays set, and this
    process gives it back at its next claim, so distillation resumes without a restart."""
    from support.storage import sqlite_full

    from charlie.chat import turn as chat

    project = create_project(home, "Kitchen", distill_every=2)
    channel = shared_channel(home, project)
    alice = ensure_user(home.db, "alice")
    client = LLMClient(llm.base_url, "test-model")
    llm.default = lambda request: (
        distill_answer(summary="Oak.") if is_distillation(request) else "Noted."
    )
    error = sqlite_full()

    def full(*args: Any) -> None:
        raise error

    try:
        with monkeypatch.context() as patched:
            patched.setattr(distill, "_unclaim", full)
            with pytest.raises(DiskFull, match="resumes with your next message"):
                list(chat.turn(home, client, channel, alice, "Oak worktops."))
        claimed = "SELECT distill_claim FROM conversations WHERE id = ?"
        assert home.db.execute(claimed, (channel.conversation_id,)).fetchone()[0] is not None

        events_ = list(chat.turn(home, client, channel, alice, "Brass handles."))
    finally:
        client.close()
    assert any(isinstance(event, chat.Distilled) for event in events_)
    assert home.db.execute(claimed, (channel.conversation_id,)).fetchone()[0] is None
