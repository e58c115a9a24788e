"""Budgets: every request fits the model's context window, with room for the answer
(issue 12: a looping 8k-token reply left a project that no later turn could use)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from llm_double import RawReply, ScriptedLLMServer, estimate_tokens
from support.distilling import distill_answer, is_distillation

from charlie import conversations
from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.conversations import Channel, shared_channel
from charlie.errors import LLMContextExceeded
from charlie.home import Home
from charlie.llm import budget
from charlie.llm.budget import Budget
from charlie.llm.client import LLMClient
from charlie.projects import create_project, update_project
from charlie.tools.registry import Category, Registry, Result, Tool, ToolContext
from charlie.users import User, ensure_user


def client(server: ScriptedLLMServer, **kwargs: Any) -> LLMClient:
    return LLMClient(server.base_url, "test-model", retries=0, **kwargs)


def kitchen(home: Home) -> tuple[Channel, User]:
    return shared_channel(home, create_project(home, "Kitchen")), ensure_user(home.db, "alice")


def chats(server: ScriptedLLMServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if not is_distillation(r)]


def prompt_tokens(request: dict[str, Any]) -> int:
    return budget.request_tokens(request["messages"], request.get("tools"))


def looping_reply(tokens: int) -> str:
    """A reply like the incident's: one paragraph, then a line repeated until the window
    was full (with numbers, so no copy is quite the same: the loop guard misses it)."""
    text = "Here is a plan for the kitchen.\n"
    line = 0
    while estimate_tokens(len(text)) < tokens:
        line += 1
        text += f"{line}. Measure the worktop again and write the figure down.\n"
    return text


# ------------------------------------------------------------------ the estimate


def test_estimate_errs_high_on_prose_and_counts_digits_and_other_scripts_fully() -> None:
    prose = "Oak worktops cost more but last for decades; marble stains. " * 20
    assert budget.estimate(prose) >= estimate_tokens(len(prose))  # the double: chars / 4
    assert budget.estimate("2026-01-31 | 1234") >= 14  # tokenizers split numbers by digit
    assert budget.estimate("日本語のテキスト") == 10  # 1.25 a character
    assert budget.estimate("🍕🍷") == 8  # a small vocabulary spells an emoji byte by byte
    assert budget.estimate("") == 0


def test_shorten_keeps_start_and_end_around_a_visible_marker() -> None:
    text = "START " + "middle words " * 2000 + " END"
    short = budget.shorten(text, 300)
    assert budget.estimate(short) <= 300
    assert short.startswith("START") and short.endswith("END")
    cut = len(text) - len(short.replace(short[short.index("\n[…") : short.index("…]\n") + 3], ""))
    assert f"[… {cut:,} characters cut …]" in short
    assert budget.shorten("short", 300) == "short"


def test_fit_drops_the_oldest_first_shortens_a_huge_one_and_keeps_system_and_person() -> None:
    system = {"role": "system", "content": "You are Charlie."}
    history = []
    for n in range(20):
        history.append({"role": "user", "content": f"question {n} " + "words " * 100})
        history.append({"role": "assistant", "content": f"answer {n} " + "words " * 100})
    history[-1] = {"role": "assistant", "content": "huge " * 20_000}
    person = {"role": "user", "content": "And now?"}
    fitted = budget.fit([system, *history, person], 2000, current=len(history) + 1)
    assert budget.request_tokens(fitted, None) <= 2000
    assert fitted[0] == system and fitted[-1] == person
    assert fitted[1]["role"] == "user"  # a trimmed conversation starts with the person
    contents = [m["content"] for m in fitted[1:-1]]
    assert not any(c.startswith("question 0 ") for c in contents)  # the oldest went first
    assert contents[-1].startswith("huge") and "characters cut …]" in contents[-1]
    assert len(contents) > 2  # the huge one was shortened, not left to push out the rest


def test_fit_shortens_this_turn_and_then_the_system_prompt_but_drops_neither() -> None:
    system = {"role": "system", "content": "Persona. " + "memory " * 3000 + "Data notice."}
    person = {"role": "user", "content": "pasted " * 5000}
    fitted = budget.fit([system, person], 1000, current=1)
    assert [m["role"] for m in fitted] == ["system", "user"]
    assert budget.request_tokens(fitted, None) <= 1000
    assert fitted[0]["content"].startswith("Persona.") and fitted[0]["content"].endswith("notice.")
    assert "characters cut" in fitted[1]["content"]


def test_the_answer_never_gets_more_than_half_the_window() -> None:
    assert Budget.of(4096, 1024).answer == 1024
    assert Budget.of(4096, 1024).prompt == 4096 - 1024 - 128
    assert Budget.of(1024, 4000).answer == 512


# ------------------------------------------------------------------ chat turns


def test_every_request_fits_the_window_with_the_oldest_messages_trimmed(
    home: Home, llm: ScriptedLLMServer
) -> None:
    channel, alice = kitchen(home)
    update_project(home, "kitchen", distill_every=1000)  # nothing distilled: all pending
    said = itertools.count()  # a reply that only repeats an earlier one is not an answer
    llm.default = lambda _: f"Noted ({next(said)}). " + " ".join(f"Fact {n}." for n in range(40))
    for number in range(12):
        list(chat.turn(home, client(llm), channel, alice, f"Fact {number}: " + "oak " * 300))
    window = Budget.of(4096, 1024)  # the double says nothing: the default window
    for request in chats(llm):
        assert prompt_tokens(request) <= window.prompt
        assert request["max_tokens"] == 1024
    last = chats(llm)[-1]["messages"]
    assert last[-1]["content"].startswith("Fact 11: ")
    assert last[0]["role"] == "system" and "<memory>" in last[0]["content"]
    assert not any(str(m["content"]).startswith("Fact 0: ") for m in last)


def test_a_stored_8k_token_reply_never_sticks_the_project(
    home: Home, llm: ScriptedLLMServer
) -> None:
    """The incident: llama.cpp with an 8,192-token window answered every turn after the
    looping reply with `HTTP 400: request (8232 tokens) exceeds the available context size
    (8192 tokens)`. The double now refuses just like it, with llama.cpp's own error body."""
    llm.n_ctx = 8192
    channel, alice = kitchen(home)
    conversations.add_message(home, channel, "user", "Plan the kitchen, please.", user=alice)
    conversations.add_message(home, channel, "assistant", looping_reply(8200))
    llm.default = lambda req: distill_answer() if is_distillation(req) else "Oak it is."
    events = list(chat.turn(home, client(llm), channel, alice, "Oak or marble?"))
    replies = [e for e in events if isinstance(e, chat.Reply)]
    assert [r.message.content for r in replies] == ["Oak it is."]
    assert not [e for e in events if isinstance(e, chat.Notice)]  # the distillation fit too
    assert any(isinstance(e, chat.Distilled) for e in events)  # early: outgrowing the window
    for request in llm.requests:
        messages_chars = sum(len(str(m["content"])) for m in request["messages"])
        assert estimate_tokens(messages_chars + len(json.dumps(request.get("tools") or ""))) < 8192
    sent = chats(llm)[0]["messages"]
    assert "characters cut …]" in sent[-2]["content"]  # shortened, not dropped
    assert sent[-2]["content"].startswith("Here is a plan for the kitchen.")
    events = list(chat.turn(home, client(llm), channel, alice, "And the floor?"))
    assert [e.message.content for e in events if isinstance(e, chat.Reply)] == ["Oak it is."]


def test_a_server_that_refuses_anyway_gets_one_retry_at_half_the_budget(
    home: Home, llm: ScriptedLLMServer
) -> None:
    channel, alice = kitchen(home)
    update_project(home, "kitchen", distill_every=1000)
    for number in range(30):
        conversations.add_message(
            home, channel, "user", f"Fact {number}: " + "oak " * 200, user=alice
        )
        conversations.add_message(home, channel, "assistant", "Noted. " * 100)
    llm.n_ctx = 6000  # smaller than the window the person set (16,384)
    llm.reply("Fine.")
    events = list(chat.turn(home, client(llm, context_window=16384), channel, alice, "Next?"))
    assert [e.message.content for e in events if isinstance(e, chat.Reply)] == ["Fine."]
    first, second = chats(llm)
    assert prompt_tokens(second) <= (16384 - 1024 - 512) // 2 < prompt_tokens(first)
    assert second["messages"][-1]["content"] == "Next?"


def test_refused_twice_says_what_to_do_and_the_next_turn_works(
    home: Home, llm: ScriptedLLMServer
) -> None:
    channel, alice = kitchen(home)
    update_project(home, "kitchen", distill_every=1000)
    for number in range(60):
        conversations.add_message(
            home, channel, "user", f"Fact {number}: " + "oak " * 200, user=alice
        )
        conversations.add_message(home, channel, "assistant", "Noted. " * 200)
    refusal = (  # OpenAI's and vLLM's words
        "This model's maximum context length is 2048 tokens. However, your messages resulted "
        "in 21000 tokens. Please reduce the length of the messages."
    )
    llm.error(400, refusal)
    llm.error(400, refusal)
    talking = client(llm, context_window=65536)
    with pytest.raises(LLMContextExceeded) as refused:
        list(chat.turn(home, talking, channel, alice, "Next?"))
    message = str(refused.value)
    assert "maximum context length is 2048 tokens" in message
    assert "CHARLIE_LLM_CONTEXT" in message and "Your message is saved" in message
    assert len(llm.requests) == 2  # one retry, no more
    assert prompt_tokens(llm.requests[1]) <= Budget.of(2048, 1024).prompt
    assert talking.context_window() == 2048  # the server named its window: believed now
    llm.n_ctx = 2048
    llm.default = "Fine."
    events = list(chat.turn(home, talking, channel, alice, "Still there?"))
    assert [e.message.content for e in events if isinstance(e, chat.Reply)] == ["Fine."]
    assert len(chats(llm)) == 3  # at once, not refused first


def test_tool_results_are_capped_to_a_share_of_the_window(
    home: Home, llm: ScriptedLLMServer
) -> None:
    def big(context: ToolContext) -> Result:
        """Return a long report."""
        return Result("START " + "report line\n" * 330 + "END")

    registry = Registry()
    registry.add(Category("test", "test tools", (r"\btest\b",)), [Tool.from_function(big, "test")])
    channel, alice = kitchen(home)
    llm.tool_calls([("big", {})])
    llm.reply("Done.")
    list(
        chat.turn(
            home,
            client(llm, context_window=2048),
            channel,
            alice,
            "run the test",
            registry=registry,
        )
    )
    result = next(m for m in llm.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert "characters cut …]" in result and "START" in result and "END" in result
    assert budget.estimate(result) <= Budget.of(2048, 1024).prompt // 4 + 20  # + the fence


def test_huge_memory_and_pins_are_shortened_never_dropped(
    home: Home, llm: ScriptedLLMServer
) -> None:
    channel, alice = kitchen(home)
    assert channel.project is not None
    memory_md = channel.project.memory_path
    chat.memory.ensure_file(home, channel)
    text = memory_md.read_text(encoding="utf-8")
    memory_md.write_text(
        text.replace("## Summary\n", "## Summary\nSUMMARY-START " + "detail " * 6000 + "\n", 1),
        encoding="utf-8",
    )
    llm.reply("Fine.")
    list(chat.turn(home, client(llm), channel, alice, "Hello?"))
    system = llm.requests[0]["messages"][0]["content"]
    assert system.startswith(chat.BASE_PERSONA) and "SUMMARY-START" in system
    assert "characters cut …]" in system and chat.DATA_NOTICE in system
    assert prompt_tokens(llm.requests[0]) <= Budget.of(4096, 1024).prompt


# ------------------------------------------------------------------ answer cap


def test_max_tokens_comes_from_the_setting_and_the_project_overrides_it(
    home: Home, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHARLIE_LLM_MAX_TOKENS", "700")
    talking = LLMClient.from_settings(load_settings())
    channel, alice = kitchen(home)
    llm.default = "Fine."
    list(chat.turn(home, talking, channel, alice, "Hello?"))
    assert llm.requests[-1]["max_tokens"] == 700
    project = update_project(home, "kitchen", max_tokens=300)
    assert "max_tokens = 300" in project.config_path.read_text(encoding="utf-8")
    list(chat.turn(home, talking, shared_channel(home, project), alice, "Hello?"))
    assert llm.requests[-1]["max_tokens"] == 300


def test_a_reply_cut_at_the_cap_is_stored_whole_and_the_person_told(
    home: Home, llm: ScriptedLLMServer
) -> None:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "Oak is warm, "}}]},
        {"choices": [{"index": 0, "delta": {"content": "durable and"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    llm.respond(lambda req: RawReply(body.encode(), 200, "text/event-stream"))
    channel, alice = kitchen(home)
    events = list(chat.turn(home, client(llm, max_tokens=64), channel, alice, "Oak?"))
    reply = next(e for e in events if isinstance(e, chat.Reply))
    assert reply.message.content == "Oak is warm, durable and" and not reply.message.incomplete
    notices = [e.text for e in events if isinstance(e, chat.Notice)]
    assert notices == [chat.CAPPED.format(64)]
    assert "cap of 64 tokens" in notices[0] and "CHARLIE_LLM_MAX_TOKENS" in notices[0]


# ------------------------------------------------------------------ early distillation


def test_distills_early_when_the_undistilled_part_nears_the_window(
    home: Home, llm: ScriptedLLMServer
) -> None:
    channel, alice = kitchen(home)  # cadence 5: two messages are not due yet
    llm.default = lambda req: distill_answer() if is_distillation(req) else "Noted."
    events = list(chat.turn(home, client(llm), channel, alice, "A short one."))
    assert not any(isinstance(e, chat.Distilled) for e in events)
    long = "Here are all my measurements: " + "120 cm by 60 cm, " * 400
    events = list(chat.turn(home, client(llm), channel, alice, long))
    assert any(isinstance(e, chat.Distilled) for e in events)
    assert conversations.undistilled(home, channel) == []
    distillation = next(r for r in llm.requests if is_distillation(r))
    assert prompt_tokens(distillation) <= Budget.of(4096, 1024).prompt


def test_a_distillation_prompt_fits_with_enormous_messages(
    home: Home, llm: ScriptedLLMServer
) -> None:
    llm.n_ctx = 4096
    channel, alice = kitchen(home)
    for _ in range(2):
        conversations.add_message(home, channel, "user", "paste " * 8000, user=alice)
        conversations.add_message(home, channel, "assistant", "Noted. " * 3000)
    llm.default = lambda req: distill_answer() if is_distillation(req) else "Fine."
    events = list(chat.turn(home, client(llm), channel, alice, "Summarise?"))
    kinds = {type(e).__name__ for e in events if isinstance(e, chat.Distilled | chat.Notice)}
    assert kinds == {"Distilled"}  # in as many requests as fit, none refused
    sent = [r for r in llm.requests if is_distillation(r)]
    for distillation in sent:
        assert distillation["max_tokens"] >= 1024
        assert prompt_tokens(distillation) + distillation["max_tokens"] <= 4096
    assert "characters cut …]" in sent[0]["messages"][1]["content"]


def test_ollamas_silent_cut_is_told_once_and_the_next_turn_fits_what_it_reads(
    home: Home, llm: ScriptedLLMServer
) -> None:
    """Ollama drops the start of a prompt longer than its num_ctx and answers anyway
    (ollama/ollama#8099); the client sees it in usage.prompt_tokens. That answer is kept,
    marked cut, with the error; the next turn is fitted to what the server reads."""
    channel, alice = kitchen(home)
    update_project(home, "kitchen", distill_every=1000)
    for number in range(30):
        conversations.add_message(
            home, channel, "user", f"Fact {number}: " + "oak " * 45, user=alice
        )
        conversations.add_message(home, channel, "assistant", f"Noted {number}: " + "yes " * 30)
    llm.context_window = 700
    llm.default = "Fine."
    talking = client(llm)
    with pytest.raises(LLMContextExceeded, match="CHARLIE_LLM_CONTEXT") as told:
        list(chat.turn(home, talking, channel, alice, "Next?"))
    assert "Your message is saved" in str(told.value)
    assert conversations.recent(home, channel, 1)[0].incomplete
    assert talking.context_window() == told.value.window <= 700
    events = list(chat.turn(home, talking, channel, alice, "Still there?"))
    assert [e.message.content for e in events if isinstance(e, chat.Reply)] == ["Fine."]
    assert chats(llm)[-1]["messages"][-1]["content"] == "Still there?"


def test_a_request_that_fits_is_sent_as_it_is() -> None:
    messages = [
        {"role": "system", "content": "You are Charlie."},
        {"role": "user", "content": "Tell me everything about oak."},
        {"role": "assistant", "content": "Oak is a hardwood. " * 150},
        {"role": "user", "content": "And marble?"},
    ]
    assert budget.fit(messages, 2000, current=3) == messages
