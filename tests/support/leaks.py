"""Looking for a text everywhere a data home keeps it: every column of every table of its
SQLite files (found by reading `sqlite_master`, so a table added later is read too), the
terms of their full-text indexes, and the raw bytes of every file under the home — the
databases with their -wal and -shm, memory.md, notes, logs, whatever is there."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path


def places_holding(home_dir: Path, text: str) -> list[str]:
    """Where under `home_dir` `text` is kept (case folded), as "file x", "charlie.db:
    table.column" or "index.db: fts5 terms of messages_fts"; [] when nowhere."""
    needle = text.lower()
    found = [
        f"{path.name}: {where}" for path in _databases(home_dir) for where in _in(path, needle)
    ]
    url = os.environ.get("CHARLIE_DATABASE_URL")
    if url:  # the rows charlie.db would hold are in PostgreSQL: every column of every table
        found += [f"charlie.db: {where}" for where in _in_postgres(url, needle)]
    for path in sorted(home_dir.rglob("*")):  # read after: opening a database makes no file
        if path.is_file() and needle.encode() in path.read_bytes().lower():
            found.append(f"file {path.relative_to(home_dir)}")
    return found


def _databases(home_dir: Path) -> list[Path]:
    return [p for p in sorted(home_dir.rglob("*")) if p.is_file() and p.read_bytes()[:16] == HEADER]


HEADER = b"SQLite format 3\x00"


def _in(path: Path, needle: str) -> list[str]:
    found: list[str] = []
    with closing(sqlite3.connect(path)) as db:
        tables = db.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ).fetchall()
        for name, sql in tables:
            cursor = db.execute(f'SELECT * FROM "{name}"')
            columns = [d[0] for d in cursor.description]
            for row in cursor:
                for column, value in zip(columns, row, strict=True):
                    if _holds(value, needle):
                        found.append(f"{name}.{column}")
            if "fts5(" in (sql or "").lower().replace(" ", ""):  # its terms, as FTS5 keeps them
                db.execute(
                    f"CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, '{name}', 'row')"
                )
                if db.execute(
                    "SELECT 1 FROM temp.terms WHERE instr(term, ?) > 0 LIMIT 1", (needle,)
                ).fetchone():
                    found.append(f"fts5 terms of {name}")
                db.execute("DROP TABLE temp.terms")
    return sorted(set(found))


def _in_postgres(url: str, needle: str) -> list[str]:
    import psycopg

    found: list[str] = []
    with psycopg.connect(url) as db:
        tables = db.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() ORDER BY table_name"
        ).fetchall()
        for (name,) in tables:
            cursor = db.execute(f'SELECT * FROM "{name}"')
            columns = [d.name for d in cursor.description or ()]
            for row in cursor:
                for column, value in zip(columns, row, strict=True):
                    if _holds(value, needle):
                        found.append(f"{name}.{column}")
    return sorted(set(found))


def _holds(value: object, needle: str) -> bool:
    if isinstance(value, str):
        return needle in value.lower()
    if isinstance(value, bytes):
        return needle.encode() in value.lower()
    return False


def secure_delete(db: sqlite3.Connection) -> bool:
    """Whether the connection zeroes what it deletes (freed pages keep nothing)."""
    return int(db.execute("PRAGMA secure_delete").fetchone()[0]) == 1
