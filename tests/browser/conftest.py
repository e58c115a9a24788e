"""Fixtures for the PWA's browser tests: the real app on loopback, a real headless Chromium.

Each test gets its own data home (the autouse fixture in tests/conftest.py), the scripted
OpenAI-compatible LLM double (`llm`), two household members with passwords, and the real
FastAPI app served by uvicorn in a background thread on 127.0.0.1. The browser is Debian's
Chromium (`/usr/bin/chromium`, or `PWA_CHROMIUM`), driven by Playwright's sync API;
Playwright never downloads a browser of its own. Every page is watched: a console error
fails the test unless the test expects it.

Screenshots of the main screens are written only when `PWA_SCREENSHOTS` names a folder:

    PWA_SCREENSHOTS=docs/screenshots .venv/bin/python -m pytest tests/browser
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_double import ScriptedLLMServer
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from charlie import users
from charlie.config import load_settings
from charlie.home import Home

from .pwa import DESKTOP, PASSWORD, USERS, Console, Server, serve

CHROMIUM = os.environ.get("PWA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 15_000
# what an assertion waits for, as an action does: 5 s (Playwright's own) was short on a
# busy machine for the page's first answers from the server
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        message = f"{CHROMIUM} is missing: `apt-get install -y chromium` (or set PWA_CHROMIUM)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def server(llm: ScriptedLLMServer) -> Iterator[Server]:
    """The real app, with alice (admin) and bob able to sign in, talking to the LLM double."""
    settings = load_settings()
    with Home.open(settings) as home:
        for name in USERS:
            users.ensure_user(home.db, name, is_admin=name == "alice")
            users.set_password(home.db, name, PASSWORD)
    url, stop = serve(settings)
    yield Server(url, settings, llm)
    stop()


@pytest.fixture
def console() -> Iterator[Console]:
    """Watches every page the fixtures below open; the test fails on a console error."""
    watcher = Console()
    yield watcher
    assert watcher.unexpected() == [], "console errors on the page"


@pytest.fixture
def new_context(
    browser: Browser, server: Server, console: Console
) -> Iterator[Callable[..., BrowserContext]]:
    """Make a fresh browser profile (cookies, service worker, cache) for one person."""
    made: list[BrowserContext] = []

    def make(viewport: dict[str, int] | None = None, **options: Any) -> BrowserContext:
        context = browser.new_context(
            base_url=server.url,
            viewport=viewport or DESKTOP,
            service_workers="allow",
            locale="en-GB",
            timezone_id="Europe/London",
            **options,
        )
        context.set_default_timeout(TIMEOUT_MS)
        context.on("page", console.watch)
        made.append(context)
        return context

    yield make
    for context in made:
        context.close()


@pytest.fixture
def page(new_context: Callable[..., BrowserContext]) -> Page:
    return new_context().new_page()


@pytest.fixture
def shoot() -> Callable[[Page, str], None]:
    """Save a screenshot of the page to $PWA_SCREENSHOTS/<name>.png, when that is set."""
    folder = os.environ.get("PWA_SCREENSHOTS")

    def take(page: Page, name: str) -> None:
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            page.wait_for_timeout(250)  # let transitions and the caret settle
            page.screenshot(path=str(Path(folder) / f"{name}.png"))

    return take
