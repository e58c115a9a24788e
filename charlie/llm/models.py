"""The built-in model: which GGUF file the built-in runtime loads, the checks a file passes
before Charlie records it, and what is known of it (size, memory, measured speed).

Models live in the model folder (CHARLIE_MODEL_DIR, by default the user's cache:
`${XDG_CACHE_HOME:-~/.cache}/charlie/models`), never in the data home, so a backup of the
data home does not carry a gigabyte of model. The folder holds:

    chosen.json                              the file `charlie model use PATH` chose
    speeds.json                              speeds measured per model file
    qwen2.5-coder-1.5b-instruct.gguf         the starter model, once installed (starter.py)
    qwen2.5-coder-1.5b-instruct.gguf.sha256-ok   its check

Which file is loaded (`chosen`): CHARLIE_LLM_MODEL_FILE, else the file `charlie model use`
recorded, else the starter model when installed, else none.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from charlie.config import Settings
from charlie.errors import ModelMissing, ModelRefused
from charlie.files import write_atomic
from charlie.llm import starter
from charlie.llm.gguf import Header, read_header
from charlie.llm.starter import size_text

CHOSEN = "chosen.json"
SPEEDS = "speeds.json"
PLANNED_CONTEXT = 8192  # the window the memory estimate plans for
WORK_SPACE = 320 * 1024 * 1024  # llama.cpp's compute buffers and the runtime, about
TIGHT = 0.8  # a model needing more than this share of all the memory is "tight"

Source = Literal["setting", "chosen", "starter"]
SOURCE_WORDS: dict[Source, str] = {
    "setting": "CHARLIE_LLM_MODEL_FILE",
    "chosen": "`charlie model use`",
    "starter": "the starter model (`charlie model install`)",
}


# ---------------------------------------------------------------- which file


@dataclass(frozen=True)
class Chosen:
    path: Path
    source: Source


def choice(settings: Settings) -> Chosen | None:
    """The model file the built-in runtime loads, and why that one; None when there is
    none. A chosen file that is gone is `ModelMissing`, never passed over for another."""
    if settings.llm_model_file is not None:
        return Chosen(_present(settings.llm_model_file, "CHARLIE_LLM_MODEL_FILE"), "setting")
    own = recorded(settings)
    if own is not None:
        return Chosen(_present(own, "`charlie model use`"), "chosen")
    installed = starter.installed(settings, starter.STARTER)
    return Chosen(installed, "starter") if installed else None


def chosen(settings: Settings) -> Path | None:
    """The GGUF file the built-in runtime loads (see `choice`)."""
    found = choice(settings)
    return found.path if found else None


def _present(path: Path, by: str) -> Path:
    if not path.is_file():
        raise ModelMissing(
            f"The model file chosen with {by} is not there: {path}. Choose one with `charlie "
            "model use PATH`, or `charlie model use --starter` for the starter model."
        )
    return path


def recorded(settings: Settings) -> Path | None:
    """The file `charlie model use` chose, if one was."""
    record = settings.model_dir / CHOSEN
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelMissing(
            f"{record} is damaged ({exc}): choose the model again with `charlie model use "
            "PATH` (or `charlie model use --starter`)."
        ) from None
    path = data.get("path") if isinstance(data, dict) else None
    if not isinstance(path, str) or not path:
        raise ModelMissing(
            f"{record} names no model file: choose one again with `charlie model use PATH`."
        )
    return Path(path)


def use(settings: Settings, path: Path, memory: Memory | None = None) -> Checked:
    """Check `path` (`check`) and record it as the built-in runtime's model."""
    checked = check(path, memory)
    record = {"path": str(checked.path), "chosen": datetime.now(UTC).isoformat(timespec="seconds")}
    settings.model_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(settings.model_dir / CHOSEN, json.dumps(record, indent=2) + "\n")
    return checked


def use_starter(settings: Settings) -> bool:
    """Forget the file `charlie model use` chose: the starter model is used again. Whether
    a choice was recorded."""
    try:
        (settings.model_dir / CHOSEN).unlink()
    except FileNotFoundError:
        return False
    return True


# ---------------------------------------------------------------- memory


@dataclass(frozen=True)
class Memory:
    """This machine's memory in bytes: all of it, and what is free now (None: unknown)."""

    total: int | None
    available: int | None


def machine_memory() -> Memory:
    """Read from /proc/meminfo and the cgroup's limit where there is one (Linux, containers),
    else the physical pages (macOS and other POSIX systems, without what is free)."""
    total = available = None
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            fields = dict(line.split(":", 1) for line in info if ":" in line)
        total = int(fields["MemTotal"].split()[0]) * 1024
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        try:
            total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            total = None
    limit = _cgroup_limit()
    if limit is not None:
        total = min(total, limit) if total else limit
        used = _read_int(Path("/sys/fs/cgroup/memory.current"))
        if used is not None:
            left = max(limit - used, 0)
            available = min(available, left) if available is not None else left
    return Memory(total, available)


def _cgroup_limit() -> int | None:
    return _read_int(Path("/sys/fs/cgroup/memory.max"))  # "max": no limit → None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


@dataclass(frozen=True)
class Need:
    """The memory a model needs to run: its weights, its context (the KV cache) and the
    runtime's work space. `measured` is False when the context's share is a guess (a file
    whose metadata does not say its shape, or a model not downloaded yet)."""

    weights: int
    context: int
    work: int
    measured: bool
    window: int = PLANNED_CONTEXT  # the context's length in tokens

    @property
    def total(self) -> int:
        return self.weights + self.context + self.work

    def words(self) -> str:
        context = f"{'' if self.measured else 'about '}{size_text(self.context)}"
        return (
            f"{size_text(self.total)} of memory ({size_text(self.weights)} of weights, "
            f"{context} for the context ({self.window:,} tokens), {size_text(self.work)} "
            "to work in)"
        )


def memory_needed(size: int, header: Header | None = None, context: int = PLANNED_CONTEXT) -> Need:
    """What a model file of `size` bytes needs to run with a `context`-token window: the
    KV cache is 2 (keys, values) × layers × KV heads × head size × tokens × 2 bytes (f16),
    from the file's metadata; without it, a quarter of the weights (what it is for 1-8B
    models at 8k)."""
    shape = _kv_shape(header) if header else None
    if shape is None:
        return Need(size, size // 4, WORK_SPACE, measured=False)
    layers, kv_heads, head_size = shape
    window = min(context, (header.of_architecture("context_length") if header else None) or context)
    cache = 2 * layers * kv_heads * head_size * window * 2
    return Need(size, cache, WORK_SPACE, measured=True, window=window)


def _kv_shape(header: Header) -> tuple[int, int, int] | None:
    layers = header.of_architecture("block_count")
    heads = header.of_architecture("attention.head_count")
    kv_heads = header.of_architecture("attention.head_count_kv") or heads
    width = header.of_architecture("embedding_length")
    head_size = header.of_architecture("attention.key_length") or (
        width // heads if width and heads else None
    )
    if not (layers and kv_heads and head_size):
        return None
    return layers, kv_heads, head_size


def fit(need: Need, memory: Memory, what: str) -> str | None:
    """`ModelRefused` when `what` cannot run in this machine's memory; a warning when it
    fits only tightly; None when it fits (or the memory cannot be measured)."""
    if memory.total is not None and need.total > memory.total:
        raise ModelRefused(
            f"{what} needs about {need.words()}, and this machine has "
            f"{size_text(memory.total)} in all: it cannot run here. Choose a smaller model "
            "(a 1-3B model quantized to Q4_K_M needs 1-3 GB)."
        )
    if memory.available is not None and need.total > memory.available:
        return (
            f"{what} needs about {size_text(need.total)} of memory and "
            f"{size_text(memory.available)} is free now: close other programs, or it will "
            "answer slowly (or the system will stop it) while they run."
        )
    if memory.total is not None and need.total > TIGHT * memory.total:
        return (
            f"{what} needs about {size_text(need.total)} of this machine's "
            f"{size_text(memory.total)} of memory: little is left for anything else."
        )
    return None


# ---------------------------------------------------------------- checking a file


@dataclass(frozen=True)
class Checked:
    """A GGUF file that passed the checks, and what they found."""

    path: Path
    header: Header
    size: int
    need: Need
    warning: str | None

    @property
    def name(self) -> str:
        return model_name(self.header, self.path)

    @property
    def tools(self) -> bool:
        """Whether its chat template knows tool calls (Charlie drives tools itself when not)."""
        return "tools" in (self.header.chat_template or "")


def model_name(header: Header, path: Path) -> str:
    return header.text("general.name") or path.stem


def check(path: Path, memory: Memory | None = None) -> Checked:
    """Whether the built-in runtime can load `path`: a GGUF file (magic, version, a header
    that is whole), with a chat template in its metadata, that fits this machine's memory.
    `ModelRefused` says what is wrong."""
    path = path.expanduser().resolve()
    header = read_header(path)
    if header.chat_template is None:
        raise ModelRefused(
            f"{path} has no chat template in its metadata (tokenizer.chat_template): it is "
            "a base model, or was converted without one, and would not know where a "
            "message ends. Use the instruct (chat) GGUF of the model."
        )
    size = path.stat().st_size
    need = memory_needed(size, header)
    warning = fit(need, memory or machine_memory(), model_name(header, path))
    return Checked(path, header, size, need, warning)


# ---------------------------------------------------------------- measured speed


@dataclass(frozen=True)
class Speed:
    """Tokens a second a model made (generated) and read (prompt), measured on this
    machine, and when."""

    generated: float
    prompt: float
    measured: str  # ISO date and time

    def words(self) -> str:
        return (
            f"{self.generated:.1f} tokens/s generated, {self.prompt:.0f} tokens/s of prompt "
            f"read (measured {self.measured[:16].replace('T', ' ')})"
        )


def record_speed(settings: Settings, path: Path, generated: float, prompt: float) -> Speed:
    """Record a speed measured with the model file `path` (the runtime or `charlie doctor`
    measures it); `charlie model` shows it."""
    speed = Speed(generated, prompt, datetime.now(UTC).isoformat(timespec="seconds"))
    speeds = _speeds(settings)
    speeds[str(path)] = {
        "generated": generated,
        "prompt": prompt,
        "measured": speed.measured,
        "size": path.stat().st_size,
    }
    settings.model_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(settings.model_dir / SPEEDS, json.dumps(speeds, indent=2) + "\n")
    return speed


def measured_speed(settings: Settings, path: Path) -> Speed | None:
    """The speed recorded for `path`, unless the file changed size since."""
    found = _speeds(settings).get(str(path))
    if not isinstance(found, dict):
        return None
    try:
        if found.get("size") != path.stat().st_size:
            return None
        return Speed(float(found["generated"]), float(found["prompt"]), str(found["measured"]))
    except (OSError, KeyError, TypeError, ValueError):
        return None


def _speeds(settings: Settings) -> dict[str, object]:
    try:
        data = json.loads((settings.model_dir / SPEEDS).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, UnicodeDecodeError):
        return {}  # a damaged record of measurements: measured again, nothing else is lost
    return data if isinstance(data, dict) else {}


# ---------------------------------------------------------------- what `charlie model` says


@dataclass(frozen=True)
class Status:
    """The built-in model as `charlie model` and the app show it."""

    folder: Path
    chosen: Chosen | None
    name: str | None  # from the file's metadata
    size: int | None
    speed: Speed | None
    starter: starter.Starter
    downloaded_parts: int  # of a stopped starter download, kept for the next install


def status(settings: Settings) -> Status:
    """What is known of the built-in model; `ModelMissing` when the chosen file is gone,
    `ModelRefused` when it is no longer a GGUF file that can be read."""
    found = choice(settings)
    offered = starter.STARTER
    parts = starter.downloaded_parts(settings, offered)
    if found is None:
        return Status(settings.model_dir, None, None, None, None, offered, parts)
    header = read_header(found.path)
    return Status(
        settings.model_dir,
        found,
        model_name(header, found.path),
        found.path.stat().st_size,
        measured_speed(settings, found.path),
        offered,
        parts,
    )
