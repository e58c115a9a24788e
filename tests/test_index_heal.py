"""The search index is derived data: whatever state its file is in, Charlie rebuilds it from
the note files and answers — through a real server, the CLI, a chat turn that searches, and
an index an older Charlie left inside charlie.db."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from live_server import live_server, signed_in_client
from llm_double import ScriptedLLMServer
from web_support import PASSWORD, events

from charlie import projects
from charlie.config import load_settings
from charlie.db import run_script
from charlie.errors import DatabaseNotWritable
from charlie.home import Home, Shared
from charlie.notes import files as notes
from charlie.retrieval.embeddings import LocalEmbedder
from charlie.retrieval.index import Index
from charlie.retrieval.index_file import FTS_FROM_CHUNKS, LEGACY_SHADOWS, LEGACY_TABLES, SCHEMA
from charlie.retrieval.search import Searcher
from charlie.users import ensure_user, set_password

HOUSE_NOTES = {
    "Kitchen plan": "Oak worktops, white cabinets and a tiled floor.",
    "Garden": "Plant tomatoes in May; water the roses every evening.",
    "Hall": "Reclaimed oak boards for the hall floor.",
}
DAMAGE = ["zeroed pages", "garbage", "truncated"]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    model = LocalEmbedder()
    model.load()
    return model


@pytest.fixture
def house(home: Home) -> Home:
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    made = projects.create_project(home, "House")
    for title, body in HOUSE_NOTES.items():
        notes.create_note(made, title, body)
    return home


def damage(path: Path, how: str) -> None:
    """Damage a database file the way a bad disk or a stray write would, with nobody using
    it: every page after the first zeroed, the whole file garbage, or cut short."""
    with closing(sqlite3.connect(path)) as db:  # fold the log in: the damage is what is read
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = db.execute("PRAGMA page_size").fetchone()[0]
    size = path.stat().st_size
    assert size > 4 * page  # there is something to damage
    with open(path, "r+b") as handle:  # in place: the same file, as a disk would leave it
        if how == "zeroed pages":
            handle.seek(page)
            handle.write(bytes(size - page))
        elif how == "garbage":
            handle.write(b"this is not a database, whatever it once was " * (size // 46))
        else:
            handle.truncate(page + page // 2)


def zero_pages(db_path: Path, tables: list[str]) -> int:
    """Zero the pages of `tables` (and their indexes) inside a database; how many."""
    with closing(sqlite3.connect(db_path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = db.execute("PRAGMA page_size").fetchone()[0]
        owned = db.execute(
            f"SELECT dbstat.pageno FROM dbstat JOIN sqlite_master ON sqlite_master.name = "
            f"dbstat.name WHERE sqlite_master.tbl_name IN ({', '.join('?' for _ in tables)})",
            tables,
        ).fetchall()
    with open(db_path, "r+b") as handle:
        for (number,) in owned:
            handle.seek((number - 1) * page)
            handle.write(bytes(page))
    return len(owned)


def oak_titles(answer: Any) -> set[str]:
    assert answer.status_code == 200, answer.text
    return {r["title"] for r in answer.json()["results"]}


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_index_heals_through_the_server(house: Home, how: str) -> None:
    with live_server() as url, closing(signed_in_client(url, "alice")) as client:
        assert oak_titles(client.get("/api/search", params={"q": "oak"})) >= {"Kitchen plan"}
    damage(house.index_path, how)

    with live_server() as url, closing(signed_in_client(url, "alice")) as client:
        health = client.get("/api/health")
        assert health.status_code == 200, health.text
        assert health.json()["index"]["state"] == "damaged"
        assert "charlie reindex" in health.json()["index"]["error"]

        found = oak_titles(client.get("/api/search", params={"q": "oak floor", "limit": 5}))
        assert {"Kitchen plan", "Hall"} <= found

        healed = client.get("/api/health").json()["index"]
        assert healed["state"] == "ready" and healed["notes"] == len(HOUSE_NOTES)
        assert "damaged" in healed["rebuilt"]


@pytest.mark.parametrize("how", DAMAGE)
def test_reindex_works_on_a_damaged_index(house: Home, charlie: Any, how: str) -> None:
    assert charlie("reindex").exit_code == 0
    house.close()  # nothing has the file open, as when Charlie is stopped
    damage(house.settings.db_path.with_name("index.db"), how)
    result = charlie("reindex")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "Indexed 3 notes (3 chunks) and 0 messages with all-MiniLM-L6-v2"
    )
    result = charlie("search", "tomatoes")
    assert result.exit_code == 0 and "Garden" in result.stdout


def test_a_chat_that_searches_a_damaged_index_stores_its_reply(
    house: Home, llm: ScriptedLLMServer
) -> None:
    with live_server() as url, closing(signed_in_client(url, "alice")) as client:
        assert client.get("/api/search", params={"q": "oak"}).status_code == 200
    damage(house.index_path, "zeroed pages")

    llm.tool_calls([("search_notes", {"query": "oak floor"})])
    llm.reply("The hall has reclaimed oak boards.")
    with live_server() as url, closing(signed_in_client(url, "alice")) as client:
        answer = client.post(
            "/api/channels/house/chat", json={"text": "What did we decide about the oak floor?"}
        )
        found = events(answer)
        kinds = [kind for kind, _ in found]
        assert "reply" in kinds and kinds[-1] == "done" and "error" not in kinds, found
        search = next(d for k, d in found if k == "trace" and d.get("name") == "search_notes")
        assert search["ok"], json.dumps(search)
        assert "house/hall" in {hit["key"] for hit in search["hits"]}
        stored = client.get("/api/channels/house/messages").json()
        assert [m["role"] for m in stored] == ["user", "assistant"]
        assert stored[1]["content"] == "The hall has reclaimed oak boards."


def test_a_process_that_finds_a_newer_file_reopens_it_and_deletes_nothing(
    house: Home, embedder: LocalEmbedder
) -> None:
    """Two processes (two `shared` caches) have the index open when it is damaged: the
    first replaces the file; the second must use the new one, never delete it again."""
    Index(house, embedder).refresh()
    house.close()
    second = Home.open(load_settings(), shared=Shared())
    late = Index(second, embedder)  # has the file open, vectors not yet read
    damage(second.index_path, "zeroed pages")
    first = Home.open(load_settings(), shared=Shared())
    try:
        Index(first, embedder).refresh()  # finds the damage, replaces the file, refills it
        new_file = os.stat(first.index_path).st_ino
        alice = ensure_user(first.db, "alice")
        hits = Searcher(second, late).search("oak floor", alice, mode="vector").hits
        assert {"Kitchen plan", "Hall"} <= {hit.title for hit in hits}
        assert os.stat(first.index_path).st_ino == new_file  # the second only reopened
        assert Searcher(first, Index(first, embedder)).search("tomatoes", alice).hits
    finally:
        first.close()
        second.close()


# ---------------------------------------------------------------- an older Charlie's index


def leave_legacy_index(home: Home, version: str = "2") -> None:
    """Move the index into charlie.db, as Charlie kept it before it had a file of its own."""
    home.close()
    index_path = home.index_path
    with closing(sqlite3.connect(home.settings.db_path, isolation_level=None)) as db:
        run_script(db, SCHEMA)
        db.execute("ATTACH DATABASE ? AS new", (str(index_path),))
        for table in ("index_state", "notes", "chunks"):
            db.execute(f"INSERT INTO main.{table} SELECT * FROM new.{table}")
        db.execute(FTS_FROM_CHUNKS)
        db.execute("UPDATE main.index_state SET value = ? WHERE key = 'version'", (version,))
        db.execute("DETACH DATABASE new")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index_path}{suffix}").unlink(missing_ok=True)


class Counting:
    """The real model, counting the texts it embeds."""

    def __init__(self, model: LocalEmbedder) -> None:
        self.model, self.name, self.dim, self.texts = model, model.name, model.dim, 0

    def embed(self, texts: list[str]) -> Any:
        self.texts += len(texts)
        return self.model.embed(texts)


def legacy_tables(db: sqlite3.Connection) -> list[str]:
    return [
        row[0]
        for row in db.execute(
            "SELECT name FROM sqlite_master WHERE tbl_name IN ('notes', 'chunks', 'chunks_fts', "
            "'index_state', 'note_problems', 'chunks_vocab') OR tbl_name LIKE 'chunks_fts%'"
        )
    ]


@pytest.mark.parametrize("version", ["1", "2"])
def test_an_older_index_in_charlie_db_moves_to_its_own_file_without_embedding_again(
    house: Home, embedder: LocalEmbedder, version: str
) -> None:
    Index(house, embedder).refresh()
    leave_legacy_index(house, version)
    with Home.open(load_settings()) as home:
        counting = Counting(embedder)
        index = Index(home, counting)  # type: ignore[arg-type]
        assert index.refresh().changed is False
        assert counting.texts == 0  # the vectors came along
        assert legacy_tables(home.db) == []
        alice = ensure_user(home.db, "alice")
        hits = Searcher(home, index).search("tomatoes", alice, mode="keyword").hits
        assert [hit.title for hit in hits] == ["Garden"]


def test_a_damaged_older_index_in_charlie_db_is_removed_and_built_again(
    house: Home, embedder: LocalEmbedder, charlie: Any
) -> None:
    Index(house, embedder).refresh()
    leave_legacy_index(house)
    db_path = house.settings.db_path
    assert zero_pages(db_path, [*LEGACY_TABLES, *LEGACY_SHADOWS]) > 5
    with Home.open(load_settings()) as home:
        with pytest.raises(sqlite3.DatabaseError):  # what `charlie reindex` used to hit
            home.db.execute("DROP TABLE chunks_fts")
        index = Index(home, embedder)
        assert len(index.refresh().added) == len(HOUSE_NOTES)  # built again from the files
        assert legacy_tables(home.db) == []
        assert "damaged" in str(
            index.db.execute("SELECT value FROM index_state WHERE key = 'rebuilt'").fetchone()[0]
        )
        assert ensure_user(home.db, "alice").name == "alice"  # the rest of charlie.db is fine
    result = charlie("reindex")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Indexed 3 notes")
    with closing(sqlite3.connect(db_path)) as db:  # and it opens in a new process too
        assert legacy_tables(db) == []
        assert db.execute("SELECT name FROM users").fetchall() == [("alice",)]


def test_damage_found_in_the_middle_of_a_search_is_rebuilt_and_answered(
    house: Home, embedder: LocalEmbedder
) -> None:
    garden = projects.get_project(house, "house")
    for n in range(12):  # enough chunks that the vectors span pages the open did not read
        notes.create_note(garden, f"Shed {n}", f"Shelf {n} of the shed holds tools and seeds.")
    index = Index(house, embedder)  # opened and probed: sound
    index.refresh()
    house.shared.clear()  # no vectors cached: the search must read them
    index = Index(house, embedder)
    damage(house.index_path, "zeroed pages")  # under the open connection
    alice = ensure_user(house.db, "alice")
    hits = Searcher(house, index).search("oak floor", alice, mode="vector").hits
    assert {"Kitchen plan", "Hall"} <= {hit.title for hit in hits}
    assert index.stats()["notes"] == len(HOUSE_NOTES) + 12
    rebuilt = index.db.execute("SELECT value FROM index_state WHERE key = 'rebuilt'").fetchone()
    assert "the index was damaged" in rebuilt[0]


def test_processes_healing_one_damaged_index_at_once_all_answer(
    house: Home, embedder: LocalEmbedder
) -> None:
    """Real processes (as the web server, the Discord bot and the CLI would be), started
    together on a damaged index: each answers, and one sound index is left."""
    Index(house, embedder).refresh()
    house.close()
    damage(house.index_path, "zeroed pages")
    command = [sys.executable, "-m", "charlie", "search", "--json", "oak floor"]
    children = [
        subprocess.Popen(command, env=dict(os.environ), stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    answers = [child.communicate(timeout=120)[0] for child in children]
    assert [child.returncode for child in children] == [0] * 4
    for answer in answers:
        titles = {hit["title"] for hit in json.loads(answer)["results"]}
        assert {"Kitchen plan", "Hall"} <= titles
    with Home.open(load_settings()) as home:
        index = Index(home, embedder)
        assert index.stats()["notes"] == len(HOUSE_NOTES)
        assert not index.refresh().changed
        rows = index.db.execute("SELECT name FROM notes ORDER BY name").fetchall()
        assert [row[0] for row in rows] == ["garden", "hall", "kitchen-plan"]


class Held:
    """The real embedder, stopping before it embeds a text holding `word` until released:
    a rebuild by another process caught half-way, for as long as a test needs."""

    def __init__(self, model: LocalEmbedder, word: str) -> None:
        self.model, self.word = model, word
        self.reached, self.release = threading.Event(), threading.Event()

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def dim(self) -> int:
        return self.model.dim

    def embed(self, texts: Any) -> Any:
        if any(self.word in text for text in texts):
            self.reached.set()
            assert self.release.wait(120)
        return self.model.embed(texts)


def test_while_another_process_rebuilds_the_index_searches_and_health_say_incomplete(
    house: Home, embedder: LocalEmbedder
) -> None:
    workshop = projects.create_project(house, "Workshop")  # indexed after "house"
    notes.create_note(workshop, "Trunk", "The winter coats are in the blue trunk.")
    with live_server() as url, closing(signed_in_client(url, "alice")) as client:
        first = client.get("/api/search", params={"q": "winter coats"})
        assert first.json()["incomplete"] is None
        assert "Trunk" in oak_titles(first)
        assert client.get("/api/health").json()["index"]["state"] == "ready"

        held = Held(embedder, "winter coats")

        def rebuild() -> None:  # as `charlie reindex` in another process would
            with Home.open(load_settings()) as other:
                Index(other, held).rebuild()

        rebuilding = threading.Thread(target=rebuild)
        rebuilding.start()
        try:
            assert held.reached.wait(120)  # a new file, with the house project in so far
            during = client.get("/api/search", params={"q": "oak floor"})
            assert {"Kitchen plan", "Hall"} <= oak_titles(during)
            said = during.json()["incomplete"]
            assert said is not None and "being rebuilt" in said and "incomplete" in said
            health = client.get("/api/health").json()["index"]
            assert health["state"] == "rebuilding" and health["incomplete"] == said
            chat_tool = client.get("/api/search", params={"q": "winter coats"})
            assert "Trunk" not in {r["title"] for r in chat_tool.json()["results"]}
        finally:
            held.release.set()
            rebuilding.join(120)
        after = client.get("/api/search", params={"q": "winter coats"})
        assert "Trunk" in oak_titles(after) and after.json()["incomplete"] is None
        healed = client.get("/api/health").json()["index"]
        assert healed["state"] == "ready" and healed["incomplete"] is None


def test_a_fill_cut_short_stays_incomplete_until_every_project_is_in(
    house: Home, embedder: LocalEmbedder
) -> None:
    index = Index(house, embedder)
    index.refresh([projects.get_project(house, "house")])  # one project: not yet whole
    assert index.incomplete() is not None and "being built" in (index.incomplete() or "")
    house.close()
    with Home.open(load_settings()) as again:  # a process killed mid-fill left it so
        index = Index(again, embedder)
        assert index.incomplete() is not None
        index.refresh()
        assert index.incomplete() is None


def test_the_index_lives_in_charlie_local_dir_when_set(
    house: Home, embedder: LocalEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine's own place for the search index (several machines on one data home): the
    index is built there, in a folder only its owner reads, and none beside charlie.db."""
    monkeypatch.setenv("CHARLIE_LOCAL_DIR", str(tmp_path / "local" / "charlie-index"))
    with Home.open(load_settings()) as home:
        index = Index(home, embedder)
        index.refresh()
        alice = ensure_user(home.db, "alice")
        hits = Searcher(home, index).search("tomatoes", alice, mode="keyword").hits
        assert [hit.title for hit in hits] == ["Garden"]
        assert home.index_path == tmp_path / "local" / "charlie-index" / "index.db"
    assert home.index_path.is_file() and not (house.settings.home / "index.db").exists()
    assert home.index_path.parent.stat().st_mode & 0o077 == 0


def test_a_local_dir_that_cannot_hold_the_index_is_said_plainly(
    house: Home, embedder: LocalEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = tmp_path / "a-file"
    taken.write_text("not a folder")
    monkeypatch.setenv("CHARLIE_LOCAL_DIR", str(taken))
    with Home.open(load_settings()) as home, pytest.raises(DatabaseNotWritable) as raised:
        Index(home, embedder).refresh()
    assert str(raised.value).startswith(f"The search index cannot be kept in {taken} (")
    assert "Set CHARLIE_LOCAL_DIR to a folder this account may write" in str(raised.value)
    assert taken.read_text() == "not a folder"
