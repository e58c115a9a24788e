"""The built-in model runtime: llama.cpp's own OpenAI-compatible server, run on one GGUF
file through the `xllamacpp` wheel (the `charlie[local]` extra) in a process of its own.

One runtime per data home, shared by every Charlie process of it (serve, `chat -m`, the
Discord bot, voice): a process that needs it takes a *lease* and either finds the running
one or starts it, under a file lock, so two processes starting at once load one copy. The
runtime never outlives its users for long: it checks every `WATCH_SECONDS` whether any
lease's process still lives and exits once none has for its *keep-alive* (`CHARLIE_LLM_KEEP_ALIVE`,
so the next `charlie chat -m` finds it loaded, its prompt's start cached; a `kill -9` of its owner
is no different); with a keep-alive of 0 the last user to release its lease stops it at once.

Its files, in `<home>/runtime/`:

    runtime.json  the runtime that serves: pid, port, model, threads, context, load time
                  (written by the runtime itself once it listens)
    lock          held while a process finds, starts or stops the runtime
    leases/       one file per user, `<pid>-<id>`, holding the user's pid and start time
    runtime.log   llama.cpp's log of the runtime started last
    port          the port used last, tried first next time, so the URL stays the same

`python -m charlie.llm.runtime` is the runtime's own entry point (see `main`): it forks
the runtime away from the process that started it (so no one has to wait for it as a
child) and prints its pid.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from importlib.util import find_spec
from pathlib import Path
from types import FrameType

import httpx

from charlie import files, tls
from charlie.errors import ModelRuntimeError
from charlie.llm.machine import PROMPT_CACHE_MIB, Fit, available_memory, fit
from charlie.text import plural

log = logging.getLogger(__name__)

WATCH_SECONDS = 1.0  # how often the runtime looks for a living lease
LOAD_SECONDS = 600.0  # the longest a model may take to load before Charlie gives up
PROGRESS_SECONDS = 5.0  # how often a load still going is reported
STOP_SECONDS = 10.0  # how long a runtime asked to stop may take before it is killed
HEALTH_SECONDS = 5.0  # how long a running runtime may take to answer `GET /health`
GGUF_MAGIC = b"GGUF"


def installed() -> bool:
    """Whether the runtime's library (xllamacpp, the `charlie[local]` extra) is installed."""
    return find_spec("xllamacpp") is not None


# ------------------------------------------------------------------ processes


def _started(pid: int) -> str:
    """A process's start time (Linux: clock ticks since boot), "" when unknown: with the
    pid, it tells a process apart from a later one given the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        pass
    else:
        return stat[stat.rindex(")") + 2 :].split()[19]
    try:  # no /proc (macOS): what ps says of it
        found = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return " ".join(found.stdout.split())


def alive(pid: int, started: str = "") -> bool:
    """Whether process `pid` runs (not a zombie), and is the one that started at `started`
    when that is known."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it runs, as another account
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (macOS)
        return not started or _started(pid) in (started, "")
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return False
    return not started or fields[19] == started


# ------------------------------------------------------------------ the record


@dataclass(frozen=True)
class Runtime:
    """A running runtime, as it wrote itself into runtime.json."""

    pid: int
    port: int
    model: str
    threads: int
    context: int
    load_seconds: float
    started: str = ""  # the process's start time (`_started`)
    keep_alive: float = 0.0  # seconds it stays loaded once no Charlie uses it

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def describe(self) -> str:
        """ "qwen….gguf, 1 thread, context 8192" """
        threads = f"{self.threads} {plural(self.threads, 'thread')}"
        return f"{Path(self.model).name}, {threads}, context {self.context}"


class _Files:
    """The runtime's files in a data home."""

    def __init__(self, home: Path) -> None:
        self.dir = home / "runtime"
        self.record = self.dir / "runtime.json"
        self.lock = self.dir / "lock"
        self.leases = self.dir / "leases"
        self.log = self.dir / "runtime.log"
        self.port = self.dir / "port"

    def make(self) -> None:
        self.leases.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def locked(self, *, wait: bool = True) -> Iterator[bool]:
        """Hold the runtime's lock (across processes); yields False at once when another
        holds it and `wait` is false. A killed holder's lock ends with its process."""
        self.make()
        with files.locked(self.lock, wait=wait) as held:
            yield held

    def read(self) -> Runtime | None:
        try:
            data = json.loads(self.record.read_text(encoding="utf-8"))
            return Runtime(**data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            log.warning("Ignoring %s: it cannot be read (%s).", self.record, exc)
            return None

    def write(self, runtime: Runtime) -> None:
        tmp = self.record.with_name(f".{self.record.name}.{os.getpid()}")
        tmp.write_text(json.dumps(asdict(runtime)), encoding="utf-8")
        os.replace(tmp, self.record)

    def forget(self, pid: int) -> None:
        """Remove the record if it still names `pid`."""
        found = self.read()
        if found is not None and found.pid == pid:
            self.record.unlink(missing_ok=True)

    def living_leases(self, *, but: Path | None = None) -> list[Path]:
        """The leases whose process still runs (all but `but`); the others are removed."""
        living = []
        for lease in self.leases.glob("*"):
            if lease == but:
                continue
            try:
                holder = json.loads(lease.read_text(encoding="utf-8"))
                pid, started = int(holder["pid"]), str(holder.get("started", ""))
            except FileNotFoundError:
                continue  # released meanwhile
            except (OSError, ValueError, KeyError, TypeError):
                lease.unlink(missing_ok=True)  # half-written by a process killed mid-write
                continue
            if alive(pid, started):
                living.append(lease)
            else:
                lease.unlink(missing_ok=True)
        return living

    def new_lease(self, pid: int) -> Path:
        lease = self.leases / f"{pid}-{uuid.uuid4().hex[:12]}"
        lease.write_text(json.dumps({"pid": pid, "started": _started(pid)}), encoding="utf-8")
        return lease

    def log_tail(self, lines: int = 6) -> str:
        """The last error lines of the runtime's log (llama.cpp's `E` lines first)."""
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        errors = [line for line in text if " E " in line or "error" in line.lower()]
        chosen = (errors or text)[-lines:]
        return " / ".join(line.strip() for line in chosen)


# ------------------------------------------------------------------ leases


class Lease:
    """One user's hold on the runtime: while any lease's process lives, the runtime runs.
    `release` (also at `with`'s end) gives it back, stopping the runtime when it was the
    last."""

    def __init__(self, files: _Files, path: Path, runtime: Runtime):
        self._files = files
        self.path = path
        self.runtime = runtime
        atexit.register(self.release)  # a user that forgets to: given back at its exit

    @property
    def base_url(self) -> str:
        return self.runtime.base_url

    def release(self) -> None:
        """Give the lease back; the last one stops the runtime. Idempotent."""
        atexit.unregister(self.release)
        if not self.path.exists():
            return
        with self._files.locked():
            self.path.unlink(missing_ok=True)
            if self._files.living_leases():
                return
            running = self._files.read()
            if running is not None and running.keep_alive > 0:
                log.info(
                    "The built-in model stays loaded %s s for the next message (pid %s).",
                    f"{running.keep_alive:g}",
                    running.pid,
                )
            elif running is not None:
                _stop(running)
                self._files.forget(running.pid)
                log.info(
                    "Stopped the built-in model (pid %s): no Charlie uses it now.", running.pid
                )

    def lend(self, pid: int) -> None:
        """Hold the runtime for process `pid` too, until it ends: a process this one
        started to go on with its work (`charlie chat -m`'s distillation), so the runtime is
        not stopped, and loaded again, between this one's end and that one's start."""
        with self._files.locked():
            self._files.new_lease(pid)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def acquire(
    home: Path,
    model: Path,
    *,
    threads: int = 0,
    context: int = 0,
    keep_alive: float = 0.0,
    say: Callable[[str], None] = log.info,
) -> Lease:
    """A lease on the data home's runtime, running `model`: the one running already, else
    one started now (its progress told through `say`), which stays loaded `keep_alive`
    seconds once no Charlie uses it (a running one keeps the time it was started with).
    Raises `ModelRuntimeError` when the model cannot be loaded, saying why and what to do."""
    _check_model(model)
    files = _Files(home)
    try:
        files.make()
    except OSError as exc:
        raise ModelRuntimeError(
            f"The built-in runtime cannot keep its state in {files.dir} ({exc.strerror or exc})"
            ". Set CHARLIE_LOCAL_DIR to a folder this account may write, or leave it unset to "
            "use the data home."
        ) from exc
    with files.locked(wait=False) as held:
        if not held:
            say("Waiting for another Charlie process that is starting the built-in model …")
    with files.locked():
        lease = files.new_lease(os.getpid())
        try:
            running = _usable(files, model, lease, say)
            if running is not None:
                return Lease(files, lease, running)
            chosen = fit(model.stat().st_size, threads=threads, context=context)
            return Lease(files, lease, _start(files, model, chosen, keep_alive, say))
        except BaseException:
            lease.unlink(missing_ok=True)
            raise


def running(home: Path) -> Runtime | None:
    """The data home's runtime when one runs (for `charlie doctor`, `charlie model`)."""
    found = _Files(home).read()
    return found if found is not None and alive(found.pid, found.started) else None


def _check_model(model: Path) -> None:
    try:
        with model.open("rb") as handle:
            magic = handle.read(4)
    except FileNotFoundError as exc:
        raise ModelRuntimeError(
            f"The model file {model} does not exist. Choose a GGUF model file that does "
            "(`charlie model use PATH`, or CHARLIE_LLM_MODEL_FILE)."
        ) from exc
    except OSError as exc:
        raise ModelRuntimeError(f"Cannot read the model file {model}: {exc.strerror}.") from exc
    if magic != GGUF_MAGIC:
        raise ModelRuntimeError(
            f"{model} is not a GGUF model file (it does not begin with 'GGUF'), so the "
            "built-in runtime cannot load it. Choose a .gguf file (`charlie model use PATH`, "
            "or CHARLIE_LLM_MODEL_FILE), or run it in a model server and set "
            "CHARLIE_LLM_BASE_URL."
        )


def _usable(files: _Files, model: Path, lease: Path, say: Callable[[str], None]) -> Runtime | None:
    """The runtime that runs now, if it can be used (called under the lock); a dead,
    silent or other-model one with no other user is stopped."""
    found = files.read()
    if found is None:
        return None
    if not alive(found.pid, found.started):
        files.forget(found.pid)
        return None
    others = files.living_leases(but=lease)
    if Path(found.model) != model.resolve() and not others:
        say(f"Stopping the built-in model {Path(found.model).name} to load {model.name} …")
    elif not _answers(found):
        log.warning("The built-in model (pid %s) does not answer: starting it again.", found.pid)
    else:
        if Path(found.model) != model.resolve():
            say(
                f"The built-in model runs {Path(found.model).name} for other Charlie processes; "
                f"{model.name} is loaded once they stop."
            )
        else:
            say(f"Using the built-in model already running ({found.describe()}).")
        return found
    _stop(found)
    files.forget(found.pid)
    return None


def _answers(runtime: Runtime) -> bool:
    """Whether the runtime answers `GET /health` (a real request: a live pid is not enough)."""
    try:
        answer = httpx.get(
            f"http://127.0.0.1:{runtime.port}/health", timeout=HEALTH_SECONDS, verify=tls.context()
        )
    except httpx.HTTPError:
        return False
    return answer.status_code == 200


def _stop(runtime: Runtime) -> None:
    """Ask the runtime to stop (SIGTERM), and kill it if it has not within `STOP_SECONDS`."""
    if not alive(runtime.pid, runtime.started):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(runtime.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline:
        if not alive(runtime.pid, runtime.started):
            return
        time.sleep(0.05)
    log.warning("The built-in model (pid %s) did not stop in time: killing it.", runtime.pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(runtime.pid, signal.SIGKILL)


def _port(files: _Files) -> int:
    """The port used last when it is free (a URL that stays the same across restarts, so
    what was learnt of the server stays with it), else 0: any free port."""
    try:
        port = int(files.port.read_text().strip())
    except (OSError, ValueError):
        return 0
    return port if 0 < port < 65536 and _free(port) else 0


def _start(
    files: _Files, model: Path, chosen: Fit, keep_alive: float, say: Callable[[str], None]
) -> Runtime:
    """Start a runtime on `model` (under the lock) and wait until it serves."""
    size = model.stat().st_size
    free = available_memory()
    if free is not None and size > free:
        log.warning(
            "%s (%.1f GB) is larger than the memory free now (%.1f GB): it will load slowly.",
            model.name,
            size / 1e9,
            free / 1e9,
        )
    say(f"Starting the built-in model {model.name} ({size / 1e9:.2f} GB): {chosen.why} …")
    command = [
        sys.executable,
        "-m",
        "charlie.llm.runtime",
        "--dir",
        str(files.dir),
        "--model",
        str(model.resolve()),
        "--threads",
        str(chosen.threads),
        "--context",
        str(chosen.context),
        "--cache-mib",
        str(chosen.cache_mib),
        "--port",
        str(_port(files)),
        "--keep-alive",
        str(keep_alive),
    ]
    began = time.monotonic()
    try:
        launched = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            close_fds=True,
        )
        pid = int(launched.stdout.split()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise ModelRuntimeError(
            f"Cannot start the built-in model runtime ({str(detail).strip()[-300:]}). "
            "Reinstall it with `pip install 'charlie[local]'`, or start a model server "
            "and set CHARLIE_LLM_BASE_URL."
        ) from exc
    reported = began
    while True:
        found = files.read()
        if found is not None and found.pid == pid:
            break
        if not alive(pid):
            raise ModelRuntimeError(
                f"The built-in runtime could not load {model} ({files.log_tail() or 'no log'}). "
                "The file may be damaged or a model llama.cpp does not support: check it with "
                "`charlie model use PATH`, or choose another GGUF model. Its log: "
                f"{files.log}."
            )
        now = time.monotonic()
        if now - began > LOAD_SECONDS:
            _stop(Runtime(pid, 0, str(model), 0, 0, 0.0))
            raise ModelRuntimeError(
                f"The built-in model {model.name} did not load in {LOAD_SECONDS:.0f} s (its "
                f"log: {files.log}). Close other programs to free memory, or choose a "
                "smaller model."
            )
        if now - reported >= PROGRESS_SECONDS:
            reported = now
            say(f"… still loading {model.name} ({now - began:.0f} s)")
        time.sleep(0.1)
    files.port.write_text(str(found.port))
    say(f"The built-in model is ready ({found.describe()}), loaded in {found.load_seconds:.1f} s.")
    return found


# ------------------------------------------------------------------ the runtime itself


def main(argv: list[str] | None = None) -> None:
    """`python -m charlie.llm.runtime --dir D --model M …`: fork the runtime off, print its
    pid, return. The runtime writes its log to D/runtime.log and itself to D/runtime.json
    once it listens."""
    parser = argparse.ArgumentParser(prog="python -m charlie.llm.runtime")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--context", type=int, required=True)
    parser.add_argument("--cache-mib", type=int, default=PROMPT_CACHE_MIB)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--keep-alive", type=float, default=0.0)
    args = parser.parse_args(argv)
    files = _Files(args.dir.parent)
    log_fd = os.open(files.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    pid = os.fork()
    if pid:
        sys.stdout.write(f"{pid}\n")  # the launcher's only output: the runtime's pid
        return
    # The runtime: a session of its own (a terminal's Ctrl-C or hang-up is for its users,
    # who stop it), output to its log, no tie to the launcher.
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    code = 0
    try:
        _serve(files, args)
    except BaseException as exc:
        _settle(files.log)
        _note(f"E charlie runtime: {type(exc).__name__}: {exc}")
        code = 3
    finally:
        os._exit(code)  # the launcher's Python state (atexit, buffers) is not the runtime's


def _serve(files: _Files, args: argparse.Namespace) -> None:
    import xllamacpp  # the charlie[local] extra, loaded only in the runtime's own process

    stop = False

    def stopping(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGHUP, stopping)
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {Path(args.model).name}  # the name /v1/models gives: the file's
    params.n_ctx = args.context
    params.n_parallel = 1  # one slot: the whole window for each request, and its cache kept
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.cache_ram_mib = args.cache_mib
    params.use_jinja = True  # the model's own chat template: tool calls, response_format
    params.endpoint_props = True  # /props: the context window, for Charlie's budgets
    params.endpoint_slots = True  # /slots: `charlie doctor` tells a busy runtime apart
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    began = time.perf_counter()
    try:
        server = xllamacpp.Server(params)
    except RuntimeError:
        if not args.port or _free(args.port):
            raise  # the model did not load (llama.cpp's log says why)
        params.port = 0  # the port was taken since it was chosen: any other will do
        server = xllamacpp.Server(params)
    seconds = time.perf_counter() - began
    address = server.listening_address
    port = int(address.rsplit(":", 1)[1])
    try:  # the window as llama.cpp set it (it may fit a smaller one to the memory)
        props = httpx.get(f"{address}/props", timeout=HEALTH_SECONDS, verify=tls.context())
        context = int(props.json()["default_generation_settings"]["n_ctx"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        context = args.context
    me = os.getpid()
    files.write(
        Runtime(
            me,
            port,
            args.model,
            args.threads,
            context,
            round(seconds, 2),
            _started(me),
            args.keep_alive,
        )
    )
    _note(f"I charlie runtime: serving on port {port}, loaded in {seconds:.1f} s")
    idle_since: float | None = None  # when it was last seen with no Charlie using it
    while not stop:
        time.sleep(WATCH_SECONDS)
        found = files.read()
        if stop or found is None or found.pid != me:
            break  # stopped, or another runtime replaced this one
        if files.living_leases():
            idle_since = None
            continue
        idle_since = time.monotonic() if idle_since is None else idle_since
        if time.monotonic() - idle_since >= args.keep_alive and _unused(files, me):
            _note(f"I charlie runtime: no Charlie has used it for {args.keep_alive:g} s")
            break
    del server  # llama.cpp's server stops its threads and frees the model


def _settle(log: Path, quiet: float = 0.2, most: float = 2.0) -> None:
    """Wait until llama.cpp's log has stopped growing: it is written by a thread of its
    own, so a model that failed to load may not yet have said why when the error comes."""
    began = time.monotonic()
    size, since = -1, began
    while time.monotonic() - began < most:
        now_size = log.stat().st_size if log.exists() else 0
        if now_size != size:
            size, since = now_size, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.02)


def _note(line: str) -> None:
    """A line of Charlie's own in the runtime's log (its standard output)."""
    os.write(1, f"{line}\n".encode())


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _unused(files: _Files, me: int) -> bool:
    """Whether no Charlie process holds a lease any more (checked again under the lock, so
    a process taking a lease now is not left with a runtime that is going away), or
    another runtime replaced this one. Removes this runtime's record when it is unused."""
    found = files.read()
    if found is None or found.pid != me:
        return True
    if files.living_leases():
        return False
    with files.locked(wait=False) as held:
        if not held:
            return False  # someone is taking or giving back a lease: look again later
        if files.living_leases():
            return False
        files.forget(me)
        return True


if __name__ == "__main__":
    main()
