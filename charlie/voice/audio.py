"""Audio as Charlie handles it: mono float samples with their rate, read from and written to WAV.

Speech recognition and voice detection work at 16 kHz; speech engines answer at their own
rate. WAV (PCM 8/16/24/32-bit) is read with the standard library; anything else a browser or
phone records (WebM/Opus, Ogg, MP3, M4A, float WAV) is decoded with PyAV, which comes with
the `charlie[voice]` extra.
"""

from __future__ import annotations

import io
import struct
import wave
from dataclasses import dataclass

import numpy as np

from charlie.errors import AudioError, VoiceUnavailable

RATE = 16_000  # what the recogniser and the voice detector expect
MAX_SECONDS = 600.0  # an upload longer than this is refused, not decoded


@dataclass(frozen=True, eq=False)
class Audio:
    """Mono samples in [-1, 1] (float32) at `rate` Hz."""

    samples: np.ndarray
    rate: int

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.rate

    def resampled(self, rate: int = RATE) -> Audio:
        """The same sound at another rate (low-passed first when going down)."""
        if rate == self.rate or len(self.samples) == 0:
            return Audio(self.samples.astype(np.float32, copy=False), rate)
        samples = self.samples.astype(np.float64)
        if rate < self.rate:
            samples = np.convolve(samples, _low_pass(rate / self.rate), mode="same")
        count = round(len(samples) * rate / self.rate)
        positions = np.arange(count) * (self.rate / rate)
        out = np.interp(positions, np.arange(len(samples)), samples)
        return Audio(out.astype(np.float32), rate)

    def between(self, start: float, end: float) -> Audio:
        """The part from `start` to `end` seconds."""
        first, last = max(0, round(start * self.rate)), max(0, round(end * self.rate))
        return Audio(self.samples[first:last], self.rate)

    def wav(self) -> bytes:
        """16-bit PCM WAV bytes."""
        pcm = (np.clip(self.samples, -1.0, 1.0) * 32767).astype("<i2")
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(self.rate)
            out.writeframes(pcm.tobytes())
        return buffer.getvalue()

    @classmethod
    def silence(cls, seconds: float, rate: int = RATE) -> Audio:
        return cls(np.zeros(round(seconds * rate), dtype=np.float32), rate)

    @classmethod
    def joined(cls, parts: list[Audio], rate: int = RATE) -> Audio:
        if not parts:
            return cls.silence(0, rate)
        return cls(np.concatenate([p.resampled(rate).samples for p in parts]), rate)


def _low_pass(cutoff: float, taps: int = 63) -> np.ndarray:
    """A windowed-sinc low-pass filter; `cutoff` is a fraction of the Nyquist frequency."""
    n = np.arange(taps) - (taps - 1) / 2
    kernel = np.sinc(cutoff * n) * np.hamming(taps)
    scaled: np.ndarray = kernel / kernel.sum()
    return scaled


def pcm16(data: bytes, rate: int = RATE) -> Audio:
    """Raw little-endian 16-bit mono PCM (what the PWA streams) as audio."""
    if len(data) % 2:
        raise AudioError("Raw audio must be 16-bit samples: the byte count is odd.")
    samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    return Audio(samples, rate)


def read(data: bytes) -> Audio:
    """Any recording as audio: WAV directly, other formats through PyAV."""
    if not data:
        raise AudioError("The recording is empty: nothing was heard.")
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        try:
            return _read_wav(data)
        except (wave.Error, EOFError, ValueError, RuntimeError, struct.error):
            pass  # a float or damaged WAV, which the wave module cannot read; PyAV may
    return _decode(data)


def _read_wav(data: bytes) -> Audio:
    with wave.open(io.BytesIO(data), "rb") as source:
        channels, width, rate = source.getnchannels(), source.getsampwidth(), source.getframerate()
        if rate <= 0:
            raise ValueError("no sample rate")
        # Streamed WAV (espeak-ng --stdout, some recorders) declares a huge frame count:
        # trust the bytes actually present instead.
        frames = source.readframes(min(source.getnframes(), len(data)))
        if len(frames) / (width * channels) / rate > MAX_SECONDS:
            raise AudioError(f"The recording is longer than {MAX_SECONDS / 60:.0f} minutes.")
    if width == 1:
        samples = (np.frombuffer(frames, dtype=np.uint8).astype(np.float32) - 128) / 128
    elif width == 2:
        samples = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768
    elif width == 3:
        raw = np.frombuffer(frames, dtype=np.uint8).reshape(-1, 3)
        joined = raw[:, 0].astype(np.int32) | raw[:, 1] << 8 | raw[:, 2].astype(np.int32) << 16
        samples = (np.where(joined >= 1 << 23, joined - (1 << 24), joined) / (1 << 23)).astype(
            np.float32
        )
    elif width == 4:
        samples = np.frombuffer(frames, dtype="<i4").astype(np.float32) / 2**31
    else:
        raise ValueError(f"{width}-byte samples")
    if channels > 1:
        samples = samples[: len(samples) // channels * channels].reshape(-1, channels).mean(axis=1)
    return Audio(samples.astype(np.float32), rate)


def _decode(data: bytes) -> Audio:
    try:
        import av
    except ImportError as exc:
        raise VoiceUnavailable(
            "Only WAV recordings can be read without the voice extra: "
            "pip install 'charlie[voice]' to read WebM, Ogg, MP3 and others."
        ) from exc
    chunks: list[np.ndarray] = []
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise AudioError("The upload has no audio track.")
            resampler = av.AudioResampler(format="flt", layout="mono", rate=RATE)
            total = 0
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    chunk = out.to_ndarray().reshape(-1)
                    chunks.append(chunk)
                    total += len(chunk)
                if total > MAX_SECONDS * RATE:
                    raise AudioError(
                        f"The recording is longer than {MAX_SECONDS / 60:.0f} minutes."
                    )
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
    except av.error.FFmpegError as exc:
        raise AudioError(
            f"The recording could not be read as audio ({exc}); send WAV, WebM, Ogg, MP3 or M4A."
        ) from exc
    if not chunks:
        raise AudioError("The recording has no sound in it.")
    return Audio(np.concatenate(chunks).astype(np.float32), RATE)
