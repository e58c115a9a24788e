"""The people of the household."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
from dataclasses import dataclass

from charlie.db import now
from charlie.errors import InvalidName, NotFound

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


def ensure_user(db: sqlite3.Connection, name: str, *, is_admin: bool = False) -> User:
    """The user called `name`, created if this is the first time we meet them."""
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


def set_password(db: sqlite3.Connection, name: str, password: str) -> User:
    if len(password) < MIN_PASSWORD:
        raise InvalidName(f"The password must be at least {MIN_PASSWORD} characters long.")
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


def set_admin(db: sqlite3.Connection, name: str, is_admin: bool) -> None:
    db.execute("UPDATE users SET is_admin = ? WHERE name = ?", (int(is_admin), name))
