"""Chatting: messages, recall in a conversation, the answer streamed (docs/api.md)."""

from __future__ import annotations

import base64
import binascii
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, assert_never

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from charlie import conversations, trace
from charlie.adapters.web import schemas
from charlie.adapters.web.deps import (
    EventStream,
    HomeDep,
    SessionDep,
    llm_of,
    sse,
    stream,
)
from charlie.adapters.web.shapes import channel_for, memory_json, message_json
from charlie.chat import turn as chat
from charlie.conversations import Channel, Message, recent
from charlie.errors import CharlieError, NotFound
from charlie.home import Home
from charlie.retrieval.recall import RecallHit, conversations_for, recaller_for

router = APIRouter()

MAX_IMAGES = 4
MAX_AROUND = 50  # messages either side of one shown with `messages?around=ID`


class ChatRequest(BaseModel):
    text: str = Field(max_length=20_000)
    images: list[str] = Field(default_factory=list, max_length=MAX_IMAGES)


def _save_images(images: list[str], folder: Path) -> list[Path]:
    """Data URLs → temporary files for this one request (images are not kept)."""
    paths = []
    for number, url in enumerate(images):
        header, _, payload = url.partition(",")
        kinds = {
            "image/png": ".png",
            "image/jpeg": ".jpg",
            "image/webp": ".webp",
            "image/gif": ".gif",
        }
        kind = header.removeprefix("data:").removesuffix(";base64")
        if kind not in kinds or not header.endswith(";base64"):
            raise CharlieError("Images must be PNG, JPEG, WebP or GIF data URLs.")
        try:
            data = base64.b64decode(payload, validate=True)
        except binascii.Error as exc:
            raise CharlieError(f"Image {number + 1} is not valid base64.") from exc
        path = folder / f"image-{number}{kinds[kind]}"
        path.write_bytes(data)
        paths.append(path)
    return paths


@router.get("/channels/{channel}/messages", response_model=list[schemas.MessageOut])
def messages(
    channel: str,
    session: SessionDep,
    home: HomeDep,
    limit: int = 50,
    around: int | None = None,
    before: int = 5,
    after: int = 5,
    thread: int | None = None,
) -> list[schemas.MessageOut]:
    """The last `limit` messages of the thread; or, with `around=ID`, that message of this
    channel with `before` messages before it and `after` after it (404 when this channel has
    no such message — the same answer whether or not it exists elsewhere). Without `thread`,
    `around` finds the message in whichever of the channel's threads holds it."""
    found = channel_for(home, channel, session.user, thread)
    if around is None:
        return shown_out(home, found, recent(home, found, max(1, min(limit, 500))))
    if thread is None:
        found = conversations.thread_holding(home, found, around) or found
    shown = conversations.around(
        home, found, around, clamp(before, 0, MAX_AROUND), clamp(after, 0, MAX_AROUND)
    )
    if not shown:
        raise NotFound(f"There is no message {around} in this conversation.")
    return shown_out(home, found, shown)


def shown_out(home: Home, channel: Channel, shown: list[Message]) -> list[schemas.MessageOut]:
    """Messages as the conversation shows them: each with its thread, and, where it has
    alternatives (regenerated replies, edited versions), their ids and its place among them."""
    others = conversations.alternatives(home, channel, shown)
    return [
        schemas.MessageOut.model_validate(
            message_json(m) | {"thread": channel.conversation_id, "alternatives": others.get(m.id)}
        )
        for m in shown
    ]


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


def saved_event(message: Message, thread: int) -> schemas.SavedEvent:
    """The data of a stream's `saved` event: the person's message as stored (its id, its
    thread), checked against `schemas.SavedEvent`."""
    data = {"message": message_json(message) | {"thread": thread}}
    return schemas.SavedEvent.model_validate(data)


def said_out(message: Message) -> schemas.SaidOut:
    """A message as recall shows it (the shape `charlie recall --json` prints)."""
    return schemas.SaidOut(
        message_id=message.id,
        speaker=message.speaker,
        role=message.role,
        time=message.created_at,
        text=message.content,
    )


def recall_hit_out(hit: RecallHit) -> schemas.RecallHitOut:
    return schemas.RecallHitOut(
        **said_out(hit.message).model_dump(),
        source_id=hit.message.source_id,
        thread=hit.conversation_id,
        score=round(hit.score, 6),
        channel=hit.channel,
        project=hit.project,
        in_time=hit.in_time,
        why=hit.why(),
        around=[said_out(m) for m in hit.around],
    )


@router.get("/channels/{channel}/recall", response_model=schemas.RecallOut)
def recall(
    channel: str,
    session: SessionDep,
    home: HomeDep,
    q: str,
    limit: int = 10,
    around: int = 1,
    everywhere: Annotated[bool, Query(alias="all")] = False,
) -> schemas.RecallOut:
    """What was said in this channel (and, with `all`, in every shared project) that best
    answers `q`, each hit with its neighbours. Which conversations may be read is decided by
    `charlie.retrieval.recall.conversations_for`, never here."""
    found = channel_for(home, channel, session.user)
    channels = conversations_for(home, session.user, found, everywhere=everywhere)
    result = recaller_for(home).recall(
        session.user, channels, q, limit=clamp(limit, 1, 50), around=clamp(around, 0, 5)
    )
    return schemas.RecallOut(
        query=result.query,
        when=result.when.describe() if result.when is not None else None,
        terms=result.terms,
        searched=result.searched,
        truncated=result.truncated,
        incomplete=result.incomplete,
        results=[recall_hit_out(h) for h in result.hits],
    )


@router.post("/channels/{channel}/chat", response_class=EventStream)
def chat_stream(
    channel: str,
    body: ChatRequest,
    request: Request,
    session: SessionDep,
    home: HomeDep,
    thread: int | None = None,
) -> EventStream:
    found = channel_for(home, channel, session.user, thread)  # refused before streaming
    if not body.text.strip() and not body.images:
        raise CharlieError("The message is empty: type something to send.")
    llm, user = llm_of(request), session.user
    # a folder only for a message with images: one a killed process leaves behind is empty
    # for every other message
    folder = tempfile.TemporaryDirectory(prefix="charlie-upload-") if body.images else None
    try:
        images = _save_images(body.images, Path(folder.name)) if folder else []
    except CharlieError:  # bad images refused up front
        if folder:
            folder.cleanup()
        raise

    stored: list[Message] = []  # the person's message, once `store` has run

    def store() -> None:  # before the 200: a message answered 200 is never lost
        stored.append(chat.accept(home, found, user, body.text, images))

    def answer(own: Home) -> Iterator[str]:
        target = channel_for(own, channel, user, found.conversation_id)
        for event in chat.reply_to(own, llm, target, user, stored[0], images):
            yield event_sse(event, target.conversation_id)

    return stream(request, user, answer, cleanup=folder.cleanup if folder else None, before=store)


def event_sse(event: chat.Event, thread: int) -> str:
    """One chat event of thread `thread` as a server-sent event (the voice routes send the
    same ones)."""
    if isinstance(event, chat.Saved):
        return sse("saved", saved_event(event.message, thread).model_dump())
    if isinstance(event, chat.Token):
        return sse("token", {"text": event.text})
    if isinstance(event, chat.TraceEvent):
        return sse("trace", trace.to_json(event.step))
    if isinstance(event, chat.Notice):
        return sse("notice", {"text": event.text})
    if isinstance(event, chat.Reply):
        return sse("reply", {"message": message_json(event.message)})
    if isinstance(event, chat.Suggested):
        return sse("suggestions", {"suggestions": [asdict(s) for s in event.suggestions]})
    if isinstance(event, chat.Distilled):
        return sse(
            "distilled",
            {"revision_id": event.result.revision_id, "memory": memory_json(event.result.memory)},
        )
    assert_never(event)  # mypy: a new kind of event needs its server-sent event here
