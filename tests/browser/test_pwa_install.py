"""The PWA as an installable app: manifest, icons, service worker, and the offline shell."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from .pwa import Console, Server, sign_in

pytestmark = pytest.mark.browser

STATIC = Path(__file__).resolve().parents[2] / "charlie/adapters/web/static"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def controlled(page: Page) -> None:
    """Wait for the service worker, then reload so that it controls the page."""
    page.evaluate("async () => { await navigator.serviceWorker.ready; }")
    page.reload()
    page.wait_for_function("() => navigator.serviceWorker.controller !== null")


def test_manifest_is_linked_and_complete(page: Page) -> None:
    page.goto("/")
    href = page.locator("link[rel=manifest]").get_attribute("href")
    assert href == "/manifest.webmanifest"
    answer = page.request.get(href)
    assert answer.ok
    assert answer.headers["content-type"].startswith("application/manifest+json")
    manifest = answer.json()
    assert manifest["name"] == "Charlie"
    assert manifest["short_name"] == "Charlie"
    assert manifest["start_url"] == "/"
    assert manifest["display"] == "standalone"
    assert manifest["theme_color"].startswith("#")
    assert manifest["background_color"].startswith("#")
    sizes = {}
    for icon in manifest["icons"]:
        image = page.request.get(icon["src"])
        assert image.ok
        assert image.headers["content-type"] == "image/png"
        width, height = png_size(image.body())
        assert icon["sizes"] == f"{width}x{height}"
        sizes.setdefault(icon.get("purpose", "any"), []).append(width)
    assert sorted(sizes["any"]) == [192, 512]
    assert sizes["maskable"] == [512]


def test_service_worker_controls_the_page_after_a_reload(page: Page) -> None:
    page.goto("/")
    controlled(page)
    script = page.evaluate("() => navigator.serviceWorker.controller.scriptURL")
    assert script.endswith("/sw.js")
    scope = page.evaluate("async () => (await navigator.serviceWorker.ready).scope")
    assert scope.endswith(":" + page.url.split(":")[2].split("/")[0] + "/")


def test_offline_the_shell_opens_and_says_so(
    page: Page, server: Server, console: Console, shoot: Callable[[Page, str], None]
) -> None:
    console.allow("ERR_INTERNET_DISCONNECTED")  # its tries to reach the server meanwhile
    sign_in(page)
    controlled(page)
    expect(page.locator("#who")).to_have_text("alice")
    page.wait_for_load_state("networkidle")  # no request cut off half-way

    page.context.set_offline(True)
    page.reload()
    expect(page.locator(".brand")).to_be_visible()  # the shell came from the cache
    banner = page.locator("#offline-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Offline.")
    expect(page.get_by_role("heading", name="You're offline")).to_be_visible()
    shoot(page, "offline")

    page.context.set_offline(False)  # back online: Charlie reconnects by itself, on its
    # timer where the browser sends no "online" event (Chromium 150 sends none here)
    expect(page.locator("#who")).to_have_text("alice")
    expect(banner).to_be_hidden()
    expect(page.get_by_label("Message", exact=True)).to_be_visible()


def test_the_shell_is_cached_and_the_api_never_is(page: Page, server: Server) -> None:
    sign_in(page)  # signing in and opening the chat calls the API several times
    controlled(page)
    expect(page.locator("#memory-sections")).to_contain_text("No decisions yet.")
    cached = page.evaluate(
        "async () => { const paths = [];"
        " for (const name of await caches.keys()) {"
        "   const cache = await caches.open(name);"
        "   for (const r of await cache.keys()) paths.push(new URL(r.url).pathname);"
        " } return paths; }"
    )
    assert {"/", "/app.js", "/style.css", "/manifest.webmanifest"} <= set(cached)
    # every script the page loads opens offline too (api-types.js holds only JSDoc types)
    scripts = {f"/{p.name}" for p in STATIC.glob("*.js")} - {"/sw.js", "/api-types.js"}
    assert scripts <= set(cached), f"not in sw.js's SHELL: {sorted(scripts - set(cached))}"
    assert [path for path in cached if path.startswith("/api/")] == []


def test_opened_while_the_server_is_down_the_app_comes_back_by_itself(
    page: Page, server: Server, console: Console
) -> None:
    console.allow("ERR_CONNECTION_REFUSED")
    sign_in(page)
    down = "**/api/**"  # the device is online; Charlie's server does not answer
    page.route(down, lambda route: route.abort("connectionrefused"))
    page.reload()
    banner = page.locator("#offline-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Charlie's server can't be reached")
    page.unroute(down)  # the server is back: no "online" event comes for that
    expect(page.locator("#who")).to_have_text("alice")  # by itself: no "Try again", no reload
    expect(banner).to_be_hidden()
