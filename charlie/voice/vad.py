"""Voice activity detection: where speech starts, and when the person has finished.

The detector is Silero VAD (the ONNX model that faster-whisper ships, verified by hash), run
frame by frame on 16 kHz audio with its recurrent state carried across frames, so a live
stream and a whole recording go through exactly the same code. An utterance ends after
`silence_ms` of non-speech following at least `min_speech_ms` of speech, or when it reaches
`max_seconds` — never on a fixed timer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from charlie.config import Settings
from charlie.errors import AudioError
from charlie.voice.audio import RATE, Audio
from charlie.voice.packaged import package_file

FRAME = 512  # samples per decision: 32 ms at 16 kHz
CONTEXT = 64  # samples of the previous frame the model sees with each frame
SILERO_SHA256 = "4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2"


def _frames(ms: float) -> int:
    """How many frames last `ms` milliseconds (at least one)."""
    return max(1, round(ms / 1000 * RATE / FRAME))


@dataclass(frozen=True)
class Params:
    """How utterances are cut; the PWA's hands-free mode and uploads share these."""

    threshold: float = 0.5
    silence_ms: int = 700
    min_speech_ms: int = 250
    max_seconds: float = 30.0
    pad_ms: int = 200  # kept either side of the speech when trimming

    @classmethod
    def from_settings(cls, settings: Settings) -> Params:
        return cls(
            threshold=settings.voice_vad_threshold,
            silence_ms=settings.voice_silence_ms,
            max_seconds=settings.voice_max_utterance_s,
        )


@dataclass(frozen=True)
class SpeechStarted:
    at: float  # seconds from the start of the stream


@dataclass(frozen=True)
class UtteranceEnded:
    start: float
    end: float  # where the speech stopped (the trailing silence is not included)
    cut: bool = False  # True when `max_seconds` ended it rather than silence


VadEvent = SpeechStarted | UtteranceEnded


def model_path() -> Path:
    """The Silero VAD model from faster-whisper's package data, checked against its hash."""
    return package_file(
        "faster_whisper.assets",
        "silero_vad_v6.onnx",
        SILERO_SHA256,
        "Silero VAD (faster-whisper==1.2.1)",
        "Voice detection needs the voice extra: pip install 'charlie[voice]'.",
    )


def load_session(path: Path | None = None) -> Any:
    """The ONNX session of the model; one per process is enough (it keeps no state)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.inter_op_num_threads = 1
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    return onnxruntime.InferenceSession(
        str(path or model_path()), providers=["CPUExecutionProvider"], sess_options=options
    )


class Silero:
    """Speech probability for each 32 ms frame, keeping one stream's state between calls."""

    def __init__(self, session: Any = None) -> None:
        self.session = session if session is not None else load_session()
        self.reset()

    def reset(self) -> None:
        self.h = np.zeros((1, 1, 128), dtype=np.float32)
        self.c = np.zeros((1, 1, 128), dtype=np.float32)
        self.context = np.zeros(CONTEXT, dtype=np.float32)

    def __call__(self, frame: np.ndarray) -> float:
        batch = np.concatenate([self.context, frame]).reshape(1, -1).astype(np.float32)
        out, self.h, self.c = self.session.run(None, {"input": batch, "h": self.h, "c": self.c})
        self.context = frame[-CONTEXT:]
        return float(np.asarray(out).reshape(-1)[0])


class Endpointer:
    """Feed it 16 kHz samples as they arrive; it says when speech starts and ends."""

    def __init__(self, model: Silero, params: Params | None = None) -> None:
        self.model, self.params = model, params or Params()
        self.model.reset()
        self.pending = np.zeros(0, dtype=np.float32)
        self.frames = 0  # frames decided so far
        self.candidate: int | None = None  # first frame of a run of speech not yet confirmed
        self.start: int | None = None  # first frame of the confirmed utterance
        self.last_voice = 0  # the last frame that was speech
        self.probabilities: list[float] = []

    @property
    def in_speech(self) -> bool:
        return self.start is not None

    @property
    def seconds(self) -> float:
        return self.frames * FRAME / RATE

    def feed(self, samples: np.ndarray) -> list[VadEvent]:
        self.pending = np.concatenate([self.pending, samples.astype(np.float32)])
        events: list[VadEvent] = []
        while len(self.pending) >= FRAME:
            frame, self.pending = self.pending[:FRAME], self.pending[FRAME:]
            event = self._decide(self.model(frame))
            if event is not None:
                events.append(event)
        return events

    def finish(self) -> list[VadEvent]:
        """The stream ended: close an utterance still open (after padding the last frame)."""
        events: list[VadEvent] = []
        if len(self.pending):
            events += self.feed(np.zeros(FRAME - len(self.pending), dtype=np.float32))
        if self.start is not None:
            events.append(UtteranceEnded(self._at(self.start), self._at(self.last_voice + 1)))
            self.start = None
        return events

    def _at(self, frame: int) -> float:
        return frame * FRAME / RATE

    def _decide(self, probability: float) -> VadEvent | None:
        p, index = self.params, self.frames
        self.frames += 1
        self.probabilities.append(probability)
        voiced = probability >= p.threshold
        weak = p.threshold - 0.15  # hysteresis: a dip to here is not yet silence
        if self.start is None:
            if self.candidate is None and not voiced:
                return None
            if self.candidate is not None and probability < weak:
                self.candidate = None
                return None
            if self.candidate is None:  # a soft onset belongs to the speech that follows
                self.candidate = index
                while (
                    self.candidate > 0
                    and index - self.candidate < 10
                    and self.probabilities[self.candidate - 1] >= weak
                ):
                    self.candidate -= 1
            self.last_voice = index
            if index - self.candidate + 1 >= _frames(p.min_speech_ms):
                self.start, self.candidate = self.candidate, None
                return SpeechStarted(self._at(self.start))
            return None
        if probability >= weak:
            self.last_voice = index
        start = self.start
        if index + 1 - start >= _frames(p.max_seconds * 1000):
            self.start = None
            return UtteranceEnded(self._at(start), self._at(index + 1), cut=True)
        if index - self.last_voice >= _frames(p.silence_ms):
            self.start = None
            return UtteranceEnded(self._at(start), self._at(self.last_voice + 1))
        return None


def utterances(model: Silero, audio: Audio, params: Params | None = None) -> list[UtteranceEnded]:
    """Every utterance in a recording, found exactly as a live stream would find them."""
    endpointer = Endpointer(model, params)
    found = endpointer.feed(audio.resampled(RATE).samples) + endpointer.finish()
    return [e for e in found if isinstance(e, UtteranceEnded)]


def trim(model: Silero, audio: Audio, params: Params | None = None) -> Audio:
    """The recording from just before the first speech to just after the last."""
    params = params or Params()
    found = utterances(model, audio, params)
    if not found:
        raise AudioError("No speech was heard in the recording: speak closer to the microphone.")
    pad = params.pad_ms / 1000
    return audio.resampled(RATE).between(found[0].start - pad, found[-1].end + pad)


def chunks(samples: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for offset in range(0, len(samples), size):
        yield samples[offset : offset + size]
