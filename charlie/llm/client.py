"""One client for OpenAI-compatible chat servers: LM Studio, Ollama, llama.cpp, vLLM, OpenAI.

It streams, collects tool calls (native, streamed as deltas), sends image content parts,
retries transient failures with backoff, and turns every failure into an `LLMError` that
names the server and what to try.
"""

from __future__ import annotations

import base64
import copy
import json
import mimetypes
import re
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from charlie import tls
from charlie.config import Settings
from charlie.errors import (
    CharlieError,
    LLMBadResponse,
    LLMContextExceeded,
    LLMError,
    LLMModelNotFound,
    LLMPromptTruncated,
    LLMRejected,
    LLMStreamError,
    LLMUnavailable,
)
from charlie.jsonvalue import JSON, JSONObject
from charlie.llm import servers, textcalls
from charlie.llm.budget import DEFAULT_WINDOW
from charlie.llm.messages import ChatMessage, ChatRequest, ContentPart, ToolSchema
from charlie.llm.textcalls import ToolCall, arguments_text

__all__ = ["Completion", "Delta", "LLMClient", "ToolCall", "arguments_text"]

TRANSIENT_STATUS = {408, 425, 429, 500, 502, 503, 504}
IMAGE_TYPES = {"image/png", "image/jpeg", "image/webp", "image/gif"}
MAX_IMAGE_BYTES = 20 * 1024 * 1024
# A server that reports reading far fewer prompt tokens than Charlie sent dropped the start
# of the prompt (Ollama does, silently, past its window: ollama/ollama#4967). Checked only
# for long prompts, and never on a tiny count (old Ollama counted only uncached tokens).
TRUNCATION_SHARE = 0.6
TRUNCATION_MIN_PROMPT = 1000
TRUNCATION_FLOOR = 512
LEAST_CHARS_PER_TOKEN = 6
DEFAULT_MAX_TOKENS = 1024  # CHARLIE_LLM_MAX_TOKENS's default (charlie.config)
WINDOW_PROBE_SECONDS = 5.0
# Ollama's num_ctx when a model sets none: 4096 since 2025 (2048 before), and a longer
# prompt is cut, silently (ollama/ollama#8099, #17889)
OLLAMA_DEFAULT_CTX = 4096
CONTEXT_EXCEEDED = (  # how servers say a request is longer than the context window
    "exceed_context_size_error",  # llama.cpp's error type
    "exceeds the available context size",  # llama.cpp
    "context_length_exceeded",  # OpenAI's error code
    "maximum context length",  # OpenAI, vLLM
    "loaded with context length of only",  # LM Studio
)
WINDOW_IN_ERROR = re.compile(
    r"(?:available context size \(|maximum context length is |context length of only )(\d+)"
)


@dataclass
class Window:
    """A client's context window once known, and where it came from."""

    tokens: int | None = None
    source: str = ""


@dataclass
class Completion:
    """A whole answer from the model: `content` is the answer only; the model's thinking
    (`reasoning_content`/`reasoning` fields, `<think>` blocks) is kept apart in `reasoning`
    and is never shown or stored as the reply."""

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    reasoning: str = ""


@dataclass
class Observed:
    """What the server has shown of itself over a client's answers, for the check of a cut
    prompt and for streams (one object, shared by the copies `with_max_tokens` makes)."""

    last_usage: dict[str, int] = field(default_factory=dict)  # the last answer's `usage`
    last_prompt_estimate: int = 0  # `least_prompt_tokens` of the last prompt sent
    # The chat template opens the model's `<think>` itself (a bare `</think>` came):
    # streams hold their opening text back until the thinking ends.
    opens_thinking: bool = False


@dataclass(frozen=True)
class Delta:
    """A piece of streamed reply text."""

    text: str


def image_part(path: Path) -> ContentPart:
    """An OpenAI `image_url` content part carrying the image file at `path` inline."""
    mime = mimetypes.guess_type(path.name)[0]
    if mime not in IMAGE_TYPES:
        raise CharlieError(f"{path} is not a PNG, JPEG, WebP or GIF image.")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CharlieError(f"Cannot read the image {path}: {exc.strerror}.") from exc
    if len(data) > MAX_IMAGE_BYTES:
        raise CharlieError(f"{path} is larger than 20 MB; send a smaller image.")
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{encoded}"}}


class LLMClient:
    def __init__(
        self,
        base_url: str,
        model: str = "",
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 2,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        context_window: int = 0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._model = model
        self._model_setting = "CHARLIE_LLM_MODEL"  # what to change when the model is missing
        self.max_tokens = max_tokens  # sent as `max_tokens`: the longest answer
        self._window = Window(
            context_window or None, "CHARLIE_LLM_CONTEXT" if context_window else ""
        )
        self._windows: dict[str, Window] = {}  # other models' (`with_model`), shared by copies
        self.retries = retries
        self.backoff = backoff
        self.observed = Observed()
        # How the server was chosen (`from_settings`); its built-in runtime's lease is given
        # back by `close`.
        self.server: servers.ModelServer | None = None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            transport=transport,
            verify=tls.context(),
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMClient:
        """A client of the server CHARLIE_LLM chooses (`charlie.llm.servers.locate`): may
        start the built-in runtime, which `close` then gives back."""
        server = servers.locate(settings)
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        try:
            made = cls(
                server.base_url,
                settings.llm_model,
                api_key=key,
                timeout=settings.llm_timeout,
                retries=settings.llm_retries,
                max_tokens=settings.llm_max_tokens,
                context_window=settings.llm_context,
            )
        except BaseException:
            server.release()
            raise
        made.server = server
        return made

    def close(self) -> None:
        self._http.close()
        if self.server is not None:
            self.server.release()

    # ------------------------------------------------------------ budget

    def with_max_tokens(self, max_tokens: int) -> LLMClient:
        """This client (the same connection and window) capping each answer at `max_tokens`."""
        capped = copy.copy(self)
        capped.max_tokens = max_tokens
        return capped

    def with_model(self, model: str) -> LLMClient:
        """This client (the same connection) asking for `model` instead: a project's own
        model. Each model's context window is learnt once, for this client and its copies
        (CHARLIE_LLM_CONTEXT, when set, is every model's)."""
        if not model or model == self._model:
            return self
        chosen = copy.copy(self)
        chosen._model = model
        chosen._model_setting = (
            "the project's model (Settings → Model, or `charlie projects set SLUG --model NAME`)"
        )
        fixed = self._window.source == "CHARLIE_LLM_CONTEXT"
        chosen._window = self._window if fixed else self._windows.setdefault(model, Window())
        return chosen

    @property
    def window_source(self) -> str:
        """Where `context_window()` came from (empty until it is asked)."""
        return self._window.source

    def context_window(self) -> int:
        """The model's context window in tokens: CHARLIE_LLM_CONTEXT, else what the server
        says (llama.cpp `/props`, LM Studio `/api/v0/models`, Ollama `/api/show`), else
        `DEFAULT_WINDOW`. Asked once per client; a server that cannot be reached is asked
        again next time (the request itself will say it is down)."""
        if self._window.tokens is None:
            found = self._discover_window()
            if found is None:
                return DEFAULT_WINDOW
            self._window.tokens, self._window.source = found
        return self._window.tokens

    def _discover_window(self) -> tuple[int, str] | None:
        root = self.base_url.removesuffix("/v1")
        probes = (
            ("llama.cpp /props", "GET", "/props", _llamacpp_window),
            ("LM Studio /api/v0/models", "GET", "/api/v0/models", self._lmstudio_window),
            ("Ollama /api/ps", "GET", "/api/ps", self._ollama_loaded_window),
            ("Ollama /api/show", "POST", "/api/show", _ollama_window),
        )
        for source, method, path, read in probes:
            body = {"model": self._model or self._first_model()} if method == "POST" else None
            try:
                response = self._http.request(
                    method, root + path, json=body, timeout=WINDOW_PROBE_SECONDS
                )
            except httpx.TransportError:
                return None
            if response.status_code != 200:
                continue
            try:
                tokens = read(response.json())
            except (ValueError, KeyError, TypeError, AttributeError, IndexError):
                continue  # not this kind of server
            if tokens:
                return int(tokens), source
        return DEFAULT_WINDOW, "default (the server did not say)"

    def _first_model(self) -> str:
        try:
            return self.model
        except LLMError:
            return ""

    def _lmstudio_window(self, data: dict[str, Any]) -> int | None:
        models = [m for m in data["data"] if m.get("type", "llm") in ("llm", "vlm")]
        chosen = [m for m in models if m.get("id") == self._model] or [
            m for m in models if m.get("state") == "loaded"
        ]
        if not chosen:
            return None
        model = chosen[0]
        window: int | None = model.get("loaded_context_length") or model.get("max_context_length")
        return window

    def _ollama_loaded_window(self, data: dict[str, Any]) -> int | None:
        """The window Ollama loaded the model with (newer versions say it)."""
        loaded = [m for m in data["models"] if self._model in ("", m.get("name"), m.get("model"))]
        return loaded[0].get("context_length") if loaded else None

    def _learn_window(self, tokens: int) -> None:
        """The server named its window in an error: believe it from now on."""
        if self._window.tokens is None or tokens < self._window.tokens:
            self._window.tokens, self._window.source = tokens, "the server's error"

    # ------------------------------------------------------------ models

    def about(self, path: str, body: JSONObject | None = None) -> JSON:
        """What the server says about itself at `path` — under the API (`/models`) or, for
        a path outside it, at the server's root (llama.cpp `/props`, Ollama `/api/show`,
        POSTed with `body`) — or None where it has no such page or is not answering. A
        quick look, never retried: what it says is a hint, not an answer."""
        root = self.base_url.removesuffix("/v1")
        url = f"{self.base_url}{path}" if path == "/models" else f"{root}{path}"
        method = "POST" if body is not None else "GET"
        try:
            response = self._http.request(method, url, json=body, timeout=WINDOW_PROBE_SECONDS)
        except httpx.TransportError:
            return None
        if response.status_code != 200:
            return None
        try:
            answer: JSON = response.json()
        except ValueError:
            return None
        return answer

    def models(self) -> list[str]:
        """The model names the server offers."""
        response = self._send("GET", "/models")
        data = self._json(response)
        try:
            return [str(item["id"]) for item in data["data"]]
        except (KeyError, TypeError) as exc:
            raise LLMBadResponse(
                f"{self.base_url}/models did not list models in the OpenAI format."
            ) from exc

    @property
    def model(self) -> str:
        """The configured model, or the server's first one when none is configured."""
        if not self._model:
            available = self.models()
            if not available:
                raise LLMModelNotFound(
                    f"The server at {self.base_url} has no model loaded. Load one (in LM Studio: "
                    "the model picker) or set CHARLIE_LLM_MODEL."
                )
            self._model = available[0]
        return self._model

    # ------------------------------------------------------------ chat

    def chat(
        self,
        messages: list[ChatMessage],
        *,
        tools: list[ToolSchema] | None = None,
        response_format: Mapping[str, object] | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """One whole answer. It is streamed all the same, and gathered here: a server that
        goes silent for `timeout` seconds is given up on, and closing the stream stops the
        generation at the server, so an abandoned answer never runs on beside the next."""
        started = time.perf_counter()
        body = self._body(messages, tools, response_format, temperature, stream=True)
        result = self._gathered(body, started)
        if _thought_only(result):
            try:
                result = self._gathered(_without_thinking(body), started)
            except LLMRejected as exc:
                raise _no_answer(self.base_url, result) from exc
            if not (result.content.strip() or result.tool_calls):
                raise _no_answer(self.base_url, result)
        return result

    def stream(
        self,
        messages: list[ChatMessage],
        *,
        tools: list[ToolSchema] | None = None,
        temperature: float | None = None,
    ) -> Generator[Delta | Completion]:
        """Yield `Delta`s of reply text as they arrive, then the whole `Completion`.

        A reply that was all thinking and no answer (the thinking used up the tokens) is
        asked again once with thinking off; nothing of the first one was shown.
        """
        started = time.perf_counter()
        body = self._body(messages, tools, None, temperature, stream=True)
        result = yield from self._streamed(body, started)
        if _thought_only(result):
            try:
                result = yield from self._streamed(_without_thinking(body), started)
            except LLMRejected as exc:
                raise _no_answer(self.base_url, result) from exc
            if not (result.content.strip() or result.tool_calls):
                raise _no_answer(self.base_url, result)
        yield result

    def _gathered(self, body: ChatRequest, started: float) -> Completion:
        stream = self._streamed(body, started)
        while True:
            try:
                next(stream)
            except StopIteration as done:
                result: Completion = done.value
                return result

    def _streamed(self, body: ChatRequest, started: float) -> Generator[Delta, None, Completion]:
        """Send `body` and yield the answer's text as it streams; return the `Completion`."""
        response = self._send("POST", "/chat/completions", json=body, stream=True)
        result = Completion()
        calls = _CallAssembler()
        think = ThinkFilter(opened=self.observed.opens_thinking)
        reasoning = ""
        done = False  # `data: [DONE]` came: with a finish_reason, how a whole stream ends
        try:
            content_type = response.headers.get("content-type", "")
            if "text/event-stream" not in content_type:
                result = self._unstreamed(response, started)
                if result.content:
                    yield Delta(result.content)
                return self._observed(body, result)
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    done = True
                    break
                chunk = _loads(payload, self.base_url)
                if chunk.get("error"):
                    raise LLMStreamError(
                        f"The server at {self.base_url} stopped the answer with an error: "
                        f"{_stream_error(chunk['error'])}"
                    )
                if chunk.get("usage"):
                    result.usage = dict(chunk["usage"])
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    reasoning += _reasoning_of(delta)
                    if delta.get("content"):
                        visible = think.feed(delta["content"])
                        if visible:
                            yield Delta(visible)
                    for call in delta.get("tool_calls") or []:
                        calls.add(call)
                    if choice.get("finish_reason"):
                        result.finish_reason = choice["finish_reason"]
            if not done and result.finish_reason is None:
                raise LLMUnavailable(
                    f"The server at {self.base_url} ended the stream before the reply was "
                    "finished (no finish_reason, no [DONE]): it may have crashed or restarted."
                )
        except httpx.TimeoutException as exc:
            raise LLMUnavailable(_silent(self.base_url, self._http.timeout.read)) from exc
        except httpx.TransportError as exc:
            raise LLMUnavailable(
                f"The connection to {self.base_url} broke while the reply was streaming ({exc}). "
                "Your message is saved; send it again when the server is back."
            ) from exc
        finally:
            response.close()  # a reply given up on stops at the server too
        rest = think.flush(cut=result.finish_reason == "length")
        if rest:
            yield Delta(rest)
        self.observed.opens_thinking |= think.opened_by_template
        result.content = think.shown
        result.reasoning = reasoning + think.reasoning
        result.tool_calls = calls.calls()
        result.seconds = time.perf_counter() - started
        return self._observed(body, result)

    def _unstreamed(self, response: httpx.Response, started: float) -> Completion:
        """Some servers ignore `stream`; accept a whole JSON answer too."""
        response.read()
        data = self._json(response)
        try:
            return self._whole(data, started)
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMBadResponse(
                f"The server at {self.base_url} answered a streamed request with neither an "
                f"event stream nor a chat message ({preview(response.text)})."
            ) from exc

    def _whole(self, data: dict[str, Any], started: float) -> Completion:
        """The `Completion` of a whole chat answer (raises KeyError & co. on another shape)."""
        choice = data["choices"][0]
        message = choice["message"]
        finish_reason = choice.get("finish_reason")
        think = ThinkFilter(opened=self.observed.opens_thinking)
        think.feed(str(message.get("content") or ""))
        think.flush(cut=finish_reason == "length")
        self.observed.opens_thinking |= think.opened_by_template
        return Completion(
            content=think.shown,
            tool_calls=_message_calls(message),
            finish_reason=finish_reason,
            usage=dict(data.get("usage") or {}),
            seconds=time.perf_counter() - started,
            reasoning=_reasoning_of(message) + think.reasoning,
        )

    def _observed(self, body: ChatRequest, result: Completion) -> Completion:
        """Note what the answer shows of the server; take calls written in the thinking when
        they are all there is; refuse an answer to a prompt the server cut short."""
        seen = self.observed
        seen.last_usage = dict(result.usage)
        seen.last_prompt_estimate = least_prompt_tokens(body.get("messages") or [])
        offered = textcalls.known_of(body.get("tools") or [])
        if offered and not result.tool_calls and not result.content.strip():
            # A call the model wrote while thinking, then stopped: the only move it made
            # (llama.cpp surfaces such a call as reasoning). One drafted before an answer
            # or beside a real call is a plan, not a call, and is never run.
            thought = textcalls.read(result.reasoning, offered, whole=False).calls
            result.tool_calls = [
                ToolCall(f"think_call_{n}", c.name, c.arguments) for n, c in enumerate(thought)
            ]
        reported = result.usage.get("prompt_tokens")
        sent = seen.last_prompt_estimate
        if (
            isinstance(reported, int)
            and reported >= TRUNCATION_FLOOR
            and sent >= TRUNCATION_MIN_PROMPT
            and reported < TRUNCATION_SHARE * sent
        ):
            self._learn_window(reported)  # later requests are fitted to what it reads
            raise LLMPromptTruncated(
                f"The server at {self.base_url} read only {reported} tokens of a prompt of "
                f"at least {sent}: its context window is smaller than the prompt, and it "
                "dropped the start (the instructions and memory) without saying so, as Ollama "
                "does. The answer was written without them. Set CHARLIE_LLM_CONTEXT to the "
                "server's window, or give the model a larger one (Ollama: num_ctx or "
                "OLLAMA_CONTEXT_LENGTH; llama.cpp: --ctx-size).",
                window=reported,
                estimated=sent,
            )
        return result

    # ------------------------------------------------------------ plumbing

    def _body(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSchema] | None,
        response_format: Mapping[str, object] | None,
        temperature: float | None,
        *,
        stream: bool,
    ) -> ChatRequest:
        body: ChatRequest = {"model": self.model, "messages": messages, "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = tools
        if response_format:
            body["response_format"] = response_format
        if temperature is not None:
            body["temperature"] = temperature
        body["max_tokens"] = self.max_tokens
        return body

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send with retries for transient failures; raise a clear `LLMError` otherwise."""
        stream = kwargs.pop("stream", False)
        url = f"{self.base_url}{path}"
        for attempt in range(self.retries + 1):
            last_try = attempt == self.retries
            try:
                request = self._http.build_request(method, path, **kwargs)
                response = self._http.send(request, stream=stream)
            except httpx.ConnectTimeout as exc:
                if last_try:
                    raise LLMUnavailable(
                        f"The language model server at {url} did not take the connection in "
                        "time. Is it running? Check CHARLIE_LLM_BASE_URL."
                    ) from exc
            except httpx.TimeoutException as exc:
                # Never sent again: the server may still be working on it, and a second copy
                # would only queue behind the first (or run beside it).
                raise LLMUnavailable(_silent(url, self._http.timeout.read)) from exc
            except httpx.TransportError as exc:
                if last_try and self.server is not None and self.server.kind == "none":
                    raise LLMUnavailable(self.server.why) from exc
                if last_try:
                    raise LLMUnavailable(
                        f"Cannot reach the language model server at {self.base_url} ({exc}). "
                        "Is LM Studio (or Ollama, llama.cpp, vLLM) running with its server "
                        "started? Check CHARLIE_LLM_BASE_URL."
                    ) from exc
            else:
                if response.status_code < 400:
                    return response
                if stream:
                    response.read()
                    response.close()
                if response.status_code not in TRANSIENT_STATUS or last_try:
                    raise self._http_error(response, url)
                retry_after = response.headers.get("retry-after", "")
                if retry_after.replace(".", "", 1).isdigit():
                    time.sleep(min(float(retry_after), 30.0))
                    continue
            time.sleep(self.backoff * (2**attempt))
        raise AssertionError("unreachable")

    def _http_error(self, response: httpx.Response, url: str) -> LLMError:
        message = _error_message(response)
        status = response.status_code
        if any(sign in response.text for sign in CONTEXT_EXCEEDED):
            window = _window_in_error(response, message)
            if window:
                self._learn_window(window)
            return LLMContextExceeded(
                f"The request is longer than the model's context window (HTTP {status}: "
                f"{message}).",
                window,
            )
        if status in TRANSIENT_STATUS:
            return LLMUnavailable(
                f"The language model server at {url} kept failing (HTTP {status}: {message}). "
                "Try again in a moment; check the server's log if it persists."
            )
        if status == 404 and "model" in message.lower():
            return LLMModelNotFound(
                f"The server at {self.base_url} has no model {self._model!r} ({message}). "
                f"{self._model_hint()}"
            )
        if status == 404:
            return LLMRejected(
                f"{url} does not exist (HTTP 404). CHARLIE_LLM_BASE_URL should end in /v1, "
                "e.g. http://localhost:1234/v1."
            )
        if status in (401, 403):
            return LLMRejected(
                f"The server at {self.base_url} refused the credentials (HTTP {status}: "
                f"{message}). Set CHARLIE_LLM_API_KEY."
            )
        return LLMRejected(f"The server at {url} refused the request (HTTP {status}: {message}).")

    def _model_hint(self) -> str:
        try:
            available = self.models()
        except LLMError:
            return f"Set {self._model_setting} to a model the server has loaded."
        names = ", ".join(available[:10]) or "none loaded"
        return f"Set {self._model_setting} to one of: {names}."

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        data = _loads(response.text, self.base_url)
        if not isinstance(data, dict):
            raise LLMBadResponse(
                f"The server at {self.base_url} answered with JSON that is not an object "
                f"({preview(response.text)})."
            )
        return data


def _silent(url: str, seconds: float | None) -> str:
    return (
        f"The language model server at {url} sent nothing for {seconds or 0:g} s, so Charlie "
        "gave up on this answer (and closed the request, which stops it at the server). A "
        "slow machine reading a long prompt can take that long: raise CHARLIE_LLM_TIMEOUT, "
        "or try a smaller model."
    )


def _llamacpp_window(data: dict[str, Any]) -> int | None:
    settings = data.get("default_generation_settings") or {}
    return settings.get("n_ctx") or data.get("n_ctx")


def _ollama_window(data: dict[str, Any]) -> int | None:
    """`num_ctx` when the model sets it; else Ollama's default, at most the model's own."""
    for line in str(data.get("parameters") or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "num_ctx" and value.strip().isdigit():
            return int(value)
    trained = [v for k, v in data["model_info"].items() if k.endswith(".context_length")]
    return min([OLLAMA_DEFAULT_CTX, *trained]) if trained else None


def _window_in_error(response: httpx.Response, message: str) -> int | None:
    """The window a context-exceeded error names (llama.cpp's `n_ctx`, or in its words)."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("n_ctx"), int):
        return int(error["n_ctx"])
    found = WINDOW_IN_ERROR.search(message)
    return int(found.group(1)) if found else None


def _loads(text: str, base_url: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LLMBadResponse(
            f"The server at {base_url} answered with something that is not JSON "
            f"({preview(text)}). Check that CHARLIE_LLM_BASE_URL points at an "
            "OpenAI-compatible API (it usually ends in /v1)."
        ) from exc


def _stream_error(error: object) -> str:
    """The message of an `error` object a server put in its event stream."""
    if isinstance(error, dict):
        return str(error.get("message") or json.dumps(error))
    return str(error)


def _message_calls(message: dict[str, Any]) -> list[ToolCall]:
    """The tool calls of a whole (non-streamed) chat message."""
    return [
        ToolCall(
            str(call.get("id") or f"call_{i}"),
            str(call["function"]["name"]),
            arguments_text(call["function"].get("arguments")),
        )
        for i, call in enumerate(message.get("tool_calls") or [])
    ]


def _reasoning_of(part: Mapping[str, object]) -> str:
    """The thinking in a delta or message: `reasoning_content` (llama.cpp, vLLM, LM Studio,
    DeepSeek) or `reasoning` (Ollama, OpenRouter, newer vLLM); one of them, never both."""
    thought = part.get("reasoning_content") or part.get("reasoning")
    return thought if isinstance(thought, str) else ""


class _CallAssembler:
    """Streamed tool-call deltas put back together, by `id` as well as by `index`.

    OpenAI numbers parallel calls 0, 1, 2… and names each id once. Ollama sends `index: 0`
    for every call, each with its own id (ollama/ollama#15457), and older Ollama sent no
    index at all (ollama/ollama#7881): a new id is a new call, a delta with only an index
    continues the call last given that index, and one with neither continues the last.
    """

    def __init__(self) -> None:
        self._slots: list[dict[str, str]] = []
        self._by_id: dict[str, int] = {}
        self._by_index: dict[int, int] = {}

    def add(self, delta: dict[str, Any]) -> None:
        call_id = str(delta.get("id") or "")
        index = delta.get("index")
        function = delta.get("function") or {}
        if call_id and call_id in self._by_id:
            at = self._by_id[call_id]
        elif (
            isinstance(index, int)
            and index in self._by_index
            and not (call_id and self._slots[self._by_index[index]]["id"])
        ):
            at = self._by_index[index]
        elif (
            not call_id
            and not isinstance(index, int)
            and self._slots
            and not (function.get("name") and self._slots[-1]["name"])
        ):
            at = len(self._slots) - 1
        else:
            at = len(self._slots)
            self._slots.append({"id": "", "name": "", "args": ""})
        slot = self._slots[at]
        if call_id:
            slot["id"] = call_id
            self._by_id[call_id] = at
        if isinstance(index, int):
            self._by_index[index] = at
        slot["name"] += function.get("name") or ""
        slot["args"] += arguments_text(function.get("arguments"))

    def calls(self) -> list[ToolCall]:
        return [
            ToolCall(slot["id"] or f"call_{at}", slot["name"], slot["args"])
            for at, slot in enumerate(self._slots)
        ]


def least_prompt_tokens(messages: list[ChatMessage]) -> int:
    """About the fewest tokens `messages` can take: their text at six characters a token,
    images, tool schemas and the chat template left out. It errs low on purpose (unlike
    `budget.estimate`, which errs high): a server reporting far less did drop some. Plain
    English words run 5.7 characters a token under Gemma 3's 262k-word vocabulary
    (measured against llama.cpp: tests/real_llm/test_real_quirks.py); 4 is common."""
    chars = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            texts = [part.get("text") for part in content if isinstance(part, dict)]
            chars += sum(len(text) for text in texts if isinstance(text, str))
        for call in message.get("tool_calls") or []:
            chars += len(str((call.get("function") or {}).get("arguments") or ""))
    return chars // LEAST_CHARS_PER_TOKEN


def _thought_only(result: Completion) -> bool:
    """The model thought and never answered: the thinking used up the tokens (Qwen3)."""
    return bool(result.reasoning.strip()) and not result.content.strip() and not result.tool_calls


NO_THINK = "/no_think"


def _without_thinking(body: ChatRequest) -> ChatRequest:
    """`body` asking the model not to think: `chat_template_kwargs.enable_thinking` false
    (llama.cpp, vLLM, LM Studio pass it to the chat template) and, for Qwen, `/no_think`
    at the end of the last user message (its soft switch)."""
    quiet = body.copy()
    kwargs = body.get("chat_template_kwargs") or {}
    quiet["chat_template_kwargs"] = {**kwargs, "enable_thinking": False}
    if "qwen" not in str(body.get("model", "")).lower():
        return quiet
    messages = list(body.get("messages") or [])
    for at in range(len(messages) - 1, -1, -1):
        if messages[at].get("role") != "user":
            continue
        content = messages[at].get("content")
        if isinstance(content, list):
            content = [*content, {"type": "text", "text": NO_THINK}]
        else:
            content = f"{content or ''}\n{NO_THINK}"
        messages[at] = {**messages[at], "content": content}
        break
    quiet["messages"] = messages
    return quiet


def _no_answer(base_url: str, result: Completion) -> LLMBadResponse:
    return LLMBadResponse(
        f"The model at {base_url} only thought ({len(result.reasoning)} characters of "
        "reasoning) and gave no answer, even when asked again with thinking off. Raise "
        "CHARLIE_LLM_MAX_TOKENS, turn thinking off for this model in the server (llama.cpp: "
        "--reasoning-budget 0; Ollama: think false), or check that the server's reasoning "
        "parser matches the model (vLLM: --reasoning-parser qwen3)."
    )


def _error_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return preview(response.text)
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if data.get("message"):
            return str(data["message"])
    return preview(response.text)


def preview(text: str, size: int = 160) -> str:
    """`text` on one line, cut to `size` characters with "…" where it was longer."""
    flat = " ".join(text.split())
    return flat if len(flat) <= size else flat[: size - 1] + "…"


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def json_object(text: str) -> JSONObject | None:
    """The first JSON object in a model's answer, past reasoning blocks, fences and
    chatter; None when it holds none."""
    text = strip_think(text)
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char != "{":
            continue
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def strip_think(text: str) -> str:
    """Remove reasoning blocks (`<think>…</think>`, as Qwen3 and DeepSeek emit them)."""
    filtered = ThinkFilter()
    filtered.feed(text)
    filtered.flush()
    return filtered.shown.strip()


class ThinkFilter:
    """Splits streamed text into the answer and the thinking, even when a tag is split
    across chunks: `<think>…</think>` is thinking, and so is everything before a `</think>`
    that was never opened — Qwen3-Thinking, QwQ and DeepSeek-R1 templates open the block in
    the prompt, so the model only closes it (Cerebras/cerebras-cloud-sdk-python#10).

    What `feed` returned before such a bare `</think>` was shown too soon: it moves to
    `reasoning`, `shown` keeps only the answer, and `opened_by_template` says the server
    opens the thinking itself. `opened=True` starts inside the thinking for such a server
    (nothing is shown until `</think>`); if no tag ever comes, `flush` shows the text after
    all, unless the answer was cut (`cut`), when it was thinking that ran out of tokens.
    """

    def __init__(self, *, opened: bool = False) -> None:
        self._buffer = ""
        self._thinking = opened
        self._unconfirmed = opened  # inside a block no tag has confirmed yet
        self._held = ""  # text held while unconfirmed
        self.shown = ""  # the answer: all that `feed` and `flush` returned, less thinking
        self.reasoning = ""
        self.opened_by_template = False

    def feed(self, text: str) -> str:
        self._buffer += text
        visible = ""
        while self._buffer:
            if self._thinking:
                at = self._buffer.find(THINK_CLOSE)
                if at < 0:
                    keep = partial_tag_suffix(self._buffer, THINK_CLOSE)
                    self._think(self._buffer[: len(self._buffer) - keep])
                    self._buffer = self._buffer[len(self._buffer) - keep :]
                    break
                self._think(self._buffer[:at])
                if self._unconfirmed:
                    self.reasoning += self._held
                    self._held, self._unconfirmed = "", False
                    self.opened_by_template = True
                self._buffer = self._buffer[at + len(THINK_CLOSE) :]
                self._thinking = False
                continue
            opening, closing = self._buffer.find(THINK_OPEN), self._buffer.find(THINK_CLOSE)
            if closing >= 0 and (opening < 0 or closing < opening):
                # A close never opened: all the answer so far was thinking.
                self.reasoning += self.shown + visible + self._buffer[:closing]
                self.shown, visible = "", ""
                self.opened_by_template = True
                self._buffer = self._buffer[closing + len(THINK_CLOSE) :]
                continue
            if opening >= 0:
                visible += self._buffer[:opening]
                self._buffer = self._buffer[opening + len(THINK_OPEN) :]
                self._thinking, self._unconfirmed = True, False
                continue
            keep = max(
                partial_tag_suffix(self._buffer, THINK_OPEN),
                partial_tag_suffix(self._buffer, THINK_CLOSE),
            )
            visible += self._buffer[: len(self._buffer) - keep]
            self._buffer = self._buffer[len(self._buffer) - keep :]
            break
        self.shown += visible
        return visible

    def _think(self, text: str) -> None:
        if self._unconfirmed:
            self._held += text
        else:
            self.reasoning += text

    def flush(self, *, cut: bool = False) -> str:
        """The rest of the answer at the end of the message."""
        rest, self._buffer = self._buffer, ""
        if not self._thinking:
            self.shown += rest
            return rest
        if self._unconfirmed and not cut:  # no tag came: it was the answer after all
            rest, self._held = self._held + rest, ""
            self.shown += rest
            return rest
        self.reasoning += self._held + rest
        self._held = ""
        return ""


def partial_tag_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that could be the start of `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
