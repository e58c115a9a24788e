"""The distillation quality gate: valid JSON that says nothing never replaces a memory."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from llm_double import ScriptedLLMServer
from support.distilling import is_distillation, judge_says

from charlie import conversations
from charlie.conversations import Channel, shared_channel
from charlie.errors import DistillationError
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.memory.layers import Memory
from charlie.projects import create_project
from charlie.users import User, ensure_user

LONG_SUMMARY = (
    "Alice and Bob are renovating the kitchen of their 1930s house. They chose oak worktops, "
    "white cabinets and a tiled floor, and want the work done before the end of March. The "
    "budget is 12k with a hard limit; the electrician comes first, then the joiner."
)
DECISIONS = ("Oak worktops", "White cabinets", "Tiled floor", "Budget 12k, hard limit")


def answer(
    summary: str = LONG_SUMMARY,
    decisions: tuple[str, ...] = DECISIONS,
    quotes: tuple[tuple[str, str], ...] = (),
) -> str:
    return json.dumps(
        {
            "summary": summary,
            "decisions": list(decisions),
            "quotes": [{"speaker": s, "text": t} for s, t in quotes],
        }
    )


@pytest.fixture
def kitchen(home: Home, llm: ScriptedLLMServer) -> Iterator[tuple[Channel, User, LLMClient]]:
    """A project whose memory already holds a long summary and four decisions."""
    channel = shared_channel(home, create_project(home, "Kitchen"))
    alice = ensure_user(home.db, "alice")
    client = LLMClient(llm.base_url, "test-model", retries=0)
    said = (
        "Bob and I are doing the kitchen of our 1930s house before the end of March: oak "
        "worktops, white cabinets, a tiled floor, budget 12k with a hard limit; the "
        "electrician first, then the joiner."
    )
    conversations.add_message(home, channel, "user", said, user=alice)
    llm.reply(answer())
    distill.distill(home, channel, client)
    llm.default = judge_says(False)  # asked whether a new decision changes a held one: no
    yield channel, alice, client
    client.close()


def refused_twice(
    home: Home,
    llm: ScriptedLLMServer,
    kitchen: tuple[Channel, User, LLMClient],
    said: str,
    reply: str,
) -> str:
    """Send `reply` as both attempts; assert nothing changed; return the recorded error."""
    channel, alice, client = kitchen
    path = channel.project.memory_path  # type: ignore[union-attr]
    before = path.read_bytes()
    conversations.add_message(home, channel, "user", said, user=alice)
    llm.reply(reply)
    llm.reply(reply)
    with pytest.raises(DistillationError, match="not valid twice") as raised:
        distill.distill(home, channel, client)
    assert path.read_bytes() == before
    assert memory.load(home, channel).summary == LONG_SUMMARY
    assert conversations.undistilled(home, channel)[-1].content == said  # still pending
    row = home.db.execute("SELECT status, error FROM distillations ORDER BY id DESC").fetchone()
    assert row["status"] == "failed"
    assert len(llm.requests) == 3  # the fixture's distillation, the answer, the repair
    assert row["error"] == str(raised.value)
    repair = [r for r in llm.requests if is_distillation(r)][-1]["messages"][-1]["content"]
    assert repair.startswith("That answer was not usable: ")
    return str(row["error"])


def test_the_llama_cpp_placeholder_answer_is_refused(
    home: Home, llm: ScriptedLLMServer, kitchen: tuple[Channel, User, LLMClient]
) -> None:
    """What llama.cpp's json_schema mode made a small model write into memory.md."""
    output = '{"summary": "...", "decisions": ["- ..."], "quotes": []}'
    error = refused_twice(home, llm, kitchen, "Tiles arrive Monday.", output)
    assert "the summary '...' is empty or a placeholder" in error
    assert "- ..." not in kitchen[0].project.memory_path.read_text()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("summary", "decisions", "reason"),
    [
        ("   ", DECISIONS, "the summary '' is empty or a placeholder"),
        ("…", DECISIONS, "the summary '…' is empty or a placeholder"),
        ("N/A", DECISIONS, "the summary 'N/A' is empty or a placeholder"),
        ("n/a", DECISIONS, "the summary 'n/a' is empty or a placeholder"),
        ("TBD", DECISIONS, "the summary 'TBD' is empty or a placeholder"),
        ("Summary here.", DECISIONS, "the summary 'Summary here.' is empty or a placeholder"),
        ("<summary>", DECISIONS, "the summary '<summary>' is empty or a placeholder"),
        ("Lorem ipsum dolor sit amet.", DECISIONS, "'Lorem ipsum dolor sit amet.' is empty"),
        (LONG_SUMMARY, ("Oak worktops", "- ..."), "the decision '- ...' is empty or a placeholder"),
        (LONG_SUMMARY, ("Oak worktops", ""), "the decision '' is empty or a placeholder"),
    ],
)
def test_placeholders_are_refused(
    home: Home,
    llm: ScriptedLLMServer,
    kitchen: tuple[Channel, User, LLMClient],
    summary: str,
    decisions: tuple[str, ...],
    reason: str,
) -> None:
    error = refused_twice(home, llm, kitchen, "Tiles arrive Monday.", answer(summary, decisions))
    assert reason in error


def test_a_placeholder_quote_is_refused(
    home: Home, llm: ScriptedLLMServer, kitchen: tuple[Channel, User, LLMClient]
) -> None:
    reply = answer(quotes=(("alice", "..."),))
    error = refused_twice(home, llm, kitchen, "Tiles arrive Monday...", reply)
    assert "the quote '...' is empty or a placeholder" in error


def test_a_copy_of_the_instructions_is_refused(
    home: Home, llm: ScriptedLLMServer, kitchen: tuple[Channel, User, LLMClient]
) -> None:
    copied = distill.SYSTEM_PROMPT.split("\n")[1] + " " + distill.SYSTEM_PROMPT.split("\n")[2]
    error = refused_twice(home, llm, kitchen, "Tiles arrive Monday.", answer(summary=copied))
    assert "it repeats the instructions instead of the conversation" in error


def test_a_summary_shrunk_without_reason_is_refused(
    home: Home, llm: ScriptedLLMServer, kitchen: tuple[Channel, User, LLMClient]
) -> None:
    short = "Kitchen renovation, oak and white."  # 34 characters, under 30% of 252
    error = refused_twice(home, llm, kitchen, "Tiles arrive Monday.", answer(summary=short))
    assert error.endswith(
        "(the summary shrank from 252 to 34 characters; keep what still holds and add what is "
        "new; then the summary shrank from 252 to 34 characters; keep what still holds and add "
        "what is new). The memory was left as it was; it will be tried again after the next "
        "message."
    )
    assert len(LONG_SUMMARY) == 252


def test_decisions_the_model_leaves_out_are_kept(
    home: Home, llm: ScriptedLLMServer, kitchen: tuple[Channel, User, LLMClient]
) -> None:
    """A careless model that drops every decision drops none (issue 22): dropping is not a
    way to change a decision; naming it as superseded is."""
    channel, alice, client = kitchen
    conversations.add_message(home, channel, "user", "Tiles arrive Monday.", user=alice)
    llm.reply(answer(decisions=()))
    result = distill.distill(home, channel, client)
    assert result.attempts == 1 and result.memory.texts == list(DECISIONS)


def test_words_of_forgetting_in_a_message_never_empty_the_memory(
    home: Home, llm: ScriptedLLMServer, kitchen: tuple[Channel, User, LLMClient]
) -> None:
    """A start-over is asked for plainly (`charlie memory start-over`), never read into a
    message: a model that empties the memory on such words is refused, and every decision
    stays."""
    channel, _, _ = kitchen
    text = "Forget the kitchen, we are starting over with the garden."
    error = refused_twice(home, llm, kitchen, text, answer(summary="Planning.", decisions=()))
    assert "the summary shrank from 252 to 9 characters" in error
    assert memory.load(home, channel).texts == list(DECISIONS)


def test_a_refused_answer_is_repaired_with_the_reason(
    home: Home, llm: ScriptedLLMServer, kitchen: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = kitchen
    conversations.add_message(home, channel, "user", "Tiles arrive Monday.", user=alice)
    llm.reply('{"summary": "...", "decisions": ["- ..."], "quotes": []}')
    llm.reply(answer(decisions=(*DECISIONS, "Tiles arrive Monday")))
    result = distill.distill(home, channel, client)
    assert result.attempts == 2
    assert result.memory.texts[-1] == "Tiles arrive Monday"
    repair = [r for r in llm.requests if is_distillation(r)][-1]["messages"][-1]["content"]
    assert repair.startswith(
        "That answer was not usable: the summary '...' is empty or a placeholder."
    )
    row = home.db.execute("SELECT status, attempts FROM distillations ORDER BY id DESC").fetchone()
    assert tuple(row) == ("ok", 2)


def test_a_short_first_memory_and_a_short_summary_pass(home: Home) -> None:
    """The gate judges against the memory being replaced: an empty or short one may get a
    short summary, and ordinary decisions ("None of the red tiles", "2 coats") pass."""
    output = distill._Output.model_validate(
        {"summary": "Kitchen.", "decisions": ["None of the red tiles", "2 coats"], "quotes": []}
    )
    distill.check_quality(output, Memory(), [])
    distill.check_quality(output, Memory("A short summary.", ["a", "b"]), [])


def test_a_batch_the_model_cannot_distill_is_not_asked_for_on_every_turn(
    home: Home, llm: ScriptedLLMServer
) -> None:
    """Against a real small model every turn asked again for the same batch (208 requests in
    108 turns, docs/real-servers.md): after a failure Charlie waits for a cadence of new
    messages, longer after each failure in a row."""
    from support.distilling import is_distillation

    from charlie.chat import turn as chat
    from charlie.projects import create_project
    from charlie.users import ensure_user

    channel = shared_channel(home, create_project(home, "Kitchen", distill_every=2))
    alice = ensure_user(home.db, "alice")
    llm.default = lambda request: (
        json.dumps({"summary": "...", "decisions": ["- ..."], "quotes": []})
        if is_distillation(request)
        else "Noted."
    )
    client = LLMClient(llm.base_url, "test-model")
    asked: list[int] = []
    try:
        for number in range(8):
            before = len(llm.requests)
            list(chat.turn(home, client, channel, alice, f"Message {number}."))
            asked.append(sum(is_distillation(r) for r in llm.requests[before:]))
    finally:
        client.close()
    # Each try is an answer and its one repair (2 requests). Tries after turn 1 wait 2, then
    # 4, then 8 messages (each turn adds 2): turns 1, 2, 4 and 8.
    assert [n > 0 for n in asked] == [True, True, False, True, False, False, False, True]
