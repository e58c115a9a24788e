"""The people of the household: accounts, passwords and administrators.

Accounts are made on purpose (`charlie users add`, or an administrator in the app), never
on the fly: a name nobody added is an error that says how to add it. Removing a person is
`charlie.household.removal`.
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
from charlie.store import Connection

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


def get_user(db: Connection, name: str) -> User:
    user = find_user(db, name)
    if user is None:
        raise NotFound(f"There is no user named {name!r}.")
    return user


def find_user(db: Connection, name: str) -> User | None:
    """The person called `name`, or None when the household has no one of that name."""
    row = db.execute("SELECT * FROM users WHERE lower(name) = lower(?)", (name,)).fetchone()
    return None if row is None else _from_row(row)


def has_people(db: Connection) -> bool:
    """Whether anyone has an account yet (a new data home has no one)."""
    return db.execute("SELECT 1 FROM users LIMIT 1").fetchone() is not None


def require_user(db: Connection, name: str) -> User:
    """The person called `name`, who must have been added: nobody is made on the fly.

    The error says how to add them, and on a data home with no one yet, how to make the
    first account."""
    validate_name(name)
    row = db.execute("SELECT * FROM users WHERE lower(name) = lower(?)", (name,)).fetchone()
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


def ensure_user(db: Connection, name: str, *, is_admin: bool = False) -> User:
    """The user called `name`, created (without a password) if there is none: for restoring
    an archive and for tests. People are added on purpose with `add_user`."""
    validate_name(name)
    db.execute(
        "INSERT INTO users (name, is_admin, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
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


def set_password(db: Connection, name: str, password: str) -> User:
    check_password(password)
    user = get_user(db, name)
    db.execute(
        "UPDATE users SET password_hash = ? WHERE id = ?", (hash_password(password), user.id)
    )
    return user


def authenticate(db: Connection, name: str, password: str) -> User | None:
    """The user, if the name and password match; None otherwise (never says which was wrong)."""
    row = db.execute("SELECT * FROM users WHERE lower(name) = lower(?)", (name,)).fetchone()
    if row is None or not row["password_hash"]:
        _matches(password, hash_password("timing-equaliser"))  # same cost either way
        return None
    return _from_row(row) if _matches(password, row["password_hash"]) else None


def password_hash(db: Connection, name: str) -> str | None:
    """The stored password hash of `name` (None without one): a key that changes with the
    password, for tokens that must die with it."""
    row = db.execute(
        "SELECT password_hash FROM users WHERE lower(name) = lower(?)", (name,)
    ).fetchone()
    return str(row[0]) if row is not None and row[0] else None


def list_users(db: Connection) -> list[tuple[User, bool]]:
    """Every user, with whether they can sign in (have a password)."""
    rows = db.execute("SELECT * FROM users ORDER BY lower(name), name").fetchall()
    return [(_from_row(row), bool(row["password_hash"])) for row in rows]


def admins(db: Connection) -> list[User]:
    rows = db.execute(
        "SELECT * FROM users WHERE is_admin = 1 ORDER BY lower(name), name"
    ).fetchall()
    return [_from_row(row) for row in rows]


def set_admin(db: Connection, name: str, is_admin: bool) -> User:
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


def add_user(db: Connection, name: str, password: str | None, *, is_admin: bool = False) -> User:
    """Add `name` to the household, with a password to sign in with (None: none yet; the
    command line works without one).

    Nothing is written unless the name and password are both acceptable. A name already
    taken is a `Conflict` — except an account with no password (made before accounts were
    made on purpose), which this completes."""
    validate_name(name)
    stored = hash_password(check_password(password)) if password is not None else None
    with transaction(db):
        row = db.execute("SELECT * FROM users WHERE lower(name) = lower(?)", (name,)).fetchone()
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
                "UPDATE users SET password_hash = ?, "
                "is_admin = CASE WHEN ? <> 0 THEN 1 ELSE is_admin END WHERE id = ?",
                (stored, int(is_admin), row["id"]),
            )
    return get_user(db, name)


def delete_user(db: Connection, user: User) -> None:
    """Delete `user`'s account, once nothing refers to it any more: removing a person
    (`charlie.household.removal`) deletes or detaches what does first."""
    db.execute("DELETE FROM users WHERE id = ?", (user.id,))
