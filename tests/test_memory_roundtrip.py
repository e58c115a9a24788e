"""Whatever Charlie writes to memory.md, Charlie reads back: `parse(render(x))` is
`normalised(x)` for any layers, and what a person can type into the memory form is either
stored in a form that reads back or refused at once, never accepted and then reported as a
format error that pauses distillation."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from web_support import PASSWORD, signed_in

from charlie.errors import MemoryFormatError
from charlie.home import Home
from charlie.memory import layers as memory
from charlie.memory.layers import Decision, Earlier, Memory, Quote
from charlie.projects import create_project
from charlie.users import ensure_user, set_password

# Text a person or a model could put in a layer: any characters, with the ones the format
# gives a meaning to (headings, list marks, quotes, colons, newlines) drawn often.
MARKUP = st.sampled_from(
    ["## ", "## Decisions", "## Summary", "## Recent quotes", "## Links", "### ", "# ", "- ",
     "* ", "1. ", "> ", '"', "“", "”", ":", "\n", "\r\n", "\r", "\u2028", "\x85", "\t", "  ",
     "_Nothing yet._", "_None yet._", "\n_None yet._\n", "\ud800", "…", "é", "🙂"]
)  # fmt: skip
TEXT = st.lists(st.one_of(MARKUP, st.text(max_size=12)), max_size=8).map("".join)
QUOTES = st.lists(st.builds(Quote, TEXT, TEXT), max_size=4)
# Provenance notes, and text that looks like one (a person may type "_(since …)_").
NOTE_LIKE = st.sampled_from(
    ["", " _(since 2026-11-02)_", " _(by alice)_", "_(", ")_", " · ", "(by hand)", "_x_"]
)
DAY = st.sampled_from(["", "2026-11-02", "2026-12-31", "not a day", "2026-1-2"])
BY = st.one_of(st.sampled_from(["", "distilled", "hand", "alice", "Dr (Bob)", "a·b_c"]), TEXT)
SOURCES = st.lists(st.integers(-3, 10**6), max_size=4).map(tuple)
DECISION = st.builds(
    Decision,
    st.builds(lambda t, n: t + n, TEXT, NOTE_LIKE),
    DAY,
    BY,
    SOURCES,
    st.sampled_from(["", memory.SOURCE_FORGOTTEN, "other"]),
)
EARLIER = st.builds(
    Earlier,
    st.builds(lambda t, n: t + n, TEXT, NOTE_LIKE),
    DAY,
    BY,
    SOURCES,
    DAY,
    st.one_of(st.none(), st.integers(-1, 10**6)),
)
LAYERS = st.builds(
    Memory,
    summary=TEXT,
    decisions=st.lists(st.one_of(DECISION, TEXT), max_size=5),
    quotes=QUOTES,
    preamble=st.just("# Kitchen — memory"),
    extra=st.one_of(st.just(""), TEXT, TEXT.map(lambda t: f"## Links\n{t}")),
    earlier=st.lists(EARLIER, max_size=3),
)


@settings(max_examples=400, database=None, deadline=None)
@given(LAYERS)
def test_what_charlie_writes_reads_back(layers: Memory) -> None:
    text = memory.render(layers, "Kitchen")
    parsed = memory.parse(text)
    assert parsed == memory.normalised(layers)
    assert memory.render(parsed, "Kitchen") == text
    assert memory.normalised(parsed) == parsed  # normalising twice changes nothing


@settings(max_examples=100, database=None, deadline=None)
@given(LAYERS)
def test_the_default_preamble_reads_back(layers: Memory) -> None:
    text = memory.render(replace(layers, preamble=""), "Kitchen")
    parsed = memory.parse(text)
    assert parsed == replace(memory.normalised(layers), preamble=parsed.preamble)
    assert parsed.preamble.startswith("# Kitchen — memory")


def test_what_a_person_reasonably_types_is_normalised_not_refused() -> None:
    typed = Memory(
        summary="Kitchen.\n## Decisions\nThe decisions are below.",
        decisions=["- Oak\nworktops", "## Budget: 12k", "> quoted"],
        quotes=[Quote('Dr "Bob"', 'He said:\n"use oak"'), Quote("time: 10:30", "ok")],
    )
    parsed = memory.parse(memory.render(typed, "Kitchen"))
    assert parsed.summary == "Kitchen.\n### Decisions\nThe decisions are below."
    assert parsed.texts == ["- Oak worktops", "## Budget: 12k", "> quoted"]
    assert parsed.quotes == [
        Quote("Dr 'Bob'", 'He said: "use oak"'),
        Quote("time- 10-30", "ok"),
    ]


def test_a_speaker_over_60_characters_is_refused_from_the_form() -> None:
    with pytest.raises(MemoryFormatError, match="at most 60"):
        memory.from_person("s", [], [("x" * 61, "hello")], Memory())
    kept = memory.from_person("s", [], [("x" * 60, "hello")], Memory())
    assert kept.quotes == [Quote("x" * 60, "hello")]


def test_a_long_speaker_from_anywhere_else_is_shortened_so_the_file_reads_back() -> None:
    text = memory.render(Memory(quotes=[Quote("y" * 80, "hi")]), "Kitchen")
    (quote,) = memory.parse(text).quotes
    assert quote == Quote("y" * 59 + "…", "hi")


def test_put_memory_stores_what_reads_back_and_refuses_what_cannot(home: Home) -> None:
    create_project(home, "Kitchen")
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    with signed_in("alice") as browser:
        body = {
            "summary": "Plan.\n## Decisions\nmore",
            "decisions": ["## Heading decision", "line\nbreak"],
            "quotes": [{"speaker": 'Dr "Bob"', "text": "Oak."}],
        }
        saved = browser.put("/api/channels/kitchen/memory", json=body)
        assert saved.status_code == 200, saved.text
        assert saved.json()["quotes"] == [{"speaker": "Dr 'Bob'", "text": "Oak."}]
        assert saved.json()["summary"] == "Plan.\n### Decisions\nmore"
        shown = browser.get("/api/channels/kitchen/memory").json()
        assert shown["error"] is None
        assert [d["text"] for d in shown["decisions"]] == ["## Heading decision", "line break"]

        body["quotes"] = [{"speaker": "z" * 61, "text": "Oak."}]
        refused = browser.put("/api/channels/kitchen/memory", json=body)
        assert refused.status_code == 400
        assert "at most 60" in refused.json()["error"]
        assert browser.get("/api/channels/kitchen/memory").json()["quotes"][0]["speaker"] == (
            "Dr 'Bob'"
        )
