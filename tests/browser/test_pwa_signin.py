"""Signing in and out of the PWA."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from .pwa import PASSWORD, Console, sign_in

pytestmark = pytest.mark.browser


def test_sign_in_shows_the_private_channel(
    page: Page, console: Console, shoot: Callable[[Page, str], None]
) -> None:
    page.goto("/")
    expect(page.get_by_role("heading", name="Sign in to Charlie")).to_be_visible()
    expect(page.locator("#sections")).to_be_hidden()  # nothing but the form before signing in
    shoot(page, "sign-in")

    console.allow(r"status of 401")  # the browser logs the refused sign-in itself
    page.locator("#signin-form").get_by_label("Name").fill("alice")
    page.locator("#signin-form").get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong name or password.")

    page.locator("#signin-form").get_by_label("Password").fill(PASSWORD)
    page.locator("#signin-form").get_by_label("Password").press("Enter")
    expect(page.locator("#who")).to_have_text("alice")
    expect(page.get_by_label("Project", exact=True)).to_have_value("private")
    expect(page.locator("#messages-empty")).to_contain_text("Your private channel is empty")
    expect(page.get_by_label("Message", exact=True)).to_be_focused()


def test_session_survives_a_reload_and_sign_out_ends_it(page: Page) -> None:
    sign_in(page)
    page.reload()
    expect(page.locator("#who")).to_have_text("alice")
    # the app's start-up requests (GET /api/voice is slow on a loaded machine) answered first:
    # one still out at sign-out is answered 401, which the browser logs as a console error
    page.wait_for_load_state("networkidle")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in to Charlie")).to_be_visible()
    me = page.request.get("/api/me")
    assert me.status == 401
