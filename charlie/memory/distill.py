"""Distillation: every N messages the model rewrites a channel's memory into three layers.

The model sees the current memory (hand edits included) and the new messages, and answers
with JSON: a summary, the decisions, and quotes lifted verbatim from the new messages.
The answer is checked before anything is written: quotes that are not verbatim are
rejected, malformed or degenerate output (see `check_quality`: empty, a placeholder, a copy
of the instructions, a memory shrunk or emptied without being asked) gets one repair
attempt with the reason, and if that fails the old memory stays exactly as it was and the
failure is recorded.

Hand edits win: whatever differs from the text Charlie last wrote itself (a distillation,
or a restore of one: `memory.last_charlie_revision`) is the person's, so every summary
sentence they wrote stays as written, round after round (`charlie.memory.summary`), and
every decision they added survives until a message names it (`charlie.memory.decisions`).
No word of a message ever retires a decision or empties the memory: a change is judged by
the model with the old and the new decision side by side, and a start-over is asked for
plainly (`charlie memory start-over`, undoable). That holds for an
edit made while the model is thinking, too: the memory is read again under the write lock
before anything is written, and what the person changed since the model's prompt was built
wins over the model's answer.

One distillation at a time per channel: `claim` records who holds it (host, boot, process),
and the holder renews it every `RENEW_SECONDS` until it is released; a claim whose process
is gone (killed, crashed) is taken over at once, one no longer renewed (its machine died)
after `CLAIM_SECONDS`. Whatever happens to claims, a distillation writes nothing when
another has folded any of its messages in meanwhile. A failure to write (a full disk) is
raised as a `DatabaseError` saying what to do; the claim is released and the messages stay
pending.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator

from charlie import conversations, store
from charlie import db as database
from charlie.config import Settings
from charlie.conversations import Channel, Message
from charlie.db import now, placeholders
from charlie.errors import (
    AlreadyDistilled,
    CharlieError,
    DatabaseError,
    DistillationError,
    LLMError,
    LLMRejected,
    MemoryFormatError,
)
from charlie.home import Home
from charlie.jsonvalue import JSON, JSONObject
from charlie.llm import toolmode
from charlie.llm.client import LLMClient, json_object, strip_think
from charlie.llm.messages import ChatMessage
from charlie.memory import decisions, steps, summary
from charlie.memory import layers as memory
from charlie.memory.layers import Memory, Quote, normalise
from charlie.retrieval import index
from charlie.retrieval.embeddings import EmbeddingError, Vectors
from charlie.store import Connection
from charlie.users import User

log = logging.getLogger(__name__)

SYSTEM_PROMPT = """\
You maintain the long-term memory of a household's conversation, in layers:
1. summary: what this conversation is about, for someone arriving fresh. Rewrite it from
   the current summary and the new messages in at most 3 short sentences: keep what still
   holds, never just add to the end of it, never repeat a sentence. Only what the people
   said: "agreed" or "decided" only for their decisions; nothing about Charlie or its tools.
2. decisions: only what the PEOPLE decided, chose or committed to in the NEW messages, one
   short sentence each, with the numbers of the messages it comes from. A suggestion, a
   question, a joke, the weather or anything Charlie said is not a decision. Do not repeat
   the current decisions: they are kept.
3. superseded: the current decisions that a person's NEW statement gives another value or
   plainly cancels, each with the number of that message (put the new value in decisions).
   Mentioning a decision, a reminder or a question changes nothing.
4. quotes: up to 3 meaningful statements a person said in the NEW messages (never
   Charlie's, never a question), copied character for character, with the speaker's name
   exactly as shown. Skip small talk.
The current memory may have been edited by hand by the person: treat its content as true.
Answer with a JSON object only: {"summary": "...", "decisions": [{"text": "...",
"messages": [12]}], "superseded": [{"decision": "...", "message": 13}], "quotes":
[{"speaker": "...", "text": "..."}]}"""

SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "messages": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["text", "messages"],
                "additionalProperties": False,
            },
        },
        "superseded": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"decision": {"type": "string"}, "message": {"type": "integer"}},
                "required": ["decision", "message"],
                "additionalProperties": False,
            },
        },
        "quotes": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"speaker": {"type": "string"}, "text": {"type": "string"}},
                "required": ["speaker", "text"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["summary", "decisions", "superseded", "quotes"],
    "additionalProperties": False,
}
RESPONSE_FORMAT: JSONObject = {
    "type": "json_schema",
    "json_schema": {"name": "memory", "strict": True, "schema": SCHEMA},
}


# The longest field kept: a longer one is cut there (a quote at a word), never fatal — one
# runaway field must not cost the whole distillation.
LONGEST = {"speaker": 200, "text": 2000, "summary": 8000, "decision": 1000}
MOST_DECISIONS, MOST_QUOTES = 200, 50


def _cut(text: object, size: int) -> object:
    if not isinstance(text, str) or len(text) <= size:
        return text
    cut = text[:size]
    space = cut.rfind(" ")
    return cut[:space] if space > size // 2 else cut


class _QuoteOut(BaseModel):
    speaker: str
    text: str = Field(min_length=1)

    @field_validator("speaker", "text", mode="before")
    @classmethod
    def _short(cls, value: object, info: ValidationInfo) -> object:
        return _cut(value, LONGEST[str(info.field_name)])


class _DecisionOut(BaseModel):
    text: str
    messages: list[int] = Field(default_factory=list)

    @field_validator("text", mode="before")
    @classmethod
    def _short(cls, value: object) -> object:
        return _cut(value, LONGEST["decision"])

    @field_validator("messages", mode="before")
    @classmethod
    def _numbers(cls, value: object) -> list[int]:
        """Message numbers as a small model writes them: 12, "12", "#12", a lone number."""
        items = value if isinstance(value, list) else [value]
        found = [re.sub(r"\D", "", str(item)) for item in items if item is not None]
        return [int(number) for number in found if number][:20]


class _SupersededOut(BaseModel):
    decision: str = Field(min_length=1)
    message: int | None = None

    @field_validator("message", mode="before")
    @classmethod
    def _number(cls, value: object) -> int | None:
        digits = re.sub(r"\D", "", str(value)) if value is not None else ""
        return int(digits) if digits else None


class _Output(BaseModel):
    summary: str = Field(min_length=1)
    decisions: list[_DecisionOut]
    superseded: list[_SupersededOut] = Field(default_factory=list)
    quotes: list[_QuoteOut]

    @field_validator("summary", mode="before")
    @classmethod
    def _short_summary(cls, value: object) -> object:
        return _cut(value, LONGEST["summary"])

    @field_validator("decisions", mode="before")
    @classmethod
    def _few_decisions(cls, value: object) -> object:
        """At most `MOST_DECISIONS`; a plain text is a decision that names no message."""
        if not isinstance(value, list):
            return value
        return [{"text": d} if isinstance(d, str) else d for d in value[:MOST_DECISIONS]]

    @field_validator("quotes", mode="before")
    @classmethod
    def _few_quotes(cls, value: object) -> object:
        return value[:MOST_QUOTES] if isinstance(value, list) else value


Method = Literal["whole", "steps"]  # one request, or small steps (`charlie.memory.steps`)


@dataclass
class DistillResult:
    revision_id: int
    memory: Memory
    first_message_id: int
    last_message_id: int
    rejected_quotes: list[dict[str, str]] = field(default_factory=list)
    structured: bool = True
    attempts: int = 1
    method: Method = "whole"


def extract_json(text: str) -> JSONObject:
    """The first JSON object in `text`, tolerating reasoning blocks, fences and chatter."""
    found = json_object(text)
    if found is None:
        raise DistillationError(f"no JSON object in the answer ({strip_think(text)[:120]!r})")
    return found


def _transcript(messages: list[Message]) -> str:
    return "\n".join(steps.line(m) for m in messages)


def _prompt(current: Memory, messages: list[Message]) -> list[ChatMessage]:
    layers: dict[str, object] = {
        "summary": current.summary,
        "decisions": current.texts,
        "quotes": [{"speaker": q.speaker, "text": q.text} for q in current.quotes],
    }
    if current.earlier:  # what held before, so a question about it can be answered
        layers["earlier decisions (no longer hold)"] = [e.text for e in current.earlier[-10:]]
    user = (
        "Current memory:\n"
        + json.dumps(layers, ensure_ascii=False, indent=1)
        + "\n\nNew messages, each as [number] speaker: text:\n"
        + _transcript(messages)
        + "\n\nReturn the updated memory as JSON."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _validate(raw: str, current: Memory, messages: list[Message]) -> _Output:
    try:
        output = _Output.model_validate(extract_json(raw))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise DistillationError(f"field '{where}': {err['msg']}") from exc
    check_quality(output, current, messages)
    return output


# The quality gate: a model (a small one, or one forced into JSON by a schema) can answer
# with valid JSON that says nothing; such an answer must never replace a memory.
PLACEHOLDERS = {
    "",
    "n/a",
    "na",
    "none",
    "null",
    "tbd",
    "todo",
    "summary",
    "summary here",
    "your summary",
    "decision",
    "decision here",
    "quote",
    "text",
    "placeholder",
}
SHRINK_FROM = 200  # a summary longer than this (characters) …
SHRINK_TO = 0.25  # … may not fall below this share of its length …
SHRINK_FLOOR = 80  # … and under this many characters: the model emptied it
COPY_SHARE = 0.5  # this share of an answer's word triples found in the instructions: a copy
_FRAMING = (
    "Current memory: New messages, each as [speaker] text: Return the updated memory as JSON."
)


def _placeholder(text: str) -> bool:
    """Text that holds nothing: dots, dashes, "N/A", "summary here", "<summary>", lorem ipsum."""
    bare = re.sub(r"^[\s\-*•\d.)]*(?=\w)", "", text.strip())  # a list marker: "- ", "1. "
    bare = bare.strip().strip("\"'`“”‘’[](){}<>").strip().rstrip(".…:;!").strip().lower()
    if not re.search(r"\w", bare):
        return True  # "...", "…", "- ...", "—"
    return bare in PLACEHOLDERS or bare.startswith("lorem ipsum")


def _triples(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


def check_quality(output: _Output, current: Memory, messages: list[Message]) -> None:
    """Raise `DistillationError` saying why, when the answer must not replace `current`.

    Refused: an empty or placeholder summary, decision or quote; an answer that mostly
    copies the instructions; a summary of more than `SHRINK_FROM` characters cut below
    `SHRINK_TO` of its length and under `SHRINK_FLOOR` characters (no message empties a
    memory: a start-over is asked for plainly, `charlie.memory.start_over`). Decisions
    cannot be dropped: `charlie.memory.decisions` keeps every one no change supersedes.
    """
    if _placeholder(output.summary):
        raise DistillationError(f"the summary {output.summary.strip()!r} is empty or a placeholder")
    for decision in output.decisions:
        if _placeholder(decision.text):
            raise DistillationError(f"the decision {decision.text!r} is empty or a placeholder")
    for quote in output.quotes:
        if _placeholder(quote.text):
            raise DistillationError(f"the quote {quote.text!r} is empty or a placeholder")
    answer = _triples(" ".join([output.summary, *(d.text for d in output.decisions)]))
    instructions = _triples(f"{SYSTEM_PROMPT} {_FRAMING}")
    if len(answer) >= 4 and len(answer & instructions) >= COPY_SHARE * len(answer):
        raise DistillationError("it repeats the instructions instead of the conversation")
    old, new = len(current.summary.strip()), len(output.summary.strip())
    if old > SHRINK_FROM and new < SHRINK_TO * old and new < SHRINK_FLOOR:
        raise DistillationError(
            f"the summary shrank from {old} to {new} characters; keep what still holds and "
            "add what is new"
        )


def method(home: Home, channel: Channel, llm: LLMClient) -> tuple[Method, str]:
    """How this channel's memory is distilled, and why: the project's `distill_mode`, else
    the setting; `auto` distills in steps (`charlie.memory.steps`) when the model's tools
    are constrained (a small model: set so, one under ~4B parameters, or seen failing tool
    calls), else whole."""
    configured = channel.project.config.distill_mode if channel.project else None
    setting = configured or home.settings.distill_mode
    if setting != "auto":
        return setting, f"distill_mode = {setting} (set)"
    tools_setting = toolmode.setting_for(home, channel)
    seen = toolmode.sized(home, llm) if tools_setting == "auto" else toolmode.Habits()
    tools = toolmode.decide(tools_setting, seen)
    if tools.mode == "constrained":
        return "steps", f"auto: tools are constrained for this model ({tools.reason})"
    return "whole", f"auto: tools are {tools.mode} for this model"


def _alike(home: Home) -> decisions.Alike:
    """How alike in meaning a text is to others, by the home's embedding model (loaded on
    first use). A model that cannot embed fails the distillation, which is tried again
    later: which decisions a message may change is never guessed from words alone."""

    seen: dict[str, Vectors] = {}  # a row per text: each embedded once a distillation

    def alike(text: str, others: list[str]) -> list[float]:
        new = [t for t in dict.fromkeys([text, *others]) if t not in seen]
        if new:
            try:
                vectors = index.embedder_of(home).embed(new)
            except EmbeddingError as exc:
                raise DistillationError(
                    f"the messages could not be compared with the decisions by meaning ({exc}). "
                    "The memory was left as it was; it will be tried again after the next "
                    "message."
                ) from exc
            seen.update(zip(new, vectors, strict=True))
        return [float(seen[other] @ seen[text]) for other in others]

    return alike


def _ask_steps(
    llm: LLMClient, current: Memory, messages: list[Message], earlier: list[Message]
) -> tuple[_Output, bool, int]:
    """The answer asked step by step; the same checks as the whole form's."""

    def check_summary(summary: str) -> None:
        check_quality(_Output(summary=summary, decisions=[], quotes=[]), current, messages)

    answer, asker = steps.ask(llm, current, messages, check_summary, earlier)
    try:
        output = _Output.model_validate(answer)
    except ValidationError as exc:
        raise DistillationError(
            f"the steps' answer was not valid: {exc.errors()[0]['msg']}"
        ) from exc
    check_quality(output, current, messages)
    return output, asker.structured, asker.attempts


def _ask(
    llm: LLMClient, prompt: list[ChatMessage], current: Memory, messages: list[Message]
) -> tuple[_Output, bool, int]:
    """The model's validated answer, whether `response_format` was used, and attempts made."""
    structured = True
    try:
        answer = llm.chat(prompt, response_format=RESPONSE_FORMAT, temperature=0.2)
    except LLMRejected:
        structured = False  # the server does not take response_format: plain prompting
        answer = llm.chat(prompt, temperature=0.2)
    try:
        return _validate(answer.content, current, messages), structured, 1
    except DistillationError as first:
        repair: list[ChatMessage] = [
            *prompt,
            {"role": "assistant", "content": answer.content},
            {
                "role": "user",
                "content": f"That answer was not usable: {first}. Reply again with only the "
                "corrected JSON object with keys summary, decisions and quotes.",
            },
        ]
        again = llm.chat(
            repair, response_format=RESPONSE_FORMAT if structured else None, temperature=0.2
        )
        try:
            return _validate(again.content, current, messages), structured, 2
        except DistillationError as second:
            raise DistillationError(
                f"The model's distillation was not valid twice ({first}; then {second}). "
                "The memory was left as it was; it will be tried again after the next message."
            ) from second


def verify_quotes(
    quotes: list[_QuoteOut], messages: list[Message]
) -> tuple[list[Quote], list[dict[str, str]]]:
    """Keep quotes a person said, found verbatim in `messages` (attributed to who really said
    them). Charlie's own words are never quoted, nor a question: the quotes are lines
    people said worth keeping."""
    kept: list[Quote] = []
    rejected: list[dict[str, str]] = []
    for quote in quotes:
        text = normalise(quote.text).strip('"“” ')
        found = [m for m in messages if text and text in normalise(m.content)]
        said = [m for m in found if m.role == "user"]
        if not said or "?" in text:
            why = "said by Charlie, not a person" if found else "not verbatim"
            why = "a question, not a line to remember" if said else why
            rejected.append({"speaker": quote.speaker, "text": quote.text, "why": why})
            continue
        same = [m for m in said if m.speaker.lower() == quote.speaker.strip().lower()]
        kept.append(Quote((same or said)[0].speaker, text))
    return kept, rejected


def not_decisions(quotes: list[Quote], held: list[str]) -> tuple[list[Quote], list[dict[str, str]]]:
    """The quotes that do not say again what a decision says (most of the quote's words, as
    `summary.SAME` counts two sentences the same): a message held as a decision is in
    memory already, and the quotes are for what is not. "Oak worktops, final answer." says
    more than the decision "Oak worktops" and stays."""
    told = [decisions.words(text) for text in held]
    kept: list[Quote] = []
    left: list[dict[str, str]] = []
    for quote in quotes:
        said = decisions.words(quote.text)
        if said and any(len(said & words) >= summary.SAME * len(said) for words in told):
            left.append({"speaker": quote.speaker, "text": quote.text, "why": "a decision says it"})
        else:
            kept.append(quote)
    return kept, left


def _merge(
    base: Memory,
    written: Memory | None,
    output: _Output,
    confirmed: list[decisions.Change],
    new_quotes: list[Quote],
    window: int,
    messages: list[Message],
    removed: set[str],
    title: str = "",
    speakers: dict[int, str] | None = None,
) -> tuple[Memory, list[dict[str, str]], list[dict[str, str]]]:
    """The new memory, what of the model's answer was refused or left out (to log), and the
    new quotes left out because a decision it holds says them (`not_decisions`).

    `base` is the memory now, `written` what Charlie last wrote itself. The summary's
    sentences a person wrote stay (`charlie.memory.summary`). Every decision `base` holds
    stays unless a `confirmed` change supersedes it (`charlie.memory.decisions`); one the
    person deleted while the model thought (`removed`) is not added back. `speakers`: who
    said the messages the held decisions came from (a summary says who agreed only to what
    they agreed: `charlie.memory.summary`).
    """
    changed = decisions.apply(
        base.decisions,
        base.earlier,
        [decisions.Proposed(d.text, tuple(d.messages)) for d in output.decisions],
        confirmed,
        messages,
        removed,
    )
    people = [m for m in messages if m.role == "user"]
    said_by = {m.id: m.speaker for m in messages} | (speakers or {})
    backing = summary.Backing(
        " ".join(
            [
                title,
                base.summary,
                *(d.text for d in base.decisions),
                *(f"{m.speaker} {m.content}" for m in people),
            ]
        ),
        tuple(d.text for d in changed.decisions),
        tuple(
            frozenset(said_by[s].lower() for s in d.sources if s in said_by)
            for d in changed.decisions
        ),
        frozenset(v.lower() for v in said_by.values()),  # the batch's speakers among them
        tuple((m.speaker, m.content) for m in people),
        tuple(changed.moved),
    )
    text, charlies, left_out = summary.rewritten(output.summary, base.summary, written, backing)
    new_quotes, repeated = not_decisions(new_quotes, [d.text for d in changed.decisions])
    quotes: list[Quote] = []
    for quote in [*base.quotes, *new_quotes]:
        if all(normalise(q.text) != normalise(quote.text) for q in quotes):
            quotes.append(quote)
    merged = Memory(
        text,
        changed.decisions,
        quotes[-window:],
        base.preamble,
        base.extra,
        changed.earlier,
        charlie_sentences=charlies,
    )
    return merged, [*changed.refused, *left_out], repeated


def _record(
    home: Home,
    channel: Channel,
    window: list[Message],
    *,
    status: str,
    attempts: int,
    structured: bool,
    started: str,
    rejected: list[dict[str, str]] | None = None,
    refused: list[dict[str, str]] | None = None,
    error: str | None = None,
    revision_id: int | None = None,
) -> None:
    home.db.execute(
        "INSERT INTO distillations (conversation_id, owner_id, status, first_message_id, "
        "last_message_id, attempts, structured, rejected_quotes, refused_decisions, error, "
        "revision_id, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            channel.conversation_id,
            channel.owner.id if channel.owner else None,
            status,
            window[0].id,
            window[-1].id,
            attempts,
            int(structured),
            json.dumps(rejected or [], ensure_ascii=False),
            json.dumps(refused or [], ensure_ascii=False),
            error,
            revision_id,
            started,
            now(),
        ),
    )


def last_failure(home: Home, channel: Channel) -> str | None:
    """The error of the thread's last distillation, when it failed, with when (UTC)."""
    row = home.db.execute(
        "SELECT status, error, started_at FROM distillations WHERE conversation_id = ? "
        "ORDER BY id DESC LIMIT 1",
        (channel.conversation_id,),
    ).fetchone()
    if row is None or row["status"] != "failed":
        return None
    return f"{row['error']} (at {str(row['started_at'])[:16].replace('T', ' ')} UTC)"


@dataclass(frozen=True)
class Refusals:
    """What one distillation recorded refusing or leaving out: the quotes it rejected and
    the decisions it refused, each entry as it was recorded (naming its message)."""

    id: int
    quotes: list[JSON]
    decisions: list[JSON]


def refusals_in(home: Home, threads: Sequence[int]) -> list[Refusals]:
    """The records of the threads' distillations that refused or left out anything."""
    rows = home.db.execute(
        "SELECT id, rejected_quotes, refused_decisions FROM distillations WHERE conversation_id "
        f"IN ({placeholders(threads)}) AND (rejected_quotes <> '[]' OR refused_decisions <> '[]')",
        list(threads),
    ).fetchall()
    return [
        Refusals(int(r["id"]), json.loads(r["rejected_quotes"]), json.loads(r["refused_decisions"]))
        for r in rows
    ]


def rewrite_refusals(home: Home, refusals: Refusals) -> None:
    """Keep `refusals` as what its distillation refused (forgetting a message drops the
    entries about it)."""
    home.db.execute(
        "UPDATE distillations SET rejected_quotes = ?, refused_decisions = ? WHERE id = ?",
        (
            json.dumps(refusals.quotes, ensure_ascii=False),
            json.dumps(refusals.decisions, ensure_ascii=False),
            refusals.id,
        ),
    )


def errors_in(home: Home, threads: Sequence[int]) -> list[tuple[int, str]]:
    """(id, error) of each of the threads' distillations that failed with an error."""
    rows = home.db.execute(
        "SELECT id, error FROM distillations WHERE conversation_id "
        f"IN ({placeholders(threads)}) AND error IS NOT NULL",
        list(threads),
    ).fetchall()
    return [(int(r["id"]), str(r["error"])) for r in rows]


def replace_error(home: Home, distillation_id: int, error: str) -> None:
    """Keep `error` as the failed distillation's error instead of the one recorded (which may
    quote a message since forgotten)."""
    home.db.execute("UPDATE distillations SET error = ? WHERE id = ?", (error, distillation_id))


def delete_distillations_in(db: Connection, threads: Sequence[int]) -> None:
    """Delete the records of the threads' distillations (a private channel removed)."""
    db.execute(
        f"DELETE FROM distillations WHERE conversation_id IN ({placeholders(threads)})",
        list(threads),
    )


def detach_distillations(db: Connection, user: User) -> None:
    """Leave the distillations of `user`'s channels tied to no account (they are being
    removed)."""
    db.execute("UPDATE distillations SET owner_id = NULL WHERE owner_id = ?", (user.id,))


CLAIM_SECONDS = 120  # a claim not renewed for this long was left by a crash: taken over
RENEW_SECONDS = 30  # how often a held claim is renewed (`_Renewals`)
HELD_MOST = 3600  # … for at most this long: a holder stuck longer lets its claim expire


@dataclass
class Unreleased:
    """Claims this process could not give back (a full disk): (conversation id, token)."""

    claims: set[tuple[int, str]] = field(default_factory=set)


@dataclass
class _Renewals:
    """The claims this process holds, each renewed by a thread of its own until released:
    a distillation may wait on a slow model far longer than `CLAIM_SECONDS`, and only a claim
    nobody renews (its process or machine gone) may be taken over. A renewal opens its own
    connection (the holder's is busy in its thread); one that fails is logged and tried again
    `RENEW_SECONDS` later."""

    stops: dict[str, threading.Event] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, settings: Settings, conversation_id: int, token: str) -> None:
        stop = threading.Event()
        with self.lock:
            self.stops[token] = stop
        threading.Thread(
            target=self._renew_until,
            args=(settings, conversation_id, token, stop),
            name=f"charlie-claim-{token[:12]}",
            daemon=True,
        ).start()

    def stop(self, token: str) -> None:
        with self.lock:
            stop = self.stops.pop(token, None)
        if stop is not None:
            stop.set()

    def _renew_until(
        self, settings: Settings, conversation_id: int, token: str, stop: threading.Event
    ) -> None:
        """Renew the claim every `RENEW_SECONDS` until `stop`. It ends by itself once the
        claim is no longer this one (released, or taken over after a stall), after
        `HELD_MOST` (a holder stuck that long lets the claim expire), or when renewing has
        failed for `CLAIM_SECONDS` (the claim has expired meanwhile; a home that is gone)."""
        started = failing_since = time.monotonic()
        try:
            while not stop.wait(RENEW_SECONDS) and time.monotonic() - started < HELD_MOST:
                try:
                    renewed = _renew(settings, conversation_id, token)
                except (sqlite3.Error, CharlieError, OSError) as exc:
                    if time.monotonic() - failing_since > CLAIM_SECONDS:
                        return
                    log.warning("A distillation claim could not be renewed (%s).", exc)
                    continue
                if not renewed:
                    return
                failing_since = time.monotonic()
        finally:
            self.stop(token)


def _renew(settings: Settings, conversation_id: int, token: str) -> bool:
    """Move the claim's time on, if it is still `token`'s; the store is opened as it is,
    never made (a home removed meanwhile stays removed)."""
    renew = "UPDATE conversations SET distill_claimed_at = ? WHERE id = ? AND distill_claim = ?"
    if settings.database_url:
        with closing(store.connect_postgres(settings.database_url)) as db:
            return db.execute(renew, (now(), conversation_id, token)).rowcount == 1
    uri = f"{settings.db_path.as_uri()}?mode=rw"
    with closing(sqlite3.connect(uri, uri=True, timeout=database.BUSY_TIMEOUT)) as lite, lite:
        return lite.execute(renew, (now(), conversation_id, token)).rowcount == 1


def _boot_id() -> str:
    """This machine's boot id (Linux), so a claim from before a reboot is known as dead."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""  # not Linux: a claim's process is checked by its id alone


def _process(pid: int) -> tuple[str, str] | None:
    """A process's state letter and start time (Linux `/proc`), or None when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0], fields[19]


def _holder() -> dict[str, str | int]:
    pid = os.getpid()
    process = _process(pid)
    return {
        "host": socket.gethostname(),
        "boot": _boot_id(),
        "pid": pid,
        "start": process[1] if process else "",
    }


def _holder_gone(claim_text: str) -> bool:
    """Whether the process that took a claim no longer runs (on this machine, since its
    boot). A claim from another machine, or in an older form, is never judged gone here."""
    try:
        holder = json.loads(claim_text.split(" ", 1)[1])
        host, boot, start = holder["host"], holder["boot"], holder["start"]
        pid = int(holder["pid"])
    except (IndexError, ValueError, KeyError, TypeError):
        return False  # a claim written before claims named their holder: expiry only
    if host != socket.gethostname():
        return False
    if boot and _boot_id() and boot != _boot_id():
        return True  # the machine restarted since
    if sys.platform == "win32":
        return False  # no safe way to probe a process id there: expiry only
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # it runs, as another account
    process = _process(pid)
    if process is None:
        return False
    state, started = process
    return state in ("Z", "X") or bool(start and started != start)  # dead, or the id reused


def claim(home: Home, channel: Channel) -> str | None:
    """Reserve the channel's distillation; None when another turn or process holds it.

    Two turns finishing together in a shared project would otherwise both fold the same
    messages in, and the later save would overwrite the earlier one. The claim names its
    holder, so one left by a process that was killed is taken over at once.
    """
    _release_left(home)
    token = f"{uuid.uuid4().hex} {json.dumps(_holder(), sort_keys=True)}"
    stale = (datetime.now(UTC) - timedelta(seconds=CLAIM_SECONDS)).isoformat()
    row = home.db.execute(
        "SELECT distill_claim, distill_claimed_at FROM conversations WHERE id = ?",
        (channel.memory_key,),
    ).fetchone()
    held = row["distill_claim"]
    if held is not None and row["distill_claimed_at"] >= stale and not _holder_gone(held):
        return None
    cursor = home.db.execute(
        "UPDATE conversations SET distill_claim = ?, distill_claimed_at = ? WHERE id = ? "
        "AND distill_claim IS ?",
        (token, now(), channel.memory_key, held),
    )
    if cursor.rowcount != 1:
        return None
    try:
        home.shared.of(_Renewals).start(home.settings, channel.memory_key, token)
    except BaseException:  # no thread to renew it (the process is out of them): not held
        home.shared.of(_Renewals).stop(token)
        _unclaim(home, channel.memory_key, token)
        raise
    return token


def release(home: Home, channel: Channel, token: str) -> None:
    """Give the claim back. When that write fails (a full disk), the claim is remembered and
    given back by this process's next `claim`, so distillation resumes once it can write."""
    home.shared.of(_Renewals).stop(token)  # one never given back expires
    try:
        _unclaim(home, channel.memory_key, token)
    except sqlite3.Error as exc:
        explained = database.explain(exc, home.settings.db_path)
        if explained is None:
            raise
        home.shared.of(Unreleased).claims.add((channel.memory_key, token))
        raise type(explained)(
            f"{explained} Distillation of {channel.label} resumes with your next message once "
            "there is room."
        ) from exc


def _unclaim(home: Home, conversation_id: int, token: str) -> None:
    home.db.execute(
        "UPDATE conversations SET distill_claim = NULL, distill_claimed_at = NULL "
        "WHERE id = ? AND distill_claim = ?",
        (conversation_id, token),
    )


def _release_left(home: Home) -> None:
    """Give back the claims this process could not release before (see `release`)."""
    left = home.shared.of(Unreleased).claims
    for conversation_id, token in list(left):
        try:
            _unclaim(home, conversation_id, token)
        except sqlite3.Error as exc:
            if database.explain(exc, home.settings.db_path) is None:
                raise
            return  # still no room: the claim waits for the next turn
        left.discard((conversation_id, token))


def quotes_window(home: Home, channel: Channel) -> int:
    configured = channel.project.config.quotes_window if channel.project else None
    return configured or home.settings.quotes_window


def nothing_new(channel: Channel) -> str:
    """What `charlie distill` and /distill say when every message is folded in already:
    nothing failed, so it is said plainly, not as an error."""
    return f"There are no new messages to distill in {channel.label}: its memory is up to date."


MERGE_TRIES = 3  # merges redone when the person saves memory.md at the very moment of writing


def distill(
    home: Home, channel: Channel, llm: LLMClient, window: list[Message] | None = None
) -> DistillResult:
    """Fold `window` (default: every undistilled message) into the channel's memory."""
    window = window if window is not None else conversations.undistilled(home, channel)
    if not window:
        raise DistillationError(nothing_new(channel))
    started = now()
    attempts, structured = 0, True

    def failed(exc: Exception) -> None:
        _record(
            home,
            channel,
            window,
            status="failed",
            attempts=max(attempts, 1),
            structured=structured,
            started=started,
            error=str(exc),
        )

    try:
        with _storage(home, channel):
            memory.sync_hand_edits(home, channel)
        seen = memory.load(home, channel)
        how, _ = method(home, channel, llm)
        earlier = _before(home, channel, window)
        if how == "steps":
            output, structured, attempts = _ask_steps(llm, seen, window, earlier)
        else:
            output, structured, attempts = _ask(llm, _prompt(seen, window), seen, window)
        confirmed, not_changed = decisions.changes(
            seen.decisions,
            [decisions.Proposed(d.text, tuple(d.messages)) for d in output.decisions],
            [decisions.Revision(r.decision, r.message) for r in output.superseded],
            window,
            steps.judge(steps.Asker(llm, structured)),
            earlier,
            _alike(home),
        )
    except (DistillationError, LLMError, MemoryFormatError) as exc:
        failed(exc)
        raise
    new_quotes, unverified = verify_quotes(output.quotes, window)
    rejected = unverified
    revision: memory.Revision | None = None
    before: str | None = None
    try:
        for tries_left in reversed(range(MERGE_TRIES)):
            try:
                with _storage(home, channel), memory.writing(home):
                    if conversations.distilled_upto(home, channel) >= window[0].id:
                        raise AlreadyDistilled(  # by a claim taken over, or a start-over
                            f"These messages of {channel.label} were folded into memory or "
                            "set aside meanwhile; this distillation changed nothing."
                        )
                    memory.sync_hand_edits(home, channel)  # an edit saved while the model thought
                    before = None if channel.private else memory.read_file_text(channel)
                    base = memory.load(home, channel)
                    written = memory.last_charlie_revision(home, channel)
                    alive = _still_there(home, window)  # a message forgotten meanwhile
                    removed = {memory.key(d) for d in seen.texts} - {
                        memory.key(d) for d in base.texts
                    }
                    merged, refused, repeated = _merge(
                        base,
                        written.memory if written else None,
                        output,
                        confirmed,
                        [q for q in new_quotes if _said_in(q, alive)],
                        quotes_window(home, channel),
                        alive,
                        removed,
                        channel.project.config.name if channel.project else "",
                        conversations.speakers_of(
                            home, channel, sorted({s for d in base.decisions for s in d.sources})
                        ),
                    )
                    refused = [*not_changed, *refused]
                    rejected = [*unverified, *repeated]  # this try's, should one more be made
                    revision = memory.save(home, channel, merged, "distill")
                    conversations.mark_distilled(home, channel, window[-1].id)
                    _record(
                        home,
                        channel,
                        window,
                        status="ok",
                        attempts=attempts,
                        structured=structured,
                        started=started,
                        rejected=rejected,
                        refused=refused,
                        revision_id=revision.id,
                    )
                break
            except memory.MemoryChanged:  # saved by hand just now: merge with that instead
                if not tries_left:
                    raise
    except MemoryFormatError as exc:
        failed(exc)
        raise
    except DatabaseError as exc:
        _put_back(channel, revision, before, exc)
        try:
            failed(exc)
        except sqlite3.Error as unrecorded:
            exc.add_note(f"The failed run could not be recorded either: {unrecorded}")
        raise
    except BaseException as exc:
        _put_back(channel, revision, before, exc)
        raise
    assert revision is not None  # the loop wrote it, or raised
    return DistillResult(
        revision.id,
        revision.memory,
        window[0].id,
        window[-1].id,
        rejected,
        structured,
        attempts,
        how,
    )


def _before(home: Home, channel: Channel, window: list[Message]) -> list[Message]:
    """The messages just before `window` (already distilled): the context a first message
    needs ("Outside, under the gazebo." answers a question asked before the batch began)."""
    shown = conversations.around(home, channel, window[0].id, 2 * steps.CONTEXT_MESSAGES, 0)
    earlier = [m for m in shown if m.id != window[0].id and not m.incomplete]
    return steps.context(earlier, len(earlier))  # Charlie's answers among them


def _still_there(home: Home, window: list[Message]) -> list[Message]:
    """The messages of `window` not forgotten since it was read."""
    there = conversations.still_stored(home, [m.id for m in window])
    return [m for m in window if m.id in there]


def _said_in(quote: Quote, messages: list[Message]) -> bool:
    return any(normalise(quote.text) in normalise(m.content) for m in messages)


def _put_back(
    channel: Channel, revision: memory.Revision | None, before: str | None, exc: BaseException
) -> None:
    """memory.md as it was before a distillation that failed after writing it, so the
    unrecorded text is never taken for the person's hand edit."""
    if revision is None:
        return
    try:
        memory.put_back(channel, revision.file_sha256, before)
    except OSError as unrestored:
        exc.add_note(
            f"memory.md could not be put back as it was ({unrestored}); the next distillation "
            "will take its text for a hand edit."
        )


@contextmanager
def _storage(home: Home, channel: Channel) -> Iterator[None]:
    """Turn a failure to write (a full disk, a read-only folder) into the `DatabaseError`
    that says so and what to do; the messages stay pending and nothing written is lost."""
    try:
        yield
    except sqlite3.Error as exc:
        explained = database.explain(exc, home.settings.db_path)
        if explained is None:
            raise
        raise _not_distilled(explained, channel) from exc
    except DatabaseError as exc:
        raise _not_distilled(exc, channel) from exc


def _not_distilled(exc: DatabaseError, channel: Channel) -> DatabaseError:
    return type(exc)(
        f"The memory of {channel.label} was not updated: {exc} Your messages are kept: once "
        "that is fixed they are folded in after your next message, or at once with /distill "
        "(`charlie distill`)."
    )
