"""Helpers of the real-server contract tests (and of benchmarks/real_server.py): a client
that records what it sent and got, long deterministic text, project set-up."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from charlie import conversations
from charlie.config import load_settings
from charlie.conversations import Channel, Message, shared_channel
from charlie.home import Home
from charlie.llm.client import Completion, Delta, LLMClient
from charlie.memory import layers as memory
from charlie.projects import create_project, get_project


@dataclass
class Call:
    """One request the client sent (its JSON body as sent) and the answer it made of it."""

    request: dict[str, Any] = field(default_factory=dict)
    completion: Completion | None = None


class RecordingLLM(LLMClient):
    """Charlie's own client, recording each request body, with `extra` fields added to every
    body (e.g. `tool_choice`, which Charlie's client does not send by itself)."""

    def __init__(self, *args: Any, extra: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.extra = dict(extra or {})
        self.streams: list[Call] = []
        self.chats: list[Call] = []
        self._current = Call()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        body = kwargs.get("json")
        if isinstance(body, dict):
            body.update(self.extra)
            self._current.request = dict(body)
        return super()._send(method, path, **kwargs)

    def stream(self, messages: list[dict[str, Any]], **kwargs: Any) -> Iterator[Delta | Completion]:
        call = self._current = Call()
        self.streams.append(call)
        for item in super().stream(messages, **kwargs):
            if isinstance(item, Completion):
                call.completion = item
            yield item

    def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        call = self._current = Call()
        self.chats.append(call)
        call.completion = super().chat(messages, **kwargs)
        return call.completion

    def __enter__(self) -> RecordingLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def real_client(**extra: Any) -> Iterator[RecordingLLM]:
    """A recording client built from the settings, as Charlie builds its own."""
    client = RecordingLLM.from_settings(load_settings())
    client.extra.update(extra)
    try:
        yield client
    finally:
        client.close()


WORDS = re.findall(
    r"\w+",
    """the kitchen garden roof window boiler invoice school bus holiday budget paint shelf
    bike neighbour plumber insurance garage lamp carpet fence oven recipe train ticket doctor
    dentist birthday present library book stairs attic cellar heating bill hedge needs before
    after Monday Tuesday Friday weekend morning evening because maybe should could will must
    blue green cheap quiet broken new old spare second""",
)


def long_text(seed: int, chars: int) -> str:
    """About `chars` characters of varied, deterministic household sentences."""
    rng = random.Random(seed)
    sentences: list[str] = []
    size = 0
    while size < chars:
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 14))]
        sentence = " ".join(words).capitalize() + "."
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)


def project_channel(home: Home, name: str, *, distill_every: int = 5) -> Channel:
    project = create_project(home, name, distill_every=distill_every)
    channel = shared_channel(home, project)
    memory.ensure_file(home, channel)
    return channel


def messages_of(home: Home, slug: str) -> list[Message]:
    """Every stored message of project `slug`, oldest first."""
    channel = shared_channel(home, get_project(home, slug))
    return conversations.recent(home, channel, 10_000)
