"""The people of the household."""

from __future__ import annotations

import re
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
