"""Talking to Charlie in the PWA, with Chromium's fake microphone playing speech we made.

The microphone is a WAV file (tests/speech.py: a known sentence between stretches of
silence) that Chromium plays in a loop into getUserMedia. Hands-free: the page streams it to
the server's listener, the server's voice detector says when the sentence is over, and the
turn is heard, answered (the LLM double), stored, and spoken by Piper.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect
from speech import placed

from .conftest import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS
from .pwa import DESKTOP, Console, Server, open_chat, sign_in

pytestmark = pytest.mark.browser

QUESTION = "What did we decide about the kitchen worktop?"
BEFORE, AFTER = 1.0, 3.0  # seconds of silence around the question in the fake microphone
TURN_MS = 60_000  # hearing, answering and speaking on a busy two-core machine

# Records every state the voice pill shows, so a test can check the order afterwards.
WATCH_STATES = """() => {
  const pill = document.querySelector('#voice-state');
  window.voiceStates = [pill.dataset.voiceState];
  new MutationObserver(() => {
    const now = pill.dataset.voiceState;
    if (window.voiceStates.at(-1) !== now) window.voiceStates.push(now);
  }).observe(pill, { attributes: true, attributeFilter: ['data-voice-state'] });
}"""


@pytest.fixture(autouse=True)
def offline_voices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the offline speech engines, set before the server fixture loads its settings."""
    monkeypatch.setenv("CHARLIE_VOICE_TTS", "piper,espeak")


@pytest.fixture(scope="module")
def microphone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The question as Chromium's fake microphone plays it: a 16-bit mono WAV at 48 kHz."""
    path = tmp_path_factory.mktemp("microphone") / "question.wav"
    path.write_bytes(placed(QUESTION, before=BEFORE, after=AFTER).audio.resampled(48_000).wav())
    return path


@pytest.fixture(scope="module")
def voice_browser(browser: Browser, microphone: Path) -> Iterator[Browser]:
    """A second Chromium whose microphone is the WAV file (it loops: this Chromium has no
    `%noloop`), and which may play sound without a click first."""
    launched = browser.browser_type.launch(
        executable_path=CHROMIUM,
        args=[
            *CHROMIUM_ARGS,
            "--use-fake-ui-for-media-stream",
            "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={microphone}",
            "--autoplay-policy=no-user-gesture-required",
        ],
    )
    yield launched
    launched.close()


@pytest.fixture
def voice_page(voice_browser: Browser, server: Server, console: Console) -> Iterator[Page]:
    context: BrowserContext = voice_browser.new_context(
        base_url=server.url,
        viewport=DESKTOP,
        service_workers="allow",
        locale="en-GB",
        timezone_id="Europe/London",
        permissions=["microphone"],
    )
    context.set_default_timeout(TIMEOUT_MS)
    context.on("page", console.watch)
    yield context.new_page()
    context.close()


def stored(page: Page, channel: str) -> list[dict[str, Any]]:
    response = page.request.get(f"/api/channels/{channel}/messages")
    assert response.ok, response.text()
    return json.loads(response.text())


def voice_states(page: Page) -> list[str]:
    return page.evaluate("() => window.voiceStates")


def test_a_hands_free_turn_is_heard_answered_stored_and_spoken(
    voice_page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    page = voice_page
    server.project("Kitchen")
    server.llm.reply("We chose quartz. It resists stains.")
    sign_in(page)
    open_chat(page, "kitchen", "Kitchen")
    hands_free = page.get_by_role("button", name="Hands-free")
    expect(hands_free).to_have_attribute("aria-pressed", "false")
    pill = page.locator("#voice-state")
    expect(pill).to_have_attribute("data-voice-state", "off")
    expect(pill).to_be_hidden()
    page.evaluate(WATCH_STATES)

    hands_free.click()
    expect(hands_free).to_have_attribute("aria-pressed", "true")
    expect(pill).to_have_text("Listening")

    # The server's detector hears the question end; the page sends it as a spoken turn.
    said = page.locator(".msg-user.msg-spoken").last
    expect(said.locator(".msg-body")).to_contain_text("kitchen", ignore_case=True, timeout=TURN_MS)
    answer = page.locator(".msg-assistant").last
    expect(answer.locator(".msg-body")).to_have_text(
        "We chose quartz. It resists stains.", timeout=TURN_MS
    )
    engine = answer.locator(".voice-engine")
    expect(engine).to_have_text("Spoken by piper", timeout=TURN_MS)
    expect(engine).to_have_attribute("title", "Spoken: “We chose quartz. It resists stains.”")
    # Once the answer has been spoken, Charlie listens again.
    page.wait_for_function(
        "() => window.voiceStates.includes('speaking')"
        " && document.querySelector('#voice-state').dataset.voiceState !== 'speaking'"
        " && document.querySelector('#voice-state').dataset.voiceState !== 'thinking'",
        timeout=TURN_MS,
    )
    shoot(page, "voice-hands-free")
    hands_free.click()  # the fake microphone loops: stop before it asks again
    expect(hands_free).to_have_attribute("aria-pressed", "false")
    expect(pill).to_have_attribute("data-voice-state", "off")
    expect(pill).to_be_hidden()

    states = voice_states(page)
    assert states[:5] == ["off", "listening", "hearing", "thinking", "speaking"], states
    assert states[5] in ("listening", "hearing"), states

    messages = stored(page, "kitchen")
    assert [m["role"] for m in messages[:2]] == ["user", "assistant"]
    assert "decide about the kitchen" in messages[0]["content"].lower()  # tiny.en: "work on"
    assert messages[1]["content"] == "We chose quartz. It resists stains."
    # The model got the words, and was asked for an answer short enough to say aloud.
    assert server.llm.requests[0]["messages"][-1]["content"] == messages[0]["content"]
    assert "read aloud" in server.llm.requests[0]["messages"][0]["content"]
    page.reload()
    expect(page.locator(".msg-user").first).to_contain_text("about the kitchen", ignore_case=True)
    expect(page.locator(".msg-assistant").first).to_contain_text("We chose quartz.")


def test_when_the_model_fails_the_error_shows_and_charlie_listens_again(
    voice_page: Page, server: Server
) -> None:
    page = voice_page
    server.llm.error(503, "overloaded")
    sign_in(page)
    open_chat(page, "private", "Private channel")
    page.evaluate(WATCH_STATES)
    hands_free = page.get_by_role("button", name="Hands-free")
    hands_free.click()
    answer = page.locator(".msg-assistant").last
    expect(answer.locator(".callout-error")).to_contain_text(
        "Your message is saved", timeout=TURN_MS
    )
    expect(page.locator(".msg-user.msg-spoken .msg-body").last).to_contain_text(
        "kitchen", ignore_case=True
    )
    page.wait_for_function(
        "() => window.voiceStates.includes('thinking')"
        " && ['listening', 'hearing'].includes(window.voiceStates.at(-1))",
        timeout=TURN_MS,
    )
    hands_free.click()
    states = voice_states(page)
    assert states[:4] == ["off", "listening", "hearing", "thinking"], states
    assert "speaking" not in states  # nothing to say
    assert [m["role"] for m in stored(page, "private")][:1] == ["user"]


def test_push_to_talk_sends_what_was_said_while_the_button_was_held(
    voice_page: Page, server: Server
) -> None:
    page = voice_page
    server.llm.reply("Quartz, in the end.")
    sign_in(page)
    open_chat(page, "private", "Private channel")
    talk = page.get_by_role("button", name="Hold to talk")
    expect(talk).to_have_attribute("aria-pressed", "false")
    page.evaluate(WATCH_STATES)

    box = talk.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    pill = page.locator("#voice-state")
    expect(pill).to_have_text("Listening · let go to send")
    expect(page.locator("#talk-button")).to_have_attribute("aria-pressed", "true")
    page.wait_for_timeout((BEFORE + 3.2) * 1000)  # the whole question, from the file's start
    page.mouse.up()

    said = page.locator(".msg-user.msg-spoken").last
    expect(said.locator(".msg-body")).to_contain_text(
        "decide about the kitchen", ignore_case=True, timeout=TURN_MS
    )
    answer = page.locator(".msg-assistant").last
    expect(answer.locator(".msg-body")).to_have_text("Quartz, in the end.", timeout=TURN_MS)
    expect(answer.locator(".voice-engine")).to_have_text("Spoken by piper", timeout=TURN_MS)
    expect(pill).to_have_attribute("data-voice-state", "off", timeout=TURN_MS)
    states = voice_states(page)
    assert states == ["off", "listening", "thinking", "speaking", "off"], states
    assert [m["role"] for m in stored(page, "private")] == ["user", "assistant"]


def test_silence_gets_a_clear_message_and_nothing_is_stored(
    voice_page: Page, server: Server, console: Console
) -> None:
    console.allow(r"status of 400 .*/api/channels/private/voice")  # the browser logs the 400
    sign_in(voice_page)
    page = open_chat(voice_page, "private", "Private channel")
    talk = page.get_by_role("button", name="Hold to talk")
    box = talk.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.wait_for_timeout(BEFORE * 1000 * 0.8)  # only the silence before the question
    page.mouse.up()
    answer = page.locator(".msg-assistant").last
    expect(answer.locator(".callout-error")).to_contain_text("No speech was heard", timeout=TURN_MS)
    expect(page.locator(".msg-user.msg-spoken .msg-body")).to_have_text(
        "A recording with no words made out"
    )
    expect(page.locator("#voice-state")).to_have_attribute("data-voice-state", "off")
    assert stored(page, "private") == []
    assert server.llm.requests == []


def test_without_the_voice_extra_the_buttons_say_why(
    page: Page, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charlie.adapters.web import voice

    monkeypatch.setattr(
        voice,
        "installed",
        lambda: "The voice extra is not installed: pip install 'charlie[voice]'.",
    )
    sign_in(page)
    talk = page.locator("#talk-button")
    expect(talk).to_have_attribute("aria-disabled", "true")
    expect(talk).to_have_attribute(
        "title", "Voice is off: The voice extra is not installed: pip install 'charlie[voice]'."
    )
    page.get_by_role("button", name="Hands-free").click(force=True)  # aria-disabled
    expect(page.locator("#voice-problem")).to_contain_text("pip install 'charlie[voice]'")
    expect(page.locator("#voice-state")).to_have_attribute("data-voice-state", "off")


def test_settings_say_which_voice_speaks_and_how_to_get_a_better_one(
    page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    sign_in(page)
    page.goto("/#/settings/private")
    card = page.locator("#voice-settings")
    expect(card.locator("#voice-speaks")).to_have_text("the built-in Piper voice, offline")
    expect(card.locator("#voice-offline")).to_have_text("the built-in Piper voice, offline")
    expect(card.locator("#voice-advice")).to_have_text(
        "Speaking with the built-in Piper voice, offline. For Microsoft's more natural online "
        "voices, put edge first in CHARLIE_VOICE_TTS (it needs the internet)."
    )
    engines = card.locator("#voice-engines li")
    expect(engines).to_have_count(2)
    expect(engines.nth(0)).to_have_attribute("data-state", "ready")
    expect(engines.nth(0)).to_contain_text("piper")
    expect(engines.nth(0)).to_contain_text("speaks")
    expect(engines.nth(1)).to_contain_text("espeak-ng, offline and robotic")
    expect(card).not_to_contain_text("null")
    expect(card).not_to_contain_text("Listening is off")
    card.scroll_into_view_if_needed()
    shoot(page, "settings-voice")


def test_settings_name_what_to_install_when_no_voice_can_speak(
    page: Page, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sanotts", None)  # the built-in voice is not installed
    monkeypatch.setenv("PATH", "/nonexistent")  # and neither is espeak-ng
    sign_in(page)
    page.goto("/#/settings/private")
    card = page.locator("#voice-settings")
    expect(card.locator("#voice-speaks")).to_have_text("nothing: no engine can speak")
    advice = card.locator("#voice-advice")
    expect(advice).to_have_class("callout callout-error")
    expect(advice).to_have_text(
        "Nothing can speak here now. To speak offline, install the built-in voice: "
        "pip install 'charlie[voice]' (./scripts/run installs it), or install espeak-ng: "
        "apt install espeak-ng."
    )
    piper = card.locator("#voice-engines li[data-engine=piper]")
    expect(piper).to_have_attribute("data-state", "unavailable")
    expect(piper).to_contain_text("not installed here")
    expect(piper).to_contain_text("The built-in voice needs the voice extra")


def test_the_message_box_keeps_most_of_the_row_beside_the_voice_buttons(
    voice_page: Page, server: Server
) -> None:
    """At 1280 px, with the chats and memory panes open, the voice buttons are icons only:
    the message box keeps more than half of its row (it was ~250 px of ~580)."""
    sign_in(voice_page)
    open_chat(voice_page, "private", "Private channel")
    hands_free = voice_page.get_by_role("button", name="Hands-free")
    expect(hands_free).to_be_visible()
    row = voice_page.locator(".composer-row").bounding_box()
    box = voice_page.locator("#chat-input").bounding_box()
    assert row is not None and box is not None
    assert box["width"] > 0.55 * row["width"], (box, row)
