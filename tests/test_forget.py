"""Forgetting a message reaches every place derived from it, leaves a log of when and by
whom (never what), and only the author — or an administrator, in a shared project — may
forget; a private channel's messages only their owner."""

from __future__ import annotations

import json
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from llm_double import ScriptedLLMServer
from support.distilling import distill_answer, is_distillation
from web_support import PASSWORD, signed_in

from charlie import conversations
from charlie import db as database
from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.conversations import Channel, private_channel, shared_channel
from charlie.errors import Forbidden
from charlie.home import Home
from charlie.household import forget
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.memory.layers import DISTILLED, Decision, Earlier, Memory, Quote
from charlie.projects import create_project, get_project
from charlie.retrieval import recall
from charlie.transfer import export as archive
from charlie.users import User, ensure_user, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)

SECRET = "The door code is WREN4471, and we go with oak."


@pytest.fixture
def people(home: Home) -> tuple[User, User]:
    alice = ensure_user(home.db, "alice", is_admin=False)
    bob = ensure_user(home.db, "bob", is_admin=False)
    return alice, bob


def planted(home: Home, channel: Channel, alice: User) -> tuple[int, int, int]:
    """Alice's secret, Charlie's answer repeating it, and a later message; the memory quoting
    the secret and holding a decision made from it."""
    said = conversations.add_message(home, channel, "user", SECRET, user=alice)
    answer = conversations.add_message(
        home, channel, "assistant", "Noted: code WREN4471, and oak.", parent_id=said.id
    )
    later = conversations.add_message(home, channel, "user", "Tiles are green.", user=alice)
    layers = Memory(
        "The kitchen.",
        [
            Decision("Oak worktops", "2026-12-01", DISTILLED, (said.id,)),
            Decision("Green tiles", "2026-12-01", DISTILLED, (said.id, later.id)),
        ],
        [Quote("alice", SECRET)],
    )
    memory.save(home, channel, layers, "distill")
    list(chat.index_messages(home))
    return said.id, answer.id, later.id


def everything(home: Home) -> str:
    """Every stored byte of the data home: the databases and the files."""
    parts = []
    for path in sorted(home.settings.home.rglob("*")):
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    for db in (home.db,):
        for name in database.table_names(db):
            for row in db.execute(f"SELECT * FROM {name}"):
                parts.append(" ".join(str(v) for v in row))
    return "\n".join(parts)


def test_a_forgotten_message_is_found_nowhere_and_its_answer_goes_too(
    home: Home, people: tuple[User, User], tmp_path: Path
) -> None:
    alice, _ = people
    channel = shared_channel(home, create_project(home, "Kitchen"))
    said, _, later = planted(home, channel, alice)
    done = forget.forget(home, channel, alice, said)
    assert (done.messages, done.quotes) == (2, 1)
    assert done.flagged == ["Oak worktops"]
    ids = [m.id for m in conversations.recent(home, channel, 10)]
    assert ids == [later]
    held = memory.load(home, channel)
    assert held.quotes == []
    oak, tiles = held.decisions
    assert oak.flag == memory.SOURCE_FORGOTTEN and oak.sources == ()
    assert tiles.sources == (later,) and not tiles.flag
    hits = recall.recaller_for(home).recall(alice, [channel], "door code", limit=5).hits
    assert all("WREN4471" not in h.message.content for h in hits)
    exported = tmp_path / "export.zip"
    archive.export_archive(home, exported, exporter="alice")
    with zipfile.ZipFile(exported) as z:
        assert all(b"WREN4471" not in z.read(n) for n in z.namelist())
    home.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert "WREN4471" not in everything(home)
    (log,) = home.db.execute("SELECT by_user_id, place, messages FROM forget_log").fetchall()
    assert tuple(log) == (alice.id, "project kitchen", 2)  # when, by whom, how many: not what


def test_only_the_message_keeps_charlies_answer(home: Home, people: tuple[User, User]) -> None:
    alice, _ = people
    channel = shared_channel(home, create_project(home, "Kitchen"))
    said, answer, later = planted(home, channel, alice)
    forget.forget(home, channel, alice, said, only=True)
    assert [m.id for m in conversations.recent(home, channel, 10)] == [answer, later]
    kept = conversations.get_message(home, channel, later)
    assert kept.parent_id == answer


def test_nobody_forgets_someone_elses_message_and_a_private_one_only_its_owner(
    home: Home, people: tuple[User, User]
) -> None:
    alice, bob = people
    channel = shared_channel(home, create_project(home, "Kitchen"))
    said, answer, _ = planted(home, channel, alice)
    with pytest.raises(Forbidden, match="only forget your own"):
        forget.forget(home, channel, bob, said)
    with pytest.raises(Forbidden, match="only forget your own"):
        forget.forget(home, channel, bob, answer)  # Charlie's answer to alice is hers
    mine = private_channel(home, alice)
    private = conversations.add_message(home, mine, "user", "My private words.", user=alice)
    with pytest.raises(Exception, match="no message"):
        forget.forget(home, private_channel(home, bob), bob, private.id)  # never reachable
    assert conversations.recent(home, mine, 5)[0].content == "My private words."
    admin = ensure_user(home.db, "carol", is_admin=True)
    assert forget.forget(home, channel, admin, said).messages == 2  # an admin, in a project
    with pytest.raises(Exception, match="no message"):
        forget.forget(home, private_channel(home, admin), admin, private.id)


def test_charlie_forget_on_the_command_line(charlie: Cli, home: Home) -> None:
    alice = ensure_user(home.db, "alice")
    channel = shared_channel(home, create_project(home, "Kitchen"))
    said, _, _ = planted(home, channel, alice)
    refused = charlie("forget", str(said), "-p", "kitchen", input="n\n")
    assert refused.exit_code == 1 and "Aborted" in refused.output
    assert conversations.get_message(home, channel, said).content == SECRET
    done = charlie("forget", str(said), "-p", "kitchen", "--yes")
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == [
        "Forgot 2 messages (1 quote taken out of the memory, 1 earlier revision scrubbed).",
        "The decision 'Oak worktops' came only from what was forgotten: it is flagged in the "
        "memory; keep it (delete the flag) or drop it.",
    ]
    text = channel.project.memory_path.read_text()  # type: ignore[union-attr]
    assert (
        "- Oak worktops _(since 2026-12-01 · distilled · source forgotten: keep or drop?)_" in text
    )
    missing = charlie("forget", "999", "-p", "kitchen", "--yes")
    assert (
        missing.exit_code == 1
        and missing.output == "Error: There is no message 999 in project kitchen.\n"
    )


def test_forgetting_a_thread_in_the_app_and_a_message_of_someone_else_refused(
    home: Home, people: tuple[User, User]
) -> None:
    alice, _ = people
    for name in ("alice", "bob"):
        set_password(home.db, name, PASSWORD)
    channel = shared_channel(home, create_project(home, "Kitchen"))
    thread = conversations.new_thread(home, channel)
    said, _, _ = planted(home, thread, alice)
    with signed_in("bob") as as_bob:
        refused = as_bob.post(
            f"/api/channels/kitchen/threads/{thread.conversation_id}/messages/{said}/forget",
            json={},
        )
        assert refused.status_code == 403
        assert (
            as_bob.post(
                f"/api/channels/kitchen/threads/{thread.conversation_id}/forget"
            ).status_code
            == 403
        )
    with signed_in("alice") as as_alice:
        done = as_alice.post(f"/api/channels/kitchen/threads/{thread.conversation_id}/forget")
        assert done.status_code == 200, done.text
        assert done.json()["messages"] == 3
    assert conversations.count_messages(home, thread) == 0


def test_forget_racing_a_distillation_leaves_no_quote_of_it(
    home: Home, llm: ScriptedLLMServer, people: tuple[User, User]
) -> None:
    """The distillation read the message before it was forgotten and writes after: what it
    would quote from it is dropped, and the forget waited for its claim."""
    alice, _ = people
    channel = shared_channel(home, create_project(home, "Kitchen"))
    said = conversations.add_message(home, channel, "user", SECRET, user=alice)
    asked, go = threading.Event(), threading.Event()

    def respond(request: dict[str, Any]) -> Any:
        if is_distillation(request):
            asked.set()
            assert go.wait(20)
            return distill_answer(quotes=(("alice", SECRET),), decisions=("Oak",))
        return "ok"

    llm.respond(respond)
    outcome: dict[str, Any] = {}

    def run() -> None:
        own_client = LLMClient(llm.base_url, "test-model")
        with Home.open(load_settings()) as own:
            kitchen = shared_channel(own, get_project(own, "kitchen"))
            outcome["result"] = distill.distill(own, kitchen, own_client)
        own_client.close()

    thread = threading.Thread(target=run)
    thread.start()
    assert asked.wait(20)
    forgetting = threading.Thread(
        target=lambda: outcome.setdefault("forgot", forget.forget(home, channel, alice, said.id))
    )
    forgetting.start()
    go.set()
    thread.join(30)
    forgetting.join(30)
    assert outcome["forgot"].messages == 1
    held = memory.load(home, channel)
    assert held.quotes == [] and SECRET not in json.dumps(memory.as_json(held))
    for revision in memory.revisions(home, channel):
        assert "WREN4471" not in revision.memory.to_json()


def test_a_decision_that_only_restated_a_forgotten_message_goes_with_it(
    home: Home, people: tuple[User, User], tmp_path: Path
) -> None:
    alice, _ = people
    channel = shared_channel(home, create_project(home, "Kitchen"))
    said = conversations.add_message(
        home, channel, "user", "The alarm code is WREN4471.", user=alice
    )
    first = Decision("The alarm code is WREN4471", "2026-12-01", DISTILLED, (said.id,))
    memory.save(home, channel, Memory("The kitchen.", [first]), "distill")
    memory.save(
        home, channel, Memory("The kitchen.", [first, Decision("Oak", by=DISTILLED)]), "distill"
    )
    done = forget.forget(home, channel, alice, said.id)
    assert (done.restated, done.flagged) == (1, [])
    assert memory.load(home, channel).texts == ["Oak"]
    assert "WREN4471" not in everything(home)  # the memory, its revisions, every table


def test_a_message_forgotten_while_the_index_embeds_it_is_never_indexed(
    home: Home, people: tuple[User, User]
) -> None:
    alice, _ = people
    channel = shared_channel(home, create_project(home, "Kitchen"))
    conversations.add_message(home, channel, "user", "Tiles are green.", user=alice)
    said = conversations.add_message(home, channel, "user", SECRET, user=alice)
    conversations.add_message(home, channel, "user", "The oven is fine.", user=alice)
    index = recall.recaller_for(home).index
    embed = index.embedder.embed

    def forgetting_meanwhile(texts: list[str], **options: Any) -> Any:
        forget.forget(home, channel, alice, said.id, only=True)  # while the batch embeds
        return embed(texts, **options)

    index.embedder.embed = forgetting_meanwhile  # type: ignore[method-assign]
    try:
        assert index.refresh() == 2  # the two messages still there
    finally:
        index.embedder.embed = embed  # type: ignore[method-assign]
    home.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    index.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert "WREN4471" not in everything(home)  # not in its words, nor a neighbour's context
    hits = recall.recaller_for(home).recall(alice, [channel], "door code oak", limit=5).hits
    assert [h.message.content for h in hits if "WREN4471" in h.message.content] == []


def test_a_code_only_the_forgotten_message_held_leaves_charlies_summaries_and_decisions(
    home: Home, people: tuple[User, User]
) -> None:
    alice, _ = people
    channel = shared_channel(home, create_project(home, "Kitchen"))
    said = conversations.add_message(
        home, channel, "user", "The alarm code is WREN4471.", user=alice
    )
    tiles = conversations.add_message(home, channel, "user", "Tiles are green, oak.", user=alice)
    distilled = Memory(
        "Alice set the alarm code to WREN4471. The kitchen gets green tiles.",
        [
            Decision("Use code WREN4471 for the alarm", "2026-12-01", DISTILLED, (said.id,)),
            Decision("Green tiles", "2026-12-01", DISTILLED, (tiles.id,)),
        ],
    )
    memory.save(home, channel, distilled, "distill")
    done = forget.forget(home, channel, alice, said.id)
    assert (done.restated, done.flagged) == (1, [])
    held = memory.load(home, channel)
    assert held.summary == "The kitchen gets green tiles."
    assert held.texts == ["Green tiles"]
    assert "WREN4471" not in everything(home)  # memory.md, every revision, every table

    # a summary the person wrote is theirs: never cut
    mine = Memory("My note: 9026 opens the gate.", [Decision("Oak", by=DISTILLED)])
    memory.save(home, channel, mine, "edit")
    gate = conversations.add_message(home, channel, "user", "The gate code is 9026.", user=alice)
    forget.forget(home, channel, alice, gate.id)
    assert memory.load(home, channel).summary == "My note: 9026 opens the gate."


def test_a_decision_charlie_drew_from_another_message_goes_when_it_holds_the_forgotten_code(
    home: Home, people: tuple[User, User]
) -> None:
    """A distillation can carry a forgotten message's code into a decision it credits to a
    later message (the change judge's rewrite, a sentence joining two messages): the code
    goes with the forgotten message, whatever the decision's sources — in the memory held
    and in every earlier decision and revision."""
    alice, _ = people
    channel = shared_channel(home, create_project(home, "Hall"))
    said = conversations.add_message(
        home, channel, "user", "The alarm code is WREN4471.", user=alice
    )
    later = conversations.add_message(home, channel, "user", "Tell the sitter too.", user=alice)
    tiles = conversations.add_message(home, channel, "user", "Tiles are green, oak.", user=alice)
    retired = Earlier(
        "The alarm code is WREN4471 for now", "2026-11-30", DISTILLED, (later.id,), "2026-12-01"
    )
    distilled = Memory(
        "The hall is being redone.",
        [
            Decision("The sitter gets alarm code WREN4471", "2026-12-01", DISTILLED, (later.id,)),
            Decision("Green tiles", "2026-12-01", DISTILLED, (tiles.id,)),
        ],
        earlier=[retired],
    )
    memory.save(home, channel, distilled, "distill")
    assert "WREN4471" in memory.load(home, channel).texts[0]
    forget.forget(home, channel, alice, said.id)
    held = memory.load(home, channel)
    assert held.texts == ["Green tiles"]
    assert held.earlier == []
    assert "WREN4471" not in everything(home)  # memory.md, every revision, every table
