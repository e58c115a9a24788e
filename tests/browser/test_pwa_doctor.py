"""Settings → This Charlie runs the `charlie doctor` checks on request and shows the table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from llm_double import ErrorReply, ScriptedLLMServer, ToolCallsReply
from playwright.sync_api import Page, expect

from .pwa import PHONE, Server, sign_in

pytestmark = pytest.mark.browser


def capable(request: dict[str, Any]) -> Any:
    if request.get("tools"):
        name = request["tools"][0]["function"]["name"]
        return ToolCallsReply([(name, {"a": 2, "b": 3} if name == "add" else {"query": "oak"})])
    if request.get("response_format"):
        return '{"answer": 5}'
    return "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"


def test_run_checks_shows_the_table_and_costs_nothing_until_asked(
    page: Page, server: Server, llm: ScriptedLLMServer
) -> None:
    llm.default = capable
    sign_in(page)
    page.goto("/#/settings/private")
    expect(page.locator("#health-details")).to_contain_text("reachable")
    table = page.get_by_role("table", name="Model server checks")
    expect(table).to_be_hidden()
    assert llm.requests == []  # opening Settings sends the model nothing

    page.get_by_role("button", name="Run checks").click()
    expect(page.locator("#doctor-status")).to_have_text("Charlie can chat with this server.")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(11)
    expect(rows.nth(0)).to_have_text("reachableok: 1 model(s) listed")
    expect(rows.nth(4)).to_have_text('tool callsok: native call add({"a": 2, "b": 3})')
    expect(rows.nth(5)).to_have_text("tool useok: the model called a tool natively, unasked")
    expect(rows.nth(8)).to_have_text("embeddingsnot used (CHARLIE_EMBEDDINGS=local)")
    expect(rows.nth(10)).to_have_text("tool modeok: native (tool_mode = native (set))")
    expect(table.get_by_role("columnheader")).to_have_text(["Check", "Result", "Fix"])


def test_a_failing_check_shows_what_to_do(
    page: Page, server: Server, llm: ScriptedLLMServer
) -> None:
    """Tools ignored (a llama-server without --jinja), and streaming broken: Charlie
    cannot chat, and each failing line says what to do."""

    def broken(request: dict[str, Any]) -> Any:
        if request.get("stream"):
            return ErrorReply(500, "stream broke")
        return "5" if request.get("tools") else capable(request)

    llm.default = broken
    sign_in(page)
    page.goto("/#/settings/private")
    page.get_by_role("button", name="Run checks").click()
    row = page.get_by_role("row", name="tool calls")
    expect(row.get_by_role("cell").nth(0)).to_have_text(
        "FAIL: no tool call: the server ignored the tools"
    )
    expect(row.get_by_role("cell").nth(1)).to_contain_text("start llama-server with --jinja")
    streaming = page.get_by_role("row", name="streaming")
    expect(streaming.get_by_role("cell")).to_have_text(
        ["FAIL: HTTP 500: stream broke", "check the server's log"]
    )
    expect(page.locator("#doctor-status")).to_have_text(
        "Charlie cannot chat with this server until the FAIL lines are fixed."
    )


def test_settings_are_grouped_and_a_group_is_one_click_away(
    page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    """Settings in four groups under their headings; a button brings one into view, scrolling
    the settings alone (the header stays)."""
    server.project("Kitchen")
    server.llm.default = capable
    sign_in(page)
    page.goto("/#/settings/kitchen")
    groups = page.get_by_role("navigation", name="Settings groups").get_by_role("button")
    expect(groups).to_have_text(["This project", "You", "Everyone", "This Charlie"])
    shoot(page, "settings-groups")
    for name, card in (
        ("This project", "Project: Kitchen"),
        ("You", "Voice"),
        ("Everyone", "Trash"),
        ("This Charlie", "Status and model checks"),
    ):
        group = page.get_by_role("region", name=name)
        expect(group.get_by_role("heading", name=card, exact=True)).to_have_count(1)
    header = page.locator("header").first
    before = header.bounding_box()
    checks = page.get_by_role("button", name="Run checks")
    groups.filter(has_text="This Charlie").click()
    expect(checks).to_be_in_viewport(timeout=15_000)  # a smooth scroll, slow on a busy machine
    expect(page.get_by_role("heading", name="This Charlie", exact=True).first).to_be_focused()
    assert header.bounding_box() == before
    page.set_viewport_size(PHONE)
    checks.click()
    expect(page.locator("#doctor-status")).to_have_text("Charlie can chat with this server.")
    page.locator("#doctor-table").scroll_into_view_if_needed()
    shoot(page, "settings-checks-phone")
