"""Tests for the ScriptedLLMServer test double, driven over real HTTP with plain httpx."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from llm_double import (
    EMBEDDING_DIM,
    ErrorReply,
    ScriptedLLMServer,
    TextReply,
    ToolCallsReply,
    assemble_stream,
    fake_embedding,
    parse_sse,
)


@pytest.fixture
def llm() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as server:
        yield server


@pytest.fixture
def client(llm: ScriptedLLMServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=llm.base_url, timeout=5.0) as c:
        yield c


def chat_body(content: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": "test-model", "messages": [{"role": "user", "content": content}], **extra}


def stream_lines(client: httpx.Client, body: dict[str, Any]) -> tuple[httpx.Response, list[str]]:
    with client.stream("POST", "/chat/completions", json=body) as response:
        lines = list(response.iter_lines())
    return response, lines


def data_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("data: ")]


def reply_text(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


# -- lifecycle / routing ---------------------------------------------------------------------


def test_base_url_is_loopback_v1_and_lifecycle_is_clean() -> None:
    before = set(threading.enumerate())
    server = ScriptedLLMServer()
    with pytest.raises(RuntimeError):
        _ = server.base_url
    server.start()
    port = server.port
    try:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        with pytest.raises(RuntimeError):
            server.start()
        server.default = "ok"
        for _ in range(3):
            assert httpx.post(f"{server.base_url}/chat/completions", json=chat_body()).is_success
    finally:
        server.stop()
    server.stop()  # idempotent
    assert set(threading.enumerate()) <= before
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1.0)


def test_models_lists_default_model(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    response = client.get("/models")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "object": "list",
        "data": [{"id": "test-model", "object": "model", "owned_by": "test"}],
    }


def test_models_lists_all_configured_models() -> None:
    with ScriptedLLMServer(model="a", models=["a", "b", "embed"]) as server:
        ids = [m["id"] for m in httpx.get(f"{server.base_url}/models").json()["data"]]
    assert ids == ["a", "b", "embed"]


def test_models_carry_what_the_server_says_of_them() -> None:
    """llama.cpp's `meta` in its /v1/models entry; Ollama's POST /api/show."""
    with ScriptedLLMServer(model="a", models=["a", "b"]) as server:
        server.meta["a"] = {"n_params": 1_543_714_304, "n_ctx_train": 32768}
        server.shown["b"] = {"details": {"parameter_size": "3.2B"}}
        listed = httpx.get(f"{server.base_url}/models").json()["data"]
        root = server.base_url.removesuffix("/v1")
        shown = httpx.post(f"{root}/api/show", json={"model": "b"})
        missing = httpx.post(f"{root}/api/show", json={"model": "a"})
    assert listed[0]["meta"] == {"n_params": 1_543_714_304, "n_ctx_train": 32768}
    assert "meta" not in listed[1]
    assert shown.json() == {"details": {"parameter_size": "3.2B"}}
    assert missing.status_code == 404


def test_unknown_path_and_wrong_method(client: httpx.Client) -> None:
    missing = client.get("/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "invalid_request_error"
    wrong = client.get("/chat/completions")
    assert wrong.status_code == 405
    assert "error" in wrong.json()


# -- non-streaming chat ----------------------------------------------------------------------


def test_non_stream_reply_has_openai_shape(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.reply("Hello, Charlie here.")
    body = {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "abcd"},  # 4 chars
            {"role": "user", "content": [{"type": "text", "text": "efghi"}]},  # 5 chars
        ],
    }
    response = client.post("/chat/completions", json=body)
    assert response.status_code == 200
    data = response.json()
    assert data["id"].startswith("chatcmpl-")
    assert data["object"] == "chat.completion"
    assert isinstance(data["created"], int)
    assert data["model"] == "test-model"
    assert data["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello, Charlie here."},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    # 9 prompt chars -> ceil(9 / 4) = 3; 20 completion chars -> 5
    assert data["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    assert llm.pending == 0


def test_queue_is_fifo_and_requests_are_recorded(
    llm: ScriptedLLMServer, client: httpx.Client
) -> None:
    llm.reply("first")
    llm.reply("second")
    answers = [
        reply_text(client.post("/chat/completions", json=chat_body(q))) for q in ("q0", "q1")
    ]
    assert answers == ["first", "second"]
    assert [r["messages"][0]["content"] for r in llm.requests] == ["q0", "q1"]
    assert llm.requests[0] == chat_body("q0")


def test_invalid_json_body_is_400(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.reply("unused")
    response = client.post(
        "/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert llm.requests == []
    assert llm.pending == 1


def test_unknown_model_is_404_and_does_not_consume_queue(
    llm: ScriptedLLMServer, client: httpx.Client
) -> None:
    llm.reply("kept for later")
    response = client.post("/chat/completions", json={**chat_body(), "model": "gpt-nope"})
    assert response.status_code == 404
    assert response.json()["error"] == {
        "message": "The model `gpt-nope` does not exist",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
    assert llm.pending == 1
    ok = client.post("/chat/completions", json=chat_body())
    assert ok.json()["choices"][0]["message"]["content"] == "kept for later"
    assert [r["model"] for r in llm.requests] == ["gpt-nope", "test-model"]


def test_refuse_response_format(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.refuse_response_format = True
    llm.reply("plain")
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}
    refused = client.post("/chat/completions", json=chat_body(response_format=schema))
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "response_format" in error["message"]
    assert "not supported" in error["message"]
    assert llm.pending == 1  # the retry without response_format gets the scripted reply
    retry = client.post("/chat/completions", json=chat_body())
    assert retry.json()["choices"][0]["message"]["content"] == "plain"
    assert "response_format" in llm.requests[0]
    assert "response_format" not in llm.requests[1]


def test_response_format_accepted_by_default(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.reply('{"a": 1}')
    response = client.post(
        "/chat/completions", json=chat_body(response_format={"type": "json_object"})
    )
    assert response.status_code == 200


def test_error_reply(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.error(503, "model is loading")
    llm.error(429, "slow down")
    response = client.post("/chat/completions", json=chat_body())
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["message"] == "model is loading"
    assert response.json()["error"]["type"] == "server_error"
    # also a JSON error when streaming was requested
    streamed, lines = stream_lines(client, chat_body(stream=True))
    assert streamed.status_code == 429
    assert json.loads("".join(lines))["error"]["message"] == "slow down"


def test_garbage_reply(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.garbage()
    llm.garbage(b"data: {broken\n\n", status=200, content_type="text/event-stream")
    response = client.post("/chat/completions", json=chat_body())
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html"
    assert response.content == b"<html>not json</html>"
    with pytest.raises(json.JSONDecodeError):
        response.json()
    streamed, lines = stream_lines(client, chat_body(stream=True))
    assert streamed.headers["content-type"] == "text/event-stream"
    assert lines == ["data: {broken", ""]


def test_empty_queue_is_loud_500(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    response = client.post("/chat/completions", json=chat_body())
    assert response.status_code == 500
    assert response.json()["error"]["message"] == "ScriptedLLMServer: no scripted response left"


def test_default_reply_when_queue_empty(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.default = "fallback"
    llm.reply("scripted")
    contents = [reply_text(client.post("/chat/completions", json=chat_body())) for _ in range(3)]
    assert contents == ["scripted", "fallback", "fallback"]


def test_respond_callback_sees_request(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.respond(lambda req: "echo: " + req["messages"][-1]["content"])
    llm.respond(lambda req: ToolCallsReply([("lookup", {"n": len(req["messages"])})]))
    llm.respond(lambda req: ErrorReply(502, "bad gateway"))
    llm.respond(lambda req: TextReply("streamed", chunk_size=2))
    first = client.post("/chat/completions", json=chat_body("ping"))
    assert first.json()["choices"][0]["message"]["content"] == "echo: ping"
    second = client.post("/chat/completions", json=chat_body()).json()["choices"][0]
    assert second["finish_reason"] == "tool_calls"
    assert json.loads(second["message"]["tool_calls"][0]["function"]["arguments"]) == {"n": 1}
    assert client.post("/chat/completions", json=chat_body()).status_code == 502
    _, lines = stream_lines(client, chat_body(stream=True))
    assert assemble_stream(parse_sse(lines)).content == "streamed"


def test_respond_callback_exception_is_500_and_recorded(
    llm: ScriptedLLMServer, client: httpx.Client
) -> None:
    def boom(request: dict[str, Any]) -> str:
        raise ValueError("kaput")

    llm.respond(boom)
    response = client.post("/chat/completions", json=chat_body())
    assert response.status_code == 500
    assert "kaput" in response.json()["error"]["message"]
    assert [type(e) for e in llm.handler_errors] == [ValueError]


def test_non_stream_tool_calls(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.tool_calls([("remember", {"fact": "likes tea"}), ("search", '{"q": "raw"')])
    data = client.post("/chat/completions", json=chat_body()).json()
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant"
    assert message["content"] is None
    calls = message["tool_calls"]
    assert [c["type"] for c in calls] == ["function", "function"]
    assert len({c["id"] for c in calls}) == 2
    assert calls[0]["function"] == {"name": "remember", "arguments": '{"fact": "likes tea"}'}
    assert calls[1]["function"] == {"name": "search", "arguments": '{"q": "raw"'}  # raw string


def test_non_stream_tool_calls_with_text(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.tool_calls([("noop", {})], text="Let me check.")
    message = client.post("/chat/completions", json=chat_body()).json()["choices"][0]["message"]
    assert message["content"] == "Let me check."
    assert message["tool_calls"][0]["function"]["arguments"] == "{}"


# -- streaming chat --------------------------------------------------------------------------


def test_streamed_reply_sse_framing(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    text = "The quick brown fox jumps."
    llm.reply(text, chunk_size=5)
    response, lines = stream_lines(client, chat_body(stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["transfer-encoding"] == "chunked"
    # every event is "data: ..." followed by a blank line
    assert lines[1::2] == [""] * (len(lines) // 2)
    assert lines[-2] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in data_lines(lines)[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    contents = [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]]
    assert contents == ["The q", "uick ", "brown", " fox ", "jumps", "."]
    assert chunks[-1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }
    assert all("usage" not in c for c in chunks)
    assembled = assemble_stream(parse_sse(lines))
    assert (assembled.role, assembled.content, assembled.finish_reason) == (
        "assistant",
        text,
        "stop",
    )


def test_stream_arrives_incrementally(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.reply("abcdefgh", chunk_size=2, chunk_delay=0.15)  # role + 4 content + final chunks
    arrivals: list[float] = []
    with client.stream("POST", "/chat/completions", json=chat_body(stream=True)) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                arrivals.append(time.monotonic())
    assert len(arrivals) == 7  # 6 chunks + [DONE]
    # buffered delivery would make all lines arrive together
    assert arrivals[-1] - arrivals[0] >= 0.5


def test_stream_include_usage(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.reply("12345678")
    body = chat_body("abcd", stream=True, stream_options={"include_usage": True})
    _, lines = stream_lines(client, body)
    chunks = parse_sse(lines)
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert assemble_stream(chunks).usage == usage_chunk["usage"]


def test_streamed_tool_calls_deltas(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    args = {"fact": "Charlie likes green tea", "tags": ["drink", "preference"]}
    llm.tool_calls([("remember", args), ("search", {"query": "tea"})], text="Sure.")
    _, lines = stream_lines(client, chat_body(stream=True, tools=[]))
    chunks = parse_sse(lines)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    tool_deltas = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]

    first = [td for td in tool_deltas if td["index"] == 0]
    head, rest = first[0], first[1:]
    assert head["id"].startswith("call_")
    assert head["type"] == "function"
    assert head["function"] == {"name": "remember", "arguments": ""}
    assert len(rest) >= 2  # arguments are split across several chunks
    assert all(set(td) == {"index", "function"} for td in rest)
    assert all(set(td["function"]) == {"arguments"} for td in rest)
    assert json.loads("".join(td["function"]["arguments"] for td in rest)) == args

    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assembled = assemble_stream(chunks)
    assert assembled.content == "Sure."
    assert [tc["name"] for tc in assembled.tool_calls] == ["remember", "search"]
    assert json.loads(assembled.tool_calls[0]["arguments"]) == args
    assert json.loads(assembled.tool_calls[1]["arguments"]) == {"query": "tea"}
    assert assembled.tool_calls[0]["id"] != assembled.tool_calls[1]["id"]


def test_non_stream_when_stream_false(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.reply("x")
    response = client.post("/chat/completions", json=chat_body(stream=False))
    assert response.headers["content-type"] == "application/json"
    assert response.json()["object"] == "chat.completion"


# -- delay -----------------------------------------------------------------------------------


def test_delay_triggers_client_timeout_then_queue_continues(
    llm: ScriptedLLMServer, client: httpx.Client
) -> None:
    llm.delay(3.0)
    llm.reply("too late")
    llm.reply("on time")
    with pytest.raises(httpx.ReadTimeout):
        client.post("/chat/completions", json=chat_body(), timeout=0.3)
    response = client.post("/chat/completions", json=chat_body())
    assert response.json()["choices"][0]["message"]["content"] == "on time"
    started = time.monotonic()
    llm.stop()  # must cut the pending 3 s delay short
    assert time.monotonic() - started < 2.0


def test_delay_waits_before_answering(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    llm.reply("fast")
    llm.delay(0.4)
    llm.reply("slow")
    started = time.monotonic()
    client.post("/chat/completions", json=chat_body())
    assert time.monotonic() - started < 0.4
    started = time.monotonic()
    response = client.post("/chat/completions", json=chat_body())
    assert time.monotonic() - started >= 0.4
    assert response.json()["choices"][0]["message"]["content"] == "slow"


def test_delay_with_nothing_queued_after_applies_to_next_request(
    llm: ScriptedLLMServer, client: httpx.Client
) -> None:
    llm.default = "default"
    llm.delay(0.3)
    started = time.monotonic()
    response = client.post("/chat/completions", json=chat_body())
    assert time.monotonic() - started >= 0.3
    assert response.json()["choices"][0]["message"]["content"] == "default"


# -- embeddings ------------------------------------------------------------------------------


def test_embeddings_shape_determinism_and_similarity(
    llm: ScriptedLLMServer, client: httpx.Client
) -> None:
    texts = ["I like green tea", "green tea is nice", "the stock market crashed"]
    response = client.post("/embeddings", json={"model": "test-model", "input": texts})
    assert response.status_code == 200
    data = response.json()
    assert data["object"] == "list"
    assert data["model"] == "test-model"
    assert [d["index"] for d in data["data"]] == [0, 1, 2]
    assert all(d["object"] == "embedding" for d in data["data"])
    vectors = [d["embedding"] for d in data["data"]]
    assert all(len(v) == EMBEDDING_DIM for v in vectors)
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0) for v in vectors)
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2])
    assert data["usage"]["prompt_tokens"] == data["usage"]["total_tokens"] > 0

    single = client.post("/embeddings", json={"model": "test-model", "input": "I LIKE green tea"})
    assert single.json()["data"][0]["embedding"] == vectors[0]  # case-insensitive, deterministic
    assert vectors[0] == fake_embedding("i like green tea")
    assert llm.embedding_requests == [
        {"model": "test-model", "input": texts},
        {"model": "test-model", "input": "I LIKE green tea"},
    ]
    assert llm.requests == []


def test_embeddings_errors(llm: ScriptedLLMServer, client: httpx.Client) -> None:
    unknown = client.post("/embeddings", json={"model": "nomic", "input": "x"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    bad = client.post("/embeddings", json={"model": "test-model", "input": [1, 2]})
    assert bad.status_code == 400
    assert len(llm.embedding_requests) == 2


def test_fake_embedding_of_empty_text_is_unit_vector() -> None:
    vector = fake_embedding("")
    assert math.isclose(sum(x * x for x in vector), 1.0)
