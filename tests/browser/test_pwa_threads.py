"""Chats in the PWA: a channel's many threads in a side panel (a drawer on a phone) — a new
chat, switching, renaming in place, archiving, deleting with an Undo, the archive and the
trash — the chat shown kept in the address, and Find in conversation opening a message of
another chat in that chat."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect

from charlie import conversations, projects, users
from charlie.conversations import shared_channel

from .pwa import PHONE, Server, open_chat, send, sign_in, wait_for_reply

pytestmark = pytest.mark.browser

# Counts the person's clicks (with a mouse or a finger, not the Enter key), from now on.
COUNT_CLICKS = (
    "() => { window.clicks = 0; document.addEventListener('click', (e) => {"
    " if (e.isTrusted && e.detail > 0) window.clicks += 1; }, true); }"
)


def seed(server: Server, slug: str, chats: list[list[tuple[str, str]]]) -> list[int]:
    """Threads of project `slug`, oldest first, each holding alice's (question, answer) turns;
    returns their ids."""
    ids = []
    with server.home() as home:
        alice = users.get_user(home.db, "alice")
        first = shared_channel(home, projects.get_project(home, slug))
        for number, turns in enumerate(chats):
            thread = first if number == 0 else conversations.new_thread(home, first)
            for question, answer in turns:
                conversations.add_message(home, thread, "user", question, user=alice)
                conversations.add_message(home, thread, "assistant", answer)
            ids.append(thread.conversation_id)
    return ids


def chat_list(page: Page) -> Locator:
    return page.locator("#thread-list .thread")


def bodies(page: Page) -> Locator:
    return page.locator("#messages .msg .msg-body")


def menu(page: Page, title: str, action: str) -> None:
    """Choose `action` in the menu of the chat titled `title`."""
    page.get_by_role("button", name=f"Actions for “{title}”").click()
    page.locator(".thread-menu:not([hidden])").get_by_role("button", name=action).click()


def test_new_chat_switch_rename_delete_and_undo(
    page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    server.project("Kitchen")
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    expect(page.locator("#threads-pane")).to_be_visible()  # a side panel on a wide screen
    chats = chat_list(page)
    expect(chats).to_have_count(1)  # the project's first chat, empty
    expect(chats.first.locator(".thread-open")).to_have_attribute("aria-current", "true")
    assert re.search(r"#/chat/kitchen/\d+$", page.url), page.url

    server.llm.reply("Oak: it is hard and holds screws well.")
    send(page, "Which wood for the shelves?")
    wait_for_reply(page)
    shelves = chats.filter(has_text="Which wood for the shelves?")
    expect(shelves.locator(".thread-snippet")).to_have_text(
        "Oak: it is hard and holds screws well."
    )
    expect(page.locator("#thread-title")).to_have_text("Which wood for the shelves?")

    # A new chat is one click from the conversation; it is made when its first message goes.
    page.evaluate(COUNT_CLICKS)
    page.get_by_role("button", name="New chat").click()
    expect(bodies(page)).to_have_count(0)
    expect(page.get_by_label("Message", exact=True)).to_be_focused()
    expect(page.locator("#thread-title")).to_have_text("New chat")
    assert page.url.endswith("#/chat/kitchen/new"), page.url
    assert page.evaluate("window.clicks") == 1
    server.llm.reply("Brass, 4 × 30 mm.")
    send(page, "And which screws?")
    wait_for_reply(page)
    expect(chats).to_have_count(2)
    newest = chats.first  # most recently written first, named by its first words
    expect(newest.locator(".thread-name")).to_have_text("And which screws?")
    expect(newest.locator(".thread-open")).to_have_attribute("aria-current", "true")
    screws = int(page.url.rsplit("/", 1)[1])
    assert server.rows("SELECT title FROM conversations WHERE id = ?", screws) == [
        ("And which screws?",)
    ]
    assert len(server.llm.requests) == 2
    assert "Which wood" not in str(server.llm.requests[-1]["messages"])  # a chat of its own

    page.reload()  # the address keeps the chat
    expect(bodies(page)).to_have_text(["And which screws?", "Brass, 4 × 30 mm."])

    shelves.locator(".thread-open").click()
    expect(bodies(page).first).to_have_text("Which wood for the shelves?")
    expect(shelves.locator(".thread-open")).to_have_attribute("aria-current", "true")
    shoot(page, "pwa-threads")
    page.go_back()  # the Back button goes back to the chat before
    expect(bodies(page).first).to_have_text("And which screws?")
    page.go_forward()
    expect(bodies(page).first).to_have_text("Which wood for the shelves?")

    # Rename in place.
    menu(page, "Which wood for the shelves?", "Rename")
    title = page.get_by_role("textbox", name="New title for “Which wood for the shelves?”")
    expect(title).to_be_focused()
    title.fill("Shelves")
    title.press("Enter")
    expect(chats.locator(".thread-name")).to_have_text(["And which screws?", "Shelves"])
    expect(page.locator("#thread-title")).to_have_text("Shelves")
    assert server.rows("SELECT title_set FROM conversations WHERE title = 'Shelves'") == [(1,)]
    menu(page, "Shelves", "Rename")
    page.get_by_role("textbox", name="New title for “Shelves”").press("Escape")
    expect(chats.locator(".thread-name")).to_have_text(["And which screws?", "Shelves"])

    # Delete the chat shown: the newest other one opens; Undo brings it back, shown again.
    menu(page, "Shelves", "Delete")
    expect(chats).to_have_count(1)
    expect(page.locator("#thread-title")).to_have_text("And which screws?")
    expect(bodies(page).first).to_have_text("And which screws?")
    assert server.rows("SELECT count(*) FROM conversations WHERE deleted_at IS NOT NULL") == [(1,)]
    undo = page.locator(".toast-with-action").filter(has_text="Moved “Shelves” to the trash.")
    undo.get_by_role("button", name="Undo").click()
    expect(chats).to_have_count(2)
    expect(page.locator("#thread-title")).to_have_text("Shelves")
    expect(bodies(page).first).to_have_text("Which wood for the shelves?")
    assert server.rows("SELECT count(*) FROM conversations WHERE deleted_at IS NOT NULL") == [(0,)]


def test_archive_trash_and_restore(page: Page, server: Server) -> None:
    server.project("Kitchen")
    seed(
        server,
        "kitchen",
        [[("Sink size?", "60 cm.")], [("Tap finish?", "Brushed steel.")]],
    )
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    chats = chat_list(page)
    expect(chats.locator(".thread-name")).to_have_text(["Tap finish?", "Sink size?"])
    expect(bodies(page)).to_have_text(["Tap finish?", "Brushed steel."])  # the newest opens

    menu(page, "Sink size?", "Archive")
    expect(chats.locator(".thread-name")).to_have_text(["Tap finish?"])
    menu(page, "Tap finish?", "Delete")
    expect(chats).to_have_count(0)
    expect(page.locator("#threads-status")).to_have_text("No chats yet: New chat starts one.")
    expect(page.locator("#thread-title")).to_have_text("New chat")

    views = page.get_by_role("group", name="Which chats to list")
    views.get_by_role("button", name="Archived").click()
    expect(chats.locator(".thread-name")).to_have_text(["Sink size?"])
    chats.first.locator(".thread-open").click()  # an archived chat can still be read
    expect(bodies(page)).to_have_text(["Sink size?", "60 cm."])
    expect(page.locator("#thread-title")).to_have_text("Sink size?")
    menu(page, "Sink size?", "Unarchive")
    expect(chats).to_have_count(0)
    expect(page.locator("#threads-status")).to_have_text("No archived chats.")

    views.get_by_role("button", name="Trash").click()
    expect(chats.locator(".thread-name")).to_have_text(["Tap finish?"])
    expect(chats.get_by_role("button", name="Actions for “Tap finish?”")).to_have_count(0)
    chats.get_by_role("button", name="Restore “Tap finish?”").click()
    expect(chats).to_have_count(0)
    views.get_by_role("button", name="Recent").click()
    expect(chats.locator(".thread-name")).to_have_text(["Tap finish?", "Sink size?"])


def test_a_message_of_an_older_chat_is_found_and_opened_in_it(page: Page, server: Server) -> None:
    server.project("Kitchen")
    old, _ = seed(
        server,
        "kitchen",
        [
            [
                ("The tiler comes on Tuesday.", "Noted."),
                ("We chose the grey porcelain tiles from Marazzi.", "Good: they hide dirt."),
                ("Grout colour?", "Anthracite."),
            ],
            [("Which oven?", "A steam oven.")],
        ],
    )
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    expect(bodies(page).first).to_have_text("Which oven?")

    page.evaluate(COUNT_CLICKS)
    page.get_by_role("button", name="Find in conversation").click()
    box = page.get_by_role("searchbox", name="Find in conversation")
    box.fill("which tiles did we choose")
    box.press("Enter")
    hit = page.locator("#recall-results .recall-hit").filter(has_text="Marazzi").first
    expect(hit.locator(".recall-where")).to_have_text("in “The tiler comes on Tuesday.”")
    hit.get_by_role("button").click()
    found = page.locator(".msg-found")
    expect(found).to_contain_text("We chose the grey porcelain tiles from Marazzi.")
    expect(found).to_be_in_viewport()
    assert page.url.endswith(f"#/chat/kitchen/{old}"), page.url
    expect(page.locator("#thread-title")).to_have_text("The tiler comes on Tuesday.")
    current = chat_list(page).filter(has=page.locator("[aria-current='true']"))
    expect(current.locator(".thread-name")).to_have_text("The tiler comes on Tuesday.")
    expect(page.locator("#messages")).not_to_contain_text("Which oven?")
    assert page.evaluate("window.clicks") == 2  # Find, then the hit (the words typed)

    # Back to the latest of that chat, and what is sent goes to it.
    page.get_by_role("button", name="Back to latest").click()
    expect(bodies(page).last).to_have_text("Anthracite.")
    server.llm.reply("Matt, so they are not slippery.")
    send(page, "Matt or polished?")
    wait_for_reply(page)
    assert server.rows(
        "SELECT conversation_id FROM messages WHERE content = 'Matt or polished?'"
    ) == [(old,)]
    assert "Marazzi" in str(server.llm.requests[-1]["messages"])


def test_chats_in_a_drawer_on_a_phone(
    new_context: Callable[..., BrowserContext],
    server: Server,
    shoot: Callable[[Page, str], None],
) -> None:
    server.project("Kitchen")
    seed(
        server,
        "kitchen",
        [
            [("Sink size?", "A 60 cm single bowl fits the cabinet.")],
            [("Tap finish?", "Brushed steel hides water marks.")],
            [("Which oven?", "A steam oven, at eye level.")],
        ],
    )
    page = sign_in(new_context(viewport=PHONE, has_touch=True, is_mobile=True).new_page())
    open_chat(page, "kitchen", "Kitchen")
    pane = page.locator("#threads-pane")
    expect(pane).to_be_hidden()
    expect(page.locator("#thread-title")).to_have_text("Which oven?")
    toggle = page.get_by_role("button", name="Chats", exact=True)
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(pane).to_be_visible()
    expect(pane).to_be_in_viewport()
    expect(chat_list(page).locator(".thread-name")).to_have_text(
        ["Which oven?", "Tap finish?", "Sink size?"]
    )
    # On a touch screen a chat's actions are there without hovering.
    more = page.get_by_role("button", name="Actions for “Sink size?”")
    assert more.evaluate("b => getComputedStyle(b).opacity") == "1"
    shoot(page, "pwa-threads-phone")

    chat_list(page).filter(has_text="Tap finish?").locator(".thread-open").click()
    expect(pane).to_be_hidden()  # the drawer makes way for the conversation
    expect(bodies(page)).to_have_text(["Tap finish?", "Brushed steel hides water marks."])

    toggle.click()
    page.keyboard.press("Escape")
    expect(pane).to_be_hidden()
    expect(toggle).to_be_focused()

    new_chat = page.get_by_role("button", name="New chat")
    expect(new_chat).to_be_in_viewport()  # in the header: one tap
    new_chat.click()
    expect(bodies(page)).to_have_count(0)
    server.llm.reply("Induction.")
    send(page, "Hob?")
    wait_for_reply(page)
    toggle.click()
    expect(chat_list(page).first.locator(".thread-name")).to_have_text("Hob?")
    page.locator("#threads-backdrop").click(position={"x": 370, "y": 400})
    expect(pane).to_be_hidden()
