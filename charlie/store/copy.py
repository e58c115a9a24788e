"""Moving a household's rows between stores (`charlie store copy`): from a data home's
`charlie.db` into an empty PostgreSQL database, or back into an empty `charlie.db`.

Every row of every table is copied as it is — ids, password hashes, sessions, tokens and
private channels included, which an archive (`charlie export`) leaves out — in one write
transaction on the target, so a copy that fails leaves it as empty as it was. Then each
table is checked: the same number of rows, and the same digest of its rows (each row's
values hashed, the hashes sorted, so the two stores' orders of text need not agree).
Nothing in the source is changed; the files of the data home (memory, notes) are not
touched — they stay where they are, and `index.db` is derived data.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from charlie import db as database
from charlie.errors import CharlieError
from charlie.store import Connection

BATCH = 1000  # rows written at a time


@dataclass(frozen=True)
class Table:
    name: str
    rows: int
    digest: str


@dataclass
class Copied:
    """What a copy moved, table by table, and whether each checked out."""

    tables: list[Table] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # the source's tables Charlie no longer has

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


def _tables(db: Connection) -> list[str]:
    """The tables of `db`'s store, parents before the tables that refer to them."""
    names = [n for n in database.table_names(db) if n != "migrations"]
    referring = {n: {t for t, _ in database.references_to(db, n)} for n in names}
    parents = {n: {p for p in names if n in referring[p]} for n in names}
    ordered: list[str] = []
    while len(ordered) < len(names):
        ready = [n for n in names if n not in ordered and parents[n] <= set(ordered) | {n}]
        if not ready:
            raise CharlieError(f"The tables refer to each other in a circle: {names}")
        ordered += ready
    return ordered


def _columns(db: Connection, table: str) -> list[str]:
    return [str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")]


def _rows(db: Connection, table: str, columns: Sequence[str]) -> Iterable[tuple[object, ...]]:
    listed = ", ".join(f'"{c}"' for c in columns)
    for row in db.execute(f'SELECT {listed} FROM "{table}"'):
        yield tuple(row)


def _digest(rows: Iterable[tuple[object, ...]]) -> tuple[int, str]:
    """How many rows, and one digest of them whatever their order."""
    hashes = sorted(hashlib.sha256(repr(r).encode()).digest() for r in rows)
    whole = hashlib.sha256(b"".join(hashes)).hexdigest()
    return len(hashes), whole


def _write(target: Connection, table: str, insert: str, rows: list[tuple[object, ...]]) -> None:
    try:
        target.executemany(insert, rows)
    except (sqlite3.Error, CharlieError) as exc:
        nul = any(isinstance(v, str) and "\x00" in v for row in rows for v in row)
        raise CharlieError(
            f"A row of {table} could not be written to the target ({exc})"
            + ("; PostgreSQL cannot hold a NUL character, and one is in that text" if nul else "")
            + ". Nothing was copied."
        ) from exc


def copy_rows(source: Connection, target: Connection) -> Copied:
    """Copy every row of `source` into `target`, whose tables must be empty; then check
    each table's count and digest (`CharlieError` when one differs: nothing is kept)."""
    tables = _tables(target)  # both stores were brought up to this Charlie's schema
    filled = [t for t in tables if target.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone()]
    if filled:
        raise CharlieError(
            f"The target already holds rows ({', '.join(filled)}): a copy goes into an empty "
            "database only. Nothing was copied."
        )
    copied = Copied(left_out=sorted(set(_tables(source)) - set(tables)))
    with database.transaction(target):
        for table in tables:
            given = set(_columns(source, table))  # (the same schema: every column, mostly)
            columns = [c for c in _columns(target, table) if c in given]
            listed = ", ".join(f'"{c}"' for c in columns)
            insert = f'INSERT INTO "{table}" ({listed}) VALUES ({database.placeholders(columns)})'
            batch: list[tuple[object, ...]] = []
            for row in _rows(source, table, columns):
                batch.append(row)
                if len(batch) >= BATCH:
                    _write(target, table, insert, batch)
                    batch = []
            if batch:
                _write(target, table, insert, batch)
            rows, digest = _digest(_rows(source, table, columns))
            got_rows, got = _digest(_rows(target, table, columns))
            if (rows, digest) != (got_rows, got):
                raise CharlieError(
                    f"The copy of {table} does not match its source ({got_rows} rows of "
                    f"{rows}, digest {got[:12]} of {digest[:12]}); nothing was copied."
                )
            copied.tables.append(Table(table, rows, digest))
    return copied
