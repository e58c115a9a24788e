"""Nothing floats over what a person needs: the news that the memory changed never covers a
decision or where it came from, and the sticky row of Settings groups never covers the top of
the card brought into view or focused. Measured with bounding boxes, on a phone and a laptop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from support.distilling import distill_answer

from charlie import projects
from charlie.conversations import shared_channel
from charlie.memory import layers as memory
from charlie.memory.layers import Memory

from .pwa import PHONE, Server, open_chat, send, sign_in, wait_for_reply

pytestmark = pytest.mark.browser

LAPTOP = {"width": 1280, "height": 800}
SIZES = pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["phone", "laptop"])

# Every box `over` (the floating ones) that intersects a box of `under` on screen.
OVERLAPS = """([over, under]) => {
  const shown = (el) => { const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.bottom > 0 && r.top < innerHeight ? r : null; };
  const found = [];
  for (const a of document.querySelectorAll(over)) {
    const r = shown(a);
    if (!r) continue;
    for (const b of document.querySelectorAll(under)) {
      const s = shown(b);
      if (s && r.left < s.right && s.left < r.right && r.top < s.bottom && s.top < r.bottom)
        found.push(`${a.id || a.className} over "${b.textContent.trim().slice(0, 40)}"`);
    }
  }
  return found;
}"""


def overlaps(page: Page, over: str, under: str) -> list[str]:
    found: list[str] = page.evaluate(OVERLAPS, [over, under])
    return found


def box(page: Page, selector: str) -> dict[str, Any]:
    found = page.locator(selector).first.bounding_box()
    assert found is not None, f"{selector} is not on screen"
    return found


@SIZES
def test_the_memory_update_covers_no_decision(
    new_context: Callable[..., BrowserContext],
    server: Server,
    size: dict[str, int],
    shoot: Callable[[Page, str], None],
) -> None:
    server.project("Kitchen", distill_every=2)
    with server.home() as home:  # a memory longer than the screen, as one is after a while
        channel = shared_channel(home, projects.get_project(home, "kitchen"))
        decisions = [f"Cupboard {n} is oak, oiled twice a year." for n in range(12)]
        memory.save(
            home, channel, Memory(summary="A kitchen renovation.", decisions=decisions), "edit"
        )
    server.llm.reply("Tuesday it is.")
    server.llm.reply(
        distill_answer(
            "A kitchen renovation; the plumber is booked.", ("The plumber comes on Tuesday",)
        )
    )
    page = new_context(viewport=size).new_page()
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    send(page, "We decided the plumber comes on Tuesday.")
    wait_for_reply(page)  # the distillation too
    pane = page.locator("#memory-pane")
    expect(pane.locator("#memory-decisions li .decision-text").last).to_have_text(
        "The plumber comes on Tuesday"
    )
    tab = page.locator("#show-memory")
    marked = None
    if size is PHONE:  # the conversation is shown: the Memory tab says the memory changed
        marked = tab.get_attribute("class"), tab.text_content()
        tab.click()
    content = (
        "#memory-sections h3, #memory-sections li, #memory-sections p, #memory-sections .provenance"
    )
    assert overlaps(page, "#memory-news, .toast-item", content) == []
    # Its last decisions, where a toast in the corner would sit, are covered by nothing.
    pane.evaluate("pane => { pane.scrollTop = pane.scrollHeight; }")
    expect(pane.locator(".provenance").last).to_be_in_viewport()
    assert overlaps(page, "#memory-news, .toast-item", content) == []
    news = page.locator("#memory-news")
    expect(news).to_contain_text("Memory updated from the conversation.")
    if size is PHONE:
        assert marked == ("updated", "Memory (updated)")
        expect(tab).to_have_accessible_name("Memory")  # seen: no longer marked
    pane.evaluate("pane => { pane.scrollTop = 0; }")
    expect(news).to_be_visible()
    shoot(page, "memory-updated-phone" if size is PHONE else "memory-updated")


@SIZES
def test_the_settings_groups_cover_no_card(
    new_context: Callable[..., BrowserContext],
    server: Server,
    size: dict[str, int],
    shoot: Callable[[Page, str], None],
) -> None:
    server.project("Kitchen")
    page = new_context(viewport=size).new_page()
    sign_in(page)
    page.goto("/#/settings/kitchen")
    nav = page.get_by_role("navigation", name="Settings groups")
    for name in ("This Charlie", "Everyone", "You", "This project"):
        nav.get_by_role("button", name=name).click()
        heading = page.get_by_role("heading", name=name, exact=True)
        expect(heading).to_be_focused()
        page.wait_for_timeout(100)
        assert (
            box(page, ".settings-nav")["y"] + box(page, ".settings-nav")["height"]
            <= (heading.bounding_box() or {"y": -1})["y"]
        ), name
    nav.get_by_role("button", name="You").click()
    shoot(page, "settings-scrolled-phone" if size is PHONE else "settings-scrolled")

    # A field reached with Tab is brought out from under the row, whole.
    view = page.locator("#settings-view")
    field = page.get_by_role("button", name="Make a token")
    field.evaluate(
        """(field) => {
          const view = document.querySelector('#settings-view');
          const nav = document.querySelector('.settings-nav').getBoundingClientRect();
          const at = field.getBoundingClientRect();
          view.scrollTop += at.top - (nav.top + nav.height / 3); // under the row
          const all = [...view.querySelectorAll('button, input, select, textarea, a[href]')];
          all[all.indexOf(field) - 1].focus({ preventScroll: true });
        }"""
    )
    assert overlaps(page, ".settings-nav", "#settings-view .card button") != []  # as set up
    page.keyboard.press("Tab")
    expect(field).to_be_focused()
    page.wait_for_timeout(100)
    assert overlaps(page, ".settings-nav", "#settings-view .card button:focus") == []
    assert view.evaluate("view => view.scrollTop") > 0
