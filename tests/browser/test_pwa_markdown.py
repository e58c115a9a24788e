"""Markdown in the PWA: replies rendered by the server (tables, highlighted code with a Copy
button, task lists, safe links) on a desktop and on a phone, shown as plain text while they
stream; notes, the memory's summary and search snippets through the same renderer. None lets
a reply or a note run HTML."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from .pwa import DESKTOP, PHONE, Server, open_chat, send, sign_in, wait_for_reply

pytestmark = pytest.mark.browser

CODE = 'def oil(wood: str) -> str:\n    return f"{wood}: twice a year"  # hardwax'
REPLY = (
    "Here is the plan for the **kitchen**:\n\n"
    "| Wood | Oil | Every |\n|:--|:--|--:|\n"
    "| oak | hardwax | 6 months |\n| walnut | tung | 12 months |\n"
    "| ash | `linseed_oil_from_the_blue_tin` | 3 months |\n\n"
    f"```python\n{CODE}\n```\n\n"
    "- [x] measure the run\n- [ ] order samples\n\n"
    "> Oil little and often.\n\n"
    "See [the guide](https://example.org/oak) or https://example.org/faq."
)


def reply_with_table_and_code(page: Page, server: Server) -> None:
    server.project("Kitchen")
    server.llm.reply(REPLY)
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    send(page, "How do we look after the worktops?")
    wait_for_reply(page)


def check_rendered(page: Page) -> None:
    body = page.locator(".msg-assistant .msg-body").last
    table = body.locator("table")
    expect(table.locator("th")).to_have_text(["Wood", "Oil", "Every"])
    expect(table.locator("tbody tr")).to_have_count(3)
    expect(table.locator("td").nth(2)).to_have_css("text-align", "right")
    block = body.locator(".code-block")
    expect(block.locator(".code-bar")).to_contain_text("python")
    expect(block.locator("pre code")).to_have_text(CODE)
    keyword = block.locator("span.hl-k").first
    expect(keyword).to_have_text("def")
    code_colour = block.locator("pre code").evaluate("(c) => getComputedStyle(c).color")
    assert keyword.evaluate("(k) => getComputedStyle(k).color") != code_colour  # highlighted
    boxes = body.locator("input[type=checkbox]")
    expect(boxes).to_have_count(2)
    expect(boxes.first).to_be_checked()
    expect(boxes.first).to_be_disabled()
    expect(body.locator("blockquote")).to_have_text("Oil little and often.")
    links = body.locator("a")
    expect(links).to_have_count(2)
    for number in range(2):
        expect(links.nth(number)).to_have_attribute("target", "_blank")
        expect(links.nth(number)).to_have_attribute("rel", "noopener noreferrer")
    expect(links.first).to_have_attribute("href", "https://example.org/oak")


def copy_works(page: Page, context: BrowserContext) -> None:
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    button = page.locator(".msg-assistant .code-block").last.get_by_role(
        "button", name="Copy the python code"
    )
    button.click()
    expect(button).to_have_text("Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == CODE
    expect(button).to_have_text("Copy", timeout=5000)  # ready for the next copy


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_reply_with_a_table_and_code_to_copy(
    new_context: Callable[..., BrowserContext],
    server: Server,
    viewport: dict[str, int],
    shoot: Callable[[Page, str], None],
) -> None:
    context = new_context(viewport=viewport)
    page = context.new_page()
    reply_with_table_and_code(page, server)
    check_rendered(page)
    copy_works(page, context)
    # Nothing sticks out sideways: a wide table scrolls inside itself.
    assert page.evaluate("() => document.documentElement.scrollWidth") <= viewport["width"]
    table = page.locator(".msg-assistant table").last
    assert table.evaluate("(t) => t.getBoundingClientRect().right") <= viewport["width"]
    if viewport is PHONE:
        assert table.evaluate("(t) => t.scrollWidth > t.clientWidth")
    else:
        shoot(page, "pwa-rendering")
    page.reload()  # a loaded message is shown from its stored HTML, just the same
    check_rendered(page)
    copy_works(page, context)


def test_copy_falls_back_when_the_clipboard_api_is_missing(page: Page, server: Server) -> None:
    """Served over plain http on a home network, a page has no navigator.clipboard."""
    page.add_init_script(
        """
        Object.defineProperty(Navigator.prototype, 'clipboard', { get: () => undefined });
        const copy = document.execCommand.bind(document);
        document.execCommand = (command) => {
          window.copied = document.activeElement.value;
          return copy(command);
        };
        """
    )
    reply_with_table_and_code(page, server)
    button = page.get_by_role("button", name="Copy the python code")
    button.click()
    expect(button).to_have_text("Copied")
    assert page.evaluate("() => window.copied") == CODE
    expect(page.locator(".copy-buffer")).to_have_count(0)  # cleaned up


def test_a_reply_streams_as_plain_text_then_shows_its_html(page: Page, server: Server) -> None:
    server.llm.reply(REPLY, chunk_size=8, chunk_delay=0.03)
    sign_in(page)
    send(page, "The plan?")
    page.wait_for_function(
        "() => { const m = [...document.querySelectorAll('.msg-assistant')].pop();"
        " return m && m.hasAttribute('aria-busy')"
        " && m.querySelector('.msg-body').textContent.includes('|'); }"
    )
    streaming = page.locator(".msg-assistant .msg-body").last
    expect(streaming.locator("table, pre")).to_have_count(0)  # while streaming: the words
    wait_for_reply(page)
    expect(streaming.locator("table")).to_have_count(1)
    expect(streaming.locator(".streamed")).to_have_count(0)
    check_rendered(page)


ATTACK = (
    'Look: <img src=x onerror="window.pwned=1"> <script>window.pwned=2</script>\n\n'
    "<svg onload=\"window.pwned=3\"><circle r='9'/></svg> <iframe src=javascript:parent.pwned=4>"
    "</iframe>\n\n"
    "[click me](javascript:window.pwned=5) [data](data:text/html,<script>parent.pwned=6</script>)"
    " ![pic](javascript:window.pwned=7) [home](/api/logout)\n\n"
    "| <img src=x onerror=window.pwned=8> | ok |\n|---|---|\n| a | b |\n\n"
    "- [ ] <b onmouseover=window.pwned=9>task</b>\n\n"
    "```html\n<script>window.pwned=10</script>\n```"
)


def test_a_reply_cannot_inject_html(page: Page, server: Server) -> None:
    server.llm.reply(ATTACK)
    sign_in(page)
    send(page, "Show me some HTML")
    wait_for_reply(page)
    for attempt in ("sent", "loaded"):
        body = page.locator(".msg-assistant .msg-body").last
        expect(body).to_contain_text('<img src=x onerror="window.pwned=1">')
        expect(body.locator("img, script, svg, iframe, b, object, embed, style")).to_have_count(0)
        expect(body.locator("a")).to_have_count(0)  # every address was refused
        expect(body.locator("pre code")).to_have_text("<script>window.pwned=10</script>")
        assert page.evaluate("() => document.querySelectorAll('[onerror], [onload]').length") == 0
        body.locator("td").first.hover()
        assert page.evaluate("window.pwned") is None, attempt
        page.reload()


# ---------------------------------------------------------------- notes and memory

NOTE = (
    "## Oiling\n\n"
    "| Wood | Oil |\n|:--|--:|\n| oak | **hardwax** |\n\n"
    "```python\nprint('<hi>')\n```\n\n"
    "- [x] sanded\n\n"
    "<script>window.pwned=1</script> [x](javascript:window.pwned=2) "
    '<img src=x onerror="window.pwned=3">'
)


def test_notes_memory_and_snippets_are_rendered_as_replies_are(page: Page, server: Server) -> None:
    """The same renderer and allow-list as replies: a note's table, code and task list are
    drawn, its HTML is shown as typed; the memory's summary likewise; a search snippet shows
    the words without their markup."""
    slug = server.project("Kitchen")
    server.note(slug, "Worktop care", NOTE)
    layers = server.settings.projects_dir / slug / "memory.md"
    layers.write_text("# Memory\n\n## Summary\nWe chose **oak**; see `care.md`.\n")
    sign_in(page)
    page.goto(f"/#/notes/{slug}")
    page.get_by_role("searchbox", name="Search notes").fill("hardwax oiling")
    page.get_by_role("button", name="Search", exact=True).click()
    snippet = page.locator("#notes-results .result .snippet").first
    expect(snippet).to_contain_text("Oiling")
    assert not any(mark in snippet.inner_text() for mark in ("**", "##", "|:--")), (
        snippet.inner_text()
    )
    page.locator("#notes-results .note-link").first.click()
    body = page.locator(".note-body")
    expect(body.locator("table th")).to_have_text(["Wood", "Oil"])
    expect(body.locator("table td strong")).to_have_text("hardwax")
    expect(body.locator(".code-block .code-bar")).to_contain_text("python")
    expect(body.locator("pre code")).to_have_text("print('<hi>')")
    expect(body.locator("input[type=checkbox]")).to_be_checked()
    expect(body).to_contain_text("<script>window.pwned=1</script>")
    expect(body.locator("script, img, a")).to_have_count(0)
    open_chat(page, slug, "Kitchen")
    summary = page.get_by_role("complementary", name="Memory").locator("#memory-summary")
    expect(summary.locator("strong")).to_have_text("oak")
    expect(summary.locator("code")).to_have_text("care.md")
    assert page.evaluate("window.pwned") is None
    assert page.evaluate("() => document.querySelectorAll('script:not([src])').length") == 0
