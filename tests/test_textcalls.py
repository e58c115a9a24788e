"""Tool calls written as text, in every form small models use: read, run, never shown.

Each form goes through a whole turn against the scripted server, streamed in 16-character
chunks: the tool runs, and neither the streamed reply, the stored message nor the next
request's history shows a line of markup. The reader and the streaming filter are also
checked directly, and against each other for any chunking (Hypothesis).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_double import ScriptedLLMServer

from charlie import conversations
from charlie.chat import turn as chat
from charlie.conversations import shared_channel
from charlie.errors import LLMError
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.llm.textcalls import MarkupFilter, read
from charlie.notes import files as notes
from charlie.projects import create_project
from charlie.trace import to_json
from charlie.users import ensure_user

KNOWN = {
    "search_notes": ["query", "limit"],
    "search_conversation": ["query", "limit", "all_projects"],
    "now": [],
    "date_add": ["start", "days"],
}
OAK = '{"query": "oak"}'

# (form, text the model writes, the calls Charlie must read out of it)
FORMS: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "hermes",
        '<tool_call>\n{"name": "search_notes", "arguments": {"query": "oak"}}\n</tool_call>',
        [("search_notes", OAK)],
    ),
    (
        "hermes, no closing tag, prose before",
        'Let me look.\n<tool_call>\n{"name": "search_notes", "arguments": {"query": "oak"}}',
        [("search_notes", OAK)],
    ),
    (
        "hermes, doubled braces",
        '<tool_call>\n{{"name": "search_notes", "arguments": {"query": "oak"}}}}\n</tool_call>',
        [("search_notes", OAK)],
    ),
    (
        "qwen3-coder xml",
        "<tool_call>\n<function=search_notes>\n<parameter=query>\noak\n</parameter>\n"
        "</function>\n</tool_call>",
        [("search_notes", OAK)],
    ),
    (
        "fenced json",
        '```json\n{"name": "search_notes", "arguments": {"query": "oak"}}\n```',
        [("search_notes", OAK)],
    ),
    (
        "bare json with parameters",
        '{"name": "search_notes", "parameters": {"query": "oak"}}',
        [("search_notes", OAK)],
    ),
    (
        "bare json in prose",
        'I will search {"name": "search_notes", "arguments": {"query": "oak"}} for you.',
        [("search_notes", OAK)],
    ),
    (
        "json list",
        '[{"name": "search_notes", "arguments": {"query": "oak"}}, '
        '{"name": "now", "arguments": {}}]',
        [("search_notes", OAK), ("now", "{}")],
    ),
    (
        "openai shape",
        '{"type": "function", "function": {"name": "now", "arguments": {}}}',
        [("now", "{}")],
    ),
    (
        "function name= arguments=",
        '<function name="search_notes" arguments=\'{"query": "oak"}\'></function>',
        [("search_notes", OAK)],
    ),
    (
        "function name= with a body",
        '<function name="search_notes">{"query": "oak"}</function>',
        [("search_notes", OAK)],
    ),
    (
        "llama 3.1 function=",
        '<function=search_notes>{"query": "oak"}</function>',
        [("search_notes", OAK)],
    ),
    (
        "llama 3.1 python_tag",
        '<|python_tag|>{"name": "search_notes", "parameters": {"query": "oak"}}',
        [("search_notes", OAK)],
    ),
    (
        "mistral",
        '[TOOL_CALLS][{"name": "search_notes", "arguments": {"query": "oak"}}]',
        [("search_notes", OAK)],
    ),
    (
        "mistral, newer",
        '[TOOL_CALLS]search_notes[ARGS]{"query": "oak"}',
        [("search_notes", OAK)],
    ),
    (
        "pythonic list",
        '[search_notes(query="oak"), date_add("2026-12-01", 7)]',
        [("search_notes", OAK), ("date_add", '{"start": "2026-12-01", "days": 7}')],
    ),
    (
        "pythonic bare",
        'search_notes(query="oak")',
        [("search_notes", OAK)],
    ),
    (
        "gemma tool_code fence",
        '```tool_code\nprint(search_notes(query="oak"))\n```',
        [("search_notes", OAK)],
    ),
    (
        "single quotes and trailing commas",
        "{'name': 'search_notes', 'arguments': {'query': 'oak',},}",
        [("search_notes", OAK)],
    ),
    (
        "arguments as a JSON string",
        '{"name": "search_notes", "arguments": "{\\"query\\": \\"oak\\"}"}',
        [("search_notes", OAK)],
    ),
    (
        "cut off at the end",
        '<tool_call>\n{"name": "search_notes", "arguments": {"query": "oak',
        [("search_notes", OAK)],
    ),
    (
        "broken quoting in an attribute",
        '<function name="search_notes" arguments=\'{"query": "it\'s oak"}\'></function>',
        [("search_notes", '{"query": "it\'s oak"}')],
    ),
]
MARKUP = ("<tool_call", "<function", "[TOOL_CALLS]", "python_tag", '"name"', "```", "</")


def streamed(text: str, size: int = 16) -> tuple[str, Any]:
    """What the filter shows of `text` fed in `size`-character chunks, and its reading."""
    markup = MarkupFilter(KNOWN)
    shown = "".join(markup.feed(text[at : at + size]) for at in range(0, len(text), size))
    return shown, markup.finish()


@pytest.mark.parametrize(("form", "text", "calls"), FORMS, ids=[f[0] for f in FORMS])
def test_every_form_is_read_whole_and_streamed(
    form: str, text: str, calls: list[tuple[str, str]]
) -> None:
    whole = read(text, KNOWN)
    assert [(c.name, json.loads(c.arguments)) for c in whole.calls] == [
        (name, json.loads(arguments)) for name, arguments in calls
    ]
    shown, reading = streamed(text)
    assert [(c.name, c.arguments) for c in reading.calls] == [
        (c.name, c.arguments) for c in whole.calls
    ]
    visible = shown + reading.text
    assert not any(sign in visible for sign in MARKUP), visible


def test_prose_around_a_call_is_kept_and_the_call_is_not() -> None:
    reading = read('I will search {"name": "search_notes", "arguments": {}} for you.', KNOWN)
    assert reading.text == "I will search for you."
    shown, rest = streamed("Let me look.\n<tool_call>\n" + '{"name": "now", "arguments": {}}')
    assert shown.strip() == "Let me look." and rest.text == ""


@pytest.mark.parametrize(
    "text",
    [
        'Use this config:\n```json\n{"name": "app", "debug": true}\n```\nDone.',
        'A sample: {"name": "app", "arguments": {}} is how a call looks.',
        "Right now (in 2026) we have [1] ref, a [link](https://x.org), - [ ] a task, x < y.",
        "```python\nprint(sum([1, 2]))\n```",
        "Prices: {a: 1} and [b] and the note (see below).",
        "Search the notes for oak; the search_notes tool would find it.",
    ],
)
def test_text_that_is_no_call_is_shown_as_written(text: str) -> None:
    assert read(text, KNOWN).calls == []
    shown, reading = streamed(text)
    assert (shown + reading.text).strip() == text.strip()
    assert reading.calls == []


def test_a_tag_that_holds_no_readable_call_is_unreadable_and_never_shown() -> None:
    text = "Sure. <tool_call>search the notes please</tool_call>"
    whole = read(text, KNOWN)
    assert whole.calls == [] and whole.unreadable and whole.text == "Sure."
    shown, reading = streamed(text)
    assert "tool_call" not in shown + reading.text and reading.unreadable


def test_an_unknown_tool_in_a_tag_is_a_call_but_in_prose_json_it_is_text() -> None:
    tagged = read('<tool_call>{"name": "read_notes", "arguments": {}}</tool_call>', KNOWN)
    assert [c.name for c in tagged.calls] == ["read_notes"]  # refused by the loop, with names
    alone = read('{"name": "read_notes", "arguments": {"q": 1}}', KNOWN)
    assert [c.name for c in alone.calls] == ["read_notes"]  # the whole message: a call attempt
    sample = read('Like this: {"name": "read_notes", "arguments": {}}', KNOWN)
    assert sample.calls == []


def test_template_markers_and_data_fences_are_never_shown() -> None:
    text = '<note id="kitchen/plumber">Charlie: The plumber comes Thursday.</note><|im_end|>'
    markup = MarkupFilter(KNOWN, speaker="Charlie")
    shown = "".join(markup.feed(text[at : at + 5]) for at in range(0, len(text), 5))
    assert (shown + markup.finish().text).strip() == "The plumber comes Thursday."


TEXT = st.text(
    alphabet=st.sampled_from(list("abcdefghij klmnop.,:;!?'\"-\n()0123456789")), max_size=200
)


@settings(max_examples=200, deadline=None)
@given(text=TEXT, sizes=st.lists(st.integers(1, 30), min_size=1, max_size=40))
def test_plain_prose_streams_through_unchanged_in_any_chunking(text: str, sizes: list[int]) -> None:
    markup = MarkupFilter(KNOWN)
    shown, at, turn = "", 0, 0
    while at < len(text):
        size = sizes[turn % len(sizes)]
        shown += markup.feed(text[at : at + size])
        at, turn = at + size, turn + 1
    reading = markup.finish()
    assert reading.calls == []
    assert (shown + reading.text).strip() == text.strip() or (shown + reading.text) == text


@settings(max_examples=100, deadline=None)
@given(
    before=TEXT,
    form=st.sampled_from(FORMS),
    size=st.integers(1, 40),
)
def test_a_call_after_any_prose_is_read_in_any_chunking_and_never_shown(
    before: str, form: tuple[str, str, list[tuple[str, str]]], size: int
) -> None:
    _, text, calls = form
    shown, reading = streamed(f"{before} {text}", size)
    assert [c.name for c in reading.calls] == [name for name, _ in calls]
    assert not any(sign in shown + reading.text for sign in MARKUP)


# ---------------------------------------------------------------- whole turns


@pytest.fixture
def client(llm: ScriptedLLMServer) -> Iterator[LLMClient]:
    made = LLMClient(llm.base_url, "test-model", retries=0)
    yield made
    made.close()


@pytest.mark.parametrize(("form", "text", "calls"), FORMS, ids=[f[0] for f in FORMS])
def test_a_turn_runs_each_form_and_shows_and_stores_no_markup(
    home: Home,
    llm: ScriptedLLMServer,
    client: LLMClient,
    form: str,
    text: str,
    calls: list[tuple[str, str]],
) -> None:
    project = create_project(home, "Kitchen")
    notes.create_note(project, "Worktops", "We chose solid oak worktops, 38 mm thick.")
    channel = shared_channel(home, project)
    alice = ensure_user(home.db, "alice")
    llm.reply(text, chunk_size=16)
    llm.reply("The worktops are solid oak, 38 mm thick.", chunk_size=16)
    events = list(chat.turn(home, client, channel, alice, "What did we choose for the oak?"))
    shown = "".join(e.text for e in events if isinstance(e, chat.Token))
    ran = [to_json(e.step) for e in events if isinstance(e, chat.TraceEvent)]
    ran = [step["name"] for step in ran if step["type"] == "tool_call" and step["ok"]]
    assert ran == [name for name, _ in calls]
    assert not any(sign in shown for sign in MARKUP), shown
    assert shown.endswith("The worktops are solid oak, 38 mm thick.")
    stored = conversations.recent(home, channel, 1)[0]
    assert stored.role == "assistant" and not any(sign in stored.content for sign in MARKUP)


def test_an_unreadable_call_gets_one_retry_that_names_the_tools_then_an_answer(
    home: Home, llm: ScriptedLLMServer, client: LLMClient
) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    alice = ensure_user(home.db, "alice")
    llm.reply("<tool_call>look it up</tool_call>", chunk_size=16)
    llm.reply("<tool_call>still no</tool_call>", chunk_size=16)
    llm.reply("I could not look that up, sorry.", chunk_size=16)
    events = list(chat.turn(home, client, channel, alice, "What did we decide?"))
    shown = "".join(e.text for e in events if isinstance(e, chat.Token))
    assert shown == "I could not look that up, sorry."
    retry = llm.requests[1]["messages"][-1]["content"]
    assert "tool call could not be read" in retry and "search_notes" in retry
    assert "tools" not in llm.requests[2]  # the third time: answer without tools
    guards = [e.step for e in events if isinstance(e, chat.TraceEvent)]
    assert [getattr(s, "guard", None) for s in guards].count("unreadable_call") == 2


def test_a_reply_that_is_only_markup_nobody_can_read_is_not_stored_as_a_reply(
    home: Home, llm: ScriptedLLMServer, client: LLMClient
) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    alice = ensure_user(home.db, "alice")
    for _ in range(3):
        llm.reply("<tool_call>???</tool_call>", chunk_size=16)
    with pytest.raises(LLMError, match="empty reply"):
        list(chat.turn(home, client, channel, alice, "Hello?"))
    kept = conversations.recent(home, channel, 5)
    assert [m.role for m in kept] == ["user"]  # the message is kept for a retry


def test_after_charlies_fences_their_fields_written_as_tags_are_not_shown() -> None:
    """Qwen 1.5B answered a note it was shown with `<id>1</id> <title>Wi-Fi</title> …`."""
    text = "<id>wi-fi</id>\n<title>Wi-Fi</title>\nThe password is orchid-lantern-42."
    markup = MarkupFilter(KNOWN, echoes=True)
    shown = "".join(markup.feed(text[at : at + 7]) for at in range(0, len(text), 7))
    assert (shown + markup.finish().text).split() == [
        "wi-fi",
        "Wi-Fi",
        "The",
        "password",
        "is",
        "orchid-lantern-42.",
    ]
    plain = MarkupFilter(KNOWN)  # nothing was shown: an HTML answer keeps its tags
    kept = plain.feed("Put it in <title>Home</title>.") + plain.finish().text
    assert kept == "Put it in <title>Home</title>."


def test_a_field_tag_in_backticks_is_code_and_stays() -> None:
    markup = MarkupFilter(KNOWN, echoes=True)
    text = "Use `<title>` for the page name."
    assert (markup.feed(text) + markup.finish().text) == text
