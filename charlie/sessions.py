"""Signed-in sessions (for the web app) and the sign-in rate limit.

A session is a random token the browser keeps in an HttpOnly cookie; only its sha256 is
stored, so a copy of the database cannot be used to sign in. Each session carries its own
CSRF token, which the page echoes in a header on every state-changing request.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from charlie.errors import CharlieError
from charlie.users import User, authenticate

SESSION_DAYS = 30
MAX_FAILURES = 5  # per name and per address, within the window
FAILURE_WINDOW = timedelta(minutes=10)


class TooManyAttempts(CharlieError):
    """Sign-in is paused after repeated failures."""


@dataclass(frozen=True)
class Session:
    token: str  # only ever in the cookie; the database keeps its hash
    csrf: str
    user: User


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("ascii", "replace")).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


def sign_in(db: sqlite3.Connection, name: str, password: str, address: str) -> Session | None:
    """A new session if the password is right; None if not. Raises `TooManyAttempts`."""
    keys = (f"name:{name.lower()}", f"addr:{address}")
    since = (_now() - FAILURE_WINDOW).isoformat()
    for key in keys:
        (count,) = db.execute(
            "SELECT count(*) FROM login_failures WHERE key = ? AND at > ?", (key, since)
        ).fetchone()
        if count >= MAX_FAILURES:
            raise TooManyAttempts("Too many failed sign-ins; wait ten minutes and try again.")
    user = authenticate(db, name, password)
    if user is None:
        db.executemany(
            "INSERT INTO login_failures (key, at) VALUES (?, ?)",
            [(key, _now().isoformat()) for key in keys],
        )
        return None
    db.execute("DELETE FROM login_failures WHERE key = ?", (keys[0],))
    token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
    db.execute(
        "INSERT INTO sessions (token_hash, user_id, csrf, created_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (
            _hash(token),
            user.id,
            csrf,
            _now().isoformat(),
            (_now() + timedelta(days=SESSION_DAYS)).isoformat(),
        ),
    )
    return Session(token, csrf, user)


def lookup(db: sqlite3.Connection, token: str) -> Session | None:
    row = db.execute(
        "SELECT s.csrf, s.expires_at, u.id, u.name, u.is_admin FROM sessions s "
        "JOIN users u ON u.id = s.user_id WHERE s.token_hash = ?",
        (_hash(token),),
    ).fetchone()
    if row is None or row["expires_at"] < _now().isoformat():
        return None
    return Session(token, row["csrf"], User(row["id"], row["name"], bool(row["is_admin"])))


def sign_out(db: sqlite3.Connection, token: str) -> None:
    db.execute("DELETE FROM sessions WHERE token_hash = ?", (_hash(token),))


def sign_out_everywhere(db: sqlite3.Connection, user: User) -> None:
    """End every session of `user` (after a password change)."""
    db.execute("DELETE FROM sessions WHERE user_id = ?", (user.id,))
