"""A Discord message in, Charlie's answer out: who is speaking, which channel of Charlie's
that is, and one `chat.turn` turned into the text of Discord messages. A voice message (or
another audio attachment) is heard first, and its transcript is the message.

Synchronous and free of discord.py (the bot runs it in a worker thread), so the mapping,
the privacy rules and the answers are tested with plain data and the real core.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

from charlie.adapters.discord.text import split, trace_block
from charlie.chat import turn as chat
from charlie.conversations import Channel
from charlie.db import explain_storage
from charlie.errors import AudioError, CharlieError, LLMError, VoiceUnavailable
from charlie.home import Home
from charlie.household import discord_links as links
from charlie.household import discord_places
from charlie.household.discord_places import NOT_BOUND, Place, channel_for
from charlie.llm.client import LLMClient
from charlie.retrieval.suggestions import Suggestion
from charlie.trace import Step
from charlie.users import User
from charlie.voice import audio
from charlie.voice.turn import Voice

NOT_LINKED = (
    "Hi! I don't know who you are in this household yet, so I can't share anyone's projects "
    "or memory with you. Ask someone who runs Charlie to link you "
    "(`charlie users link-discord NAME {discord_id}`), or, if you have an account, open the "
    "app, get a code under Settings → Link Discord and send `/charlie link CODE` here."
)
LLM_DOWN = "⚠️ Charlie's language model could not answer. {error}"
NO_WORDS = (
    "I couldn't make out any words in that voice message — try again closer to the microphone."
)
TOO_BIG = (
    "That recording is too big for me ({size:.1f} MB): I listen to voice messages and audio "
    "files of up to {limit} MB. A shorter one works, or type it."
)
CANNOT_LISTEN = "⚠️ I can't listen to voice messages here: {error}"

MAX_RECORDING_BYTES = 10 * 1024 * 1024  # a minute of a Discord voice message is ~100 kB
RECORDING_SUFFIXES = (".ogg", ".oga", ".opus", ".mp3", ".wav", ".m4a", ".webm", ".flac")
HEARD_CHARS = 300  # the "heard" line shows this much of the transcript; all of it is stored


class NotLinked(CharlieError):
    """The Discord user is not linked to a member of the household."""


class Refused(Exception):
    """Charlie will not take this message: `answer` says why, or is None when the message
    was not for Charlie at all."""

    def __init__(self, answer: Answer | None) -> None:
        super().__init__(answer.parts[0] if answer and answer.parts else "not for Charlie")
        self.answer = answer


@dataclass(frozen=True)
class Recording:
    """An audio attachment (a voice message, say) to hear, as plain data."""

    filename: str
    size: int  # bytes, as Discord announces it
    content_type: str | None = None
    voice_message: bool = False  # recorded with Discord's voice-message button


@dataclass(frozen=True)
class Incoming:
    """A message written to the bot, as plain data: its text, or a recording to hear."""

    author_id: int
    place: Place
    text: str
    mentions_me: bool = False  # the bot was @mentioned
    recording: Recording | None = None  # set only when there is no text


@dataclass
class Answer:
    """What to send back: message parts in order, then one message per suggested note."""

    parts: list[str]
    suggestions: list[Suggestion] = field(default_factory=list)
    user: User | None = None  # who was answered, when they are linked


def is_recording(filename: str, content_type: str | None, voice_message: bool = False) -> bool:
    """Whether an attachment is something to listen to: a voice message, an `audio/*` type,
    or a file named like a recording."""
    kind = (content_type or "").split(";")[0].strip().lower()
    named = filename.lower().endswith(RECORDING_SUFFIXES)
    return voice_message or kind.startswith("audio/") or named


def caller(home: Home, discord_id: int) -> User:
    """The household member behind a Discord user, or `NotLinked` (polite, says how)."""
    user = links.user_for_discord(home.db, discord_id)
    if user is None:
        raise NotLinked(NOT_LINKED.format(discord_id=discord_id))
    return user


def without_mention(text: str, bot_id: int) -> str:
    """The message without the @mention of the bot that addressed it."""
    for mention in (f"<@{bot_id}>", f"<@!{bot_id}>"):
        text = text.replace(mention, "")
    return text.strip()


def addressed(home: Home, incoming: Incoming) -> bool:
    """Whether Charlie should answer: a DM, a bound channel, or a mention of the bot."""
    place = incoming.place
    return place.is_dm or incoming.mentions_me or discord_places.bound_slug(home, place) is not None


def admit(home: Home, incoming: Incoming) -> tuple[User, Channel]:
    """Who is speaking, and in which of Charlie's channels; otherwise `Refused`.

    Checked before anything else happens, and before a recording is downloaded: a stranger
    or an unbound channel is refused with nothing stored, and so is a recording too big to
    hear.
    """
    place = incoming.place
    if not addressed(home, incoming):
        raise Refused(None)
    if not place.is_dm and discord_places.bound_slug(home, place) is None:
        raise Refused(Answer([NOT_BOUND]))
    try:
        user = caller(home, incoming.author_id)
    except NotLinked as exc:
        raise Refused(Answer([str(exc)])) from exc  # nothing is stored for a stranger
    try:
        channel = channel_for(home, place, user)
    except CharlieError as exc:  # the bound project was removed, say
        raise Refused(Answer([f"⚠️ {exc}"], user=user)) from exc
    if incoming.recording is not None:
        _refuse_if_too_big(incoming.recording.size, user)
    return user, channel


def answer(home: Home, llm: LLMClient, incoming: Incoming) -> Answer | None:
    """Charlie's answer to a message, or None when the message is not for Charlie (a server
    channel with no project, where nobody mentioned the bot)."""
    try:
        user, channel = admit(home, incoming)
    except Refused as exc:
        return exc.answer
    return _turn(home, llm, channel, user, incoming.text)


def answer_recording(
    home: Home, llm: LLMClient, voice: Voice, incoming: Incoming, data: bytes
) -> Answer | None:
    """Charlie's answer to a recording (the downloaded attachment): decoded, trimmed to its
    speech and transcribed, then the same turn as a typed message with the transcript as
    its text, under a line showing what was heard. Nothing is stored until words are heard.
    """
    try:
        user, channel = admit(home, incoming)
        _refuse_if_too_big(len(data), user)
    except Refused as exc:
        return exc.answer
    try:
        recording = audio.read(data)
    except VoiceUnavailable as exc:
        return Answer([CANNOT_LISTEN.format(error=exc)], user=user)
    except AudioError as exc:  # not audio, or too long
        return Answer([f"⚠️ {exc}"], user=user)
    try:
        heard = voice.hear(recording)
    except VoiceUnavailable as exc:
        return Answer([CANNOT_LISTEN.format(error=exc)], user=user)
    except AudioError:  # no speech in it, or no words made out
        return Answer([NO_WORDS], user=user)
    text = heard.transcript.text.strip()
    return _turn(home, llm, channel, user, text, heard=heard_line(text))


def heard_line(transcript: str) -> str:
    """The small grey line above the answer to a recording: what Charlie heard."""
    words = " ".join(transcript.split())
    if len(words) > HEARD_CHARS:
        words = words[: HEARD_CHARS - 1].rstrip() + "…"
    return f"-# 🎙️ heard: “{_escaped(words)}”"


def _escaped(text: str) -> str:
    """Text shown as it is, not as Discord markdown."""
    return re.sub(r"([\\*_~`|])", r"\\\1", text)


def _refuse_if_too_big(size: int, user: User) -> None:
    if size > MAX_RECORDING_BYTES:
        limit = MAX_RECORDING_BYTES // (1024 * 1024)
        raise Refused(Answer([TOO_BIG.format(size=size / 1024 / 1024, limit=limit)], user=user))


def _turn(
    home: Home, llm: LLMClient, channel: Channel, user: User, text: str, *, heard: str = ""
) -> Answer:
    trace: list[Step] = []
    reply = ""
    notes: list[str] = []
    offered: list[Suggestion] = []
    try:
        for event in chat.turn(home, llm, channel, user, text):
            if isinstance(event, chat.Token):
                reply += event.text
            elif isinstance(event, chat.TraceEvent):
                trace.append(event.step)
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
        return Answer(split(_joined(heard, LLM_DOWN.format(error=exc))), user=user)
    except CharlieError as exc:
        return Answer(split(_joined(heard, f"⚠️ {exc}")), user=user)
    except (sqlite3.Error, OSError) as exc:
        explained = explain_storage(exc, home.settings.db_path)
        if explained is None:
            raise
        return Answer(split(_joined(heard, f"⚠️ {explained}")), user=user)
    blocks = [heard, trace_block(trace), reply.strip(), "\n".join(notes)]
    return Answer(split(_joined(*blocks)), offered, user)


def _joined(*blocks: str) -> str:
    return "\n".join(b for b in blocks if b)


def suggestion_text(suggestion: Suggestion) -> str:
    why = suggestion.why if len(suggestion.why) <= 200 else suggestion.why[:199] + "…"
    return (
        f"📎 Related note: **{suggestion.title}** (`{suggestion.note}`)\n-# {why}\n"
        "-# React ✅ to pin it into this conversation, ❌ to dismiss it."
    )
