"""trace.js renders every kind of trace step from its fields, says so loudly when it meets
a kind or a guard it does not know, and shows no trace at all for an answer that used no
tool."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect
from support.trace_examples import EXAMPLES

from charlie.trace import Called, Loaded, Preloaded, Stopped, to_json

from .pwa import Console, Server, open_chat, send, sign_in, wait_for_reply

pytestmark = pytest.mark.browser

RENDER = """async (steps) => {
  const { traceBlock } = await import('/trace.js');
  const block = traceBlock(steps, { open: true });
  document.body.append(block.element);
  return {
    headline: block.element.querySelector('.trace-title').textContent,
    steps: [...block.element.querySelectorAll('.trace-steps > li')].map((li) => ({
      line: li.querySelector('summary').textContent,
      found: [...li.querySelectorAll('.found li')].map((hit) => ({
        text: hit.textContent,
        title: hit.getAttribute('title'),
      })),
    })),
  };
}"""


def render(page: Page, steps: list[dict[str, Any]]) -> dict[str, Any]:
    rendered: dict[str, Any] = page.evaluate(RENDER, steps)
    return rendered


def test_every_kind_of_step_renders_from_its_fields(page: Page, server: Server) -> None:
    sign_in(page)
    rendered = render(page, [to_json(step) for step in EXAMPLES])
    assert len(rendered["steps"]) == len(EXAMPLES)
    lines = [step["line"] for step in rendered["steps"]]
    assert lines[0] == "hint tools pre-loaded: memory"
    assert lines[2] == "load time → now, date_add"
    assert lines[4] == 'search_notes("worktops") → 2 notes'
    assert rendered["steps"][4]["found"] == [
        {"text": "Worktop decision0.82", "title": "kitchen/worktops: We decided on oak…"},
        {"text": "Oiling schedule0.41", "title": "kitchen/oiling: Every spring…"},
    ]
    assert rendered["steps"][5]["found"] == []  # a search that found nothing
    assert not any("unknown step" in line for line in lines)
    assert lines[8] == 'Charlie looked up search_notes("oak?") → 1 note'
    assert lines[9] == "mode constrained steps"
    assert lines[10] == "mode tool calls written as text"
    calls = sum(isinstance(step, Called) for step in EXAMPLES)
    assert rendered["headline"].startswith(f"Trace · {calls} tool calls")
    # The console fixture fails the test on any console error: every kind and every guard
    # (EXAMPLES has them all) was known.


def test_an_unknown_kind_or_guard_is_a_console_error(
    page: Page, server: Server, console: Console
) -> None:
    sign_in(page)
    console.allow(r"Unknown trace (step type|guard)")
    rendered = render(
        page,
        [
            {"type": "thinking", "text": "hmm"},
            {"type": "guard", "guard": "sleepy", "detail": "tired"},
        ],
    )
    assert rendered["steps"][0]["line"] == "unknown step: thinking"
    assert [e.split(" (http")[0] for e in console.errors] == [
        'Unknown trace step type "thinking" {type: thinking, text: hmm}',
        'Unknown trace guard "sleepy"',
    ]


VISIBLE = """async (traces) => {
  const { traceBlock } = await import('/trace.js');
  return traces.map((steps) => {
    const block = traceBlock(steps);
    document.body.append(block.element);
    return block.element.checkVisibility();
  });
}"""


def test_a_trace_without_a_tool_is_hidden(page: Page, server: Server) -> None:
    sign_in(page)
    hint, none = to_json(Preloaded(("memory",))), to_json(Preloaded(()))
    call = to_json(Called("now", {}, True, "10:00", 0.1))
    load = to_json(Loaded("time", ok=True, tools=("now",)))
    guard = to_json(Stopped("max_iterations", "round limit"))
    shown = page.evaluate(VISIBLE, [[], [none], [hint, none], [hint, call], [load], [guard]])
    assert shown == [False, False, False, True, True, True]


def test_a_reply_that_used_no_tool_shows_no_trace(page: Page, server: Server) -> None:
    server.project("Kitchen")
    server.llm.reply("Oak, oiled twice a year.")
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    send(page, "Which wood?")
    wait_for_reply(page)
    answer = page.locator(".msg-assistant").last
    expect(answer.locator(".msg-body")).to_have_text("Oak, oiled twice a year.")
    expect(answer.locator("details.trace")).to_be_hidden()
    expect(page.get_by_text("no tools used")).to_be_hidden()
    stored = server.rows("SELECT trace FROM messages WHERE role = 'assistant'")
    assert "suggested" in stored[0][0]  # the hint was recorded, just not shown
    page.reload()
    expect(page.locator(".msg-assistant .msg-body").last).to_have_text("Oak, oiled twice a year.")
    expect(page.locator(".msg-assistant details.trace")).to_be_hidden()
