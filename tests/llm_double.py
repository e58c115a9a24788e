"""Test double: a scripted OpenAI-compatible chat server on loopback.

This module is *test support code*, not part of Charlie. ``ScriptedLLMServer`` is a real HTTP
server (standard library only: ``http.server``, ``json``, ``threading``) bound to 127.0.0.1 on an
ephemeral port. It speaks the OpenAI wire format closely enough that a real HTTP client (httpx)
talks to it exactly as it would to LM Studio, Ollama or vLLM, but every answer is scripted by the
test:

    with ScriptedLLMServer(model="test-model") as llm:
        llm.reply("Hello there!")                          # plain assistant text
        llm.tool_calls([("remember", {"fact": "x"})])      # native tool calls
        llm.error(503, "overloaded")                       # OpenAI-style error body
        llm.garbage(b"<html>oops</html>")                  # raw, non-JSON body
        llm.respond(lambda req: "echo " + req["messages"][-1]["content"])
        llm.delay(2.0)                                     # next response waits 2 s
        llm.reply("", reasoning="Let me think…", finish_reason="length")  # thinking only
        llm.tool_calls([...], index_style="same", arguments_as_object=True)  # as Ollama
        ...  # point the code under test at llm.base_url ("http://127.0.0.1:PORT/v1")
        assert llm.requests[0]["messages"][-1]["role"] == "user"

Endpoints: ``GET /v1/models`` (with llama.cpp's ``meta`` for a model in ``meta``),
``POST /v1/chat/completions`` (JSON or SSE when ``"stream": true``), ``POST /v1/embeddings``
(deterministic fake vectors, see :func:`fake_embedding`), ``GET /props`` once ``n_ctx`` is
set (llama.cpp's window), ``POST /api/show`` for a model in ``shown`` (Ollama). Anything
else is a JSON 404. Every response is sent with
``Connection: close`` so that ``stop()`` never waits on an idle keep-alive connection.

Pytest fixtures live in conftest.py (owned elsewhere); a fixture is simply::

    @pytest.fixture
    def llm():
        with ScriptedLLMServer() as server:
            yield server

:func:`parse_sse` and :func:`assemble_stream` are small helpers to turn a streamed response back
into text / tool calls in tests.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "EMBEDDING_DIM",
    "AssembledStream",
    "ErrorReply",
    "RawReply",
    "ScriptedLLMServer",
    "ScriptedResponse",
    "TextReply",
    "ToolCallsReply",
    "assemble_stream",
    "estimate_tokens",
    "fake_embedding",
    "parse_sse",
]

EMBEDDING_DIM = 16
"""Length of every fake embedding vector."""


# --------------------------------------------------------------------------------------------
# Scripted response kinds (the "helper objects" a ``respond`` callback may return)
# --------------------------------------------------------------------------------------------


@dataclass
class TextReply:
    """An assistant text message; streamed as content deltas of ~``chunk_size`` characters."""

    text: str
    chunk_size: int = 4
    chunk_delay: float = 0.0  # seconds to pause between SSE chunks (streaming only)
    # Streaming only: stop after this many reasoning or content chunks, with no finish_reason
    # and no [DONE], as a server that crashed mid-reply; `drop` also leaves the body
    # unterminated (the connection just closes), else the chunked body ends cleanly.
    cut_after: int | None = None
    drop: bool = False
    # The model's thinking, sent apart from the text in a `reasoning_field` (streamed as
    # deltas before the text), as llama.cpp, vLLM and LM Studio (`reasoning_content`) or
    # Ollama (`reasoning`) do; `finish_reason` replaces "stop" ("length": out of tokens).
    reasoning: str = ""
    reasoning_field: str = "reasoning_content"
    finish_reason: str | None = None


@dataclass
class ToolCallsReply:
    """An assistant message with native ``tool_calls`` (finish_reason ``"tool_calls"``).

    ``calls`` holds ``(function name, arguments)``; a dict is JSON-dumped, a str is sent as-is
    (so a test can send malformed arguments on purpose). When streamed, each call gets one delta
    with index/id/type/function.name, then its arguments in ~``chunk_size``-character deltas.
    """

    calls: list[tuple[str, dict[str, Any] | str]]
    text: str = ""
    chunk_size: int = 4
    chunk_delay: float = 0.0
    # How streamed calls are numbered: "openai" (0, 1, 2…), "same" (`index: 0` for every
    # call, each whole in one delta with its own id, as Ollama: ollama/ollama#15457), or
    # "none" (no `index` at all, as Ollama before 0.4.7: ollama/ollama#7881).
    index_style: str = "openai"
    # Send dict arguments as a JSON object rather than a string (Ollama, llama.cpp in some
    # versions: ggml-org/llama.cpp#20198); streamed whole, in the call's one delta.
    arguments_as_object: bool = False

    def argument_strings(self) -> list[str]:
        return [args if isinstance(args, str) else json.dumps(args) for _, args in self.calls]

    def wire_arguments(self) -> list[tuple[str, str | dict[str, Any]]]:
        """Each call's name and its arguments as sent: a string, or an object when
        `arguments_as_object` (and the test gave a dict)."""
        return [
            (name, args if self.arguments_as_object and isinstance(args, dict) else text)
            for (name, args), text in zip(self.calls, self.argument_strings(), strict=True)
        ]


@dataclass
class ErrorReply:
    """An HTTP error with an OpenAI-style JSON body (also when the request asked to stream)."""

    status: int
    message: str = "error"


@dataclass
class RawReply:
    """A raw body sent verbatim with the given status and content type (also when streaming)."""

    body: bytes = b"<html>not json</html>"
    status: int = 200
    content_type: str = "text/html"


ScriptedResponse = TextReply | ToolCallsReply | ErrorReply | RawReply
Responder = Callable[[dict[str, Any]], "ScriptedResponse | str"]


@dataclass
class _Queued:
    response: ScriptedResponse | Responder
    delay: float = 0.0


# --------------------------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------------------------


def estimate_tokens(chars: int) -> int:
    """The double's rough token count: characters / 4, rounded up."""
    return -(-chars // 4)


def _message_chars(messages: Any) -> int:
    chars = 0
    if not isinstance(messages, list):
        return 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, str):
                    chars += len(part)
                elif isinstance(part, dict) and isinstance(part.get("text"), str):
                    chars += len(part["text"])
    return chars


def fake_embedding(text: str) -> list[float]:
    """Deterministic bag-of-hashed-words vector (L2-normalised, ``EMBEDDING_DIM`` floats).

    Each lower-cased word (``\\w+``) adds 1 to bucket ``sha256(word)[0] % EMBEDDING_DIM``, so
    texts sharing words get a higher cosine similarity. Text without words maps to the uniform
    unit vector (never the zero vector, which would break cosine maths in clients).
    """
    vector = [0.0] * EMBEDDING_DIM
    for word in re.findall(r"\w+", text.lower()):
        bucket = hashlib.sha256(word.encode("utf-8")).digest()[0] % EMBEDDING_DIM
        vector[bucket] += 1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:
        return [1.0 / math.sqrt(EMBEDDING_DIM)] * EMBEDDING_DIM
    return [v / norm for v in vector]


def _split(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _error_body(message: str, error_type: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def _model_not_found(model: Any) -> dict[str, Any]:
    return _error_body(
        f"The model `{model}` does not exist", "invalid_request_error", "model_not_found"
    )


def parse_sse(lines: Iterable[str] | str) -> list[dict[str, Any]]:
    """Decode the JSON payloads of an SSE stream (``data: ...`` lines) up to ``data: [DONE]``.

    Accepts the whole body as a str or an iterable of lines (e.g. ``response.iter_lines()``).
    Raises ``AssertionError`` when the stream ends without ``[DONE]``.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    payloads: list[dict[str, Any]] = []
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            return payloads
        payloads.append(json.loads(data))
    raise AssertionError("SSE stream ended without 'data: [DONE]'")


@dataclass
class AssembledStream:
    """A streamed chat completion put back together."""

    role: str | None = None
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "arguments"}
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None


def assemble_stream(chunks: Iterable[dict[str, Any]]) -> AssembledStream:
    """Reassemble ``chat.completion.chunk`` payloads the way an OpenAI client does."""
    out = AssembledStream()
    by_index: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if chunk.get("usage"):
            out.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("role"):
                out.role = delta["role"]
            if delta.get("content"):
                out.content += delta["content"]
            for tc in delta.get("tool_calls") or []:
                slot = by_index.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                if tc.get("id"):
                    slot["id"] = tc["id"]
                function = tc.get("function") or {}
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                out.finish_reason = choice["finish_reason"]
    out.tool_calls = [by_index[i] for i in sorted(by_index)]
    return out


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class _Stopping(Exception):
    """Raised inside a handler when the server is shutting down mid-response."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    double: ScriptedLLMServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (e.g. after its own timeout) is expected; stay quiet.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, _Stopping, TimeoutError)):
            return
        super().handle_error(request, client_address)


class ScriptedLLMServer:
    """Test double: a scripted OpenAI-compatible chat server on loopback."""

    def __init__(
        self, model: str = "test-model", models: list[str] | None = None, port: int = 0
    ) -> None:
        self.model = model
        self.wanted_port = port  # 0: any free one
        self.models: list[str] = list(models) if models is not None else [model]
        self.requests: list[dict[str, Any]] = []
        self.embedding_requests: list[dict[str, Any]] = []
        self.handler_errors: list[BaseException] = []  # exceptions raised by respond() callbacks
        self.refuse_response_format: bool = False
        # LM Studio: any `response_format` but json_schema or text is a 400 whose `error`
        # is a bare string (lmstudio-ai/lmstudio-bug-tracker#189).
        self.refuse_json_object: bool = False
        # llama.cpp without `--jinja` (or a template without tools) ignores `tools`:
        # respond() callbacks get the request without them (ggml-org/llama.cpp#27129).
        self.drop_tools: bool = False
        # Ollama past its num_ctx: the oldest messages are dropped, silently, until the
        # prompt fits, and usage.prompt_tokens counts only what was kept (ollama/ollama#4967).
        self.context_window: int | None = None
        # llama.cpp's window: a prompt over `n_ctx` tokens (this double's estimate, tool
        # schemas included) is refused with llama.cpp's own 400 body, and `GET /props`
        # (at the server's root, beside /v1) reports it as llama.cpp does.
        self.n_ctx: int | None = None
        # What the server says of each model: llama.cpp's `meta` in its `/v1/models` entry
        # (`{"n_params": 1543714304, …}`), and Ollama's `POST /api/show` body
        # (`{"details": {"parameter_size": "1.5B"}, …}`; a model not in it is a 404).
        self.meta: dict[str, dict[str, Any]] = {}
        self.shown: dict[str, dict[str, Any]] = {}
        # Used when the queue is empty: reply text, or a callback like `respond` takes.
        self.default: str | Responder | None = None
        self._queue: deque[_Queued] = deque()
        self._pending_delay: float = 0.0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ScriptedLLMServer:
        if self._server is not None:
            raise RuntimeError("ScriptedLLMServer already started")
        self._stopping.clear()
        server = _HTTPServer(("127.0.0.1", self.wanted_port), _Handler)
        server.double = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ScriptedLLMServer:{server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()  # wakes handlers sleeping in delay()/chunk_delay
        server.shutdown()
        server.server_close()  # joins in-flight handler threads
        if thread is not None:
            thread.join()
        self._server = None
        self._thread = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedLLMServer is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """OpenAI base URL including ``/v1``, e.g. ``http://127.0.0.1:54321/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -------------------------------------------------------------------------

    def _enqueue(self, response: ScriptedResponse | Responder) -> None:
        with self._lock:
            self._queue.append(_Queued(response, self._pending_delay))
            self._pending_delay = 0.0

    def reply(
        self,
        text: str,
        *,
        chunk_size: int = 4,
        chunk_delay: float = 0.0,
        cut_after: int | None = None,
        drop: bool = False,
        reasoning: str = "",
        reasoning_field: str = "reasoning_content",
        finish_reason: str | None = None,
    ) -> None:
        """Queue an assistant text reply (SSE chunks of ~chunk_size chars when streaming);
        `cut_after` N chunks, the stream stops unfinished; `reasoning` is sent apart, in
        `reasoning_field` (see `TextReply`)."""
        self._enqueue(
            TextReply(
                text,
                chunk_size,
                chunk_delay,
                cut_after,
                drop,
                reasoning,
                reasoning_field,
                finish_reason,
            )
        )

    def tool_calls(
        self,
        calls: list[tuple[str, dict[str, Any] | str]],
        *,
        text: str = "",
        chunk_size: int = 4,
        chunk_delay: float = 0.0,
        index_style: str = "openai",
        arguments_as_object: bool = False,
    ) -> None:
        """Queue an assistant message with native tool calls (finish_reason "tool_calls");
        `index_style` and `arguments_as_object` as in `ToolCallsReply`."""
        self._enqueue(
            ToolCallsReply(
                list(calls), text, chunk_size, chunk_delay, index_style, arguments_as_object
            )
        )

    def error(self, status: int, message: str = "error") -> None:
        """Queue an HTTP error with an OpenAI-style JSON error body."""
        self._enqueue(ErrorReply(status, message))

    def garbage(
        self,
        body: bytes = b"<html>not json</html>",
        *,
        status: int = 200,
        content_type: str = "text/html",
    ) -> None:
        """Queue a raw (typically non-JSON) body, sent as-is even when streaming was requested."""
        self._enqueue(RawReply(body, status, content_type))

    def respond(self, fn: Responder) -> None:
        """Queue a callback deciding from the request JSON; it returns a reply object or a str."""
        self._enqueue(fn)

    def delay(self, seconds: float) -> None:
        """Make the next queued response wait ``seconds`` before answering.

        The delay attaches to the next response queued after this call. If none is queued
        before the next chat request arrives, that request (whatever it gets, including the
        ``default`` reply or the empty-queue 500) is delayed instead. ``stop()`` cuts a delay
        short and drops the connection without an answer.
        """
        with self._lock:
            self._pending_delay = seconds

    @property
    def pending(self) -> int:
        """Number of scripted responses not consumed yet."""
        with self._lock:
            return len(self._queue)

    def _next(self) -> _Queued | None:
        with self._lock:
            item = self._queue.popleft() if self._queue else None
            if self._pending_delay:
                if item is None:
                    item = _Queued(self._default_or_empty(), self._pending_delay)
                else:
                    item.delay += self._pending_delay
                self._pending_delay = 0.0
            return item

    def _default_or_empty(self) -> ScriptedResponse | Responder:
        if callable(self.default):
            return self.default
        if self.default is not None:
            return TextReply(self.default)
        return _EMPTY_QUEUE

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    def _as_read(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request as this server reads it: without `tools` when it drops them, and
        without its oldest messages when they overflow `context_window`."""
        read = dict(body)
        if self.drop_tools:
            read.pop("tools", None)
            read.pop("tool_choice", None)
        messages = read.get("messages")
        if self.context_window is not None and isinstance(messages, list):
            while len(messages) > 1 and (
                estimate_tokens(_message_chars(messages)) > self.context_window
            ):
                messages = messages[1:]
            read["messages"] = messages
        return read


_EMPTY_QUEUE = ErrorReply(500, "ScriptedLLMServer: no scripted response left")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedLLMServer/1.0"
    timeout = 30  # never let a silent client pin a handler thread forever
    server: _HTTPServer

    # -- plumbing --------------------------------------------------------------------------

    @property
    def double(self) -> ScriptedLLMServer:
        return self.server.double

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _read_json(self) -> dict[str, Any] | None:
        """Return the body as a JSON object, or send a 400 and return None."""
        try:
            body = json.loads(self._read_body() or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            self._send_json(400, _error_body(f"Invalid JSON body: {exc}", "invalid_request_error"))
            return None
        if not isinstance(body, dict):
            self._send_json(
                400, _error_body("Request body must be a JSON object", "invalid_request_error")
            )
            return None
        return body

    def _send_bytes(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_bytes(status, json.dumps(obj).encode("utf-8"), "application/json")

    def _send_error(self, reply: ErrorReply) -> None:
        error_type = "server_error" if reply.status >= 500 else "invalid_request_error"
        self._send_json(reply.status, _error_body(reply.message, error_type))

    # -- routing ---------------------------------------------------------------------------

    _ROUTES: dict[str, str] = {  # noqa: RUF012 - class-level constant
        "/v1/models": "GET",
        "/v1/chat/completions": "POST",
        "/v1/embeddings": "POST",
        "/props": "GET",
        "/api/show": "POST",
    }

    def _route(self, method: str) -> None:
        path = self._path()
        expected = self._ROUTES.get(path)
        if expected is None:
            self._send_json(404, _error_body(f"Unknown path {path!r}", "invalid_request_error"))
        elif expected != method:
            self._send_json(
                405, _error_body(f"{method} not allowed on {path}", "invalid_request_error")
            )
        elif path == "/v1/models":
            self._models()
        elif path == "/v1/chat/completions":
            self._chat()
        elif path == "/props":
            self._props()
        elif path == "/api/show":
            self._show()
        else:
            self._embeddings()

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    # -- endpoints -------------------------------------------------------------------------

    def _models(self) -> None:
        data = [
            {"id": m, "object": "model", "owned_by": "test"}
            | ({"meta": self.double.meta[m]} if m in self.double.meta else {})
            for m in self.double.models
        ]
        self._send_json(200, {"object": "list", "data": data})

    def _show(self) -> None:
        """Ollama's `POST /api/show`: what `shown` holds for the model named, else 404."""
        body = self._read_json()
        if body is None:
            return
        shown = self.double.shown.get(str(body.get("model")))
        if shown is None:
            self._send_json(404, {"error": f"model '{body.get('model')}' not found"})
            return
        self._send_json(200, shown)

    def _props(self) -> None:
        if self.double.n_ctx is None:
            self._send_json(404, _error_body("Unknown path '/props'", "invalid_request_error"))
            return
        settings = {"n_ctx": self.double.n_ctx, "params": {"n_predict": -1}}
        self._send_json(200, {"default_generation_settings": settings, "total_slots": 1})

    def _chat(self) -> None:
        double = self.double
        body = self._read_json()
        if body is None:
            return
        with double._lock:
            double.requests.append(body)

        model = body.get("model")
        if model is None:
            self._send_json(
                400, _error_body("you must provide a model parameter", "invalid_request_error")
            )
            return
        if model not in double.models:
            self._send_json(404, _model_not_found(model))
            return
        if double.n_ctx is not None:
            tools = json.dumps(body["tools"]) if body.get("tools") else ""
            prompt = estimate_tokens(_message_chars(body.get("messages")) + len(tools))
            if prompt > double.n_ctx:
                message = (
                    f"request ({prompt} tokens) exceeds the available context size "
                    f"({double.n_ctx} tokens), try increasing it"
                )
                error = {"code": 400, "message": message, "type": "exceed_context_size_error"}
                error |= {"n_prompt_tokens": prompt, "n_ctx": double.n_ctx}
                self._send_json(400, {"error": error})
                return
        if double.refuse_response_format and "response_format" in body:
            message = "'response_format' is not supported by this server (response_format)"
            self._send_json(400, _error_body(message, "invalid_request_error"))
            return
        response_format = body.get("response_format")
        if (
            double.refuse_json_object
            and isinstance(response_format, dict)
            and response_format.get("type") not in ("json_schema", "text")
        ):
            self._send_json(
                400, {"error": "'response_format.type' must be 'json_schema' or 'text'"}
            )
            return
        body = double._as_read(body)

        queued = double._next()
        if queued is None:
            queued = _Queued(double._default_or_empty())
        if queued.delay and double._stopping.wait(queued.delay):
            return  # shutting down: drop the connection without an answer

        response = queued.response
        if callable(response):
            try:
                result = response(body)
            except Exception as exc:
                with double._lock:
                    double.handler_errors.append(exc)
                message = f"ScriptedLLMServer: respond() callback raised {exc!r}"
                self._send_json(500, _error_body(message, "server_error"))
                return
            if isinstance(result, str):
                result = TextReply(result)
            if not isinstance(result, (TextReply, ToolCallsReply, ErrorReply, RawReply)):
                message = f"ScriptedLLMServer: respond() callback returned {result!r}"
                self._send_json(500, _error_body(message, "server_error"))
                return
            response = result

        if isinstance(response, ErrorReply):
            self._send_error(response)
        elif isinstance(response, RawReply):
            self._send_bytes(response.status, response.body, response.content_type)
        elif body.get("stream") is True:
            self._stream_completion(body, response)
        else:
            self._send_completion(body, response)

    def _usage(self, body: dict[str, Any], response: TextReply | ToolCallsReply) -> dict[str, int]:
        prompt = estimate_tokens(_message_chars(body.get("messages")))
        if self.double.context_window is not None:
            prompt = min(prompt, self.double.context_window)
        completion_chars = len(response.text)
        if isinstance(response, TextReply):
            completion_chars += len(response.reasoning)
        if isinstance(response, ToolCallsReply):
            completion_chars += sum(len(a) for a in response.argument_strings())
        completion = estimate_tokens(completion_chars)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _send_completion(self, body: dict[str, Any], response: TextReply | ToolCallsReply) -> None:
        double = self.double
        message: dict[str, Any] = {"role": "assistant", "content": response.text}
        finish_reason = "stop"
        if isinstance(response, TextReply):
            if response.reasoning:
                message[response.reasoning_field] = response.reasoning
            finish_reason = response.finish_reason or finish_reason
        if isinstance(response, ToolCallsReply) and response.calls:
            if not response.text:
                message["content"] = None  # what OpenAI sends alongside tool calls
            message["tool_calls"] = [
                {
                    "id": double._new_id("call_"),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
                for name, arguments in response.wire_arguments()
            ]
            finish_reason = "tool_calls"
        self._send_json(
            200,
            {
                "id": double._new_id("chatcmpl-"),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": finish_reason,
                    }
                ],
                "usage": self._usage(body, response),
            },
        )

    def _stream_completion(
        self, body: dict[str, Any], response: TextReply | ToolCallsReply
    ) -> None:
        double = self.double
        completion_id = double._new_id("chatcmpl-")
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body["model"],
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }

        events: list[dict[str, Any]] = [chunk({"role": "assistant", "content": ""})]
        finish_reason = "stop"
        if isinstance(response, TextReply):
            field_name = response.reasoning_field
            events += [
                chunk({"content": None, field_name: piece})
                for piece in _split(response.reasoning, response.chunk_size)
            ]
            finish_reason = response.finish_reason or finish_reason
        events += [
            chunk({"content": piece}) for piece in _split(response.text, response.chunk_size)
        ]
        if isinstance(response, ToolCallsReply) and response.calls:
            finish_reason = "tool_calls"
            for index, (name, arguments) in enumerate(response.wire_arguments()):
                head: dict[str, Any] = {
                    "index": index,
                    "id": double._new_id("call_"),
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                if response.index_style == "same":
                    head["index"] = 0
                elif response.index_style == "none":
                    del head["index"]
                if response.index_style != "openai" or not isinstance(arguments, str):
                    head["function"]["arguments"] = arguments  # each call whole, in one delta
                    events.append(chunk({"tool_calls": [head]}))
                    continue
                events.append(chunk({"tool_calls": [head]}))
                for piece in _split(arguments, response.chunk_size):
                    tail = {"index": index, "function": {"arguments": piece}}
                    events.append(chunk({"tool_calls": [tail]}))
        events.append(chunk({}, finish_reason))
        stream_options = body.get("stream_options")
        if isinstance(stream_options, dict) and stream_options.get("include_usage"):
            usage_chunk = chunk({})
            usage_chunk["choices"] = []
            usage_chunk["usage"] = self._usage(body, response)
            events.append(usage_chunk)

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        cut = response.cut_after if isinstance(response, TextReply) else None
        if cut is not None:
            events = events[: 1 + cut]  # the role chunk, then `cut` content chunks
        for i, event in enumerate(events):
            if i and response.chunk_delay and double._stopping.wait(response.chunk_delay):
                raise _Stopping  # server shutting down mid-stream: abandon the connection
            self._write_chunk(f"data: {json.dumps(event)}\n\n".encode())
        if cut is not None:
            if not (isinstance(response, TextReply) and response.drop):
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            return  # no finish_reason, no [DONE]; the connection closes
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")  # end of chunked body
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _embeddings(self) -> None:
        double = self.double
        body = self._read_json()
        if body is None:
            return
        with double._lock:
            double.embedding_requests.append(body)
        model = body.get("model")
        if model not in double.models:
            self._send_json(404, _model_not_found(model))
            return
        raw = body.get("input")
        inputs = [raw] if isinstance(raw, str) else raw
        if (
            not isinstance(inputs, list)
            or not inputs
            or not all(isinstance(item, str) for item in inputs)
        ):
            message = "'input' must be a string or a non-empty list of strings"
            self._send_json(400, _error_body(message, "invalid_request_error"))
            return
        tokens = estimate_tokens(sum(len(text) for text in inputs))
        self._send_json(
            200,
            {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": fake_embedding(text)}
                    for i, text in enumerate(inputs)
                ],
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )
