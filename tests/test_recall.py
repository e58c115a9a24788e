"""Conversation recall: every message found again — by meaning, by words, by when — and
never across people. Real SQLite files, the packaged embedding model."""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from conftest import Cli
from support.history import say

from charlie import conversations
from charlie.conversations import Channel, private_channel, shared_channel
from charlie.errors import Forbidden
from charlie.home import Home
from charlie.projects import create_project
from charlie.retrieval import recall, usage
from charlie.retrieval.recall import conversations_for, recaller_for
from charlie.tools import builtin as toolkit
from charlie.tools.registry import ToolContext
from charlie.users import User, ensure_user

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


@pytest.fixture
def household(home: Home) -> tuple[Home, User, User, Channel]:
    alice, bob = ensure_user(home.db, "alice"), ensure_user(home.db, "bob")
    boat = shared_channel(home, create_project(home, "boat"))
    say(home, boat, "alice", "Should we repaint the hull before the season?", "2023-05-02T10:00Z")
    say(
        home,
        boat,
        "bob",
        "Yes, the blue antifouling paint from the chandlery.",
        "2023-05-02T10:01Z",
    )
    say(home, boat, "alice", "Fine, blue it is. I'll order two tins.", "2023-05-02T10:02Z")
    say(home, boat, "bob", "The mooring fee went up to 900 a year.", "2023-06-11T09:00Z")
    say(home, boat, "alice", "We talked about the paint for the hull again.", "2023-08-20T18:00Z")
    say(
        home,
        boat,
        "bob",
        "Let's keep the blue antifouling paint for the hull.",
        "2023-08-20T18:01Z",
    )
    say(
        home,
        private_channel(home, alice),
        "alice",
        "My passport is in the blue drawer.",
        "2023-05-03T08:00Z",
    )
    say(
        home,
        private_channel(home, bob),
        "bob",
        "Gift idea for alice: a blue kayak paddle.",
        "2023-05-04T08:00Z",
    )
    return home, alice, bob, boat


def texts(result: recall.RecallResult) -> list[str]:
    return [hit.message.content for hit in result.hits]


def test_a_message_is_found_by_meaning_with_its_date_and_neighbours(household) -> None:
    home, alice, _, boat = household
    found = recaller_for(home).recall(
        alice, [boat], "which antifouling did we get from the chandlery?", now=NOW
    )
    best = found.hits[0]
    assert best.message.content == "Yes, the blue antifouling paint from the chandlery."
    assert best.message.created_at.startswith("2023-05-02T10:01")
    assert [m.content for m in best.around] == [
        "Should we repaint the hull before the season?",
        "Yes, the blue antifouling paint from the chandlery.",
        "Fine, blue it is. I'll order two tins.",
    ]


def test_a_literal_number_is_found_by_its_words(household) -> None:
    home, alice, _, boat = household
    found = recaller_for(home).recall(alice, [boat], "900", now=NOW)
    assert texts(found)[0] == "The mooring fee went up to 900 a year."


def test_a_time_bounded_question_prefers_that_month(household) -> None:
    home, alice, _, boat = household
    recaller = recaller_for(home)
    may = recaller.recall(alice, [boat], "blue antifouling paint for the hull in May 2023", now=NOW)
    august = recaller.recall(
        alice, [boat], "blue antifouling paint for the hull in August 2023", now=NOW
    )
    assert may.when is not None and may.when.describe().startswith("May 2023")
    assert may.hits[0].message.created_at.startswith("2023-05") and may.hits[0].in_time
    assert august.hits[0].message.created_at.startswith("2023-08") and august.hits[0].in_time
    first = recaller.recall(alice, [boat], "the first time we talked about the hull paint", now=NOW)
    last = recaller.recall(alice, [boat], "the last time we talked about the hull paint", now=NOW)
    assert first.hits[0].message.created_at < last.hits[0].message.created_at


def test_private_messages_never_cross_people(household) -> None:
    home, alice, bob, boat = household
    recaller = recaller_for(home)
    secret = "My passport is in the blue drawer."
    for user, channel in ((bob, private_channel(home, bob)), (bob, boat), (alice, boat)):
        for everywhere in (False, True):
            channels = conversations_for(home, user, channel, everywhere=everywhere)
            found = recaller.recall(user, channels, "where is the passport? blue drawer", now=NOW)
            assert secret not in texts(found)
            for hit in found.hits:
                assert all(m.content != secret for m in hit.around)
    # alice finds it in her own channel only
    own = conversations_for(home, alice, private_channel(home, alice), everywhere=True)
    assert secret in texts(recaller.recall(alice, own, "passport", now=NOW))
    with pytest.raises(Forbidden):
        conversations_for(home, bob, private_channel(home, alice))
    with pytest.raises(Forbidden):
        recaller.recall(bob, [private_channel(home, alice)], "passport", now=NOW)


def test_the_tool_returns_dates_neighbours_and_counts_them_as_cited(household) -> None:
    home, alice, _, boat = household
    context = ToolContext(home, boat, alice)
    result = toolkit.search_conversation(context, "which antifouling paint?", limit=2)
    assert isinstance(result, toolkit.Result)
    assert result.text.startswith("<messages>")
    assert "2023-05-02 10:01 UTC" in result.text and "→ [2023-05-02 10:01 UTC] bob:" in result.text
    assert "  [2023-05-02 10:00 UTC] alice: Should we repaint the hull" in result.text
    assert result.count == 2 and result.hits is not None
    assert all(key.startswith("message:") for key in context.cited)


def test_the_tool_in_a_private_channel_never_reads_another_persons(household) -> None:
    home, _, bob, _ = household
    context = ToolContext(home, private_channel(home, bob), bob)
    result = toolkit.search_conversation(context, "passport blue drawer", all_projects=True)
    assert "passport" not in result.text
    assert context.untrusted  # it read the shared project's messages: others wrote them


def test_a_new_message_is_indexed_and_a_deleted_one_dropped(household) -> None:
    home, alice, _, boat = household
    recaller = recaller_for(home)
    recaller.recall(alice, [boat], "hull", now=NOW)
    added = conversations.add_message(home, boat, "user", "The winch needs new grease.", user=alice)
    assert texts(recaller.recall(alice, [boat], "winch grease", now=NOW))[0] == added.content
    home.db.execute("DELETE FROM messages WHERE id = ?", (added.id,))
    assert added.content not in texts(recaller.recall(alice, [boat], "winch grease", now=NOW))


def test_a_cited_message_gets_the_usage_boost(household) -> None:
    home, alice, _, boat = household
    recaller = recaller_for(home)
    question = "blue antifouling paint for the hull"
    before = recaller.recall(alice, [boat], question, now=NOW)
    second = before.hits[1]
    for _ in range(3):
        usage.record(home.db, alice.id, "cited", note=usage.message_key(second.message.id))
    after = recaller.recall(alice, [boat], question, now=NOW)
    boosted = next(h for h in after.hits if h.message.id == second.message.id)
    assert boosted.boost > 0 and boosted.score > second.score


def test_reindex_rebuilds_a_dropped_or_damaged_index_with_the_same_results(
    household, charlie: Cli
) -> None:
    home, alice, _, boat = household
    questions = ["which paint for the hull?", "mooring fee", "hull paint in August 2023"]

    def ranked() -> list[list[int]]:
        fresh = recaller_for(home)
        return [
            [
                (h.message.id, round(h.score, 4))
                for h in fresh.recall(alice, [boat], q, now=NOW).hits
            ]
            for q in questions
        ]

    before = ranked()
    path = home.index_path
    home.index_db.close()  # type: ignore[union-attr]
    home.index_db = None
    home.shared.clear()
    path.unlink()
    result = charlie("reindex")
    assert "and 8 messages" in result.stdout
    assert ranked() == before
    home.index_db.close()  # type: ignore[union-attr]
    home.index_db = None
    home.shared.clear()
    with sqlite3.connect(path) as db:  # damage the message tables: the recall heals itself
        db.execute("DROP TABLE messages_fts")
    assert ranked() == before
    home.index_db.close()  # type: ignore[union-attr]
    home.index_db = None
    home.shared.clear()
    with sqlite3.connect(path) as db:  # words lost, vectors kept: the words are indexed again
        db.execute("DELETE FROM messages_fts WHERE rowid < 4")
    assert ranked() == before


def test_another_embedding_model_means_every_message_is_embedded_again(household) -> None:
    home, alice, _, boat = household
    recaller = recaller_for(home)
    recaller.recall(alice, [boat], "hull", now=NOW)
    recaller.index.db.execute(
        "UPDATE index_state SET value = 'older-model' WHERE key = 'messages_embedder'"
    )
    assert recaller.index.refresh() == 8


def test_recall_from_the_cli_as_json_and_from_a_queries_file(
    household, charlie: Cli, tmp_path: Path
) -> None:
    result = charlie("recall", "mooring fee", "-p", "boat", "--json", "--limit", "1")
    answer = json.loads(result.stdout)
    assert answer["results"][0]["text"] == "The mooring fee went up to 900 a year."
    assert answer["results"][0]["time"].startswith("2023-06-11T09:00")
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "query": "mooring"}\n{"id": "q2", "query": "passport"}\n')
    lines = charlie("recall", "--queries", str(queries), "-p", "boat", "--limit", "3").stdout
    got = [json.loads(line) for line in lines.splitlines()]
    assert [g["id"] for g in got] == ["q1", "q2"]
    assert all("passport" not in r["text"] for r in got[1]["results"])
    bobs = charlie("recall", "passport", "--private", "--user", "bob", "--all", "--json")
    assert "blue drawer" not in bobs.stdout


def test_an_empty_question_is_refused(household) -> None:
    home, alice, _, boat = household
    with pytest.raises(recall.RecallError, match="empty"):
        recaller_for(home).recall(alice, [boat], "   ")


def test_a_chat_turn_indexes_its_messages(home: Home, llm, charlie: Cli) -> None:
    llm.reply("Noted: the spare key is under the blue flowerpot.")
    assert charlie("chat", "-m", "Where is the spare key? Under the blue flowerpot.").exit_code == 0
    found = charlie("recall", "spare key flowerpot", "--json").stdout
    speakers = [r["speaker"] for r in json.loads(found)["results"][:2]]
    assert sorted(speakers) == ["Charlie", "alice"]


def test_a_time_asked_about_is_searched_in_a_large_conversation_as_brute_force_would() -> None:
    from charlie.retrieval.message_vectors import MAX_RUNS, ConversationVectors
    from charlie.retrieval.vectors import EXACT_BELOW

    rng = np.random.default_rng(7)
    n, dim = EXACT_BELOW + 5000, 384
    vectors = (rng.standard_normal((n, 24)) @ rng.standard_normal((24, dim))).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    table = ConversationVectors(dim)
    table.append(list(range(1, n - 99)), list(range(n - 100)), vectors[: n - 100])
    table.top(vectors[0], 10)  # builds the two-stage table over these rows
    table.append(list(range(n - 99, n + 1)), list(range(n - 100, n)), vectors[n - 100 :])
    query = rng.standard_normal(dim).astype(np.float32)
    query /= np.linalg.norm(query)
    runs = np.zeros(n, bool)
    runs[3000:9000] = runs[n - 50 :] = True  # a month, and the newest messages
    scattered = rng.random(n) < 0.3  # more runs than MAX_RUNS: searched exactly
    assert len(np.flatnonzero(np.diff(scattered.astype(int)))) > MAX_RUNS
    for inside in (runs, scattered, None):
        mask = np.ones(n, bool) if inside is None else inside
        sims = np.where(mask, vectors @ query, -np.inf)
        expected = {int(i) + 1 for i in np.argsort(-sims)[:20]}
        got = table.top(query, 20, inside)  # 20 of the table, and up to 20 of the rows since
        assert set(sorted(got, key=got.__getitem__, reverse=True)[:20]) == expected
        assert all(abs(got[i] - float(vectors[i - 1] @ query)) < 1e-5 for i in got)


def test_what_others_said_privately_never_shapes_the_terms_shown(household) -> None:
    """The terms a recall shows are counted in the conversations searched only: a word
    said only in alice's private channel looks to bob like a word nobody said."""
    home, alice, bob, boat = household
    recaller = recaller_for(home)
    for channel in (boat, private_channel(home, bob)):
        channels = conversations_for(home, bob, channel, everywhere=True)
        private_word = recaller.recall(bob, channels, "passport drawer", now=NOW)
        made_up = recaller.recall(bob, channels, "xylophonezz quokkaqq", now=NOW)
        assert private_word.terms == made_up.terms == []
    own = conversations_for(home, alice, private_channel(home, alice))
    assert "passport" in recaller.recall(alice, own, "passport drawer", now=NOW).terms


def test_a_long_backlog_is_indexed_in_the_background_while_recall_answers(
    household, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charlie.retrieval import message_index

    monkeypatch.setattr(message_index, "BATCH", 8)
    home, alice, _, boat = household
    for n in range(40):
        say(home, boat, "bob", f"Note {n} about the bilge pump.", f"2023-09-01T10:{n:02d}Z")
    found = recaller_for(home).recall(alice, [boat], "mooring fee", now=NOW)
    assert found.hits[0].message.content == "The mooring fee went up to 900 a year."
    catcher = home.shared.of(message_index.KeptMessages).catcher
    catcher.join(120)
    (indexed,) = home.index_db.execute("SELECT count(*) FROM messages").fetchone()  # type: ignore[union-attr]
    assert indexed == 48
    assert len(recaller_for(home).recall(alice, [boat], "bilge pump", now=NOW, limit=50).hits) >= 40


def test_null_for_an_optional_tool_argument_means_not_given(household) -> None:
    from charlie.tools.registry import run_tool

    home, alice, _, boat = household
    tool = toolkit.registry().tools["search_conversation"]
    outcome = run_tool(tool, ToolContext(home, boat, alice), {"query": "mooring", "limit": None})
    assert not outcome.error and "mooring fee" in outcome.content
    refused = run_tool(tool, ToolContext(home, boat, alice), {"query": None})
    assert refused.error


def test_a_recall_while_messages_are_still_being_indexed_says_so(
    household, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charlie.retrieval import message_index

    home, alice, _, boat = household
    monkeypatch.setattr(message_index, "BATCH", 2)  # a request indexes two; the rest wait
    answered = threading.Event()  # the catch-up may not finish before the recall has looked
    catch_up_all = message_index._catch_up_all

    def after_the_recall(*args: object) -> None:
        answered.wait(60)
        catch_up_all(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(message_index, "_catch_up_all", after_the_recall)
    recaller = recaller_for(home)
    result = recaller.recall(alice, conversations_for(home, alice, boat), "hull paint")
    answered.set()
    assert result.incomplete is not None and "still catching up" in result.incomplete
    catcher = home.shared.of(message_index.KeptMessages).catcher
    catcher.join(60)
    whole = recaller.recall(alice, conversations_for(home, alice, boat), "hull paint")
    assert whole.incomplete is None
    assert "Let's keep the blue antifouling paint for the hull." in texts(whole)
