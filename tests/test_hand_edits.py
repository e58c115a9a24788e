"""The person's edit wins: after `memory undo --to` brings back what they wrote, and when
they save an edit (by hand in memory.md, or through the API) while a distillation waits on
the model."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from support.distilling import distill_answer, is_distillation
from web_support import PASSWORD, events, signed_in

from charlie import conversations, files
from charlie.config import load_settings
from charlie.conversations import shared_channel
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.projects import create_project, get_project
from charlie.users import ensure_user, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


def memory_file(charlie_home: Path) -> Path:
    return charlie_home / "projects" / "kitchen" / "memory.md"


def chat_and_distill(charlie: Cli, llm: ScriptedLLMServer, said: str, answer: str) -> None:
    """One message and Charlie's reply, then `charlie distill` with the model's `answer`."""
    llm.reply("Noted.")
    assert charlie("chat", "-p", "kitchen", "-m", said).exit_code == 0
    llm.reply(answer)
    result = charlie("distill", "-p", "kitchen")
    assert result.exit_code == 0, result.output


def newest_revision(charlie: Cli) -> tuple[int, str]:
    line = charlie("memory", "history", "-p", "kitchen").stdout.splitlines()[0].split("\t")
    return int(line[0]), line[2]


def test_undo_to_the_persons_revision_keeps_their_summary_and_decisions(
    charlie: Cli, llm: ScriptedLLMServer, charlie_home: Path
) -> None:
    assert charlie("projects", "create", "Kitchen", "--every", "50").exit_code == 0
    chat_and_distill(charlie, llm, "Oak worktops.", distill_answer(summary="The first summary."))
    path = memory_file(charlie_home)
    path.write_text(
        path.read_text()
        .replace("The first summary.", "MY summary, by hand.")
        .replace("- Oak worktops", "- Oak worktops\n- Budget is 12k, hard limit")
    )
    mine, source = newest_revision(charlie)  # `history` records the hand edit
    assert source == "hand_edit"

    # Two rounds later the model has rewritten the summary and left out the budget: a
    # person's decision is theirs, and it stays (issue 22: it was gone at the second round).
    chat_and_distill(charlie, llm, "Tiles.", distill_answer(summary="Round two."))
    chat_and_distill(charlie, llm, "White.", distill_answer(summary="White tiles for the kitchen."))
    assert "White tiles for the kitchen." in path.read_text()
    kept = memory.parse(path.read_text()).decisions
    budget = next(d for d in kept if d.text == "Budget is 12k, hard limit")
    assert budget.by == memory.HAND  # typed into the file: the person's, by hand

    undone = charlie("memory", "undo", "-p", "kitchen", "--to", str(mine))
    assert undone.stdout.startswith(f"Restored memory as it was in revision {mine} ")
    chat_and_distill(
        charlie,
        llm,
        "Handles are brass.",
        distill_answer(summary="Planning the kitchen.", decisions=("Oak worktops", "Brass")),
    )
    after = memory.parse(path.read_text())
    assert after.summary == "MY summary, by hand. Planning the kitchen."  # theirs, then news
    assert after.texts == ["Oak worktops", "Budget is 12k, hard limit", "Brass"]


def test_undo_to_charlies_revision_is_charlies_text(
    charlie: Cli, llm: ScriptedLLMServer, charlie_home: Path
) -> None:
    assert charlie("projects", "create", "Kitchen", "--every", "50").exit_code == 0
    chat_and_distill(charlie, llm, "Oak.", distill_answer(summary="First summary."))
    charlies, source = newest_revision(charlie)
    assert source == "distill"
    chat_and_distill(charlie, llm, "Tiles.", distill_answer(summary="Second summary."))
    charlie("memory", "undo", "-p", "kitchen", "--to", str(charlies))
    assert "First summary." in memory_file(charlie_home).read_text()
    chat_and_distill(charlie, llm, "White.", distill_answer(summary="Third summary."))
    assert memory.parse(memory_file(charlie_home).read_text()).summary == "Third summary."


def blocking_distillation(
    llm: ScriptedLLMServer, answer: str
) -> tuple[threading.Event, threading.Event]:
    """Make the next distillation request wait: `asked` is set when it arrives, and it is
    answered with `answer` once the test sets `go`."""
    asked, go = threading.Event(), threading.Event()

    def respond(request: dict[str, Any]) -> str:
        assert is_distillation(request)
        asked.set()
        assert go.wait(20), "the test never let the distillation go on"
        return answer

    llm.respond(respond)
    return asked, go


def distill_while(home: Home, llm: ScriptedLLMServer, edit: Callable[[], None]) -> Any:
    """Run a distillation in another thread (its own connection, as another request would)
    and make the person's `edit` while it waits on the model."""
    asked, go = blocking_distillation(
        llm,
        distill_answer(summary="Planning the kitchen.", decisions=("Oak worktops", "Tiled floor")),
    )
    outcome: dict[str, Any] = {}

    def run() -> None:
        client = LLMClient(llm.base_url, "test-model")
        with Home.open(load_settings()) as own:
            channel = shared_channel(own, get_project(own, "kitchen"))
            try:
                outcome["result"] = distill.distill(own, channel, client)
            except Exception as exc:  # handed to the test thread, which re-raises it
                outcome["error"] = exc
            finally:
                client.close()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert asked.wait(20), "the distillation never asked the model"
        edit()
    finally:
        go.set()
        thread.join(30)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def kitchen_with_memory(home: Home, llm: ScriptedLLMServer) -> Path:
    """A project whose memory Charlie wrote, and a new message waiting to be distilled."""
    channel = shared_channel(home, create_project(home, "Kitchen"))
    alice = ensure_user(home.db, "alice")
    conversations.add_message(home, channel, "user", "Oak worktops, and a gas hob.", user=alice)
    llm.reply(distill_answer(summary="The first summary.", decisions=("Oak worktops", "Gas hob")))
    client = LLMClient(llm.base_url, "test-model")
    distill.distill(home, channel, client)
    client.close()
    conversations.add_message(home, channel, "user", "Tiles on the floor.", user=alice)
    assert channel.project is not None
    return channel.project.memory_path


def test_a_hand_edit_saved_while_the_model_thinks_wins(home: Home, llm: ScriptedLLMServer) -> None:
    path = kitchen_with_memory(home, llm)

    def edit_by_hand() -> None:
        path.write_text(
            path.read_text()
            .replace("The first summary.", "Edited while Charlie thought.")
            .replace("- Gas hob", "- Induction hob, not gas")
        )

    result = distill_while(home, llm, edit_by_hand)
    after = memory.parse(path.read_text())
    assert after.summary == "Edited while Charlie thought. Planning the kitchen."
    assert after.texts == ["Oak worktops", "Induction hob, not gas", "Tiled floor"]
    assert result.memory == after
    channel = shared_channel(home, get_project(home, "kitchen"))
    sources = [r.source for r in memory.revisions(home, channel)]
    assert sources[:2] == ["distill", "hand_edit"]  # the edit is its own revision too


def test_an_api_edit_saved_while_the_model_thinks_wins(home: Home, llm: ScriptedLLMServer) -> None:
    path = kitchen_with_memory(home, llm)
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    with signed_in("alice") as client:

        def edit_through_the_api() -> None:
            saved = client.put(
                "/api/channels/kitchen/memory",
                json={"summary": "Typed in the app.", "decisions": ["Oak worktops"], "quotes": []},
            )
            assert saved.status_code == 200, saved.text

        distill_while(home, llm, edit_through_the_api)
        after = client.get("/api/channels/kitchen/memory").json()
    assert after["summary"] == "Typed in the app. Planning the kitchen."
    texts = [d["text"] for d in after["decisions"]]
    assert texts == ["Oak worktops", "Tiled floor"]  # "Gas hob" stays deleted
    assert memory.parse(path.read_text()).summary == "Typed in the app. Planning the kitchen."


def test_an_api_edit_during_the_chat_streams_distillation_wins(
    home: Home, llm: ScriptedLLMServer
) -> None:
    create_project(home, "Kitchen", distill_every=2)
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    llm.reply("Oak it is.")
    asked, go = blocking_distillation(llm, distill_answer(summary="Planning the kitchen."))
    streamed: dict[str, Any] = {}
    with signed_in("alice") as chatting, signed_in("alice") as editing:

        def chat(client: TestClient) -> None:
            streamed["response"] = client.post(
                "/api/channels/kitchen/chat", json={"text": "Oak worktops."}
            )

        thread = threading.Thread(target=chat, args=(chatting,))
        thread.start()
        try:
            assert asked.wait(20)
            saved = editing.put(
                "/api/channels/kitchen/memory",
                json={"summary": "Mine.", "decisions": ["Budget 12k"], "quotes": []},
            )
            assert saved.status_code == 200, saved.text
        finally:
            go.set()
            thread.join(30)
        kinds = events(streamed["response"])
        distilled = [data for kind, data in kinds if kind == "distilled"]
        assert distilled and distilled[0]["memory"]["summary"] == "Mine. Planning the kitchen."
        after = editing.get("/api/channels/kitchen/memory").json()
    assert after["summary"] == "Mine. Planning the kitchen."
    assert [d["text"] for d in after["decisions"]] == ["Budget 12k", "Oak worktops"]


def test_a_hand_edit_saved_at_the_moment_charlie_writes_wins(
    home: Home, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The person's save lands after the distiller read memory.md and before its rename
    (its temp file written and synced): the rename is not made, the merge runs again."""
    path = kitchen_with_memory(home, llm)
    real_write = files.write_atomic
    saves = []

    def person_saves_first(target: Path, text: str, **kwargs: Any) -> str:
        if target == path and not saves:
            saves.append(target)
            path.write_text(path.read_text().replace("The first summary.", "Saved that moment."))
        return real_write(target, text, **kwargs)

    monkeypatch.setattr(memory, "write_atomic", person_saves_first)
    llm.reply(distill_answer(summary="Planning the kitchen.", decisions=("Oak worktops",)))
    client = LLMClient(llm.base_url, "test-model")
    try:
        distill.distill(home, shared_channel(home, get_project(home, "kitchen")), client)
    finally:
        client.close()
    assert saves == [path]
    after = memory.parse(path.read_text())
    assert after.summary == "Saved that moment. Planning the kitchen."
    sources = [
        r.source for r in memory.revisions(home, shared_channel(home, get_project(home, "kitchen")))
    ]
    assert sources[:2] == ["distill", "hand_edit"]


def test_an_api_save_refused_when_memory_md_changed_at_that_moment(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    assert channel.project is not None
    path = channel.project.memory_path
    memory.save(home, channel, memory.Memory(summary="First."), "edit")
    real_write = files.write_atomic

    def person_saves_first(target: Path, text: str, **kwargs: Any) -> str:
        path.write_text(path.read_text().replace("First.", "By hand."))
        return real_write(target, text, **kwargs)

    monkeypatch.setattr(memory, "write_atomic", person_saves_first)
    with pytest.raises(memory.MemoryChanged, match="saved by hand while Charlie was writing"):
        memory.save(home, channel, memory.Memory(summary="From the app."), "edit")
    assert memory.parse(path.read_text()).summary == "By hand."
    assert [r.source for r in memory.revisions(home, channel)] == ["edit"]
