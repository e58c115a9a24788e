"""Where what `charlie.db` holds is kept: SQLite (the default, a file in the data home) or
PostgreSQL (`CHARLIE_DATABASE_URL=postgresql://…`, `charlie.store.postgres`).

The code that reads and writes the household's rows speaks to a `Connection`: the part of
Python's DB-API that Charlie uses, which `sqlite3.Connection` is and the PostgreSQL adapter
imitates — `?` and `:name` parameters, rows read by position or by name, `lastrowid`,
explicit `BEGIN IMMEDIATE … COMMIT` write transactions, and errors raised as the standard
classes `sqlite3` names (`sqlite3.IntegrityError`, `sqlite3.OperationalError`, …), so one
`except` serves both stores. The search index (`index.db`) and the markdown files stay
where they are whichever store is chosen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlsplit, urlunsplit

from charlie.config import POSTGRES_SCHEMES, Settings
from charlie.errors import DatabaseError

if TYPE_CHECKING:
    from charlie.store.postgres import PostgresConnection


class Cursor(Protocol):
    """What a statement gives back: its rows, and for a write, what it did."""

    @property
    def lastrowid(self) -> int | None: ...

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


Parameters = Sequence[Any] | Mapping[str, Any]


class Connection(Protocol):
    """An open connection to the store of `charlie.db`'s rows."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Parameters = ..., /) -> Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Parameters], /) -> Cursor: ...

    def close(self) -> None: ...


def is_postgres(url: str) -> bool:
    return url.startswith(POSTGRES_SCHEMES)  # (the setting's own check, `config`)


def described(settings: Settings) -> dict[str, str]:
    """Which store holds the rows ("SQLite" or "PostgreSQL") and where: the file, or the
    database's address without its password — for `charlie status` and `doctor`."""
    if not settings.database_url:
        return {"store": "SQLite", "where": str(settings.db_path)}
    return {"store": "PostgreSQL", "where": shown(settings.database_url)}


def connect(settings: Settings) -> Connection:
    """Open (creating and migrating if needed) the store the settings name."""
    from charlie import db as database

    if not settings.database_url:
        return database.connect(settings.db_path)
    return connect_postgres(settings.database_url)


def connect_postgres(url: str) -> PostgresConnection:
    """A connection to the PostgreSQL database at `url` (`charlie.store.postgres`), or a
    clear error where psycopg, the driver, is not installed."""
    try:
        from charlie.store import postgres
    except ImportError as exc:  # psycopg comes with charlie[postgres]
        raise DatabaseError(
            "A PostgreSQL database is named, but the PostgreSQL driver is not installed: pip "
            "install 'charlie[postgres]' (./scripts/run installs it when CHARLIE_DATABASE_URL "
            "is set), or unset CHARLIE_DATABASE_URL to keep the rows in SQLite."
        ) from exc
    return postgres.connect(url)


def shown(url: str) -> str:
    """A database URL without its password (`user:password@`, or `password=` in the query),
    to be shown or logged."""
    try:
        parts = urlsplit(url)
        query = re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2***", parts.query)
        netloc = parts.netloc
        if "@" in netloc and ":" in netloc.rsplit("@", 1)[0]:
            user = netloc.rsplit("@", 1)[0].split(":", 1)[0]
            netloc = f"{user}:***@{netloc.rsplit('@', 1)[1]}"
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    except ValueError:  # not even a URL: nothing of it is shown
        return "(the URL in CHARLIE_DATABASE_URL)"


def secrets_in(url: str) -> list[str]:
    """The password in a database URL, as written and decoded, to be scrubbed from errors."""
    found = re.findall(r"^[^:/]+://[^:/@]*:([^@]*)@", url) + re.findall(
        r"(?i)[?&]password=([^&]*)", url
    )
    return [s for p in found if p for s in {p, unquote(p)} if s]
