"""The tool trace is a typed contract: one JSON shape for the web stream, the stored trace,
the CLI and Discord; old stored traces still read; an unknown kind fails loudly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llm_double import ScriptedLLMServer
from support.trace_examples import EXAMPLES
from web_support import PASSWORD, events, signed_in

from charlie import conversations, projects
from charlie.adapters.cli.chat import trace_line as cli_line
from charlie.adapters.discord.text import trace_line as discord_line
from charlie.home import Home
from charlie.notes import files as notes
from charlie.trace import (
    GUARDS,
    KINDS,
    Called,
    Loaded,
    Moded,
    Preloaded,
    Step,
    Stopped,
    UnknownStep,
    from_json,
    to_json,
)
from charlie.users import ensure_user, set_password


def test_the_examples_cover_every_kind_and_guard() -> None:
    assert {step.type for step in EXAMPLES} == set(KINDS)
    assert {s.guard for s in EXAMPLES if isinstance(s, Stopped)} == set(GUARDS)


@pytest.mark.parametrize("step", EXAMPLES, ids=lambda s: s.type)
def test_every_step_round_trips_through_json(step: Step) -> None:
    data = json.loads(json.dumps(to_json(step)))
    assert data["type"] == step.type
    assert from_json(data) == step


def test_a_search_step_carries_its_hits_as_fields() -> None:
    data = to_json(EXAMPLES[4])
    assert data == {
        "type": "tool_call",
        "name": "search_notes",
        "arguments": {"query": "worktops"},
        "ok": True,
        "summary": "2 notes",
        "ms": 12.5,
        "writes": False,
        "guard": None,
        "hits": [
            {
                "key": "kitchen/worktops",
                "title": "Worktop decision",
                "score": 0.8234,
                "snippet": "We decided on oak…",
            },
            {
                "key": "kitchen/oiling",
                "title": "Oiling schedule",
                "score": 0.41,
                "snippet": "Every spring…",
            },
        ],
        "count": 2,
        "by": "model",
    }


@pytest.mark.parametrize(
    "data",
    [
        {"type": "thinking", "text": "hmm"},
        {"categories": []},
        {"type": "guard", "guard": "tired", "detail": "x"},
        {
            "type": "tool_call",
            "name": "now",
            "arguments": {},
            "ok": True,
            "summary": "x",
            "guard": "sleepy",
        },
        {"type": "load", "ok": True},
        {"type": "mode", "mode": "telepathy", "reason": "x"},
    ],
)
def test_a_step_this_charlie_does_not_know_fails_loudly(data: dict[str, Any]) -> None:
    with pytest.raises(UnknownStep):
        from_json(data)


@pytest.mark.parametrize("render", [cli_line, discord_line])
def test_the_cli_and_discord_render_every_kind_and_refuse_an_unknown_one(render: Any) -> None:
    for step in EXAMPLES:
        line = render(step)
        assert line is None or isinstance(line, str)
    with pytest.raises(AssertionError):
        render({"type": "tool_call", "name": "now"})  # a dict is not a step


def test_the_cli_says_which_look_ups_were_charlies_own_and_which_mode_was_used() -> None:
    own = next(s for s in EXAMPLES if isinstance(s, Called) and s.by == "charlie")
    assert (
        cli_line(own) == "· Charlie looked up: search_notes('oak?') → 1 note: Worktop decision 0.82"
    )
    moded = next(s for s in EXAMPLES if isinstance(s, Moded))
    assert cli_line(moded) == (
        "· tool mode: constrained (auto: the model's tool use failed in 2 answers in a row)"
    )
    assert cli_line(Moded("native", "auto: nothing seen of this model yet")) is None
    assert discord_line(moded) is None


def test_the_cli_lists_the_hits_and_discord_counts_them() -> None:
    assert cli_line(EXAMPLES[4]) == (
        "· search_notes('worktops') → 2 notes: Worktop decision 0.82, Oiling schedule 0.41"
    )
    assert discord_line(EXAMPLES[4]) == "searched notes for 'worktops' → 2 notes"


def test_a_trace_stored_before_hits_is_read_and_served_in_the_new_shape(
    home: Home, llm: ScriptedLLMServer
) -> None:
    """A reply stored by an earlier Charlie: `type`-tagged dicts, hits only in the summary
    text, a loaded category's tools as one string."""
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    kitchen = projects.create_project(home, "Kitchen")
    channel = conversations.shared_channel(home, kitchen)
    old = [
        {"type": "suggested", "categories": ["memory"]},
        {"type": "load", "category": "time", "ok": True, "tools": "now, date_add", "ms": 0.3},
        {
            "type": "tool_call",
            "name": "search_notes",
            "arguments": {"query": "worktops"},
            "ok": True,
            "writes": False,
            "summary": "2 notes: Worktop decision 0.82, Oiling 0.41",
            "ms": 11.0,
        },
        {
            "type": "tool_call",
            "name": "now",
            "arguments": {},
            "ok": False,
            "summary": "refused: repeated call",
            "guard": "duplicate_call",
            "ms": 0.1,
        },
        {"type": "guard", "guard": "max_iterations", "detail": "the limit was reached"},
    ]
    home.db.execute(
        "INSERT INTO messages (conversation_id, project_id, private, role, speaker, content, "
        "created_at, trace) VALUES (?, ?, 0, 'assistant', 'Charlie', 'Oak.', '2026-01-01', ?)",
        (channel.conversation_id, kitchen.id, json.dumps(old)),
    )
    stored = conversations.recent(home, channel, 1)[0].trace
    assert stored == [
        Preloaded(("memory",)),
        Loaded("time", ok=True, tools=("now", "date_add"), ms=0.3),
        Called(
            "search_notes",
            {"query": "worktops"},
            True,
            "2 notes: Worktop decision 0.82, Oiling 0.41",
            11.0,
        ),
        Called("now", {}, False, "refused: repeated call", 0.1, guard="duplicate_call"),
        Stopped("max_iterations", "the limit was reached"),
    ]
    with signed_in("alice") as client:
        served = client.get("/api/channels/kitchen/messages").json()[0]["trace"]
    assert served == [to_json(step) for step in stored]
    assert served[1]["tools"] == ["now", "date_add"] and served[2]["hits"] is None


def test_the_stream_and_the_stored_reply_carry_the_same_trace(
    home: Home, llm: ScriptedLLMServer
) -> None:
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    kitchen = projects.create_project(home, "Kitchen")
    notes.create_note(kitchen, "Worktop decision", "We decided on oak worktops.", ["worktops"])
    llm.tool_calls([("search_notes", {"query": "oak worktops"})])
    llm.tool_calls([("load_tools", {"category": "time"})])
    llm.reply("Oak.")
    with signed_in("alice") as client:
        response = client.post(
            "/api/channels/kitchen/chat", json={"text": "What did we decide about the worktops?"}
        )
        streamed = [data for kind, data in events(response) if kind == "trace"]
        stored = client.get("/api/channels/kitchen/messages").json()[1]["trace"]
    assert streamed == stored
    assert [step["type"] for step in streamed] == ["suggested", "tool_call", "load"]
    search = streamed[1]
    assert search["count"] == 1 and search["summary"] == "1 note"
    assert search["hits"][0]["key"] == "kitchen/worktop-decision"
    assert search["hits"][0]["title"] == "Worktop decision"
    assert "oak" in search["hits"][0]["snippet"]
    assert streamed[2]["tools"] == ["now", "date_add", "days_between", "weekday"]
