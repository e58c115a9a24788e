"""SQLite failures told apart: a full disk, an I/O error, a file Charlie may not write and a
busy database say so and leave the file alone; only a damaged file is called damaged, and
then the person is told to keep it, because private channels live only there."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from charlie import db
from charlie.config import load_settings
from charlie.errors import (
    DatabaseBusy,
    DatabaseDamaged,
    DatabaseNotWritable,
    DiskError,
    DiskFull,
)
from charlie.home import Home


def fill(conn: sqlite3.Connection) -> None:
    """Make the next page SQLite asks for be refused, as a full disk refuses it."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    conn.execute("CREATE TABLE IF NOT EXISTS ballast (data BLOB)")
    conn.execute("INSERT INTO ballast VALUES (zeroblob(1000000))")


def assert_leaves_the_file_alone(message: str) -> None:
    assert "aside" not in message and "damaged" not in message and "delete" not in message


def test_a_full_disk_mid_request_says_so(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    conn = db.connect(path)
    with pytest.raises(DiskFull) as caught, db.storage_errors(path):
        fill(conn)
    message = str(caught.value)
    assert message.startswith(f"The disk holding {path} is full: free some space and try again.")
    assert "Nothing already saved was lost." in message
    assert_leaves_the_file_alone(message)


def test_a_full_disk_while_opening_says_so_and_loses_nothing(
    charlie_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings()
    with Home.open(settings) as home:
        home.db.execute("INSERT INTO users (name, created_at) VALUES ('alice', ?)", (db.now(),))

    def m999_big(conn: sqlite3.Connection) -> None:
        fill(conn)

    monkeypatch.setattr(db, "MIGRATIONS", [*db.MIGRATIONS, m999_big])
    with pytest.raises(DiskFull) as caught:
        Home.open(settings)
    assert_leaves_the_file_alone(str(caught.value))

    monkeypatch.undo()  # space is freed (here: the migration that needed it is gone)
    monkeypatch.setenv("CHARLIE_HOME", str(charlie_home))
    with Home.open(settings) as home:
        assert [r[0] for r in home.db.execute("SELECT name FROM users")] == ["alice"]


def test_a_read_only_database_says_what_to_make_writable(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    db.connect(path).close()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(DatabaseNotWritable) as caught, db.storage_errors(path):
        conn.execute("INSERT INTO projects (slug, created_at) VALUES ('x', 'y')")
    assert "Make the file and its folder writable" in str(caught.value)
    assert_leaves_the_file_alone(str(caught.value))


def test_a_busy_database_says_another_process_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    writer = db.connect(path)
    writer.execute("BEGIN IMMEDIATE")
    impatient = sqlite3.connect(path, timeout=0, isolation_level=None)
    with pytest.raises(DatabaseBusy) as caught, db.storage_errors(path):
        impatient.execute("BEGIN IMMEDIATE")
    assert "another Charlie process" in str(caught.value)
    assert_leaves_the_file_alone(str(caught.value))
    writer.execute("ROLLBACK")


def test_a_disk_io_error_is_not_called_damage(tmp_path: Path) -> None:
    # No portable way to make a disk fail: an error as SQLite reports a failed read.
    failed = sqlite3.OperationalError("disk I/O error")
    failed.sqlite_errorcode = 266  # type: ignore[attr-defined]  # SQLITE_IOERR_READ
    explained = db.explain(failed, tmp_path / "charlie.db")
    assert isinstance(explained, DiskError)
    assert "connected and healthy" in str(explained)
    assert_leaves_the_file_alone(str(explained))


def test_a_file_that_is_not_a_database_is_kept_and_private_channels_named(
    charlie_home: Path,
) -> None:
    settings = load_settings()
    settings.db_path.parent.mkdir(parents=True)
    junk = b"These are not the pages you are looking for. " * 200
    settings.db_path.write_bytes(junk)
    with pytest.raises(DatabaseDamaged) as caught:
        Home.open(settings)
    message = str(caught.value)
    assert f"The database {settings.db_path} is damaged" in message
    assert "private channels live only in this file" in message
    assert "keep a copy of it and do not delete it" in message
    assert settings.db_path.read_bytes() == junk


def test_a_malformed_page_mid_request_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    conn = db.connect(path)
    conn.executemany(
        "INSERT INTO projects (slug, created_at) VALUES (?, ?)",
        [(f"project-{i}-{'x' * 200}", db.now()) for i in range(200)],
    )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    root = (
        sqlite3.connect(path)
        .execute("SELECT rootpage FROM sqlite_master WHERE name = 'projects'")
        .fetchone()[0]
    )
    size = 4096
    with path.open("r+b") as file:
        file.seek((root - 1) * size)
        file.write(b"\xff" * size)
    conn = db.connect(path)
    damaged = pytest.raises(DatabaseDamaged, match="private channels live only in this file")
    with damaged, db.storage_errors(path):
        conn.execute("SELECT * FROM projects").fetchall()


def test_other_sqlite_errors_pass_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    conn = db.connect(path)
    conn.execute("INSERT INTO projects (slug, created_at) VALUES ('kitchen', 'now')")
    with pytest.raises(sqlite3.IntegrityError), db.storage_errors(path):
        conn.execute("INSERT INTO projects (slug, created_at) VALUES ('kitchen', 'now')")


@pytest.mark.parametrize(("free", "told"), [(0, DiskFull), (10 << 30, DiskError)])
def test_an_io_error_on_a_full_disk_is_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free: int, told: type[Exception]
) -> None:
    """SQLite reports a full disk as SQLITE_IOERR_SHMSIZE when it cannot grow its -shm file
    (a new connection on a full disk): with no room left, that is a full disk."""
    exc = sqlite3.OperationalError("disk I/O error")
    exc.sqlite_errorcode = 4874  # type: ignore[attr-defined]  # SQLITE_IOERR_SHMSIZE
    usage = shutil.disk_usage(tmp_path)._replace(free=free)
    monkeypatch.setattr(db.shutil, "disk_usage", lambda path: usage)
    assert type(db.explain(exc, tmp_path / "charlie.db")) is told
