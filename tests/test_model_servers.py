"""How Charlie finds its model server (charlie/llm/servers.py), with real loopback HTTP
servers standing in for LM Studio, Ollama and llama.cpp at the addresses CHARLIE_LLM_PROBE
names: a URL the person set wins; else the first usual server that answers with a model;
else the built-in model (tests/test_builtin_runtime.py); else the first request says the
three ways out."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from conftest import Cli
from llm_double import ScriptedLLMServer
from support.servers import free_url, web_page

from charlie.config import load_settings
from charlie.errors import LLMUnavailable, ModelRuntimeError, SettingsError
from charlie.home import Home
from charlie.llm import runtime
from charlie.llm.client import LLMClient

HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def auto(monkeypatch: pytest.MonkeyPatch) -> None:
    """CHARLIE_LLM=auto, as people have it (the tests' default is `server`)."""
    monkeypatch.setenv("CHARLIE_LLM", "auto")


@pytest.fixture
def doubles() -> Iterator[tuple[ScriptedLLMServer, ScriptedLLMServer]]:
    """Two scripted model servers, neither configured."""
    with ScriptedLLMServer() as one, ScriptedLLMServer() as two:
        one.default, two.default = "one here", "two here"
        yield one, two


def probe_list(**servers: str) -> str:
    return ",".join(f"{name.replace('_', ' ')}={url}" for name, url in servers.items())


def test_a_url_the_person_set_is_used_and_no_other(
    auto: None,
    doubles: tuple[ScriptedLLMServer, ScriptedLLMServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    configured, usual = doubles
    monkeypatch.setenv("CHARLIE_LLM_BASE_URL", configured.base_url)
    monkeypatch.setenv("CHARLIE_LLM_PROBE", probe_list(LM_Studio=usual.base_url))
    client = LLMClient.from_settings(load_settings())
    try:
        assert client.server is not None
        assert (client.server.kind, client.server.why) == (
            "configured",
            "CHARLIE_LLM_BASE_URL is set",
        )
        assert client.chat(HI).content == "one here"
    finally:
        client.close()
    assert (len(configured.requests), len(usual.requests)) == (1, 0)


def test_auto_uses_the_first_usual_server_that_answers_and_says_which(
    auto: None,
    doubles: tuple[ScriptedLLMServer, ScriptedLLMServer],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ollama, llamacpp = doubles
    nowhere = free_url()
    monkeypatch.setenv(
        "CHARLIE_LLM_PROBE",
        probe_list(LM_Studio=nowhere, Ollama=ollama.base_url, llama_cpp=llamacpp.base_url),
    )
    with caplog.at_level(logging.INFO, logger="charlie.llm.servers"):
        client = LLMClient.from_settings(load_settings())
    try:
        assert client.chat(HI).content == "one here"
    finally:
        client.close()
    assert (len(ollama.requests), len(llamacpp.requests)) == (1, 0)
    assert caplog.messages == [
        f"Model server: Ollama at {ollama.base_url} (found answering; none configured)"
    ]


def test_a_web_page_and_a_server_without_models_are_passed_over(
    auto: None,
    doubles: tuple[ScriptedLLMServer, ScriptedLLMServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    empty, ollama = doubles
    empty.models = []
    with web_page() as page:
        monkeypatch.setenv(
            "CHARLIE_LLM_PROBE",
            probe_list(llama_cpp=page, LM_Studio=empty.base_url, Ollama=ollama.base_url),
        )
        client = LLMClient.from_settings(load_settings())
    try:
        assert client.server is not None and client.server.name == "Ollama"
        assert client.chat(HI).content == "two here"
    finally:
        client.close()


def test_with_nothing_found_charlie_starts_and_its_first_request_says_the_three_ways_out(
    auto: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    studio, ollama = free_url(), free_url()
    monkeypatch.setenv("CHARLIE_LLM_PROBE", probe_list(LM_Studio=studio, Ollama=ollama))
    client = LLMClient.from_settings(load_settings())  # serve starts: the app says what to do
    try:
        with pytest.raises(LLMUnavailable) as raised:
            client.chat(HI)
    finally:
        client.close()
    missing = (
        "no built-in model is chosen"
        if runtime.installed()
        else "the built-in runtime is not installed (pip install 'charlie[local]')"
    )
    assert str(raised.value) == (
        f"No model server: none is configured, none answered (nothing at LM Studio's {studio}; "
        f"nothing at Ollama's {ollama}), and {missing}. Start LM Studio, Ollama or "
        "llama-server; or install Charlie's built-in model with `charlie model install`; or "
        "set CHARLIE_LLM_BASE_URL to your server's URL, ending in /v1."
    )


def test_the_cli_says_it_at_once(auto: None, charlie: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHARLIE_LLM_PROBE", probe_list(LM_Studio=free_url()))
    result = charlie("chat", "-m", "Hello?")
    assert result.exit_code == 1
    assert result.output.splitlines()[-1].startswith("Error: No model server: none is configured")
    assert "`charlie model install`" in result.output


def test_server_mode_uses_the_setting_without_looking(
    doubles: tuple[ScriptedLLMServer, ScriptedLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHARLIE_LLM", "server")
    monkeypatch.setenv("CHARLIE_LLM_PROBE", probe_list(LM_Studio=doubles[0].base_url))
    client = LLMClient.from_settings(load_settings())
    client.close()
    assert client.base_url == "http://localhost:1234/v1"  # the default, as before
    assert client.server is not None and client.server.kind == "configured"


def test_doctor_names_the_server_it_found(
    auto: None,
    charlie: Cli,
    doubles: tuple[ScriptedLLMServer, ScriptedLLMServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    studio = doubles[0]
    monkeypatch.setenv("CHARLIE_LLM_PROBE", probe_list(LM_Studio=studio.base_url))
    out = charlie("doctor", "--timeout", "5").output.splitlines()
    found = f"LM Studio at {studio.base_url} (found answering; none configured)"
    assert out[:3] == [
        f"Model server: {found}",  # logged as it is chosen
        f"Model server: {found}",  # the doctor's report
        f"Server: {studio.base_url}  model: test-model",
    ]


def test_builtin_without_a_model_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    if not runtime.installed():
        pytest.skip("xllamacpp (the charlie[local] extra) is not installed")
    monkeypatch.setenv("CHARLIE_LLM", "builtin")
    with pytest.raises(ModelRuntimeError) as raised:
        LLMClient.from_settings(load_settings())
    assert str(raised.value) == (
        "No model is chosen for the built-in runtime: install the starter model with "
        "`charlie model install`, or choose a GGUF file with `charlie model use PATH` "
        "(or CHARLIE_LLM_MODEL_FILE)."
    )


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("CHARLIE_LLM", "lmstudio", "set CHARLIE_LLM to 'auto'"),
        ("CHARLIE_LLM_PROBE", "LM Studio", "set CHARLIE_LLM_PROBE to the servers to look for"),
        ("CHARLIE_LLM_THREADS", "-1", "set CHARLIE_LLM_THREADS to a number of CPU threads"),
    ],
)
def test_a_bad_setting_names_itself(
    name: str, value: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as raised:
        load_settings()
    assert f"setting {name}: " in str(raised.value) and said in str(raised.value)


def test_the_app_started_without_a_model_server_answers_once_one_is_there(
    auto: None, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started with nothing to talk to, the app says so; a server started since (or the
    starter model installed from the app's banner) answers the next message, no restart."""
    from web_support import PASSWORD, signed_in

    from charlie.adapters.web import deps
    from charlie.users import ensure_user, set_password

    ensure_user(home.db, "alice", is_admin=True)
    set_password(home.db, "alice", PASSWORD)

    nowhere = free_url()
    monkeypatch.setenv("CHARLIE_LLM_PROBE", probe_list(LM_Studio=nowhere))
    monkeypatch.setattr(deps, "_LOOK_AGAIN_SECONDS", 0.0)
    client = signed_in("alice")
    first = client.post("/api/channels/private/chat", json={"text": "Hello?"})
    assert "No model server: none is configured" in first.text
    port = int(nowhere.rsplit(":", 1)[1].split("/")[0])
    with ScriptedLLMServer(port=port) as lm_studio:
        lm_studio.default = "Hello, I am here now."
        second = client.post("/api/channels/private/chat", json={"text": "Hello again?"})
        assert "Hello, I am here now." in second.text
    assert client.app.state.llm.server.describe().startswith(f"LM Studio at {nowhere}")
