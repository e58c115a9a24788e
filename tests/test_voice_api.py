"""Spoken turns end to end: the web API in-process and the CLI, with real speech made
offline (tests/speech.py), the real recogniser and speech engines, and the scripted
OpenAI-compatible LLM double on loopback."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from speech import placed, spoken, word_errors
from starlette.websockets import WebSocketDisconnect
from web_support import PASSWORD, declared, events, media_type, signed_in

from charlie import conversations, projects
from charlie.adapters.web.app import create_app
from charlie.config import load_settings
from charlie.home import Home
from charlie.users import ensure_user, get_user, set_password
from charlie.voice import audio as audio_io
from charlie.voice.audio import RATE, Audio

QUESTION = "What did we decide about the kitchen worktop?"
LONG_REPLY = (
    "## The worktop\n\nWe chose **quartz** over oak. It resists stains and heat. "
    "The fitter comes on Friday. The old one goes to the tip.\n\n"
    "| option | price |\n|---|---|\n| quartz | 1200 |\n\n"
    "See https://example.com/worktops for the quote.\n\n```\ncost = 1200\n```"
)


@pytest.fixture(autouse=True)
def offline_voices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHARLIE_VOICE_TTS", "piper,espeak")


@pytest.fixture
def app_home(home: Home, llm: ScriptedLLMServer) -> Home:
    for name in ("alice", "bob"):
        ensure_user(home.db, name)
        set_password(home.db, name, PASSWORD)
    projects.create_project(home, "Kitchen")
    return home


def question_wav(text: str = QUESTION) -> bytes:
    return placed(text, before=0.8, after=1.0).audio.wav()


def test_a_spoken_turn_hears_answers_and_speaks(
    alice: TestClient, llm: ScriptedLLMServer, app_home: Home
) -> None:
    llm.reply(LONG_REPLY)
    response = alice.post(
        "/api/channels/kitchen/voice", content=question_wav(), headers={"Content-Type": "audio/wav"}
    )
    assert response.status_code == 200, response.text
    assert media_type(response) in declared(alice, "POST", "/api/channels/{channel}/voice")
    found = events(response)
    kinds = [kind for kind, _ in found]
    assert kinds[0] == "heard" and kinds[-1] == "done"
    # Speech starts while the reply is still streaming, as soon as a sentence is complete.
    assert kinds.index("audio") < kinds.index("reply") < kinds.index("spoken")
    # `spoken` comes once all the speech is sent: a front end's answer is complete there.
    assert max(i for i, kind in enumerate(kinds) if kind == "audio") < kinds.index("spoken")
    first_audio = kinds.index("audio")
    streamed = "".join(data["text"] for kind, data in found[:first_audio] if kind == "token")
    assert "We chose **quartz** over oak. " in streamed and "Friday" not in streamed
    heard = found[0][1]
    assert "kitchen" in heard["text"].lower() and heard["language"] == "en"
    # The model was asked for a spoken-length answer; the stored message is what was heard.
    system = llm.requests[0]["messages"][0]["content"]
    assert "read aloud" in system
    assert llm.requests[0]["messages"][-1]["content"] == heard["text"]
    # The full answer is the reply; the spoken one is short, plain and capped.
    reply = next(data for kind, data in found if kind == "reply")["message"]["content"]
    assert reply == LONG_REPLY
    spoken_text = next(data for kind, data in found if kind == "spoken")["text"]
    assert spoken_text == (
        "We chose quartz over oak. It resists stains and heat. The fitter comes on Friday. "
        "The rest is in the chat."
    )
    chunks = [data for kind, data in found if kind == "audio"]
    assert [c["index"] for c in chunks] == list(range(len(chunks)))
    assert " ".join(c["text"] for c in chunks) == spoken_text
    assert {c["engine"] for c in chunks} == {"piper"}
    sound = audio_io.read(base64.b64decode(chunks[1]["wav"]))
    assert sound.seconds == pytest.approx(chunks[1]["audio_seconds"], abs=0.01)
    assert float(np.sqrt(np.mean(sound.samples**2))) > 0.01
    kitchen = conversations.shared_channel(app_home, projects.get_project(app_home, "kitchen"))
    stored = conversations.recent(app_home, kitchen, 10)
    assert [m.content for m in stored] == [heard["text"], LONG_REPLY]


def test_a_spoken_turn_in_the_private_channel_stays_private(
    alice: TestClient, llm: ScriptedLLMServer, app_home: Home
) -> None:
    llm.reply("Only you can hear this.")
    response = alice.post("/api/channels/private/voice", content=question_wav())
    assert response.status_code == 200
    mine = conversations.private_channel(app_home, get_user(app_home.db, "alice"))
    assert [m.role for m in conversations.recent(app_home, mine, 10)] == ["user", "assistant"]
    with signed_in("bob") as bob:
        assert bob.get("/api/channels/private/messages").json() == []


def test_silence_noise_and_garbage_get_a_clear_error_and_store_nothing(
    alice: TestClient, llm: ScriptedLLMServer, app_home: Home
) -> None:
    silent = alice.post("/api/channels/kitchen/voice", content=Audio.silence(2).wav())
    assert silent.status_code == 400
    assert silent.json()["error"].startswith("No speech was heard")
    garbage = alice.post("/api/channels/kitchen/voice", content=b"RIFF....WAVEnot really" * 9)
    assert garbage.status_code == 400
    assert "could not be read as audio" in garbage.json()["error"]
    empty = alice.post("/api/channels/kitchen/voice", content=b"")
    assert empty.status_code == 400 and "empty" in empty.json()["error"]
    assert llm.requests == []
    kitchen = conversations.shared_channel(app_home, projects.get_project(app_home, "kitchen"))
    assert conversations.recent(app_home, kitchen, 10) == []


def test_raw_pcm_from_the_browser_is_accepted(alice: TestClient, llm: ScriptedLLMServer) -> None:
    llm.reply("Quartz.")
    samples = placed(QUESTION, before=0.5, after=0.8).audio.samples
    pcm = (samples * 32767).astype("<i2").tobytes()
    response = alice.post(
        "/api/channels/kitchen/voice", content=pcm, headers={"Content-Type": "audio/L16"}
    )
    assert response.status_code == 200
    assert "decide about the kitchen" in events(response)[0][1]["text"].lower()


def test_when_the_model_is_down_the_words_are_saved_and_the_person_told(
    app_home: Home, dead_url: str
) -> None:
    with signed_in("alice") as alice:
        response = alice.post("/api/channels/kitchen/voice", content=question_wav())
    found = [(kind, data) for kind, data in events(response) if kind != "trace"]
    assert [kind for kind, _ in found] == ["heard", "saved", "error", "done"]
    assert found[1][1]["message"]["content"] == found[0][1]["text"]  # stored: its id
    assert "Cannot reach the language model" in found[2][1]["error"]
    assert "Your message is saved" in found[2][1]["error"]
    kitchen = conversations.shared_channel(app_home, projects.get_project(app_home, "kitchen"))
    assert [m.content for m in conversations.recent(app_home, kitchen, 10)] == [found[0][1]["text"]]


def test_voice_needs_a_signed_in_person_and_csrf(app_home: Home) -> None:
    client = TestClient(create_app(load_settings()))
    assert client.post("/api/channels/kitchen/voice", content=question_wav()).status_code == 401
    with signed_in("alice") as alice:
        del alice.headers["X-CSRF-Token"]
        assert alice.post("/api/voice/say", json={"text": "hi"}).status_code == 403


def test_say_and_transcribe(alice: TestClient) -> None:
    said = alice.post("/api/voice/say", json={"text": "The fitter comes on Friday."})
    assert said.status_code == 200
    assert said.headers["content-type"] == "audio/wav"
    assert declared(alice, "POST", "/api/voice/say") == {"audio/wav"}
    assert said.headers["x-charlie-voice-engine"] == "piper"
    heard = alice.post("/api/voice/transcribe", content=said.content)
    assert heard.status_code == 200
    assert word_errors("The fitter comes on Friday.", heard.json()["text"])[0] <= 1
    short = alice.post("/api/voice/say", json={"text": LONG_REPLY, "spoken": True})
    assert audio_io.read(short.content).seconds < 12
    nothing = alice.post("/api/voice/say", json={"text": "```\ncode only\n```", "spoken": True})
    assert nothing.status_code == 200  # "The rest is in the chat."
    blank = alice.post("/api/voice/say", json={"text": "   "})
    assert blank.status_code == 400


def test_voice_status_tells_the_pwa_what_it_needs(alice: TestClient) -> None:
    status = alice.get("/api/voice").json()
    assert status["available"] is True and status["problem"] is None
    assert status["rate"] == RATE and status["silence_ms"] == 700
    assert list(status["tts"]) == ["piper", "espeak"]
    speech = status["speech"]
    assert speech["speaks"] == "piper" and speech["offline"] == "piper"
    assert [(e["name"], e["state"], e["online"]) for e in speech["engines"]] == [
        ("piper", "ready", False),
        ("espeak", "ready", False),
    ]
    assert speech["advice"].startswith("Speaking with the built-in Piper voice, offline.")
    assert "put edge first in CHARLIE_VOICE_TTS" in speech["advice"]


def test_hands_free_listening_reports_speech_and_the_end_of_the_utterance(
    alice: TestClient,
) -> None:
    case = placed(QUESTION, before=0.6, after=1.2)
    pcm = (case.audio.samples * 32767).astype("<i2").tobytes()
    with alice.websocket_connect("/api/voice/listen") as ws:
        ready = ws.receive_json()
        assert ready["event"] == "ready" and ready["rate"] == RATE
        received = []
        for offset in range(0, len(pcm), 3200):  # 100 ms at a time, as the PWA sends
            ws.send_bytes(pcm[offset : offset + 3200])
        while len(received) < 2:
            received.append(ws.receive_json())
        assert received[0]["event"] == "speech"
        assert received[0]["at"] == pytest.approx(case.start, abs=0.1)
        assert received[1]["event"] == "utterance" and received[1]["cut"] is False
        assert received[1]["end"] == pytest.approx(case.end, abs=0.2)
        ws.send_text("reset")
        assert ws.receive_json() == {"event": "reset"}
        ws.send_bytes(b"\x00")
        assert ws.receive_json()["event"] == "error"


def test_listening_refuses_strangers_and_other_sites(app_home: Home) -> None:
    stranger = TestClient(create_app(load_settings()))
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        stranger.websocket_connect("/api/voice/listen"),
    ):
        pass
    assert refused.value.code == 4401
    with signed_in("alice") as alice:
        with (
            pytest.raises(WebSocketDisconnect) as other,
            alice.websocket_connect("/api/voice/listen", headers={"Origin": "http://evil.example"}),
        ):
            pass
        assert other.value.code == 4401


# ---------------------------------------------------------------- the CLI


def test_charlie_voice_and_say_from_the_command_line(
    charlie: Any, llm: ScriptedLLMServer, tmp_path: Path
) -> None:
    assert charlie("projects", "create", "Kitchen").exit_code == 0
    question = tmp_path / "question.wav"
    question.write_bytes(question_wav())
    llm.reply("We chose quartz. It resists stains.")
    out = tmp_path / "reply.wav"
    result = charlie("voice", str(question), "-p", "kitchen", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == "We chose quartz. It resists stains.\n"
    assert "Heard: What did we decide about the kitchen" in result.stderr
    assert "· spoken by piper" in result.stderr
    assert audio_io.read(out.read_bytes()).seconds > 1.0

    said = tmp_path / "said.wav"
    result = charlie("say", "Hello from Charlie.", "-o", str(said))
    assert result.exit_code == 0
    assert result.stdout.startswith("Wrote ")
    assert result.stdout.endswith(
        f"to {said}, spoken by piper (the built-in Piper voice, offline).\n"
    )
    assert word_errors("Hello from Charlie.", _transcribe(said))[0] <= 1

    silent = tmp_path / "silent.wav"
    silent.write_bytes(Audio.silence(1.5).wav())
    result = charlie("voice", str(silent), "-p", "kitchen")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: No speech was heard")


def _transcribe(path: Path) -> str:
    from charlie.voice.turn import Voice

    return Voice(load_settings()).hear(audio_io.read(path.read_bytes())).transcript.text


def test_spoken_helper_is_deterministic() -> None:
    assert np.array_equal(spoken("Hello there.").samples, spoken("Hello there.").samples)


def test_a_spoken_turn_goes_into_the_thread_shown(
    alice: TestClient, llm: ScriptedLLMServer, app_home: Home
) -> None:
    kitchen = conversations.shared_channel(app_home, projects.get_project(app_home, "kitchen"))
    older = conversations.new_thread(app_home, kitchen, title="Older")
    conversations.new_thread(app_home, kitchen, title="Newer")  # written in most recently
    llm.reply("Quartz.")
    response = alice.post(
        f"/api/channels/kitchen/voice?thread={older.conversation_id}",
        content=question_wav(),
        headers={"Content-Type": "audio/wav"},
    )
    assert response.status_code == 200, response.text
    assert [m.content for m in conversations.recent(app_home, older, 10)][-1] == "Quartz."
    missing = alice.post("/api/channels/kitchen/voice?thread=999", content=question_wav())
    assert missing.status_code == 404
