"""Chatting in the PWA: the streamed reply, its tool trace, images, errors, suggestions."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from .pwa import Server, open_chat, send, sign_in, wait_for_reply

pytestmark = pytest.mark.browser

DECISION_NOTE = (
    "We decided on oak worktops, not marble: oak is warmer and cheaper. Oil them twice a year."
)


def kitchen(server: Server) -> None:
    server.project("Kitchen", style="Brief and practical.")
    server.note("kitchen", "Worktop decision", DECISION_NOTE, ("worktops", "decided"))
    server.note(
        "kitchen",
        "Worktop oiling schedule",
        "Oak worktops need oiling: every spring and every autumn, with hardwax oil.",
        ("worktops", "maintenance"),
    )


def test_streamed_reply_with_an_expandable_trace(
    page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    kitchen(server)
    server.llm.tool_calls([("search_notes", {"query": "worktop decision"})])
    reply = (
        "We decided on **oak worktops**, not marble.\n\n"
        "- oak is warmer\n- it is cheaper\n\nOil them twice a year (`hardwax oil`)."
    )
    server.llm.reply(reply, chunk_size=6, chunk_delay=0.05)
    sign_in(page)
    page.get_by_label("Project", exact=True).select_option(label="Kitchen")
    expect(page.get_by_role("heading", name="Kitchen", exact=True)).to_be_visible()
    expect(page.locator("#messages-empty")).to_contain_text("No messages yet in Kitchen")

    send(page, "What did we decide about the worktops?")
    answer = page.locator(".msg-assistant").last
    # Streaming: part of the answer is on screen while the reply is still arriving.
    page.wait_for_function(
        "() => { const m = [...document.querySelectorAll('.msg-assistant')].pop();"
        " return m && m.hasAttribute('aria-busy')"
        " && m.querySelector('.msg-body').textContent.length > 0; }"
    )
    wait_for_reply(page)
    expect(answer.locator(".msg-body strong")).to_have_text("oak worktops")
    expect(answer.locator(".msg-body li")).to_have_count(2)
    expect(answer.locator(".msg-body code")).to_have_text("hardwax oil")

    trace = answer.locator("details.trace")
    expect(trace.locator("summary").first).to_contain_text("1 tool call · search_notes")
    step = trace.locator(".step").filter(has_text="search_notes")
    expect(step.locator("summary").first).to_contain_text(
        'search_notes("worktop decision") → 2 notes'
    )
    step.locator("summary").first.click()
    expect(step.locator(".step-detail")).to_contain_text("Searched for worktop decision")
    expect(step.locator(".found li")).to_have_count(2)
    expect(step.locator(".found li").first).to_contain_text("Worktop decision")
    shoot(page, "chat-with-trace")

    # The model really got the tool's result, and the trace was stored with the reply.
    tool_messages = [m for m in server.llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "Worktop decision" in tool_messages[0]["content"]
    page.reload()
    stored = page.locator(".msg-assistant").last
    expect(stored.locator(".msg-body strong")).to_have_text("oak worktops")
    expect(stored.locator("details.trace summary").first).to_contain_text("search_notes")


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(b"\x00" + b"\xe9\xa2\x3b" * 8 for _ in range(8))
    header = struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_an_attached_image_reaches_the_model(page: Page, server: Server) -> None:
    server.llm.reply("It is amber.")
    sign_in(page)
    picker = page.locator("#image-input")
    assert picker.get_attribute("accept") == "image/*"
    assert picker.get_attribute("capture") == "environment"
    picker.set_input_files([{"name": "tile.png", "mimeType": "image/png", "buffer": tiny_png()}])
    expect(page.get_by_role("button", name="Remove tile.png")).to_be_visible()
    send(page, "What colour is this tile?")
    wait_for_reply(page)
    expect(page.locator(".msg-user img")).to_have_count(1)
    expect(page.locator(".attachment")).to_have_count(0)

    parts = server.llm.requests[-1]["messages"][-1]["content"]
    images = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    assert len(images) == 1
    assert base64.b64decode(images[0].split(",", 1)[1]) == tiny_png()


def test_reply_markdown_cannot_inject_html(page: Page, server: Server) -> None:
    server.llm.reply(
        'Look: <img src=x onerror="window.pwned=1"> <script>window.pwned=2</script>\n\n'
        "[click me](javascript:window.pwned=3) and [the docs](https://example.org/a_b)\n\n"
        "```html\n<b>not bold</b>\n```"
    )
    sign_in(page)
    send(page, "Show me some HTML")
    wait_for_reply(page)
    body = page.locator(".msg-assistant .msg-body").last
    expect(body).to_contain_text('<img src=x onerror="window.pwned=1">')
    expect(body.locator("img, script, b")).to_have_count(0)
    expect(body.locator("a")).to_have_count(1)
    expect(body.locator("a")).to_have_attribute("href", "https://example.org/a_b")
    expect(body.locator("pre code")).to_have_text("<b>not bold</b>")
    assert page.evaluate("window.pwned") is None


def test_model_errors_are_shown_and_the_message_is_kept(
    page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    sign_in(page)
    server.llm.stop()  # the model server goes away
    send(page, "Are you there?")
    wait_for_reply(page)
    error = page.locator(".msg-assistant .callout-error").last
    expect(error).to_contain_text("Charlie couldn't answer")
    expect(page.locator("#llm-banner")).to_be_visible()
    page.reload()
    expect(page.locator(".msg-user").last).to_contain_text("Are you there?")
    expect(page.locator("#llm-banner")).to_contain_text("Language model unreachable.")
    shoot(page, "llm-unreachable")


def test_a_suggested_note_can_be_accepted_and_joins_the_context(page: Page, server: Server) -> None:
    kitchen(server)
    server.llm.reply("Oak it is.")
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    send(page, "Remind me about oak worktops and oiling")
    wait_for_reply(page)
    suggestions = page.get_by_role("region", name="Suggested notes")
    expect(suggestions).to_be_visible()
    first = suggestions.locator(".suggestion").first
    title = first.locator(".suggestion-text button").inner_text()
    first.get_by_role("button", name="Accept").click()
    expect(suggestions.locator(".decided-accept")).to_contain_text(f"Pinned “{title}”")

    server.llm.reply("Noted.")
    send(page, "Thanks")
    wait_for_reply(page)
    context = json.dumps(server.llm.requests[-1]["messages"])
    assert title in context  # the pinned note travels with the next turn


def test_a_suggestion_can_be_dismissed(page: Page, server: Server) -> None:
    kitchen(server)
    server.llm.reply("Oak it is.")
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    send(page, "Remind me about oak worktops and oiling")
    wait_for_reply(page)
    first = page.locator(".suggestion").first
    first.get_by_role("button", name="Dismiss").click()
    expect(page.locator(".decided-dismiss")).to_contain_text("Dismissed")
    statuses = server.rows("SELECT status FROM suggestions WHERE status = 'dismissed'")
    assert len(statuses) == 1
