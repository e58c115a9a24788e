import json
import ssl
import time
from pathlib import Path

import pytest
from llm_double import ScriptedLLMServer
from support.images import tiny_png

from charlie import tls
from charlie.config import load_settings
from charlie.errors import (
    CharlieError,
    LLMBadResponse,
    LLMModelNotFound,
    LLMRejected,
    LLMUnavailable,
)
from charlie.llm import servers
from charlie.llm.client import Completion, Delta, LLMClient, image_part


def client(server: ScriptedLLMServer, **kwargs: object) -> LLMClient:
    options: dict[str, object] = {"retries": 0, "backoff": 0.01} | kwargs
    return LLMClient(server.base_url, "test-model", **options)  # type: ignore[arg-type]


def test_streams_text_in_pieces(llm: ScriptedLLMServer) -> None:
    llm.reply("Hello from the model, streamed in small pieces.", chunk_size=5)
    items = list(client(llm).stream([{"role": "user", "content": "hi"}]))
    deltas = [i.text for i in items if isinstance(i, Delta)]
    done = items[-1]
    assert isinstance(done, Completion)
    assert len(deltas) > 3
    assert "".join(deltas) == done.content == "Hello from the model, streamed in small pieces."
    assert done.finish_reason == "stop"
    assert done.usage["prompt_tokens"] == 1
    assert llm.requests[0]["stream"] is True


def test_streamed_tool_calls_are_reassembled(llm: ScriptedLLMServer) -> None:
    llm.tool_calls([("search_notes", {"query": "JWT refresh"}), ("now", {})])
    done = list(client(llm).stream([{"role": "user", "content": "find"}]))[-1]
    assert isinstance(done, Completion)
    assert [c.name for c in done.tool_calls] == ["search_notes", "now"]
    assert json.loads(done.tool_calls[0].arguments) == {"query": "JWT refresh"}
    assert done.finish_reason == "tool_calls"


def test_whole_answer_and_tools_are_sent(llm: ScriptedLLMServer) -> None:
    llm.tool_calls([("now", {})])
    tools = [{"type": "function", "function": {"name": "now", "parameters": {}}}]
    answer = client(llm).chat([{"role": "user", "content": "time?"}], tools=tools)
    assert answer.tool_calls[0].name == "now"
    assert llm.requests[0]["tools"] == tools
    # Gathered from a stream: given up on after a silence, it stops at the server too.
    assert llm.requests[0]["stream"] is True


def test_image_is_sent_as_a_data_url_part(llm: ScriptedLLMServer, tmp_path: Path) -> None:
    llm.reply("A green pixel.")
    part = image_part(tiny_png(tmp_path / "pixel.png"))
    client(llm).chat([{"role": "user", "content": [{"type": "text", "text": "what?"}, part]}])
    sent = llm.requests[0]["messages"][0]["content"][1]
    assert sent["type"] == "image_url"
    assert sent["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")


def test_image_of_unknown_type_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hi")
    with pytest.raises(CharlieError, match="not a PNG, JPEG, WebP or GIF"):
        image_part(path)


def test_server_down_names_the_url_and_what_to_try(dead_url: str) -> None:
    with pytest.raises(LLMUnavailable) as err:
        LLMClient(dead_url, "test-model", retries=1, backoff=0.01).chat([])
    assert dead_url in str(err.value)
    assert "LM Studio" in str(err.value)
    assert "CHARLIE_LLM_BASE_URL" in str(err.value)


def test_wrong_model_lists_the_models_the_server_has(llm: ScriptedLLMServer) -> None:
    wrong = LLMClient(llm.base_url, "no-such-model", retries=0)
    with pytest.raises(LLMModelNotFound) as err:
        wrong.chat([{"role": "user", "content": "hi"}])
    assert "'no-such-model'" in str(err.value)
    assert "CHARLIE_LLM_MODEL to one of: test-model" in str(err.value)
    project = LLMClient(llm.base_url, "test-model", retries=0).with_model("gone-model")
    with pytest.raises(LLMModelNotFound) as err:
        project.chat([{"role": "user", "content": "hi"}])
    assert "the project's model" in str(err.value) and "CHARLIE_LLM_MODEL" not in str(err.value)


def test_empty_model_setting_uses_the_servers_first_model() -> None:
    with ScriptedLLMServer(model="qwen3-vl-8b", models=["qwen3-vl-8b", "other"]) as server:
        server.reply("ok")
        answer = LLMClient(server.base_url, "", retries=0).chat([])
        assert answer.content == "ok"
        assert server.requests[0]["model"] == "qwen3-vl-8b"


def test_garbage_answer_is_a_clear_error(llm: ScriptedLLMServer) -> None:
    llm.garbage(b"<html>captive portal</html>")
    with pytest.raises(LLMBadResponse, match=r"not JSON .*captive portal.*ends in /v1"):
        client(llm).chat([])
    llm.garbage(b"<html>again</html>")
    with pytest.raises(LLMBadResponse):
        list(client(llm).stream([]))


def test_json_without_a_message_is_a_clear_error(llm: ScriptedLLMServer) -> None:
    llm.garbage(b'{"choices": []}', content_type="application/json")
    with pytest.raises(LLMBadResponse, match="neither an event stream nor a chat message"):
        client(llm).chat([])


def test_transient_errors_are_retried_with_backoff(llm: ScriptedLLMServer) -> None:
    llm.error(503, "loading model")
    llm.error(429, "slow down")
    llm.reply("finally")
    assert client(llm, retries=2).chat([]).content == "finally"
    assert len(llm.requests) == 3


def test_transient_errors_give_up_after_the_retries(llm: ScriptedLLMServer) -> None:
    llm.error(503, "loading model")
    llm.error(503, "still loading")
    with pytest.raises(LLMUnavailable, match=r"kept failing \(HTTP 503: still loading\)"):
        client(llm, retries=1).chat([])


def test_client_errors_are_not_retried(llm: ScriptedLLMServer) -> None:
    llm.error(400, "context length exceeded")
    with pytest.raises(LLMRejected, match="context length exceeded"):
        client(llm, retries=3).chat([])
    assert len(llm.requests) == 1


def test_slow_server_times_out_with_advice_and_is_never_asked_twice(
    llm: ScriptedLLMServer,
) -> None:
    llm.delay(2.0)
    llm.reply("too late")
    with pytest.raises(LLMUnavailable, match=r"sent nothing for 0.3 s.*CHARLIE_LLM_TIMEOUT"):
        client(llm, timeout=0.3, retries=2).chat([])
    assert len(llm.requests) == 1  # a second copy would queue behind the first at the server


def test_the_timeout_is_on_silence_not_on_the_whole_answer(llm: ScriptedLLMServer) -> None:
    llm.reply("a steady answer that takes longer than the timeout", chunk_size=4, chunk_delay=0.05)
    started = time.monotonic()
    answer = client(llm, timeout=0.3).chat([])
    assert time.monotonic() - started > 0.3
    assert answer.content == "a steady answer that takes longer than the timeout"
    llm.reply("starts, then goes quiet", chunk_size=4, chunk_delay=0.6)
    with pytest.raises(LLMUnavailable, match=r"sent nothing for 0\.3 s"):
        client(llm, timeout=0.3).chat([])


def test_wrong_path_suggests_the_v1_suffix(llm: ScriptedLLMServer) -> None:
    bad = LLMClient(llm.base_url.removesuffix("/v1"), "test-model", retries=0)
    with pytest.raises(LLMRejected, match="should end in /v1"):
        bad.chat([])


def test_every_client_shares_one_tls_context_that_still_checks_certificates(
    llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a TLS context reads the certificate bundle (~50 ms): the probes that look for
    a server and the client chosen from the settings use the process's one."""
    shared = tls.context()
    assert shared.verify_mode == ssl.CERT_REQUIRED and shared.check_hostname
    made: list[object] = []
    real = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        made.append(args or kwargs)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    llm.reply("Hello.")
    assert servers.probe(llm.base_url) == ["test-model"]
    assert servers.probe(llm.base_url) == ["test-model"]
    chosen = LLMClient.from_settings(load_settings())
    assert chosen.chat([{"role": "user", "content": "Hi"}]).content == "Hello."
    chosen.close()
    assert made == []
