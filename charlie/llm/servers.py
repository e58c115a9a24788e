"""Which model server answers Charlie: the one place that decides, from CHARLIE_LLM.

- `server`: CHARLIE_LLM_BASE_URL (default LM Studio's address), as it is.
- `builtin`: Charlie's own runtime (`charlie.llm.runtime`) on the chosen GGUF file.
- `auto` (the default): a base URL the person set (environment or charlie.toml) is used as
  it is; else the usual local servers are asked, quickly, in order (CHARLIE_LLM_PROBE:
  LM Studio :1234, Ollama :11434, llama.cpp :8080) and the first that answers with a model
  is used; else the built-in runtime, when it is installed and a model is chosen; else
  nothing, and the first request says the three ways out.

What was chosen, and why, is logged once (the CLI shows it) and told by `charlie doctor`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

import httpx

from charlie import tls
from charlie.config import Settings
from charlie.errors import ModelRuntimeError
from charlie.llm import models, runtime

log = logging.getLogger(__name__)

PROBE_SECONDS = 1.0  # a local server answers `GET /models` at once, or is not there
CONNECT_SECONDS = 0.3
Kind = Literal["configured", "found", "builtin", "none"]
INSTALL_LOCAL = "pip install 'charlie[local]'"


@dataclass
class ModelServer:
    """The server Charlie's client talks to, how it was chosen, and (built-in) the lease
    that keeps the runtime running until `release`."""

    kind: Kind
    base_url: str
    name: str  # "LM Studio", "built-in", "configured", …
    why: str  # one sentence: why this one
    lease: runtime.Lease | None = None

    def describe(self) -> str:
        """One line for people: what answers, e.g. "built-in (SmolLM2….gguf, 1 thread,
        context 8192)" or "LM Studio at http://127.0.0.1:1234/v1 (found answering; none
        configured)"."""
        if self.lease is not None:
            return f"built-in ({self.lease.runtime.describe()})"
        if self.kind == "found":
            return f"{self.name} at {self.base_url} ({self.why})"
        if self.kind == "configured":
            return f"configured: {self.base_url}"
        return "none found"

    def lend(self, pid: int) -> None:
        """Keep the built-in runtime (if that is what answers) for process `pid` too, until
        it ends (`charlie.llm.runtime.Lease.lend`)."""
        if self.lease is not None:
            self.lease.lend(pid)

    def release(self) -> None:
        """Give back the built-in runtime's lease (stopping it when this was its last user)."""
        if self.lease is not None:
            self.lease.release()


def locate(settings: Settings) -> ModelServer:
    """The model server to use under `settings`, reported once in the log. Starting the
    built-in runtime can take seconds (progress is logged); a model that cannot be loaded
    raises `ModelRuntimeError`. Finding nothing in `auto` is not an error here: the first
    request says what to do."""
    chosen = _choose(settings)
    # A server the person set is no news; finding none is said by the first request (and
    # the app), with what to do.
    news = chosen.kind in ("found", "builtin")
    log.log(logging.INFO if news else logging.DEBUG, "Model server: %s", chosen.describe())
    return chosen


def _choose(settings: Settings) -> ModelServer:
    if settings.llm == "server":
        return ModelServer("configured", settings.llm_base_url, "configured", "CHARLIE_LLM=server")
    if settings.llm == "builtin":
        return _builtin(settings, "CHARLIE_LLM=builtin")
    if "llm_base_url" in settings.model_fields_set:
        return ModelServer(
            "configured", settings.llm_base_url, "configured", "CHARLIE_LLM_BASE_URL is set"
        )
    heard: list[str] = []
    for name, url in settings.probes:
        answer = probe(url)
        if answer is None:
            heard.append(f"nothing at {name}'s {url}")
            continue
        if not answer:
            heard.append(f"{name} at {url} offers no model")
            continue
        return ModelServer("found", url, name, "found answering; none configured")
    looked = "; ".join(heard) or "CHARLIE_LLM_PROBE names none"
    model = models.chosen(settings)
    if not runtime.installed():
        missing = f"the built-in runtime is not installed ({INSTALL_LOCAL})"
    elif model is None:
        missing = "no built-in model is chosen"
    else:
        return _builtin(settings, f"no server configured or found ({looked})")
    return ModelServer(
        "none",
        settings.llm_base_url,
        "none",
        f"No model server: none is configured, none answered ({looked}), and {missing}. "
        "Start LM Studio, Ollama or llama-server; or install Charlie's built-in model with "
        "`charlie model install`; or set CHARLIE_LLM_BASE_URL to your server's URL, "
        "ending in /v1.",
    )


def probe(url: str) -> list[str] | None:
    """The models an OpenAI-compatible server at `url` lists (`GET /models`), or None when
    nothing answers there in the OpenAI format within `PROBE_SECONDS`."""
    timeout = httpx.Timeout(PROBE_SECONDS, connect=CONNECT_SECONDS)
    try:
        answer = httpx.get(f"{url}/models", timeout=timeout, verify=tls.context())
        data = answer.json()["data"] if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(data, list):
        return None  # something else listens there (a web app on :8080, say)
    return [str(item.get("id", "")) for item in data if isinstance(item, dict)]


def _builtin(settings: Settings, why: str) -> ModelServer:
    if not runtime.installed():
        raise ModelRuntimeError(
            "Charlie's built-in model runtime is not installed: install it with "
            f"`{INSTALL_LOCAL}` (./scripts/run does, where a wheel exists: Linux x86_64 and "
            "macOS arm64), or use a model server: set CHARLIE_LLM=server and "
            "CHARLIE_LLM_BASE_URL."
        )
    model = models.chosen(settings)
    if model is None:
        raise ModelRuntimeError(
            "No model is chosen for the built-in runtime: install the starter model with "
            "`charlie model install`, or choose a GGUF file with `charlie model use PATH` "
            "(or CHARLIE_LLM_MODEL_FILE)."
        )
    lease = runtime.acquire(
        settings.local_home,
        model,
        threads=settings.llm_threads,
        context=settings.llm_context,
        keep_alive=settings.llm_keep_alive,
        say=log.info,
    )
    return ModelServer("builtin", lease.base_url, "built-in", why, lease)
