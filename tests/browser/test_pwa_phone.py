"""The app on a phone (390x844, touch): measured, not eyeballed.

The header is one row (at most 64 px), the message box is one line until the person writes
more, the "model unreachable" banner is one compact line that goes away with the next reply,
and opening the memory's History brings it into view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from charlie import projects
from charlie.conversations import shared_channel
from charlie.memory import layers as memory
from charlie.memory.layers import Memory

from .pwa import PHONE, Server, open_chat, send, sign_in, wait_for_reply

pytestmark = pytest.mark.browser

HEADER_MAX = 64  # px
ONE_LINE_MAX = 46  # px: one line of text in the message box, with its padding and border
BANNER_MAX = 0.08  # of the screen's height


def phone(new_context: Callable[..., BrowserContext]) -> Page:
    return new_context(viewport=PHONE, is_mobile=True, has_touch=True).new_page()


def box(page: Page, selector: str) -> dict[str, Any]:
    found = page.locator(selector).bounding_box()
    assert found is not None, f"{selector} is not on screen"
    return found


def test_the_chat_fits_a_phone(
    new_context: Callable[..., BrowserContext],
    server: Server,
    shoot: Callable[[Page, str], None],
) -> None:
    server.project("Kitchen")
    server.llm.reply("Oak worktops: warm, and cheaper than marble. Oil them twice a year.")
    page = sign_in(phone(new_context))
    open_chat(page, "kitchen", "Kitchen")
    header = box(page, "#topbar")
    assert header["height"] <= HEADER_MAX, header
    for link in ("Chat", "Notes", "Settings"):  # every section one tap away
        expect(page.locator("#sections").get_by_role("link", name=link)).to_be_visible()
    expect(page.get_by_label("Project", exact=True)).to_be_visible()

    message = page.get_by_label("Message", exact=True)
    one_line = box(page, "#chat-input")["height"]
    assert one_line <= ONE_LINE_MAX, one_line
    composer = box(page, "#composer")["height"]
    message.fill("First line\nsecond line\nthird line")
    grown = box(page, "#chat-input")["height"]
    assert grown >= one_line + 30, (one_line, grown)  # it grows with what is written
    message.fill("")
    assert box(page, "#chat-input")["height"] == one_line

    send(page, "What did we decide about the worktops?")
    wait_for_reply(page)
    expect(page.locator(".msg-assistant .msg-body")).to_contain_text("Oak worktops")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    scroll = box(page, "#messages-scroll")
    assert scroll["height"] >= PHONE["height"] - HEADER_MAX - composer - 60  # room to read
    shoot(page, "phone-chat")


def test_the_model_banner_is_compact_and_goes_with_the_next_reply(
    new_context: Callable[..., BrowserContext], server: Server
) -> None:
    page = sign_in(phone(new_context))
    page.wait_for_load_state("networkidle")  # the first health check has answered
    server.llm.error(503, "Model is loading")
    send(page, "Are you there?")
    wait_for_reply(page)
    banner = page.locator("#llm-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Language model unreachable.")
    height = box(page, "#llm-banner")["height"]
    assert height <= BANNER_MAX * PHONE["height"], height
    retry = box(page, "#llm-retry")
    assert retry["x"] + retry["width"] <= PHONE["width"]  # whole, on the screen
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    banner.get_by_role("button", name="Details").click()  # the whole message, on request
    expect(page.locator("#llm-text")).to_contain_text("Model is loading")
    assert box(page, "#llm-banner")["height"] > height

    server.llm.reply("Yes, I'm here.")
    send(page, "Are you there now?")
    wait_for_reply(page)
    expect(page.locator(".msg-assistant .msg-body").last).to_have_text("Yes, I'm here.")
    expect(banner).to_be_hidden()


def test_opening_the_history_brings_it_into_view(
    new_context: Callable[..., BrowserContext], server: Server
) -> None:
    server.project("Kitchen")
    with server.home() as home:  # a memory that fills the screen, as one does after a while
        channel = shared_channel(home, projects.get_project(home, "kitchen"))
        decisions = [f"Decision {n}: oak worktops, oiled twice a year." for n in range(12)]
        memory.save(
            home,
            channel,
            Memory(summary="A kitchen renovation. " * 20, decisions=decisions),
            "edit",
        )
    page = sign_in(phone(new_context))
    open_chat(page, "kitchen", "Kitchen")
    page.get_by_role("button", name="Memory", exact=True).click()
    toggle = box(page, "#memory-history-toggle")
    assert toggle["y"] < PHONE["height"]
    page.get_by_role("button", name="History").click()
    history = page.get_by_role("region", name="History")
    expect(history.get_by_role("listitem").first).to_be_visible()
    expect(history.get_by_role("listitem").first).to_contain_text("edit")  # loaded
    page.wait_for_function(  # its heading near the top of the screen, not below the fold
        "() => { const r = document.querySelector('#history-heading').getBoundingClientRect();"
        " return r.top >= 0 && r.top < window.innerHeight / 2; }"
    )
    assert box(page, "#history-heading")["y"] < PHONE["height"] / 2
