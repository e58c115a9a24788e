"""A Discord message in, Charlie's answer out: who is speaking, which channel of Charlie's
that is, and one `chat.turn` turned into the text of Discord messages.

Synchronous and free of discord.py (the bot runs it in a worker thread), so the mapping,
the privacy rules and the answers are tested with plain data and the real core.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from charlie import chat, links, projects
from charlie.adapters.discord import store
from charlie.adapters.discord.store import Place
from charlie.adapters.discord.text import split, trace_block
from charlie.conversations import Channel, private_channel, shared_channel
from charlie.errors import CharlieError, LLMError
from charlie.home import Home
from charlie.llm import LLMClient
from charlie.suggestions import Suggestion
from charlie.users import User

NOT_LINKED = (
    "Hi! I don't know who you are in this household yet, so I can't share anyone's projects "
    "or memory with you. Ask someone who runs Charlie to link you "
    "(`charlie users link-discord NAME {discord_id}`), or, if you have an account, open the "
    "app, get a code under Settings → Link Discord and send `/charlie link CODE` here."
)
NOT_BOUND = (
    "This channel isn't tied to a Charlie project yet. Bind it with "
    "`/charlie project bind NAME` (a project from `charlie projects`), or DM me to talk "
    "in your private channel."
)
LLM_DOWN = "⚠️ Charlie's language model could not answer. {error}"


class NotLinked(CharlieError):
    """The Discord user is not linked to a member of the household."""


class NotBound(CharlieError):
    """The server channel is not bound to a project."""


@dataclass(frozen=True)
class Incoming:
    """A message written to the bot, as plain data."""

    author_id: int
    place: Place
    text: str
    mentions_me: bool = False  # the bot was @mentioned


@dataclass
class Answer:
    """What to send back: message parts in order, then one message per suggested note."""

    parts: list[str]
    suggestions: list[Suggestion] = field(default_factory=list)
    user: User | None = None  # who was answered, when they are linked


def caller(home: Home, discord_id: int) -> User:
    """The household member behind a Discord user, or `NotLinked` (polite, says how)."""
    user = links.user_for_discord(home.db, discord_id)
    if user is None:
        raise NotLinked(NOT_LINKED.format(discord_id=discord_id))
    return user


def channel_for(home: Home, place: Place, user: User) -> Channel:
    """A DM is the speaker's own private channel; a server channel is its bound project.

    A DM never resolves to a project and a server channel never to a private channel, so a
    message in a server cannot reach anyone's private memory.
    """
    if place.is_dm:
        return private_channel(home, user)
    slug = store.bound_slug(home, place)
    if slug is None:
        raise NotBound(NOT_BOUND)
    return shared_channel(home, projects.get_project(home, slug))


def without_mention(text: str, bot_id: int) -> str:
    """The message without the @mention of the bot that addressed it."""
    for mention in (f"<@{bot_id}>", f"<@!{bot_id}>"):
        text = text.replace(mention, "")
    return text.strip()


def addressed(home: Home, incoming: Incoming) -> bool:
    """Whether Charlie should answer: a DM, a bound channel, or a mention of the bot."""
    place = incoming.place
    return place.is_dm or incoming.mentions_me or store.bound_slug(home, place) is not None


def answer(home: Home, llm: LLMClient, incoming: Incoming) -> Answer | None:
    """Charlie's answer to a message, or None when the message is not for Charlie (a server
    channel with no project, where nobody mentioned the bot)."""
    place = incoming.place
    if not addressed(home, incoming):
        return None
    if not place.is_dm and store.bound_slug(home, place) is None:
        return Answer([NOT_BOUND])
    try:
        user = caller(home, incoming.author_id)
    except NotLinked as exc:
        return Answer([str(exc)])  # nothing is stored for a stranger
    try:
        channel = channel_for(home, place, user)
    except CharlieError as exc:  # the bound project was removed, say
        return Answer([f"⚠️ {exc}"], user=user)
    return _turn(home, llm, channel, user, incoming.text)


def _turn(home: Home, llm: LLMClient, channel: Channel, user: User, text: str) -> Answer:
    trace: list[dict[str, Any]] = []
    reply = ""
    notes: list[str] = []
    offered: list[Suggestion] = []
    try:
        for event in chat.turn(home, llm, channel, user, text):
            if isinstance(event, chat.Token):
                reply += event.text
            elif isinstance(event, chat.TraceEvent):
                trace.append(event.event)
            elif isinstance(event, chat.Reply):
                reply = event.message.content
            elif isinstance(event, chat.Notice):
                notes.append(f"-# note: {event.text}")
            elif isinstance(event, chat.Suggested):
                offered = event.suggestions
            elif isinstance(event, chat.Distilled):
                m = event.result.memory
                notes.append(
                    f"-# 🧠 memory updated: {len(m.decisions)} decisions, {len(m.quotes)} quotes"
                )
    except LLMError as exc:
        # chat.turn stored the message before asking the model: it is not lost.
        return Answer(split(LLM_DOWN.format(error=exc)), user=user)
    except CharlieError as exc:
        return Answer(split(f"⚠️ {exc}"), user=user)
    blocks = [trace_block(trace), reply.strip(), "\n".join(notes)]
    return Answer(split("\n".join(b for b in blocks if b)), offered, user)


def suggestion_text(suggestion: Suggestion) -> str:
    why = suggestion.why if len(suggestion.why) <= 200 else suggestion.why[:199] + "…"
    return (
        f"📎 Related note: **{suggestion.title}** (`{suggestion.note}`)\n-# {why}\n"
        "-# React ✅ to pin it into this conversation, ❌ to dismiss it."
    )
