"""The tool modes against the scripted server: constrained steps with Charlie's own look-ups,
tools described in text, and `auto`, which learns from what the model does and keeps it
in the database for every process."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llm_double import ErrorReply, ScriptedLLMServer, ToolCallsReply
from support.distilling import is_step

from charlie import conversations
from charlie.chat import turn as chat
from charlie.conversations import Channel, private_channel, shared_channel
from charlie.home import Home
from charlie.llm import doctor, toolmode
from charlie.llm.client import LLMClient
from charlie.notes import files as notes
from charlie.projects import Project, create_project, update_project
from charlie.trace import Called, Moded, Stopped
from charlie.users import User, ensure_user


@pytest.fixture
def alice(home: Home) -> User:
    return ensure_user(home.db, "alice")


@pytest.fixture
def kitchen(home: Home) -> Project:
    made = create_project(home, "Kitchen")
    notes.create_note(made, "Plumber", "Dave Rossi comes on Thursday 11 December at 8am.")
    notes.create_note(made, "Worktops", "Solid oak worktops, 38 mm thick, oiled each spring.")
    return made


def turn(home: Home, client: LLMClient, channel: Channel, user: User, text: str) -> list[Any]:
    return list(chat.turn(home, client, channel, user, text))


def steps(events: list[Any]) -> list[Any]:
    return [e.step for e in events if isinstance(e, chat.TraceEvent)]


def shown(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, chat.Token))


def constrained(home: Home, project: Project) -> Channel:
    return shared_channel(home, update_project(home, project.slug, tool_mode="constrained"))


# ---------------------------------------------------------------- constrained


def test_constrained_looks_up_first_asks_each_step_as_json_then_answers_in_text(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    channel = constrained(home, kitchen)
    llm.reply('{"tool": "read_note", "arguments": {"note": "kitchen/plumber"}}')
    llm.reply('{"tool": "answer"}')
    llm.reply("Dave comes on Thursday 11 December at 8am.", chunk_size=16)
    events = turn(home, client, channel, alice, "Tell me about our plumber.")
    trace = steps(events)
    assert Moded("constrained", "tool_mode = constrained (set)") in trace
    own = [s for s in trace if isinstance(s, Called) and s.by == "charlie"]
    assert [s.name for s in own] == ["search_notes", "search_conversation"]
    assert own[0].hits and own[0].hits[0].key == "kitchen/plumber"
    model = [s for s in trace if isinstance(s, Called) and s.by == "model"]
    assert [(s.name, s.ok) for s in model] == [("read_note", True)]
    first, second, answer = llm.requests
    assert is_step(first) and is_step(second) and not is_step(answer)
    assert "tools" not in first and "tools" not in answer
    branches = first["response_format"]["json_schema"]["schema"]["anyOf"]
    names = [b["properties"]["tool"]["const"] for b in branches]
    assert "read_note" in names and names[-1] == "answer"
    assert "search_notes" not in names  # Charlie has just searched the notes, and found
    # The look-up and the tool's result are data at the end of the system prompt; the
    # person's words stay theirs, and nothing of it is stored.
    system = answer["messages"][0]["content"]
    assert '<lookup by="Charlie">' in system and 'read_note(note="kitchen/plumber")' in system
    assert answer["messages"][-1]["content"] == "Tell me about our plumber."
    assert "Choose" in first["messages"][-1]["content"]  # the step's instruction, after them
    assert shown(events) == "Dave comes on Thursday 11 December at 8am."
    stored = conversations.recent(home, channel, 2)
    assert [m.content for m in stored] == [
        "Tell me about our plumber.",
        "Dave comes on Thursday 11 December at 8am.",
    ]


def test_a_question_charlie_found_the_answer_for_is_answered_without_a_step(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    """Offered a step after Charlie's look-up found something, a small model reads the note
    it was just shown: a question hinting at nothing else is answered from the look-up."""
    channel = constrained(home, kitchen)
    llm.reply("Dave, on 07700 900123.")
    events = turn(home, client, channel, alice, "Who is our plumber?")
    own = [s for s in steps(events) if isinstance(s, Called) and s.by == "charlie"]
    assert own[0].name == "search_notes" and own[0].hits[0].key == "kitchen/plumber"
    assert not [s for s in steps(events) if isinstance(s, Called) and s.by == "model"]
    assert not [s for s in steps(events) if isinstance(s, Stopped)]  # no limit was reached
    (answer,) = llm.requests
    assert not is_step(answer) and "tools" not in answer
    assert '<lookup by="Charlie">' in answer["messages"][0]["content"]
    assert shown(events) == "Dave, on 07700 900123."


def test_a_question_charlie_found_nothing_for_still_gets_its_steps(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    channel = constrained(home, kitchen)
    llm.reply('{"tool": "read_note", "arguments": {"note": "kitchen/plumber"}}')
    llm.reply('{"tool": "answer"}')
    llm.reply("Nothing about a zeppelin in the notes.")
    events = turn(home, client, channel, alice, "Where is the zeppelin moored?")
    assert not any(h for s in steps(events) if isinstance(s, Called) for h in s.hits or ())
    first, second, answer = llm.requests
    assert is_step(first) and is_step(second) and not is_step(answer)
    assert shown(events) == "Nothing about a zeppelin in the notes."


def test_a_hinted_category_beyond_memory_is_used_on_the_first_step(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    channel = constrained(home, kitchen)
    llm.reply('{"tool": "days_between", "arguments": {"start": "2026-12-01", "end": "2026-12-11"}}')
    llm.reply('{"tool": "answer"}')
    llm.reply("10 days.")
    events = turn(home, client, channel, alice, "How many days until the plumber comes?")
    first = llm.requests[0]["response_format"]["json_schema"]["schema"]["anyOf"]
    names = [b["properties"]["tool"]["const"] for b in first]
    assert names[0] == "days_between"  # the tools sharing words with the message come first
    assert "answer" not in names  # a small model offered "answer" takes it
    second = llm.requests[1]["response_format"]["json_schema"]["schema"]["anyOf"]
    assert second[-1]["properties"]["tool"]["const"] == "answer"
    assert "days_between" in llm.requests[2]["messages"][0]["content"]
    assert shown(events) == "10 days."


def test_day_arithmetic_charlie_did_is_not_asked_of_the_model_again(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    """The dates the message names are worked out by Charlie: the first step is not made to
    pick a date tool, and is not offered the ones Charlie ran — it may answer at once."""
    channel = constrained(home, kitchen)
    llm.reply('{"tool": "answer"}')
    llm.reply("23 days.")
    events = turn(home, client, channel, alice, "How many days from 2026-12-01 to 2026-12-24?")
    first = llm.requests[0]["response_format"]["json_schema"]["schema"]["anyOf"]
    names = [b["properties"]["tool"]["const"] for b in first]
    assert names[-1] == "answer"
    assert not {"days_between", "weekday"} & set(names)
    assert len(llm.requests) == 2  # one step, one answer
    assert (
        "From Tuesday 2026-12-01 to Thursday 2026-12-24 is 23 days."
        in (llm.requests[1]["messages"][0]["content"])
    )
    assert shown(events) == "23 days."


def test_a_search_charlie_ran_that_found_nothing_stays_the_models_to_try(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User
) -> None:
    project = create_project(home, "Garden")
    notes.create_note(project, "Roses", "Prune the roses in February.")
    channel = constrained(home, project)
    llm.reply('{"tool": "answer"}')
    llm.reply("I found nothing about the shed.")
    events = turn(home, client, channel, alice, "Where is the shed key?")
    own = [s for s in steps(events) if isinstance(s, Called) and s.name == "search_notes"]
    assert [(s.by, s.count) for s in own] == [("charlie", 0)]
    branches = llm.requests[0]["response_format"]["json_schema"]["schema"]["anyOf"]
    assert "search_notes" in [b["properties"]["tool"]["const"] for b in branches]


def test_a_step_that_is_not_json_is_a_guard_and_the_answer_still_comes(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    channel = constrained(home, kitchen)
    llm.reply("I think I should search the notes")
    llm.reply("The worktops are 38 mm thick.")
    events = turn(home, client, channel, alice, "Tell me how thick the worktops are.")
    assert any(isinstance(s, Stopped) and s.guard == "unreadable_call" for s in steps(events))
    assert shown(events) == "The worktops are 38 mm thick."


def test_a_server_without_json_schema_is_answered_freely(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    channel = constrained(home, kitchen)
    llm.respond(lambda request: ErrorReply(400, "response_format is not supported"))
    llm.reply("38 mm.")
    events = turn(home, client, channel, alice, "Tell me how thick the worktops are.")
    modes = [s for s in steps(events) if isinstance(s, Moded)]
    assert [m.mode for m in modes] == ["constrained", "native"]
    assert "refused json_schema" in modes[1].reason
    assert llm.requests[-1].get("tools")  # the model may call tools itself now
    assert "<lookup" in llm.requests[-1]["messages"][0]["content"]  # what was found stays
    assert shown(events) == "38 mm."


def test_the_look_up_in_a_private_channel_never_reaches_another_persons_private_messages(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    bob = ensure_user(home.db, "bob")
    conversations.add_message(
        home, private_channel(home, bob), "user", "My secret: the plumber code is 4471.", user=bob
    )
    list(chat.index_messages(home))
    mine = private_channel(home, alice)
    home.settings.tool_mode = "constrained"
    llm.respond(lambda request: '{"tool": "answer"}' if is_step(request) else "I don't know.")
    llm.respond(lambda request: '{"tool": "answer"}' if is_step(request) else "I don't know.")
    events = turn(home, client, mine, alice, "What is the plumber code?")
    assert any(isinstance(s, Called) and s.by == "charlie" for s in steps(events))
    for request in llm.requests:
        assert "4471" not in json.dumps(request)
    found = [h for s in steps(events) if isinstance(s, Called) for h in s.hits or ()]
    assert all("4471" not in h.snippet for h in found)


# ---------------------------------------------------------------- text


def test_text_mode_describes_the_tools_and_runs_the_call_the_model_writes(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    channel = shared_channel(home, update_project(home, "kitchen", tool_mode="text"))
    llm.reply('<tool_call>{"name": "read_note", "arguments": {"note": "worktops"}}</tool_call>')
    llm.reply("38 mm, solid oak.")
    events = turn(home, client, channel, alice, "What did we note about the worktops?")
    first = llm.requests[0]
    assert "tools" not in first
    assert "- read_note(note): Read one note in full" in first["messages"][0]["content"]
    assert [s.name for s in steps(events) if isinstance(s, Called)] == ["read_note"]
    assert shown(events) == "38 mm, solid oak."


def test_text_mode_never_shows_a_call_shaped_json_even_in_the_answer_forced_after(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    """Qwen 1.5B in text mode answered "To record a decision, you can write: ```json
    {"name": "TOOL", "arguments": …}```" — shown raw, twice in the scorecard."""
    channel = shared_channel(home, update_project(home, "kitchen", tool_mode="text"))
    sample = (
        'To record a decision, you can write:\n```json\n{\n  "name": "TOOL",\n'
        '  "arguments": {\n    "text": "Collect the tiles on Friday"\n  }\n}\n```\n'
    )
    llm.reply(sample)
    llm.reply(sample)
    llm.reply(sample + "Done.")
    events = turn(home, client, channel, alice, "Record that we collect the tiles on Friday.")
    said = shown(events)
    assert '"name"' not in said and "```" not in said and "TOOL" not in said
    stored = conversations.recent(home, channel, 1)[-1].content
    assert '"name"' not in stored and "```" not in stored


# ---------------------------------------------------------------- auto


def first_look(request: dict[str, Any]) -> bool:
    return request["messages"][0]["content"] == doctor.LOOKUP_SYSTEM


def narrates(request: dict[str, Any]) -> Any:
    if first_look(request):  # when first tried, it called the tool
        return ToolCallsReply([("search_notes", {"query": "worktops"})])
    if is_step(request):
        return '{"tool": "answer"}'
    if request.get("tools"):
        return "To answer that, Charlie can use the search_notes function."
    return "Thursday at 8am."


def test_auto_tries_a_new_model_once_and_a_small_one_starts_constrained(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    """A small model's first answer is already in the mode that suits it (issue 21)."""
    home.settings.tool_mode = "auto"
    channel = shared_channel(home, kitchen)
    llm.default = lambda request: (
        "I would look in the notes." if first_look(request) else narrates(request)
    )
    events = turn(home, client, channel, alice, "When is the plumber coming?")
    modes = [s for s in steps(events) if isinstance(s, Moded)]
    assert [(m.mode, m.reason) for m in modes] == [("constrained", "auto: no tool call when tried")]
    assert shown(events) == "Thursday at 8am."
    assert sum(first_look(r) for r in llm.requests) == 1
    turn(home, client, channel, alice, "And the electrician?")
    assert sum(first_look(r) for r in llm.requests) == 1  # tried once, remembered


def test_auto_turns_to_constrained_steps_after_two_answers_that_miss_and_says_why(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    home.settings.tool_mode = "auto"
    channel = shared_channel(home, kitchen)
    llm.default = narrates
    for _ in range(2):
        events = turn(home, client, channel, alice, "When is the plumber coming?")
        assert not any(isinstance(s, Moded) for s in steps(events))  # native: nothing said
    seen = toolmode.habits(home, client.base_url, "test-model")
    assert seen.misses == 2 and "search_notes instead of calling it" in seen.last_miss
    # Another process (a new home on the same database) decides the same.
    with Home.open(home.settings) as elsewhere:
        events = turn(elsewhere, client, channel, alice, "When is the plumber coming?")
    modes = [s for s in steps(events) if isinstance(s, Moded)]
    assert [m.mode for m in modes] == ["constrained"]
    assert modes[0].reason.startswith("auto: the model's tool use failed in 2 answers in a row")
    assert shown(events) == "Thursday at 8am."


def test_a_tool_used_well_starts_the_count_again(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    channel = shared_channel(home, kitchen)
    llm.reply("Charlie can use the search_notes function for that.")
    turn(home, client, channel, alice, "When is the plumber coming?")
    llm.tool_calls([("search_notes", {"query": "plumber"})])
    llm.reply("Thursday.")
    turn(home, client, channel, alice, "When is the plumber coming?")
    assert toolmode.habits(home, client.base_url, "test-model").misses == 0
    llm.reply("Hello!")
    turn(home, client, channel, alice, "Hi there")  # no tool needed: counts for nothing
    assert toolmode.habits(home, client.base_url, "test-model").misses == 0


def test_an_unknown_tool_gets_one_retry_with_the_real_names_then_an_answer(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    channel = shared_channel(home, kitchen)
    llm.tool_calls([("read_notes", {"query": "plumber"})])
    llm.tool_calls([("find_everything", {})])
    llm.reply("I could not find it.")
    events = turn(home, client, channel, alice, "When is the plumber coming?")
    refused = [s for s in steps(events) if isinstance(s, Called)]
    assert [(s.name, s.guard) for s in refused] == [
        ("read_notes", "unknown_tool"),
        ("find_everything", "unknown_tool"),
    ]
    retry = llm.requests[1]["messages"][-1]["content"]
    assert "there is no tool 'read_notes'. The tools are: load_tools, search_notes" in retry
    assert "tools" not in llm.requests[2]  # asked for an answer after the second miss
    assert shown(events) == "I could not find it."
    assert toolmode.habits(home, client.base_url, "test-model").misses == 1


def test_a_question_about_the_household_answered_without_a_look_up_is_a_miss(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    """Qwen 1.5B answered "In the garage." to a question whose answer it never looked up."""
    channel = shared_channel(home, kitchen)
    llm.reply("In the garage.")
    turn(home, client, channel, alice, "Where did we say the spare key is?")
    seen = toolmode.habits(home, client.base_url, "test-model")
    assert seen.misses == 1 and "without looking it up" in seen.last_miss


def test_the_question_being_answered_is_never_found_as_something_said_earlier(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User, kitchen: Project
) -> None:
    channel = shared_channel(home, kitchen)
    conversations.add_message(home, channel, "user", "The spare key is under the pot.", user=alice)
    conversations.add_message(home, channel, "assistant", "Noted.")
    list(chat.index_messages(home))
    llm.tool_calls([("search_conversation", {"query": "where is the spare key"})])
    llm.reply("Under the pot.")
    events = turn(home, client, channel, alice, "Where is the spare key?")
    call = next(s for s in steps(events) if isinstance(s, Called))
    assert call.hits and all(h.snippet != "Where is the spare key?" for h in call.hits)
    assert call.hits[0].snippet == "The spare key is under the pot."
