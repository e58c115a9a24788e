"""`charlie doctor`: each probe against the scripted double, passing and failing, through
the CLI as a person runs it (exact table lines, exit code)."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import Cli
from fastapi.testclient import TestClient
from llm_double import ErrorReply, ScriptedLLMServer, TextReply, ToolCallsReply
from web_support import PASSWORD, signed_in

from charlie.adapters.web.app import create_app
from charlie.config import load_settings
from charlie.home import Home
from charlie.llm import doctor
from charlie.users import ensure_user, set_password

HEADER = "check           result                                                fix"
CONTEXT_DEFAULT = (
    "context window  warn: 4096 tokens (default: the server does not say)  "
    "set CHARLIE_LLM_CONTEXT to the window the server runs the model with"
)
TOOLS_FIX = doctor.FIX_TOOLS
JSON_FIX = (
    "use a server with json_schema output (llama.cpp, LM Studio, Ollama 0.5+); until then "
    "distillation relies on its repair attempt"
)


@pytest.fixture(autouse=True)
def auto(monkeypatch: pytest.MonkeyPatch) -> None:
    """The doctor names the mode `auto` chooses (the suite's default is `native`)."""
    monkeypatch.setenv("CHARLIE_TOOL_MODE", "auto")


def capable(request: dict[str, Any]) -> Any:
    """A server that does everything right: native tool calls, schema-valid JSON, text."""
    if request.get("tools"):
        name = request["tools"][0]["function"]["name"]
        return ToolCallsReply([(name, {"a": 2, "b": 3} if name == "add" else {"query": "oak"})])
    if request.get("response_format"):
        return '{"answer": 5}'
    return "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"


def lines(output: str) -> list[str]:
    """The doctor's lines about the model server (the store's line is tested on its own)."""
    return [line for line in output.rstrip("\n").split("\n") if not line.startswith("Database: ")]


def test_a_capable_server_passes_every_check(charlie: Cli, llm: ScriptedLLMServer) -> None:
    llm.default = capable
    result = charlie("doctor")
    assert result.exit_code == 0
    assert result.output.splitlines()[1].startswith("Database: SQLite, ")  # the store, next
    assert json.loads(charlie("doctor", "--json").output)["database"]["store"] == "SQLite"
    out = lines(result.output)
    assert out[0] == f"Server: {llm.base_url}  model: test-model"
    assert out[1:5] == [
        HEADER,
        "reachable       ok: 1 model(s) listed",
        "model           ok: test-model",
        CONTEXT_DEFAULT,
    ]
    assert re.fullmatch(r"streaming       ok: 8 chunks, first after \d+\.\d s", out[5])
    assert out[6:11] == [
        'tool calls      ok: native call add({"a": 2, "b": 3})',
        "tool use        ok: the model called a tool natively, unasked",
        'json_schema     ok: valid JSON {"answer": 5}',
        "images          ok: a PNG was accepted",
        "embeddings      not used (CHARLIE_EMBEDDINGS=local)",
    ]
    assert re.fullmatch(r"tokens/s        ok: [\d.]+ tokens/s \(8 tokens in \d+\.\d s\)", out[11])
    assert out[12:] == [
        "tool mode       ok: native (auto: a tool call when tried)",
        "Charlie can chat with this server.",
    ]
    sent = [r for r in llm.requests if r.get("tools")]
    assert sent[0]["tool_choice"] == "required"
    image = llm.requests[-2]["messages"][0]["content"][1]["image_url"]["url"]
    assert image.startswith("data:image/png;base64,")


def run_with(charlie: Cli, llm: ScriptedLLMServer, *args: str) -> dict[str, str]:
    """`charlie doctor` against the double; each check's line, by check name."""
    result = charlie("doctor", *args)
    found = {line[:16].strip(): line for line in lines(result.output)[2:-1]}
    found["exit"] = str(result.exit_code)
    return found


def test_tools_ignored_fail_with_the_fix_but_chat_still_works(
    charlie: Cli, llm: ScriptedLLMServer
) -> None:
    """A llama-server started without --jinja drops `tools` and answers with text."""
    llm.default = lambda request: "5" if request.get("tools") else capable(request)
    found = run_with(charlie, llm)
    assert found["tool calls"] == (
        f"tool calls      FAIL: no tool call: the server ignored the tools      {TOOLS_FIX}"
    )
    assert found["exit"] == "0"


def test_tool_calls_written_as_text_are_a_warning(charlie: Cli, llm: ScriptedLLMServer) -> None:
    call = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    llm.default = lambda request: call if request.get("tools") else capable(request)
    found = run_with(charlie, llm)
    assert found["tool calls"] == (
        f"tool calls      warn: written as text, not a native call              {TOOLS_FIX}"
    )
    assert found["exit"] == "0"


def test_invalid_json_fails_the_structured_output_check(
    charlie: Cli, llm: ScriptedLLMServer
) -> None:
    llm.default = lambda request: (
        "The answer is 5." if request.get("response_format") else capable(request)
    )
    found = run_with(charlie, llm)
    assert found["json_schema"] == (
        f"json_schema     FAIL: not JSON matching the schema: 'The answer is 5.'  {JSON_FIX}"
    )
    assert found["exit"] == "0"


def test_a_server_refusing_images_says_not_supported(charlie: Cli, llm: ScriptedLLMServer) -> None:
    def no_images(request: dict[str, Any]) -> Any:
        if isinstance(request["messages"][0]["content"], list):
            return ErrorReply(400, "image input is not supported")
        return capable(request)

    llm.default = no_images
    result = charlie("doctor", "--json")
    assert result.exit_code == 0
    images = json.loads(result.output)["checks"][7]
    assert images == {
        "check": "images",
        "status": "warn",
        "result": "not supported (HTTP 400: image input is not supported)",
        "fix": "to send images, load a vision model (llama-server: --mmproj with its projector)",
        "essential": False,
    }


def test_embeddings_are_probed_only_when_used(
    charlie: Cli, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.default = capable
    monkeypatch.setenv("CHARLIE_EMBEDDINGS", "openai")
    monkeypatch.setenv("CHARLIE_EMBEDDINGS_MODEL", "test-model")
    assert run_with(charlie, llm)["embeddings"] == "embeddings      ok: 16 dimensions"
    assert llm.embedding_requests[-1] == {"model": "test-model", "input": ["doctor"]}

    monkeypatch.setenv("CHARLIE_EMBEDDINGS_MODEL", "nomic-embed")
    found = run_with(charlie, llm)
    assert found["embeddings"].startswith(
        "embeddings      FAIL: HTTP 404: The model `nomic-embed` does not exist  "
        "set CHARLIE_EMBEDDINGS_MODEL to an embedding model the server has loaded "
        "(llama-server: --embeddings), or CHARLIE_EMBEDDINGS=local"
    )
    assert found["exit"] == "0"


def test_streaming_is_essential(charlie: Cli, llm: ScriptedLLMServer) -> None:
    llm.default = lambda request: (
        ErrorReply(500, "stream broke") if request.get("stream") else capable(request)
    )
    found = run_with(charlie, llm)
    assert found["streaming"] == (
        "streaming       FAIL: HTTP 500: stream broke                          "
        "check the server's log"
    )
    assert found["exit"] == "1"


def test_a_missing_model_fails_and_skips_the_rest(
    charlie: Cli, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHARLIE_LLM_MODEL", "qwen3-8b")
    result = charlie("doctor")
    assert result.exit_code == 1
    assert lines(result.output)[1:] == [
        "check           result                                               fix",
        "reachable       ok: 1 model(s) listed",
        "model           FAIL: qwen3-8b is not offered (offered: test-model)  "
        "set CHARLIE_LLM_MODEL to a model the server has loaded, or load it",
        "context window  not run: the model is not available",
        "streaming       not run: the model is not available",
        "tool calls      not run: the model is not available",
        "tool use        not run: the model is not available",
        "json_schema     not run: the model is not available",
        "images          not run: the model is not available",
        "embeddings      not run: the model is not available",
        "tokens/s        not run: the model is not available",
        "tool mode       not run: the model is not available",
        "Charlie cannot chat with this server until the FAIL lines are fixed.",
    ]
    assert llm.requests == []  # no model call made for a model that is not there


def test_an_unreachable_server_fails_with_how_to_start_one(charlie: Cli, dead_url: str) -> None:
    result = charlie("doctor", "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["ok"] is False and report["server"] == dead_url
    first = report["checks"][0]
    assert (first["check"], first["status"], first["fix"]) == (
        "reachable",
        "fail",
        doctor.FIX_START,
    )
    assert first["result"].startswith("cannot connect (")
    assert {c["status"] for c in report["checks"][1:]} == {"skip"}


@pytest.fixture
def hung_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A server that takes connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        monkeypatch.setenv("CHARLIE_LLM_BASE_URL", url)
        monkeypatch.setenv("CHARLIE_LLM_MODEL", "test-model")
        yield url


def test_a_hung_server_does_not_hang_the_doctor(charlie: Cli, hung_url: str) -> None:
    started = time.monotonic()
    result = charlie("doctor", "--timeout", "0.5")
    assert time.monotonic() - started < 5
    assert result.exit_code == 1
    assert lines(result.output)[2] == (
        "reachable       FAIL: no answer within 0.5 s, and the server answers nothing else  "
        "the server is hung: check its log, restart it"
    )


def test_all_probes_together_stay_within_the_total(
    home: Home, hung_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers nothing: each essential probe waits its timeout at most, and
    once the total is spent the rest are not run."""
    settings = load_settings(llm_base_url=hung_url, llm_model="test-model")
    monkeypatch.setattr(doctor, "ALIVE_SECONDS", 0.2)
    started = time.monotonic()
    report = doctor.examine(settings, timeout=0.4, total=1.0)
    assert time.monotonic() - started < 2.5
    assert report.checks[0].result == "no answer within 0.4 s, and the server answers nothing else"
    assert report.ok is False and not report.slow


def test_a_busy_server_is_slow_not_broken(home: Home, llm: ScriptedLLMServer) -> None:
    """A model that answers `GET /models` at once but no chat in time (another request has
    its one slot): "slow", the rest not run, and the verdict says to come back — where a
    timeout used to read as "Charlie cannot chat with this server"."""
    hold = threading.Event()

    def slow(request: dict[str, Any]) -> Any:
        hold.wait(10)
        return capable(request)

    llm.default = slow
    settings = load_settings(llm_base_url=llm.base_url, llm_model="test-model")
    started = time.monotonic()
    # room for a loaded machine: the checks before the chat may take a while there, and a
    # total of 1 s ran out before the chat's 0.4 s did ("unfinished", not "slow")
    report = doctor.examine(settings, timeout=1.0, total=5.0)
    hold.set()
    assert time.monotonic() - started < 8  # not waiting for the held answer (10 s)
    by_name = {c.check: c for c in report.checks}
    assert by_name["streaming"].status == "slow"
    assert by_name["streaming"].result == (
        "no answer within 1 s, though the server is up (it answers other requests at once)"
    )
    assert by_name["tokens/s"].result == "not run: the server is busy or slow"
    assert by_name["tool mode"].status == "skip"
    assert report.ok and report.slow
    assert "busy or slow" in report.verdict() and "not broken" in report.verdict()
    assert len([r for r in llm.requests if r.get("messages")]) == 1  # one probe waited


def trickling(request: dict[str, Any]) -> Any:
    """A busy server: everything answers, but a streamed reply comes a piece every 0.3 s."""
    if request.get("stream"):
        return TextReply("1, 2, 3, 4, 5, 6, 7, 8, 9, 10", chunk_delay=0.3)
    return capable(request)


UNFINISHED_VERDICT = (
    "The doctor's time ran out before every check was done, so it cannot say whether Charlie "
    "can chat (streaming unchecked); nothing it checked failed. The server may be busy: run "
    "`charlie doctor` again when it is idle."
)


def test_a_check_the_doctors_time_ran_out_on_is_unfinished_not_a_failure(
    home: Home, llm: ScriptedLLMServer
) -> None:
    """`charlie doctor --timeout 60` on a busy server: the streamed answer was still coming
    when the doctor's whole time was spent. That is no failure seen, so no FAIL and no
    "cannot chat" — it says it did not finish."""
    llm.default = trickling
    settings = load_settings(llm_base_url=llm.base_url, llm_model="test-model")
    report = doctor.examine(settings, timeout=1.0, total=1.0)
    assert doctor.table(report)[1:] == [
        "reachable       ok: 1 model(s) listed",
        "model           ok: test-model",
        CONTEXT_DEFAULT,
        "streaming       did not finish: the doctor's 1 s ran out              "
        "run `charlie doctor` again when the server is idle",
        "tool calls      not run: the doctor's time ran out",
        "tool use        not run: the doctor's time ran out",
        "json_schema     not run: the doctor's time ran out",
        "images          not run: the doctor's time ran out",
        "embeddings      not run: the doctor's time ran out",
        "tokens/s        not run: the doctor's time ran out",
        "tool mode       not chosen: the doctor's time ran out",
    ]
    assert report.verdict() == UNFINISHED_VERDICT
    assert report.ok and report.unfinished and not report.slow


def test_the_cli_exits_0_when_its_time_ran_out_before_any_failure(
    charlie: Cli, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor, "TOTAL_SECONDS", 1.0)  # `--timeout 60` against a minute
    llm.default = trickling
    result = charlie("doctor", "--timeout", "1")
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.output and "cannot chat" not in result.output
    assert lines(result.output)[-1] == UNFINISHED_VERDICT
    assert json.loads(charlie("doctor", "--timeout", "1", "--json").stdout)["ok"] is True


class _BusyLlamaCpp(BaseHTTPRequestHandler):
    """llama.cpp with its one slot working on someone else's request: `/slots` says so,
    and a chat waits."""

    def _send(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._send({"data": [{"id": "qwen"}]})
        elif self.path == "/slots":
            self._send([{"id": 0, "is_processing": True}])
        else:
            self._send({})

    def do_POST(self) -> None:
        time.sleep(2)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_busy_llama_cpp_says_its_slots_are_taken(
    charlie: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BusyLlamaCpp)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("CHARLIE_LLM_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
        monkeypatch.setenv("CHARLIE_LLM_MODEL", "qwen")
        result = charlie("doctor", "--timeout", "0.5")
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 0, result.output
    out = lines(result.output)
    streaming = next(line for line in out if line.startswith("streaming"))
    assert "SLOW: no answer within 0.5 s, though the server is up (1 of its 1 slots busy" in (
        streaming
    )
    assert "busy or slow, not broken" in streaming
    assert out[-1].startswith("The server is up but busy or slow")


class _NativeApis(BaseHTTPRequestHandler):
    """A server that lists one model and tells its context window one native way."""

    answers: dict[str, Any] = {}  # noqa: RUF012 - set per test on a subclass

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _answer(self) -> None:
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/v1/models":
            self._send(200, {"data": [{"id": "gemma"}]})
        elif self.path in self.answers:
            self._send(200, self.answers[self.path])
        else:
            self._send(404, {"error": {"message": f"no {self.path}"}})

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass  # quiet: the test reads the report


@pytest.mark.parametrize(
    ("answers", "line"),
    [
        (
            {"/props": {"default_generation_settings": {"n_ctx": 8192}}},
            "ok: 8192 tokens (server: llama.cpp /props)",
        ),
        (
            {"/api/v0/models": {"data": [{"id": "gemma", "loaded_context_length": 16384}]}},
            "ok: 16384 tokens (server: LM Studio /api/v0/models)",
        ),
        (
            {"/api/show": {"parameters": "num_ctx 2048\ntemperature 0.7"}},
            "warn: 2048 tokens (server: Ollama /api/show)",
        ),
    ],
)
def test_the_context_window_is_asked_of_the_server(
    charlie: Cli, monkeypatch: pytest.MonkeyPatch, answers: dict[str, Any], line: str
) -> None:
    handler = type("Handler", (_NativeApis,), {"answers": answers})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("CHARLIE_LLM_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
        monkeypatch.setenv("CHARLIE_LLM_MODEL", "gemma")
        report = json.loads(charlie("doctor", "--json").output)
    finally:
        server.shutdown()
        server.server_close()
    context = report["checks"][2]
    assert f"{context['status']}: {context['result']}" == line
    assert context["fix"] == ("" if line.startswith("ok") else doctor.FIX_CONTEXT)


def test_the_context_setting_wins(
    charlie: Cli, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.default = capable
    monkeypatch.setenv("CHARLIE_LLM_CONTEXT", "2048")
    found = run_with(charlie, llm)
    assert found["context window"] == (
        "context window  warn: 2048 tokens (setting CHARLIE_LLM_CONTEXT)  " + doctor.FIX_CONTEXT
    )


def test_the_web_app_runs_the_same_checks_on_request(home: Home, llm: ScriptedLLMServer) -> None:
    ensure_user(home.db, "bob")
    set_password(home.db, "bob", PASSWORD)
    llm.default = capable
    anonymous = TestClient(create_app(load_settings()))
    assert anonymous.get("/api/doctor").status_code == 401
    assert llm.requests == []
    with signed_in("bob") as client:
        assert client.get("/api/health").status_code == 200
        assert llm.requests == []  # the page's health check costs no model call
        report = client.get("/api/doctor").json()
    assert report["ok"] is True and report["model"] == "test-model"
    assert [(c["check"], c["status"]) for c in report["checks"]] == [
        ("reachable", "ok"),
        ("model", "ok"),
        ("context window", "warn"),
        ("streaming", "ok"),
        ("tool calls", "ok"),
        ("tool use", "ok"),
        ("json_schema", "ok"),
        ("images", "ok"),
        ("embeddings", "skip"),
        ("tokens/s", "ok"),
        ("tool mode", "ok"),
    ]
    assert report["checks"][2]["fix"] == (
        "set CHARLIE_LLM_CONTEXT to the window the server runs the model with"
    )


def test_a_server_that_hangs_up_is_told_apart_from_one_that_is_not_there(
    charlie: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request read and the connection closed without a word: the server runs, but broke."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.settimeout(5)

        def hang_up() -> None:
            while True:  # every connection the doctor opens, until the socket closes
                try:
                    connection, _ = sock.accept()
                except OSError:
                    return
                with connection:
                    request = b""
                    while b"\r\n\r\n" not in request:  # all of it, so closing sends no reset
                        piece = connection.recv(65536)
                        if not piece:
                            break
                        request += piece

        thread = threading.Thread(target=hang_up, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        monkeypatch.setenv("CHARLIE_LLM_BASE_URL", url)
        monkeypatch.setenv("CHARLIE_LLM_MODEL", "test-model")
        result = charlie("doctor")
    thread.join(5)
    assert result.exit_code == 1
    assert lines(result.output)[2] == (
        "reachable       FAIL: the connection broke (Server disconnected without sending a "
        "response.)  check the server's log, restart it"
    )


# ------------------------------------------------------------------ tool use and the mode


def unforced(answer: Any, *, described: Any = "I would look in the notes.") -> Any:
    """A server whose model calls tools when forced (`tool_choice: required`), and answers
    the doctor's unforced question with `answer` (and, with the tool described in the
    prompt instead, with `described`)."""

    def respond(request: dict[str, Any]) -> Any:
        if request.get("tools") and request.get("tool_choice") != "required":
            return answer
        system = str(request["messages"][0].get("content") or "")
        if "<tool_call>" in system and not request.get("tools"):
            return described
        return capable(request)

    return respond


def test_a_call_written_as_text_is_one_charlie_reads_and_native_mode_is_kept(
    charlie: Cli, llm: ScriptedLLMServer
) -> None:
    llm.default = unforced(
        '<function name="search_notes" arguments=\'{"query": "worktops"}\'></function>'
    )
    found = run_with(charlie, llm)
    assert found["tool use"] == "tool use        ok: a call written as text, which Charlie reads"
    assert found["tool mode"] == "tool mode       ok: native (auto: a tool call when tried)"


def test_a_model_that_narrates_gets_constrained_steps_from_then_on(
    charlie: Cli, llm: ScriptedLLMServer
) -> None:
    llm.default = unforced("To find it, Charlie can use the search_notes function.")
    found = run_with(charlie, llm)
    assert found["tool use"].startswith(
        "tool use        warn: the model answered without calling the tool"
    )
    assert "tool_mode constrained" in found["tool use"]
    assert found["tool mode"] == ("tool mode       ok: constrained (auto: no tool call when tried)")
    # Remembered: the next chat (another process, as `charlie chat -m` is) uses it.
    charlie("projects", "create", "Kitchen")
    llm.default = lambda request: (
        '{"tool": "answer"}' if request.get("response_format") else "Oak, 38 mm."
    )
    result = charlie("chat", "-p", "kitchen", "-m", "How thick are the worktops?")
    assert result.exit_code == 0, result.output
    assert "· tool mode: constrained (auto: no tool call when tried)" in result.output
    schemas = [
        r["response_format"]["json_schema"]["name"]
        for r in llm.requests
        if r.get("response_format")
    ]
    assert "step" in schemas  # each step asked as JSON held to a schema


def test_a_server_that_drops_tools_gets_them_described_in_the_prompt(
    charlie: Cli, llm: ScriptedLLMServer
) -> None:
    llm.default = unforced(
        "I'll look.",
        described='<tool_call>{"name": "search_notes", "arguments": {"query": "oak"}}</tool_call>',
    )
    found = run_with(charlie, llm)
    assert found["tool use"].startswith(
        "tool use        warn: a call only with the tool described in the prompt"
    )
    assert found["tool mode"] == "tool mode       ok: text (auto: calls only as text when tried)"


def test_a_mode_that_is_set_is_the_mode_used_whatever_was_seen(
    charlie: Cli, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.default = unforced("No tools for me.")
    monkeypatch.setenv("CHARLIE_TOOL_MODE", "native")
    found = run_with(charlie, llm)
    assert found["tool mode"] == "tool mode       ok: native (tool_mode = native (set))"
