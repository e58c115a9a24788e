"""Charlie's own look-up before the model speaks (`charlie.chat.toolloop`, where the mode
calls for it): the best notes and earlier messages for the person's message, fenced as data,
each search with its trace step, made by Charlie (`by="charlie"`)."""

from __future__ import annotations

import time

from charlie import trace
from charlie.llm.fence import escape, fence
from charlie.llm.messages import ChatMessage
from charlie.notes import files as notes
from charlie.retrieval import recall, usage
from charlie.text import plural
from charlie.tools import builtin as toolkit
from charlie.tools.registry import ToolContext

NOTES = 3
MESSAGES = 3
MIN_SCORE = 0.3  # a weaker hit is left out: it costs tokens and misleads


def notes_for(context: ToolContext, text: str) -> tuple[str, trace.Called | None]:
    """The best notes for `text`, fenced as data, and the trace of the search (None: there
    are no notes to search)."""
    started = time.perf_counter()
    scope = toolkit.scope(context)
    if not any(notes.note_files(project) for project in scope):
        return "", None
    found = context.searcher().search(text, context.user, scope, limit=NOTES)
    hits = [h for h in found.hits if h.score >= MIN_SCORE]
    for hit in hits:
        context.found.append(hit.key)
        context.read_untrusted(f"note {hit.key}")
    block = "\n".join(fence("note", escape(h.snippet), id=h.key, title=h.title) for h in hits)
    step = trace.Called(
        "search_notes",
        {"query": text},
        True,
        f"{len(hits)} {plural(len(hits), 'note')}",
        _ms(started),
        hits=tuple(trace.Hit(h.key, h.title, round(h.score, 4), h.snippet) for h in hits),
        count=len(hits),
        by="charlie",
    )
    return block, step


def messages_for(
    context: ToolContext, text: str, messages: list[ChatMessage]
) -> tuple[str, trace.Called | None]:
    """The best earlier messages for `text` that the request (`messages`) does not hold
    already, fenced as data, and the trace of the search (None: nothing is indexed yet, or
    nothing was found)."""
    started = time.perf_counter()
    recaller = context.recaller()
    channels = recall.conversations_for(context.home, context.user, context.channel)
    try:
        found = recaller.recall(context.user, channels, text, limit=MESSAGES + 4)
    except recall.RecallError:
        return "", None  # nothing indexed yet: the model can still search itself
    in_context = {str(m.get("content") or "") for m in messages}
    hits = [
        h
        for h in found.hits
        if h.score >= MIN_SCORE
        and h.message.id != context.asked
        and not any(h.message.content.strip() in shown for shown in in_context)
    ][:MESSAGES]
    if not hits and not found.hits:
        return "", None
    for hit in hits:
        key = usage.message_key(hit.message.id)
        if key not in context.cited:
            context.cited.append(key)
    lines = [
        f"[{toolkit.when(h.message.created_at)}] {h.message.speaker}: {h.message.content}"
        for h in hits
    ]
    block = fence("messages", escape("\n".join(lines))) if lines else ""
    step = trace.Called(
        "search_conversation",
        {"query": text},
        True,
        f"{len(hits)} {plural(len(hits), 'message')}",
        _ms(started),
        hits=tuple(
            trace.Hit(
                usage.message_key(h.message.id),
                f"{h.message.speaker}, {toolkit.when(h.message.created_at)}",
                h.score,
                h.message.content[:160],
            )
            for h in hits
        ),
        count=len(hits),
        by="charlie",
    )
    return block, step


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
