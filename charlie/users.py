"""The people of the household: accounts, passwords, administrators, and removing someone.

Accounts are made on purpose (`charlie users add`, or an administrator in the app), never
on the fly: a name nobody added is an error that says how to add it. Removing a person
takes everything that was theirs alone (their private channel and its memory, sessions,
tokens, usage, Discord links) and keeps what they said in shared projects, under their
name (`remove_user`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
from dataclasses import dataclass

from charlie.db import now, transaction
from charlie.errors import CharlieError, Conflict, InvalidName, NotFound

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


@dataclass(frozen=True)
class User:
    id: int
    name: str
    is_admin: bool


def _from_row(row: sqlite3.Row) -> User:
    return User(id=row["id"], name=row["name"], is_admin=bool(row["is_admin"]))


def validate_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise InvalidName(
            f"{name!r} is not a valid user name: use 1-40 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit."
        )
    return name


def get_user(db: sqlite3.Connection, name: str) -> User:
    row = db.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise NotFound(f"There is no user named {name!r}.")
    return _from_row(row)


def has_people(db: sqlite3.Connection) -> bool:
    """Whether anyone has an account yet (a new data home has no one)."""
    return db.execute("SELECT 1 FROM users LIMIT 1").fetchone() is not None


def require_user(db: sqlite3.Connection, name: str) -> User:
    """The person called `name`, who must have been added: nobody is made on the fly.

    The error says how to add them, and on a data home with no one yet, how to make the
    first account."""
    validate_name(name)
    row = db.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
    if row is not None:
        return _from_row(row)
    if not has_people(db):
        raise NotFound(
            f"No one has an account yet: run `charlie users add {name} --admin` to make the "
            "first one (an administrator), then try again."
        )
    raise NotFound(
        f"There is no one named {name!r} in this household: add them with `charlie users add "
        f"{name}`, or say who you are with --user NAME (or CHARLIE_USER); `charlie users list` "
        "shows who there is."
    )


def ensure_user(db: sqlite3.Connection, name: str, *, is_admin: bool = False) -> User:
    """The user called `name`, created (without a password) if there is none: for restoring
    an archive and for tests. People are added on purpose with `add_user`."""
    validate_name(name)
    db.execute(
        "INSERT INTO users (name, is_admin, created_at) VALUES (?, ?, ?) "
        "ON CONFLICT(name) DO NOTHING",
        (name, int(is_admin), now()),
    )
    return get_user(db, name)


# ---------------------------------------------------------------- passwords
# scrypt (RFC 7914) from the standard library: memory-hard, salted, constant-time compare.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
MIN_PASSWORD = 8


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, maxmem=2**26
    )
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${salt.hex()}${digest.hex()}"


def _matches(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
    except ValueError:
        return False
    if scheme != "scrypt":
        return False
    candidate = hashlib.scrypt(
        password.encode("utf-8"),
        salt=bytes.fromhex(salt),
        n=int(n),
        r=int(r),
        p=int(p),
        maxmem=2**26,
    )
    return hmac.compare_digest(candidate.hex(), digest)


MAX_PASSWORD = 1000


class WrongPassword(CharlieError):
    """The current password given to change it was not the right one."""


def check_password(password: str) -> str:
    """`password` if it is acceptable; `InvalidName` saying what is wrong if not."""
    if len(password) < MIN_PASSWORD:
        raise InvalidName(f"The password must be at least {MIN_PASSWORD} characters long.")
    if len(password) > MAX_PASSWORD:
        raise InvalidName(f"The password must be at most {MAX_PASSWORD} characters long.")
    if not password.strip():
        raise InvalidName("The password cannot be only spaces.")
    return password


def set_password(db: sqlite3.Connection, name: str, password: str) -> User:
    check_password(password)
    user = get_user(db, name)
    db.execute(
        "UPDATE users SET password_hash = ? WHERE id = ?", (hash_password(password), user.id)
    )
    return user


def authenticate(db: sqlite3.Connection, name: str, password: str) -> User | None:
    """The user, if the name and password match; None otherwise (never says which was wrong)."""
    row = db.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
    if row is None or not row["password_hash"]:
        _matches(password, hash_password("timing-equaliser"))  # same cost either way
        return None
    return _from_row(row) if _matches(password, row["password_hash"]) else None


def password_hash(db: sqlite3.Connection, name: str) -> str | None:
    """The stored password hash of `name` (None without one): a key that changes with the
    password, for tokens that must die with it."""
    row = db.execute("SELECT password_hash FROM users WHERE name = ?", (name,)).fetchone()
    return str(row[0]) if row is not None and row[0] else None


def list_users(db: sqlite3.Connection) -> list[tuple[User, bool]]:
    """Every user, with whether they can sign in (have a password)."""
    rows = db.execute("SELECT * FROM users ORDER BY name").fetchall()
    return [(_from_row(row), bool(row["password_hash"])) for row in rows]


def admins(db: sqlite3.Connection) -> list[User]:
    rows = db.execute("SELECT * FROM users WHERE is_admin = 1 ORDER BY name").fetchall()
    return [_from_row(row) for row in rows]


def set_admin(db: sqlite3.Connection, name: str, is_admin: bool) -> User:
    """Make `name` an administrator or not; the household's last administrator stays one
    (someone must be able to add and remove people)."""
    with transaction(db):
        user = get_user(db, name)
        if user.is_admin and not is_admin and len(admins(db)) == 1:
            raise Conflict(
                f"{user.name} is the household's only administrator: make someone else an "
                f"administrator first (`charlie users admin NAME`)."
            )
        db.execute("UPDATE users SET is_admin = ? WHERE id = ?", (int(is_admin), user.id))
    return User(user.id, user.name, is_admin)


def add_user(
    db: sqlite3.Connection, name: str, password: str | None, *, is_admin: bool = False
) -> User:
    """Add `name` to the household, with a password to sign in with (None: none yet; the
    command line works without one).

    Nothing is written unless the name and password are both acceptable. A name already
    taken is a `Conflict` — except an account with no password (made before accounts were
    made on purpose), which this completes."""
    validate_name(name)
    stored = hash_password(check_password(password)) if password is not None else None
    with transaction(db):
        row = db.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
        if row is not None and row["password_hash"]:
            raise Conflict(
                f"{row['name']!r} already has an account; to change their password use "
                f"`charlie users passwd {row['name']}` (or Settings → Household in the app)."
            )
        if row is None:
            db.execute(
                "INSERT INTO users (name, is_admin, password_hash, created_at) VALUES (?, ?, ?, ?)",
                (name, int(is_admin), stored, now()),
            )
        else:
            db.execute(
                "UPDATE users SET password_hash = ?, is_admin = max(is_admin, ?) WHERE id = ?",
                (stored, int(is_admin), row["id"]),
            )
    return get_user(db, name)


# ---------------------------------------------------------------- removing a person
#
# Every table that refers to a person, and what happens to its rows when they are removed.
# Rows in their private channel go with it whatever the table. Elsewhere, the columns in
# `ATTRIBUTED` are cleared (the row stays: a message keeps its speaker's name), and every
# other row that refers to them is deleted. A reference this list does not know stops the
# removal before anything is changed (`_check_references`), so a new table cannot silently
# keep, or lose, a person's data.
ATTRIBUTED = {
    ("messages", "user_id"),  # what they said in shared projects stays, under their name
    ("memory_revisions", "owner_id"),
    ("distillations", "owner_id"),
    ("discord_bindings", "bound_by"),
    ("forget_log", "by_user_id"),  # when and how much was forgotten stays; no longer by whom
}
WITH_PERSON = {
    ("conversations", "owner_id"),  # their private channel (each of its threads)
    ("usage_events", "user_id"),
    ("suggestions", "user_id"),
    ("pins", "user_id"),
    ("sessions", "user_id"),
    ("api_tokens", "user_id"),
    ("discord_links", "user_id"),
    ("discord_link_codes", "user_id"),
}
# What refers to a private thread, or to what is in one: deleted with it.
IN_THREAD = {
    "conversations": {
        ("messages", "conversation_id"),
        ("memory_revisions", "conversation_id"),
        ("distillations", "conversation_id"),
        ("suggestions", "conversation_id"),
        ("pins", "conversation_id"),
    },
    "messages": {("suggestions", "message_id")},
    "suggestions": {("discord_suggestion_messages", "suggestion_id")},
    "memory_revisions": {("distillations", "revision_id")},
}


@dataclass(frozen=True)
class Removal:
    """What removing a person takes, and what stays: shown before (to confirm) and after."""

    name: str
    private_threads: int
    private_messages: int
    private_memory_revisions: int
    sessions: int
    tokens: int
    usage_events: int
    discord_links: int
    shared_messages: int  # kept, attributed by name
    message_ids: tuple[int, ...] = ()  # the private messages deleted (for the search index)

    def describe(self) -> str:
        """The confirmation, in words (the same in the app and on the command line)."""
        threads = "" if self.private_threads <= 1 else f" in {self.private_threads} threads"
        gone = [
            f"their private channel ({_count(self.private_messages, 'message')}{threads}) and "
            f"its memory ({_count(self.private_memory_revisions, 'revision')})",
            f"{_count(self.sessions, 'signed-in session')}",
            f"{_count(self.tokens, 'app token')}",
            f"their usage history ({_count(self.usage_events, 'event')})",
        ]
        if self.discord_links:
            gone.append(f"{_count(self.discord_links, 'linked Discord account')}")
        kept = (
            f"Their {_count(self.shared_messages, 'message')} in shared projects "
            f"{'stays' if self.shared_messages == 1 else 'stay'}, attributed to {self.name}."
            if self.shared_messages
            else "They have no messages in shared projects."
        )
        return f"Removing {self.name} deletes {', '.join(gone)}. {kept}"


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}{'' if number == 1 else 's'}"


def _references(db: sqlite3.Connection, target: str) -> set[tuple[str, str]]:
    """Every (table, column) with a foreign key to `target`'s id."""
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    found = set()
    for table in tables:
        for key in db.execute(f"PRAGMA foreign_key_list({table})").fetchall():
            if key["table"] == target:
                found.add((table, key["from"]))
    return found


def _check_references(db: sqlite3.Connection) -> None:
    unknown = _references(db, "users") - ATTRIBUTED - WITH_PERSON
    for target, known in IN_THREAD.items():
        unknown |= _references(db, target) - known
    if unknown:
        names = ", ".join(f"{t}.{c}" for t, c in sorted(unknown))
        raise CharlieError(
            f"Charlie does not know what removing a person should do to {names}; nothing was "
            "removed. This is a bug: please report it."
        )


def _private_threads(db: sqlite3.Connection, user: User) -> list[int]:
    rows = db.execute(
        "SELECT id FROM conversations WHERE owner_id = ? AND private = 1", (user.id,)
    ).fetchall()
    return [int(r[0]) for r in rows]


def removal_of(db: sqlite3.Connection, name: str) -> Removal:
    """What removing `name` would take and keep (changes nothing)."""
    user = get_user(db, name)
    threads = _private_threads(db, user)
    marks = ",".join("?" * len(threads))

    def count(sql: str, *params: object) -> int:
        return int(db.execute(sql, params).fetchone()[0])

    private_ids = [
        int(r[0])
        for r in db.execute(
            f"SELECT id FROM messages WHERE conversation_id IN ({marks}) ORDER BY id", threads
        )
    ]
    return Removal(
        name=user.name,
        private_threads=len(threads),
        private_messages=len(private_ids),
        private_memory_revisions=count(
            f"SELECT count(*) FROM memory_revisions WHERE conversation_id IN ({marks})", *threads
        ),
        sessions=count("SELECT count(*) FROM sessions WHERE user_id = ?", user.id),
        tokens=count("SELECT count(*) FROM api_tokens WHERE user_id = ?", user.id),
        usage_events=count("SELECT count(*) FROM usage_events WHERE user_id = ?", user.id),
        discord_links=count("SELECT count(*) FROM discord_links WHERE user_id = ?", user.id),
        shared_messages=count(
            "SELECT count(*) FROM messages WHERE user_id = ? AND private = 0", user.id
        ),
        message_ids=tuple(private_ids),
    )


def check_removable(db: sqlite3.Connection, name: str) -> User:
    """`name`, if they may be removed: anyone but the household's last administrator."""
    user = get_user(db, name)
    if user.is_admin and len(admins(db)) == 1:
        raise Conflict(
            f"{user.name} is the household's only administrator: make someone else an "
            "administrator first (`charlie users admin NAME`), then remove them."
        )
    return user


def remove_user(db: sqlite3.Connection, name: str) -> Removal:
    """Remove `name` from the household, in one transaction: their private channel (every
    thread, its messages, memory revisions, distillations, suggestions and pins), their
    sessions, tokens, usage events, suggestions and pins anywhere, and their Discord links
    go; their messages in shared projects stay, with their name as the speaker.

    The household's last administrator cannot be removed. Returns what was removed (its
    `message_ids` are the private messages, for the search index to forget)."""
    with transaction(db):
        _check_references(db)
        user = check_removable(db, name)
        removal = removal_of(db, name)
        threads = _private_threads(db, user)
        marks = ",".join("?" * len(threads))
        theirs = f"(user_id = ? OR conversation_id IN ({marks}))"
        db.execute(
            "DELETE FROM discord_suggestion_messages WHERE suggestion_id IN "
            f"(SELECT id FROM suggestions WHERE {theirs})",
            (user.id, *threads),
        )
        db.execute(f"DELETE FROM suggestions WHERE {theirs}", (user.id, *threads))
        db.execute(f"DELETE FROM pins WHERE {theirs}", (user.id, *threads))
        for table in ("distillations", "memory_revisions", "messages"):
            db.execute(f"DELETE FROM {table} WHERE conversation_id IN ({marks})", threads)
        db.execute(f"DELETE FROM conversations WHERE id IN ({marks})", threads)
        for table, column in sorted(ATTRIBUTED):
            db.execute(f"UPDATE {table} SET {column} = NULL WHERE {column} = ?", (user.id,))
        for table, column in sorted(WITH_PERSON):
            db.execute(f"DELETE FROM {table} WHERE {column} = ?", (user.id,))
        db.execute("DELETE FROM users WHERE id = ?", (user.id,))
    return removal
