"""Settings → Tokens for other apps: make a token, see its secret once, copy it, revoke it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from charlie.errors import Unauthorized
from charlie.household import tokens

from .pwa import Server, sign_in

pytestmark = pytest.mark.browser


def test_a_token_is_made_shown_once_and_revoked(
    new_context: Callable[..., BrowserContext], server: Server, shoot: Callable[[Page, str], None]
) -> None:
    context = new_context(permissions=["clipboard-read", "clipboard-write"])
    page = sign_in(context.new_page(), "bob")
    page.goto("/#/settings/private")
    card = page.get_by_role("region", name="Tokens for other apps (MCP)")
    expect(card.locator("#mcp-url")).to_have_text(f"{server.url}/mcp")
    expect(card.locator("#token-list")).to_have_text("No tokens yet.")

    card.get_by_label("What is it for?").fill("Claude Desktop")
    card.get_by_label("Read-only").check()
    card.get_by_role("button", name="Make a token").click()
    shown = card.locator("#token-secret-value")
    expect(shown).to_have_text(tokens.SECRET_RE)
    secret = shown.inner_text()
    expect(card.locator("#token-secret")).to_contain_text("it will not be shown again")
    row = card.locator("#token-list li")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Claude Desktop")
    expect(row.locator(".badge")).to_have_text("read-only")
    expect(row).to_contain_text("never used")
    with server.home() as home:  # the list is fetched after the secret is shown: this uses it
        user, token = tokens.verify(home.db, secret)
    assert (user.name, token.label, token.read_only) == ("bob", "Claude Desktop", True)

    card.get_by_role("button", name="Copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == secret

    expect(card.get_by_label("What is it for?")).to_have_value("")
    card.scroll_into_view_if_needed()
    shoot(page, "settings-tokens")

    # Back to Settings later: the secret is gone for good.
    page.goto("/#/notes")
    page.goto("/#/settings/private")
    expect(card.locator("#token-secret")).to_be_hidden()
    assert secret not in page.content()
    expect(row).to_contain_text("last used")

    revoke = row.get_by_role("button", name="Revoke")
    revoke.click()
    expect(revoke).to_have_text("Revoke for good?")  # one press only asks
    with server.home() as home:
        assert tokens.verify(home.db, secret)[0].name == "bob"
    revoke.click()
    expect(row.locator(".badge-error")).to_have_text("revoked")
    expect(row.get_by_role("button")).to_have_count(0)
    with server.home() as home, pytest.raises(Unauthorized, match="revoked"):
        tokens.verify(home.db, secret)


def test_a_too_long_label_is_told_and_nothing_is_made(
    new_context: Callable[..., BrowserContext], server: Server
) -> None:
    page = sign_in(new_context().new_page(), "alice")
    page.goto("/#/settings/private")
    card = page.get_by_role("region", name="Tokens for other apps (MCP)")
    # The field stops at 80 characters (a longer one sent by hand is refused: test_tokens.py).
    card.get_by_label("What is it for?").fill("x" * 100)
    expect(card.get_by_label("What is it for?")).to_have_value("x" * 80)
    card.get_by_role("button", name="Make a token").click()
    expect(card.locator("#token-secret-value")).to_be_visible()
    assert server.rows("SELECT label FROM api_tokens") == [("x" * 80,)]
