"""Decisions that stay true: where each came from, a person's kept as theirs, a revised one
superseded (never lost), one the model drops kept where it was, and memory files from
before provenance read as they are."""

from __future__ import annotations

import json
from datetime import date

import pytest
from conftest import Cli
from llm_double import ScriptedLLMServer
from support.distilling import is_distillation, judge_says

from charlie import conversations
from charlie.conversations import Channel, Message, shared_channel
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.memory.layers import DISTILLED, HAND, Decision, Memory
from charlie.projects import create_project
from charlie.users import User, ensure_user

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)

TODAY = date.today().isoformat()


@pytest.fixture
def kitchen(home: Home) -> tuple[Channel, User]:
    channel = shared_channel(home, create_project(home, "Kitchen", distill_every=1000))
    memory.ensure_file(home, channel)
    return channel, ensure_user(home.db, "alice")


def say(home: Home, channel: Channel, user: User, *texts: str) -> list[Message]:
    return [conversations.add_message(home, channel, "user", t, user=user) for t in texts]


def answer(
    decisions: list[dict[str, object] | str] | None = None,
    superseded: list[dict[str, object]] | None = None,
    summary: str = "The kitchen.",
) -> str:
    return json.dumps(
        {
            "summary": summary,
            "decisions": decisions or [],
            "superseded": superseded or [],
            "quotes": [],
        }
    )


def test_a_decision_says_since_when_who_and_from_which_messages(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User]
) -> None:
    channel, alice = kitchen
    said = say(home, channel, alice, "Shall we do oak?", "Yes, oak worktops it is.")
    llm.reply(answer([{"text": "Oak worktops", "messages": [said[1].id]}]))
    distill.distill(home, channel, client)
    text = channel.project.memory_path.read_text()  # type: ignore[union-attr]
    assert f"- Oak worktops _(since {TODAY} · distilled from message {said[1].id})_" in text
    (decision,) = memory.load(home, channel).decisions
    assert decision == Decision("Oak worktops", TODAY, DISTILLED, (said[1].id,))


def test_the_json_of_charlie_memory_show(
    charlie: Cli, home: Home, kitchen: tuple[Channel, User]
) -> None:
    channel, _ = kitchen
    memory.save(
        home, channel, Memory("S", [Decision("Oak", "2026-11-02", DISTILLED, (4,))]), "distill"
    )
    shown = json.loads(charlie("memory", "show", "-p", "kitchen", "--json").stdout)
    assert shown == {
        "summary": "S",
        "decisions": [
            {"text": "Oak", "since": "2026-11-02", "by": "distilled", "sources": [4], "flag": ""}
        ],
        "quotes": [],
        "superseded": [],
    }


def test_a_plain_line_typed_by_hand_is_the_persons_dated_the_day_it_was_seen(
    home: Home, kitchen: tuple[Channel, User]
) -> None:
    channel, _ = kitchen
    path = channel.project.memory_path  # type: ignore[union-attr]
    path.write_text(path.read_text().replace("_None yet._", "- Budget is 18,000", 1))
    memory.sync_hand_edits(home, channel)
    (decision,) = memory.load(home, channel).decisions
    assert (decision.text, decision.by, decision.since) == ("Budget is 18,000", HAND, TODAY)
    assert "- Budget is 18,000\n" in path.read_text()  # the file stays as the person wrote it


def test_a_model_that_drops_and_rewrites_decisions_changes_none_of_them(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User]
) -> None:
    """Scripted as careless models answer (issue 22): the person's budget survived one
    distillation and was gone at the second; a dropped decision vanished."""
    channel, alice = kitchen
    llm.default = judge_says(False)
    said = say(home, channel, alice, "We go with oak worktops.")
    llm.reply(answer(["Oak worktops"]))
    distill.distill(home, channel, client)
    path = channel.project.memory_path  # type: ignore[union-attr]
    path.write_text(
        path.read_text().replace("## Recent quotes", "- Budget is 18,000\n\n## Recent quotes")
    )
    for round_number in range(3):  # each round drops everything, or rewrites it
        said_now = "the budget came up: 25,000." if round_number == 1 else "the tiles are green"
        say(home, channel, alice, f"Round {round_number}: {said_now}")
        rewritten = ["Walnut worktops", "Budget is 25,000"] if round_number == 1 else []
        llm.reply(answer(rewritten))
        distill.distill(home, channel, client)
    held = memory.load(home, channel)
    assert held.texts[:2] == ["Oak worktops", "Budget is 18,000"]
    assert "Walnut worktops" not in held.texts and "Budget is 25,000" not in held.texts
    assert held.decisions[1].by == HAND and held.decisions[0].sources == (said[0].id,)
    asked = [str(r["messages"][1]["content"]) for r in llm.requests if not is_distillation(r)]
    assert asked == [  # the message names the budget: the model judged it, side by side
        "Earlier decision: Budget is 18,000\n"
        "New message from alice: Round 1: the budget came up: 25,000."
    ]


def test_a_revision_named_by_the_model_supersedes_and_keeps_the_old_one(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User]
) -> None:
    channel, alice = kitchen
    llm.default = judge_says(True)
    first = say(home, channel, alice, "The plumber comes on Tuesday 9 December.")
    llm.reply(
        answer([{"text": "The plumber comes on Tuesday 9 December", "messages": [first[0].id]}])
    )
    distill.distill(home, channel, client)
    moved = say(home, channel, alice, "The plumber moved to Thursday 11 December.")
    llm.reply(
        answer(
            [{"text": "The plumber comes on Thursday 11 December", "messages": [moved[0].id]}],
            [{"decision": "The plumber comes on Tuesday 9 December", "message": moved[0].id}],
        )
    )
    distill.distill(home, channel, client)
    held = memory.load(home, channel)
    assert held.texts == ["The plumber comes on Thursday 11 December"]
    (earlier,) = held.earlier
    assert earlier.text == "The plumber comes on Tuesday 9 December"
    assert (earlier.changed_by, earlier.until, earlier.sources) == (
        moved[0].id,
        TODAY,
        (first[0].id,),
    )
    text = channel.project.memory_path.read_text()  # type: ignore[union-attr]
    assert "## Earlier decisions" in text and f"changed by message {moved[0].id}" in text
    prompt = [r for r in llm.requests if is_distillation(r)][-1]["messages"][1]["content"]
    assert "Tuesday 9 December" in prompt  # the model is shown what held


def test_a_revision_by_a_message_about_something_else_is_refused(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User]
) -> None:
    channel, alice = kitchen
    memory.save(
        home, channel, Memory("", [Decision("The cabinets are dusty blue", by=HAND)]), "hand"
    )
    moved = say(home, channel, alice, "Change of plan: the plumber comes on Thursday.")
    llm.reply(  # a small model names the person's decision as changed by an unrelated message
        answer(
            [{"text": "The plumber comes on Thursday", "messages": [moved[0].id]}],
            [{"decision": "The cabinets are dusty blue", "message": moved[0].id}],
        )
    )
    distill.distill(home, channel, client)
    held = memory.load(home, channel)
    assert held.texts == ["The cabinets are dusty blue", "The plumber comes on Thursday"]
    assert held.earlier == []
    (row,) = home.db.execute("SELECT refused_decisions FROM distillations").fetchall()
    assert "the message names something else" in row[0]


def test_a_revision_the_model_does_not_name_still_supersedes_a_distilled_decision(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User]
) -> None:
    """Qwen 1.5B kept "Tuesday 9 December" beside the new day; a new value replaces it once
    the model, asked with both side by side, says it changes it."""
    channel, alice = kitchen
    llm.default = judge_says(True)
    first = say(home, channel, alice, "The plumber comes on Tuesday 9 December.")
    llm.reply(answer(["The plumber comes on Tuesday 9 December"]))
    distill.distill(home, channel, client)
    say(home, channel, alice, "The plumber moved to Thursday 11 December.")
    llm.reply(
        answer(
            ["The plumber comes on Tuesday 9 December", "The plumber comes on Thursday 11 December"]
        )
    )
    distill.distill(home, channel, client)
    held = memory.load(home, channel)
    assert held.texts == ["The plumber comes on Thursday 11 December"]
    assert [e.text for e in held.earlier] == ["The plumber comes on Tuesday 9 December"]
    assert held.earlier[0].sources == (first[0].id,)


def test_a_suggestion_a_question_or_charlies_words_are_not_decisions(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User]
) -> None:
    channel, alice = kitchen
    asked = say(home, channel, alice, "Should we lay the floor before the cabinets?")
    conversations.add_message(home, channel, "assistant", "Charlie adjusts the project schedule.")
    llm.reply(
        answer(
            [
                {"text": "Lay the floor before the cabinets", "messages": [asked[0].id]},
                "Charlie adjusts the project schedule",
                "The weather is grim",
            ]
        )
    )
    result = distill.distill(home, channel, client)
    assert result.memory.texts == []
    (refused,) = home.db.execute("SELECT refused_decisions FROM distillations").fetchone()
    whys = {r["decision"]: r["why"] for r in json.loads(refused)}
    assert whys == {
        "Lay the floor before the cabinets": "a question, not a decision",
        "Charlie adjusts the project schedule": "not from a person's message",
        "The weather is grim": "not from a person's message",
    }


def test_a_decision_said_twice_is_held_once_with_both_sources(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User]
) -> None:
    channel, alice = kitchen
    one = say(home, channel, alice, "Oak worktops, we agreed.")
    llm.reply(answer(["Oak worktops"]))
    distill.distill(home, channel, client)
    two = say(home, channel, alice, "Again: the oak worktops stay.")
    llm.reply(answer(["The oak worktops"]))
    distill.distill(home, channel, client)
    (decision,) = memory.load(home, channel).decisions
    assert decision.text == "Oak worktops" and decision.sources == (one[0].id, two[0].id)


def test_the_summary_is_rewritten_within_a_bound_never_appended(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, kitchen: tuple[Channel, User]
) -> None:
    channel, alice = kitchen
    colours = ["red", "blue", "green", "grey", "pink"]
    say(home, channel, alice, f"We are doing the kitchen: a corner each in {', '.join(colours)}.")
    old = " ".join(f"The kitchen has a {w} corner." for w in colours)
    llm.reply(answer(summary=old))
    distill.distill(home, channel, client)
    kept = memory.load(home, channel).summary
    assert kept == "The kitchen has a red corner. The kitchen has a blue corner. " + (
        "The kitchen has a green corner."
    )
    say(home, channel, alice, "The tiles arrived.")
    llm.reply(answer(summary=kept + " The tiles arrived today."))
    distill.distill(home, channel, client)
    summary = memory.load(home, channel).summary
    assert summary == (  # what is new kept, the oldest repeated ones cut: 3 sentences
        "The kitchen has a red corner. The kitchen has a blue corner. The tiles arrived today."
    )


def test_a_memory_md_from_before_provenance_reads_and_is_not_rewritten(
    home: Home, kitchen: tuple[Channel, User]
) -> None:
    channel, _ = kitchen
    path = channel.project.memory_path  # type: ignore[union-attr]
    old = (
        "# Kitchen — memory\n\n## Summary\n\nThe kitchen.\n\n## Decisions\n\n- Oak worktops\n"
        '- Budget 12k\n\n## Recent quotes\n\n- alice: "Oak, definitely."\n'
    )
    home.db.execute(
        "INSERT INTO memory_revisions (conversation_id, owner_id, source, layers, file_sha256, "
        "created_at) VALUES (?, NULL, 'distill', ?, NULL, '2026-10-01T10:00:00+00:00')",
        (
            channel.memory_key,
            json.dumps({"summary": "The kitchen.", "decisions": ["Oak worktops"], "quotes": []}),
        ),
    )
    path.write_text(old)
    loaded = memory.load(home, channel)
    assert loaded.texts == ["Oak worktops", "Budget 12k"]
    oak, budget = loaded.decisions
    assert (oak.since, oak.by) == ("2026-10-01", DISTILLED)  # as its first revision says
    assert budget.by == HAND
    assert path.read_text() == old  # reading never rewrites what a person wrote


def test_the_api_and_the_app_editor_keep_provenance_of_what_was_not_changed(
    home: Home, kitchen: tuple[Channel, User]
) -> None:
    from web_support import PASSWORD, signed_in

    from charlie.users import set_password

    channel, _ = kitchen
    set_password(home.db, "alice", PASSWORD)
    memory.save(
        home, channel, Memory("S", [Decision("Oak", "2026-11-02", DISTILLED, (4,))]), "distill"
    )
    with signed_in("alice") as browser:
        saved = browser.put(
            "/api/channels/kitchen/memory",
            json={"summary": "S", "decisions": ["Oak", "Brass handles"], "quotes": []},
        )
    assert saved.status_code == 200, saved.text
    oak, brass = saved.json()["decisions"]
    assert (oak["since"], oak["by"], oak["sources"]) == ("2026-11-02", "distilled", [4])
    assert (brass["since"], brass["by"], brass["sources"]) == (TODAY, "alice", [])
