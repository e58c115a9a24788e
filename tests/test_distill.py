import threading
import time
from typing import Any

import pytest
from llm_double import ScriptedLLMServer
from support.distilling import distill_answer, is_distillation

from charlie import conversations
from charlie.chat import turn as chat
from charlie.conversations import Channel, shared_channel
from charlie.errors import (
    AlreadyDistilled,
    DistillationError,
    LLMUnavailable,
    MemoryFormatError,
)
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.memory.layers import Memory, Quote
from charlie.projects import create_project
from charlie.users import User, ensure_user

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


@pytest.fixture
def setup(home: Home, llm: ScriptedLLMServer) -> tuple[Channel, User, LLMClient]:
    project = create_project(home, "Kitchen", distill_every=5)
    client = LLMClient(llm.base_url, "test-model", retries=0)
    yield shared_channel(home, project), ensure_user(home.db, "alice"), client
    client.close()


def say(home: Home, client: LLMClient, channel: Channel, user: User, text: str) -> list[Any]:
    return list(chat.turn(home, client, channel, user, text))


def test_distills_exactly_every_n_messages(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = setup
    llm.default = lambda req: distill_answer() if is_distillation(req) else "Reply."
    distilled_after: list[int] = []
    for number in range(1, 11):  # 10 turns = 20 messages = 4 distillations
        events = say(home, client, channel, alice, f"Message {number} about oak.")
        if any(isinstance(e, chat.Distilled) for e in events):
            distilled_after.append(conversations.count_messages(home, channel))
    assert distilled_after == [6, 10, 16, 20]  # checked at each turn's end
    runs = home.db.execute(
        "SELECT first_message_id, last_message_id FROM distillations ORDER BY id"
    ).fetchall()
    assert [tuple(r) for r in runs] == [(1, 5), (6, 10), (11, 15), (16, 20)]
    assert sum(is_distillation(r) for r in llm.requests) == 4


def test_cadence_is_per_project(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    _, alice, client = setup
    channel = shared_channel(home, create_project(home, "Quick", distill_every=2))
    llm.default = lambda req: distill_answer() if is_distillation(req) else "Ok."
    for number in range(3):
        say(home, client, channel, alice, f"Point {number}.")
    runs = home.db.execute("SELECT first_message_id, last_message_id FROM distillations")
    assert [tuple(r) for r in runs] == [(1, 2), (3, 4), (5, 6)]


def test_quotes_must_be_verbatim(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = setup
    conversations.add_message(home, channel, "user", "We will use oak, not marble.", user=alice)
    conversations.add_message(home, channel, "assistant", "Oak is durable and warm.")
    llm.reply(
        distill_answer(
            quotes=(
                ("alice", "We will use oak, not marble."),
                ("alice", "We will use oak instead of marble."),  # paraphrase
                ("alice", "Oak is durable"),  # said by Charlie, not alice
            )
        )
    )
    result = distill.distill(home, channel, client)
    assert result.memory.quotes == [Quote("alice", "We will use oak, not marble.")]
    assert [(r["text"], r["why"]) for r in result.rejected_quotes] == [
        ("We will use oak instead of marble.", "not verbatim"),
        ("Oak is durable", "said by Charlie, not a person"),  # quotes are what people said
    ]
    stored = home.db.execute("SELECT rejected_quotes FROM distillations").fetchone()[0]
    assert "instead of marble" in stored
    assert "instead of marble" not in channel.project.memory_path.read_text()  # type: ignore[union-attr]


def test_quotes_roll_in_a_window(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = setup
    home.settings.quotes_window = 3
    for batch in range(3):
        lines = [f"Line {batch}-{i} matters." for i in range(2)]
        for line in lines:
            conversations.add_message(home, channel, "user", line, user=alice)
        llm.reply(distill_answer(quotes=tuple(("alice", line) for line in lines)))
        distill.distill(home, channel, client)
    quotes = memory.load(home, channel).quotes
    assert [q.text for q in quotes] == [
        "Line 1-1 matters.",
        "Line 2-0 matters.",
        "Line 2-1 matters.",
    ]


def test_hand_edits_win(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = setup
    conversations.add_message(home, channel, "user", "Let's plan it: oak worktops.", user=alice)
    llm.reply(distill_answer(summary="The first summary.", decisions=("Oak worktops",)))
    distill.distill(home, channel, client)

    path = channel.project.memory_path  # type: ignore[union-attr]
    edited = (
        path.read_text()
        .replace("The first summary.", "MY summary, written by hand.")
        .replace("- Oak worktops", "- Oak worktops\n- Budget is 12k, hard limit")
        + "\n## My links\n- the supplier's page\n"
    )
    path.write_text(edited)

    conversations.add_message(home, channel, "user", "Also tiles for the floor.", user=alice)
    # The model forgets the hand-added decision and rewrites the summary.
    llm.reply(distill_answer(summary="Rewritten.", decisions=("Oak worktops", "Tiled floor")))
    distill.distill(home, channel, client)

    after = memory.parse(path.read_text())
    assert after.summary == "MY summary, written by hand. Rewritten."  # theirs stays
    assert after.texts == ["Oak worktops", "Budget is 12k, hard limit", "Tiled floor"]
    assert "## My links\n- the supplier's page" in path.read_text()
    prompt = llm.requests[-1]["messages"][1]["content"]
    assert "Budget is 12k, hard limit" in prompt  # the model started from the edited file
    sources = [r.source for r in memory.revisions(home, channel)]
    assert sources[:3] == ["distill", "hand_edit", "distill"]

    # The next distillation rewrites Charlie's sentences; the person's sentence stays theirs.
    conversations.add_message(home, channel, "user", "Cabinets are white.", user=alice)
    llm.reply(distill_answer(summary="Kitchen plan, white cabinets.", decisions=("Oak",)))
    distill.distill(home, channel, client)
    assert memory.load(home, channel).summary == (
        "MY summary, written by hand. Kitchen plan, white cabinets."
    )


def test_malformed_answer_gets_one_repair(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = setup
    conversations.add_message(home, channel, "user", "Oak.", user=alice)
    llm.reply("Sure! Here is the memory: {summary: oak")
    llm.reply("<think>fix it</think>```json\n" + distill_answer() + "\n```")
    result = distill.distill(home, channel, client)
    assert result.attempts == 2
    assert result.memory.summary == "Planning the kitchen."
    assert "was not usable" in llm.requests[1]["messages"][-1]["content"]


def test_invalid_twice_keeps_the_old_memory_and_records_the_failure(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = setup
    conversations.add_message(home, channel, "user", "Oak.", user=alice)
    llm.reply(distill_answer(summary="Good memory."))
    distill.distill(home, channel, client)
    path = channel.project.memory_path  # type: ignore[union-attr]
    before = path.read_bytes()

    conversations.add_message(home, channel, "user", "More.", user=alice)
    llm.reply('{"summary": "half", "decisions": "not a list"}')
    llm.reply('{"summary": ""}')
    with pytest.raises(DistillationError, match="not valid twice"):
        distill.distill(home, channel, client)
    assert path.read_bytes() == before
    assert conversations.distilled_upto(home, channel) == 1  # "More." is still pending
    row = home.db.execute("SELECT status, error FROM distillations ORDER BY id DESC").fetchone()
    assert row["status"] == "failed" and "decisions" in row["error"]


def test_server_refusing_response_format_falls_back_to_plain_prompting(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = setup
    llm.refuse_response_format = True
    conversations.add_message(home, channel, "user", "Oak.", user=alice)
    llm.reply("Here you go:\n" + distill_answer(summary="The choice is oak."))
    result = distill.distill(home, channel, client)
    assert not result.structured
    assert result.memory.summary == "The choice is oak."
    assert "response_format" in llm.requests[0]
    assert "response_format" not in llm.requests[1]


def test_structured_output_request_carries_the_schema(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = setup
    conversations.add_message(home, channel, "user", "Oak.", user=alice)
    llm.reply(distill_answer())
    assert distill.distill(home, channel, client).structured
    schema = llm.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["summary", "decisions", "superseded", "quotes"]


def test_malformed_memory_file_pauses_distillation_without_touching_it(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = setup
    path = channel.project.memory_path  # type: ignore[union-attr]
    memory.save(home, channel, Memory("ok"), "distill")
    broken = path.read_text() + "\n## Decisions\n- second decisions section\n"
    path.write_text(broken)
    conversations.add_message(home, channel, "user", "Oak.", user=alice)
    with pytest.raises(MemoryFormatError, match="a second '## Decisions'"):
        distill.distill(home, channel, client)
    assert path.read_text() == broken
    assert llm.requests == []


def test_llm_down_during_distillation_keeps_the_turn_and_the_memory(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = setup
    for number in range(2):
        llm.reply("Reply.")
        say(home, client, channel, alice, f"Message {number}.")
    llm.reply("Reply.")
    llm.error(503, "model crashed")
    events = say(home, client, channel, alice, "Third.")
    notices = [e.text for e in events if isinstance(e, chat.Notice)]
    assert any("Memory was not updated" in n and "503" in n for n in notices)
    assert any(isinstance(e, chat.Reply) for e in events)
    assert memory.load(home, channel) == memory.parse(
        channel.project.memory_path.read_text()  # type: ignore[union-attr]
    )
    assert memory.load(home, channel).summary == ""


def test_nothing_to_distill_is_a_clear_error(
    home: Home, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, _, client = setup
    with pytest.raises(DistillationError, match="no new messages"):
        distill.distill(home, channel, client)


def test_down_server_fails_distill_cleanly(home: Home, dead_url: str) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    conversations.add_message(home, channel, "user", "Oak.", user=ensure_user(home.db, "alice"))
    with pytest.raises(LLMUnavailable, match=dead_url):
        distill.distill(home, channel, LLMClient(dead_url, "m", retries=0))
    assert home.db.execute("SELECT status FROM distillations").fetchone()[0] == "failed"


def test_extract_json_tolerates_chatter() -> None:
    text = 'Thinking {not json} then ```json\n{"summary": "x", "decisions": [], "quotes": []}```'
    assert distill.extract_json(text)["summary"] == "x"
    with pytest.raises(DistillationError, match="no JSON object"):
        distill.extract_json("no braces at all")


def test_only_one_distillation_at_a_time_per_channel(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, alice, client = setup
    first = distill.claim(home, channel)
    assert first is not None
    assert distill.claim(home, channel) is None  # another turn is distilling
    for number in range(5):
        conversations.add_message(home, channel, "user", f"Point {number}.", user=alice)
    assert list(chat.distill_due(home, client, channel)) == []  # skipped, nothing sent
    assert llm.requests == []
    distill.release(home, channel, first)
    llm.reply(distill_answer())
    assert [type(e).__name__ for e in chat.distill_due(home, client, channel)] == ["Distilled"]
    again = distill.claim(home, channel)
    assert again is not None  # released after the work
    distill.release(home, channel, again)


LONG_AGO = "2000-01-01T00:00:00+00:00"


def renewal_ended(token: str) -> None:
    """Wait until the thread renewing `token`'s claim has ended (10 s at most)."""
    deadline = time.monotonic() + 10
    while any(t.name == f"charlie-claim-{token[:12]}" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the claim's renewal went on"
        time.sleep(0.02)


def test_a_claim_left_by_a_crash_expires(
    home: Home, setup: tuple[Channel, User, LLMClient]
) -> None:
    channel, _, _ = setup
    left = distill.claim(home, channel)
    assert left is not None
    home.db.execute("UPDATE conversations SET distill_claimed_at = ?", (LONG_AGO,))
    taken = distill.claim(home, channel)
    assert taken is not None
    distill.release(home, channel, taken)
    distill.release(home, channel, left)  # its renewal ends (the claim is no longer it)


def claimed_at(home: Home, channel: Channel) -> str | None:
    row = home.db.execute(
        "SELECT distill_claimed_at FROM conversations WHERE id = ?", (channel.memory_key,)
    ).fetchone()
    return None if row[0] is None else str(row[0])


def test_a_held_claim_is_renewed_until_it_is_released(
    home: Home, setup: tuple[Channel, User, LLMClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A distillation waiting on a slow model keeps its claim however long it takes: its
    process renews it, so only a claim nobody renews (a machine gone) ever expires."""
    channel, _, _ = setup
    monkeypatch.setattr(distill, "RENEW_SECONDS", 0.05)
    token = distill.claim(home, channel)
    assert token is not None
    home.db.execute("UPDATE conversations SET distill_claimed_at = ?", (LONG_AGO,))
    deadline = time.monotonic() + 10
    while claimed_at(home, channel) == LONG_AGO and time.monotonic() < deadline:
        time.sleep(0.02)
    assert claimed_at(home, channel) != LONG_AGO, "the claim was not renewed"
    assert distill.claim(home, channel) is None  # renewed: still held
    distill.release(home, channel, token)
    renewal_ended(token)
    assert claimed_at(home, channel) is None


def test_a_distillation_writes_nothing_when_another_folded_its_messages_in_meanwhile(
    home: Home, llm: ScriptedLLMServer, setup: tuple[Channel, User, LLMClient]
) -> None:
    """Two distillations of one batch (a claim taken over from a holder that stalled past
    its expiry; or a start-over that set the messages aside while the model thought): the
    one that finishes second changes nothing, and a turn says nothing of it — nothing
    failed, so no failure is counted either."""
    channel, alice, client = setup
    for number in range(5):
        conversations.add_message(home, channel, "user", f"Point {number} on oak.", user=alice)
    window = conversations.undistilled(home, channel)

    def meanwhile(request: dict[str, Any]) -> str:
        newest = conversations.undistilled(home, channel)[-1].id
        conversations.mark_distilled(home, channel, newest)  # the other one wrote
        return distill_answer(summary="Oak, as the first distillation saw it.")

    llm.default = meanwhile
    before = memory.load(home, channel)
    with pytest.raises(AlreadyDistilled, match="folded into memory or set aside meanwhile"):
        distill.distill(home, channel, client, window)
    assert memory.load(home, channel) == before
    assert home.db.execute("SELECT count(*) FROM memory_revisions").fetchone()[0] == 0

    for number in range(5, 10):
        conversations.add_message(home, channel, "user", f"Point {number} on oak.", user=alice)
    assert list(chat.distill_due(home, client, channel)) == []
    assert conversations.distill_failures(home, channel) is None
    assert memory.load(home, channel) == before


def test_a_claims_renewal_never_makes_a_home_that_was_removed(
    home: Home, setup: tuple[Channel, User, LLMClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim left held (a process that lost track of it) is renewed against the database
    as it is: a data home removed meanwhile is not made again, and the renewal ends."""
    if home.settings.database_url:
        pytest.skip("a SQLite file removed under the renewal")
    channel, _, _ = setup
    monkeypatch.setattr(distill, "RENEW_SECONDS", 0.02)
    monkeypatch.setattr(distill, "CLAIM_SECONDS", 0.2)
    token = distill.claim(home, channel)
    assert token is not None
    home.close()
    db_path = home.settings.db_path
    for leftover in db_path.parent.glob(db_path.name + "*"):
        leftover.unlink()
    renewal_ended(token)  # with no database to renew it in
    assert not db_path.exists()
