"""Notes in the PWA: search with "why this result", open (a view), edit, tags, new notes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from .pwa import Server, sign_in

pytestmark = pytest.mark.browser


def auth_notes(server: Server) -> None:
    server.project("Auth")
    server.note(
        "auth",
        "JWT refresh tokens",
        "Rotate the `refresh_token` on every use.\n\n- access tokens live 15 minutes\n"
        "- refresh tokens live 30 days",
        ("auth", "security"),
    )
    server.note(
        "auth",
        "Session cookies",
        "Cookies are **HttpOnly** and SameSite=Lax; sessions last 30 days.",
        ("security",),
    )
    server.note("auth", "Password hashing", "We hash passwords with scrypt.", ("crypto",))


def test_search_explains_results_and_opening_a_note_counts_as_a_view(
    page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    auth_notes(server)
    sign_in(page)
    page.goto("/#/notes/auth")
    expect(page.locator("#notes-status")).to_have_text("3 notes")

    page.get_by_role("searchbox", name="Search notes").fill("refresh_token rotation")
    page.get_by_role("button", name="Search", exact=True).click()
    results = page.locator("#notes-results .result")
    expect(results.first.locator(".note-link")).to_have_text("JWT refresh tokens")
    expect(page.locator("#notes-status")).to_contain_text("for “refresh_token rotation”")
    why = results.first.locator("details.why")
    why.locator("summary").click()
    expect(why.locator(".why-line")).to_contain_text("score")
    expect(why.locator(".term").first).to_be_visible()
    expect(why).to_contain_text("words (BM25)")

    results.first.locator(".note-link").click()
    note = page.locator("#note-pane")
    expect(note.get_by_role("heading", name="JWT refresh tokens")).to_be_focused()
    expect(note.locator(".note-body code")).to_have_text("refresh_token")
    expect(note.locator(".note-body li")).to_have_count(2)
    assert page.url.endswith("#/notes/auth/auth/jwt-refresh-tokens")
    shoot(page, "notes-search")
    views = server.rows("SELECT note FROM usage_events WHERE kind = 'view'")
    assert views == [("auth/jwt-refresh-tokens",)]

    # The boost from that view is explained the next time the note ranks.
    page.get_by_role("button", name="Search", exact=True).click()
    why = results.first.locator("details.why")
    why.locator("summary").click()
    expect(why).to_contain_text("Boosted because")


def test_clicking_a_tag_records_its_use_and_filters(page: Page, server: Server) -> None:
    auth_notes(server)
    sign_in(page)
    page.goto("/#/notes/auth")
    page.locator("#tag-filter").get_by_role("button", name="#security").click()
    expect(page.locator("#notes-status")).to_have_text("2 notes tagged #security")
    links = page.locator("#notes-results .note-link")
    expect(links).to_have_count(2)
    assert sorted(links.all_inner_texts()) == ["JWT refresh tokens", "Session cookies"]
    server.rows_become("SELECT tag FROM usage_events WHERE kind = 'tag'", [("security",)])
    page.locator("#tag-filter").get_by_role("button", name="Show all").click()
    expect(page.locator("#notes-status")).to_have_text("3 notes")


def test_edit_tag_and_create_notes(page: Page, server: Server) -> None:
    auth_notes(server)
    sign_in(page)
    page.goto("/#/notes/auth/auth/password-hashing")
    pane = page.locator("#note-pane")
    expect(pane.get_by_role("heading", name="Password hashing")).to_be_visible()

    pane.get_by_role("button", name="Edit").click()
    pane.get_by_label("Text (markdown)").fill("We hash passwords with **scrypt** (n=2^15).")
    pane.get_by_role("button", name="Save").click()
    expect(pane.locator(".note-body strong")).to_have_text("scrypt")
    on_disk = (server.settings.projects_dir / "auth" / "notes" / "password-hashing.md").read_text()
    assert "We hash passwords with **scrypt** (n=2^15)." in on_disk

    pane.get_by_label("Add a tag").fill("hashing")
    pane.get_by_label("Add a tag").press("Enter")
    expect(pane.locator(".note-tags .tag")).to_have_text(["#crypto", "#hashing"])
    pane.get_by_role("button", name="Remove tag crypto").click()
    expect(pane.locator(".note-tags .tag")).to_have_text(["#hashing"])

    page.get_by_role("button", name="New note").click()
    pane.get_by_label("Title").fill("Two-factor login")
    pane.get_by_label("Text (markdown)").fill("TOTP first, passkeys later.")
    pane.get_by_label("Tags").fill("auth, 2fa")
    pane.get_by_role("button", name="Create note").click()
    expect(pane.get_by_role("heading", name="Two-factor login")).to_be_visible()
    expect(page.locator("#notes-status")).to_have_text("4 notes")
    assert (server.settings.projects_dir / "auth" / "notes" / "two-factor-login.md").exists()


def test_an_empty_project_says_so(page: Page, server: Server) -> None:
    server.project("Garden")
    sign_in(page)
    page.goto("/#/notes/garden")
    expect(page.locator("#notes-status")).to_contain_text("No notes in Garden yet")
    page.get_by_role("searchbox", name="Search notes").fill("roses")
    page.get_by_role("searchbox", name="Search notes").press("Enter")
    expect(page.locator("#notes-status")).to_contain_text("Nothing found for “roses”")


def test_a_banner_says_search_results_are_incomplete_while_the_index_fills(
    page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    from charlie.retrieval.embeddings import from_settings
    from charlie.retrieval.index import Index

    auth_notes(server)
    with server.home() as home:
        Index(home, from_settings(server.settings))  # a new index file, nothing in it yet
    sign_in(page)
    banner = page.locator("#index-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Search results are incomplete.")
    expect(banner).to_contain_text("being built from the note files (0 notes in so far)")
    shoot(page, "index-filling")
    page.goto("/#/notes/auth")
    page.get_by_role("searchbox", name="Search notes").fill("password hashing")
    page.get_by_role("button", name="Search", exact=True).click()  # this fills the index
    results = page.locator("#notes-results .result")
    expect(results.first.locator(".note-link")).to_have_text("Password hashing")
    expect(banner).to_be_hidden(timeout=30_000)  # the next health check finds it whole
