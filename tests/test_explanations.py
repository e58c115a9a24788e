"""Why a note or a message was found, said in words for a person and in numbers whose every
symbol the CLI defines."""

from __future__ import annotations

import json

import pytest
from conftest import Cli
from support.history import say

from charlie.conversations import shared_channel
from charlie.home import Home
from charlie.notes import files as notes
from charlie.projects import create_project
from charlie.retrieval import suggestions, usage
from charlie.retrieval.search import Hit, use_in_words
from charlie.retrieval.upkeep import searcher_for
from charlie.retrieval.usage import Use
from charlie.users import ensure_user


def hit(**fields: object) -> Hit:
    base: dict[str, object] = {
        "key": "kitchen/worktops",
        "project": "kitchen",
        "name": "worktops",
        "title": "Worktops",
        "path": "kitchen/notes/worktops.md",
        "score": 0.5,
        "similarity": 0.5,
    }
    return Hit(**(base | fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("use", "words"),
    [
        (Use("view", 4, 0.2, 3.1), "you opened it 4×, most recently today"),
        (Use("view", 1, 1.5, 0.9), "you opened it yesterday"),
        (Use("tag", 3, 5.0, 1.2, "jwt"), "you used its tag #jwt 3×, most recently 5 days ago"),
        (Use("cited", 1, 20.0, 1.0), "Charlie drew on it in an answer 2 weeks ago"),
        (Use("cited", 2, 90.0, 0.5), "Charlie drew on it in 2 answers, most recently 3 months ago"),
        (Use("accepted", 1, 0.0, 3.0), "you pinned it from a suggestion today"),
        (Use("dismissed", 2, 3.0, -2.0), "you dismissed it 2×, most recently 3 days ago, "
                                          "so it ranks lower"),
    ],
)  # fmt: skip
def test_each_use_in_words(use: Use, words: str) -> None:
    assert use_in_words(use) == words


def test_a_hit_in_words_names_the_words_matched_the_meaning_and_the_biggest_uses() -> None:
    found = hit(
        vector=0.66,
        bm25=5.53,
        terms=["oak", "worktops"],
        boost=0.4,
        uses=[Use("tag", 1, 0.0, 0.5, "kitchen"), Use("view", 4, 2.0, 3.1)],
    )
    assert found.in_words() == (
        "matches 'oak', 'worktops' · very close in meaning · "
        "you opened it 4×, most recently 2 days ago · you used its tag #kitchen today"
    )
    assert hit(vector=0.45).in_words() == "close in meaning"
    assert hit(vector=0.3).in_words() == "related in meaning"
    assert hit(vector=0.1).in_words() == "a loose match for your words"
    many = hit(bm25=1.0, terms=["a1", "b2", "c3", "d4", "e5", "f6"])
    assert many.in_words() == "matches 'a1', 'b2', 'c3', 'd4' and 2 more"


def test_the_numbers_name_the_weight_and_its_value() -> None:
    found = hit(score=0.55, similarity=0.5, vector=0.5, boost=0.24, weight=0.3)
    assert found.why() == (
        "score 0.550 = similarity 0.500 × (1 + boost 0.24 × weight 0.3) · cosine 0.500"
    )
    assert "w)" not in found.why()


def seed(charlie: Cli) -> None:
    body = "Oiled oak worktops, sealed twice. Oak needs oil every spring."
    assert charlie("notes", "add", "Worktops", "-p", "kitchen", "-b", body).exit_code == 0
    assert (
        charlie("notes", "add", "Tiles", "-p", "kitchen", "-b", "Grey floor tiles.").exit_code == 0
    )


def test_notes_search_explain_defines_every_symbol_it_prints(
    charlie: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(charlie)
    assert charlie("notes", "show", "worktops", "-p", "kitchen").exit_code == 0  # a view
    lines = charlie("search", "oak worktops", "--explain", "-p", "kitchen").stdout.splitlines()
    assert lines[:2] == [
        "(score = similarity × (1 + boost × weight), weight = 0.3 (CHARLIE_USAGE_WEIGHT); "
        "similarity = 0.7 × cosine + 0.3 × BM25 ÷ the query's best BM25)",
        "(cosine: closeness in meaning, 0 to 1 · BM25: how well the words match, higher is "
        "better, 'on' the words found · boost: 0 to 1, from your use of the note (opened, "
        "tagged, pinned, cited), halving every 30 days unused)",
    ]
    assert lines[2].startswith("1. Worktops  [kitchen/worktops]  ")
    assert lines[3].startswith("   why: matches 'oak', 'worktops' · ")
    assert lines[3].endswith(" · you opened it today")
    assert " × (1 + boost 0." in lines[4] and " × weight 0.3) · cosine " in lines[4]
    assert "on oak, worktops · used: viewed once (last today)" in lines[4]

    monkeypatch.setenv("CHARLIE_USAGE_WEIGHT", "0.5")
    monkeypatch.setenv("CHARLIE_USAGE_HALF_LIFE_DAYS", "7")
    weighed = charlie("search", "oak", "--explain", "--mode", "vector", "-p", "kitchen").stdout
    assert "weight = 0.5 (CHARLIE_USAGE_WEIGHT); similarity = cosine)" in weighed
    assert "halving every 7 days unused" in weighed
    assert " × weight 0.5) · cosine " in weighed


def test_notes_search_json_explains_in_words_and_numbers(charlie: Cli) -> None:
    seed(charlie)
    data = json.loads(charlie("search", "oak", "--json", "--explain", "-p", "kitchen").stdout)
    best = data["results"][0]
    assert best["in_words"].startswith("matches 'oak'")
    assert best["why"].startswith("score ") and "uses" not in best


def test_recall_explain_defines_every_symbol_it_prints(home: Home, charlie: Cli) -> None:
    boat = shared_channel(home, create_project(home, "boat"))
    say(home, boat, "alice", "The mooring fee went up to 900 a year.", "2023-06-11T09:00Z")
    say(home, boat, "bob", "Blue antifouling paint for the hull.", "2023-06-12T09:00Z")
    lines = charlie("recall", "mooring fee", "-p", "boat", "--explain").stdout.splitlines()
    assert lines[:2] == [
        "(score = similarity × (1 + 1 when in the time asked about) × (1 + boost × weight), "
        "weight = 0.3 (CHARLIE_USAGE_WEIGHT); similarity = 0.5 × cosine + 0.5 × BM25 ÷ the "
        "question's best BM25)",
        "(cosine: closeness in meaning, 0 to 1 · BM25: how well the words match, higher is "
        "better · boost: 0 to 1, from answers that drew on the message, halving every 30 "
        "days unused)",
    ]
    assert "The mooring fee went up to 900 a year." in lines[2]
    assert lines[3].startswith("   score ") and "cosine" in lines[3] and "BM25" in lines[3]
    create_project(home, "empty")
    nothing = charlie("recall", "mooring fee", "-p", "empty", "--explain").stdout
    assert nothing == "Nothing found.\n"  # no legend without results


def test_a_suggestion_says_why_in_words_and_keeps_the_numbers(home: Home) -> None:
    alice = ensure_user(home.db, "alice")
    kitchen = create_project(home, "kitchen")
    note = notes.create_note(kitchen, "Worktops", "Oiled oak worktops, sealed twice.")
    usage.record(home.db, alice.id, "view", note=note.key)
    usage.record(home.db, alice.id, "view", note=note.key)
    channel = shared_channel(home, kitchen)
    message = say(home, channel, "alice", "What about the oak worktops?", "2026-01-05T10:00Z")
    offered = suggestions.offer(
        home, searcher_for(home), channel, alice, "oak worktops", message, exclude=set()
    )
    assert [s.note for s in offered] == ["kitchen/worktops"]
    why, detail = offered[0].why, offered[0].detail
    assert why.startswith("matches 'oak', 'worktops' · ")
    assert why.endswith(" · you opened it 2×, most recently today")
    assert detail.startswith("score ") and " × weight 0.3) · cosine " in detail
    stored = home.db.execute("SELECT why FROM suggestions WHERE id = ?", (offered[0].id,))
    assert stored.fetchone()[0] == detail
