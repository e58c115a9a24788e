"""Voice messages (and other audio attachments) in Discord, heard and answered like typed ones.

The messages are discord.py's real `discord.Message` objects, built from gateway payloads with
an attachment; the bot downloads it through discord.py's `Attachment.read`, which asks the
HTTP client's `get_from_cdn`. `CdnDouble` (a test double) is the `DiscordHttpDouble` of
tests/test_discord_bot.py serving the recording for the attachment's URL, and recording every
download. The speech is made offline by Piper (tests/speech.py), encoded as Discord encodes
voice messages (Ogg Opus), and heard by the real recogniser (the packaged tiny.en); the core,
SQLite and the scripted LLM server on loopback are real.
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import discord
import numpy as np
import pytest
from llm_double import ScriptedLLMServer
from speech import placed, word_errors
from support.discord_double import (
    ALICE_ID,
    BOT,
    BOT_ID,
    DM_ALICE,
    DM_STRANGER,
    GUILD_ID,
    KITCHEN,
    LOBBY,
    MESSAGES,
    PEOPLE,
    STRANGER_ID,
    DiscordHttpDouble,
    Harness,
    ResponseDouble,
    bind_kitchen,
    message_payload,
    messages_in,
)

from charlie import conversations, projects
from charlie.adapters.discord import conversation
from charlie.adapters.discord.conversation import NO_WORDS
from charlie.conversations import private_channel
from charlie.home import Home
from charlie.household import discord_links as links
from charlie.users import ensure_user
from charlie.voice.audio import Audio

QUESTION = "We agreed to paint the hallway a pale shade of green."
VOICE_MESSAGE = 1 << 13  # the message flag Discord sets on voice messages
CDN = "https://cdn.discordapp.com/attachments/{channel}/{id}/{name}"


@pytest.fixture(autouse=True)
def offline_speech(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHARLIE_VOICE_TTS", "piper,espeak")


@pytest.fixture
def household(home: Home) -> Home:
    """alice, linked to her Discord account; a stranger who is not."""
    ensure_user(home.db, "alice")
    links.link_discord(home.db, "alice", ALICE_ID)
    return home


def ogg_opus(recording: Audio) -> bytes:
    """The recording as Discord's clients send a voice message: Ogg Opus at 48 kHz."""
    import av

    out = io.BytesIO()
    with av.open(out, "w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=48_000)
        stream.layout = "mono"
        samples = recording.resampled(48_000).samples.reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(samples, format="flt", layout="mono")
        frame.rate = 48_000
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return out.getvalue()


# ---------------------------------------------------------------- test doubles


class CdnDouble(DiscordHttpDouble):
    """Test double: `DiscordHttpDouble`, also serving attachments from Discord's CDN."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.files: dict[str, bytes | BaseException] = {}
        self.downloads: list[str] = []

    async def get_from_cdn(self, url: str) -> bytes:
        self.downloads.append(url)
        served = self.files[url]
        if isinstance(served, BaseException):
            raise served
        return served


class VoiceHarness(Harness):
    """The real bot, its REST client also serving the attachments it downloads."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.http = CdnDouble(loop)
        self.bot.http = self.http
        self.state.http = self.http
        self._attachment_ids = itertools.count(1100000000000000001)

    def with_recording(
        self,
        message: discord.Message,
        data: bytes,
        *,
        filename: str = "voice-message.ogg",
        content_type: str | None = "audio/ogg",
        voice_message: bool = True,
        size: int | None = None,
    ) -> discord.Message:
        """`message` again, as the gateway delivers it with `data` attached (a voice
        message: Discord's flag, duration and waveform) and served by the CDN double."""
        attachment_id = next(self._attachment_ids)
        url = CDN.format(channel=message.channel.id, id=attachment_id, name=filename)
        self.http.files[url] = data
        attachment: dict[str, Any] = {
            "id": str(attachment_id),
            "filename": filename,
            "size": len(data) if size is None else size,
            "url": url,
            "proxy_url": url.replace("cdn.discordapp.com", "media.discordapp.net"),
        }
        if content_type is not None:
            attachment["content_type"] = content_type
        payload = message_payload(
            message.id,
            message.channel.id,
            PEOPLE[message.author.id],
            message.content,
            mentions=[BOT] if any(u.id == BOT_ID for u in message.mentions) else [],
            guild_id=message.guild.id if message.guild else None,
        )
        payload["attachments"] = [attachment]
        if voice_message:
            attachment["duration_secs"] = 3.5
            attachment["waveform"] = base64.b64encode(bytes(range(0, 256, 4))).decode()
            attachment["flags"] = VOICE_MESSAGE
            payload["flags"] = VOICE_MESSAGE
        return discord.Message(state=self.state, channel=message.channel, data=payload)  # type: ignore[arg-type]


def play(scenario: Callable[[VoiceHarness], Awaitable[None]]) -> None:
    async def main() -> None:
        harness = VoiceHarness(asyncio.get_running_loop())
        try:
            await scenario(harness)
        finally:
            harness.llm.close()

    asyncio.run(main())


# ---------------------------------------------------------------- heard and answered


def test_a_voice_message_in_a_dm_is_heard_and_answered_in_the_private_channel(
    household: Home, llm: ScriptedLLMServer, charlie_home: Any
) -> None:
    llm.reply("Sage green, two coats.")
    recording = ogg_opus(placed(QUESTION).audio)
    lines: list[str] = []

    async def scenario(h: VoiceHarness) -> None:
        message = h.with_recording(h.dm(ALICE_ID, ""), recording)
        await h.bot.on_message(message)
        assert h.http.downloads == [message.attachments[0].url]
        kinds = [(r.method, r.path) for r in h.http.requests]
        # "typing…" (again every TYPING_EVERY seconds while a slow machine transcribes), then
        # the one answer
        typing = ("POST", "/channels/{channel_id}/typing")
        assert (
            kinds[0] == typing and set(kinds[1:-1]) <= {typing} and kinds[-1] == ("POST", MESSAGES)
        )
        (sent,) = h.http.texts(DM_ALICE)
        lines.extend(sent.split("\n"))
        assert lines[1] == "Sage green, two coats."
        voice = h.bot.voice
        await h.bot.on_message(h.with_recording(h.dm(ALICE_ID, ""), recording))
        assert h.bot.voice is voice  # made once, kept for the next recording

    llm.reply("Still sage green.")
    play(scenario)
    heard = lines[0]
    alice = ensure_user(household.db, "alice")
    stored = conversations.recent(household, private_channel(household, alice), 10)
    said = stored[0].content
    assert word_errors(QUESTION, said)[0] <= 1, said  # the recogniser's stated bound
    assert heard == f"-# 🎙️ heard: “{said}”"
    assert [(m.role, m.content) for m in stored[:2]] == [
        ("user", said),
        ("assistant", "Sage green, two coats."),
    ]
    assert all(private for _, _, private in messages_in(household))
    assert llm.requests[0]["messages"][-1] == {"role": "user", "content": said}
    assert list((charlie_home / "projects").iterdir()) == []  # private: no file written


def test_an_audio_file_in_a_bound_channel_is_heard_and_answered_as_a_reply(
    household: Home, llm: ScriptedLLMServer
) -> None:
    projects.create_project(household, "Kitchen")
    bind_kitchen(household, "kitchen")
    llm.reply("Sage green.")
    wav = placed(QUESTION).audio.wav()

    async def scenario(h: VoiceHarness) -> None:
        plain = h.said(KITCHEN, ALICE_ID, "")
        message = h.with_recording(
            plain, wav, filename="question.wav", content_type=None, voice_message=False
        )
        await h.bot.on_message(message)
        (sent,) = h.http.sent(KITCHEN)
        assert sent["content"].startswith("-# 🎙️ heard: “")
        assert sent["content"].endswith("\nSage green.")
        assert sent["message_reference"]["message_id"] == message.id

    play(scenario)
    channel = conversations.shared_channel(household, projects.get_project(household, "kitchen"))
    stored = conversations.recent(household, channel, 2)
    assert [m.speaker for m in stored] == ["alice", "Charlie"]
    assert word_errors(QUESTION, stored[0].content)[0] <= 1


def test_a_message_with_text_and_a_recording_is_its_text(
    household: Home, llm: ScriptedLLMServer
) -> None:
    llm.reply("Sure.")

    async def scenario(h: VoiceHarness) -> None:
        message = h.with_recording(h.dm(ALICE_ID, "Here's the plumber's message"), b"RIFF")
        await h.bot.on_message(message)
        assert h.http.downloads == []
        assert h.http.texts(DM_ALICE) == ["Sure."]

    play(scenario)
    assert [c for _, c, _ in messages_in(household)] == ["Here's the plumber's message", "Sure."]


# ---------------------------------------------------------------- refused, before any download


def test_a_strangers_voice_message_is_refused_without_being_downloaded(
    household: Home, llm: ScriptedLLMServer
) -> None:
    async def scenario(h: VoiceHarness) -> None:
        message = h.with_recording(h.dm(STRANGER_ID, ""), ogg_opus(placed(QUESTION).audio))
        await h.bot.on_message(message)
        assert h.http.downloads == []
        (text,) = h.http.texts(DM_STRANGER)
        assert text.startswith("Hi! I don't know who you are in this household")

    play(scenario)
    assert messages_in(household) == [] and llm.requests == []


def test_an_unbound_channel_ignores_a_voice_message_and_says_how_to_bind_when_mentioned(
    household: Home, llm: ScriptedLLMServer
) -> None:
    recording = Audio.silence(1.0).wav()

    async def scenario(h: VoiceHarness) -> None:
        await h.bot.on_message(h.with_recording(h.said(LOBBY, ALICE_ID, ""), recording))
        assert h.http.requests == [] and h.http.downloads == []  # not even typing
        mentioned = h.said(LOBBY, ALICE_ID, "", mention=True)
        assert mentioned.content == f"<@{BOT_ID}> "
        await h.bot.on_message(h.with_recording(mentioned, recording, voice_message=False))
        (text,) = h.http.texts(LOBBY)
        assert text.startswith("This channel isn't tied to a Charlie project yet.")
        assert h.http.downloads == []

    play(scenario)
    assert messages_in(household) == [] and llm.requests == []


def test_a_recording_over_the_size_limit_is_refused_politely(
    household: Home, llm: ScriptedLLMServer
) -> None:
    async def scenario(h: VoiceHarness) -> None:
        big = h.with_recording(h.dm(ALICE_ID, ""), b"", size=25 * 1024 * 1024)
        await h.bot.on_message(big)
        assert h.http.downloads == []
        assert h.http.texts(DM_ALICE) == [
            "That recording is too big for me (25.0 MB): I listen to voice messages and audio "
            "files of up to 10 MB. A shorter one works, or type it."
        ]

    play(scenario)
    assert messages_in(household) == [] and llm.requests == []


# ---------------------------------------------------------------- heard nothing, or cannot hear


def test_silence_gets_a_clear_answer_and_nothing_is_stored(
    household: Home, llm: ScriptedLLMServer
) -> None:
    async def scenario(h: VoiceHarness) -> None:
        await h.bot.on_message(h.with_recording(h.dm(ALICE_ID, ""), ogg_opus(Audio.silence(3.0))))
        assert len(h.http.downloads) == 1
        assert h.http.texts(DM_ALICE) == [NO_WORDS]
        assert NO_WORDS == (
            "I couldn't make out any words in that voice message — "
            "try again closer to the microphone."
        )

    play(scenario)
    assert messages_in(household) == [] and llm.requests == []


def test_a_recording_that_cannot_be_downloaded_says_so(
    household: Home, llm: ScriptedLLMServer
) -> None:
    async def scenario(h: VoiceHarness) -> None:
        message = h.with_recording(h.dm(ALICE_ID, ""), b"")
        gone = discord.NotFound(ResponseDouble(404), "asset not found")  # type: ignore[arg-type]
        h.http.files[message.attachments[0].url] = gone
        await h.bot.on_message(message)
        assert h.http.texts(DM_ALICE) == [
            "⚠️ I couldn't download that recording from Discord "
            "(404 Error (error code: 0): asset not found). Send it again?"
        ]

    play(scenario)
    assert messages_in(household) == [] and llm.requests == []


def test_an_unreadable_recording_says_why(household: Home, llm: ScriptedLLMServer) -> None:
    async def scenario(h: VoiceHarness) -> None:
        noise = np.random.default_rng(0).bytes(4096)
        await h.bot.on_message(h.with_recording(h.dm(ALICE_ID, ""), noise))
        (text,) = h.http.texts(DM_ALICE)
        assert text.startswith("⚠️ The recording could not be read as audio (")
        assert text.endswith("send WAV, WebM, Ogg, MP3 or M4A.")

    play(scenario)
    assert messages_in(household) == [] and llm.requests == []


def test_without_the_voice_extra_the_answer_says_what_to_install(
    household: Home, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # faster-whisper (which carries the voice detector's model) as if it were not installed.
    monkeypatch.setitem(sys.modules, "faster_whisper", None)
    monkeypatch.setitem(sys.modules, "faster_whisper.assets", None)

    async def scenario(h: VoiceHarness) -> None:
        wav = placed(QUESTION).audio.wav()
        await h.bot.on_message(h.with_recording(h.dm(ALICE_ID, ""), wav, filename="q.wav"))
        assert h.http.texts(DM_ALICE) == [
            "⚠️ I can't listen to voice messages here: "
            "Voice detection needs the voice extra: pip install 'charlie[voice]'."
        ]

    play(scenario)
    assert messages_in(household) == [] and llm.requests == []


# ---------------------------------------------------------------- as plain data


@pytest.mark.parametrize(
    ("filename", "content_type", "voice", "expected"),
    [
        ("voice-message.ogg", "audio/ogg", True, True),
        ("clip.bin", "audio/mpeg; codecs=mp3", False, True),
        ("Memo.M4A", None, False, True),
        ("take.webm", "video/webm", False, True),
        ("anything", None, True, True),
        ("photo.png", "image/png", False, False),
        ("notes.txt", "text/plain", False, False),
    ],
)
def test_what_counts_as_a_recording(
    filename: str, content_type: str | None, voice: bool, expected: bool
) -> None:
    assert conversation.is_recording(filename, content_type, voice) is expected


def test_the_heard_line_is_one_short_line_shown_as_said() -> None:
    assert conversation.heard_line("  What did we\ndecide?  ") == (
        "-# 🎙️ heard: “What did we decide?”"
    )
    assert conversation.heard_line("use *oak* not_pine") == (
        "-# 🎙️ heard: “use \\*oak\\* not\\_pine”"
    )
    long = conversation.heard_line("word " * 200)
    assert long.endswith("…”") and "\n" not in long and len(long) < 330


def test_a_dm_voice_message_and_a_server_one_resolve_like_text(household: Home) -> None:
    from charlie.household.discord_places import Place

    recording = conversation.Recording("v.ogg", 1000, "audio/ogg", voice_message=True)
    dm = conversation.Incoming(ALICE_ID, Place(DM_ALICE), "", recording=recording)
    user, channel = conversation.admit(household, dm)
    assert channel.private and channel.owner == user
    server = conversation.Incoming(ALICE_ID, Place(LOBBY, GUILD_ID), "", recording=recording)
    with pytest.raises(conversation.Refused) as refused:
        conversation.admit(household, server)
    assert refused.value.answer is None  # not for Charlie: nothing is said
