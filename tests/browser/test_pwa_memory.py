"""The memory panel: edit in place, history as diffs, undo, and distillation live."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect
from support.distilling import judge_says

from .pwa import Server, open_chat, send, sign_in, wait_for_reply

pytestmark = pytest.mark.browser


def test_edits_persist_and_history_can_undo_them(
    page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    server.project("Kitchen")
    server.llm.reply("12k is workable: oak worktops fit; marble would take a third of it.")
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    send(page, "Oak worktops, final answer. Can we stay under 12k?")
    wait_for_reply(page)
    panel = page.get_by_role("complementary", name="Memory")
    expect(panel.locator("#memory-decisions")).to_contain_text("No decisions yet.")

    panel.get_by_role("button", name="Edit summary").click()
    summary = panel.get_by_role("textbox", name="Summary")
    expect(summary).to_be_focused()
    summary.fill("Renovating the kitchen on a 12k budget.")
    summary.press("Control+Enter")
    expect(panel.locator("#memory-summary")).to_contain_text(
        "Renovating the kitchen on a 12k budget."
    )

    panel.get_by_role("button", name="Edit decisions").click()
    panel.get_by_role("textbox", name="Decisions").fill(
        "Oak worktops, not marble\nBudget is 12k, hard limit"
    )
    panel.get_by_role("button", name="Save").click()
    expect(panel.locator("#memory-decisions li .decision-text")).to_have_text(
        ["Oak worktops, not marble", "Budget is 12k, hard limit"]
    )
    expect(panel.locator("#memory-decisions li .provenance").first).to_contain_text("by alice")

    panel.get_by_role("button", name="Edit recent quotes").click()
    panel.get_by_role("textbox", name="Recent quotes").fill('alice: "Oak worktops, final answer."')
    panel.get_by_role("button", name="Save").click()
    expect(panel.locator("#memory-quotes li")).to_have_text(["Oak worktops, final answer. — alice"])

    # Written to the project's memory.md, and still there after a reload.
    text = (server.settings.projects_dir / "kitchen" / "memory.md").read_text()
    assert "- Oak worktops, not marble _(since " in text
    assert '- alice: "Oak worktops, final answer."' in text
    page.reload()
    expect(panel.locator("#memory-decisions li")).to_have_count(2)
    expect(panel.locator("#memory-summary")).to_contain_text("12k budget")

    panel.get_by_role("button", name="History").click()
    revisions = panel.locator(".revision")
    expect(revisions.first).to_contain_text("Edited here")
    expect(revisions.first.locator(".badge-current")).to_have_text("current")
    expect(revisions.first.locator(".diff-add")).to_contain_text(
        ['+- alice: "Oak worktops, final answer."']
    )
    expect(revisions.nth(1).locator(".diff-add")).to_contain_text(
        ["+- Oak worktops, not marble", "+- Budget is 12k, hard limit"]
    )
    shoot(page, "memory-history")

    panel.get_by_role("button", name="Undo last change").click()
    expect(panel.locator("#memory-quotes")).to_contain_text("No quotes yet.")
    expect(revisions.first).to_contain_text("Restored revision")
    assert (
        "Oak worktops, final answer"
        not in (server.settings.projects_dir / "kitchen" / "memory.md").read_text()
    )

    # Any older version can be restored from its row.
    revisions.filter(has_text="Created").get_by_role("button", name="Restore this version").click()
    expect(panel.locator("#memory-decisions")).to_contain_text("No decisions yet.")


def test_escape_cancels_an_edit(page: Page, server: Server) -> None:
    sign_in(page)
    panel = page.get_by_role("complementary", name="Memory")
    expect(panel).to_contain_text("visible to you alone")
    page.wait_for_load_state("networkidle")  # no late load re-draws the panel mid-edit
    panel.get_by_role("button", name="Edit decisions").click()
    panel.get_by_role("textbox", name="Decisions").fill("Never saved")
    panel.get_by_role("textbox", name="Decisions").press("Escape")
    expect(panel.locator("#memory-decisions")).to_contain_text("No decisions yet.")
    expect(panel.get_by_role("button", name="Edit decisions")).to_be_focused()


def test_a_distillation_refreshes_the_panel_while_chatting(page: Page, server: Server) -> None:
    server.project("Trip", distill_every=2)
    server.llm.reply("Oslo in May is lovely.")
    distilled = {
        "summary": "Planning a trip to Oslo in May.",
        "decisions": ["Go to Oslo in May"],
        "quotes": [{"speaker": "alice", "text": "Let's go to Oslo in May."}],
    }
    server.llm.reply(json.dumps(distilled))
    sign_in(page)
    open_chat(page, "trip", "Trip")
    panel = page.get_by_role("complementary", name="Memory")
    expect(panel.locator("#memory-summary")).to_contain_text("Nothing yet")
    send(page, "Let's go to Oslo in May.")
    wait_for_reply(page)
    expect(panel.locator("#memory-summary")).to_contain_text("Planning a trip to Oslo in May.")
    expect(panel.locator("#memory-decisions li .decision-text")).to_have_text(["Go to Oslo in May"])
    expect(panel.locator("#memory-decisions .provenance")).to_contain_text("distilled from message")
    expect(page.locator("#memory-news")).to_contain_text("Memory updated from the conversation.")


def test_an_unreadable_memory_file_is_reported_not_overwritten(page: Page, server: Server) -> None:
    server.project("Kitchen")
    broken = "# Kitchen — memory\n\n## Decisions\n\n- Oak\n\n## Decisions\n\n- Marble\n"
    path = server.settings.projects_dir / "kitchen" / "memory.md"
    path.write_text(broken)
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    error = page.locator("#memory-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("Charlie can't read this memory")
    expect(error).to_contain_text("line")
    assert path.read_text() == broken


def test_where_each_decision_came_from_the_earlier_ones_and_forgetting_a_message(
    page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    server.project("Kitchen", distill_every=2)
    server.llm.reply("Tuesday it is.")
    first = {
        "summary": "The plumber is booked.",
        "decisions": ["The plumber comes on Tuesday 9 December"],
        "superseded": [],
        "quotes": [],
    }
    server.llm.reply(json.dumps(first))
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    panel = page.get_by_role("complementary", name="Memory")
    send(page, "We decided the plumber comes on Tuesday 9 December.")
    wait_for_reply(page)
    expect(panel.locator("#memory-decisions li .decision-text")).to_have_text(
        ["The plumber comes on Tuesday 9 December"]
    )
    server.llm.reply("Thursday, noted.")
    second = {
        "summary": "The plumber is booked for Thursday.",
        "decisions": ["The plumber comes on Thursday 11 December"],
        "superseded": [],
        "quotes": [],
    }
    server.llm.reply(json.dumps(second))
    server.llm.default = judge_says(True)  # asked: does it change Tuesday's? yes
    send(page, "Change of plan: the plumber comes on Thursday 11 December.")
    wait_for_reply(page)
    expect(panel.locator("#memory-decisions li .decision-text").first).to_have_text(
        "The plumber comes on Thursday 11 December"
    )
    expect(panel.locator("#memory-decisions li .provenance").first).to_contain_text(
        "distilled from message 3"
    )
    earlier = panel.locator("details.earlier-decisions")
    expect(earlier.locator("summary")).to_have_text("Earlier decisions (1)")
    earlier.locator("summary").click()
    expect(earlier.locator("li .decision-text")).to_have_text(
        ["The plumber comes on Tuesday 9 December"]
    )
    expect(earlier.locator("li .provenance")).to_contain_text("changed by message 3")
    shoot(page, "memory-provenance")

    # Forget the first message (and Charlie's answer to it) from its toolbar.
    page.once("dialog", lambda dialog: dialog.accept())
    mine = page.locator(".msg-user").first
    mine.hover()
    mine.get_by_role("button", name="Forget this message for good").click()
    expect(page.locator("#toast")).to_contain_text("Forgot 2 messages")
    expect(page.locator(".msg-user")).to_have_count(1)
    expect(page.locator(".msg-user .msg-body")).to_have_text(
        "Change of plan: the plumber comes on Thursday 11 December."
    )
    held = server.rows("SELECT count(*) FROM messages WHERE content LIKE '%Tuesday 9%'")
    assert held == [(0,)]


def test_opening_the_history_scrolls_the_memory_pane_never_the_page(
    page: Page, server: Server
) -> None:
    """With a banner above the app (the model server down) and a history longer than the
    pane, opening History brings it into view inside the pane: the header stays put."""
    server.project("Kitchen")
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    panel = page.get_by_role("complementary", name="Memory")
    for n in range(4):
        panel.get_by_role("button", name="Edit summary").click()
        panel.get_by_role("textbox", name="Summary").fill(f"Summary {n}.\n" * 5)
        panel.get_by_role("textbox", name="Summary").press("Control+Enter")
        expect(panel.locator("#memory-summary")).to_contain_text(f"Summary {n}.")
    for _ in range(3):
        server.llm.error(500, "down")
    send(page, "Are you there?")
    wait_for_reply(page)
    expect(page.locator("#llm-banner")).to_be_visible()
    expect(page.locator("#model-banner")).to_be_visible()  # the built-in model offered too
    header = page.locator("header").first
    before = header.bounding_box()
    panel.get_by_role("button", name="History").click()
    expect(panel.locator(".revision")).to_have_count(5)
    # brought into view once the list has loaded: the pane has scrolled to the history's top
    page.wait_for_function(
        "() => { const pane = document.querySelector('#memory-pane');"
        " const top = document.querySelector('#memory-history').getBoundingClientRect().top;"
        " return pane.scrollTop > 0 && Math.abs(top - pane.getBoundingClientRect().top) < 2; }"
    )
    assert header.bounding_box() == before
    assert page.evaluate("document.scrollingElement.scrollTop") == 0
