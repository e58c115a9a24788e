"""Personal bearer tokens: how another app (an MCP client, a script) acts as one person.

A token's secret is shown once, when it is made, and never again: only its sha256 is
stored, so a copy of the database lets nobody in. The secret is 256 random bits, so a
lookup by its hash is as safe as comparing in constant time — nobody can guess their way
towards a stored hash. A revoked token is kept, marked with when, so its owner can see why
an app stopped working; it never verifies again.

Each token may be read-only: the adapter that accepts it (the MCP server) refuses every
write tool to a read-only token.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta

from charlie.db import now
from charlie.errors import CharlieError, Forbidden, NotFound, Unauthorized
from charlie.store import Connection
from charlie.users import User

PREFIX = "chk_"
SECRET_RE = re.compile(r"^chk_[A-Za-z0-9_-]{43}$")  # PREFIX + token_urlsafe(32)
MAX_LABEL = 80
TOUCH_EVERY = timedelta(minutes=1)  # how often last_used_at is brought up to date
HOW_TO_CREATE = "with `charlie tokens add NAME` or in the web app's Settings"


@dataclass(frozen=True)
class Token:
    id: int
    user_id: int
    user: str  # the person's name
    label: str
    read_only: bool
    created_at: str
    last_used_at: str | None
    revoked_at: str | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


SELECT = (
    "SELECT t.id, t.user_id, u.name, u.is_admin, t.label, t.read_only, t.created_at, "
    "t.last_used_at, t.revoked_at FROM api_tokens t JOIN users u ON u.id = t.user_id "
)


def _from_row(row: sqlite3.Row) -> Token:
    return Token(
        id=row["id"],
        user_id=row["user_id"],
        user=row["name"],
        label=row["label"],
        read_only=bool(row["read_only"]),
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
    )


def _clean_label(label: str) -> str:
    label = " ".join(label.split())  # one line, so lists stay readable
    if len(label) > MAX_LABEL:
        raise CharlieError(
            f"A token's label can be at most {MAX_LABEL} characters; this one has {len(label)}."
        )
    return label


def create(
    db: Connection, user: User, *, label: str = "", read_only: bool = False
) -> tuple[Token, str]:
    """A new token for `user` and its secret (PREFIX + secrets.token_urlsafe(32)), shown
    once; only its sha256 is stored."""
    label = _clean_label(label)
    secret = PREFIX + secrets.token_urlsafe(32)
    cursor = db.execute(
        "INSERT INTO api_tokens (user_id, label, hash, read_only, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (user.id, label, _hash(secret), int(read_only), now()),
    )
    assert cursor.lastrowid is not None
    return _get(db, cursor.lastrowid), secret


def _get(db: Connection, token_id: int) -> Token:
    row = db.execute(SELECT + "WHERE t.id = ?", (token_id,)).fetchone()
    if row is None:
        raise NotFound(f"There is no token with id {token_id}; `charlie tokens list` shows them.")
    return _from_row(row)


def verify(db: Connection, secret: str) -> tuple[User, Token]:
    """The person a bearer secret acts as; raises `Unauthorized` for an unknown, malformed
    or revoked one. Brings `last_used_at` up to date (at most once a minute, so a busy app
    does not write on every request)."""
    secret = secret.strip()
    row = None
    if SECRET_RE.match(secret):
        row = db.execute(SELECT + "WHERE t.hash = ?", (_hash(secret),)).fetchone()
    if row is None:
        raise Unauthorized(
            f"This token is not valid: Charlie's tokens start with {PREFIX!r} and are shown "
            f"once, when made; create one {HOW_TO_CREATE}."
        )
    token = _from_row(row)
    if token.revoked_at is not None:
        raise Unauthorized(
            f"This token was revoked on {token.revoked_at[:10]}; create a new one {HOW_TO_CREATE}."
        )
    _touch(db, token)
    return User(row["user_id"], row["name"], bool(row["is_admin"])), token


def _touch(db: Connection, token: Token) -> None:
    stamp = now()
    last = token.last_used_at
    if last is not None and datetime.fromisoformat(stamp) - datetime.fromisoformat(last) < (
        TOUCH_EVERY
    ):
        return
    db.execute("UPDATE api_tokens SET last_used_at = ? WHERE id = ?", (stamp, token.id))


def list_tokens(db: Connection, user: User | None = None) -> list[Token]:
    """`user`'s tokens, or (None) everyone's; newest first, revoked ones included."""
    if user is None:
        rows = db.execute(SELECT + "ORDER BY t.created_at DESC, t.id DESC").fetchall()
    else:
        rows = db.execute(
            SELECT + "WHERE t.user_id = ? ORDER BY t.created_at DESC, t.id DESC", (user.id,)
        ).fetchall()
    return [_from_row(row) for row in rows]


def delete_all(db: Connection, user: User) -> None:
    """Delete every token of `user`, revoked ones included (they are being removed)."""
    db.execute("DELETE FROM api_tokens WHERE user_id = ?", (user.id,))


def revoke(db: Connection, token_id: int, *, by: User) -> Token:
    """Revoke a token for good: a person may revoke their own, an administrator anyone's.
    Revoking a revoked token changes nothing (it keeps the first date)."""
    token = _get(db, token_id)
    if token.user_id != by.id and not by.is_admin:
        # The message names neither the owner nor the label: they are not the caller's to see.
        raise Forbidden("Only its owner or a household administrator can revoke this token.")
    if token.revoked_at is None:
        db.execute(
            "UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
            (now(), token.id),
        )
    return _get(db, token.id)
