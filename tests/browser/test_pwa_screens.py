"""Every main screen opens without console errors, on a desktop and on a phone."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from .pwa import PHONE, Console, Server, open_chat, send, sign_in, wait_for_reply

pytestmark = pytest.mark.browser


def test_main_screens_have_no_console_errors(
    page: Page, server: Server, console: Console, shoot: Callable[[Page, str], None]
) -> None:
    server.project("Kitchen", style="Brief and practical.")
    server.note("kitchen", "Worktops", "Oak, oiled twice a year.", ("worktops",))
    sign_in(page)
    for view in ("chat", "notes", "settings"):
        for channel in ("private", "kitchen"):
            page.goto(f"/#/{view}/{channel}")
            expect(page.locator(f"#{view}-view")).to_be_visible()
            expect(page.locator(f"#sections a[data-view={view}]")).to_have_attribute(
                "aria-current", "page"
            )
    page.goto("/#/notes/kitchen/kitchen/worktops")
    expect(page.get_by_role("heading", name="Worktops")).to_be_visible()
    page.goto("/#/chat/kitchen")
    page.get_by_role("button", name="History").click()
    # A project made outside the app has no revision until its memory is first written.
    history = page.get_by_role("region", name="History").get_by_role("listitem")
    expect(history.first).to_contain_text("No revisions yet")
    page.goto("/#/settings/kitchen")
    expect(page.get_by_role("heading", name="Project: Kitchen")).to_be_visible()
    expect(page.locator("#health-details")).to_contain_text("reachable")
    shoot(page, "settings")
    assert console.unexpected() == []


def test_project_settings_are_saved_to_project_toml(page: Page, server: Server) -> None:
    server.project("Kitchen")
    sign_in(page)
    page.goto("/#/settings/kitchen")
    form = page.locator("#project-form")
    form.get_by_label("Response style").fill("Short answers, metric units.")
    form.get_by_label("Distill every").fill("8")
    expect(form.get_by_label("Create notes")).to_be_checked()  # unset means all allowed
    form.get_by_label("Create notes").uncheck()
    form.get_by_label("Append to notes").uncheck()
    form.get_by_role("button", name="Save settings").click()
    expect(page.locator("#toast")).to_contain_text("Settings saved.")
    toml = (server.settings.projects_dir / "kitchen" / "project.toml").read_text()
    assert 'style = "Short answers, metric units."' in toml
    assert "distill_every = 8" in toml
    assert 'write_tools = [\n    "tag_note",\n    "record_decision",\n]' in toml or (
        'write_tools = ["tag_note", "record_decision"]' in toml
    )
    page.reload()
    expect(form.get_by_label("Distill every")).to_have_value("8")
    expect(form.get_by_label("Create notes")).not_to_be_checked()
    expect(form.get_by_label("Record decisions in memory")).to_be_checked()


def test_a_new_project_appears_in_the_switcher(page: Page, server: Server) -> None:
    sign_in(page)
    expect(page.locator("#channel-select option")).to_have_text(["Private (only you)"])
    page.goto("/#/settings/private")
    expect(page.locator("#project-settings")).to_contain_text("no shared projects yet")
    page.locator("#new-project-form").get_by_label("Name").fill("Trip to Oslo")
    page.get_by_role("button", name="Create project").click()
    expect(page.get_by_label("Project", exact=True)).to_have_value("trip-to-oslo")
    expect(page.locator("#chat-view")).to_be_visible()
    expect(page.locator("#messages-empty")).to_contain_text("No messages yet in Trip to Oslo")


def test_phone_layout_switches_between_conversation_and_memory(
    new_context: Callable[..., BrowserContext],
    server: Server,
    shoot: Callable[[Page, str], None],
) -> None:
    server.project("Kitchen")
    server.note("kitchen", "Worktop decision", "Oak worktops, not marble.", ("worktops",))
    server.llm.tool_calls([("search_notes", {"query": "worktops"})])
    server.llm.reply("Oak worktops: warm, and cheaper than marble. Oil them twice a year.")
    page = sign_in(new_context(viewport=PHONE, is_mobile=True, has_touch=True).new_page())
    open_chat(page, "kitchen", "Kitchen")
    memory = page.get_by_role("complementary", name="Memory")
    expect(memory).to_be_hidden()
    send(page, "What did we decide about the worktops?")
    wait_for_reply(page)
    expect(page.locator(".msg-assistant .msg-body")).to_contain_text("Oak worktops")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= PHONE["width"]  # nothing sticks out sideways
    shoot(page, "phone-chat")

    page.get_by_role("button", name="Memory", exact=True).click()
    expect(memory).to_be_visible()
    expect(page.locator("#conversation-pane")).to_be_hidden()
    expect(page.get_by_role("button", name="Memory", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )
    shoot(page, "phone-memory")
    page.get_by_role("button", name="Conversation").click()
    expect(page.get_by_label("Message", exact=True)).to_be_visible()


def test_keyboard_alone_can_sign_in_and_send(page: Page, server: Server) -> None:
    server.llm.reply("Hello, alice.")
    page.goto("/")
    expect(page.locator("#signin-name")).to_be_focused()  # the form is ready to type in
    page.keyboard.type("alice")
    page.keyboard.press("Tab")
    expect(page.locator("#signin-password")).to_be_focused()
    page.keyboard.type("correct horse battery")
    page.keyboard.press("Enter")
    message = page.get_by_label("Message", exact=True)
    expect(message).to_be_focused()
    page.keyboard.press("Tab")  # focus is visible: a 3px outline on the next control
    send_button = page.get_by_role("button", name="Send")
    expect(send_button).to_be_focused()
    outline = send_button.evaluate("(b) => getComputedStyle(b).outlineWidth")
    assert outline == "3px"
    page.keyboard.press("Shift+Tab")
    page.keyboard.type("Hi")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("there")
    expect(message).to_have_value("Hi\nthere")
    page.keyboard.press("Enter")
    wait_for_reply(page)
    expect(page.locator(".msg-user .msg-body")).to_have_text("Hi\nthere")
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("Hello, alice.")
    expect(message).to_be_focused()
