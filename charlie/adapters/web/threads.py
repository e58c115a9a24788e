"""Threads: the many conversations of a project or of a private channel, and what a person
can do with a message — regenerate a reply, edit and resend, page through alternatives,
retry a turn that failed.

Every route takes the channel (a project's slug, or `private` for the caller's own) and a
thread id of that channel; a thread of another channel is a 404, whether or not it exists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from charlie import conversations
from charlie.adapters.web import schemas
from charlie.adapters.web.chat import event_sse, shown_out
from charlie.adapters.web.deps import EventStream, HomeDep, SessionDep, llm_of, stream
from charlie.adapters.web.shapes import channel_for
from charlie.chat import turn as chat
from charlie.conversations import Message
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.household import forget

router = APIRouter()
VIEWS = ("active", "archived", "trash")


def thread_out(thread: conversations.Thread) -> schemas.ThreadOut:
    return schemas.ThreadOut(**dataclasses.asdict(thread))


@router.get("/channels/{channel}/threads", response_model=list[schemas.ThreadOut])
def list_threads(
    channel: str, session: SessionDep, home: HomeDep, view: str = "active"
) -> list[schemas.ThreadOut]:
    """The channel's threads, most recently written first: `view` is active, archived or
    trash."""
    if view not in VIEWS:
        raise CharlieError(f"view must be one of {', '.join(VIEWS)}.")
    found = channel_for(home, channel, session.user)
    listed = conversations.threads(home, found, archived=view == "archived", trash=view == "trash")
    return [thread_out(t) for t in listed]


class NewThread(BaseModel):
    title: str | None = Field(None, max_length=500)


@router.post("/channels/{channel}/threads", status_code=201, response_model=schemas.ThreadOut)
def create_thread(
    channel: str, body: NewThread, session: SessionDep, home: HomeDep
) -> schemas.ThreadOut:
    """A new, empty thread (it feeds the same memory as the channel's other threads)."""
    made = conversations.new_thread(
        home, channel_for(home, channel, session.user), title=body.title
    )
    return thread_out(conversations.get_thread(home, made))


class ThreadChange(BaseModel):
    title: str | None = Field(None, max_length=500)
    archived: bool | None = None


@router.patch("/channels/{channel}/threads/{thread}", response_model=schemas.ThreadOut)
def change_thread(
    channel: str, thread: int, body: ThreadChange, session: SessionDep, home: HomeDep
) -> schemas.ThreadOut:
    """Rename a thread (the title is then never replaced), archive or unarchive it."""
    found = channel_for(home, channel, session.user, thread)
    if body.title is not None:
        conversations.rename_thread(home, found, body.title)
    if body.archived is not None:
        conversations.archive_thread(home, found, body.archived)
    return thread_out(conversations.get_thread(home, found))


@router.delete("/channels/{channel}/threads/{thread}", response_model=schemas.ThreadOut)
def trash_thread(
    channel: str, thread: int, session: SessionDep, home: HomeDep
) -> schemas.ThreadOut:
    """Into the trash: out of the list and of recall, kept whole until restored."""
    found = channel_for(home, channel, session.user, thread)
    conversations.trash_thread(home, found)
    return thread_out(conversations.get_thread(home, found))


@router.post("/channels/{channel}/threads/{thread}/restore", response_model=schemas.ThreadOut)
def restore_thread(
    channel: str, thread: int, session: SessionDep, home: HomeDep
) -> schemas.ThreadOut:
    found = conversations.restore_thread(home, channel_for(home, channel, session.user), thread)
    return thread_out(conversations.get_thread(home, found))


# ---------------------------------------------------------------- message actions


@router.post(
    "/channels/{channel}/threads/{thread}/messages/{message_id}/regenerate",
    response_class=EventStream,
)
def regenerate(
    channel: str,
    thread: int,
    message_id: int,
    request: Request,
    session: SessionDep,
    home: HomeDep,
) -> EventStream:
    """A new answer in place of reply `message_id` (the old one stays as an alternative); or,
    given the person's last message whose turn failed, its answer (retry)."""
    found = channel_for(home, channel, session.user, thread)
    chat.answerable(home, found, session.user, message_id)  # refused before streaming
    llm, user = llm_of(request), session.user

    def answer(own: Home) -> Iterator[str]:
        target = channel_for(own, channel, user, thread)
        for event in chat.answer_again(own, llm, target, user, message_id):
            yield event_sse(event, target.conversation_id)

    return stream(request, user, answer)


class Edit(BaseModel):
    text: str = Field(max_length=100_000)


@router.post(
    "/channels/{channel}/threads/{thread}/messages/{message_id}/edit",
    response_class=EventStream,
)
def edit(
    channel: str,
    thread: int,
    message_id: int,
    body: Edit,
    request: Request,
    session: SessionDep,
    home: HomeDep,
) -> EventStream:
    """Your message `message_id`, edited, sent again and answered. The old version and the
    turns after it stay as an alternative branch."""
    found = channel_for(home, channel, session.user, thread)
    llm, user = llm_of(request), session.user
    stored: list[Message] = []  # the new version, once `store` has run

    def store() -> None:  # refused, or stored, before the 200 (as a new message is)
        stored.append(chat.store_edit(home, found, user, message_id, body.text))

    def answer(own: Home) -> Iterator[str]:
        target = channel_for(own, channel, user, thread)
        for event in chat.reply_to(own, llm, target, user, stored[0]):
            yield event_sse(event, target.conversation_id)

    return stream(request, user, answer, before=store)


@router.post(
    "/channels/{channel}/threads/{thread}/messages/{message_id}/choose",
    response_model=list[schemas.MessageOut],
)
def choose(
    channel: str, thread: int, message_id: int, session: SessionDep, home: HomeDep, limit: int = 50
) -> list[schemas.MessageOut]:
    """Keep the branch through alternative `message_id`; the thread's messages as now shown."""
    found = channel_for(home, channel, session.user, thread)
    chat.choose(home, found, session.user, message_id)  # 409: it would set others' turns aside
    return shown_out(home, found, conversations.recent(home, found, max(1, min(limit, 500))))


# ---------------------------------------------------------------- forgetting


class ForgetBody(BaseModel):
    only: bool = False  # this message only, not Charlie's answer to it


def forgotten_out(done: forget.Forgotten) -> schemas.Forgotten:
    return schemas.Forgotten(**dataclasses.asdict(done))


@router.post(
    "/channels/{channel}/threads/{thread}/messages/{message_id}/forget",
    response_model=schemas.Forgotten,
)
def forget_message(
    channel: str, thread: int, message_id: int, body: ForgetBody, session: SessionDep, home: HomeDep
) -> schemas.Forgotten:
    """Forget a message for good (and, unless `only`, Charlie's answer to it): see
    `charlie.household.forget` for everywhere it goes from, and who may."""
    found = channel_for(home, channel, session.user, thread)
    return forgotten_out(forget.forget(home, found, session.user, message_id, only=body.only))


@router.post("/channels/{channel}/threads/{thread}/forget", response_model=schemas.Forgotten)
def forget_whole_thread(
    channel: str, thread: int, session: SessionDep, home: HomeDep
) -> schemas.Forgotten:
    """Forget every message of a thread for good (refused whole if one is someone else's)."""
    found = channel_for(home, channel, session.user, thread)
    return forgotten_out(forget.forget_thread(home, found, session.user))
