"""The SQLite database: connection settings and ordered migrations.

Migrations are plain functions named `mNNN_…`, applied in order and recorded in the
`migrations` table, their count kept in `PRAGMA user_version`. Add a new one at the end;
never edit one that has shipped.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from charlie import files
from charlie.config import INDEX_FILE
from charlie.errors import (
    CharlieError,
    DatabaseBusy,
    DatabaseDamaged,
    DatabaseError,
    DatabaseNotWritable,
    DiskError,
    DiskFull,
)

if TYPE_CHECKING:
    from charlie.store import Connection

log = logging.getLogger(__name__)
Held = TypeVar("Held", bound="Connection")  # the connection a transaction is held on

BUSY_TIMEOUT = 10.0  # seconds a connection waits for another process's write lock
# SQLite's primary result codes (the low byte of an extended code).
FULL = {13}  # SQLITE_FULL: "database or disk is full"
IO = {10}  # SQLITE_IOERR
NOT_WRITABLE = {3, 8, 14}  # SQLITE_PERM, SQLITE_READONLY, SQLITE_CANTOPEN
BUSY = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
DAMAGED = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
NEARLY_FULL_BYTES = 1 << 20  # an I/O error with less room than this is a full disk


def now() -> str:
    """The current time as an ISO-8601 UTC string, the format every table uses."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@contextmanager
def transaction(db: Held) -> Iterator[Held]:
    """A write transaction: committed when the block ends, rolled back if it raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        if db.in_transaction:  # SQLite may have rolled back already (a full disk, damage)
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def placeholders(values: Sequence[object]) -> str:
    """One `?` a value, for `IN (…)`: "?, ?, ?" (an empty list gives "", and `IN ()` holds
    nothing)."""
    return ", ".join("?" for _ in values)


def run_script(db: sqlite3.Connection, script: str) -> None:
    """Run SQL statements one by one, inside the caller's transaction.

    (`executescript` would commit first, breaking a migration's all-or-nothing.)
    """
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"incomplete SQL statement: {statement.strip()[:80]}")


def m001_initial(db: sqlite3.Connection) -> None:
    run_script(
        db,
        """
        CREATE TABLE users (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE COLLATE NOCASE,
            is_admin INTEGER NOT NULL DEFAULT 0,
            password_hash TEXT,
            created_at TEXT NOT NULL
        );
        CREATE TABLE projects (
            id INTEGER PRIMARY KEY,
            slug TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL
        );
        -- A conversation is either a shared project's (project_id set, owner_id NULL)
        -- or one person's private channel (owner_id set, project_id NULL).
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            project_id INTEGER REFERENCES projects(id),
            owner_id INTEGER REFERENCES users(id),
            private INTEGER NOT NULL,
            distilled_upto INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            CHECK ((private = 0 AND project_id IS NOT NULL AND owner_id IS NULL)
                OR (private = 1 AND owner_id IS NOT NULL AND project_id IS NULL))
        );
        CREATE UNIQUE INDEX conversations_project ON conversations(project_id)
            WHERE private = 0;
        CREATE UNIQUE INDEX conversations_owner ON conversations(owner_id) WHERE private = 1;
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id),
            project_id INTEGER REFERENCES projects(id),
            private INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            user_id INTEGER REFERENCES users(id),
            speaker TEXT NOT NULL,
            content TEXT NOT NULL,
            images TEXT NOT NULL DEFAULT '[]',
            created_at TEXT NOT NULL
        );
        CREATE INDEX messages_conversation ON messages(conversation_id, id);
        CREATE TABLE memory_revisions (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id),
            owner_id INTEGER REFERENCES users(id),
            source TEXT NOT NULL,
            layers TEXT NOT NULL,
            file_sha256 TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX memory_revisions_conversation ON memory_revisions(conversation_id, id);
        CREATE TABLE distillations (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id),
            owner_id INTEGER REFERENCES users(id),
            status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
            first_message_id INTEGER NOT NULL,
            last_message_id INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            structured INTEGER NOT NULL,
            rejected_quotes TEXT NOT NULL DEFAULT '[]',
            error TEXT,
            revision_id INTEGER REFERENCES memory_revisions(id),
            started_at TEXT NOT NULL,
            finished_at TEXT NOT NULL
        );
        """,
    )


def m002_usage(db: sqlite3.Connection) -> None:
    """Usage events, the input of the usage model (`charlie.retrieval.usage`).

    A note is named by its stable key "project-slug/note-name", never by an index row id:
    the search index is derived data that gets rebuilt. Tags are lower-case, without '#'.
    """
    run_script(
        db,
        """
        CREATE TABLE usage_events (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id),
            kind TEXT NOT NULL
                CHECK (kind IN ('view', 'tag', 'shown', 'accepted', 'dismissed', 'cited')),
            note TEXT,
            tag TEXT,
            private INTEGER NOT NULL DEFAULT 0 CHECK (private IN (0, 1)),
            at TEXT NOT NULL,
            CHECK (kind = 'tag' OR (note IS NOT NULL AND tag IS NULL)),
            CHECK (kind <> 'tag' OR tag IS NOT NULL)
        );
        -- Covering indexes: the model's two GROUP BY queries read only these.
        CREATE INDEX usage_events_note ON usage_events(user_id, note, kind, at);
        CREATE INDEX usage_events_tag ON usage_events(user_id, tag, at);
        """,
    )


def m003_traces_and_suggestions(db: sqlite3.Connection) -> None:
    """Tool traces stored with replies; suggested notes and the notes pinned into context."""
    run_script(
        db,
        """
        ALTER TABLE messages ADD COLUMN trace TEXT;
        CREATE TABLE suggestions (
            id INTEGER PRIMARY KEY,
            message_id INTEGER NOT NULL REFERENCES messages(id),
            conversation_id INTEGER NOT NULL REFERENCES conversations(id),
            user_id INTEGER NOT NULL REFERENCES users(id),
            note TEXT NOT NULL,
            title TEXT NOT NULL,
            why TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'shown'
                CHECK (status IN ('shown', 'accepted', 'dismissed')),
            created_at TEXT NOT NULL,
            decided_at TEXT
        );
        CREATE INDEX suggestions_user ON suggestions(user_id, note);
        CREATE TABLE pins (
            conversation_id INTEGER NOT NULL REFERENCES conversations(id),
            note TEXT NOT NULL,
            user_id INTEGER NOT NULL REFERENCES users(id),
            pinned_at TEXT NOT NULL,
            PRIMARY KEY (conversation_id, note)
        );
        """,
    )


def m004_sessions(db: sqlite3.Connection) -> None:
    """Signed-in sessions of the web app, and failed sign-ins for rate limiting."""
    run_script(
        db,
        """
        CREATE TABLE sessions (
            token_hash TEXT PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id),
            csrf TEXT NOT NULL,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL
        );
        CREATE TABLE login_failures (
            id INTEGER PRIMARY KEY,
            key TEXT NOT NULL,
            at TEXT NOT NULL
        );
        CREATE INDEX login_failures_key ON login_failures(key, at);
        """,
    )


def m005_distill_claim(db: sqlite3.Connection) -> None:
    """One distillation at a time per conversation, even across processes."""
    run_script(
        db,
        """
        ALTER TABLE conversations ADD COLUMN distill_claim TEXT;
        ALTER TABLE conversations ADD COLUMN distill_claimed_at TEXT;
        """,
    )


def m006_discord(db: sqlite3.Connection) -> None:
    """The Discord bot's links and bindings (`charlie.household.discord_links`,
    `charlie.adapters.discord`).

    Discord ids are snowflakes kept as text. A link code is stored as its sha256 only.
    """
    run_script(
        db,
        """
        CREATE TABLE discord_links (
            discord_id TEXT PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id),
            linked_at TEXT NOT NULL
        );
        CREATE INDEX discord_links_user ON discord_links(user_id);
        CREATE TABLE discord_link_codes (
            code_hash TEXT PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id),
            expires_at TEXT NOT NULL
        );
        -- A server channel or thread bound to a shared project (never a DM: a DM is always
        -- its person's private channel).
        CREATE TABLE discord_bindings (
            channel_id TEXT PRIMARY KEY,
            guild_id TEXT NOT NULL,
            project_slug TEXT NOT NULL,
            bound_by INTEGER REFERENCES users(id),
            bound_at TEXT NOT NULL
        );
        -- The bot's message offering a suggested note, so a reaction can answer it.
        CREATE TABLE discord_suggestion_messages (
            message_id TEXT PRIMARY KEY,
            suggestion_id INTEGER NOT NULL REFERENCES suggestions(id),
            decided TEXT CHECK (decided IN ('accepted', 'dismissed'))
        );
        """,
    )


def m007_incomplete_replies(db: sqlite3.Connection) -> None:
    """A reply the model's server cut off mid-stream is kept, marked incomplete, and is never
    distilled (`chat.turn`)."""
    run_script(db, "ALTER TABLE messages ADD COLUMN incomplete INTEGER NOT NULL DEFAULT 0;")


def m008_imported_messages(db: sqlite3.Connection) -> None:
    """Messages brought in from elsewhere (`charlie import jsonl`): `source_id` is the id they
    had there (unique per conversation, so importing a file again adds nothing), `distill`
    says whether they are folded into memory (imported history is not, unless asked). The
    time index serves recall's date filters and the chat's recent context in time order."""
    run_script(
        db,
        """
        ALTER TABLE messages ADD COLUMN source_id TEXT;
        ALTER TABLE messages ADD COLUMN distill INTEGER NOT NULL DEFAULT 1;
        CREATE UNIQUE INDEX messages_source ON messages(conversation_id, source_id)
            WHERE source_id IS NOT NULL;
        CREATE INDEX messages_time ON messages(conversation_id, created_at, id);
        """,
    )


def m009_api_tokens(db: sqlite3.Connection) -> None:
    """Personal bearer tokens other apps use to act as a person (`charlie.household.tokens`), each
    stored as the sha256 of its secret; a revoked one is kept, marked, so its owner can
    see when it stopped working."""
    run_script(
        db,
        """
        CREATE TABLE api_tokens (
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id),
            label TEXT NOT NULL DEFAULT '',
            hash TEXT NOT NULL UNIQUE,
            read_only INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            last_used_at TEXT,
            revoked_at TEXT
        );
        CREATE INDEX api_tokens_user ON api_tokens(user_id);
        """,
    )


def m010_threads_and_branches(db: sqlite3.Connection) -> None:
    """Threads: a project (and each private channel) holds many conversations. The first one
    of each keeps what it had (its memory revisions and distillation claim stay keyed to it);
    the others are listed by `updated_at`, titled, archived or put in the trash (`deleted_at`,
    undoable). An imported conversation keeps the id it had where it came from (`source_id`),
    so importing it again finds it.

    Branches: each message names the one it follows (`parent_id`); a regenerated reply or an
    edited message is a sibling of the one it replaces, and the messages off the branch the
    person kept are `hidden` (kept, shown as alternatives, never distilled)."""
    run_script(
        db,
        """
        ALTER TABLE conversations ADD COLUMN title TEXT;
        ALTER TABLE conversations ADD COLUMN title_set INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE conversations ADD COLUMN updated_at TEXT;
        ALTER TABLE conversations ADD COLUMN archived_at TEXT;
        ALTER TABLE conversations ADD COLUMN deleted_at TEXT;
        ALTER TABLE conversations ADD COLUMN source_id TEXT;
        DROP INDEX conversations_project;
        DROP INDEX conversations_owner;
        CREATE INDEX conversations_project ON conversations(project_id, id) WHERE private = 0;
        CREATE INDEX conversations_owner ON conversations(owner_id, id) WHERE private = 1;
        CREATE UNIQUE INDEX conversations_source
            ON conversations(ifnull(project_id, 0), ifnull(owner_id, 0), source_id)
            WHERE source_id IS NOT NULL;
        UPDATE conversations SET updated_at = coalesce(
            (SELECT max(created_at) FROM messages m WHERE m.conversation_id = conversations.id),
            created_at);
        ALTER TABLE messages ADD COLUMN parent_id INTEGER;
        ALTER TABLE messages ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
        CREATE TEMP TABLE previous AS SELECT id, lag(id) OVER
            (PARTITION BY conversation_id ORDER BY id) AS parent FROM messages;
        CREATE UNIQUE INDEX temp.previous_id ON previous(id);
        UPDATE messages SET parent_id =
            ifnull((SELECT parent FROM previous p WHERE p.id = messages.id), 0);
        DROP TABLE temp.previous;
        CREATE INDEX messages_parent ON messages(parent_id);
        """,
    )


def m011_model_habits_and_distill_backoff(db: sqlite3.Connection) -> None:
    """What Charlie has seen a model do with tools (`charlie.llm.toolmode`: what `charlie doctor`
    observed, and how many answers in a row its tool use failed), so every process picks the
    same tool mode; and each thread's distillation back-off (the newest message when the
    model last failed to distill it, and how many times in a row), so every process honours
    it — `charlie chat -m` included."""
    run_script(
        db,
        """
        CREATE TABLE model_habits (
            key TEXT PRIMARY KEY,
            native_calls INTEGER,
            text_calls INTEGER,
            json_schema INTEGER,
            misses INTEGER NOT NULL DEFAULT 0,
            last_miss TEXT NOT NULL DEFAULT '',
            updated_at TEXT NOT NULL
        );
        ALTER TABLE conversations ADD COLUMN distill_failed_at INTEGER;
        ALTER TABLE conversations ADD COLUMN distill_failures INTEGER NOT NULL DEFAULT 0;
        """,
    )


def m012_forget_log_and_refused_decisions(db: sqlite3.Connection) -> None:
    """Forgetting leaves a log of when, by whom, where and how many messages — never what;
    and each distillation keeps the decisions it refused to add or supersede, and why
    (`charlie.memory.decisions`)."""
    run_script(
        db,
        """
        CREATE TABLE forget_log (
            id INTEGER PRIMARY KEY,
            at TEXT NOT NULL,
            by_user_id INTEGER REFERENCES users(id),
            place TEXT NOT NULL,
            messages INTEGER NOT NULL
        );
        ALTER TABLE distillations ADD COLUMN refused_decisions TEXT NOT NULL DEFAULT '[]';
        """,
    )


def m013_message_ids_never_reused(db: sqlite3.Connection) -> None:
    """A message id is never given twice (AUTOINCREMENT). Before, forgetting the newest
    messages let the next ones take their ids: at or below a thread's "distilled up to" mark
    (so never distilled) and under old distillation rows; and a reply finished after the
    message it answered was forgotten took that message's id and followed itself.

    The table is built again with every row, id and reference kept, and the next id comes
    above every message id any row still names (marks, distillations, suggestions). A message
    now always follows one stored before it (`parent_id < id`; 0: the first; NULL: imported
    history), so no chain of parents can loop; the one kind of row that broke this, a reply
    that took its own message's id, follows the message before it in its thread instead.

    The search index beside the database (index.db) names message ids too: where forgetting
    could not reach it, its rows and marks still name the forgotten ids, so the next id comes
    above those as well (`_index_names`).

    Foreign keys are off while it runs (`migrate`): dropping the old table must not count
    the suggestions that name its messages as broken, since the new table keeps those ids."""
    columns = (  # as m001, m003, m007, m008 and m010 left them, in their order
        "id, conversation_id, project_id, private, role, user_id, speaker, content, images, "
        "created_at, trace, incomplete, source_id, distill, parent_id, hidden"
    )
    run_script(
        db,
        f"""
        CREATE TABLE messages_new (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id),
            project_id INTEGER REFERENCES projects(id),
            private INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
            user_id INTEGER REFERENCES users(id),
            speaker TEXT NOT NULL,
            content TEXT NOT NULL,
            images TEXT NOT NULL DEFAULT '[]',
            created_at TEXT NOT NULL,
            trace TEXT,
            incomplete INTEGER NOT NULL DEFAULT 0,
            source_id TEXT,
            distill INTEGER NOT NULL DEFAULT 1,
            parent_id INTEGER,
            hidden INTEGER NOT NULL DEFAULT 0,
            CHECK (parent_id IS NULL OR parent_id < id)
        );
        INSERT INTO messages_new ({columns})
            SELECT id, conversation_id, project_id, private, role, user_id, speaker, content,
                images, created_at, trace, incomplete, source_id, distill,
                CASE WHEN parent_id >= id THEN (SELECT ifnull(max(p.id), 0) FROM messages p
                    WHERE p.conversation_id = m.conversation_id AND p.id < m.id)
                ELSE parent_id END,
                hidden
            FROM messages m ORDER BY id;
        DROP TABLE messages;
        ALTER TABLE messages_new RENAME TO messages;
        CREATE INDEX messages_conversation ON messages(conversation_id, id);
        CREATE UNIQUE INDEX messages_source ON messages(conversation_id, source_id)
            WHERE source_id IS NOT NULL;
        CREATE INDEX messages_time ON messages(conversation_id, created_at, id);
        CREATE INDEX messages_parent ON messages(parent_id);
        INSERT INTO sqlite_sequence (name, seq) SELECT 'messages', 0
            WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'messages');
        UPDATE sqlite_sequence SET seq = max(seq,
                ifnull((SELECT max(distilled_upto) FROM conversations), 0),
                ifnull((SELECT max(distill_failed_at) FROM conversations), 0),
                ifnull((SELECT max(last_message_id) FROM distillations), 0),
                ifnull((SELECT max(first_message_id) FROM distillations), 0),
                ifnull((SELECT max(message_id) FROM suggestions), 0))
            WHERE name = 'messages';
        """,
    )
    db.execute(
        "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'messages'", (_index_names(db),)
    )


INDEX_MARKS = ("messages_upto", "messages_words_upto")  # `charlie.retrieval.message_index`


def _index_names(db: sqlite3.Connection) -> int:
    """The highest message id the search index beside the database names, in its rows or its
    marks; 0 when there is none (a new home, a database in memory) or it holds no messages
    yet. One that cannot be read is left to be built again from charlie.db (it then names
    nothing), and said in the log."""
    main = next((str(r[2]) for r in db.execute("PRAGMA database_list") if r[1] == "main"), "")
    path = Path(main).with_name(INDEX_FILE) if main else None
    if path is None or not path.is_file():
        return 0
    try:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as index:
            tables = {str(r[0]) for r in index.execute("SELECT name FROM sqlite_master")}
            if not {"index_state", "messages", "messages_fts"} <= tables:
                return 0
            marks = index.execute(
                "SELECT value FROM index_state WHERE key IN (?, ?)", INDEX_MARKS
            ).fetchall()
            rows = index.execute(
                "SELECT max(ifnull((SELECT max(id) FROM messages), 0), "
                "ifnull((SELECT max(rowid) FROM messages_fts), 0))"
            ).fetchone()
    except sqlite3.Error as exc:
        log.warning("The search index %s could not be read (%s): it is built again.", path, exc)
        return 0
    return max([int(rows[0]), *(int(v) for (v,) in marks if str(v).isdigit())])


def m014_forgotten_messages(db: sqlite3.Connection) -> None:
    """The ids of forgotten messages (never their text), written in the transaction that
    deletes them: so a forget tried again says the message is already forgotten, and the
    search index — another file, which may be busy — is scrubbed of them for sure, by the
    forget or, failing that, by whoever uses the index next
    (`charlie.retrieval.message_index.MessageIndex.scrub`). `neighbours` are the messages
    whose index entries hold the forgotten words as context, to be indexed again;
    `scrubbed_at` says when the index was done."""
    run_script(
        db,
        """
        CREATE TABLE forgotten_messages (
            id INTEGER PRIMARY KEY,
            message_id INTEGER NOT NULL,
            conversation_id INTEGER NOT NULL,
            neighbours TEXT NOT NULL DEFAULT '[]',
            forgotten_at TEXT NOT NULL,
            scrubbed_at TEXT
        );
        CREATE INDEX forgotten_messages_message ON forgotten_messages(message_id);
        CREATE INDEX forgotten_messages_waiting ON forgotten_messages(id)
            WHERE scrubbed_at IS NULL;
        """,
    )


def m015_model_size_and_clean_answers(db: sqlite3.Connection) -> None:
    """What `auto` starts a model from before it has answered (`charlie.llm.toolmode`): its
    parameter count and where that was read (its name, or what the server says), and how
    many answers in a row the model, given the tools itself, used them cleanly — what lets
    a small model leave constrained steps."""
    run_script(
        db,
        """
        ALTER TABLE model_habits ADD COLUMN params INTEGER;
        ALTER TABLE model_habits ADD COLUMN params_source TEXT NOT NULL DEFAULT '';
        ALTER TABLE model_habits ADD COLUMN clean INTEGER NOT NULL DEFAULT 0;
        """,
    )


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    m001_initial,
    m002_usage,
    m003_traces_and_suggestions,
    m004_sessions,
    m005_distill_claim,
    m006_discord,
    m007_incomplete_replies,
    m008_imported_messages,
    m009_api_tokens,
    m010_threads_and_branches,
    m011_model_habits_and_distill_backoff,
    m012_forget_log_and_refused_decisions,
    m013_message_ids_never_reused,
    m014_forgotten_messages,
    m015_model_size_and_clean_answers,
]


PRIVATE_MODE = 0o600


def keep_private(path: Path) -> None:
    """Make the database at `path`, which holds people's messages (private channels
    included), readable and writable by its owner only, whatever the umask: created so
    when missing, narrowed when it (or its -wal, -shm) is open to others, as files made
    before this was done are. SQLite gives the -wal and -shm it creates the database's own
    mode. Only regular files are touched, at the path links lead to (where SQLite keeps
    the -wal), and a mode is only narrowed, never widened (a read-only file stays so).
    What cannot be narrowed (another owner's file) is logged; a file that cannot be made
    (a read-only folder, no room) is left for the connection to report."""
    real = Path(os.path.realpath(path))
    try:
        os.close(os.open(real, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE))
        return
    except FileExistsError:
        pass
    except OSError:
        return
    for part in (real, Path(f"{real}-wal"), Path(f"{real}-shm")):
        try:
            found = os.lstat(part)
            if stat.S_ISREG(found.st_mode) and found.st_mode & 0o077:
                os.chmod(part, stat.S_IMODE(found.st_mode) & 0o700)
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("%s stays readable by others: %s", part, exc)


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the database at `path` and bring it up to date; it is
    readable by its owner only (`keep_private`).

    A full disk, an I/O error, a read-only file, a busy or a damaged database each raise
    their own `DatabaseError`, saying what to do.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    keep_private(path)
    try:
        db = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
        )
        db.row_factory = sqlite3.Row
        _use_wal(db)
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA secure_delete = ON")  # what is forgotten leaves the file too
        migrate(db)
    except sqlite3.Error as exc:
        raise explain(exc, path) or DatabaseError(
            f"The database {path} could not be opened ({exc})."
        ) from exc
    return db


def _use_wal(db: sqlite3.Connection) -> None:
    """Switch to write-ahead logging. A new database may be switched by two processes at
    once, and SQLite answers "locked" at once to the second instead of waiting: wait."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if _code(exc) not in BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def migrate(db: sqlite3.Connection) -> None:
    """Apply the migrations this database lacks, each in its own write transaction.

    `PRAGMA user_version` counts the migrations applied: when it is up to date (every
    request of the web app opens the database), this is one read and no lock. Otherwise
    the applied list is read again inside the write lock, so two processes starting
    together (the web server and the Discord bot) never both run a migration.

    Foreign keys are not enforced while migrations run: SQLite changes a table by building
    it again and dropping the old one, and the drop must not count the rows naming the old
    table's ids as broken (the new one keeps every id).
    """
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version >= len(MIGRATIONS):
        return
    enforced = db.execute("PRAGMA foreign_keys").fetchone()[0]
    db.execute("PRAGMA foreign_keys = OFF")
    try:
        _apply(db, version)
    finally:
        db.execute(f"PRAGMA foreign_keys = {'ON' if enforced else 'OFF'}")


def _apply(db: sqlite3.Connection, version: int) -> None:
    for number, migration in enumerate(MIGRATIONS[version:], start=version + 1):
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(
                "CREATE TABLE IF NOT EXISTS migrations "
                "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            applied = db.execute(
                "SELECT 1 FROM migrations WHERE name = ?", (migration.__name__,)
            ).fetchone()
            if applied is None:
                migration(db)
                db.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                    (migration.__name__, now()),
                )
            db.execute(f"PRAGMA user_version = {number}")
        except BaseException:
            if db.in_transaction:  # SQLite may have rolled back already (a full disk)
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


# ---------------------------------------------------------------- the schema, as a whole


def schema_version(db: Connection) -> int:
    """How many migrations the database has had (an archive records it). A PostgreSQL
    store holds the schema as it stands: all of them."""
    if not isinstance(db, sqlite3.Connection):
        return len(MIGRATIONS)
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def table_names(db: Connection) -> list[str]:
    """The tables of the store `db` is connected to (SQLite's own aside), sorted."""
    if isinstance(db, sqlite3.Connection):
        rows = db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
            "ESCAPE '\\'"
        ).fetchall()
    else:
        rows = db.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_type = 'BASE TABLE'"
        ).fetchall()
    return sorted(str(r[0]) for r in rows)


def references_to(db: Connection, table: str) -> set[tuple[str, str]]:
    """Every (table, column) with a foreign key to `table`'s id: what removing a person must
    know what to do with (`charlie.household.removal`), so a new table is never missed."""
    if not isinstance(db, sqlite3.Connection):  # PostgreSQL: from its catalogue
        rows = db.execute(
            "SELECT c.conrelid::regclass::text, a.attname FROM pg_constraint c "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey) "
            "WHERE c.contype = 'f' AND c.confrelid = to_regclass(?)",
            (table,),
        ).fetchall()
        return {(str(r[0]), str(r[1])) for r in rows}
    found = set()
    for name in table_names(db):
        for key in db.execute(f"PRAGMA foreign_key_list({name})").fetchall():
            if key["table"] == table:
                found.add((name, key["from"]))
    return found


def checkpoint(db: Connection) -> None:
    """Move the write-ahead log into the database file and empty it: after a forget, the
    log keeps no copy of what was deleted (`secure_delete` zeroes it in the file). (A
    PostgreSQL server keeps its own log; nothing to do here.)"""
    if isinstance(db, sqlite3.Connection):
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# ---------------------------------------------------------------- errors, explained


def _code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def explain(exc: sqlite3.Error, path: Path) -> DatabaseError | None:
    """The error to show the person for a SQLite failure that is not a bug in Charlie — a
    full disk, an I/O error, a file Charlie may not write, a database kept busy, a damaged
    file — or None for any other (a constraint, a bad query: let it surface as the bug).

    Use it wherever a sqlite3 error can reach the person, at open or mid-request:
    `raise db.explain(exc, path) or exc`, or the `storage_errors(path)` block below.
    """
    code = _code(exc)
    if code in IO and _disk_nearly_full(path):
        code = next(iter(FULL))  # the write SQLite could not make (its -shm, say) found no room
    if code in FULL:
        return DiskFull(
            f"The disk holding {path} is full: free some space and try again. "
            "Nothing already saved was lost."
        )
    if code in IO:
        return DiskError(
            f"The disk holding {path} could not be read or written ({exc}). Check that "
            "the disk is connected and healthy, then try again. Nothing already saved was "
            "lost."
        )
    if code in NOT_WRITABLE:
        return DatabaseNotWritable(
            f"Charlie cannot write to the database {path} ({exc}). Make the file and its "
            "folder writable by the account running Charlie, and check that the disk is "
            "not mounted read-only."
        )
    if code in BUSY:
        return DatabaseBusy(
            f"The database {path} is busy: another Charlie process (the web server, the "
            f"Discord bot, a backup) held it for over {BUSY_TIMEOUT:g} s. Try again in a "
            "moment; if it keeps happening, stop the other process."
        )
    if code in DAMAGED:
        return DatabaseDamaged(
            f"The database {path} is damaged ({exc}). Notes and shared project memory are "
            "safe in the project folders, but private channels live only in this file: "
            "keep a copy of it and do not delete it. Stop Charlie, move the file aside, "
            "and start Charlie again with a new one; `sqlite3 charlie.db .recover` can "
            "often save what the copy holds."
        )
    return None


def _disk_nearly_full(path: Path) -> bool:
    """Whether the disk holding `path` has (almost) no room left: SQLite reports a full disk
    as an I/O error when it fails to grow its shared-memory file."""
    try:
        return shutil.disk_usage(path.parent).free < NEARLY_FULL_BYTES
    except OSError:
        return False


@contextmanager
def storage_errors(path: Path) -> Iterator[None]:
    """Turn the SQLite failures `explain` knows into their `DatabaseError`; others pass."""
    try:
        yield
    except sqlite3.Error as exc:
        explained = explain(exc, path)
        if explained is None:
            raise
        raise explained from exc


def explain_storage(exc: BaseException, path: Path) -> CharlieError | None:
    """`explain` for any storage failure that reaches an adapter's edge: a SQLite error of the
    database at `path`, or a file Charlie could not write (a full disk, a read-only folder).
    None for anything else, which is a bug and must surface as one."""
    if isinstance(exc, sqlite3.Error):
        return explain(exc, path)
    if isinstance(exc, OSError) and exc.errno in files.DISK_ERRNOS:
        return files.not_written(exc, Path(exc.filename) if exc.filename else path.parent)
    return None
