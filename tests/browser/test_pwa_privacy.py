"""A household shares projects, but each person's private channel is theirs alone."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, expect

from .pwa import Server, open_chat, send, sign_in, wait_for_reply

pytestmark = pytest.mark.browser


def test_a_second_person_cannot_see_the_first_ones_private_channel(
    new_context: Callable[..., BrowserContext], server: Server
) -> None:
    server.project("Kitchen")
    server.llm.default = "Understood."

    alice = sign_in(new_context().new_page(), "alice")
    send(alice, "My locker code is 4417.")
    wait_for_reply(alice)
    alice.get_by_role("complementary", name="Memory").get_by_role(
        "button", name="Edit decisions"
    ).click()
    alice.get_by_role("textbox", name="Decisions").fill("Keep the locker code 4417 secret")
    alice.get_by_role("button", name="Save").click()
    expect(alice.locator("#memory-decisions li .decision-text")).to_have_text(
        ["Keep the locker code 4417 secret"]
    )
    open_chat(alice, "kitchen", "Kitchen")
    send(alice, "Shared: oak worktops.")
    wait_for_reply(alice)

    bob = sign_in(new_context().new_page(), "bob")
    expect(bob.get_by_label("Project", exact=True)).to_have_value("private")
    expect(bob.locator("#messages-empty")).to_contain_text("Your private channel is empty")
    expect(bob.locator("#memory-decisions")).to_contain_text("No decisions yet.")
    expect(bob.locator("body")).not_to_contain_text("4417")
    # Nor through the API with bob's session: "private" is always the caller's own.
    assert bob.request.get("/api/channels/private/messages").json() == []
    assert bob.request.get("/api/channels/private/memory").json()["decisions"] == []
    history = bob.request.get("/api/channels/private/memory/history").json()
    assert "4417" not in str(history)

    # The shared project is the household's: bob sees alice's message there.
    open_chat(bob, "kitchen", "Kitchen")
    expect(bob.locator(".msg-user")).to_contain_text(["Shared: oak worktops."])
    expect(bob.locator("body")).not_to_contain_text("4417")
