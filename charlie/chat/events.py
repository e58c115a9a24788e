"""What a chat turn yields as it goes: the person's message once it is stored, reply text, the
stored reply, trace steps, notices, suggested notes and distillations. Every front end (CLI,
web, Discord, voice) reads these."""

from __future__ import annotations

from dataclasses import dataclass

from charlie import trace
from charlie.conversations import Message
from charlie.memory import distill
from charlie.retrieval import suggestions


@dataclass(frozen=True)
class Saved:
    """The person's message, stored (committed) before anything is asked of the model: the
    turn's first event, so a front end can mark the message kept whatever happens next."""

    message: Message


@dataclass(frozen=True)
class Token:
    """A piece of the reply, to show as it arrives."""

    text: str


@dataclass(frozen=True)
class Reply:
    """The reply, complete and stored."""

    message: Message
    prompt_tokens: int | None
    llm_seconds: float


@dataclass(frozen=True)
class Distilled:
    """Memory was rewritten from the conversation."""

    result: distill.DistillResult


@dataclass(frozen=True)
class Notice:
    """Something the person should know that did not stop the turn."""

    text: str


@dataclass(frozen=True)
class TraceEvent:
    """A step of the tool loop (`charlie.trace`): categories pre-loaded or loaded, a tool
    called, a guard."""

    step: trace.Step


@dataclass(frozen=True)
class Suggested:
    """Related notes the answer did not use, offered to the person."""

    suggestions: list[suggestions.Suggestion]


Event = Saved | Token | Reply | Distilled | Notice | TraceEvent | Suggested
