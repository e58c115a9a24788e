"""The context window: CHARLIE_LLM_CONTEXT, else what the server says, else a safe default;
and a server's "context exceeded" told apart from other refusals."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from llm_double import ScriptedLLMServer

from charlie.config import load_settings
from charlie.errors import LLMContextExceeded, LLMRejected
from charlie.llm.budget import DEFAULT_WINDOW
from charlie.llm.client import LLMClient


class ServerInfo:
    """A tiny loopback server answering fixed JSON at fixed paths (what LM Studio's and
    Ollama's own APIs say about a model), and counting what was asked."""

    def __init__(self, routes: dict[tuple[str, str], Any]) -> None:
        self.routes = routes
        self.asked: list[tuple[str, str, Any]] = []
        info = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                info.asked.append((method, self.path, body))
                found = info.routes.get((method, self.path))
                data = json.dumps(found if found is not None else {"error": "no"}).encode()
                self.send_response(200 if found is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.answer("GET")

            def do_POST(self) -> None:
                self.answer("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[ServerInfo] = []

    def start(routes: dict[tuple[str, str], Any]) -> ServerInfo:
        info = ServerInfo(routes)
        info.thread.start()
        started.append(info)
        return info

    yield start
    for info in started:
        info.server.shutdown()
        info.server.server_close()


def test_the_setting_wins_and_nothing_is_asked(
    llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.n_ctx = 8192
    monkeypatch.setenv("CHARLIE_LLM_CONTEXT", "6000")
    client = LLMClient.from_settings(load_settings())
    assert client.context_window() == 6000
    assert client.window_source == "CHARLIE_LLM_CONTEXT"


def test_llama_cpp_says_its_window_in_props(llm: ScriptedLLMServer) -> None:
    llm.n_ctx = 8192
    client = LLMClient(llm.base_url, "test-model")
    assert client.context_window() == 8192
    assert client.window_source == "llama.cpp /props"


def test_lm_studio_says_the_loaded_window_of_the_model(serve: Any) -> None:
    info = serve(
        {
            ("GET", "/api/v0/models"): {
                "object": "list",
                "data": [
                    {"id": "text-embedding-nomic", "type": "embeddings", "state": "loaded"},
                    {"id": "other", "type": "llm", "state": "loaded", "max_context_length": 1},
                    {
                        "id": "qwen3-8b",
                        "type": "llm",
                        "state": "loaded",
                        "max_context_length": 32768,
                        "loaded_context_length": 4096,
                    },
                ],
            }
        }
    )
    client = LLMClient(info.base_url, "qwen3-8b")
    assert client.context_window() == 4096
    assert client.window_source == "LM Studio /api/v0/models"
    assert client.context_window() == 4096
    assert [(m, p) for m, p, _ in info.asked] == [("GET", "/props"), ("GET", "/api/v0/models")]


def test_ollama_says_the_window_it_loaded_the_model_with(serve: Any) -> None:
    loaded = {"models": [{"name": "qwen3:14b", "model": "qwen3:14b", "context_length": 8192}]}
    shown = {"parameters": "", "model_info": {"qwen3.context_length": 40960}}
    info = serve({("GET", "/api/ps"): loaded, ("POST", "/api/show"): shown})
    client = LLMClient(info.base_url, "qwen3:14b")
    assert client.context_window() == 8192
    assert client.window_source == "Ollama /api/ps"


def test_lm_studio_without_a_loaded_length_gives_the_models_maximum(serve: Any) -> None:
    models = {"data": [{"id": "gemma", "type": "vlm", "max_context_length": 8192}]}
    info = serve({("GET", "/api/v0/models"): models})
    assert LLMClient(info.base_url, "gemma").context_window() == 8192


def test_ollama_says_num_ctx_when_the_model_sets_one(serve: Any) -> None:
    shown = {
        "parameters": 'stop "<end_of_turn>"\nnum_ctx 8192\ntemperature 1',
        "model_info": {"general.architecture": "gemma3", "gemma3.context_length": 131072},
    }
    info = serve({("POST", "/api/show"): shown})
    client = LLMClient(info.base_url, "gemma3:4b")
    assert client.context_window() == 8192
    assert client.window_source == "Ollama /api/show"
    assert info.asked[-1] == ("POST", "/api/show", {"model": "gemma3:4b"})


def test_ollama_without_num_ctx_is_taken_at_its_default_not_the_models_maximum(
    serve: Any,
) -> None:
    """Ollama cuts a prompt longer than num_ctx silently, whatever the model was trained
    for; with nothing set, num_ctx is 4096 (2048 before 2025): ollama/ollama#8099, #17889."""
    shown = {"parameters": "", "model_info": {"qwen3.context_length": 40960}}
    info = serve({("POST", "/api/show"): shown})
    assert LLMClient(info.base_url, "qwen3:8b").context_window() == 4096
    small = serve({("POST", "/api/show"): {"model_info": {"tiny.context_length": 2048}}})
    assert LLMClient(small.base_url, "tiny").context_window() == 2048


def test_a_server_that_says_nothing_gets_the_safe_default_once(serve: Any) -> None:
    info = serve({})
    client = LLMClient(info.base_url, "m")
    assert client.context_window() == DEFAULT_WINDOW == 4096
    assert client.window_source.startswith("default")
    assert client.context_window() == DEFAULT_WINDOW
    assert len(info.asked) == 4  # asked once, cached


def test_an_unreachable_server_is_asked_again_next_time(dead_url: str) -> None:
    client = LLMClient(dead_url, "test-model")
    assert client.context_window() == DEFAULT_WINDOW
    assert client.window_source == ""  # not cached: the chat request will say it is down


def test_llama_cpps_context_error_is_told_apart_and_its_window_believed(
    llm: ScriptedLLMServer,
) -> None:
    llm.n_ctx = 100
    client = LLMClient(llm.base_url, "test-model", retries=0, context_window=8192)
    with pytest.raises(LLMContextExceeded) as refused:
        client.chat([{"role": "user", "content": "word " * 500}])
    assert refused.value.window == 100
    assert "exceeds the available context size (100 tokens)" in str(refused.value)
    assert client.context_window() == 100


def test_openai_context_error_is_told_apart_by_its_code(llm: ScriptedLLMServer) -> None:
    llm.error(400, "Please reduce the length of the messages (context_length_exceeded).")
    llm.error(400, "'temperature' must be at most 2")
    client = LLMClient(llm.base_url, "test-model", retries=0)
    with pytest.raises(LLMContextExceeded) as refused:
        client.chat([{"role": "user", "content": "hi"}])
    assert refused.value.window is None
    with pytest.raises(LLMRejected):
        client.chat([{"role": "user", "content": "hi"}])


def test_every_request_sends_max_tokens(llm: ScriptedLLMServer) -> None:
    llm.reply("a")
    llm.reply("b")
    client = LLMClient(llm.base_url, "test-model", max_tokens=321)
    client.chat([{"role": "user", "content": "hi"}])
    list(client.with_max_tokens(99).stream([{"role": "user", "content": "hi"}]))
    assert [r["max_tokens"] for r in llm.requests] == [321, 99]
    assert client.max_tokens == 321
