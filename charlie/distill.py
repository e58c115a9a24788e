"""Distillation: every N messages the model rewrites a channel's memory into three layers.

The model sees the current memory (hand edits included) and the new messages, and answers
with JSON: a summary, the decisions, and quotes lifted verbatim from the new messages.
The answer is checked before anything is written: quotes that are not verbatim are
rejected, malformed output gets one repair attempt, and if that fails the old memory
stays exactly as it was and the failure is recorded.

Hand edits win: when the person edited the memory since Charlie last wrote it, their
summary is kept as written for this round and every decision they added survives.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from charlie import conversations, memory
from charlie.conversations import Channel, Message
from charlie.db import now
from charlie.errors import DistillationError, LLMError, LLMRejected, MemoryFormatError
from charlie.home import Home
from charlie.llm import LLMClient, strip_think
from charlie.memory import Memory, Quote, normalise

PERSON_SOURCES = ("hand_edit", "edit")

SYSTEM_PROMPT = """\
You maintain the long-term memory of a conversation, kept in three layers:
1. summary: what this conversation/project is about, for someone arriving fresh. One or two
   short paragraphs. Update it with what the new messages add; keep what still holds.
2. decisions: everything agreed, chosen or constrained, one short sentence each. Keep every
   existing decision unless the new messages revise or cancel it; add new ones.
3. quotes: up to 3 meaningful lines from the NEW messages, copied character for character
   (a whole message or an exact part of one), with the speaker's name exactly as shown.
   Never paraphrase a quote. Skip small talk.
The current memory may have been edited by hand by the person: treat its content as true.
Answer with a JSON object only: {"summary": "...", "decisions": ["..."],
"quotes": [{"speaker": "...", "text": "..."}]}"""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "decisions": {"type": "array", "items": {"type": "string"}},
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
    "required": ["summary", "decisions", "quotes"],
    "additionalProperties": False,
}
RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "memory", "strict": True, "schema": SCHEMA},
}


class _QuoteOut(BaseModel):
    speaker: str = Field(max_length=200)
    text: str = Field(min_length=1, max_length=2000)


class _Output(BaseModel):
    summary: str = Field(min_length=1, max_length=8000)
    decisions: list[str] = Field(max_length=200)
    quotes: list[_QuoteOut] = Field(max_length=50)


@dataclass
class DistillResult:
    revision_id: int
    memory: Memory
    first_message_id: int
    last_message_id: int
    rejected_quotes: list[dict[str, str]] = field(default_factory=list)
    structured: bool = True
    attempts: int = 1


def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in `text`, tolerating reasoning blocks, fences and chatter."""
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
    raise DistillationError(f"no JSON object in the answer ({text[:120]!r})")


def _transcript(messages: list[Message]) -> str:
    return "\n".join(f"[{m.speaker}] {m.content}" for m in messages)


def _prompt(current: Memory, messages: list[Message]) -> list[dict[str, Any]]:
    layers = {
        "summary": current.summary,
        "decisions": current.decisions,
        "quotes": [{"speaker": q.speaker, "text": q.text} for q in current.quotes],
    }
    user = (
        "Current memory:\n"
        + json.dumps(layers, ensure_ascii=False, indent=1)
        + "\n\nNew messages, each as [speaker] text:\n"
        + _transcript(messages)
        + "\n\nReturn the updated memory as JSON."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _validate(raw: str) -> _Output:
    try:
        return _Output.model_validate(extract_json(raw))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise DistillationError(f"field '{where}': {err['msg']}") from exc


def _ask(llm: LLMClient, prompt: list[dict[str, Any]]) -> tuple[_Output, bool, int]:
    """The model's validated answer, whether `response_format` was used, and attempts made."""
    structured = True
    try:
        answer = llm.chat(prompt, response_format=RESPONSE_FORMAT, temperature=0.2)
    except LLMRejected:
        structured = False  # the server does not take response_format: plain prompting
        answer = llm.chat(prompt, temperature=0.2)
    try:
        return _validate(answer.content), structured, 1
    except DistillationError as first:
        repair = [
            *prompt,
            {"role": "assistant", "content": answer.content},
            {
                "role": "user",
                "content": f"That answer was not usable: {first}. Reply again with only the "
                "corrected JSON object with keys summary, decisions and quotes.",
            },
        ]
        kwargs: dict[str, Any] = {"response_format": RESPONSE_FORMAT} if structured else {}
        again = llm.chat(repair, temperature=0.2, **kwargs)
        try:
            return _validate(again.content), structured, 2
        except DistillationError as second:
            raise DistillationError(
                f"The model's distillation was not valid twice ({first}; then {second}). "
                "The memory was left as it was; it will be tried again after the next message."
            ) from second


def verify_quotes(
    quotes: list[_QuoteOut], messages: list[Message]
) -> tuple[list[Quote], list[dict[str, str]]]:
    """Keep quotes found verbatim in `messages` (attributed to who really said them)."""
    kept: list[Quote] = []
    rejected: list[dict[str, str]] = []
    for quote in quotes:
        text = normalise(quote.text).strip('"“” ')
        said = [m for m in messages if text and text in normalise(m.content)]
        if not said:
            rejected.append({"speaker": quote.speaker, "text": quote.text, "why": "not verbatim"})
            continue
        same = [m for m in said if m.speaker.lower() == quote.speaker.strip().lower()]
        kept.append(Quote((same or said)[0].speaker, text))
    return kept, rejected


def _merge(
    base: Memory,
    previous: Memory | None,
    output: _Output,
    new_quotes: list[Quote],
    window: int,
) -> Memory:
    """The new memory: the model's layers, with the person's hand edits winning."""
    hand_edited = previous is not None
    summary = output.summary.strip()
    if hand_edited and previous is not None and base.summary != previous.summary:
        summary = base.summary
    decisions: list[str] = []
    seen: set[str] = set()
    hand_added = (
        [d for d in base.decisions if d.lower() not in {p.lower() for p in previous.decisions}]
        if previous is not None
        else []
    )
    for decision in [*output.decisions, *hand_added]:
        text = normalise(decision)
        if text and text.lower() not in seen:
            seen.add(text.lower())
            decisions.append(text)
    quotes: list[Quote] = []
    for quote in [*base.quotes, *new_quotes]:
        if all(normalise(q.text) != normalise(quote.text) for q in quotes):
            quotes.append(quote)
    return Memory(summary, decisions, quotes[-window:], base.preamble, base.extra)


def _person_edit_base(home: Home, channel: Channel) -> Memory | None:
    """What Charlie last wrote, if the person has edited the memory since; else None."""
    newest = memory.last_revision(home, channel)
    if newest is None or newest.source not in PERSON_SOURCES:
        return None
    written = memory.last_charlie_revision(home, channel)
    return written.memory if written else Memory()


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
    error: str | None = None,
    revision_id: int | None = None,
) -> None:
    home.db.execute(
        "INSERT INTO distillations (conversation_id, owner_id, status, first_message_id, "
        "last_message_id, attempts, structured, rejected_quotes, error, revision_id, "
        "started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            channel.conversation_id,
            channel.owner.id if channel.owner else None,
            status,
            window[0].id,
            window[-1].id,
            attempts,
            int(structured),
            json.dumps(rejected or [], ensure_ascii=False),
            error,
            revision_id,
            started,
            now(),
        ),
    )


CLAIM_SECONDS = 600  # a claim older than this was left by a crash and may be taken over


def claim(home: Home, channel: Channel) -> str | None:
    """Reserve the channel's distillation; None when another turn or process holds it.

    Two turns finishing together in a shared project would otherwise both fold the same
    messages in, and the later save would overwrite the earlier one.
    """
    token = uuid.uuid4().hex
    stale = (datetime.now(UTC) - timedelta(seconds=CLAIM_SECONDS)).isoformat()
    cursor = home.db.execute(
        "UPDATE conversations SET distill_claim = ?, distill_claimed_at = ? WHERE id = ? "
        "AND (distill_claim IS NULL OR distill_claimed_at < ?)",
        (token, now(), channel.conversation_id, stale),
    )
    return token if cursor.rowcount == 1 else None


def release(home: Home, channel: Channel, token: str) -> None:
    home.db.execute(
        "UPDATE conversations SET distill_claim = NULL, distill_claimed_at = NULL "
        "WHERE id = ? AND distill_claim = ?",
        (channel.conversation_id, token),
    )


def quotes_window(home: Home, channel: Channel) -> int:
    configured = channel.project.config.quotes_window if channel.project else None
    return configured or home.settings.quotes_window


def distill(
    home: Home, channel: Channel, llm: LLMClient, window: list[Message] | None = None
) -> DistillResult:
    """Fold `window` (default: every undistilled message) into the channel's memory."""
    window = window if window is not None else conversations.undistilled(home, channel)
    if not window:
        raise DistillationError(f"There are no new messages to distill in {channel.label}.")
    started = now()
    attempts, structured = 0, True
    try:
        memory.sync_hand_edits(home, channel)
        base = memory.load(home, channel)
        previous = _person_edit_base(home, channel)
        output, structured, attempts = _ask(llm, _prompt(base, window))
    except (DistillationError, LLMError, MemoryFormatError) as exc:
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
        raise
    new_quotes, rejected = verify_quotes(output.quotes, window)
    merged = _merge(base, previous, output, new_quotes, quotes_window(home, channel))
    home.db.execute("BEGIN IMMEDIATE")
    try:
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
            revision_id=revision.id,
        )
    except BaseException:
        home.db.execute("ROLLBACK")
        raise
    home.db.execute("COMMIT")
    return DistillResult(
        revision.id, merged, window[0].id, window[-1].id, rejected, structured, attempts
    )
