"""Forgotten means gone everywhere: from the search index even when another process holds
index.db (the forget finishes there later, a kill -9 included), and from every table,
column and byte of the data home — charlie.db, index.db, their write-ahead logs, the
memory file."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any

import pytest
from support.distilling import is_distillation
from support.leaks import places_holding, secure_delete
from web_support import PASSWORD, signed_in

from charlie import conversations
from charlie import db as database
from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.conversations import Channel
from charlie.errors import CharlieError, DistillationError
from charlie.home import Home
from charlie.household import forget
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.projects import create_project
from charlie.retrieval import recall
from charlie.trace import Called, Hit
from charlie.users import User, ensure_user, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)

MARKER = "QUAIL9182"


@pytest.fixture
def alice(home: Home) -> User:
    return ensure_user(home.db, "alice", is_admin=False)


@pytest.fixture
def gate(home: Home) -> Channel:
    return conversations.shared_channel(home, create_project(home, "Gate"))


def said_around(home: Home, channel: Channel, alice: User) -> dict[str, int]:
    """A secret between two plain messages, Charlie's answer repeating it; all indexed, so
    the neighbours' index entries hold the secret as their context."""
    ids = {}
    ids["before"] = conversations.add_message(
        home, channel, "user", "Tiles are green.", user=alice
    ).id
    ids["secret"] = conversations.add_message(
        home, channel, "user", f"The gate code is {MARKER}.", user=alice
    ).id
    ids["answer"] = conversations.add_message(
        home, channel, "assistant", f"Noted: {MARKER}.", parent_id=ids["secret"]
    ).id
    ids["after"] = conversations.add_message(
        home, channel, "user", "The oven is fine.", user=alice
    ).id
    list(chat.index_messages(home))
    return ids


def found_by_words(home: Home, word: str) -> set[int]:
    """The messages whose index entry (own words or context) holds `word`, read from index.db
    by a connection of its own."""
    with closing(sqlite3.connect(home.index_path)) as db:
        rows = db.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (word,))
        return {int(r[0]) for r in rows}


@contextmanager
def index_locked(home: Home) -> Iterator[None]:
    """Another process writing index.db, holding its write lock past the busy timeout."""
    writer = sqlite3.connect(home.index_path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        writer.execute("ROLLBACK")
        writer.close()


@pytest.fixture
def impatient(monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy timeout of 0.3 s instead of 10 (connections opened from now on)."""
    monkeypatch.setattr(database, "BUSY_TIMEOUT", 0.3)


# ---------------------------------------------------------------- item 3: index.db busy


def test_forget_with_index_db_locked_says_so_and_a_retry_finishes_it(
    home: Home, alice: User, gate: Channel, impatient: None
) -> None:
    ids = said_around(home, gate, alice)
    assert found_by_words(home, MARKER.lower()) == set(ids.values())  # own words or context
    set_password(home.db, "alice", PASSWORD)
    path = f"/api/channels/gate/threads/{gate.conversation_id}/messages/{ids['secret']}/forget"
    with signed_in("alice") as app:
        with index_locked(home):
            failed = app.post(path, json={})
            assert failed.status_code == 503, failed.text
            said = failed.json()["error"]
            assert str(home.index_path) in said and "charlie.db" not in said
            assert said.startswith(
                "Forgot 2 messages, but the search index is not scrubbed yet. The database "
                f"{home.index_path} is busy"
            )
            assert said.endswith(
                "Nothing needs redoing: the index is scrubbed by itself as soon as it can be (by "
                "the next search, the indexer or the next forget), and no search finds what was "
                "forgotten meanwhile."
            )
            shown = [m.id for m in conversations.recent(home, gate, 10)]
            assert shown == [ids["before"], ids["after"]]  # the forget itself is done

            again = app.post(path, json={})  # still locked: already forgotten, index pending
            assert again.status_code == 503, again.text
            assert again.json()["error"].startswith(
                f"Message {ids['secret']} is already forgotten, but the search index is not "
                f"scrubbed yet. The database {home.index_path} is busy"
            )
        done = app.post(path, json={})  # free: the retry finishes the index
        assert done.status_code == 404, done.text
        assert done.json()["error"] == (
            f"Message {ids['secret']} is already forgotten, and the search index is scrubbed of it."
        )
    assert found_by_words(home, MARKER.lower()) == set()  # nor a neighbour's context
    leaks = places_holding(home.settings.home, MARKER)
    assert leaks == [], leaks


def test_forget_with_index_db_locked_is_finished_by_the_next_recall(
    home: Home, alice: User, gate: Channel, impatient: None
) -> None:
    ids = said_around(home, gate, alice)
    with index_locked(home):
        with pytest.raises(CharlieError, match="by the next search"):
            forget.forget(home, gate, alice, ids["secret"])
        with pytest.raises(CharlieError, match=r"index\.db is busy"):  # never recalls them
            recall.recaller_for(home).recall(alice, [gate], MARKER, limit=5)
    with Home.open(load_settings()) as later:  # say, the next request
        hits = recall.recaller_for(later).recall(alice, [gate], MARKER, limit=5).hits
    assert [h.message.id for h in hits if h.bm25 > 0] == []
    assert found_by_words(home, MARKER.lower()) == set()
    leaks = places_holding(home.settings.home, MARKER)
    assert leaks == [], leaks


def test_a_thread_forgotten_with_index_db_locked_is_finished_by_forgetting_it_again(
    home: Home, alice: User, gate: Channel, impatient: None
) -> None:
    ids = said_around(home, gate, alice)
    with index_locked(home), pytest.raises(CharlieError, match=r"^Forgot 4 messages, but"):
        forget.forget_thread(home, gate, alice)
    assert found_by_words(home, MARKER.lower()) == set(ids.values())  # the index is left as it was
    assert forget.forget_thread(home, gate, alice).messages == 0  # nothing left but the index
    assert found_by_words(home, MARKER.lower()) == set()
    assert found_by_words(home, "oven") == set()


def test_a_message_stored_while_the_index_waits_to_be_scrubbed_is_indexed(
    home: Home, alice: User, gate: Channel, impatient: None
) -> None:
    """The newest messages forgotten while index.db is busy: a message stored meanwhile (an id
    SQLite may give again) is found by its own words once the index is scrubbed, and never
    by the forgotten ones."""
    ids = said_around(home, gate, alice)
    with index_locked(home):
        with pytest.raises(CharlieError, match="not scrubbed yet"):
            forget.forget(home, gate, alice, ids["after"])
        with pytest.raises(CharlieError, match="not scrubbed yet"):
            forget.forget(home, gate, alice, ids["secret"])
        new = conversations.add_message(home, gate, "user", "Paint it teal.", user=alice)
    list(chat.index_messages(home))
    assert found_by_words(home, "teal") == {new.id, ids["before"]}  # its words, its context
    assert found_by_words(home, MARKER.lower()) == set()
    assert found_by_words(home, "oven") == set()


def test_a_forget_killed_while_index_db_is_locked_is_finished_at_the_next_open(
    home: Home, alice: User, gate: Channel
) -> None:
    ids = said_around(home, gate, alice)
    with index_locked(home):
        forgetting = subprocess.Popen(
            [sys.executable, "-m", "charlie", "forget", str(ids["secret"]), "-p", "gate", "--yes"],
            env=os.environ.copy(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 60
            while home.db.execute(
                "SELECT 1 FROM messages WHERE id = ?", (ids["secret"],)
            ).fetchone():
                assert forgetting.poll() is None, forgetting.stderr and forgetting.stderr.read()
                assert time.monotonic() < deadline
                time.sleep(0.05)
            # charlie.db has committed; the index waits for the lock (10 s): kill it there
            forgetting.send_signal(signal.SIGKILL)
        finally:
            forgetting.wait(30)
            if forgetting.stderr:
                forgetting.stderr.close()
        assert forgetting.returncode == -signal.SIGKILL
    assert found_by_words(home, MARKER.lower())  # the kill left it in the index…
    with Home.open(load_settings()) as after:  # … until the next open uses the index
        list(chat.index_messages(after))
    assert found_by_words(home, MARKER.lower()) == set()
    leaks = places_holding(home.settings.home, MARKER)
    assert leaks == [], leaks


# ---------------------------------------------------------------- item 4: every byte


def test_a_forgotten_text_is_in_no_table_column_or_file_byte_of_the_home(
    home: Home, alice: User, gate: Channel, client: LLMClient, llm: Any
) -> None:
    """The text a person forgot, after it went everywhere Charlie keeps things: the thread's
    title, the memory (summary, quote), a distillation that failed quoting the model's
    answer, one that refused it as a decision and left out a quote, a later reply's trace
    that searched for it, the search index (words, neighbours' context, vectors)."""
    thread = conversations.new_thread(home, gate)  # untitled: named by its first words
    asked = conversations.add_message(
        home, thread, "user", f"Should the gate code be {MARKER}?", user=alice
    )
    conversations.add_message(
        home, thread, "assistant", f"{MARKER} would do for the gate.", parent_id=asked.id
    )
    later = conversations.add_message(
        home, thread, "user", "What did we say about the hinges?", user=alice
    )
    searched = Called(
        "search_conversation",
        {"query": f"gate code {MARKER}"},
        True,
        "1 message",
        hits=(Hit(f"message:{asked.id}", "alice", 0.9, asked.content),),
        count=1,
    )
    conversations.add_message(
        home, thread, "assistant", "The hinges are black.", parent_id=later.id, trace=[searched]
    )
    conversations.add_message(home, thread, "user", "The hinges are black, yes.", user=alice)
    not_json = f"Sure! I think the gate code {MARKER} is a good one, and the hinges are black."
    llm.reply(not_json)
    llm.reply(not_json)  # the repair asked for: no JSON again
    with pytest.raises(DistillationError):
        distill.distill(home, thread, client)

    def distilled(request: dict[str, Any]) -> str:
        assert is_distillation(request)
        return json.dumps(
            {
                "summary": f"The gate code would be {MARKER}.",
                "decisions": [{"text": f"Gate code {MARKER}", "messages": [asked.id]}],
                "quotes": [{"speaker": "alice", "text": f"{MARKER} for the gate"}],
            }
        )

    llm.respond(distilled)
    distill.distill(home, thread, client)
    list(chat.index_messages(home))
    before = places_holding(home.settings.home, MARKER)
    for place in ("distillations.refused_decisions", "distillations.error", "messages.trace"):
        assert f"charlie.db: {place}" in before  # it is everywhere now
    assert "index.db: fts5 terms of messages_fts" in before

    forget.forget(home, thread, alice, asked.id)

    index = recall.recaller_for(home).index
    assert secure_delete(index.db)
    assert not isinstance(home.db, sqlite3.Connection) or secure_delete(home.db)
    leaks = places_holding(home.settings.home, MARKER)
    assert leaks == [], leaks
