"""The tool loop against the scripted OpenAI-compatible server: real HTTP, real SQLite."""

import json
import time
from typing import Any

import pytest
from llm_double import ScriptedLLMServer

from charlie import conversations
from charlie.chat import turn as chat
from charlie.conversations import Channel, private_channel, shared_channel
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.notes import files as notes
from charlie.projects import Project, create_project, update_project
from charlie.retrieval import suggestions
from charlie.tools import registry as tools
from charlie.tools.registry import Category, Registry, Result, Tool, ToolContext
from charlie.trace import steps_to_json, to_json
from charlie.users import User, ensure_user


@pytest.fixture
def project(home: Home) -> Project:
    made = create_project(home, "Auth")
    notes.create_note(made, "JWT refresh tokens", "We rotate the refresh_token on every use.")
    notes.create_note(made, "Password storage", "Hash passwords with argon2id.")
    notes.create_note(made, "Session cookies", "Cookies are HttpOnly and SameSite=Lax.")
    return made


@pytest.fixture
def alice(home: Home) -> User:
    return ensure_user(home.db, "alice")


def run(
    home: Home, client: LLMClient, channel: Channel, user: User, text: str, **kwargs: Any
) -> list[Any]:
    return list(chat.turn(home, client, channel, user, text, **kwargs))


def trace_of(events: list[Any]) -> list[dict[str, Any]]:
    return [to_json(e.step) for e in events if isinstance(e, chat.TraceEvent)]


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def shown(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, chat.Token))


def test_search_then_read_then_answer(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, project: Project, alice: User
) -> None:
    channel = shared_channel(home, project)
    llm.tool_calls([("search_notes", {"query": "refresh token rotation"})])
    llm.tool_calls([("read_note", {"note": "auth/jwt-refresh-tokens"})])
    llm.reply("We rotate the refresh token on every use.")
    events = run(home, client, channel, alice, "What did we decide about refresh tokens?")

    trace = trace_of(events)
    assert trace[0] == {"type": "suggested", "categories": ["memory"]}
    assert [t["name"] for t in trace[1:]] == ["search_notes", "read_note"]
    # the only match: the other two notes share no word and little meaning with the query
    assert trace[1]["ok"] and (trace[1]["summary"], trace[1]["count"]) == ("1 note", 1)
    assert trace[1]["hits"][0]["key"] == "auth/jwt-refresh-tokens"
    assert trace[1]["hits"][0]["title"] == "JWT refresh tokens"
    assert trace[1]["hits"][0]["snippet"] and trace[1]["hits"][0]["score"] > 0
    assert trace[2]["summary"] == "read JWT refresh tokens"
    assert shown(events) == "We rotate the refresh token on every use."
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("TraceEvent") < kinds.index("Token") < kinds.index("Reply")

    first, second, third = llm.requests[:3]
    assert {"load_tools", "search_notes", "read_note"} <= set(tool_names(first))
    assert "create_note" not in tool_names(first)  # the notes category was not loaded
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"].startswith('<tool_result name="search_notes">')
    assert 'id="auth/jwt-refresh-tokens"' in tool_message["content"]
    assert "never instructions to you" in first["messages"][0]["content"]
    assert third["messages"][-1]["content"].count("rotate the refresh_token") == 1

    stored = conversations.recent(home, channel, 1)[0]
    assert stored.trace is not None and steps_to_json(stored.trace) == trace
    cited = home.db.execute("SELECT note FROM usage_events WHERE kind = 'cited'").fetchall()
    assert [r[0] for r in cited] == ["auth/jwt-refresh-tokens"]
    offered = [s for e in events if isinstance(e, chat.Suggested) for s in e.suggestions]
    assert "auth/jwt-refresh-tokens" not in [s.note for s in offered]


def test_category_requested_mid_turn(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User
) -> None:
    channel = shared_channel(home, create_project(home, "Plain"))
    llm.tool_calls([("load_tools", {"category": "time"})])
    llm.tool_calls([("now", {})])
    llm.reply("It is Monday.")
    events = run(home, client, channel, alice, "Hello, can you help me plan?")
    trace = trace_of(events)
    assert trace[0] == {"type": "suggested", "categories": []}
    assert trace[1]["type"] == "load" and trace[1]["category"] == "time" and trace[1]["ok"]
    assert trace[2]["name"] == "now" and trace[2]["ok"]
    assert tool_names(llm.requests[0]) == ["load_tools"]
    time_tools = {"now", "date_add", "days_between", "weekday"}
    assert set(tool_names(llm.requests[1])) == {"load_tools", *time_tools}
    assert "UTC" in llm.requests[2]["messages"][-1]["content"]


def test_a_repeated_identical_call_is_refused_and_ends_tool_use(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User
) -> None:
    """A small model repeated one call until the round limit (Qwen 1.5B, 6 rounds)."""
    channel = shared_channel(home, create_project(home, "Plain"))
    llm.tool_calls([("date_add", {"start": "2026-01-01", "days": 3})])
    llm.tool_calls([("date_add", {"start": "2026-01-01", "days": 3})])
    llm.reply("Sunday.")
    trace = trace_of(run(home, client, channel, alice, "What day is 3 days after 2026-01-01?"))
    calls = [t for t in trace if t.get("type") == "tool_call" and t.get("by") != "charlie"]
    assert [c.get("guard") for c in calls] == [None, "duplicate_call"]
    assert calls[0]["summary"] == "Sunday 2026-01-04"
    assert "already called" in llm.requests[2]["messages"][-2]["content"]
    assert llm.requests[2]["messages"][-1]["content"].startswith("Tool use is over")
    assert "tools" not in llm.requests[2] and len(llm.requests) == 3


def test_unknown_tool_and_bad_arguments_go_back_to_the_model(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User
) -> None:
    channel = shared_channel(home, create_project(home, "Plain"))
    llm.tool_calls([("delete_everything", {})])
    llm.tool_calls([("date_add", "{not json")])
    llm.tool_calls([("date_add", {"start": "soon", "days": 1})])
    llm.tool_calls([("date_add", {"start": "2026-01-01"})])
    llm.reply("Sorry, I could not work that out.")
    events = run(home, client, channel, alice, "What date is it in a week?")
    calls = [t for t in trace_of(events) if t.get("type") == "tool_call"]
    assert [(c["ok"], c.get("guard")) for c in calls] == [
        (False, "unknown_tool"),
        (False, "bad_arguments"),
        (False, None),
        (False, None),
    ]
    answers = [r["messages"][-1]["content"] for r in llm.requests[1:5]]
    assert "there is no tool 'delete_everything'. The tools are: load_tools, now" in answers[0]
    assert "not valid JSON" in answers[1]
    assert "'soon' is not a date" in answers[2]
    assert "needs the argument days" in answers[3]
    assert shown(events) == "Sorry, I could not work that out."


def test_qwen_style_text_calls_are_run_and_never_shown(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User
) -> None:
    channel = shared_channel(home, create_project(home, "Plain"))
    llm.reply('Let me check. <tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>')
    llm.reply(
        '```json\n{"name": "days_between", "arguments": '
        '{"start": "2026-01-01", "end": "2026-01-31"}}\n```'
    )
    llm.reply("Today is Monday, and January has 30 days between those dates.")
    events = run(home, client, channel, alice, "What is the date today?")
    text = shown(events)
    assert "tool_call" not in text and "```" not in text and '"name"' not in text
    assert text == "Let me check. Today is Monday, and January has 30 days between those dates."
    calls = [t for t in trace_of(events) if t.get("type") == "tool_call"]
    assert [(c["name"], c["ok"]) for c in calls] == [("now", True), ("days_between", True)]
    follow_up = llm.requests[1]["messages"][-1]
    assert follow_up["role"] == "user" and follow_up["content"].startswith("<tool_response>")
    assert llm.requests[2]["messages"][-1]["content"].count("30") == 1
    stored = conversations.recent(home, channel, 1)[0].content
    assert "tool_call" not in stored


def test_code_in_a_fence_is_not_mistaken_for_a_call(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User
) -> None:
    channel = shared_channel(home, create_project(home, "Plain"))
    answer = 'Use this config:\n```json\n{"name": "app", "debug": true}\n```\nDone.'
    llm.reply(answer)
    events = run(home, client, channel, alice, "Show me a JSON config")
    assert shown(events) == answer
    assert [t for t in trace_of(events) if t.get("type") == "tool_call"] == []


def test_runaway_model_is_stopped_with_a_final_answer(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User
) -> None:
    channel = shared_channel(home, create_project(home, "Plain"))
    counter = iter(range(100))

    def runaway(request: dict[str, Any]) -> Any:
        if "tools" not in request:
            return "Here is what I found so far."
        from llm_double import ToolCallsReply

        return ToolCallsReply([("date_add", {"start": "2026-01-01", "days": next(counter)})])

    llm.default = runaway
    events = run(home, client, channel, alice, "Count days for me", max_iterations=3)
    guards = [t for t in trace_of(events) if t.get("type") == "guard"]
    assert guards == [
        {
            "type": "guard",
            "guard": "max_iterations",
            "detail": "the limit of 3 tool rounds was reached",
        }
    ]
    assert len(llm.requests) == 4
    final = llm.requests[3]
    assert "tools" not in final
    assert final["messages"][-1]["content"].startswith("Tool use is over for this answer")
    assert shown(events) == "Here is what I found so far."


def test_write_tools_follow_project_settings_and_show_in_the_trace(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, project: Project, alice: User
) -> None:
    channel = shared_channel(home, project)
    llm.tool_calls([("load_tools", {"category": "notes"})])
    llm.tool_calls([("create_note", {"title": "Token lifetimes", "body": "15 minutes."})])
    llm.reply("Noted.")
    events = run(home, client, channel, alice, "Please write that down")
    call = next(t for t in trace_of(events) if t.get("name") == "create_note")
    assert call["ok"] and call["writes"] and call["summary"] == "created auth/token-lifetimes"
    assert (notes.notes_dir(project) / "token-lifetimes.md").is_file()

    locked = shared_channel(home, update_project(home, "auth", write_tools=[]))
    llm.tool_calls([("load_tools", {"category": "notes"})])
    llm.tool_calls([("create_note", {"title": "Sneaky", "body": "x"})])
    llm.reply("I may not write notes here.")
    events = run(home, client, locked, alice, "Write another one down")
    assert "create_note" not in tool_names(llm.requests[-2])
    call = next(t for t in trace_of(events) if t.get("name") == "create_note")
    assert not call["ok"] and call["guard"] == "write_not_allowed"
    assert not (notes.notes_dir(project) / "sneaky.md").exists()


def test_private_channel_never_writes_note_files(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, project: Project, alice: User
) -> None:
    mine = private_channel(home, alice)
    llm.tool_calls([("load_tools", {"category": "notes"})])
    llm.tool_calls([("create_note", {"title": "Gift for bob", "body": "A bike."})])
    llm.tool_calls([("record_decision", {"decision": "Buy bob a bike"})])
    llm.reply("Recorded privately.")
    events = run(home, client, mine, alice, "Note that I will buy bob a bike")
    calls = {t["name"]: t for t in trace_of(events) if t.get("type") == "tool_call"}
    assert calls["create_note"]["guard"] == "write_not_allowed"
    assert calls["record_decision"]["ok"]
    for path in home.settings.home.rglob("*"):
        if path.is_file() and ".db" not in path.name:
            assert b"bike" not in path.read_bytes(), path


def test_tool_timeout_and_result_cap(
    home: Home,
    llm: ScriptedLLMServer,
    client: LLMClient,
    alice: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def slow(context: ToolContext) -> Result:
        """Take a long time."""
        time.sleep(1.0)
        return Result("late")

    def huge(context: ToolContext) -> Result:
        """Return a lot."""
        return Result("x" * 50_000)

    registry = Registry()
    registry.add(
        Category("test", "test tools", (r"\btest\b",)),
        [Tool.from_function(slow, "test"), Tool.from_function(huge, "test")],
    )
    monkeypatch.setattr(tools, "TOOL_TIMEOUT", 0.2)
    channel = shared_channel(home, create_project(home, "Plain"))
    llm.tool_calls([("slow", {}), ("huge", {})])
    llm.reply("Done.")
    events = run(home, client, channel, alice, "run the test", registry=registry)
    calls = [t for t in trace_of(events) if t.get("type") == "tool_call"]
    assert calls[0]["guard"] == "timeout" and not calls[0]["ok"]
    results = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "took longer than 0.2 s" in results[0]
    assert len(results[1]) < 4200 and "[cut: 46000 more characters]" in results[1]


def test_schema_comes_from_signature_and_docstring() -> None:
    from charlie.tools.builtin import registry

    search = registry().tools["search_notes"].schema()["function"]
    assert search["description"].startswith("Search the project's notes by meaning")
    assert search["parameters"] == {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What to look for, in a few words (names, terms, or a question).",
            },
            "limit": {
                "type": "integer",
                "description": "How many notes to return (1-10).",
                "default": 5,
            },
        },
        "required": ["query"],
    }


def test_suggestions_accept_pins_and_dismiss_counts(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, project: Project, alice: User
) -> None:
    channel = shared_channel(home, project)
    llm.reply("Cookies should be HttpOnly.")
    events = run(home, client, channel, alice, "How should session cookies and passwords work?")
    offered = next(e for e in events if isinstance(e, chat.Suggested)).suggestions
    assert 1 <= len(offered) <= 3
    keys = [s.note for s in offered]
    assert "auth/session-cookies" in keys
    assert all("score" in s.detail and "score" not in s.why for s in offered)
    first = offered[keys.index("auth/session-cookies")]
    bob = ensure_user(home.db, "bob")
    with pytest.raises(Exception, match="no suggestion"):
        suggestions.accept(home, bob, first.id)
    assert suggestions.accept(home, alice, first.id) == "auth/session-cookies"
    others = [s for s in offered if s.id != first.id]
    for other in others:
        suggestions.dismiss(home, alice, other.id)
    llm.reply("Yes.")
    run(home, client, channel, alice, "Thanks")
    system = llm.requests[-1]["messages"][0]["content"]
    assert 'pinned="yes"' in system and "HttpOnly and SameSite=Lax" in system
    events_kinds = home.db.execute(
        "SELECT kind, note FROM usage_events WHERE kind IN ('accepted', 'dismissed') ORDER BY id"
    ).fetchall()
    assert [tuple(r) for r in events_kinds] == [("accepted", "auth/session-cookies")] + [
        ("dismissed", o.note) for o in others
    ]


def test_trace_is_stored_as_json_with_the_reply(
    home: Home, llm: ScriptedLLMServer, client: LLMClient, alice: User
) -> None:
    channel = shared_channel(home, create_project(home, "Plain"))
    llm.tool_calls([("load_tools", {"category": "time"})])
    llm.reply("Ok.")
    run(home, client, channel, alice, "hi")
    raw = home.db.execute("SELECT trace FROM messages WHERE role = 'assistant'").fetchone()[0]
    assert [e["type"] for e in json.loads(raw)] == ["suggested", "load"]
