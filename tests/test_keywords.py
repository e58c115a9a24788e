"""Keywords: terms, stop words, literals, and FTS5 expressions run against a real FTS5 table."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator

import pytest

from charlie.retrieval.keywords import (
    FTS5_TOKENIZE,
    LiteralTerm,
    literals,
    match_expression,
    stop_words,
    terms,
    tokenize,
    top_terms,
)

DOCS = {
    1: ("Cytokines", "Interleukin-2 drives the expansion of regulatory T cells."),
    2: ("Chromatin", "The histone variant H2A.Z marks active promoters."),
    3: ("Auth notes", "Rotate the refresh_token whenever a JWT expires."),
    4: ("Cytokines again", "Interleukin 2 (IL-2) and interleukin 6 in naïve mice."),
    5: ("Gardening", "Tomatoes need six hours of sun and regular watering."),
    6: ("Frontend", "The fetchUser helper caches responses for one minute."),
}


@pytest.fixture
def fts() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE notes USING fts5(title, body, tokenize='{FTS5_TOKENIZE}')")
    db.executemany(
        "INSERT INTO notes(rowid, title, body) VALUES (?, ?, ?)",
        [(rowid, title, body) for rowid, (title, body) in DOCS.items()],
    )
    yield db
    db.close()


def search(db: sqlite3.Connection, expression: str | None) -> list[int]:
    if expression is None:
        return []
    rows = db.execute(
        "SELECT rowid FROM notes WHERE notes MATCH ? ORDER BY bm25(notes)", (expression,)
    )
    return [rowid for (rowid,) in rows]


# -- tokens and terms -------------------------------------------------------------------------


def test_tokenize_keeps_compounds_whole_and_lowercases() -> None:
    text = "Interleukin-2, H2A.Z and refresh_token in Alzheimer's cells."
    assert tokenize(text) == [
        "interleukin-2",
        "h2a.z",
        "and",
        "refresh_token",
        "in",
        "alzheimer",
        "cells",
    ]


def test_terms_drop_stop_words_and_duplicates() -> None:
    text = "What are the effects of the interleukin-2 therapy on the therapy outcomes?"
    assert terms(text) == ["effects", "interleukin-2", "therapy", "outcomes"]


def test_stop_word_list_is_large() -> None:
    words = stop_words("en")
    assert len(words) > 1000
    assert {"the", "and", "whereas", "furthermore", "would've"} <= words
    with pytest.raises(ValueError, match="xx"):
        stop_words("xx")


def test_capitalised_acronym_survives_even_if_a_stop_word() -> None:
    # "us" and "ms" are in the list, but US and MS written in capitals mean something.
    assert terms("trials in the US on MS patients") == ["trials", "us", "ms", "patients"]
    assert terms("remind us") == ["remind"]


def test_one_letter_words_are_dropped() -> None:
    assert terms("vitamin D and type 2 diabetes") == ["vitamin", "type", "diabetes"]


# -- top terms --------------------------------------------------------------------------------


def test_top_terms_ranks_by_idf_and_keeps_k() -> None:
    idf = {"cells": 0.5, "interleukin-2": 4.0, "expansion": 2.5, "regulatory": 2.0}
    text = "Interleukin-2 drives expansion of regulatory cells"
    assert top_terms(text, idf, k=2) == ["interleukin-2", "expansion"]
    assert top_terms(text, idf, k=10) == ["interleukin-2", "expansion", "regulatory", "cells"]


def test_top_terms_drops_terms_absent_from_the_collection() -> None:
    # "drives" is not in the mapping: it matches nothing, so it must not take a slot.
    assert top_terms("drives cells", {"cells": 0.5}, k=2) == ["cells"]


def test_top_terms_accepts_a_function_and_breaks_ties_by_position() -> None:
    assert top_terms("gamma alpha beta", lambda term: 1.0, k=2) == ["gamma", "alpha"]
    assert top_terms("gamma alpha", lambda term: 0.0) == []


# -- literals ---------------------------------------------------------------------------------


def test_literals_finds_each_kind() -> None:
    query = 'How does "token rotation" work with JWT, refresh_token and fetchUser?'
    assert literals(query) == [
        LiteralTerm("token rotation", "phrase"),
        LiteralTerm("JWT", "acronym"),
        LiteralTerm("refresh_token", "identifier"),
        LiteralTerm("fetchUser", "identifier"),
    ]


@pytest.mark.parametrize(
    ("word", "kind"),
    [
        ("interleukin-2", "code"),
        ("H2A.Z", "code"),
        ("COVID-19", "code"),
        ("p53", "code"),
        ("config.toml", "code"),
        ("BRCA1", "acronym"),
        ("JWTs", "acronym"),
        ("HttpClient", "identifier"),
        ("__init__", "identifier"),
    ],
)
def test_literal_kinds(word: str, kind: str) -> None:
    assert literals(f"about {word} today") == [LiteralTerm(word, kind)]


@pytest.mark.parametrize(
    "query",
    [
        "what did we decide about the garden",
        "long-term plans for the well-known cafe",
        "e.g. the Alzheimer's study, don't forget",
        "Paris in 2019, about 1,000 people",
    ],
)
def test_ordinary_words_are_not_literals(query: str) -> None:
    assert literals(query) == []


def test_typographic_back_and_single_quotes_are_phrases() -> None:
    assert [lit.text for lit in literals("“exact words” or `x = 1` or 'a phrase'")] == [
        "exact words",
        "x = 1",
        "a phrase",
    ]


# -- FTS5 expressions -------------------------------------------------------------------------


def test_match_expression_quotes_every_item_with_or() -> None:
    assert match_expression(["jwt", 'say "hi"', "jwt", " "]) == '"jwt" OR "say ""hi"""'
    assert match_expression([]) is None


def test_compound_terms_match_the_index_as_phrases(fts: sqlite3.Connection) -> None:
    assert sorted(search(fts, match_expression(terms("interleukin-2")))) == [1, 4]
    assert search(fts, match_expression(terms("H2A.Z"))) == [2]
    assert search(fts, match_expression(terms("refresh_token"))) == [3]
    assert search(fts, match_expression(terms("JWTs"))) == [3]  # porter: jwts -> jwt
    assert search(fts, match_expression(terms("naive"))) == [4]  # accents folded
    assert search(fts, match_expression(terms("fetchUser"))) == [6]


def test_or_semantics_a_missing_word_does_not_empty_the_result(fts: sqlite3.Connection) -> None:
    # basic-memory ANDs every word and finds nothing here; any one term may match.
    found = search(fts, match_expression(terms("tomatoes zucchini aubergine watering schedule")))
    assert found == [5]


def test_literal_phrase_matches_words_in_order(fts: sqlite3.Connection) -> None:
    phrases = [lit.text for lit in literals('"histone variant"')]
    assert search(fts, match_expression(phrases)) == [2]
    assert search(fts, match_expression([lit.text for lit in literals('"variant histone"')])) == []


NASTY = [
    '"',
    '""',
    '"unbalanced',
    "a AND",
    "NOT",
    "OR OR OR",
    "NEAR(a b, 3)",
    "NEAR/2",
    "title:cells",
    "-title:cells",
    "{title body}:cells",
    "cell*",
    "*",
    "^start",
    "a + b",
    "(unclosed",
    "closed)",
    "'single",
    "x\x00y",
    "\\",
    ";DROP TABLE notes;--",
    "émoji 🎉 日本語",
    "   ",
    "-",
    "a.b.c..",
    "___",
    '"a" "b" AND NOT "c" NEAR("d")',
]


@pytest.mark.parametrize("text", NASTY)
def test_nasty_input_never_breaks_the_match(fts: sqlite3.Connection, text: str) -> None:
    for items in (terms(text), [text], [lit.text for lit in literals(text)], text.split()):
        search(fts, match_expression(items))  # raises sqlite3.OperationalError on bad syntax


def test_random_input_never_breaks_the_match(fts: sqlite3.Connection) -> None:
    alphabet = "abcXYZ019 -_.\"'*^:(){}+,;/\\NEARORANDNOT\t\nü日"
    rng = random.Random(20240611)
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        search(fts, match_expression([text]))
        search(fts, match_expression(terms(text)))
        search(fts, match_expression(lit.text for lit in literals(text)))


def test_the_table_still_holds_its_rows_after_nasty_input(fts: sqlite3.Connection) -> None:
    search(fts, match_expression([";DROP TABLE notes;--"]))
    (count,) = fts.execute("SELECT count(*) FROM notes").fetchone()
    assert count == len(DOCS)
