"""Find in conversation: a question typed in the chat's search box, the hits with their dates
and matched words, and a hit shown in the chat among the messages around it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, Route, expect

from charlie import projects
from charlie.conversations import shared_channel
from charlie.retrieval import index_file
from charlie.retrieval.index import Index, embedder_of
from charlie.retrieval.message_index import PROGRESS, MessageIndex
from charlie.transfer.jsonl import import_jsonl

from .pwa import PASSWORD, PHONE, Server, open_chat, sign_in

pytestmark = pytest.mark.browser

MAY = [
    ("Caroline", "The seedlings are finally big enough.", "2023-05-08T13:50:00Z"),
    ("Caroline", "We planted the tomatoes by the south fence.", "2023-05-08T13:56:00Z"),
    ("Melanie", "Good, they need the afternoon sun.", "2023-05-08T14:02:00Z"),
    ("Melanie", "We planted the tomatoes by the south fence.", "2023-08-14T09:05:00Z"),
]
LATER = 60  # more than the chat first shows (50), so May's messages are out of sight


def garden(server: Server, folder: Path) -> None:
    """A Garden project whose history was imported: May's talk, then two months of chores."""
    slug = server.project("Garden")
    lines = [{"speaker": s, "text": t, "time": at} for s, t, at in MAY]
    start = datetime(2023, 9, 1, 8, 0, tzinfo=UTC)
    for day in range(LATER):
        at = (start + timedelta(days=day)).isoformat()
        text = f"Watered the beds, day {day + 1}."
        lines.append({"speaker": "Melanie", "text": text, "time": at})
    history = folder / "garden.jsonl"
    history.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with server.home() as home:
        report = import_jsonl(home, shared_channel(home, projects.get_project(home, slug)), history)
    assert report.added == len(lines)


def test_a_found_message_is_shown_among_its_neighbours(
    page: Page, server: Server, tmp_path: Path, shoot: Callable[[Page, str], None]
) -> None:
    garden(server, tmp_path)
    sign_in(page)
    open_chat(page, "garden", "Garden")
    expect(page.locator(".msg").last).to_contain_text("Watered the beds, day 60.")
    expect(page.locator("#messages")).not_to_contain_text("seedlings")

    toggle = page.get_by_role("button", name="Find in conversation")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    box = page.get_by_role("searchbox", name="Find in conversation")
    expect(box).to_be_focused()
    box.fill("where did we plant the tomatoes in May 2023?")
    box.press("Enter")

    status = page.locator("#recall-status")
    expect(status).to_contain_text("About May 2023.")
    hits = page.locator("#recall-results .recall-hit")
    first = hits.first
    expect(first.locator("time")).to_have_text("8 May 2023, 14:56")  # 13:56 UTC, in London
    expect(first.locator(".speaker")).to_have_text("Caroline")
    expect(first.locator(".recall-text")).to_have_text(
        "We planted the tomatoes by the south fence."
    )
    expect(first.locator("mark").filter(has_text="tomatoes")).to_have_count(1)

    first.get_by_role("button").press("Enter")  # the keyboard works as well as a click
    bar = page.locator("#earlier-bar")
    expect(bar).to_be_visible()
    expect(bar).to_contain_text("You are viewing earlier messages, from 8 May 2023")
    found = page.locator(".msg-found")
    expect(found).to_have_count(1)
    expect(found).to_contain_text("We planted the tomatoes by the south fence.")
    expect(found).to_be_focused()
    expect(found).to_be_in_viewport()
    shown = page.locator("#messages .msg .msg-body")
    expect(shown.nth(0)).to_have_text("The seedlings are finally big enough.")
    expect(shown.nth(2)).to_have_text("Good, they need the afternoon sun.")
    expect(page.locator("#messages")).not_to_contain_text("day 60")
    shoot(page, "pwa-recall")

    page.get_by_role("button", name="Back to latest").click()
    expect(bar).to_be_hidden()
    expect(page.locator(".msg").last).to_contain_text("Watered the beds, day 60.")
    expect(page.locator(".msg-found")).to_have_count(0)

    page.locator("#recall-input").press("Escape")
    expect(page.locator("#recall-panel")).to_be_hidden()
    expect(toggle).to_be_focused()


def test_nothing_found_and_a_hit_from_another_channel_on_a_phone(
    new_context: Callable[..., BrowserContext], server: Server, tmp_path: Path
) -> None:
    garden(server, tmp_path)
    page = sign_in(new_context(viewport=PHONE).new_page())
    open_chat(page, "private", "Private channel")
    page.get_by_role("button", name="Find in conversation").click()
    box = page.get_by_role("searchbox", name="Find in conversation")
    box.fill("tomatoes by the fence")
    box.press("Enter")
    expect(page.locator("#recall-status")).to_contain_text("Nothing found in Private.")

    page.get_by_label("All projects").check()
    box.press("Enter")
    hit = page.locator("#recall-results .recall-hit").first
    expect(hit).to_contain_text("in Garden")
    hit.get_by_role("button").click()
    expect(page.locator("#chat-heading")).to_have_text("Garden")
    expect(page.locator("#recall-panel")).to_be_hidden()  # a phone gives the room to the chat
    found = page.locator(".msg-found")
    expect(found).to_contain_text("We planted the tomatoes by the south fence.")
    expect(found).to_be_in_viewport()
    expect(page.locator("#earlier-bar")).to_be_visible()


def test_a_quiet_banner_says_how_far_the_history_is_indexed_and_goes_when_it_is(
    page: Page, server: Server, tmp_path: Path, shoot: Callable[[Page, str], None]
) -> None:
    """An imported history waits for its vectors (another indexer holds the claims and has
    reported its rate): the app says how far it is and how long the rest takes; once the
    server's own indexer has done it, the line goes."""
    with server.home() as home, ExitStack() as held:
        for what in ("indexer", "embedding"):  # what a running `charlie reindex --catch-up` holds
            assert held.enter_context(index_file.claim(home.index_path, what, wait=True))
        garden(server, tmp_path)
        notes = Index(home, embedder_of(home))
        notes.refresh()  # the notes are all in: only the history waits
        index = MessageIndex(notes)
        index.index_words()
        report = json.dumps({"rate": 0.1, "at": time.time()})  # 64 to go at 0.1/s: 11 min
        with index_file.transaction(index.db) as db:
            db.execute("INSERT OR REPLACE INTO index_state VALUES (?, ?)", (PROGRESS, report))
        sign_in(page)
        banner = page.locator("#history-banner")
        expect(banner).to_be_visible()
        expect(banner).to_contain_text("Indexing history: 0 % · about 11 min left.")
        expect(banner).to_contain_text("Recall finds these messages by their words meanwhile.")
        expect(page.locator("#index-banner")).to_be_hidden()
        shoot(page, "history-indexing")
    expect(page.locator("#history-banner")).to_be_hidden(timeout=40_000)


def test_a_search_started_while_the_app_is_still_loading_keeps_its_words(
    page: Page, server: Server, tmp_path: Path
) -> None:
    """Signed in, the person opens the search and types before the app has finished
    loading: when it has, the composer does not take the focus (and the words) from them."""
    garden(server, tmp_path)
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route("**/api/projects", hold)
    page.goto("/")
    form = page.locator("#signin-form")
    form.get_by_label("Name").fill("alice")
    form.get_by_label("Password").fill(PASSWORD)
    form.get_by_role("button", name="Sign in").click()
    page.wait_for_function("() => document.querySelector('#who').textContent === 'alice'")
    open_chat(page, "private", "Private channel")
    page.get_by_role("button", name="Find in conversation").click()
    box = page.get_by_role("searchbox", name="Find in conversation")
    box.fill("tomatoes")
    assert len(held) == 1  # the sign-in's own load is still waiting
    held[0].continue_()
    page.unroute("**/api/projects", hold)
    expect(page.locator("#channel-select")).to_contain_text("Garden")  # the projects are in
    page.wait_for_load_state("networkidle")  # and what the sign-in's route asked for
    expect(box).to_be_focused()
    expect(page.get_by_label("Message", exact=True)).to_have_value("")
    page.keyboard.type(" by the fence")
    page.keyboard.press("Enter")
    expect(page.locator("#recall-status")).to_contain_text("Nothing found in Private.")
    expect(box).to_have_value("tomatoes by the fence")
