"""A long history is indexed in the background: `charlie import` returns once every message
is stored and findable by its words; a detached indexer (or the server's) embeds the rest,
resumes after kill -9 where it stopped, never embeds a message twice, and recall meanwhile
says it is catching up. Real processes, real SQLite files, the packaged model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from web_support import PASSWORD

from charlie import conversations, projects, users
from charlie.config import load_settings
from charlie.conversations import private_channel, shared_channel
from charlie.home import Home
from charlie.retrieval import message_index
from charlie.retrieval.embeddings import LocalEmbedder
from charlie.retrieval.index import Index
from charlie.retrieval.message_index import MessageIndex, Progress, index_all
from charlie.retrieval.recall import recaller_for

TOPICS = [
    "boiler",
    "tiles",
    "garden",
    "invoice",
    "flight",
    "bread",
    "loft",
    "gutter",
    "piano",
    "bicycle",
]
NEEDLE = "zanzibarite"  # one message holds it; nothing else does


def history(path: Path, count: int, tag: str) -> Path:
    """`count` messages of a made-up history, one of them (the 700th, when there is one)
    holding the NEEDLE."""
    lines = []
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        text = f"{tag} note {i}: we talked about the {topic} again, and what it costs."
        if i == 700:
            text = f"The {NEEDLE} sample goes in the blue box on the top shelf."
        lines.append(
            {"id": f"{tag}{i}", "speaker": "Sam", "text": text, "time": _time(i)}
            | ({"role": "assistant"} if i % 2 else {})
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _time(i: int) -> str:
    return f"2023-{1 + i // 2000:02d}-{1 + (i // 80) % 28:02d}T{(i // 4) % 20:02d}:{i % 60:02d}Z"


def charlie_process(*args: str) -> subprocess.CompletedProcess[str]:
    """`charlie …` as its own process, as a person would run it in a shell."""
    done = subprocess.run(
        [sys.executable, "-m", "charlie", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def progress_now() -> Progress:
    with Home.open(load_settings()) as home:
        return MessageIndex(Index(home, LocalEmbedder())).progress()


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds:g} s for {what}"
        time.sleep(0.2)


def vector_ids() -> list[int]:
    with Home.open(load_settings()) as home:
        index = Index(home, LocalEmbedder())
        return [int(r[0]) for r in index.db.execute("SELECT id FROM messages ORDER BY id")]


def stored_ids() -> list[int]:
    with Home.open(load_settings()) as home:
        return [int(r[0]) for r in home.db.execute("SELECT id FROM messages ORDER BY id")]


class Recording:
    """The packaged model, noting every text it is asked to embed."""

    def __init__(self) -> None:
        self.model = LocalEmbedder()
        self.name, self.dim = self.model.name, self.model.dim
        self.texts: list[str] = []
        self.lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        with self.lock:
            self.texts += list(texts)
        return self.model.embed(texts)


def stored_history(home: Home, count: int, tag: str = "h") -> None:
    """`count` messages stored as an import stores them, findable by their words only."""
    channel = shared_channel(home, projects.create_project(home, f"history {tag}"))
    sam = users.ensure_user(home.db, "sam")
    for i in range(count):
        text = f"{tag} message {i} about the {TOPICS[i % len(TOPICS)]}."
        conversations.add_message(home, channel, "user", text, user=sam)
    MessageIndex(Index(home, LocalEmbedder())).index_words()


def test_an_import_returns_with_every_message_findable_and_the_rest_indexed_behind_it(
    charlie: Cli, tmp_path: Path
) -> None:
    assert charlie("projects", "create", "Kitchen").exit_code == 0
    began = time.monotonic()
    done = charlie_process(
        "import", "jsonl", str(history(tmp_path / "h.jsonl", 1500, "k")), "-p", "kitchen", "--json"
    )
    report = json.loads(done.stdout)
    assert report["added"] == 1500 and report["indexing"]["background"] is True
    assert "indexed for recall by meaning in the background" not in done.stderr  # --json: quiet
    found = charlie_process("recall", NEEDLE, "-p", "kitchen", "--json")
    hits = json.loads(found.stdout)["results"]
    assert hits and NEEDLE in hits[0]["text"]  # by its words, whatever the vectors' state
    wait_for(lambda: progress_now().done, 150, "the background indexer to finish")
    assert vector_ids() == stored_ids()
    assert time.monotonic() - began < 150
    status = json.loads(charlie_process("reindex", "--status", "--json").stdout)
    assert status["done"] and status["total"] == status["indexed"] == 1500


def test_indexing_killed_part_way_resumes_where_it_stopped_and_embeds_nothing_again(
    home: Home,
) -> None:
    stored_history(home, 2600)
    worker = subprocess.Popen(
        [sys.executable, "-m", "charlie", "reindex", "--catch-up"],
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: progress_now().indexed >= message_index.BATCH, 120, "a first batch")
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    before = vector_ids()
    assert message_index.BATCH <= len(before) < 2600, "killed after the end: make it longer"
    index = MessageIndex(Index(home, LocalEmbedder()))
    _, upto = index.marks()
    assert before == [i for i in stored_ids() if i <= upto]  # each batch whole, or not at all
    recording = Recording()
    resumed = MessageIndex(Index(home, recording))  # type: ignore[arg-type]
    assert index_all(resumed) == 2600 - len(before)
    again = {int(i) for i in before}
    texts = {
        int(r[0]): message_index.own_text(r[1], r[2])
        for r in home.db.execute("SELECT id, speaker, content FROM messages")
    }
    assert sorted(recording.texts) == sorted(t for i, t in texts.items() if i not in again)
    assert vector_ids() == stored_ids()


def test_status_says_waiting_for_the_indexer_as_soon_as_it_is_killed(
    home: Home, charlie: Cli
) -> None:
    """Its last report is seconds old, but its process is gone: no "about a minute left"
    for the minute after a kill -9, "waiting for the indexer" at once."""
    stored_history(home, 2600)
    worker = subprocess.Popen(
        [sys.executable, "-m", "charlie", "reindex", "--catch-up"],
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: progress_now().running and progress_now().indexed >= message_index.BATCH,
            120,
            "a first batch",
        )
        running = charlie("status").stdout.splitlines()[-1]
        assert "waiting for the indexer" not in running, running
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    progress = progress_now()
    assert not progress.done, "killed after the end: make it longer"
    assert charlie("status").stdout.splitlines()[-1] == (
        f"Messages: {progress.indexed:,} of 2,600 indexed for recall by meaning (indexing "
        f"history: {int(progress.share * 100)} % · waiting for the indexer (`charlie reindex "
        "--catch-up`))."
    )
    assert not progress.running and progress.seconds_left is None


def test_two_indexers_at_once_never_embed_the_same_message(home: Home) -> None:
    stored_history(home, 1600)
    recordings = [Recording(), Recording()]

    def indexer(recording: Recording) -> None:
        with Home.open(load_settings()) as own:  # a process of its own, as far as it knows
            MessageIndex(Index(own, recording)).refresh()  # type: ignore[arg-type]

    threads = [threading.Thread(target=indexer, args=(r,)) for r in recordings]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    first, second = (set(r.texts) for r in recordings)
    assert not first & second
    assert len(recordings[0].texts) + len(recordings[1].texts) == 1600
    assert vector_ids() == stored_ids()


def test_a_second_import_while_the_first_is_indexed_is_indexed_too(
    charlie: Cli, tmp_path: Path
) -> None:
    for name in ("Kitchen", "Garden"):
        assert charlie("projects", "create", name).exit_code == 0
    first = history(tmp_path / "a.jsonl", 1200, "a")
    second = history(tmp_path / "b.jsonl", 1200, "b")
    charlie_process("import", "jsonl", str(first), "-p", "kitchen")
    told = charlie_process("import", "jsonl", str(second), "-p", "garden")
    assert "indexed for recall by meaning in the background" in told.stderr
    assert "charlie reindex --status" in told.stderr
    wait_for(lambda: progress_now().done, 170, "both imports to be indexed")
    assert len(vector_ids()) == 2400 and vector_ids() == stored_ids()


def test_recall_while_indexing_finds_by_words_and_says_it_is_catching_up(home: Home) -> None:
    alice = users.ensure_user(home.db, "alice")
    channel = shared_channel(home, projects.create_project(home, "Loft"))
    for i in range(30):
        conversations.add_message(home, channel, "user", f"Loft note {i}.", user=alice)
    conversations.add_message(home, channel, "user", f"The {NEEDLE} is in the loft.", user=alice)
    recaller = recaller_for(home)
    recaller.index.index_words()
    with message_index.index_file.claim(home.index_path, "embedding", wait=True):
        result = recaller.recall(alice, [channel], NEEDLE)  # someone else is embedding
    assert NEEDLE in result.hits[0].message.content and result.hits[0].vector == 0.0
    assert result.incomplete is not None
    assert "still catching up" in result.incomplete
    assert "31 of 31 messages are found by their words only" in result.incomplete


def test_a_command_that_recalls_during_a_backlog_exits_cleanly_after_its_batch(
    home: Home,
) -> None:
    """`charlie recall` leaves the backlog to a thread of its own; exiting, the process waits
    for that thread's batch instead of aborting inside the model."""
    stored_history(home, 1400)
    args = ("recall", "the piano again", "-p", "history-h", "--user", "sam", "--json")
    for _ in range(3):  # the abort depends on timing: three exits, each must be clean
        done = charlie_process(*args)  # exit status 0, checked there
        assert "terminate called" not in done.stderr
        assert json.loads(done.stdout)["results"]
        words, vectors = MessageIndex(Index(home, LocalEmbedder())).marks()
        assert words == 1400 and (vectors % message_index.BATCH == 0 or vectors == 1400)


@pytest.fixture
def app_home(home: Home) -> Home:
    users.add_user(home.db, "alice", PASSWORD, is_admin=True)
    users.add_user(home.db, "bob", PASSWORD)
    return home


def test_the_app_is_told_how_far_only_of_what_its_person_may_read(
    app_home: Home, alice: Any, bob: Any
) -> None:
    bob_user = users.get_user(app_home.db, "bob")
    secret = private_channel(app_home, bob_user)
    for i in range(40):
        conversations.add_message(app_home, secret, "user", f"Bob's own note {i}.", user=bob_user)
    MessageIndex(Index(app_home, LocalEmbedder())).index_words()
    mine = bob.get("/api/health").json()["history"]
    assert (mine["total"], mine["indexed"], mine["done"]) == (40, 0, False)
    assert mine["line"].startswith("indexing history: 0 %")
    theirs = alice.get("/api/health").json()["history"]
    assert (theirs["total"], theirs["done"]) == (0, True)  # bob's private count stays his
