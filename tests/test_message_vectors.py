"""The message vectors kept in a file beside the index: a new process maps them instead of
reading every blob out of SQLite, tops them up with what came after, and never reads back
a vector from a file that no longer matches the index (a forgotten message, a file cut
short, another index). Real SQLite files, the packaged model."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import sqlite3
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.history import say

from charlie import conversations
from charlie.conversations import Channel, shared_channel
from charlie.home import Home
from charlie.projects import create_project
from charlie.retrieval import array_file, message_vectors
from charlie.retrieval.index import Index, embedder_of
from charlie.retrieval.message_index import MessageIndex, index_all
from charlie.retrieval.message_vectors import (
    ConversationVectors,
    LoadedVectors,
    file_path,
    picture,
    read_file,
    write_file,
)
from charlie.retrieval.vectors import VectorTable
from charlie.users import User, ensure_user

LINES = [
    "Should we repaint the hull before the season?",
    "Yes, the blue antifouling paint from the chandlery.",
    "The mooring fee went up to 900 a year.",
    "The winch needs new grease before the race.",
    "Bring the spare jib to the club on Saturday.",
]


@pytest.fixture
def boat(home: Home, monkeypatch: pytest.MonkeyPatch) -> tuple[Home, User, Channel]:
    monkeypatch.setattr(message_vectors, "FILE_MIN", 3)  # a file for a handful of messages
    alice = ensure_user(home.db, "alice")
    channel = shared_channel(home, create_project(home, "boat"))
    for n, line in enumerate(LINES):
        say(home, channel, "alice", line, f"2023-05-0{n + 1}T10:00Z")
    return home, alice, channel


def index_of(home: Home) -> MessageIndex:
    index = MessageIndex(Index(home, embedder_of(home)))
    index.refresh()
    return index


def with_file(home: Home) -> tuple[MessageIndex, Path]:
    """The home's message index, every message indexed, and the file it keeps beside it."""
    index = index_of(home)
    assert index.keep_file()
    return index, file_path(home.index_path)


def another_process(home: Home) -> MessageIndex:
    """The index as a new process sees it: nothing loaded, nothing shared but the model."""
    other = Home.open(home.settings)
    return MessageIndex(Index(other, embedder_of(home)))


def by_id(loaded: LoadedVectors) -> dict[int, np.ndarray]:
    return {
        int(i): table.matrix[row]
        for table in loaded.conversations.values()
        for row, i in enumerate(table.view()[0])
    }


def blank_the_index_copies(home: Home) -> None:
    with sqlite3.connect(home.index_path) as db:
        db.execute("UPDATE messages SET vector = zeroblob(length(vector))")


def test_a_new_process_maps_the_vectors_from_the_file_not_the_index(boat) -> None:
    home, _, _ = boat
    index, path = with_file(home)
    embedded = by_id(index.vectors())
    assert path.stat().st_mode & 0o777 == 0o600  # private messages' vectors are in it
    blank_the_index_copies(home)  # from now on only the file holds the real vectors
    loaded = another_process(home).vectors()
    assert by_id(loaded).keys() == embedded.keys()
    for message_id, vector in by_id(loaded).items():
        np.testing.assert_array_equal(vector, embedded[message_id])
        assert np.linalg.norm(vector) > 0.99


def test_messages_indexed_after_the_file_are_read_from_the_index(boat) -> None:
    home, alice, channel = boat
    index, _ = with_file(home)
    added = conversations.add_message(home, channel, "user", "The tiller is cracked.", user=alice)
    index.refresh()
    loaded = another_process(home).vectors()
    vectors = by_id(loaded)
    assert len(vectors) == len(LINES) + 1
    assert np.linalg.norm(vectors[added.id]) > 0.99


def test_forgetting_a_message_deletes_the_file_and_an_older_copy_is_never_read(boat) -> None:
    home, _, _ = boat
    index, path = with_file(home)
    older = path.read_bytes()
    forgotten = min(by_id(index.vectors()))
    index.forget([forgotten])
    assert not path.exists()
    path.write_bytes(older)  # a copy written before the forgetting, put back
    loaded = another_process(home).vectors()
    assert forgotten not in by_id(loaded)
    assert len(by_id(loaded)) == len(LINES) - 1
    assert not path.exists()  # it no longer matched the index: deleted


@pytest.mark.parametrize("damage", ["cut short", "not ours", "empty"])
def test_a_damaged_file_is_not_read_and_the_vectors_come_from_the_index(boat, damage: str) -> None:
    home, _, _ = boat
    index, path = with_file(home)
    embedded = by_id(index.vectors())
    data = path.read_bytes()
    path.write_bytes(
        {"cut short": data[: len(data) // 2], "not ours": b"x" * 4096, "empty": b""}[damage]
    )
    vectors = by_id(another_process(home).vectors())
    assert vectors.keys() == embedded.keys()
    for message_id, vector in vectors.items():
        np.testing.assert_array_equal(vector, embedded[message_id])
    assert index.keep_file()  # and the next indexer writes it again


def test_a_file_made_for_another_index_is_not_read(boat) -> None:
    home, _, _ = boat
    index, path = with_file(home)
    kept = path.read_bytes()
    index.rebuild()  # the index emptied and filled again: a new generation
    assert not path.exists()
    path.write_bytes(kept)
    blank_the_index_copies(home)
    vectors = by_id(another_process(home).vectors())
    assert all(np.linalg.norm(v) == 0 for v in vectors.values())  # the index's, not the file's
    assert not path.exists()


def test_a_full_disk_leaves_no_file_and_says_so_in_the_log(
    boat, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    home, _, _ = boat
    index = index_of(home)

    def full(path: Path, *args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(array_file, "write", full)
    with caplog.at_level(logging.WARNING):
        assert not index.keep_file()
    assert "could not be kept" in caplog.text and "No space left" in caplog.text
    assert not file_path(home.index_path).exists()
    assert len(by_id(another_process(home).vectors())) == len(LINES)


def test_the_indexer_keeps_the_file_once_it_has_caught_up(boat) -> None:
    home, _, _ = boat
    index = MessageIndex(Index(home, embedder_of(home)))
    index.index_words()
    assert not file_path(home.index_path).exists()
    index_all(index)
    found = read_file(file_path(home.index_path))
    assert found is not None and found[0].count == len(LINES)


def tabled_conversation(
    count: int, rng: np.random.Generator
) -> tuple[ConversationVectors, np.ndarray]:
    """A conversation of `count` random unit vectors, all of them in a two-stage table."""
    rows = rng.standard_normal((count, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    table = ConversationVectors(384)
    table.append(list(range(1, count + 1)), [float(n) for n in range(count)], rows)
    table.table, table.tabled = VectorTable(rows, exact_below=1_000), count
    return table, rows


def test_a_large_conversations_first_stage_comes_back_unchanged(tmp_path: Path) -> None:
    """Over 20,000 rows: the table read back searches with the codes it reads."""
    rng = np.random.default_rng(3)
    table, rows = tabled_conversation(20_500, rng)
    loaded = LoadedVectors("g1", upto=20_500, conversations={7: table})
    path = tmp_path / "index.db-vectors"
    assert write_file(path, picture(loaded, "model", 384))
    found = read_file(path)
    assert found is not None
    kept, back = found
    assert (kept.generation, kept.model, kept.dim, kept.upto, kept.count) == (
        "g1",
        "model",
        384,
        20_500,
        20_500,
    )
    again = back.conversations[7]
    assert again.tabled == 20_500 and again.table is not None
    assert again.table.reduced is not None and table.table.reduced is not None
    np.testing.assert_array_equal(again.table.reduced.codes, table.table.reduced.codes)
    for query in rows[:20] + 0.1 * rng.standard_normal((20, 384)).astype(np.float32):
        query /= np.linalg.norm(query)
        found, expected = again.top(query, 10), table.top(query, 10)
        assert list(found) == list(expected)  # the same rows, best first
        # BLAS may round a mapped file's rows other than the same rows in memory (alignment)
        assert list(found.values()) == pytest.approx(list(expected.values()), abs=1e-6)


def test_a_forgetting_while_the_file_is_written_leaves_no_file(
    boat, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, _, _ = boat
    index = index_of(home)
    forgotten = min(by_id(index.vectors()))
    write = array_file.write

    def forgetting_meanwhile(path: Path, *args: Any) -> None:
        index.forget([forgotten])  # another request, while this file is being written
        write(path, *args)

    monkeypatch.setattr(array_file, "write", forgetting_meanwhile)
    assert not index.keep_file()
    assert not file_path(home.index_path).exists()


def test_a_nearly_full_disk_is_left_its_room(
    boat, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    home, _, _ = boat
    index = index_of(home)
    room = shutil.disk_usage(home.index_path.parent)._replace(free=message_vectors.KEEP_FREE)
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: room)
    with caplog.at_level(logging.WARNING):
        assert not index.keep_file()
    assert "were not kept" in caplog.text and "MiB free" in caplog.text
    assert not file_path(home.index_path).exists()


def test_a_killed_writers_temp_file_is_removed_by_the_next_write(boat) -> None:
    home, _, _ = boat
    index = index_of(home)
    old, fresh = leftovers(home)
    an_hour_ago = time.time() - message_vectors.LEFTOVER_AGE - 60
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert index.keep_file()
    assert not old.exists()
    assert fresh.exists()  # a writer at work now: not touched


def test_forgetting_deletes_every_temp_file_of_the_vectors_whatever_its_age(boat) -> None:
    """A writer killed part-way leaves a temp file that may hold the message's vector."""
    home, _, _ = boat
    index = index_of(home)
    planted = leftovers(home)
    index.forget([min(by_id(index.vectors()))])
    assert not any(path.exists() for path in planted)


def leftovers(home: Home) -> tuple[Path, Path]:
    folder = home.index_path.parent
    found = folder / ".index.db-vectors.dead.tmp", folder / ".index.db-vectors.live.tmp"
    for leftover in found:
        leftover.write_bytes(b"\0" * 1024)
    return found


def spoiled(kind: str, meta: dict[str, Any], arrays: list[tuple[str, Any]]) -> None:
    """Change a good file's parts the way a hostile or damaged file would differ."""
    first = meta["conversations"][0][0]
    named = dict(arrays)
    if kind == "vectors of the wrong shape":
        named[f"{first}.vectors"] = named[f"{first}.vectors"][:, :10].copy()
    elif kind == "fewer ids than rows":
        named[f"{first}.ids"] = named[f"{first}.ids"][:-1]
    elif kind == "more rows than counted":
        meta["conversations"][0][1] -= 1
        meta["count"] -= 1
    elif kind == "a first stage longer than the rows":
        meta["conversations"][0][2] = meta["conversations"][0][1] + 5
    elif kind == "a conversation listed twice":
        meta["conversations"].append(meta["conversations"][0])
    elif kind == "a count that is not a whole number":
        meta["conversations"][0][1] = 1e400
    elif kind == "ids of another kind":
        named[f"{first}.ids"] = named[f"{first}.ids"].astype(np.float64)
    arrays[:] = list(named.items())


SPOILS = [
    "vectors of the wrong shape",
    "fewer ids than rows",
    "more rows than counted",
    "a first stage longer than the rows",
    "a conversation listed twice",
    "a count that is not a whole number",
    "ids of another kind",
]


@pytest.mark.parametrize("kind", SPOILS)
def test_a_file_that_does_not_hold_what_it_says_is_not_read(boat, kind: str) -> None:
    home, _, _ = boat
    index = index_of(home)
    embedded = by_id(index.vectors())
    meta, arrays = picture(index.vectors(), index.embedder.name, index.embedder.dim)
    meta = json.loads(json.dumps(meta))
    spoiled(kind, meta, arrays)
    array_file.write(file_path(home.index_path), meta, arrays)
    other = another_process(home)
    vectors = by_id(other.vectors())
    assert vectors.keys() == embedded.keys()
    for message_id, vector in vectors.items():
        np.testing.assert_array_equal(vector, embedded[message_id])


@pytest.mark.parametrize(
    "header",
    [
        {"meta": {}, "arrays": [{"name": "a", "dtype": "<f4", "shape": [2**70], "at": 0}]},
        {"meta": {}, "arrays": [{"name": "a", "dtype": "<f4", "shape": [4], "at": -64}]},
        {"meta": {}, "arrays": [{"name": "a", "dtype": "|O", "shape": [1], "at": 0}]},
        {"meta": [], "arrays": []},
        [1, 2, 3],
    ],
)
def test_a_hostile_header_is_no_file(tmp_path: Path, header: object) -> None:
    path = tmp_path / "index.db-vectors"
    text = json.dumps(header).encode()
    path.write_bytes(array_file.MAGIC + struct.pack("<Q", len(text)) + text + b"\0" * 4096)
    assert array_file.read(path) is None


def test_a_fifo_or_a_folder_in_the_files_place_changes_nothing(boat) -> None:
    """Neither hangs a reader nor keeps a forgetting from reaching the index."""
    home, _, _ = boat
    index = index_of(home)
    path = file_path(home.index_path)
    os.mkfifo(path)
    assert len(by_id(another_process(home).vectors())) == len(LINES)  # did not wait on it
    path.unlink()
    path.mkdir()
    forgotten = min(by_id(index.vectors()))
    index.forget([forgotten])
    assert forgotten not in by_id(another_process(home).vectors())
    (vectors,) = index.db.execute("SELECT count(*) FROM messages WHERE id = ?", (forgotten,))
    assert tuple(vectors) == (0,)


@pytest.mark.parametrize("basis", ["a single number", "no dimensions", "more than the vectors"])
def test_a_first_stage_of_no_sensible_size_is_not_read(tmp_path: Path, basis: str) -> None:
    table, _ = tabled_conversation(1_500, np.random.default_rng(5))
    meta, arrays = picture(LoadedVectors("g1", upto=1_500, conversations={7: table}), "m", 384)
    named = dict(arrays)
    dims = {"a single number": None, "no dimensions": 0, "more than the vectors": 400}[basis]
    if dims is None:
        named["7.basis"] = np.float32(1.0).reshape(())
    else:
        named["7.basis"] = np.zeros((384, dims), dtype=np.float32)
        named["7.codes"] = np.zeros((1_500, dims), dtype=np.uint8)
        named["7.scales"] = np.ones(dims, dtype=np.float32)
    path = tmp_path / "index.db-vectors"
    array_file.write(path, meta, list(named.items()))
    assert read_file(path) is None
