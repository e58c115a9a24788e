"""`charlie backup`: a consistent, checked copy of the data home, even while Charlie writes."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

import pytest
from conftest import Cli

from charlie.config import load_settings
from charlie.conversations import add_message, shared_channel
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.memory import layers as memory
from charlie.notes import files as notes
from charlie.projects import create_project, get_project
from charlie.transfer import backup
from charlie.users import ensure_user


def _messages(path: Path) -> list[tuple[int, str]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [(int(r[0]), str(r[1])) for r in db.execute("SELECT id, content FROM messages")]
    finally:
        db.close()


def _integrity(path: Path) -> str:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        db.close()


def _fill_home(home: Home, messages: int = 5, size: int = 20) -> None:
    project = create_project(home, "Kitchen reno", slug="kitchen")
    channel = shared_channel(home, project)
    memory.ensure_file(home, channel)
    alice = ensure_user(home.db, "alice")
    for n in range(messages):
        add_message(home, channel, "user", f"message {n} " + "x" * size, user=alice)
    notes.create_note(project, "Tiles", "Blue ones, 20 cm.", ["kitchen"])
    notes.create_note(project, "Budget", "Under 5000.\n")


def test_backup_copies_messages_notes_and_memory_and_matches_its_manifest(
    home: Home, tmp_path: Path, charlie: Cli
) -> None:
    _fill_home(home)
    home.index_path.write_bytes(b"derived")  # stands in for the search index
    result = charlie("backup", str(tmp_path / "backups"))
    assert result.exit_code == 0, result.output
    [folder] = (tmp_path / "backups").iterdir()
    assert backup.NAME_RE.match(folder.name)
    assert result.stdout.startswith(f"Backed up to {folder}\n")
    assert "5 messages (database version " in result.stdout
    assert "projects: 4 files, " in result.stdout  # project.toml, memory.md, two notes

    copy = folder / "charlie.db"
    assert _integrity(copy) == "ok"
    assert _messages(copy) == _messages(home.settings.db_path)
    assert not (folder / "index.db").exists()
    assert not list(folder.glob("*.db-wal"))
    source = home.settings.projects_dir
    originals = sorted(p.relative_to(source) for p in source.rglob("*") if p.is_file())
    copied = folder / "projects"
    assert sorted(p.relative_to(copied) for p in copied.rglob("*") if p.is_file()) == originals
    for rel in originals:
        assert (copied / rel).read_bytes() == (source / rel).read_bytes()
    assert (copied / "kitchen" / "memory.md").is_file()

    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["messages"] == 5
    assert manifest["database_user_version"] == home.db.execute("PRAGMA user_version").fetchone()[0]
    assert manifest["charlie_version"]
    listed = {e["path"]: e for e in manifest["files"]}
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {
        "manifest.json"
    }
    assert set(listed) == on_disk
    for rel, entry in listed.items():
        data = (folder / rel).read_bytes()
        assert entry["size"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()


def test_backup_while_another_connection_keeps_writing(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill_home(home, messages=300, size=1000)  # ~100 pages: many steps of one page each
    monkeypatch.setattr(backup, "PAGES_PER_STEP", 1)
    started = threading.Event()
    failures: list[BaseException] = []

    def keep_writing() -> None:
        try:
            with Home.open(load_settings()) as writer:
                channel = shared_channel(writer, get_project(writer, "kitchen"))
                bob = ensure_user(writer.db, "bob")
                for n in range(200):
                    add_message(writer, channel, "user", f"live {n}", user=bob)
                    if n == 20:
                        started.set()
        except BaseException as exc:  # handed to the test thread to fail there
            failures.append(exc)
            started.set()

    thread = threading.Thread(target=keep_writing)
    thread.start()
    assert started.wait(10)
    committed = _messages(home.settings.db_path)
    result = backup.make_backup(home.settings, tmp_path / "backups")
    thread.join(30)
    assert not failures
    copy = result.path / "charlie.db"
    assert _integrity(copy) == "ok"
    in_copy = dict(_messages(copy))
    assert all(in_copy.get(i) == text for i, text in committed)
    assert result.messages == len(in_copy) >= len(committed)
    assert len(_messages(home.settings.db_path)) == 500  # the writer was never held up


def test_keep_leaves_the_newest_and_everything_else_alone(
    home: Home, tmp_path: Path, charlie: Cli
) -> None:
    _fill_home(home)
    target = tmp_path / "backups"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    (target / "charlie-backup-someday").mkdir()  # not a backup's name: left alone
    made = [backup.make_backup(home.settings, target).path for _ in range(2)]
    result = charlie("backup", str(target), "--keep", "2")
    assert result.exit_code == 0, result.output
    newest = Path(result.stdout.splitlines()[0].removeprefix("Backed up to "))
    assert f"Removed older backup {made[0].name}\n" in result.stdout
    assert backup.complete_backups(target) == [made[1], newest]
    assert sorted(p.name for p in target.iterdir()) == sorted(
        ["notes.txt", "charlie-backup-someday", made[1].name, newest.name]
    )
    assert (target / "notes.txt").read_text() == "mine"


def test_a_symlink_among_the_notes_is_skipped_and_named(
    home: Home, tmp_path: Path, charlie: Cli
) -> None:
    _fill_home(home)
    secret = tmp_path / "secret.md"
    secret.write_text("not Charlie's")
    link = home.settings.projects_dir / "kitchen" / "notes" / "linked.md"
    link.symlink_to(secret)
    result = charlie("backup", str(tmp_path / "backups"))
    assert result.exit_code == 0, result.output
    assert (
        "Skipped projects/kitchen/notes/linked.md (a symbolic link, not followed)\n"
        in result.stderr
    )
    [folder] = (tmp_path / "backups").iterdir()
    assert not (folder / "projects" / "kitchen" / "notes" / "linked.md").exists()
    assert (folder / "projects" / "kitchen" / "notes" / "tiles.md").is_file()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["skipped"] == [
        "projects/kitchen/notes/linked.md (a symbolic link, not followed)"
    ]


def test_a_failed_integrity_check_keeps_nothing(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill_home(home)
    real_connect = sqlite3.connect

    class Damaged:
        """A connection to the copy whose integrity check reports damage."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            self.db = real_connect(*args, **kwargs)  # type: ignore[arg-type]

        def execute(self, sql: str) -> object:
            if sql == "PRAGMA integrity_check":
                return iter([("*** in database main *** Page 3 is never used",)])
            return self.db.execute(sql)

        def close(self) -> None:
            self.db.close()

    def connect(target: object, *args: object, **kwargs: object) -> object:
        if str(target).endswith("charlie.db?mode=ro"):
            return Damaged(target, *args, **kwargs)
        return real_connect(target, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(backup.sqlite3, "connect", connect)
    target = tmp_path / "backups"
    with pytest.raises(CharlieError, match="failed its integrity check"):
        backup.make_backup(home.settings, target)
    assert list(target.iterdir()) == []


def test_a_folder_that_cannot_be_made_is_a_clear_error(
    home: Home, tmp_path: Path, charlie: Cli
) -> None:
    result = charlie("backup", str(tmp_path / "no" / "such" / "place"))
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"Error: Cannot write the backup in {tmp_path / 'no' / 'such' / 'place'} ("
    )


def test_the_settings_file_is_backed_up_and_the_backup_is_private(
    home: Home, tmp_path: Path, charlie: Cli
) -> None:
    _fill_home(home)
    toml = home.settings.home / "charlie.toml"
    toml.write_text('llm_model = "qwen2.5-7b"\nusage_weight = 0.5\n', "utf-8")
    result = charlie("backup", str(tmp_path / "backups"))
    assert result.exit_code == 0, result.output
    assert "  charlie.toml: copied (it may hold keys: keep the backup private)\n" in result.stdout
    assert "projects: 4 files, " in result.stdout  # the settings file is not a project's
    [folder] = (tmp_path / "backups").iterdir()
    assert (folder / "charlie.toml").read_bytes() == toml.read_bytes()
    assert folder.stat().st_mode & 0o077 == 0  # only its owner may read it
    manifest = json.loads((folder / "manifest.json").read_text())
    assert "charlie.toml" in {e["path"] for e in manifest["files"]}


def test_a_settings_file_that_is_a_link_is_skipped(
    home: Home, tmp_path: Path, charlie: Cli
) -> None:
    _fill_home(home)
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text("usage_weight = 0.5\n", "utf-8")
    (home.settings.home / "charlie.toml").symlink_to(elsewhere)
    result = charlie("backup", str(tmp_path / "backups"))
    assert result.exit_code == 0, result.output
    assert "Skipped charlie.toml (a symbolic link, not followed)\n" in result.stderr
    assert "charlie.toml: copied" not in result.stdout
    [folder] = (tmp_path / "backups").iterdir()
    assert not (folder / "charlie.toml").exists()


def test_without_a_settings_file_nothing_is_said_of_it(
    home: Home, tmp_path: Path, charlie: Cli
) -> None:
    _fill_home(home)
    result = charlie("backup", str(tmp_path / "backups"))
    assert result.exit_code == 0, result.output
    assert "charlie.toml" not in result.output
