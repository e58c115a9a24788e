"""PostgreSQL as the store of `charlie.db`'s rows (`CHARLIE_DATABASE_URL`), behind the
connection the rest of Charlie uses (`charlie.store.Connection`).

Charlie's statements are written for SQLite; the few places where the two dialects part
are bridged here, statement by statement (`translate`, cached): `?` and `:name` parameters
become psycopg's, `INSERT OR IGNORE` an `ON CONFLICT DO NOTHING`, `LIKE` (which SQLite
compares without case) `ILIKE`, and an insert into a table with an `id` returns it
(`lastrowid`). SQLite's functions Charlie calls that PostgreSQL lacks (`julianday`,
`instr`, `json_each`) are defined in the database by its first migration
(`charlie.store.postgres_schema`); `ifnull` is written `coalesce`.

`BEGIN IMMEDIATE` takes SQLite's one write lock of the database; here it is a transaction
holding one advisory lock (`WRITE_LOCK`), so writers that read before they write — claims,
the sign-in limiter, forgetting — take turns across every process and machine on the
database, as they do on one machine's file. A row is returned as SQLite's `Row` is read:
by position or by name, numbers as `int` or `float`.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import cast

import psycopg
from psycopg.rows import RowMaker

from charlie import db as database
from charlie.errors import DatabaseBusy, DatabaseError, UnstorableText
from charlie.store import Parameters, secrets_in, shown

WRITE_LOCK = 0x63686C  # the advisory lock every write transaction holds ("chl")
WRITES = frozenset({"INSERT", "UPDATE", "DELETE"})
CONNECT_TIMEOUT = 10  # seconds to wait for the server to answer


class Row(tuple[object, ...]):
    """A row read by position (`row[0]`) or by name (`row["id"]`), as `sqlite3.Row`;
    `dict(row)` gives its columns by name."""

    names: tuple[str, ...]

    def __new__(cls, names: tuple[str, ...], values: Sequence[object]) -> Row:
        row = super().__new__(cls, (_plain(v) for v in values))
        row.names = names
        return row

    def __getitem__(self, key: object) -> object:  # type: ignore[override]
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self.names.index(key))
            except ValueError:
                raise IndexError(f"No item with that key: {key!r}") from None
        return tuple.__getitem__(self, cast(int, key))

    def keys(self) -> list[str]:
        return list(self.names)


def _plain(value: object) -> object:
    """A value as SQLite gives it: a truth as 0 or 1, a numeric as int or float."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


# ------------------------------------------------------------------ the two dialects

TOKEN = re.compile(
    r"""'(?:[^']|'')*'        # a string
      | "(?:[^"]|"")*"        # a quoted name
      | --[^\n]*              # a comment
      | \?                    # a parameter
      | (?<!:):[A-Za-z_]\w*   # a named parameter
      | %                     # psycopg's parameter sign, to be doubled
      | [A-Za-z_]\w*          # a word
      | \s+ | .""",
    re.X | re.S,
)
INSERT = re.compile(r"^\s*INSERT\s+(OR\s+(IGNORE|REPLACE)\s+)?INTO\s+\"?(\w+)\"?", re.I)
INSERT_COLUMNS = re.compile(r"^\s*INSERT\s+INTO\s+\"?\w+\"?\s*\(([^)]*)\)", re.I)
RETURNING = re.compile(r"\bRETURNING\b", re.I)
# SQLite's `x IS ?` compares as `=` does but NULL with NULL too; `IN ()` holds nothing
IS_NOT_PARAMETER = re.compile(r"\bIS\s+NOT\s+%s", re.I)
IS_PARAMETER = re.compile(r"\bIS\s+%s", re.I)
NOT_IN_NOTHING = re.compile(r"\bNOT\s+IN\s*\(\s*\)", re.I)
IN_NOTHING = re.compile(r"\bIN\s*\(\s*\)", re.I)
WORDS = {"like": "ILIKE", "ifnull": "coalesce", "json_each": "charlie_json_each"}
SCALAR = {"max": "GREATEST", "min": "LEAST"}  # with two arguments or more


def _arguments(tokens: list[str], at: int) -> int:
    """How many arguments the call whose name ends before `tokens[at]` has (0: no call)."""
    while at < len(tokens) and tokens[at].isspace():
        at += 1
    if at >= len(tokens) or tokens[at] != "(":
        return 0
    depth, count = 0, 1
    for token in tokens[at:]:
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
            if depth == 0:
                return count
        elif token == "," and depth == 1:
            count += 1
    return count


@dataclass(frozen=True)
class Statement:
    """A statement in PostgreSQL's dialect, and what running it needs beside."""

    sql: str
    named: bool = False  # its parameters are `:name`s (a mapping), not `?`s
    table: str = ""  # the table an INSERT writes to
    returns_id: bool = False  # RETURNING id was added: the cursor's lastrowid
    sets_id: bool = False  # an INSERT that names the id: the table's counter follows it


@functools.lru_cache(maxsize=2048)
def translate(sql: str, tables_with_id: frozenset[str]) -> Statement:
    """`sql`, written for SQLite, in PostgreSQL's dialect (module doc)."""
    out: list[str] = []
    named = False
    tokens = TOKEN.findall(sql)
    for at, token in enumerate(tokens):
        lowered = token.lower()
        if token == "?":
            out.append("%s")
        elif token.startswith(":") and len(token) > 1:
            named = True
            out.append(f"%({token[1:]})s")
        elif token == "%":
            out.append("%%")
        elif token.startswith("'"):
            out.append(token.replace("%", "%%"))
        elif lowered in WORDS:
            out.append(WORDS[lowered])
        elif lowered in SCALAR and _arguments(tokens, at + 1) > 1:
            out.append(SCALAR[lowered])  # SQLite's max(a, b) is PostgreSQL's GREATEST(a, b)
        else:
            out.append(token)
    text = "".join(out)
    text = IS_NOT_PARAMETER.sub("IS DISTINCT FROM %s", text)
    text = IS_PARAMETER.sub("IS NOT DISTINCT FROM %s", text)
    text = NOT_IN_NOTHING.sub("<> ALL ('{}')", text)
    text = IN_NOTHING.sub("= ANY ('{}')", text)
    insert = INSERT.match(text)
    if insert is None:
        return Statement(text, named)
    table = insert.group(3).lower()
    how = (insert.group(2) or "").upper()
    text = INSERT.sub(f"INSERT INTO {insert.group(3)}", text, count=1)
    if how == "REPLACE":
        raise sqlite3.NotSupportedError(f"INSERT OR REPLACE is not translated: {sql[:80]}")
    returning = RETURNING.search(text)
    head, tail = (text[: returning.start()], text[returning.start() :]) if returning else (text, "")
    head = head.rstrip().rstrip(";")
    if how == "IGNORE":
        head += " ON CONFLICT DO NOTHING"
    returns_id = not tail and table in tables_with_id
    if returns_id:
        tail = "RETURNING id"
    columns = INSERT_COLUMNS.match(text)
    sets_id = columns is not None and "id" in {
        c.strip().strip('"') for c in columns.group(1).split(",")
    }
    return Statement(f"{head} {tail}".rstrip(), named, table, returns_id, sets_id)


# ------------------------------------------------------------------ errors


# psycopg's DB-API classes, by name, and sqlite3's of the same name
AS_SQLITE: dict[str, type[sqlite3.Error]] = {
    kind.__name__: kind
    for kind in (
        sqlite3.IntegrityError,
        sqlite3.OperationalError,
        sqlite3.ProgrammingError,
        sqlite3.DataError,
        sqlite3.NotSupportedError,
        sqlite3.InternalError,
    )
}


def _as_sqlite(exc: Exception, url: str) -> Exception:
    """A psycopg error as the DB-API class `sqlite3` names, so Charlie's `except`s serve both
    stores; a lost or refused connection as a `DatabaseError` that says what to do."""
    said = _scrubbed(str(exc).strip(), url)
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return DatabaseBusy(
            f"The PostgreSQL database {shown(url)} is busy: another Charlie process held its "
            f"write lock for over {database.BUSY_TIMEOUT:g} s. Try again in a moment; if it "
            "keeps happening, look for a process or a session stuck in a transaction."
        )
    if isinstance(exc, psycopg.OperationalError) and not isinstance(
        exc, psycopg.errors.QueryCanceled
    ):
        return DatabaseError(
            f"The PostgreSQL database {shown(url)} did not answer ({said}). "
            "Check that it is running and reachable, and that CHARLIE_DATABASE_URL is right."
        )
    for base in type(exc).__mro__:
        if base.__name__ in AS_SQLITE:
            return AS_SQLITE[base.__name__](said)
    return sqlite3.DatabaseError(said)


def _scrubbed(text: str, url: str) -> str:
    """An error's text with the URL's password, if it holds it, as ***."""
    for secret in sorted(secrets_in(url), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


# ------------------------------------------------------------------ the connection


class Cursor:
    """A statement's result, read like `sqlite3.Cursor`."""

    def __init__(
        self, cursor: psycopg.Cursor[Row] | None, lastrowid: int | None, rows: list[Row] | None
    ) -> None:
        self._cursor = cursor
        self.lastrowid = lastrowid
        self.rowcount = cursor.rowcount if cursor is not None else -1
        self._rows = rows

    def fetchone(self) -> Row | None:
        if self._rows is not None or self._cursor is None:
            return self._rows.pop(0) if self._rows else None
        return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self) -> list[Row]:
        if self._rows is not None or self._cursor is None:
            rows, self._rows = self._rows or [], []
            return rows
        return self._cursor.fetchall() if self._cursor.description else []

    def __iter__(self) -> Iterator[Row]:
        return iter(self.fetchall())


def _row_factory(cursor: psycopg.Cursor[Row]) -> RowMaker[Row]:
    names = tuple(c.name for c in cursor.description or ())
    return lambda values: Row(names, values)


_migrated: set[str] = set()  # the URLs this process has brought up to date
_migrating = threading.Lock()


class PostgresConnection:
    """One connection to the database, speaking as `sqlite3.Connection` does to Charlie."""

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self._conn = psycopg.connect(
                url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
                # a write waits for the lock as long as SQLite's does, then is told busy;
                # and every statement is planned for its values: psycopg prepares one run
                # five times, then PostgreSQL may keep a generic plan — a whole-table scan
                # for "this conversation's messages above id ?" (45 ms at 200,000 messages
                # instead of 0.05: recall's freshness check)
                options=(
                    f"-c lock_timeout={round(database.BUSY_TIMEOUT * 1000)} "
                    "-c plan_cache_mode=force_custom_plan"
                ),
                row_factory=_row_factory,
            )
        except psycopg.ProgrammingError as exc:  # the address itself could not be read
            raise DatabaseError(
                "CHARLIE_DATABASE_URL could not be read as a database address ("
                f"{_scrubbed(str(exc).strip(), url)}). Write it as postgresql://USER:PASSWORD@"
                "HOST:PORT/DATABASE, with any %, @, : or / in the password written as %25, "
                "%40, %3A or %2F."
            ) from None  # (psycopg's own error may quote the password)
        except psycopg.Error as exc:
            raise _as_sqlite(exc, url) from exc
        self._lock = threading.RLock()  # one statement at a time, as SQLite's connection
        self.tables_with_id: frozenset[str] = frozenset()
        self._opened_by = ""  # the savepoint that began the transaction (`_execute`)

    @property
    def in_transaction(self) -> bool:
        status = self._conn.info.transaction_status
        return bool(status != psycopg.pq.TransactionStatus.IDLE)

    def execute(self, sql: str, parameters: Parameters = (), /) -> Cursor:
        with self._lock:
            try:
                return self._execute(sql, parameters)
            except psycopg.Error as exc:
                raise _as_sqlite(exc, self.url) from exc

    def _execute(self, sql: str, parameters: Parameters) -> Cursor:
        word = sql.split(maxsplit=1)[0].upper() if sql.strip() else ""
        if word == "PRAGMA":
            return self._pragma(sql)
        if word == "SAVEPOINT" and not self.in_transaction:
            # SQLite's SAVEPOINT outside a transaction begins one, its RELEASE commits it
            self._execute("BEGIN IMMEDIATE", ())
            self._opened_by = sql.split()[1].lower()
        if word == "RELEASE" and sql.split()[-1].lower() == self._opened_by:
            self._opened_by = ""
            self._conn.execute(sql)
            self._conn.execute("COMMIT")
            return Cursor(None, None, [])
        if word == "BEGIN":
            self._conn.execute("BEGIN")
            if "IMMEDIATE" in sql.upper() or "EXCLUSIVE" in sql.upper():
                try:
                    self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                except psycopg.Error:  # as SQLite: a BEGIN that failed began nothing
                    self._conn.execute("ROLLBACK")
                    raise
            return Cursor(None, None, [])
        statement = translate(sql, self.tables_with_id)
        params = _parameters(parameters, statement.named, writing=word in WRITES)
        # As in SQLite, a write that fails inside a transaction undoes itself and the
        # transaction goes on (PostgreSQL would abort all of it): each runs in a savepoint.
        guarded = word in WRITES and self.in_transaction
        if guarded:
            self._conn.execute("SAVEPOINT charlie_statement")
        try:
            cursor = self._conn.execute(statement.sql, params)
        except psycopg.Error:
            if guarded:
                self._conn.execute("ROLLBACK TO SAVEPOINT charlie_statement")
            raise
        finally:
            if guarded:
                self._conn.execute("RELEASE SAVEPOINT charlie_statement")
        lastrowid = None
        rows: list[Row] | None = None
        if statement.returns_id:
            rows = cursor.fetchall() if cursor.description else []
            lastrowid = int(str(rows[0][0])) if rows else None
            rows = []
        if statement.sets_id and cursor.rowcount:
            self._follow_ids(statement.table)
        return Cursor(cursor, lastrowid, rows)

    def _follow_ids(self, table: str) -> None:
        """Move `table`'s id counter past the ids an insert gave explicitly (SQLite's rowid
        follows them by itself; an identity would give one of them again)."""
        self._conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
            f"GREATEST((SELECT max(id) FROM {table}), 1))"
        )

    def raw(self, sql: str) -> None:
        """Run `sql` as it is written, in PostgreSQL's dialect, with no parameters."""
        with self._lock:
            try:
                self._conn.execute(sql)
            except psycopg.Error as exc:
                raise _as_sqlite(exc, self.url) from exc

    def executemany(self, sql: str, seq_of_parameters: Iterable[Parameters], /) -> Cursor:
        with self._lock:
            statement = translate(sql, frozenset())
            try:
                with self._conn.cursor() as cursor:
                    cursor.executemany(
                        statement.sql, [_parameters(p, statement.named) for p in seq_of_parameters]
                    )
                    count = cursor.rowcount
                if statement.sets_id:
                    self._follow_ids(statement.table)
            except psycopg.Error as exc:
                raise _as_sqlite(exc, self.url) from exc
            done = Cursor(None, None, [])
            done.rowcount = count
            return done

    def _pragma(self, sql: str) -> Cursor:
        """The PRAGMAs Charlie reads, answered from PostgreSQL's catalogue; a checkpoint of
        SQLite's write-ahead log has nothing to do here (the server keeps its own)."""
        if re.fullmatch(r"\s*PRAGMA\s+wal_checkpoint(\(\w*\))?\s*;?\s*", sql, re.I):
            return Cursor(None, None, [])
        table = re.fullmatch(r"\s*PRAGMA\s+table_info\((\w+)\)\s*;?\s*", sql, re.I)
        if table is None:
            raise sqlite3.NotSupportedError(f"{sql.strip()} has no PostgreSQL counterpart")
        cursor = self._conn.execute(
            "SELECT ordinal_position - 1, column_name, data_type, "
            "CASE WHEN is_nullable = 'NO' THEN 1 ELSE 0 END, column_default, 0 "
            "FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s ORDER BY ordinal_position",
            (table.group(1).lower(),),
        )
        return Cursor(cursor, None, None)

    def close(self) -> None:
        self._conn.close()


def _parameters(parameters: Parameters | None, named: bool, writing: bool = True) -> Parameters:
    """The parameters as psycopg takes them. Text with a NUL character, which PostgreSQL
    cannot hold, is refused in a write (`UnstorableText`, said plainly); in a read it can
    match nothing stored, and is looked for as U+FFFD (so a name with one is no one)."""
    if parameters is None:
        return ()
    if named:
        if not isinstance(parameters, Mapping):
            raise sqlite3.ProgrammingError("named parameters need a mapping")
        values = _parameters(tuple(parameters.values()), False, writing)
        return dict(zip(parameters, values, strict=True))
    if isinstance(parameters, Mapping):
        raise sqlite3.ProgrammingError("a mapping given for ? parameters")
    values = tuple(parameters)
    if not any(isinstance(v, str) and "\x00" in v for v in values):
        return values
    if writing:
        raise UnstorableText(
            "This text holds a NUL character (\\x00), which PostgreSQL cannot store; nothing "
            "was saved. Take the character out (it is usually pasted binary) and try again."
        )
    return tuple(v.replace("\x00", "\ufffd") if isinstance(v, str) else v for v in values)


def connect(url: str) -> PostgresConnection:
    """Open a connection to the database at `url`, bringing its tables up to date the first
    time this process opens it (`charlie.store.postgres_schema.migrate`)."""
    from charlie.store import postgres_schema

    db = PostgresConnection(url)
    try:
        if url not in _migrated:
            with _migrating:
                if url not in _migrated:
                    postgres_schema.migrate(db)
                    _migrated.add(url)
        db.tables_with_id = postgres_schema.tables_with_id(db)
    except BaseException:
        db.close()
        raise
    return db
