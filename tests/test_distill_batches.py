"""Distillation on a slow, small model: batches whose answer fits the cap, a back-off that
every process honours, and one runaway field that is cut rather than fatal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Cli
from llm_double import ScriptedLLMServer
from support.distilling import distill_answer, is_distillation

from charlie import conversations
from charlie.chat import turn as chat
from charlie.conversations import Channel, shared_channel
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.memory import batches, distill
from charlie.memory import layers as memory
from charlie.projects import create_project, get_project
from charlie.users import User, ensure_user


@pytest.fixture
def client(llm: ScriptedLLMServer) -> Iterator[LLMClient]:
    made = LLMClient(llm.base_url, "test-model", retries=0)
    yield made
    made.close()


def kitchen(home: Home, every: int = 5) -> tuple[Channel, User]:
    project = create_project(home, "Kitchen", distill_every=every)
    return shared_channel(home, project), ensure_user(home.db, "alice")


def test_a_long_backlog_is_distilled_in_batches_the_answer_cap_can_hold(
    charlie: Cli, home: Home, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`charlie distill` once put 29 messages in one request; the answer was cut at the cap
    of 1,024 tokens and refused (issue 21)."""
    channel, alice = kitchen(home, every=1000)
    for number in range(29):
        conversations.add_message(home, channel, "user", f"Point {number}: oak.", user=alice)
    monkeypatch.setenv("CHARLIE_LLM_MAX_TOKENS", "512")
    llm.default = lambda request: distill_answer() if is_distillation(request) else "?"
    capped = LLMClient(llm.base_url, "test-model", max_tokens=512)
    _, _, most = batches.plan(home, channel, capped)  # the memory is empty: as the first
    capped.close()
    result = charlie("distill", "-p", "kitchen")
    assert result.exit_code == 0, result.output
    sent = [r for r in llm.requests if is_distillation(r)]
    assert most < 29 and len(sent) >= -(-29 // most)
    for request in sent:
        told = request["messages"][1]["content"]
        assert told.count("[alice] Point") <= most
    assert len(result.output.strip().splitlines()) == len(sent)  # a line for each batch
    assert conversations.undistilled(home, channel) == []


def test_nothing_to_distill_is_said_plainly(
    charlie: Cli, home: Home, llm: ScriptedLLMServer
) -> None:
    kitchen(home)
    result = charlie("distill", "-p", "kitchen")
    assert result.exit_code == 0
    assert result.output == (
        "There are no new messages to distill in project kitchen: its memory is up to date.\n"
    )
    assert llm.requests == []


def test_the_back_off_after_a_failed_distillation_holds_in_every_process(
    home: Home, llm: ScriptedLLMServer, client: LLMClient
) -> None:
    """Kept per process, it let every new `charlie chat -m` ask again at once (issue 21)."""
    channel, alice = kitchen(home, every=2)
    llm.default = lambda request: (
        json.dumps({"summary": "...", "decisions": [], "quotes": []})
        if is_distillation(request)
        else "Noted."
    )
    list(chat.turn(home, client, channel, alice, "First."))  # 2 messages: tried, fails
    tried = sum(is_distillation(r) for r in llm.requests)
    assert tried == 2  # the answer and its one repair
    for number in range(2):  # each a new process: the back-off is in the database
        with Home.open(home.settings) as again:
            list(chat.turn(again, client, channel, alice, f"Next {number}."))
    assert sum(is_distillation(r) for r in llm.requests) == tried + 2  # only at 2 cadences on
    row = home.db.execute(
        "SELECT distill_failures FROM conversations WHERE id = ?", (channel.conversation_id,)
    ).fetchone()
    assert row[0] == 2
    llm.default = lambda request: distill_answer() if is_distillation(request) else "Noted."
    for number in range(4):
        list(chat.turn(home, client, channel, alice, f"Later {number}."))
    row = home.db.execute(
        "SELECT distill_failed_at, distill_failures FROM conversations WHERE id = ?",
        (channel.conversation_id,),
    ).fetchone()
    assert tuple(row) == (None, 0)  # a distillation that worked clears it
    assert conversations.undistilled(home, channel) == []


def test_one_over_long_field_is_cut_and_the_rest_is_kept(
    home: Home, llm: ScriptedLLMServer, client: LLMClient
) -> None:
    channel, alice = kitchen(home)
    said = "We chose oak. " + "It is lovely. " * 400
    conversations.add_message(home, channel, "user", said, user=alice)
    answer: dict[str, Any] = {
        "summary": "Kitchen. " * 2000,
        "decisions": ["Oak worktops"],
        "quotes": [{"speaker": "alice", "text": said.strip()}],
    }
    llm.reply(json.dumps(answer))
    result = distill.distill(home, channel, client)
    kept = memory.load(home, channel)
    assert result.attempts == 1  # no repair was needed
    assert kept.texts == ["Oak worktops"]
    assert 0 < len(kept.summary) <= distill.LONGEST["summary"]
    assert len(kept.quotes) == 1 and said.startswith(kept.quotes[0].text)
    assert len(kept.quotes[0].text) <= distill.LONGEST["text"]


def test_charlies_own_words_are_never_quoted(
    home: Home, llm: ScriptedLLMServer, client: LLMClient
) -> None:
    channel, alice = kitchen(home)
    conversations.add_message(home, channel, "user", "Oak, definitely oak.", user=alice)
    conversations.add_message(home, channel, "assistant", "Charlie can use the search tool.")
    llm.reply(
        distill_answer(
            quotes=(
                ("Charlie", "Charlie can use the search tool."),
                ("alice", "Oak, definitely oak."),
            )
        )
    )
    result = distill.distill(home, channel, client)
    assert [(q.speaker, q.text) for q in result.memory.quotes] == [
        ("alice", "Oak, definitely oak.")
    ]
    project = get_project(home, "kitchen")
    assert "search tool" not in project.memory_path.read_text()
