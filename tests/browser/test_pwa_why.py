"""A suggested note says why in words; the numbers behind it wait behind a toggle."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from charlie import users
from charlie.retrieval import usage

from .pwa import Server, open_chat, send, sign_in, wait_for_reply

pytestmark = pytest.mark.browser


def test_a_suggestion_says_why_in_words_with_the_numbers_behind_a_toggle(
    page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    server.project("Kitchen")
    worktops = server.note(
        "kitchen", "Worktop oiling", "Oak worktops need hardwax oil every spring and autumn."
    )
    for title, body in [
        ("Tiles", "Grey floor tiles, laid in March."),
        ("Boiler", "The boiler is serviced every October."),
        ("Window seat", "A window seat in the bay, with storage under it."),
        ("Lights", "Pendant lights over the island, on a dimmer."),
    ]:
        server.note("kitchen", title, body)
    with server.home() as home:
        alice = users.get_user(home.db, "alice")
        for _ in range(3):
            usage.record(home.db, alice.id, "view", note=worktops)
    server.llm.reply("Oil them in spring.")
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    send(page, "When should the oak worktops be oiled?")
    wait_for_reply(page)

    card = page.get_by_role("region", name="Suggested notes").locator(".suggestion").first
    expect(card.locator(".suggestion-text button")).to_have_text("Worktop oiling")
    why = card.locator("p.why")
    expect(why).to_contain_text("matches 'oak', 'worktops'")
    expect(why).to_contain_text("you opened it 3×, most recently today")
    expect(why).not_to_contain_text("score")
    numbers = card.locator("details.why-numbers")
    expect(numbers.locator("summary")).to_have_text("Show the numbers")
    expect(numbers.locator("p")).to_be_hidden()
    numbers.locator("summary").click()
    expect(numbers.locator("p")).to_be_visible()
    expect(numbers.locator("p")).to_contain_text("score ")
    expect(numbers.locator("p")).to_contain_text("× weight 0.3)")
    card.scroll_into_view_if_needed()
    shoot(page, "pwa-why")
