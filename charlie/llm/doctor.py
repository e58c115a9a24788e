"""`charlie doctor`: what the configured model server can do, and what to change when not.

Each probe sends one small request and judges the answer: reachable (`GET /models`), the
configured model, the context window, streaming, native tool calls (`tool_choice:
"required"`), json_schema structured output, images, `/embeddings` (only when Charlie uses
it) and the speed in tokens per second. A failure says what to do.

Every request is bounded: `timeout` seconds each, and all of them together within
`TOTAL_SECONDS`, so a hung server cannot hang the doctor. The essentials are reachable,
model and streaming: without them Charlie cannot chat (`Report.ok`). A check the doctor's
time ran out on is "unfinished", never a failure: only what was seen fails.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import httpx

from charlie import tls
from charlie.config import Settings
from charlie.home import Home
from charlie.llm import models, modelsize, textcalls, toolmode
from charlie.llm.client import LLMClient
from charlie.llm.messages import ChatMessage, ToolSchema
from charlie.llm.servers import ModelServer

Status = Literal["ok", "warn", "slow", "fail", "skip", "unfinished"]
ESSENTIAL = ("reachable", "model", "streaming")
TOTAL_SECONDS = 60.0
PROBE_SECONDS = 15.0
ALIVE_SECONDS = 3.0  # after a probe timed out: how long a plain request may take
SMALL_CONTEXT = 4096  # below this, memory, notes and history hardly fit
SLOW_TOKENS_PER_S = 5.0
RESULT_WIDTH = 60  # the table's result column; a longer result pushes its fix along
# A 1×1 PNG, the smallest image a vision model can be shown.
TINY_PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
    "DwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two whole numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
LOOKUP_TOOL: ToolSchema = {
    "type": "function",
    "function": {
        "name": "search_notes",
        "description": "Search the household's notes by meaning and keywords.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look for."}},
            "required": ["query"],
        },
    },
}
LOOKUP_QUESTION = "What did we decide about the kitchen worktops? Look it up in our notes."
LOOKUP_SYSTEM = "You are a household assistant. Look things up with the tools you have."
ANSWER_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "answer",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"answer": {"type": "integer"}},
            "required": ["answer"],
            "additionalProperties": False,
        },
    },
}
FIX_START = (
    "start the server (LM Studio: Developer → Start server; `llama-server -m MODEL.gguf "
    "--jinja`; `ollama serve`) or set CHARLIE_LLM_BASE_URL to its URL, ending in /v1; or "
    "use Charlie's built-in model (`charlie model install`)"
)
FIX_TOOLS = (
    "start llama-server with --jinja for tool calls, with a model whose chat template supports "
    "tools (or --chat-template-file); with Ollama or LM Studio, use a model made for tools"
)
FIX_CONTEXT = (
    "raise the context: llama-server -c 8192, Ollama num_ctx 8192 (or OLLAMA_CONTEXT_LENGTH), "
    "LM Studio's context length when loading the model; then set CHARLIE_LLM_CONTEXT"
)


@dataclass(frozen=True)
class Check:
    """One probe's verdict: `result` says what was seen, `fix` what to do when not ok."""

    check: str
    status: Status
    result: str
    fix: str = ""

    @property
    def essential(self) -> bool:
        return self.check in ESSENTIAL


@dataclass
class Report:
    server: str
    model: str
    checks: list[Check] = field(default_factory=list)
    # Which server this is and why (`charlie.llm.servers.ModelServer.describe`), when known.
    source: str = ""
    # What the model did with tools, for `auto` (`charlie.llm.toolmode`); None: not probed.
    habits: toolmode.Habits | None = None

    @property
    def ok(self) -> bool:
        """Whether Charlie can chat, as far as the doctor saw: no essential check failed (a
        warning passes, and so does a server that is up but too busy or slow to answer a
        probe in time, or one the doctor's time ran out on)."""
        essential = [c for c in self.checks if c.essential]
        return len(essential) == len(ESSENTIAL) and all(
            c.status in ("ok", "warn", "slow", "unfinished") for c in essential
        )

    @property
    def unfinished(self) -> bool:
        """Whether the doctor's whole time ran out before every check was done."""
        return any(c.status == "unfinished" for c in self.checks)

    @property
    def slow(self) -> bool:
        """Whether the server was up but too busy or slow to answer some probe in time."""
        return any(c.status == "slow" for c in self.checks)

    def verdict(self) -> str:
        """The report in one sentence: can chat, busy or slow (not broken), or cannot."""
        if not self.ok:
            return "Charlie cannot chat with this server until the FAIL lines are fixed."
        if self.unfinished:
            left = [c.check for c in self.checks if c.status == "unfinished" and c.essential]
            return (
                f"The doctor's time ran out before every check was done, so it cannot say "
                f"whether Charlie can chat{' (' + ', '.join(left) + ' unchecked)' if left else ''}"
                "; nothing it checked failed. The server may be busy: run `charlie doctor` "
                "again when it is idle."
            )
        if self.slow:
            return (
                "The server is up but busy or slow: it did not answer in time, which is not "
                "broken. Replies will come, later; run `charlie doctor` again when it is idle "
                "to check the rest."
            )
        return "Charlie can chat with this server."

    def as_json(self) -> dict[str, object]:
        return {
            "server": self.server,
            "source": self.source,
            "model": self.model,
            "ok": self.ok,
            "slow": self.slow,
            "verdict": self.verdict(),
            "checks": [asdict(c) | {"essential": c.essential} for c in self.checks],
        }


class _OutOfTime(Exception):
    """The doctor's whole time (`TOTAL_SECONDS`) is spent."""


OUT_OF_TIME = "not run: the doctor's time ran out"


class _Probe:
    """The HTTP side: one client, every request bounded by the time left."""

    def __init__(self, settings: Settings, base_url: str, timeout: float, total: float) -> None:
        self.settings = settings
        self.base_url = base_url.rstrip("/")
        self.timeout, self.total = timeout, total
        self.deadline = time.monotonic() + total
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        # A fresh connection for each probe: llama-server closes an idle one after a reply,
        # and reusing it failed a probe ("Server disconnected without sending a response").
        self.http = httpx.Client(
            headers={"Authorization": f"Bearer {key}"} if key else {},
            limits=httpx.Limits(max_keepalive_connections=0),
            verify=tls.context(),
        )
        self.model = settings.llm_model
        self.names: list[str] = []  # what `GET /models` listed
        self.native_calls: bool | None = None  # the model called a tool offered natively
        self.text_calls: bool | None = None  # … one described in the prompt, as text
        self.slow = False  # a probe timed out on a server that was up: the rest are not run
        self.cut = False  # the last request's limit was the doctor's time left, not `timeout`
        self.speed: tuple[float, float] | None = None  # tokens/s written, and read (0: unsaid)
        self.out_of_time = False  # the doctor's time ran out: the rest are not run

    def limit(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            raise _OutOfTime
        self.cut = left < self.timeout
        return min(self.timeout, left)

    def get(self, url: str) -> httpx.Response:
        return self.http.get(url, timeout=self.limit())

    def post(self, url: str, body: dict[str, object]) -> httpx.Response:
        return self.http.post(url, json=body, timeout=self.limit())

    def chat(self, messages: list[ChatMessage], **extra: object) -> httpx.Response:
        body: dict[str, object] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            **extra,
        }
        return self.post(f"{self.base_url}/chat/completions", body)

    @property
    def root(self) -> str:
        """The server's address without the OpenAI `/v1`, where native APIs live."""
        return self.base_url.removesuffix("/v1")


def _error(response: httpx.Response) -> str:
    """The server's own words for a refusal, short."""
    try:
        data = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:120].strip()}"
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return f"HTTP {response.status_code}: {str(message or data)[:160]}"


def _message(response: httpx.Response) -> dict[str, Any]:
    """The chat message of a whole answer (KeyError & co. when it has another shape)."""
    message = response.json()["choices"][0]["message"]
    if not isinstance(message, dict):
        raise TypeError("message is not an object")
    return message


# ------------------------------------------------------------------ the probes


def _reachable(probe: _Probe) -> Check:
    """`GET /models` answers; the names it lists are kept for the model check."""
    response = probe.get(f"{probe.base_url}/models")
    if response.status_code == 404:
        raise _Failed(
            f"{probe.base_url}/models does not exist (HTTP 404)",
            "set CHARLIE_LLM_BASE_URL to the server's OpenAI-compatible URL, ending in /v1",
        )
    if response.status_code in (401, 403):
        raise _Failed(_error(response), "set CHARLIE_LLM_API_KEY to the server's key")
    if response.status_code >= 400:
        raise _Failed(_error(response), "check the server's log")
    try:
        names = [str(item["id"]) for item in response.json()["data"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise _Failed(
            "GET /models did not answer in the OpenAI format",
            "set CHARLIE_LLM_BASE_URL to the server's OpenAI-compatible URL, ending in /v1",
        ) from exc
    probe.names = names
    return Check("reachable", "ok", f"{len(names)} model(s) listed")


def _model(probe: _Probe) -> Check:
    names = probe.names
    if not probe.model:
        if not names:
            raise _Failed("no model loaded", "load a model in the server, or set CHARLIE_LLM_MODEL")
        probe.model = names[0]
        return Check("model", "ok", f"{probe.model} (the server's first; none set)")
    if probe.model in names:
        return Check("model", "ok", probe.model)
    offered = ", ".join(names[:5]) or "none loaded"
    raise _Failed(
        f"{probe.model} is not offered (offered: {offered})",
        "set CHARLIE_LLM_MODEL to a model the server has loaded, or load it",
    )


def _context(probe: _Probe) -> Check:
    """The window the chat budgets use (`LLMClient.context_window`), and where it came from."""
    key = probe.settings.llm_api_key
    client = LLMClient(
        probe.base_url,
        probe.model,
        api_key=key.get_secret_value() if key else None,
        timeout=probe.limit(),
        retries=0,
        context_window=probe.settings.llm_context,
    )
    try:
        size, source = client.context_window(), client.window_source
    finally:
        client.close()
    if source == "CHARLIE_LLM_CONTEXT":
        result = f"{size} tokens (setting CHARLIE_LLM_CONTEXT)"
    elif not source or source.startswith("default"):
        return Check(
            "context window",
            "warn",
            f"{size} tokens (default: the server does not say)",
            "set CHARLIE_LLM_CONTEXT to the window the server runs the model with",
        )
    else:
        result = f"{size} tokens (server: {source})"
    if size < SMALL_CONTEXT:
        return Check("context window", "warn", result, FIX_CONTEXT)
    return Check("context window", "ok", result)


def _streaming(probe: _Probe) -> Check:
    body = {
        "model": probe.model,
        "messages": [{"role": "user", "content": "Count from 1 to 10, separated by commas."}],
        "temperature": 0,
        "stream": True,
        "max_tokens": 48,
    }
    started = time.monotonic()
    pieces, first = 0, 0.0
    with probe.http.stream(
        "POST", f"{probe.base_url}/chat/completions", json=body, timeout=probe.limit()
    ) as response:
        if response.status_code >= 400:
            response.read()
            raise _Failed(_error(response), "check the server's log")
        if "text/event-stream" not in response.headers.get("content-type", ""):
            return Check(
                "streaming",
                "warn",
                "the reply came whole, not streamed",
                "use a server that streams (stream: true); replies appear only when finished",
            )
        for line in response.iter_lines():
            if time.monotonic() > probe.deadline:
                raise _OutOfTime
            if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                continue
            for choice in json.loads(line[5:]).get("choices") or []:
                if (choice.get("delta") or {}).get("content"):
                    pieces += 1
                    first = first or time.monotonic() - started
    if pieces == 0:
        raise _Failed("the stream held no text", "check the server's log; try another model")
    if pieces == 1:
        return Check("streaming", "warn", "the reply came in one piece", "")
    return Check("streaming", "ok", f"{pieces} chunks, first after {first:.1f} s")


def _tools(probe: _Probe) -> Check:
    response = probe.chat(
        [{"role": "user", "content": "What is 2 plus 3? Use the add tool."}],
        tools=[ADD_TOOL],
        tool_choice="required",
        max_tokens=64,
    )
    if response.status_code >= 400:
        raise _Failed(_error(response), FIX_TOOLS)
    message = _message(response)
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError:
            parsed = None
        if function.get("name") == "add" and isinstance(parsed, dict):
            return Check("tool calls", "ok", f"native call add({json.dumps(parsed)})")
        raise _Failed(f"a native call that is not valid: {json.dumps(function)[:120]}", FIX_TOOLS)
    calls = textcalls.read(str(message.get("content") or ""), {"add": ["a", "b"]}).calls
    if calls:
        return Check("tool calls", "warn", "written as text, not a native call", FIX_TOOLS)
    raise _Failed("no tool call: the server ignored the tools", FIX_TOOLS)


def _tool_use(probe: _Probe) -> Check:
    """What the model does, unforced, with a question a tool answers: a native call, a call
    written as text that Charlie reads, or none — then with the tool described in the
    prompt instead. This decides the tool mode `auto` starts with."""
    known = textcalls.known_of([LOOKUP_TOOL])
    response = probe.chat(
        [
            {"role": "system", "content": LOOKUP_SYSTEM},
            {"role": "user", "content": LOOKUP_QUESTION},
        ],
        tools=[LOOKUP_TOOL],
        max_tokens=96,
    )
    content = ""
    if response.status_code < 400:
        message = _message(response)
        named = [(c.get("function") or {}).get("name") for c in message.get("tool_calls") or []]
        content = str(message.get("content") or "")
        if "search_notes" in named:
            probe.native_calls = True
            return Check("tool use", "ok", "the model called a tool natively, unasked")
        read = textcalls.read(content, known)
        if read.calls:
            probe.native_calls = True
            return Check("tool use", "ok", "a call written as text, which Charlie reads")
    probe.native_calls = False
    described = toolmode.TEXT_TOOLS.format(toolmode.tool_line(LOOKUP_TOOL["function"]))
    response = probe.chat(
        [
            {"role": "system", "content": f"{LOOKUP_SYSTEM}\n\n{described}"},
            {"role": "user", "content": LOOKUP_QUESTION},
        ],
        max_tokens=96,
    )
    if (
        response.status_code < 400
        and textcalls.read(str(_message(response).get("content") or ""), known).calls
    ):
        probe.text_calls = True
        return Check(
            "tool use",
            "warn",
            "a call only with the tool described in the prompt",
            "Charlie describes tools in the prompt (tool_mode text) for this model",
        )
    probe.text_calls = False
    return Check(
        "tool use",
        "warn",
        "the model answered without calling the tool",
        "Charlie asks for each step as constrained JSON (tool_mode constrained) and looks "
        "things up itself",
    )


def first_look(llm: LLMClient) -> toolmode.Habits:
    """What `auto` starts from when nothing was seen of a model yet: the doctor's tool-use
    question, asked once with the tool offered natively — a call (native, or as text that
    Charlie reads) or none. The mode is then chosen as after `charlie doctor`."""
    answer = llm.with_max_tokens(96).chat(
        [
            {"role": "system", "content": LOOKUP_SYSTEM},
            {"role": "user", "content": LOOKUP_QUESTION},
        ],
        tools=[LOOKUP_TOOL],
        temperature=0,
    )
    called = any(call.name == "search_notes" for call in answer.tool_calls) or bool(
        textcalls.read(answer.content, textcalls.known_of([LOOKUP_TOOL])).calls
    )
    return toolmode.Habits(native_calls=called)


def _json_schema(probe: _Probe) -> Check:
    fix = (
        "use a server with json_schema output (llama.cpp, LM Studio, Ollama 0.5+); "
        "until then distillation relies on its repair attempt"
    )
    response = probe.chat(
        [{"role": "user", "content": 'What is 2 plus 3? Answer as JSON: {"answer": 5}.'}],
        response_format=ANSWER_SCHEMA,
        max_tokens=32,
    )
    if response.status_code >= 400:
        raise _Failed(f"refused: {_error(response)}", fix)
    content = str(_message(response).get("content") or "")
    try:
        data = json.loads(content)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("answer"), int):
        return Check("json_schema", "ok", f"valid JSON {json.dumps(data)}")
    raise _Failed(f"not JSON matching the schema: {content[:60]!r}", fix)


def _images(probe: _Probe) -> Check:
    response = probe.chat(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What colour is this image? One word."},
                    {"type": "image_url", "image_url": {"url": TINY_PNG}},
                ],
            }
        ],
        max_tokens=16,
    )
    if response.status_code >= 400:
        return Check(
            "images",
            "warn",
            f"not supported ({_error(response)})",
            "to send images, load a vision model (llama-server: --mmproj with its projector)",
        )
    _message(response)
    return Check("images", "ok", "a PNG was accepted")


def _embeddings(probe: _Probe) -> Check:
    settings = probe.settings
    if settings.embeddings != "openai":
        return Check("embeddings", "skip", "not used (CHARLIE_EMBEDDINGS=local)")
    base = (settings.embeddings_base_url or settings.llm_base_url).rstrip("/")
    fix = (
        "set CHARLIE_EMBEDDINGS_MODEL to an embedding model the server has loaded "
        "(llama-server: --embeddings), or CHARLIE_EMBEDDINGS=local"
    )
    if not settings.embeddings_model:
        raise _Failed("CHARLIE_EMBEDDINGS_MODEL is not set", fix)
    response = probe.post(
        f"{base}/embeddings", {"model": settings.embeddings_model, "input": ["doctor"]}
    )
    if response.status_code >= 400:
        raise _Failed(_error(response), fix)
    try:
        vector = response.json()["data"][0]["embedding"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise _Failed("the answer holds no embedding", fix) from exc
    return Check("embeddings", "ok", f"{len(vector)} dimensions")


def _speed(probe: _Probe) -> Check:
    started = time.monotonic()
    response = probe.chat(
        [{"role": "user", "content": "Write a short paragraph about the sea."}],
        max_tokens=64,
    )
    seconds = time.monotonic() - started
    if response.status_code >= 400:
        raise _Failed(_error(response), "check the server's log")
    content = str(_message(response).get("content") or "")
    usage = response.json().get("usage") or {}
    tokens = usage.get("completion_tokens")
    if not isinstance(tokens, int):
        tokens = -(-len(content) // 4)  # no usage reported: about 4 characters a token
    rate = tokens / seconds if seconds > 0 else 0.0
    timings = response.json().get("timings") or {}  # llama.cpp says how fast it read, too
    read = timings.get("prompt_per_second") if isinstance(timings, dict) else None
    probe.speed = (rate, float(read) if isinstance(read, int | float) else 0.0)
    result = f"{rate:.1f} tokens/s ({tokens} tokens in {seconds:.1f} s)"
    if rate < SLOW_TOKENS_PER_S:
        return Check(
            "tokens/s", "warn", result, "replies will be slow: try a smaller model or GPU offload"
        )
    return Check("tokens/s", "ok", result)


# ------------------------------------------------------------------ running them


class _Failed(Exception):
    def __init__(self, result: str, fix: str) -> None:
        super().__init__(result)
        self.result, self.fix = result, fix


ESSENTIAL_FIRST: list[tuple[str, Callable[[_Probe], Check], str]] = [
    ("reachable", _reachable, "the server cannot be reached"),
    ("model", _model, "the model is not available"),
]
PROBES: list[tuple[str, Callable[[_Probe], Check]]] = [
    ("context window", _context),
    ("streaming", _streaming),
    ("tool calls", _tools),
    ("tool use", _tool_use),
    ("json_schema", _json_schema),
    ("images", _images),
    ("embeddings", _embeddings),
    ("tokens/s", _speed),
]
ALL_CHECKS = ("reachable", "model", *(name for name, _ in PROBES), "tool mode")


def _guarded(name: str, probe: _Probe, run: Callable[[], Check]) -> Check:
    """Run one probe; whatever goes wrong becomes its failed `Check` with a fix."""
    try:
        return run()
    except _Failed as failed:
        return Check(name, "fail", failed.result, failed.fix)
    except _OutOfTime:
        return _unfinished(name, probe)
    except httpx.TimeoutException:
        alive = _alive(probe)
        if alive is not None and probe.cut:  # waited as long as the doctor had left
            return _unfinished(name, probe)
        if alive is not None:
            probe.slow = True
            return Check(
                name,
                "slow",
                f"no answer within {probe.timeout:g} s, though the server is up ({alive})",
                "busy or slow, not broken: try again when it is idle",
            )
        waited = f"the {probe.total:g} s the doctor had" if probe.cut else f"{probe.timeout:g} s"
        return Check(
            name,
            "fail",
            f"no answer within {waited}, and the server answers nothing else",
            "the server is hung: check its log, restart it",
        )
    except httpx.ConnectError as exc:
        return Check(name, "fail", f"cannot connect ({exc})", FIX_START)
    except httpx.HTTPError as exc:
        return Check(
            name, "fail", f"the connection broke ({exc})", "check the server's log, restart it"
        )
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return Check(
            name, "fail", f"an answer not in the OpenAI format ({exc})", "check the server's log"
        )


def _unfinished(name: str, probe: _Probe) -> Check:
    """The check the doctor's time ran out on: not a failure, nothing was seen to fail."""
    probe.out_of_time = True
    return Check(
        name,
        "unfinished",
        f"did not finish: the doctor's {probe.total:g} s ran out",
        "run `charlie doctor` again when the server is idle",
    )


def _alive(probe: _Probe) -> str | None:
    """After a probe timed out: whether the server still answers a plain request at once,
    and what it says of its work (llama.cpp's `/slots`); None when it answers nothing (hung
    or gone)."""
    try:
        probe.http.get(f"{probe.base_url}/models", timeout=ALIVE_SECONDS).raise_for_status()
    except httpx.HTTPError:
        return None
    try:
        root = probe.base_url.removesuffix("/v1")
        slots = probe.http.get(f"{root}/slots", timeout=ALIVE_SECONDS).json()
    except (httpx.HTTPError, ValueError):
        return "it answers other requests at once"
    if not isinstance(slots, list) or not slots:
        return "it answers other requests at once"
    working = sum(
        1
        for slot in slots
        if isinstance(slot, dict) and (slot.get("is_processing") or slot.get("state") == 1)
    )
    if working:
        return f"{working} of its {len(slots)} slots busy with other requests"
    return "its slots are idle: the model itself is slow"


def examine(
    settings: Settings,
    *,
    timeout: float = PROBE_SECONDS,
    total: float | None = None,
    server: ModelServer | None = None,
) -> Report:
    """Probe the server (`server`, as `charlie.llm.servers.locate` chose it; else
    CHARLIE_LLM_BASE_URL); each request within `timeout` s, all within `total` (default
    `TOTAL_SECONDS`)."""
    base_url = server.base_url if server is not None else settings.llm_base_url
    probe = _Probe(settings, base_url, timeout, TOTAL_SECONDS if total is None else total)
    report = Report(base_url, settings.llm_model, source=_source(server))
    try:
        for name, run, needed in ESSENTIAL_FIRST:
            check = _guarded(name, probe, partial(run, probe))
            report.checks.append(check)
            if check.status == "fail":
                return _skipped(report, needed)
            if probe.out_of_time:
                return _skipped(report, "the doctor's time ran out")
        report.model = probe.model
        for name, run in PROBES:
            if probe.out_of_time:
                report.checks.append(Check(name, "skip", OUT_OF_TIME))
                continue
            if probe.slow:  # each would wait as long again: the verdict says to come back
                report.checks.append(Check(name, "skip", "not run: the server is busy or slow"))
                continue
            report.checks.append(_guarded(name, probe, partial(run, probe)))
        if probe.out_of_time or probe.slow:
            why = "the doctor's time ran out" if probe.out_of_time else "the server is busy"
            report.checks.append(Check("tool mode", "skip", f"not chosen: {why}"))
            return report
        schema = next(c for c in report.checks if c.check == "json_schema").status
        size = _size(probe)
        report.habits = toolmode.Habits(
            probe.native_calls,
            probe.text_calls,
            schema == "ok",
            params=size.params,
            params_source=size.source,
        )
        chosen = toolmode.decide(settings.tool_mode, report.habits)
        report.checks.append(Check("tool mode", "ok", f"{chosen.mode} ({chosen.reason})"))
        if server is not None and server.lease is not None and probe.speed is not None:
            written, read = probe.speed  # the built-in model's speed, for `charlie model`
            models.record_speed(settings, Path(server.lease.runtime.model), written, read)
        return report
    finally:
        probe.http.close()


def _source(server: ModelServer | None) -> str:
    """The server in words: built-in (….gguf, 1 thread, context 8192; loaded in 0.6 s),
    LM Studio at … (found answering …), configured: …"""
    if server is None:
        return ""
    if server.lease is not None:
        return f"{server.describe()[:-1]}; loaded in {server.lease.runtime.load_seconds:.1f} s)"
    return server.describe()


def remember(home: Home, report: Report) -> None:
    """Keep what the doctor saw of the model, so `auto` starts from it (and the count of
    failed answers starts again)."""
    if report.habits is None or not report.model or report.slow or report.unfinished:
        return  # a busy server's silence says nothing of the model
    toolmode.record_probe(
        home,
        report.server,
        report.model,
        native_calls=report.habits.native_calls,
        text_calls=report.habits.text_calls,
        json_schema=report.habits.json_schema,
    )
    if report.habits.params_source:  # looked again: the model behind a name may change
        toolmode.record_size(home, report.server, report.model, report.habits.size)


def _size(probe: _Probe) -> modelsize.Size:
    """How big the model is, for the tool mode `auto` starts with (`charlie.llm.modelsize`)."""
    try:
        timeout = probe.limit()
    except _OutOfTime:
        return modelsize.Size()  # not looked for: the turn looks
    key = probe.settings.llm_api_key
    client = LLMClient(
        probe.base_url,
        probe.model,
        api_key=key.get_secret_value() if key else None,
        timeout=timeout,
        retries=0,
    )
    try:
        return modelsize.discover(client, probe.model)
    finally:
        client.close()


def _skipped(report: Report, why: str) -> Report:
    done = {c.check for c in report.checks}
    report.checks += [
        Check(name, "skip", f"not run: {why}") for name in ALL_CHECKS if name not in done
    ]
    return report


def table(report: Report) -> list[str]:
    """The report as aligned lines: check, result, fix."""
    marks = {"ok": "ok", "warn": "warn", "slow": "SLOW", "fail": "FAIL"}  # the rest say it
    rows = [("check", "result", "fix")] + [
        (c.check, f"{marks[c.status]}: {c.result}" if c.status in marks else c.result, c.fix)
        for c in report.checks
    ]
    first = max(len(r[0]) for r in rows) + 2
    width = min(max(len(r[1]) for r in rows), RESULT_WIDTH)  # a longer result runs on
    return [f"{check:<{first}}{result:<{width}}  {fix}".rstrip() for check, result, fix in rows]
