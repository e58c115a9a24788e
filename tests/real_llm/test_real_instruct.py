"""What a real instruct model makes of Charlie: a note's fact reaches the answer, something
said long ago is found again, no tool-call markup is ever stored, and a distillation is
accepted and clean — with tools offered natively (`auto`) and as constrained steps.

Served by `./scripts/real-llm --model qwen test tests/real_llm/test_real_instruct.py`:
Qwen2.5-Coder-1.5B-Instruct, greedy, with the chat template its GGUF carries (Hermes
<tool_call> calls). Its wording is not judged, only whether the fact asked for is in the
answer (case-insensitive, in any of a few forms) and what the trace and the stored
messages show. Each answer is capped at ANSWER_TOKENS, so a test takes about a minute at
~9 tokens/s on one thread.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from charlie import conversations
from charlie.chat import turn as chat
from charlie.conversations import Channel, Message, shared_channel
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.memory import batches
from charlie.memory import layers as memory
from charlie.notes import files as notes
from charlie.projects import Project, create_project, update_project
from charlie.trace import Called
from charlie.users import User, ensure_user

# Read when this file is imported: the autouse `charlie_home` fixture clears every CHARLIE_*.
MODEL_KIND = os.environ.get("CHARLIE_REAL_LLM_MODEL_KIND", "")

pytestmark = [
    pytest.mark.real_llm,
    pytest.mark.skipif(
        MODEL_KIND != "qwen",
        reason=(
            "needs the instruct model served: run ./scripts/real-llm --model qwen test "
            f"tests/real_llm/test_real_instruct.py (served here: {MODEL_KIND or 'none'})"
        ),
    ),
]

ANSWER_TOKENS = 200
MODES = ["auto", "constrained"]
# What no stored reply may hold: tool-call syntax (Hermes, Mistral, a JSON call), Charlie's
# own data fences, and chat-template markers.
MARKUP = (
    "<tool_call",
    "<function",
    "[TOOL_CALLS]",
    '"name":',
    "<note",
    "<|im_",
    "<tool_result",
    "<tool_response",
    "<lookup",
    "<memory",
)
PLUMBER_NOTE = "Plumber: Dave Rossi comes on Thursday 11 December at 8am to service the boiler."
SPARE_KEY = "By the way, the spare key is hidden under the blue flowerpot by the back door."
FILLER = [
    ("alice", "The boiler made a clanking noise again this morning."),
    ("Charlie", "That clanking is often air in the pipes; bleeding the radiators may help."),
    ("alice", "Can we move the bins to the side passage?"),
    ("Charlie", "Yes, the side passage keeps them out of sight and is near the gate."),
    ("bob", "The school bus now leaves at 7:40 on Mondays."),
    ("Charlie", "Noted: 7:40 on Mondays for the school bus."),
    ("alice", "We should repaint the garden fence before summer."),
    ("Charlie", "A dry weekend in late spring is best for painting the fence."),
    ("bob", "The library books are due back on Friday."),
    ("Charlie", "Friday for the library books, then."),
    ("alice", "The car insurance renewal letter came today."),
    ("Charlie", "Worth comparing quotes before it renews."),
]


@pytest.fixture
def llm(real_server: Any) -> Iterator[LLMClient]:
    """Charlie's client for the served model, answers capped small, no retries."""
    client = LLMClient(real_server.url, "", retries=0, timeout=600, max_tokens=ANSWER_TOKENS)
    yield client
    client.close()


@pytest.fixture
def alice(home: Home) -> User:
    return ensure_user(home.db, "alice")


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    mode: str = request.param
    return mode


def project_in(home: Home, name: str, mode: str) -> Project:
    """A new project whose answers use tool mode `mode` (`auto` as people have it: the
    suite's own setting, `native`, is for the scripted double)."""
    project = create_project(home, name, distill_every=50)
    return update_project(home, project.slug, tool_mode=mode)


def run_turn(
    home: Home, llm: LLMClient, channel: Channel, user: User, text: str
) -> tuple[str, list[Called], list[Any]]:
    """One turn: the stored reply's text, the tool calls of its trace, every event."""
    events = list(chat.turn(home, llm, channel, user, text))
    replies = [e for e in events if isinstance(e, chat.Reply)]
    assert len(replies) == 1, f"no reply stored: {events}"
    reply = replies[0].message.content
    calls = [e.step for e in events if isinstance(e, chat.TraceEvent)]
    return reply, [step for step in calls if isinstance(step, Called)], events


def markup_in(text: str) -> list[str]:
    return [mark for mark in MARKUP if mark.lower() in text.lower()]


def assert_no_markup_stored(home: Home, channel: Channel) -> list[Message]:
    """Every stored reply of `channel` is free of markup; the replies, oldest first."""
    replies = [m for m in conversations.recent(home, channel, 1000) if m.role == "assistant"]
    assert replies, "no reply was stored"
    for reply in replies:
        assert not markup_in(reply.content), f"markup {markup_in(reply.content)}: {reply.content!r}"
    return replies


def describe(calls: list[Called]) -> str:
    return (
        "; ".join(f"{c.name}({c.arguments}) by {c.by}: ok={c.ok} {c.summary!r}" for c in calls)
        or "no tool calls"
    )


def says_any(text: str, *forms: str) -> bool:
    lowered = text.lower()
    return any(form.lower() in lowered for form in forms)


EIGHT = re.compile(r"(?<!\d)8(?!\d)|\beight\b", re.IGNORECASE)  # 8am, 8:00, 8 a.m., eight


def test_a_fact_only_in_a_note_is_answered(
    home: Home, llm: LLMClient, alice: User, mode: str
) -> None:
    project = project_in(home, "House", mode)
    notes.create_note(project, "Plumber visit", PLUMBER_NOTE)
    notes.create_note(project, "Bins", "Bins go out on Tuesday night; recycling every other week.")
    channel = shared_channel(home, project)
    reply, calls, _ = run_turn(home, llm, channel, alice, "When is the plumber coming?")
    trace = describe(calls)
    looked = [c for c in calls if c.name in {"search_notes", "read_note"} and c.ok]
    assert looked, f"the notes were never read ({trace}); reply: {reply!r}"
    assert says_any(reply, "11 December", "December 11", "11th", "Thursday"), (reply, trace)
    assert EIGHT.search(reply), (reply, trace)
    assert_no_markup_stored(home, channel)


def test_something_said_long_ago_is_found_again(
    home: Home, llm: LLMClient, alice: User, mode: str
) -> None:
    """The fact lies 13 messages back, already distilled (so out of the request): only
    `search_conversation` — the model's, or Charlie's own look-up — can bring it back."""
    project = project_in(home, "Household", mode)
    channel = shared_channel(home, project)
    memory.ensure_file(home, channel)
    people = {"alice": alice, "bob": ensure_user(home.db, "bob")}
    conversations.add_message(home, channel, "user", SPARE_KEY, user=people["bob"])
    for speaker, text in FILLER:
        if speaker == "Charlie":
            conversations.add_message(home, channel, "assistant", text)
        else:
            conversations.add_message(home, channel, "user", text, user=people[speaker])
    conversations.mark_distilled(home, channel, conversations.newest_id(home, channel))
    assert list(chat.index_messages(home)) == []  # indexed for recall, without a notice

    reply, calls, _ = run_turn(
        home, llm, channel, alice, "Where did Bob say the spare key is hidden?"
    )
    trace = describe(calls)
    searches = [c for c in calls if c.name == "search_conversation" and c.ok]
    found = [c for c in searches if any("flowerpot" in hit.snippet for hit in c.hits or ())]
    assert found, f"search_conversation did not find the message ({trace}); reply: {reply!r}"
    assert says_any(reply, "flowerpot", "flower pot", "plant pot"), (reply, trace)
    assert_no_markup_stored(home, channel)


def test_no_stored_reply_holds_markup(home: Home, llm: LLMClient, alice: User, mode: str) -> None:
    """Two turns that invite tools (a note to find, then date arithmetic): whatever the model
    wrote to call them, the stored replies are plain answers."""
    project = project_in(home, "Repairs", mode)
    notes.create_note(project, "Plumber visit", PLUMBER_NOTE)
    channel = shared_channel(home, project)
    first, first_calls, _ = run_turn(
        home, llm, channel, alice, "Look up the plumber note: who is the plumber?"
    )
    assert says_any(first, "Dave", "Rossi"), (first, describe(first_calls))
    run_turn(
        home,
        llm,
        channel,
        alice,
        "How many days are there between 2026-12-01 and 2026-12-11? Use the date tools.",
    )
    replies = assert_no_markup_stored(home, channel)
    assert len(replies) == 2


DECISION_TALK = [
    ("alice", "We need to choose the kitchen worktops this week."),
    ("bob", "Laminate is cheap but it chips near the sink."),
    ("alice", "Oak looks warm and we can oil it every year."),
    ("bob", "Fine by me: oak it is, as long as we oil it before we move the kettle back."),
    ("alice", "We decided on oak worktops, then. I'll order them from the timber yard on Monday."),
]


@pytest.mark.parametrize("mode", ["whole", "steps"])
def test_a_distillation_is_accepted_and_clean(home: Home, llm: LLMClient, mode: str) -> None:
    home.settings.distill_mode = mode  # type: ignore[assignment]
    project = create_project(home, "Kitchen", distill_every=50)
    channel = shared_channel(home, project)
    memory.ensure_file(home, channel)
    people = {name: ensure_user(home.db, name) for name in ("alice", "bob")}
    for speaker, text in DECISION_TALK:
        conversations.add_message(home, channel, "user", text, user=people[speaker])
    results = list(batches.distill_all(home, channel, llm))
    assert results, "nothing was distilled"
    assert conversations.undistilled(home, channel) == []
    written = memory.load(home, channel)
    layers = [written.summary, *written.texts, *(q.text for q in written.quotes)]
    assert written.summary.strip(), written
    for text in layers:
        assert not markup_in(text), f"markup {markup_in(text)} in the memory: {written}"
    assert any("oak" in d.lower() for d in written.texts), written.texts
    said = {
        name: memory.normalise(" ".join(t for s, t in DECISION_TALK if s == name))
        for name in people
    }
    for quote in written.quotes:
        speaker = quote.speaker.strip().lower()
        assert speaker in said, f"a quote not said by a person: {quote}"
        assert memory.normalise(quote.text) in said[speaker], f"not what {speaker} said: {quote}"
