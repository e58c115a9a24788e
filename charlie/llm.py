"""One client for OpenAI-compatible chat servers: LM Studio, Ollama, llama.cpp, vLLM, OpenAI.

It streams, collects tool calls (native, streamed as deltas), sends image content parts,
retries transient failures with backoff, and turns every failure into an `LLMError` that
names the server and what to try.
"""

from __future__ import annotations

import base64
import json
import mimetypes
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from charlie.config import Settings
from charlie.errors import (
    CharlieError,
    LLMBadResponse,
    LLMError,
    LLMModelNotFound,
    LLMRejected,
    LLMUnavailable,
)

TRANSIENT_STATUS = {408, 425, 429, 500, 502, 503, 504}
IMAGE_TYPES = {"image/png", "image/jpeg", "image/webp", "image/gif"}
MAX_IMAGE_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class Completion:
    """A whole answer from the model."""

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass(frozen=True)
class Delta:
    """A piece of streamed reply text."""

    text: str


def image_part(path: Path) -> dict[str, Any]:
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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._model = model
        self.retries = retries
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            transport=transport,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMClient:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        return cls(
            settings.llm_base_url,
            settings.llm_model,
            api_key=key,
            timeout=settings.llm_timeout,
            retries=settings.llm_retries,
        )

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------ models

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
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """One whole (non-streamed) answer."""
        started = time.perf_counter()
        body = self._body(messages, tools, response_format, temperature, stream=False)
        data = self._json(self._send("POST", "/chat/completions", json=body))
        try:
            choice = data["choices"][0]
            message = choice["message"]
            return Completion(
                content=str(message.get("content") or ""),
                tool_calls=_message_calls(message),
                finish_reason=choice.get("finish_reason"),
                usage=dict(data.get("usage") or {}),
                seconds=time.perf_counter() - started,
            )
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMBadResponse(
                f"The server at {self.base_url} answered without a chat message "
                f"({preview(json.dumps(data))}). Check that it is OpenAI-compatible."
            ) from exc

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
    ) -> Iterator[Delta | Completion]:
        """Yield `Delta`s of reply text as they arrive, then the whole `Completion`."""
        started = time.perf_counter()
        body = self._body(messages, tools, None, temperature, stream=True)
        response = self._send("POST", "/chat/completions", json=body, stream=True)
        result = Completion()
        calls: dict[int, dict[str, str]] = {}
        done = False  # `data: [DONE]` came: with a finish_reason, how a whole stream ends
        try:
            content_type = response.headers.get("content-type", "")
            if "text/event-stream" not in content_type:
                yield from self._unstreamed(response, result, started)
                return
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    done = True
                    break
                chunk = _loads(payload, self.base_url)
                if chunk.get("usage"):
                    result.usage = dict(chunk["usage"])
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        result.content += delta["content"]
                        yield Delta(delta["content"])
                    for call in delta.get("tool_calls") or []:
                        slot = calls.setdefault(
                            int(call.get("index", len(calls))), {"id": "", "name": "", "args": ""}
                        )
                        function = call.get("function") or {}
                        slot["id"] = call.get("id") or slot["id"]
                        slot["name"] += function.get("name") or ""
                        slot["args"] += arguments_text(function.get("arguments"))
                    if choice.get("finish_reason"):
                        result.finish_reason = choice["finish_reason"]
            if not done and result.finish_reason is None:
                raise LLMUnavailable(
                    f"The server at {self.base_url} ended the stream before the reply was "
                    "finished (no finish_reason, no [DONE]): it may have crashed or restarted."
                )
        except httpx.TransportError as exc:
            raise LLMUnavailable(
                f"The connection to {self.base_url} broke while the reply was streaming ({exc}). "
                "Your message is saved; send it again when the server is back."
            ) from exc
        finally:
            response.close()
        result.tool_calls = [
            ToolCall(slot["id"] or f"call_{index}", slot["name"], slot["args"])
            for index, slot in sorted(calls.items())
        ]
        result.seconds = time.perf_counter() - started
        yield result

    def _unstreamed(
        self, response: httpx.Response, result: Completion, started: float
    ) -> Iterator[Delta | Completion]:
        """Some servers ignore `stream`; accept a whole JSON answer too."""
        response.read()
        data = self._json(response)
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMBadResponse(
                f"The server at {self.base_url} answered a streamed request with neither an "
                f"event stream nor a chat message ({preview(response.text)})."
            ) from exc
        result.content = str(message.get("content") or "")
        result.finish_reason = data["choices"][0].get("finish_reason")
        result.tool_calls = _message_calls(message)
        result.seconds = time.perf_counter() - started
        if result.content:
            yield Delta(result.content)
        yield result

    # ------------------------------------------------------------ plumbing

    def _body(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        response_format: dict[str, Any] | None,
        temperature: float | None,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = tools
        if response_format:
            body["response_format"] = response_format
        if temperature is not None:
            body["temperature"] = temperature
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
            except httpx.TimeoutException as exc:
                if last_try:
                    raise LLMUnavailable(
                        f"The language model server at {url} did not answer in time "
                        f"({type(exc).__name__}). Try a smaller model, or raise "
                        "CHARLIE_LLM_TIMEOUT."
                    ) from exc
            except httpx.TransportError as exc:
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
            return "Set CHARLIE_LLM_MODEL to a model the server has loaded."
        names = ", ".join(available[:10]) or "none loaded"
        return f"Set CHARLIE_LLM_MODEL to one of: {names}."

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        data = _loads(response.text, self.base_url)
        if not isinstance(data, dict):
            raise LLMBadResponse(
                f"The server at {self.base_url} answered with JSON that is not an object "
                f"({preview(response.text)})."
            )
        return data


def _loads(text: str, base_url: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LLMBadResponse(
            f"The server at {base_url} answered with something that is not JSON "
            f"({preview(text)}). Check that CHARLIE_LLM_BASE_URL points at an "
            "OpenAI-compatible API (it usually ends in /v1)."
        ) from exc


def arguments_text(arguments: Any) -> str:
    """A tool call's arguments as the JSON text the tool loop parses: servers send a string,
    some an object, some nothing."""
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


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


def strip_think(text: str) -> str:
    """Remove reasoning blocks (`<think>…</think>`, as Qwen3 and DeepSeek emit them)."""
    filtered = ThinkFilter()
    return (filtered.feed(text) + filtered.flush()).strip()


class ThinkFilter:
    """Drops `<think>…</think>` from streamed text, even when a tag is split across chunks."""

    def __init__(self) -> None:
        self._buffer = ""
        self._thinking = False

    def feed(self, text: str) -> str:
        self._buffer += text
        visible = ""
        while self._buffer:
            tag = THINK_CLOSE if self._thinking else THINK_OPEN
            at = self._buffer.find(tag)
            if at >= 0:
                if not self._thinking:
                    visible += self._buffer[:at]
                self._buffer = self._buffer[at + len(tag) :]
                self._thinking = not self._thinking
                continue
            keep = partial_tag_suffix(self._buffer, tag)
            if not self._thinking:
                visible += self._buffer[: len(self._buffer) - keep]
            self._buffer = self._buffer[len(self._buffer) - keep :]
            break
        return visible

    def flush(self) -> str:
        rest, self._buffer = ("" if self._thinking else self._buffer), ""
        return rest


def partial_tag_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that could be the start of `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
