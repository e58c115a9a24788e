"""Household admin in the PWA: the first-run sign-in page, people, your account, the trash,
and a model per project — in a real Chromium against the real app on loopback."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from llm_double import ScriptedLLMServer
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from charlie import conversations, projects, users
from charlie.config import load_settings
from charlie.conversations import shared_channel

from .conftest import TIMEOUT_MS
from .pwa import DESKTOP, PASSWORD, Console, Server, open_chat, send, serve, wait_for_reply
from .pwa import sign_in as sign_in_only

pytestmark = pytest.mark.browser


@pytest.fixture
def empty_server(llm: ScriptedLLMServer) -> Iterator[Server]:
    """The app on a data home where no one has an account yet."""
    settings = load_settings()
    url, stop = serve(settings)
    yield Server(url, settings, llm)
    stop()


def test_the_sign_in_page_says_how_to_make_the_first_account(
    browser: Browser, empty_server: Server, shoot: Callable[[Page, str], None]
) -> None:
    console = Console()
    context = browser.new_context(base_url=empty_server.url, viewport=DESKTOP)
    context.set_default_timeout(TIMEOUT_MS)
    page = console.watch(context.new_page())
    console.allow(r"status of 401")
    try:
        page.goto("/")
        notice = page.locator("#signin-first-run")
        expect(notice).to_be_visible()
        expect(notice).to_have_text(
            "No one has an account yet: run charlie users add NAME --admin on the machine "
            "running Charlie, then sign in here."
        )
        expect(notice.locator("code")).to_have_text("charlie users add NAME --admin")
        shoot(page, "sign-in-first-run")

        with empty_server.home() as home:
            users.add_user(home.db, "alice", PASSWORD, is_admin=True)
        page.reload()
        expect(page.get_by_role("heading", name="Sign in to Charlie")).to_be_visible()
        expect(notice).to_be_hidden()
        form = page.locator("#signin-form")
        form.get_by_label("Name").fill("alice")
        form.get_by_label("Password").fill("not the password")
        form.get_by_role("button", name="Sign in").click()
        expect(page.locator("#signin-error")).to_have_text("Wrong name or password.")
        expect(notice).to_be_hidden()
        assert console.unexpected() == []
    finally:
        context.close()


def sign_in(page: Page, name: str = "alice", password: str = PASSWORD) -> Page:
    """Sign in, and let the chat that opens settle (it names its thread in the address when
    it has loaded) before the test goes elsewhere."""
    sign_in_only(page, name, password)
    page.wait_for_load_state("networkidle")
    return page


def person(page: Page, name: str) -> Locator:
    return page.locator(f"#people-list li[data-person='{name}']")


def test_an_administrator_adds_resets_and_removes_people(
    page: Page,
    server: Server,
    console: Console,
    new_context: Callable[..., BrowserContext],
    shoot: Callable[[Page, str], None],
) -> None:
    kitchen = server.project("Kitchen")
    with server.home() as home:
        bob = users.get_user(home.db, "bob")
        channel = shared_channel(home, projects.get_project(home, kitchen))
        conversations.add_message(home, channel, "user", "Oak, not marble.", user=bob)
    bobs = sign_in(new_context().new_page(), "bob")
    console.allow(r"status of 401 .*/api/(me|health)")  # bob's browser, signed out: its checks too
    sign_in(page)
    page.goto("/#/settings/private")
    household = page.get_by_role("region", name="Household")
    expect(household).to_be_visible()
    expect(person(page, "alice")).to_contain_text("administrator")
    expect(person(page, "alice")).to_contain_text("you")
    expect(person(page, "alice").get_by_role("button")).to_have_count(0)  # not yourself

    form = page.locator("#add-person-form")
    console.allow(r"status of 400 .*/api/people")  # the short password, refused
    form.get_by_label("Name").fill("carol")
    form.get_by_label("Password").fill("short")
    form.get_by_role("button", name="Add").click()
    expect(form.get_by_role("alert")).to_have_text(
        "The password must be at least 8 characters long."
    )
    form.get_by_label("Password").fill("carol's own password")
    form.get_by_role("button", name="Add").click()
    expect(person(page, "carol")).to_be_visible()
    sign_in(new_context().new_page(), "carol", "carol's own password")

    person(page, "bob").get_by_role("button", name="Reset password").click()
    person(page, "bob").get_by_label("New password for bob").fill("bob's new password")
    person(page, "bob").get_by_role("button", name="Set password", exact=True).click()
    expect(page.locator("#toast")).to_contain_text("bob's password was set")
    bobs.reload()
    expect(bobs.get_by_role("heading", name="Sign in to Charlie")).to_be_visible()

    person(page, "bob").get_by_role("button", name="Remove bob…").click()
    confirm = person(page, "bob").get_by_role("group", name="Remove bob")
    expect(confirm).to_contain_text(
        "Removing bob deletes their private channel (0 messages) and its memory (0 revisions)"
    )
    expect(confirm).to_contain_text("Their 1 message in shared projects stays, attributed to bob.")
    if os.environ.get("PWA_SCREENSHOTS"):  # the panel, without the toasts over it
        expect(page.locator(".toast-item")).to_have_count(0, timeout=10_000)
        page.locator("#household").evaluate("(card) => card.scrollIntoView()")
    shoot(page, "pwa-admin")
    confirm.get_by_role("button", name="Remove bob").click()
    expect(person(page, "bob")).to_have_count(0)
    assert server.rows("SELECT name FROM users ORDER BY name") == [("alice",), ("carol",)]
    assert server.rows("SELECT speaker, user_id FROM messages") == [("bob", None)]


def test_someone_who_is_not_an_administrator_sees_no_household_panel(
    page: Page, server: Server
) -> None:
    server.project("Kitchen")
    sign_in(page, "bob")
    page.goto("/#/settings/kitchen")
    expect(page.get_by_role("region", name="Your account")).to_be_visible()
    expect(page.get_by_role("region", name="Trash")).to_be_visible()
    expect(page.locator("#household")).to_have_count(0)
    expect(page.locator("#delete-project")).to_have_count(0)


def test_your_account_changes_your_password_and_signs_out_your_other_browsers(
    page: Page, server: Server, new_context: Callable[..., BrowserContext], console: Console
) -> None:
    console.allow(r"status of 401 .*/api/(me|health)")  # the other browser, signed out
    other = sign_in(new_context().new_page(), "bob")
    sign_in(page, "bob")
    page.goto("/#/settings/private")
    account = page.get_by_role("region", name="Your account")
    expect(account.locator("#account-sessions")).to_have_text(
        "You are also signed in on 1 other browser."
    )
    account.get_by_label("Current password").fill("not my password")
    account.get_by_label("New password", exact=True).fill("a new password")
    account.get_by_label("New password again").fill("a new password")
    console.allow(r"status of 400")
    account.get_by_role("button", name="Change password").click()
    expect(account.get_by_role("alert")).to_have_text(
        "Your current password is not right; nothing was changed."
    )
    account.get_by_label("Current password").fill(PASSWORD)
    account.get_by_role("button", name="Change password").click()
    expect(page.locator("#toast")).to_contain_text("Password changed; 1 other session signed out.")
    expect(account.locator("#account-sessions")).to_have_text(
        "This is the only browser you are signed in on."
    )
    other.reload()
    expect(other.get_by_role("heading", name="Sign in to Charlie")).to_be_visible()
    sign_in(other, "bob", "a new password")
    page.reload()
    account.get_by_role("button", name="Sign out everywhere else").click()
    expect(page.locator("#toast")).to_contain_text("Signed out 1 other session.")
    other.reload()
    expect(other.get_by_role("heading", name="Sign in to Charlie")).to_be_visible()


def test_notes_and_projects_go_to_the_trash_and_come_back(
    page: Page, server: Server, console: Console
) -> None:
    kitchen = server.project("Kitchen")
    server.note(kitchen, "Worktops", "Oak, oiled twice a year.")
    server.llm.reply("Oak it is.")
    sign_in(page)
    open_chat(page, kitchen, "Kitchen")
    send(page, "Oak or marble?")
    wait_for_reply(page)

    page.goto("/#/notes/kitchen/kitchen/worktops")
    delete = page.locator("#note-pane").get_by_role("button", name="Delete")
    delete.click()
    page.locator("#note-pane").get_by_role("button", name="Move to trash?").click()
    expect(page.locator("#toast")).to_contain_text("“Worktops” is in the trash")
    expect(page.locator("#notes-results")).not_to_contain_text("Worktops")

    page.goto("/#/settings/kitchen")
    page.get_by_role("button", name="Delete project…").click()
    page.get_by_role("button", name="Move Kitchen to the trash").click()
    expect(page.locator("#toast")).to_contain_text("Kitchen is in the trash")
    expect(page.locator("#channel-select option")).to_have_text(["Private (only you)"])
    trash = page.get_by_role("region", name="Trash")
    expect(trash.locator("li")).to_have_count(2)
    expect(trash.locator("li").first).to_contain_text("project Kitchen")

    console.allow(r"status of 404 .*/api/trash/restore")  # the note before its project
    trash.locator("li", has_text="Worktops").get_by_role("button", name="Restore").click()
    expect(page.locator("#toast")).to_contain_text("The note's project 'kitchen' is not there")
    trash.locator("li", has_text="project").get_by_role("button", name="Restore").click()
    expect(page.locator("#toast")).to_contain_text("Kitchen is back.")
    # The list is drawn again once the project is back: click the row of the new list, not
    # one about to be replaced (under load the click landed on the old one, and was lost).
    expect(trash.locator("li")).to_have_count(1)
    expect(trash.locator("li").first).to_contain_text("note Worktops")
    trash.locator("li", has_text="Worktops").get_by_role("button", name="Restore").click()
    expect(trash.locator("li")).to_have_text(["The trash is empty."])
    open_chat(page, kitchen, "Kitchen")
    expect(page.locator(".msg-user .msg-body")).to_have_text(["Oak or marble?"])
    page.goto("/#/notes/kitchen/kitchen/worktops")
    expect(page.get_by_role("heading", name="Worktops")).to_be_visible()


def test_each_project_picks_its_model_from_the_server(page: Page, server: Server) -> None:
    kitchen = server.project("Kitchen")
    server.llm.models.append("big-model")
    server.llm.reply("From the big model.")
    sign_in(page)
    page.goto("/#/settings/kitchen")
    picker = page.locator("#project-form").get_by_label("Model")
    expect(picker).to_be_enabled()
    expect(picker.locator("option")).to_have_text(
        ["Default (test-model)", "test-model", "big-model"]
    )
    picker.select_option("big-model")
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator("#toast")).to_contain_text("Settings saved.")
    toml = server.settings.projects_dir / kitchen / "project.toml"
    assert 'model = "big-model"' in toml.read_text()
    page.reload()
    expect(page.get_by_role("heading", name="Project: Kitchen")).to_be_visible()
    expect(picker).to_have_value("big-model")
    open_chat(page, kitchen, "Kitchen")
    send(page, "Which model are you?")
    wait_for_reply(page)
    assert server.llm.requests[-1]["model"] == "big-model"
