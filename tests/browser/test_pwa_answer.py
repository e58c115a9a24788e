"""An answer in the PWA, as a person lives it: the composer is theirs again as soon as the
reply is complete (a distillation after it never holds it), and the answer lands in view —
their message and its start on screen, on a phone and on a laptop — followed as it streams
unless they scrolled up themselves. Measured with bounding boxes, not eyeballed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, Route, expect
from support.distilling import distill_answer, is_distillation

from .pwa import PHONE, Console, Server, open_chat, send, sign_in, wait_for_reply

pytestmark = pytest.mark.browser

LAPTOP = {"width": 1280, "height": 800}
LINE = 24  # px: one line of an answer, about


def long_answer(topic: str, paragraphs: int = 8) -> str:
    """An answer several screens long, every sentence different (a repeated one reads as a
    model stuck in a loop, and is cut off)."""
    return "\n\n".join(
        f"Point {n} about {topic}: "
        + " ".join(f"step {n}.{k} oils the oak once more." for k in (1, 2, 3, 4, 5, 6))
        for n in range(1, paragraphs + 1)
    )


def boxes(page: Page) -> dict[str, Any]:
    """Where the messages' box, the person's last message and the last answer are now."""
    found: dict[str, Any] = page.evaluate(
        """() => {
          const box = (el) => { const r = el.getBoundingClientRect();
            return { top: r.top, bottom: r.bottom }; };
          const last = (selector) => [...document.querySelectorAll(selector)].pop();
          const scroller = document.querySelector('#messages-scroll');
          return {
            view: box(scroller),
            scrollTop: scroller.scrollTop,
            bottomGap: scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight,
            mine: box(last('.msg-user')),
            answer: box(last('.msg-assistant .msg-body')),
          };
        }"""
    )
    return found


def chatting(
    new_context: Callable[..., BrowserContext], server: Server, size: dict[str, int]
) -> Page:
    """A kitchen chat with three long exchanges already, so that it scrolls."""
    server.project("Kitchen", distill_every=100)  # no distillation: the model says what it is told
    page = new_context(viewport=size).new_page()
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    for topic in ("worktops", "cupboards", "the floor"):
        server.llm.reply(long_answer(topic, 4))
        send(page, f"Tell me about {topic}.")
        wait_for_reply(page)
    return page


@pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["phone", "laptop"])
def test_a_new_answer_lands_in_view(
    new_context: Callable[..., BrowserContext],
    server: Server,
    size: dict[str, int],
    shoot: Callable[[Page, str], None],
) -> None:
    page = chatting(new_context, server, size)
    server.llm.reply(long_answer("the splashback"), chunk_size=40, chunk_delay=0.01)
    send(page, "And what about the splashback?")
    wait_for_reply(page)
    page.wait_for_timeout(300)  # any scrolling left has settled
    seen = boxes(page)
    view, mine, answer = seen["view"], seen["mine"], seen["answer"]
    # The person's message is on screen, whole…
    assert view["top"] <= mine["top"] and mine["bottom"] <= view["bottom"], seen
    # …and so is the start of the answer: its first lines, not just a sliver of the card.
    assert answer["top"] + 3 * LINE <= view["bottom"], seen
    shoot(page, "chat-answer-in-view-phone" if size is PHONE else "chat-answer-in-view")


def test_a_short_answer_is_followed_to_its_end(
    new_context: Callable[..., BrowserContext], server: Server
) -> None:
    page = chatting(new_context, server, PHONE)
    server.llm.reply("Glass or tiles: tiles are cheaper, glass wipes clean.")
    send(page, "Glass or tiles for the splashback?")
    wait_for_reply(page)
    page.wait_for_timeout(300)
    seen = boxes(page)
    assert seen["answer"]["bottom"] <= seen["view"]["bottom"], seen
    assert seen["bottomGap"] < 2 * LINE, seen  # the end of the conversation, in view


def test_a_person_who_scrolls_up_is_left_where_they_are(
    new_context: Callable[..., BrowserContext], server: Server
) -> None:
    page = chatting(new_context, server, LAPTOP)
    server.llm.reply(long_answer("the splashback"), chunk_size=10, chunk_delay=0.05)
    send(page, "And what about the splashback?")
    answer = page.locator(".msg-assistant .msg-body").last
    expect(answer).to_contain_text("step 1.2")  # streaming
    scroller = page.locator("#messages-scroll")
    scroller.hover()
    page.mouse.wheel(0, -1500)  # back up, to reread an earlier answer
    page.wait_for_timeout(500)
    left_at = boxes(page)["scrollTop"]
    wait_for_reply(page)
    page.wait_for_timeout(300)
    assert abs(boxes(page)["scrollTop"] - left_at) <= 1  # the answer did not pull them down


def test_the_composer_is_free_once_the_reply_is_complete(
    new_context: Callable[..., BrowserContext],
    server: Server,
    shoot: Callable[[Page, str], None],
) -> None:
    """The distillation after a reply may take a minute on a small model: the person can
    send their next message meanwhile, and no Stop button pretends the answer goes on."""
    server.project("Trip", distill_every=2)
    distilling = threading.Event()  # the distillation's model has been asked
    release = threading.Event()  # …and answers when the test says so
    answers = {
        "Let's go to Oslo in May.": "Oslo in May is lovely.",
        "What should I pack?": "Pack a raincoat: May in Oslo can be wet.",
    }

    def model(request: dict[str, Any]) -> str:
        if not is_distillation(request):
            return answers[request["messages"][-1]["content"]]
        distilling.set()
        assert release.wait(30), "the test never let the distillation answer"
        return distill_answer("Planning a trip to Oslo in May.", ("Go to Oslo in May",))

    server.llm.default = model
    page = new_context(viewport=LAPTOP).new_page()
    sign_in(page)
    open_chat(page, "trip", "Trip")
    panel = page.get_by_role("complementary", name="Memory")
    expect(panel.locator("#memory-summary")).to_contain_text("Nothing yet")

    send(page, "Let's go to Oslo in May.")
    first = page.locator(".msg-assistant").first
    expect(first.locator(".msg-body")).to_have_text("Oslo in May is lovely.")
    assert distilling.wait(10), "no distillation was asked for"
    # The reply is complete and the distillation still running: the composer is free.
    expect(page.locator("#stop-button")).to_be_hidden()
    expect(page.locator("#send-button")).to_be_visible()
    expect(first).not_to_have_attribute("aria-busy", "true")
    shoot(page, "chat-free-while-distilling")

    send(page, "What should I pack?")
    second = page.locator(".msg-assistant").nth(1)
    expect(second.locator(".msg-body")).to_have_text("Pack a raincoat: May in Oslo can be wet.")
    expect(page.locator("#send-button")).to_be_visible()
    expect(panel.locator("#memory-summary")).to_contain_text("Nothing yet")  # still distilling

    release.set()  # the memory is updated when the slow distillation ends, all the same
    expect(panel.locator("#memory-summary")).to_contain_text("Planning a trip to Oslo in May.")
    wait_for_reply(page)
    assert server.rows("SELECT role, content FROM messages ORDER BY id") == [
        ("user", "Let's go to Oslo in May."),
        ("assistant", "Oslo in May is lovely."),
        ("user", "What should I pack?"),
        ("assistant", "Pack a raincoat: May in Oslo can be wet."),
    ]


def test_an_event_the_page_does_not_know_is_passed_over(page: Page, server: Server) -> None:
    """A newer server may send more: here a `saved` event first, before the reply's own."""
    server.llm.reply("Oak it is.")

    def with_a_new_event(route: Route) -> None:
        answer = route.fetch()
        saved = 'event: saved\ndata: {"message": {"id": 1, "role": "user"}}\n\n'
        route.fulfill(response=answer, body=saved + answer.text())

    page.route("**/api/channels/*/chat*", with_a_new_event)
    sign_in(page)
    send(page, "Oak or marble?")
    wait_for_reply(page)
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("Oak it is.")
    expect(page.locator(".msg-assistant .callout-error")).to_have_count(0)
    expect(page.locator("#send-button")).to_be_visible()


def test_a_connection_cut_after_the_server_kept_the_message_loses_nothing_and_sends_nothing_twice(
    page: Page, server: Server, console: Console
) -> None:
    """A server that dies, or a network that drops, after the message was stored but before
    the page heard so: the page is told the message is saved and takes its words out of the
    box (sent again, they would be stored twice), and shows the reply as the server kept it."""
    server.llm.reply("Oak wears better than marble.")

    def answered_then_cut(route: Route) -> None:
        route.fetch()  # the server stores the message and the whole reply
        route.abort("connectionreset")  # and the page never hears a word of it

    console.allow(r"ERR_CONNECTION_RESET .*/chat")  # the browser logs the broken request
    page.route("**/api/channels/*/chat*", answered_then_cut)
    sign_in(page)
    send(page, "Oak or marble?")
    wait_for_reply(page)
    reply = page.locator(".msg-assistant").last
    expect(reply.locator(".callout-error")).to_be_visible()
    expect(reply.locator(".notice").first).to_contain_text("Your message reached Charlie")
    expect(reply.locator(".msg-body")).to_have_text("Oak wears better than marble.")
    expect(reply.locator(".notice").last).to_contain_text("as it was saved")
    expect(page.get_by_label("Message", exact=True)).to_have_value("")
    assert server.rows("SELECT role, content FROM messages ORDER BY id") == [
        ("user", "Oak or marble?"),
        ("assistant", "Oak wears better than marble."),
    ]


def test_a_message_the_server_never_got_stays_in_the_box(
    page: Page, server: Server, console: Console
) -> None:
    """The other side: a request that never reached the server leaves the words to send
    again, and nothing is said to be saved."""
    console.allow(r"ERR_CONNECTION_RESET .*/chat")
    page.route("**/api/channels/*/chat*", lambda route: route.abort("connectionreset"))
    sign_in(page)
    send(page, "Oak or marble?")
    wait_for_reply(page)
    reply = page.locator(".msg-assistant").last
    expect(reply.locator(".callout-error")).to_be_visible()
    expect(page.get_by_label("Message", exact=True)).to_have_value("Oak or marble?")
    expect(reply.locator(".notice")).to_have_count(0)
    assert server.rows("SELECT count(*) FROM messages") == [(0,)]
