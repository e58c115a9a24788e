"""Discord accounts linked to household members, and one-time codes to link them.

A Discord user id means nothing to Charlie until it is linked to a member of the household:
by an administrator (`charlie users link-discord NAME DISCORD_ID`), or by the person
themselves with a short-lived code from the app. Only a linked id ever reaches a project or
a private channel. This module knows Discord ids only as numbers; the bot lives in
`charlie.adapters.discord`.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from charlie.db import now
from charlie.errors import CharlieError, Conflict, InvalidName, NotFound
from charlie.store import Connection
from charlie.users import User, get_user

DISCORD_ID_RE = re.compile(r"^[0-9]{15,21}$")  # a snowflake
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L
CODE_LENGTH = 8
CODE_MINUTES = 10
MAX_CODE_FAILURES = 5  # per Discord user, within CODE_MINUTES


class TooManyCodes(CharlieError):
    """Linking by code is paused after repeated wrong codes."""


@dataclass(frozen=True)
class LinkCode:
    code: str  # shown once to the person; only its hash is stored
    expires_at: str


def _user(row: sqlite3.Row) -> User:
    return User(id=row["id"], name=row["name"], is_admin=bool(row["is_admin"]))


def check_discord_id(discord_id: str | int) -> str:
    """The id as stored (digits), or `InvalidName` saying how to find the right one."""
    text = str(discord_id).strip()
    if not DISCORD_ID_RE.match(text):
        raise InvalidName(
            f"{text!r} is not a Discord user id: it is a number of 15 to 21 digits. In Discord, "
            "turn on Settings → Advanced → Developer Mode, then right-click the person → "
            "Copy User ID."
        )
    return text


def user_for_discord(db: Connection, discord_id: str | int) -> User | None:
    """The household member linked to this Discord user, or None."""
    row = db.execute(
        "SELECT u.* FROM discord_links l JOIN users u ON u.id = l.user_id WHERE l.discord_id = ?",
        (str(discord_id),),
    ).fetchone()
    return None if row is None else _user(row)


def discord_ids(db: Connection, user: User) -> list[str]:
    rows = db.execute(
        "SELECT discord_id FROM discord_links WHERE user_id = ? ORDER BY linked_at", (user.id,)
    )
    return [str(r[0]) for r in rows]


def link_discord(db: Connection, name: str, discord_id: str | int) -> User:
    """Link `discord_id` to the member called `name` (a person may have several ids)."""
    checked = check_discord_id(discord_id)
    user = get_user(db, name)
    return _link(db, user, checked)


def _link(db: Connection, user: User, discord_id: str) -> User:
    current = user_for_discord(db, discord_id)
    if current is not None and current.id != user.id:
        raise Conflict(
            f"Discord user {discord_id} is already linked to {current.name}; unlink it first "
            f"with `charlie users unlink-discord {current.name} {discord_id}`."
        )
    db.execute(
        "INSERT INTO discord_links (discord_id, user_id, linked_at) VALUES (?, ?, ?) "
        "ON CONFLICT(discord_id) DO NOTHING",
        (discord_id, user.id, now()),
    )
    return user


def unlink_discord(db: Connection, name: str, discord_id: str | int | None = None) -> int:
    """Unlink one Discord id from `name`, or every id when `discord_id` is None; how many."""
    user = get_user(db, name)
    if discord_id is None:
        cursor = db.execute("DELETE FROM discord_links WHERE user_id = ?", (user.id,))
    else:
        cursor = db.execute(
            "DELETE FROM discord_links WHERE user_id = ? AND discord_id = ?",
            (user.id, check_discord_id(discord_id)),
        )
    if cursor.rowcount == 0:
        which = "any Discord user" if discord_id is None else f"Discord user {discord_id}"
        raise NotFound(f"{user.name} is not linked to {which}.")
    return cursor.rowcount


def unlink_all(db: Connection, user: User) -> None:
    """Unlink every Discord id from `user`, if any (they are being removed)."""
    db.execute("DELETE FROM discord_links WHERE user_id = ?", (user.id,))


# ---------------------------------------------------------------- one-time codes


def _hash(code: str) -> str:
    cleaned = "".join(code.split()).replace("-", "").upper()
    return hashlib.sha256(cleaned.encode("ascii", "replace")).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


def new_code(db: Connection, user: User) -> LinkCode:
    """A fresh code for `user` (any earlier one stops working), valid for CODE_MINUTES."""
    raw = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    code = f"{raw[:4]}-{raw[4:]}"
    expires = (_now() + timedelta(minutes=CODE_MINUTES)).isoformat(timespec="milliseconds")
    db.execute(
        "DELETE FROM discord_link_codes WHERE user_id = ? OR expires_at < ?", (user.id, now())
    )
    db.execute(
        "INSERT INTO discord_link_codes (code_hash, user_id, expires_at) VALUES (?, ?, ?)",
        (_hash(code), user.id, expires),
    )
    return LinkCode(code, expires)


def redeem_code(db: Connection, code: str, discord_id: str | int) -> User:
    """Link `discord_id` to the person whose code this is; the code is used up."""
    checked = check_discord_id(discord_id)
    key = f"discord-code:{checked}"
    since = (_now() - timedelta(minutes=CODE_MINUTES)).isoformat(timespec="milliseconds")
    (failures,) = db.execute(
        "SELECT count(*) FROM login_failures WHERE key = ? AND at > ?", (key, since)
    ).fetchone()
    if failures >= MAX_CODE_FAILURES:
        raise TooManyCodes(
            f"Too many wrong codes; wait {CODE_MINUTES} minutes, then get a new code in the app."
        )
    row = db.execute(
        "SELECT u.* FROM discord_link_codes c JOIN users u ON u.id = c.user_id "
        "WHERE c.code_hash = ? AND c.expires_at > ?",
        (_hash(code), now()),
    ).fetchone()
    if row is None:
        db.execute("INSERT INTO login_failures (key, at) VALUES (?, ?)", (key, now()))
        raise NotFound(
            "That code is wrong or has expired. Get a new one in the app (Settings → "
            f"Link Discord); codes last {CODE_MINUTES} minutes."
        )
    db.execute("DELETE FROM discord_link_codes WHERE code_hash = ?", (_hash(code),))
    return _link(db, _user(row), checked)


def drop_codes(db: Connection, user: User) -> None:
    """Drop every link code made for `user`, used or not (they are being removed)."""
    db.execute("DELETE FROM discord_link_codes WHERE user_id = ?", (user.id,))
