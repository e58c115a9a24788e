import pytest

from charlie.conversations import private_channel, shared_channel
from charlie.errors import MemoryFormatError, NotFound
from charlie.home import Home
from charlie.memory import layers as memory
from charlie.memory.layers import Memory, Quote
from charlie.projects import create_project
from charlie.users import ensure_user

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


def test_render_and_parse_round_trip() -> None:
    original = Memory(
        summary="Planning the kitchen.\n\nBudget matters most.",
        decisions=["Oak worktops", "Finish by March"],
        quotes=[Quote("alice", 'I said "no" to marble.'), Quote("Charlie", "Noted: oak.")],
        extra="## Links\n- https://example.org/kitchen",
    )
    text = memory.render(original, "Kitchen")
    assert text.startswith("# Kitchen — memory\n")
    assert "## Summary\n\nPlanning the kitchen." in text
    assert "- Oak worktops\n- Finish by March" in text
    assert '- alice: "I said "no" to marble."' in text
    parsed = memory.parse(text)
    assert parsed.summary == original.summary
    assert parsed.texts == original.decisions
    assert parsed.quotes == original.quotes
    assert parsed.extra == original.extra
    assert memory.render(parsed, "ignored") == text


def test_parse_is_forgiving_of_how_people_write_lists() -> None:
    text = """# Notes by hand

## summary
We are moving house.

## Decisions
* Rent a van
1. Pack books first
   (the heavy ones)
Plain line without a bullet

## Quotes
- bob: “Don't forget the cat.”
"""
    parsed = memory.parse(text)
    assert parsed.preamble == "# Notes by hand"
    assert parsed.summary == "We are moving house."
    assert parsed.texts == [
        "Rent a van",
        "Pack books first (the heavy ones)",
        "Plain line without a bullet",
    ]
    assert parsed.quotes == [Quote("bob", "Don't forget the cat.")]


def test_duplicate_section_is_an_error_with_the_line() -> None:
    with pytest.raises(MemoryFormatError, match=r"line 5: a second '## Decisions'"):
        memory.parse("## Decisions\n- a\n\n## Summary\n## Decisions\n- b\n")


def test_unreadable_quote_says_how_to_write_one() -> None:
    with pytest.raises(MemoryFormatError, match=r'line 2: .*`- speaker: "what they said"`'):
        memory.parse("## Recent quotes\njust some words\n")


def test_hand_edit_is_recorded_as_a_revision_and_undo_restores(home: Home) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    memory.ensure_file(home, channel)
    first = memory.save(home, channel, Memory("Cabinets.", ["Oak"]), "distill")
    path = channel.project.memory_path  # type: ignore[union-attr]
    path.write_text(path.read_text().replace("- Oak", "- Walnut, not oak"))
    edited = memory.sync_hand_edits(home, channel)
    assert edited is not None and edited.source == "hand_edit"
    assert memory.sync_hand_edits(home, channel) is None  # recorded once
    assert memory.load(home, channel).texts == ["Walnut, not oak"]

    restored = memory.undo(home, channel)
    assert restored.source == f"undo:{first.id}"
    assert memory.load(home, channel).texts == ["Oak"]
    assert [r.source for r in memory.revisions(home, channel)][:3] == [
        f"undo:{first.id}",
        "hand_edit",
        "distill",
    ]
    memory.undo(home, channel)  # undo the undo: the hand edit is back
    assert memory.load(home, channel).texts == ["Walnut, not oak"]


def test_save_never_clobbers_an_unrecorded_hand_edit(home: Home) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    memory.save(home, channel, Memory("v1"), "distill")
    path = channel.project.memory_path  # type: ignore[union-attr]
    path.write_text(path.read_text().replace("v1", "typed by hand"))
    memory.save(home, channel, Memory("v2"), "distill")
    sources = [(r.source, r.memory.summary) for r in memory.revisions(home, channel)]
    assert sources == [("distill", "v2"), ("hand_edit", "typed by hand"), ("distill", "v1")]


def test_undo_with_nothing_earlier_is_a_clear_error(home: Home) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    memory.save(home, channel, Memory("only"), "distill")
    with pytest.raises(NotFound, match="no earlier memory"):
        memory.undo(home, channel)
    with pytest.raises(NotFound, match="no revision 99"):
        memory.undo(home, channel, to=99)


def test_private_memory_lives_only_in_sqlite(home: Home) -> None:
    alice = ensure_user(home.db, "alice")
    memory.ensure_file(home, shared_channel(home, create_project(home, "Kitchen")))
    channel = private_channel(home, alice)
    memory.save(home, channel, Memory("Alice's secret plans"), "edit")
    assert memory.load(home, channel).summary == "Alice's secret plans"
    on_disk = [p for p in home.settings.home.rglob("*") if p.is_file() and ".db" not in p.name]
    assert on_disk, "the shared folders exist and were scanned"
    for path in on_disk:
        assert b"secret plans" not in path.read_bytes(), path


def test_private_memory_is_invisible_to_another_person(home: Home) -> None:
    alice, bob = ensure_user(home.db, "alice"), ensure_user(home.db, "bob")
    memory.save(home, private_channel(home, alice), Memory("Alice only"), "edit")
    bobs = private_channel(home, bob)
    assert memory.load(home, bobs) == Memory()
    assert memory.revisions(home, bobs) == []
