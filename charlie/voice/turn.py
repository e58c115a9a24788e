"""A spoken turn: recording → trimmed speech → transcript → the normal chat turn → a short
spoken reply, synthesised sentence by sentence.

The chat turn is the same one the PWA and the CLI use (tools, memory, distillation). Voice
adds an instruction asking for a spoken-length answer, and speaks the reply while it
streams: each sentence is synthesised as soon as it is complete (`speakable.Unfolding`), and
the rest once the reply is stored, all before distillation runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from charlie.chat import turn as chat
from charlie.config import Settings
from charlie.conversations import Channel, Message
from charlie.errors import AudioError, CharlieError, VoiceUnavailable
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.tools.registry import Registry
from charlie.users import User
from charlie.voice import speakable, vad
from charlie.voice.audio import Audio
from charlie.voice.stt import Transcriber, Transcript, WhisperTranscriber
from charlie.voice.tts import Speaker, Speech


@dataclass(frozen=True)
class Heard:
    """What the person said."""

    transcript: Transcript
    speech_seconds: float  # length of the trimmed speech
    vad_seconds: float  # time spent finding it


@dataclass(frozen=True)
class SpokenText:
    """The reply as spoken (the full reply is in the chat), once all its speech is sent: a
    front end knows the spoken answer is complete here, though the turn may go on (a
    distillation)."""

    text: str


@dataclass(frozen=True)
class SpeechChunk:
    """Audio for one sentence of the spoken reply."""

    index: int
    text: str
    speech: Speech


VoiceEvent = Heard | SpokenText | SpeechChunk

# Speech recognisers by `CHARLIE_VOICE_STT_ENGINE`. Another engine (Parakeet through
# onnx-asr, say) is one more entry: a class with `transcribe(audio) -> Transcript`.
TRANSCRIBERS: dict[str, Callable[[Settings], Transcriber]] = {
    "whisper": WhisperTranscriber.from_settings,
}


class Voice:
    """The voice parts of one process — recogniser, detector, speech engines — loaded on
    first use and shared by every turn."""

    def __init__(
        self,
        settings: Settings,
        *,
        transcriber: Transcriber | None = None,
        speaker: Speaker | None = None,
    ) -> None:
        self.settings = settings
        self.params = vad.Params.from_settings(settings)
        self._transcriber = transcriber
        self._speaker = speaker
        self._vad_session: Any = None
        self._lock = threading.Lock()  # the recogniser and the detector
        self._speaker_lock = threading.Lock()  # apart, so speech never waits for Whisper
        self._warming = threading.Event()

    @property
    def transcriber(self) -> Transcriber:
        with self._lock:
            if self._transcriber is None:
                engine = TRANSCRIBERS[self.settings.voice_stt_engine]
                self._transcriber = engine(self.settings)
            return self._transcriber

    @property
    def speaker(self) -> Speaker:
        with self._speaker_lock:
            if self._speaker is None:
                self._speaker = Speaker.from_settings(self.settings)
            return self._speaker

    def detector(self) -> vad.Silero:
        """A fresh detector state over the shared model."""
        with self._lock:
            if self._vad_session is None:
                self._vad_session = vad.load_session(vad.model_path())
            return vad.Silero(self._vad_session)

    def warm(self) -> None:
        """Load the detector, the recogniser and the first speech engine that loads, so the
        first spoken turn does not wait for them. A part that cannot load says why when it
        is used."""
        if self._warming.is_set():
            return
        self._warming.set()
        try:
            self.detector()
            self.transcriber  # noqa: B018 - the property loads the model
        except (VoiceUnavailable, AudioError):
            return
        self.speaker.load_first()

    def endpointer(self) -> vad.Endpointer:
        return vad.Endpointer(self.detector(), self.params)

    def hear(self, recording: Audio) -> Heard:
        """Trim the recording to its speech and transcribe it."""
        started = time.perf_counter()
        speech = vad.trim(self.detector(), recording, self.params)
        found = time.perf_counter() - started
        transcript = self.transcriber.transcribe(speech)
        if not transcript.text.strip():
            raise AudioError("No words could be made out: try again, closer to the microphone.")
        return Heard(transcript, speech.seconds, found)

    def say(self, text: str, *, spoken: bool = False) -> Speech:
        """`text` as one recording, synthesised sentence by sentence; `spoken` applies the
        speakable pass first. Names every engine that spoke and any skipped."""
        words = self.spoken(text) if spoken else text.strip()
        if not words:
            raise CharlieError("There is nothing to say: the text is empty.")
        parts = [self.speaker.speak(s) for s in speakable.sentences_of(words)]
        return Speech(
            Audio.joined([p.audio for p in parts], parts[0].audio.rate),
            ",".join(dict.fromkeys(p.engine for p in parts)),
            sum(p.seconds for p in parts),
            list(dict.fromkeys(reason for p in parts for reason in p.skipped)),
        )

    def spoken(self, reply: str) -> str:
        return speakable.speakable(
            reply, self.settings.voice_spoken_sentences, self.settings.voice_spoken_chars
        )


def turn(
    home: Home,
    llm: LLMClient,
    channel: Channel,
    user: User,
    recording: Audio,
    voice: Voice,
    *,
    registry: Registry | None = None,
) -> Iterator[chat.Event | VoiceEvent]:
    """Hear the recording and answer it aloud. Errors before the transcript (no speech, no
    model) store nothing; from the transcript on, this is the normal chat turn."""
    heard = voice.hear(recording)
    yield heard
    yield from answer(home, llm, channel, user, heard, voice, registry=registry)


def answer(
    home: Home,
    llm: LLMClient,
    channel: Channel,
    user: User,
    heard: Heard,
    voice: Voice,
    *,
    registry: Registry | None = None,
    asked: Message | None = None,
) -> Iterator[chat.Event | VoiceEvent]:
    """The chat turn for what was heard, spoken as it streams: each sentence of the reply is
    synthesised as soon as it is complete, and what is left once the reply is stored; then
    `SpokenText`, the whole of what was spoken. `asked`: the transcript, stored already
    (`chat.accept`: the web app stores it before its 200); else it is stored here first."""
    instruction = speakable.instruction(voice.settings.voice_spoken_sentences)
    speech = _Speech(voice)
    if asked is None:
        asked = chat.accept(home, channel, user, heard.transcript.text)
    for event in chat.reply_to(
        home, llm, channel, user, asked, registry=registry, instruction=instruction
    ):
        yield event
        if isinstance(event, chat.Token):
            yield from speech.say(speech.unfolding.add(event.text))
        elif isinstance(event, chat.Reply):
            spoken, rest = speech.unfolding.finish(event.message.content)
            yield from speech.say(rest)
            yield SpokenText(spoken)  # after the last sentence's audio: the answer is complete


class _Speech:
    """One reply's speech: sentences numbered in order; the first engine failure is told
    once and ends the speaking (the written reply goes on)."""

    def __init__(self, voice: Voice) -> None:
        self.voice = voice
        self.unfolding = speakable.Unfolding(
            voice.settings.voice_spoken_sentences, voice.settings.voice_spoken_chars
        )
        self.index = 0
        self.failed = False

    def say(self, sentences: list[str]) -> Iterator[chat.Event | VoiceEvent]:
        for sentence in sentences:
            if self.failed:
                return
            try:
                said = self.voice.speaker.speak(sentence)
            except VoiceUnavailable as exc:
                self.failed = True
                yield chat.Notice(f"{exc} The reply is in the chat.")
                return
            yield SpeechChunk(self.index, sentence, said)
            self.index += 1
