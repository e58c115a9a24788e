"""What real model servers do that the OpenAI API never does, each against the scripted
double speaking that server's way, and the upstream thread that shows it."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from llm_double import RawReply, ScriptedLLMServer, TextReply

from charlie import conversations
from charlie.chat import turn as chat
from charlie.conversations import shared_channel
from charlie.errors import LLMBadResponse, LLMContextExceeded, LLMPromptTruncated, LLMRejected
from charlie.home import Home
from charlie.llm.client import Completion, Delta, LLMClient, ThinkFilter, strip_think
from charlie.memory import distill
from charlie.projects import create_project
from charlie.users import ensure_user

HI = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}]


def client(server: ScriptedLLMServer, model: str = "test-model") -> LLMClient:
    return LLMClient(server.base_url, model, retries=0, backoff=0.01)


def streamed(
    made: LLMClient, messages: list[dict[str, Any]] = HI, **kwargs: Any
) -> tuple[str, Completion]:
    items = list(made.stream(messages, **kwargs))
    done = items[-1]
    assert isinstance(done, Completion)
    return "".join(i.text for i in items if isinstance(i, Delta)), done


@pytest.fixture
def qwen() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(model="qwen3-8b") as server:
        yield server


# ---------------------------------------------------------------- structured output


def test_lm_studio_refusal_of_json_object_is_told_with_its_own_words(
    llm: ScriptedLLMServer,
) -> None:
    """LM Studio answers `response_format: {"type": "json_object"}` with HTTP 400 and a bare
    string error, "'response_format.type' must be 'json_schema' or 'text'"
    (lmstudio-ai/lmstudio-bug-tracker#189, #169)."""
    llm.refuse_json_object = True
    with pytest.raises(LLMRejected, match="must be 'json_schema' or 'text'"):
        client(llm).chat(HI, response_format={"type": "json_object"})


def test_distillation_asks_lm_studio_for_json_schema_and_is_answered(
    home: Home, llm: ScriptedLLMServer
) -> None:
    """Charlie's distillation sends `json_schema`, which LM Studio takes, never the
    `json_object` it refuses (lmstudio-ai/lmstudio-bug-tracker#189)."""
    llm.refuse_json_object = True
    channel = shared_channel(home, create_project(home, "Garden"))
    alice = ensure_user(home.db, "alice")
    conversations.add_message(home, channel, "user", "We plant the oak in March.", user=alice)
    llm.reply(
        json.dumps(
            {
                "summary": "Planting the garden: an oak goes in this spring.",
                "decisions": ["Plant the oak in March."],
                "quotes": [],
            }
        )
    )
    result = distill.distill(home, channel, client(llm))
    assert result.structured and result.attempts == 1
    assert [r["response_format"]["type"] for r in llm.requests] == ["json_schema"]


def test_a_server_refusing_structured_output_gets_the_json_described_in_the_prompt(
    home: Home, llm: ScriptedLLMServer
) -> None:
    """A server that refuses `response_format` with a 400 (older llama.cpp and vLLM
    builds; LM Studio before json_schema: lmstudio-ai/lmstudio-bug-tracker#169) is asked
    again without it, the prompt alone describing the JSON."""
    llm.refuse_response_format = True
    channel = shared_channel(home, create_project(home, "Garden"))
    alice = ensure_user(home.db, "alice")
    conversations.add_message(home, channel, "user", "We plant the oak in March.", user=alice)
    llm.reply(
        "Here it is: "
        + json.dumps({"summary": "Planting an oak.", "decisions": ["Oak in March."], "quotes": []})
    )
    result = distill.distill(home, channel, client(llm))
    assert not result.structured and result.memory.texts == ["Oak in March."]
    plain = llm.requests[1]
    assert "response_format" not in plain
    assert '{"summary": "...", "decisions": [{"text": "...",' in plain["messages"][0]["content"]


# ---------------------------------------------------------------- thinking


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_fields_are_never_the_answer(llm: ScriptedLLMServer, field: str) -> None:
    """Thinking arrives apart from the answer: `reasoning_content` (llama.cpp, vLLM, LM
    Studio) or `reasoning` (Ollama's OpenAI API); content can be null beside it
    (QwenLM/Qwen3#1297)."""
    thought = "The user greets me. I should greet back."
    llm.reply("Hello!", reasoning=thought, reasoning_field=field)
    llm.reply("Hello again!", reasoning=thought, reasoning_field=field)
    text, done = streamed(client(llm))
    assert text == done.content == "Hello!"
    assert done.reasoning == thought
    whole = client(llm).chat(HI)
    assert whole.content == "Hello again!" and whole.reasoning == thought


def test_think_block_in_content_is_kept_out_of_the_answer(llm: ScriptedLLMServer) -> None:
    """Without a reasoning parser the server leaves `<think>…</think>` in the content
    (Qwen3 and DeepSeek-R1 emit it; QwenLM/Qwen3#1396)."""
    llm.reply("<think>\nThey want the time.\n</think>\n\nIt is noon.", chunk_size=3)
    text, done = streamed(client(llm))
    assert "think" not in text and "They want" not in text
    assert text.strip() == done.content.strip() == "It is noon."
    assert done.reasoning.strip() == "They want the time."


def test_a_close_without_an_open_marks_everything_before_it_as_thinking(
    llm: ScriptedLLMServer,
) -> None:
    """Qwen3-Thinking, QwQ and DeepSeek-R1 templates open `<think>` in the prompt, so the
    model's text has only the closing `</think>` (Cerebras/cerebras-cloud-sdk-python#10,
    vllm-project/vllm#31045). Once the client has seen that, it holds a stream's opening
    text until the thinking ends, so none of it is shown."""
    made = client(llm)
    llm.reply("Okay, the user asks 1+1.\n</think>\n\nTwo.")
    first = made.chat(HI)
    assert first.content.strip() == "Two."
    assert first.reasoning.startswith("Okay, the user asks")
    assert made.observed.opens_thinking
    llm.reply("Hmm, a greeting; be brief.</think>\n\nHello!", chunk_size=2)
    text, done = streamed(made)
    assert text.strip() == done.content.strip() == "Hello!"
    assert "greeting" in done.reasoning


def test_a_server_that_opens_thinking_still_shows_an_answer_without_it(
    llm: ScriptedLLMServer,
) -> None:
    """A held stream with no `</think>` at all was an answer after all (thinking turned
    off with `/no_think` leaves no tags); only a cut one (finish_reason "length") is
    thinking that ran out of tokens."""
    made = client(llm)
    made.observed.opens_thinking = True
    llm.reply("Plain answer, no tags.")
    text, done = streamed(made)
    assert text == done.content == "Plain answer, no tags."


def test_think_filter_handles_split_tags_and_both_kinds_of_block() -> None:
    """Tags split across stream chunks, an open block, and a bare close."""
    filtered = ThinkFilter()
    pieces = ["Sure. <th", "ink>plan", " more</thi", "nk>Done", "."]
    assert "".join(filtered.feed(p) for p in pieces) + filtered.flush() == "Sure. Done."
    assert filtered.reasoning == "plan more"
    unclosed = ThinkFilter()
    assert unclosed.feed("<think>still thinking when the tokens ran out") == ""
    assert unclosed.flush(cut=True) == "" and unclosed.shown == ""
    assert strip_think("reasoning first\n</think>\nthe answer") == "the answer"


def test_thinking_that_used_every_token_is_asked_again_without_thinking(
    qwen: ScriptedLLMServer,
) -> None:
    """Qwen3 can spend the whole answer budget thinking: content empty, finish_reason
    "length" (lmstudio-ai/lmstudio-bug-tracker#1990). The client asks once more with
    thinking off — `chat_template_kwargs.enable_thinking: false` and Qwen's `/no_think` —
    and nothing of the first try is shown."""
    qwen.reply("", reasoning="Let me consider every angle… " * 20, finish_reason="length")
    qwen.reply("Paris.")
    text, done = streamed(client(qwen, "qwen3-8b"), [{"role": "user", "content": "Capital?"}])
    assert text == done.content == "Paris."
    first, second = qwen.requests
    assert "chat_template_kwargs" not in first
    assert second["chat_template_kwargs"] == {"enable_thinking": False}
    assert second["messages"][-1]["content"] == "Capital?\n/no_think"
    assert first["messages"][-1]["content"] == "Capital?"  # the caller's messages untouched


def test_an_unclosed_think_block_cut_by_the_token_limit_is_retried_too(
    qwen: ScriptedLLMServer,
) -> None:
    """The same with the thinking left in the content, opened and never closed."""
    qwen.reply("<think>Considering the options at length", finish_reason="length")
    qwen.reply("<think>\n\n</think>\n\nRome.")
    answer = client(qwen, "qwen3-8b").chat(HI)
    assert answer.content.strip() == "Rome."
    assert qwen.requests[1]["chat_template_kwargs"] == {"enable_thinking": False}


def test_a_model_that_only_ever_thinks_gets_a_clear_error(llm: ScriptedLLMServer) -> None:
    """Still no answer with thinking off (a server whose reasoning parser files the answer
    as reasoning does that: vllm-project/vllm#19839): say what to change, once."""
    llm.reply("", reasoning="thinking " * 50, finish_reason="length")
    llm.reply("", reasoning="still thinking", finish_reason="stop")
    with pytest.raises(LLMBadResponse, match=r"only thought .* CHARLIE_LLM_MAX_TOKENS"):
        streamed(client(llm))
    assert len(llm.requests) == 2
    assert "/no_think" not in json.dumps(llm.requests[1])  # not a Qwen model


def test_a_call_written_while_thinking_is_run_only_when_it_is_all_there_is(
    llm: ScriptedLLMServer,
) -> None:
    """llama.cpp surfaces a `<tool_call>` the model wrote inside its thinking as
    reasoning (ggml-org/llama.cpp#24202): when the model then stops, that call was its move
    and runs. A call drafted while thinking beside an answer or a real call is a plan, and
    running it would duplicate or invent work (PrimeIntellect-ai/renderers#80)."""
    call = '<tool_call>{"name": "now", "arguments": {}}</tool_call>'
    llm.reply("", reasoning=f"I need the time. {call}")
    _, only = streamed(client(llm), tools=TOOLS)
    assert [(c.id, c.name, c.arguments) for c in only.tool_calls] == [("think_call_0", "now", "{}")]
    llm.reply("It is noon, I believe.", reasoning=f"Maybe {call}")
    _, answered = streamed(client(llm), tools=TOOLS)
    assert answered.tool_calls == []
    llm.tool_calls([("days_between", {"start": "a", "end": "b"})])
    native = client(llm).chat(HI, tools=TOOLS)
    assert [c.name for c in native.tool_calls] == ["days_between"]


def test_thinking_is_never_stored_as_the_reply(home: Home, llm: ScriptedLLMServer) -> None:
    """A whole turn: the stored reply and what was shown are the answer only."""
    channel = shared_channel(home, create_project(home, "Plain"))
    alice = ensure_user(home.db, "alice")
    llm.reply("Good morning!", reasoning="A greeting. Keep it short.")
    made = client(llm)
    events = list(chat.turn(home, made, channel, alice, "Morning!"))
    shown = "".join(e.text for e in events if isinstance(e, chat.Token))
    assert shown == "Good morning!"
    assert conversations.recent(home, channel, 1)[0].content == "Good morning!"


# ---------------------------------------------------------------- streamed tool calls


def test_ollama_parallel_calls_all_at_index_0_stay_two_calls(llm: ScriptedLLMServer) -> None:
    """Ollama numbers every streamed call `index: 0`, each with its own id
    (ollama/ollama#15457): assembled by index alone they merge into one call with
    `{…}{…}` arguments (BerriAI/litellm#33678)."""
    llm.tool_calls([("read_note", {"note": "a"}), ("read_note", {"note": "b"})], index_style="same")
    _, done = streamed(client(llm), tools=TOOLS)
    assert [json.loads(c.arguments) for c in done.tool_calls] == [{"note": "a"}, {"note": "b"}]
    assert len({c.id for c in done.tool_calls}) == 2


def test_calls_streamed_without_any_index_are_told_apart(llm: ScriptedLLMServer) -> None:
    """Ollama before 0.4.7 sent tool-call deltas with no `index` (ollama/ollama#7881)."""
    llm.tool_calls([("now", {}), ("read_note", {"note": "b"})], index_style="none")
    _, done = streamed(client(llm), tools=TOOLS)
    assert [(c.name, c.arguments) for c in done.tool_calls] == [
        ("now", "{}"),
        ("read_note", '{"note": "b"}'),
    ]


def test_a_delta_with_only_an_index_continues_the_call_with_that_index(
    llm: ScriptedLLMServer,
) -> None:
    """OpenAI's own shape, interleaved: ids come once, then pieces by index."""

    def event(*calls: dict[str, Any], finish: str | None = None) -> str:
        delta = {"tool_calls": list(calls)} if calls else {}
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({'choices': [choice]})}\n\n"

    body = "".join(
        [
            event({"index": 0, "id": "a", "function": {"name": "read_note", "arguments": ""}}),
            event({"index": 1, "id": "b", "function": {"name": "now", "arguments": ""}}),
            event({"index": 0, "function": {"arguments": '{"note": '}}),
            event({"index": 1, "function": {"arguments": "{}"}}),
            event({"index": 0, "function": {"arguments": '"x"}'}}),
            event(finish="tool_calls"),
            "data: [DONE]\n\n",
        ]
    )
    llm.respond(lambda _: RawReply(body.encode(), content_type="text/event-stream"))
    _, done = streamed(client(llm), tools=TOOLS)
    assert [(c.id, c.name, c.arguments) for c in done.tool_calls] == [
        ("a", "read_note", '{"note": "x"}'),
        ("b", "now", "{}"),
    ]


@pytest.mark.parametrize("stream", [True, False])
def test_arguments_sent_as_an_object_are_taken_as_json(
    llm: ScriptedLLMServer, stream: bool
) -> None:
    """Ollama and some llama.cpp versions send `arguments` as a JSON object, not the
    string OpenAI specifies (ggml-org/llama.cpp#20198, BerriAI/litellm#37792)."""
    llm.tool_calls([("read_note", {"note": "auth/jwt"})], arguments_as_object=True)
    if stream:
        _, done = streamed(client(llm), tools=TOOLS)
    else:
        done = client(llm).chat(HI, tools=TOOLS)
    assert json.loads(done.tool_calls[0].arguments) == {"note": "auth/jwt"}


# ---------------------------------------------------------------- tools dropped


def test_a_server_that_drops_tools_still_gets_its_text_calls_run(
    home: Home, llm: ScriptedLLMServer
) -> None:
    """llama.cpp without `--jinja` (or with a template without tools) drops `tools`
    silently (ggml-org/llama.cpp#27129); a Qwen model then writes `<tool_call>` as text.
    The call runs."""
    llm.drop_tools = True

    def answer(request: dict[str, Any]) -> TextReply:
        assert "tools" not in request  # the model never saw them
        return TextReply('<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>')

    llm.respond(answer)
    llm.reply("It is Monday.")
    channel = shared_channel(home, create_project(home, "Plain"))
    made = client(llm)
    events = list(chat.turn(home, made, channel, ensure_user(home.db, "alice"), "What day?"))
    assert "".join(e.text for e in events if isinstance(e, chat.Token)) == "It is Monday."
    steps = [e.step for e in events if isinstance(e, chat.TraceEvent)]
    assert [getattr(s, "name", None) for s in steps if type(s).__name__ == "Called"] == ["now"]
    assert "tools" in llm.requests[0]  # Charlie did send them


def test_a_capped_copy_of_the_client_adds_to_the_same_record(llm: ScriptedLLMServer) -> None:
    """What a capped copy sees of the server (a template that opens `<think>`), the client
    knows too."""
    made = client(llm)
    llm.reply("Okay.\n</think>\n\nTwo.")
    made.with_max_tokens(64).chat(HI)
    assert made.observed.opens_thinking


# ---------------------------------------------------------------- silent truncation


def long_prompt() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are Charlie. " + "Memory line. " * 500},
        {"role": "user", "content": "Question? " + "context " * 700},
    ]


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_silently_dropping_the_start_of_the_prompt_is_caught(
    llm: ScriptedLLMServer, stream: bool
) -> None:
    """Ollama cuts a prompt longer than its num_ctx from the start, answers 200, and
    reports only the tokens it kept (ollama/ollama#4967, ollama/ollama#17889). The client
    compares usage.prompt_tokens with what it sent, says what to set, and fits later
    requests to what the server did read."""
    llm.context_window = 1000
    llm.reply("An answer written without the instructions.")
    made = client(llm)
    with pytest.raises(LLMPromptTruncated, match="CHARLIE_LLM_CONTEXT") as caught:
        if stream:
            streamed(made, long_prompt())
        else:
            made.chat(long_prompt())
    assert isinstance(caught.value, LLMContextExceeded)
    assert caught.value.window == 1000 and caught.value.estimated >= 2000
    assert made.observed.last_usage["prompt_tokens"] == 1000
    assert made.context_window() == 1000
    if stream:
        assert llm.requests[0]["stream_options"] == {"include_usage": True}


def test_a_prompt_the_server_read_whole_raises_nothing(llm: ScriptedLLMServer) -> None:
    """No false alarm: a long prompt read whole, or a short one reported low (old Ollama
    counted only the tokens it had not cached: ollama/ollama#2068)."""
    llm.reply("Fine.")
    made = client(llm)
    assert made.chat(long_prompt()).content == "Fine."
    assert made.observed.last_usage["prompt_tokens"] >= made.observed.last_prompt_estimate
    llm.context_window = 20
    llm.reply("Also fine.")
    assert made.chat([{"role": "user", "content": "short " * 100}]).content == "Also fine."


LLAMA_PARSE_ERROR = (
    b'data: {"error":{"code":500,"message":"The model produced output that does not match '
    b'the expected peg-native format","type":"server_error"}}\n\n'
)


def test_an_error_inside_the_stream_is_told_with_the_servers_words(
    llm: ScriptedLLMServer,
) -> None:
    """llama.cpp ends a stream with `data: {"error": …}` and no [DONE] when it cannot parse
    the model's tool-call output (seen against llama-server with a small model, --jinja)."""
    llm.garbage(LLAMA_PARSE_ERROR, content_type="text/event-stream")
    client = LLMClient(llm.base_url, "test-model")
    try:
        with pytest.raises(LLMBadResponse, match="does not match the expected peg-native"):
            list(client.stream([{"role": "user", "content": "Hi"}]))
    finally:
        client.close()


def test_a_turn_whose_tool_call_the_server_cannot_parse_is_answered_without_tools(
    home: Home, llm: ScriptedLLMServer
) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    alice = ensure_user(home.db, "alice")
    llm.garbage(LLAMA_PARSE_ERROR, content_type="text/event-stream")
    llm.reply("The plumber comes on Tuesday.")
    client = LLMClient(llm.base_url, "test-model")
    try:
        events = list(chat.turn(home, client, channel, alice, "When is the plumber coming?"))
    finally:
        client.close()
    replies = [e.message.content for e in events if isinstance(e, chat.Reply)]
    assert replies == ["The plumber comes on Tuesday."]
    assert "tools" in llm.requests[0] and "tools" not in llm.requests[1]
    stored = conversations.recent(home, channel, 5)
    assert [m.content for m in stored][-1] == "The plumber comes on Tuesday."


def test_an_error_after_text_was_shown_is_answered_again_without_tools(
    home: Home, llm: ScriptedLLMServer
) -> None:
    """The same llama.cpp error arriving after the model's text streamed (a small model
    echoing its prompt): the text shown is dropped, the turn is asked again in text."""
    channel = shared_channel(home, create_project(home, "Kitchen"))
    alice = ensure_user(home.db, "alice")
    echoed = b'data: {"choices":[{"index":0,"delta":{"content":"You are Charlie. Tools: ["}}]}\n\n'
    llm.garbage(echoed + LLAMA_PARSE_ERROR, content_type="text/event-stream")
    llm.reply("The plumber comes on Tuesday.")
    client = LLMClient(llm.base_url, "test-model")
    try:
        events = list(chat.turn(home, client, channel, alice, "When is the plumber coming?"))
    finally:
        client.close()
    notices = [e.text for e in events if isinstance(e, chat.Notice)]
    assert any("answering again without tools" in n for n in notices)
    replies = [e.message.content for e in events if isinstance(e, chat.Reply)]
    assert replies == ["The plumber comes on Tuesday."]
    assert "tools" in llm.requests[0] and "tools" not in llm.requests[1]
