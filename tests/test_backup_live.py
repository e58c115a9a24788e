"""`charlie backup` taken while a real `charlie serve` is busy: twenty people signed in and
chatting at once. The backup must open, pass SQLite's integrity check, and hold every
message committed before it began; the server must not lose or refuse a message meanwhile."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import live_server, signed_in_client
from llm_double import ScriptedLLMServer, TextReply
from web_support import PASSWORD

from charlie.home import Home
from charlie.projects import create_project
from charlie.transfer import backup
from charlie.users import ensure_user, hash_password

PEOPLE = 20
MOST_CHATS = 8  # each, so the test stays short even on a slow machine
BEFORE_BACKUP = 40  # chats stored before the backup starts
ROOT = Path(__file__).resolve().parent.parent
SETTINGS = "usage_weight = 0.4\nquotes_window = 6\n"


def answer(request: dict[str, Any]) -> TextReply:
    """A short streamed reply to a chat, its own to each message (one that only repeats an
    earlier reply is not an answer); a small valid memory to a distillation."""
    if "response_format" in request:
        memory = {"summary": "The household plans the kitchen.", "decisions": [], "quotes": []}
        return TextReply(json.dumps(memory))
    found = re.search(r"p(\d+) chat (\d+)", str(request["messages"][-1]["content"]))
    said = f"person {found[1]}, turn {found[2]}" if found else "?"
    return TextReply(f"Noted, I will keep that in mind for the kitchen ({said}).", 8)


@pytest.fixture
def household(home: Home, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch) -> Home:
    """Twenty people with passwords, one shared project, a settings file, and the scripted
    model (also serving embeddings, so no model is loaded)."""
    llm.default = answer
    monkeypatch.setenv("CHARLIE_EMBEDDINGS", "openai")
    monkeypatch.setenv("CHARLIE_EMBEDDINGS_MODEL", "test-model")
    (home.settings.home / "charlie.toml").write_text(SETTINGS, "utf-8")
    hashed = hash_password(PASSWORD)  # one slow hash is enough: they share the password
    for n in range(PEOPLE):
        ensure_user(home.db, f"p{n:02d}")
        home.db.execute("UPDATE users SET password_hash = ? WHERE name = ?", (hashed, f"p{n:02d}"))
    create_project(home, "Household")
    return home


def stored(db_path: Path) -> dict[int, str]:
    """Every committed message, by id (a reader of its own, as another process would be)."""
    with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
        return {int(r[0]): str(r[1]) for r in db.execute("SELECT id, content FROM messages")}


def test_a_backup_taken_during_twenty_chatting_people_holds_all_that_was_committed(
    household: Home, tmp_path: Path
) -> None:
    sent: list[str] = []  # texts of the chats the server accepted (200 and a whole stream)
    failures: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def person(n: int, url: str) -> None:
        try:
            with closing(signed_in_client(url, f"p{n:02d}", timeout=60)) as client:
                for turn in range(MOST_CHATS):
                    if stop.is_set():
                        return
                    where = "household" if turn % 2 == 0 else "private"
                    text = f"p{n:02d} chat {turn}: the tiles should be blue"
                    reply = client.post(f"/api/channels/{where}/chat", json={"text": text})
                    whole = reply.text.rstrip().endswith("event: done\ndata: {}")
                    if reply.status_code != 200 or "event: error" in reply.text or not whole:
                        raise AssertionError(f"{reply.status_code} {reply.text[-300:]}")
                    with lock:
                        sent.append(text)
        except (AssertionError, httpx.HTTPError) as exc:  # reported by the test thread
            with lock:
                failures.append(f"p{n:02d}: {exc}")

    began = time.monotonic()
    with live_server() as url:
        people = [threading.Thread(target=person, args=(n, url)) for n in range(PEOPLE)]
        for thread in people:
            thread.start()
        while len(sent) < BEFORE_BACKUP and not failures and time.monotonic() - began < 60:
            time.sleep(0.05)
        assert not failures, failures
        committed = stored(household.settings.db_path)
        during = len(sent)
        made = run_backup(household, tmp_path / "backups")
        after_backup = len(sent)
        time.sleep(0.5)  # people keep chatting past the backup
        stop.set()
        for thread in people:
            thread.join(60)
    assert not failures, failures
    assert made.returncode == 0, made.stderr
    assert after_backup > during  # the server kept answering while the backup ran

    [folder] = backup.complete_backups(tmp_path / "backups")
    copy = folder / "charlie.db"
    with closing(sqlite3.connect(f"file:{copy}?mode=ro", uri=True)) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        in_backup = {int(r[0]): str(r[1]) for r in db.execute("SELECT id, content FROM messages")}
    missing = {i: t for i, t in committed.items() if in_backup.get(i) != t}
    assert not missing, f"{len(missing)} committed messages are not in the backup"
    assert len(in_backup) >= len(committed) >= 2 * BEFORE_BACKUP  # question and reply each
    assert (folder / "charlie.toml").read_text("utf-8") == SETTINGS

    final = stored(household.settings.db_path)
    questions = [t for t in final.values() if " chat " in t]
    assert sorted(questions) == sorted(sent)  # every accepted chat stored, exactly once


def run_backup(home: Home, target: Path) -> subprocess.CompletedProcess[str]:
    """`charlie backup` in a process of its own, as a cron job would run it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARLIE_")}
    env |= {"CHARLIE_HOME": str(home.settings.home), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "charlie", "backup", str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
