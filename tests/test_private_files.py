"""The databases hold people's messages, private channels included: only their owner may
read them, whatever the umask of the process that made them."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from charlie import db
from charlie.config import load_settings
from charlie.home import Home
from charlie.retrieval.index_file import open_index_file
from charlie.transfer import backup

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0o022)  # what most systems give: new files readable by everyone
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("open_umask")
@pytest.mark.sqlite_only
def test_a_new_homes_databases_and_their_wal_files_are_the_owners_alone(tmp_path: Path) -> None:
    home = Home.open(load_settings(home=tmp_path / "home"))
    home.db.execute("INSERT INTO users (name, created_at) VALUES ('ana', '2026-01-01')")
    index = open_index_file(home.index_path)
    index.execute("INSERT INTO index_state (key, value) VALUES ('probe', 'x')")
    made = [home.settings.db_path, home.index_path]
    made += [Path(f"{path}{tail}") for path in made for tail in ("-wal", "-shm")]
    assert all(path.exists() for path in made)
    assert {path.name: mode(path) for path in made} == {path.name: 0o600 for path in made}
    index.close()
    home.close()


@pytest.mark.usefixtures("open_umask")
def test_a_database_an_earlier_version_left_readable_is_narrowed_on_open(tmp_path: Path) -> None:
    path = tmp_path / "charlie.db"
    with sqlite3.connect(path) as old:
        old.execute("PRAGMA journal_mode = WAL")
        old.execute("CREATE TABLE t (x)")
        assert mode(path) == 0o644
        db.connect(path).close()
        assert mode(path) == 0o600
        assert mode(Path(f"{path}-wal")) == 0o600  # open beside it: narrowed too


@pytest.mark.usefixtures("open_umask")
@pytest.mark.sqlite_only
def test_a_backups_copy_of_the_database_is_the_owners_alone(tmp_path: Path) -> None:
    home = Home.open(load_settings(home=tmp_path / "home"))
    made = backup.make_backup(home.settings, tmp_path / "backups")
    assert mode(made.path / backup.DATABASE) == 0o600
    home.close()


@pytest.mark.usefixtures("open_umask")
def test_only_regular_files_are_narrowed_never_widened_and_links_are_followed(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "charlie.db"
    folder.mkdir(mode=0o755)
    db.keep_private(folder)
    assert mode(folder) == 0o755  # not a database: left alone (SQLite says what it is)
    read_only = tmp_path / "read-only.db"
    sqlite3.connect(read_only).close()
    read_only.chmod(0o444)
    db.keep_private(read_only)
    assert mode(read_only) == 0o400  # narrowed, still read-only
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "linked.db"
    link.symlink_to(elsewhere / "real.db")  # dangling: SQLite makes the file it points at
    opened = db.connect(link)  # the -wal and -shm are made beside the file, not the link
    opened.execute("CREATE TABLE t (x)")
    made = [elsewhere / name for name in ("real.db", "real.db-wal", "real.db-shm")]
    assert [mode(p) for p in made] == [0o600] * 3
    opened.close()
