"""The PWA's note editor never saves over a change it did not show: a note saved by hand
(in an editor, by Charlie, by someone else) while it was open is kept, and the person is
told to reload, with the text they typed still in the form."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .pwa import Console, Server, sign_in

pytestmark = pytest.mark.browser


def test_saving_over_a_hand_edit_is_refused_and_the_edit_kept(
    page: Page, server: Server, console: Console
) -> None:
    console.allow(r"status of 409 .*/api/notes/auth/password-hashing")  # the browser logs it
    server.project("Auth")
    server.note("auth", "Password hashing", "We hash passwords with scrypt.", ("crypto",))
    path = server.settings.projects_dir / "auth" / "notes" / "password-hashing.md"
    sign_in(page)
    page.goto("/#/notes/auth/auth/password-hashing")
    pane = page.locator("#note-pane")
    pane.get_by_role("button", name="Edit").click()
    pane.get_by_label("Text (markdown)").fill("Typed in the app.")

    path.write_text(path.read_text().replace("scrypt", "argon2id"))  # saved in Obsidian
    pane.get_by_role("button", name="Save").click()
    expect(page.locator("#toast")).to_contain_text("was changed")
    expect(page.locator("#toast")).to_contain_text("reload the note")
    expect(pane.get_by_label("Text (markdown)")).to_have_value("Typed in the app.")
    assert "argon2id" in path.read_text() and "Typed in the app." not in path.read_text()

    page.reload()  # now the editor shows the hand edit, and saving over it is fine
    pane.get_by_role("button", name="Edit").click()
    expect(pane.get_by_label("Text (markdown)")).to_have_value("We hash passwords with argon2id.\n")
    pane.get_by_label("Text (markdown)").fill("We hash passwords with argon2id (m=64 MiB).")
    pane.get_by_role("button", name="Save").click()
    expect(pane.locator(".note-body")).to_contain_text("argon2id (m=64 MiB)")
    assert "argon2id (m=64 MiB)" in path.read_text()
