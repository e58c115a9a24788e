"""Chunking: long notes cut on paragraph and sentence boundaries, with overlap."""

from __future__ import annotations

import itertools

import pytest

from charlie.retrieval.chunking import chunk_text


def sentence(n: int, words: int = 10) -> str:
    return " ".join(f"W{n}x{i}" for i in range(words - 1)) + f" end{n}."


def test_short_text_is_one_chunk_and_empty_text_none() -> None:
    assert chunk_text("  A short note.\n\nTwo paragraphs.  ", max_words=50) == [
        "A short note.\n\nTwo paragraphs."
    ]
    assert chunk_text(" \n\n ") == []


def test_paragraphs_are_kept_whole_when_they_fit() -> None:
    paragraphs = [" ".join([sentence(p * 10 + i) for i in range(3)]) for p in range(4)]
    chunks = chunk_text("\n\n".join(paragraphs), max_words=60, overlap_words=0)
    assert chunks == ["\n\n".join(paragraphs[0:2]), "\n\n".join(paragraphs[2:4])]


def test_long_paragraph_is_cut_between_sentences_with_overlap() -> None:
    text = " ".join(sentence(n) for n in range(12))  # 120 words, one paragraph
    chunks = chunk_text(text, max_words=50, overlap_words=10)
    assert all(len(chunk.split()) <= 50 for chunk in chunks)
    assert all(chunk.endswith(".") for chunk in chunks)  # never cut inside a sentence
    sentences = [chunk.replace(". ", ".|").split("|") for chunk in chunks]
    for previous, current in itertools.pairwise(sentences):
        assert current[0] == previous[-1]  # the last sentence is carried over
    every = " ".join(chunks)
    assert all(f"end{n}." in every for n in range(12))


def test_run_on_text_is_cut_between_words() -> None:
    text = " ".join(f"w{i}" for i in range(25))
    chunks = chunk_text(text, max_words=10, overlap_words=3)
    assert [chunk.split()[0] for chunk in chunks] == ["w0", "w5", "w10", "w15"]
    assert chunks[-1].split()[-1] == "w24"
    assert all(len(chunk.split()) <= 10 for chunk in chunks)


@pytest.mark.parametrize(("max_words", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_bad_sizes_are_refused(max_words: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_text("text", max_words=max_words, overlap_words=overlap)


def test_closing_quotes_and_brackets_stay_with_their_sentence() -> None:
    text = 'She said "Stop." Then she left. (It rained.) Nobody minded.'
    chunks = chunk_text(text, max_words=3, overlap_words=0)
    assert chunks == ['She said "Stop."', "Then she left.", "(It rained.)", "Nobody minded."]
