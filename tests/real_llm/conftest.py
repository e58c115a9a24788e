"""Contract tests against a real llama.cpp server: `./scripts/real-llm` runs them.

The script builds `llama-server` once (cached outside the repository), starts it on
loopback with the packaged Gemma 3 270M, and sets CHARLIE_REAL_LLM_URL (and
CHARLIE_REAL_LLM_CTX, the window it gave the server). Without a real server every test
here is skipped, and the skip says why: they never pass without having run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
# A real small model on 2 cores reads a full window (8192 tokens of Qwen) in about 4 minutes:
# these tests get longer than the suite's 5-minute limit for a hung test.
REAL_MODEL_TIMEOUT = 1800


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.timeout(REAL_MODEL_TIMEOUT))


# Read when this file is imported: the autouse `charlie_home` fixture clears every
# CHARLIE_* variable before each test.
REAL_URL = os.environ.get("CHARLIE_REAL_LLM_URL", "").rstrip("/")
REAL_CTX = os.environ.get("CHARLIE_REAL_LLM_CTX", "")
REAL_LOG = os.environ.get("CHARLIE_REAL_LLM_LOG", "")
SKIP_REASON = (
    "no real llama.cpp server: run ./scripts/real-llm, which builds llama-server once, "
    "starts it on loopback and sets CHARLIE_REAL_LLM_URL"
)


@dataclass(frozen=True)
class RealServer:
    """The llama.cpp server under test."""

    url: str  # its OpenAI-compatible base URL, ending in /v1
    window: int  # the context window it was started with (-c), as /props reports it
    log: Path | None  # its log file, where scripts/real-llm wrote one

    @property
    def root(self) -> str:
        return self.url.removesuffix("/v1")


@pytest.fixture(scope="session")
def real_server() -> RealServer:
    """The server, checked once: a given URL where nothing answers is a failure, not a skip."""
    if not REAL_URL:
        pytest.skip(SKIP_REASON)
    root = REAL_URL.removesuffix("/v1")
    try:
        props = httpx.get(f"{root}/props", timeout=30).json()
    except httpx.HTTPError as exc:
        pytest.fail(f"CHARLIE_REAL_LLM_URL={REAL_URL} is set but {root}/props failed: {exc}")
    window = int(props["default_generation_settings"]["n_ctx"])
    if REAL_CTX:
        assert window == int(REAL_CTX), f"the server reports a window of {window}"
    return RealServer(REAL_URL, window, Path(REAL_LOG) if REAL_LOG else None)


@pytest.fixture(autouse=True)
def charlie_on_real_server(
    charlie_home: Path, monkeypatch: pytest.MonkeyPatch, real_server: RealServer
) -> Iterator[RealServer]:
    """Charlie pointed at the real server (its first model), with room to think slowly."""
    monkeypatch.setenv("CHARLIE_LLM_BASE_URL", real_server.url)
    monkeypatch.setenv("CHARLIE_LLM_TIMEOUT", "600")
    yield real_server
