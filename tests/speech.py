"""Test support: speech made offline, and word error rate.

Known sentences are read by two offline engines — Piper (the packaged "joe" voice) and
espeak-ng — then placed between stretches of silence and, for some, mixed with noise at a
stated signal-to-noise ratio. Because we made the audio, we know exactly what was said and
where the speech is, which is what the recogniser and the voice detector are measured on.
Also used by benchmarks/voice.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import numpy as np

from charlie.voice.audio import RATE, Audio
from charlie.voice.tts import EspeakSynthesizer, PiperSynthesizer

SENTENCES = [
    "What did we decide about the kitchen worktop?",
    "Remind me when the plumber is coming next week.",
    "Add olive oil and fresh basil to the shopping list.",
    "How much is left in the budget for the trip to Lisbon?",
    "Please summarize the notes about the garden fence.",
    "We agreed to paint the hallway a pale shade of green.",
    "Which flights did we look at for the summer holiday?",
    "Search my notes for the password manager we chose.",
    "The boiler service is booked for Thursday morning.",
    "Tell me the three most important decisions so far.",
]

NUMBERS = {
    "0": "zero",
    "1": "one",
    "2": "two",
    "3": "three",
    "4": "four",
    "5": "five",
    "6": "six",
    "7": "seven",
    "8": "eight",
    "9": "nine",
    "10": "ten",
}


@cache
def piper() -> PiperSynthesizer:
    return PiperSynthesizer(steady=True)


@cache
def espeak() -> EspeakSynthesizer:
    return EspeakSynthesizer("en-us")


@cache
def spoken(text: str, engine: str = "piper") -> Audio:
    """`text` read aloud by an offline engine, at 16 kHz, with the engine's own edges cut."""
    made = (piper() if engine == "piper" else espeak()).synthesize(text).resampled(RATE)
    loud = np.flatnonzero(np.abs(made.samples) > 0.02)
    return Audio(made.samples[loud[0] : loud[-1] + 1], RATE)


def noise(seconds: float, level: float, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).normal(0, level, round(seconds * RATE))).astype(np.float32)


@dataclass(frozen=True)
class Placed:
    """A recording with speech at a known place."""

    audio: Audio
    text: str
    start: float
    end: float


def placed(
    text: str,
    engine: str = "piper",
    before: float = 1.0,
    after: float = 1.0,
    snr_db: float | None = None,
    seed: int = 0,
) -> Placed:
    """Silence (or noise at `snr_db`) around the spoken sentence."""
    speech = spoken(text, engine).samples
    samples = np.concatenate(
        [np.zeros(round(before * RATE)), speech, np.zeros(round(after * RATE))]
    ).astype(np.float32)
    if snr_db is not None:
        power = float(np.mean(speech**2))
        level = float(np.sqrt(power / 10 ** (snr_db / 10)))
        samples = samples + noise(len(samples) / RATE, level, seed)
    end = before + len(speech) / RATE
    return Placed(Audio(samples.astype(np.float32), RATE), text, before, end)


def words(text: str) -> list[str]:
    text = text.lower().replace("-", " ")
    text = re.sub(r"[^a-z0-9' ]+", " ", text)
    return [NUMBERS.get(w, w) for w in text.split()]


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(edits, reference words): the word-level Levenshtein distance after normalising."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (r != h))
    return row[-1], len(ref)


def wer(pairs: list[tuple[str, str]]) -> float:
    """Word error rate over (reference, hypothesis) pairs: total edits / total words."""
    edits = words_total = 0
    for reference, hypothesis in pairs:
        e, n = word_errors(reference, hypothesis)
        edits, words_total = edits + e, words_total + n
    return edits / words_total
