"""The voice routes (docs/api.md, "Voice"): a spoken turn, transcription, speech, and the
live listening channel the PWA's hands-free mode streams microphone audio into.

Hands-free decides end-of-speech on the server, with the same detector and parameters that
trim uploads: the browser streams 16 kHz PCM over a WebSocket, the server answers when speech
starts and when the utterance is over, and the browser then sends that utterance as a normal
spoken turn. One detector, one set of parameters, whatever the browser.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import threading
from collections.abc import Iterator

import numpy as np
from fastapi import APIRouter, Request, WebSocket, WebSocketDisconnect
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import BaseModel, Field

from charlie.adapters.web import schemas
from charlie.adapters.web.chat import event_sse
from charlie.adapters.web.deps import (
    SESSION_COOKIE,
    EventStream,
    HomeDep,
    SessionDep,
    files,
    llm_of,
    sse,
    stream,
)
from charlie.adapters.web.shapes import channel_for
from charlie.chat import turn as chat
from charlie.conversations import Message
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.household import signin
from charlie.jsonvalue import JSONObject
from charlie.voice import audio as audio_io
from charlie.voice import turn as voice_turn
from charlie.voice import vad
from charlie.voice.turn import Heard, SpeechChunk, SpokenText, Voice

router = APIRouter()
MAX_LISTEN_SECONDS = 600  # a hands-free stream is closed after this long without a turn
WAV = "audio/wav"  # what /voice/say answers


def _voice(request: Request) -> Voice:
    return request.app.state.voice  # type: ignore[no-any-return]


def installed() -> str | None:
    """Why voice cannot work here, or None when the extra is installed."""
    missing = [m for m in ("faster_whisper", "av") if importlib.util.find_spec(m) is None]
    if missing:
        return "The voice extra is not installed: pip install 'charlie[voice]'."
    return None


def heard_out(heard: Heard) -> schemas.Heard:
    t = heard.transcript
    return schemas.Heard(
        text=t.text,
        language=t.language,
        seconds=round(t.seconds, 3),
        audio_seconds=round(t.audio_seconds, 3),
        speech_seconds=round(heard.speech_seconds, 3),
        vad_seconds=round(heard.vad_seconds, 3),
    )


def chunk_json(chunk: SpeechChunk) -> JSONObject:
    return {
        "index": chunk.index,
        "text": chunk.text,
        "engine": chunk.speech.engine,
        "skipped": list(chunk.speech.skipped),
        "seconds": round(chunk.speech.seconds, 3),
        "audio_seconds": round(chunk.speech.audio.seconds, 3),
        "wav": base64.b64encode(chunk.speech.audio.wav()).decode("ascii"),
    }


@router.get("/voice", response_model=schemas.VoiceStatus)
def voice_status(request: Request, session: SessionDep) -> schemas.VoiceStatus:
    """Whether voice works here, with what, and the hands-free parameters. `speech` says
    which engine will speak, which speaks offline, and how to get a better voice."""
    voice, settings = _voice(request), request.app.state.settings
    problem = installed()
    survey = voice.speaker.survey()  # loads the speech engines (once), never speaks
    if problem is None:  # the app asks this after sign-in: load the models meanwhile
        threading.Thread(target=voice.warm, name="charlie-voice-warm", daemon=True).start()
    return schemas.VoiceStatus(
        available=problem is None,
        problem=problem,
        stt_model=settings.voice_stt_model,
        tts=voice.speaker.status(),
        speech=dataclasses.asdict(survey),
        rate=audio_io.RATE,
        silence_ms=voice.params.silence_ms,
        max_seconds=voice.params.max_seconds,
        threshold=voice.params.threshold,
        spoken_sentences=settings.voice_spoken_sentences,
    )


async def _recording(request: Request) -> audio_io.Audio:
    body = await request.body()
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind in ("audio/l16", "audio/pcm"):
        return audio_io.pcm16(body, int(request.query_params.get("rate", audio_io.RATE)))
    return await run_in_threadpool(audio_io.read, body)


@router.post("/channels/{channel}/voice", response_class=EventStream)
async def voice_chat(
    channel: str, request: Request, session: SessionDep, home: HomeDep, thread: int | None = None
) -> EventStream:
    """A spoken turn: the body is the recording (WAV, WebM, Ogg, MP3, or raw 16-bit PCM with
    `Content-Type: audio/L16`). Answers a stream of events like the text chat, plus `heard`,
    `spoken` and `audio` (one per sentence, base64 WAV). `thread` as for the text chat."""
    found = channel_for(home, channel, session.user, thread)  # refused early
    voice, llm = _voice(request), llm_of(request)
    recording = await _recording(request)
    heard = await run_in_threadpool(voice.hear, recording)  # no speech → 400 before streaming
    user = session.user
    stored: list[Message] = []  # what was heard, once `store` has run

    def store() -> None:  # before the 200, as the text chat does
        stored.append(chat.accept(home, found, user, heard.transcript.text))

    def answer(own: Home) -> Iterator[str]:
        target = channel_for(own, channel, user, found.conversation_id)
        for event in voice_turn.answer(own, llm, target, user, heard, voice, asked=stored[0]):
            yield _voice_event(event, target.conversation_id)

    return stream(
        request, user, answer, first=[sse("heard", heard_out(heard).model_dump())], before=store
    )


def _voice_event(event: chat.Event | voice_turn.VoiceEvent, thread: int) -> str:
    if isinstance(event, Heard):
        return sse("heard", heard_out(event).model_dump())
    if isinstance(event, SpokenText):
        return sse("spoken", {"text": event.text})
    if isinstance(event, SpeechChunk):
        return sse("audio", chunk_json(event))
    return event_sse(event, thread)


@router.post("/voice/transcribe", response_model=schemas.Heard)
async def transcribe(request: Request, session: SessionDep) -> schemas.Heard:
    """Dictation: the recording's words, nothing stored."""
    voice = _voice(request)
    recording = await _recording(request)
    heard = await run_in_threadpool(voice.hear, recording)
    return heard_out(heard)


class SayRequest(BaseModel):
    text: str = Field(min_length=1, max_length=5_000)
    spoken: bool = False  # apply the speakable pass (markdown → a few sentences) first


@router.post("/voice/say", response_class=Response, responses=files(WAV))
def say(body: SayRequest, request: Request, session: SessionDep) -> Response:
    """Speech for some text, as WAV; the engine that spoke is in `X-Charlie-Voice-Engine`."""
    said = _voice(request).say(body.text, spoken=body.spoken)
    return Response(
        said.audio.wav(),
        media_type=WAV,
        headers={"X-Charlie-Voice-Engine": said.engine, "Cache-Control": "no-store"},
    )


def _signed_in(websocket: WebSocket) -> bool:
    """The session cookie names a live session, and the page is our own origin."""
    origin = websocket.headers.get("origin")
    host = websocket.headers.get("host", "")
    if origin is not None and origin.split("://", 1)[-1] != host:
        return False  # another site's page must not open a channel with our cookies
    token = websocket.cookies.get(SESSION_COOKIE)
    if not token:
        return False
    with Home.open(websocket.app.state.settings, shared=websocket.app.state.shared) as home:
        return signin.lookup(home.db, token) is not None


@router.websocket("/voice/listen")
async def listen(websocket: WebSocket) -> None:
    """Hands-free listening: binary messages of 16-bit 16 kHz mono PCM in; JSON out —
    `ready` (the parameters), `speech` (speech began at `at` seconds into the stream) and
    `utterance` (`start`/`end` seconds; `cut` when the length limit ended it). Send the
    text message `reset` to start a new stream (e.g. after Charlie has answered)."""
    if not _signed_in(websocket):
        await websocket.close(code=4401, reason="Sign in first.")
        return
    voice: Voice = websocket.app.state.voice
    await websocket.accept()
    try:
        endpointer = await run_in_threadpool(voice.endpointer)
    except CharlieError as exc:
        await websocket.send_json({"event": "error", "error": str(exc)})
        await websocket.close(code=1011)
        return
    await websocket.send_json(
        {
            "event": "ready",
            "rate": audio_io.RATE,
            "silence_ms": voice.params.silence_ms,
            "max_seconds": voice.params.max_seconds,
        }
    )
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") == "reset":
                endpointer = vad.Endpointer(endpointer.model, voice.params)
                await websocket.send_json({"event": "reset"})
                continue
            data = message.get("bytes")
            if not data or len(data) % 2:
                await websocket.send_json(
                    {"event": "error", "error": "Send 16-bit PCM samples as binary messages."}
                )
                continue
            samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
            # The detector's work (about 1 ms per 32 ms frame) runs off the event loop, so
            # many listeners do not slow every other request.
            for event in await run_in_threadpool(endpointer.feed, samples):
                if isinstance(event, vad.SpeechStarted):
                    await websocket.send_json({"event": "speech", "at": event.at})
                else:
                    await websocket.send_json(
                        {
                            "event": "utterance",
                            "start": event.start,
                            "end": event.end,
                            "cut": event.cut,
                        }
                    )
            if endpointer.seconds > MAX_LISTEN_SECONDS and not endpointer.in_speech:
                endpointer = vad.Endpointer(endpointer.model, voice.params)
                await websocket.send_json({"event": "reset"})
    except WebSocketDisconnect:
        return
