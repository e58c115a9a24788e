"""Helpers for the PWA's browser tests: the app served on loopback, and a person's actions."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from llm_double import ScriptedLLMServer
from playwright.sync_api import Page, expect

from charlie import projects
from charlie.adapters.web.app import create_app
from charlie.config import Settings
from charlie.home import Home
from charlie.notes import files as notes

PASSWORD = "correct horse battery"
USERS = ("alice", "bob")
DESKTOP = {"width": 1280, "height": 820}
PHONE = {"width": 390, "height": 844}


@dataclass
class Server:
    """The running app: its address, settings, data home, and the LLM double behind it."""

    url: str
    settings: Settings
    llm: ScriptedLLMServer

    def home(self) -> Home:
        return Home.open(self.settings)

    def project(self, name: str, **options: Any) -> str:
        with self.home() as home:
            return projects.create_project(home, name, **options).slug

    def note(self, project: str, title: str, body: str, tags: tuple[str, ...] = ()) -> str:
        with self.home() as home:
            return notes.create_note(projects.get_project(home, project), title, body, tags).key

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.home() as home:
            return [tuple(row) for row in home.db.execute(sql, params).fetchall()]

    def rows_become(
        self, sql: str, expected: list[tuple[Any, ...]], *params: Any, timeout: float = 15.0
    ) -> None:
        """Wait until `sql` reads `expected`: for what the page sends without waiting for
        the answer (a usage event), which a loaded machine may store a moment later."""
        deadline = time.monotonic() + timeout
        while (found := self.rows(sql, *params)) != expected:
            assert time.monotonic() < deadline, f"{sql} read {found}, not {expected}"
            time.sleep(0.05)


def serve(settings: Settings) -> tuple[str, Callable[[], None]]:
    """Start the real app with uvicorn in a thread on 127.0.0.1; returns (url, stop)."""
    # IPPROTO_TCP named: asyncio turns Nagle's algorithm off only on a socket that says it
    # is TCP, and a bare socket.socket() says proto 0 — every response on a kept-alive
    # connection then waited ~40 ms for the browser's delayed ACK (a page load: ~0.8 s).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(settings),
        log_level="warning",
        access_log=False,
        lifespan="on",
        ws="websockets-sansio",  # the PWA's hands-free mode listens over a WebSocket
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn:{port}", daemon=True
    )
    thread.start()
    ticks = threading.Event()
    for _ in range(200):  # up to 10 s
        if server.started or not thread.is_alive():
            break
        ticks.wait(0.05)
    if not server.started:
        sock.close()
        raise RuntimeError("uvicorn did not start (see the log above)")

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()

    return f"http://127.0.0.1:{port}", stop


@dataclass
class Console:
    """Console errors and uncaught exceptions of the pages it watches."""

    errors: list[str] = field(default_factory=list)
    allowed: list[re.Pattern[str]] = field(default_factory=list)

    def watch(self, page: Page) -> Page:
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        return page

    def _on_console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(f"{message.text} ({message.location.get('url', '')})")

    def allow(self, pattern: str) -> None:
        """Expect console errors matching `pattern` (e.g. the 401 of a wrong password)."""
        self.allowed.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.allowed)]


# ---------------------------------------------------------------- what a person does


def sign_in(page: Page, name: str = "alice", password: str = PASSWORD) -> Page:
    """Open the app and sign in through the form."""
    page.goto("/")
    form = page.locator("#signin-form")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Password").fill(password)
    form.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who")).to_have_text(name)  # hidden on a phone, but there
    page.locator("#chat-view").wait_for()
    return page


def open_chat(page: Page, slug: str, title: str) -> Page:
    """Go to a channel's chat and wait until it is the one shown."""
    page.goto(f"/#/chat/{slug}")
    expect(page.locator("#chat-heading")).to_have_text(title)
    return page


def send(page: Page, text: str) -> None:
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def wait_for_reply(page: Page) -> None:
    """Until the newest answer has finished streaming, and its stream has ended: what comes
    after the reply too (suggested notes, a distillation), though the composer is free
    before (test_pwa_answer.py)."""
    page.wait_for_function(
        "() => { const m = [...document.querySelectorAll('.msg-assistant')].pop();"
        " return m && !m.hasAttribute('aria-busy') && !m.dataset.stream; }"
    )
