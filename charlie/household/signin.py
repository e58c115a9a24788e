"""Signed-in sessions (for the web app) and the sign-in rate limit.

A session is a random token the browser keeps in an HttpOnly cookie; only its sha256 is
stored, so a copy of the database cannot be used to sign in. Each session carries its own
CSRF token, which the page echoes in a header on every state-changing request.

The rate limit: every sign-in attempt is *reserved* before the password is checked — in one
`BEGIN IMMEDIATE` transaction that counts the recent attempts and records this one — so any
number of concurrent guesses get at most `MAX_FAILURES` checked per key and window. The keys
are the name *and* the address (from a browser Charlie does not know), so neither rotating
names nor rotating addresses helps. A right password frees its reservation; a wrong one
leaves it counted. A browser that has signed in before carries a device token (signed with
the person's password hash, so it dies with a password change): its attempts count against
that device alone, so a stranger who locks a name or an address out does not lock out its
owner's own devices.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from charlie.errors import CharlieError
from charlie.store import Connection
from charlie.users import (
    User,
    WrongPassword,
    authenticate,
    check_password,
    password_hash,
    set_password,
)

SESSION_DAYS = 30
DEVICE_DAYS = 365
MAX_FAILURES = 5  # per name or known device, within the window
# per address: higher, so a household signing in at once from one address (a NAT, a proxy
# not listed in CHARLIE_TRUSTED_PROXIES) is not refused, while one address spraying many
# names still is
MAX_ADDRESS_FAILURES = 20
FAILURE_WINDOW = timedelta(minutes=10)


class TooManyAttempts(CharlieError):
    """Sign-in is paused after repeated failures."""


@dataclass(frozen=True)
class Session:
    token: str  # only ever in the cookie; the database keeps its hash
    csrf: str
    user: User
    device: str = ""  # the device token to keep in the browser (set on sign-in)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("ascii", "replace")).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


def _device_mac(stored_hash: str, user_id: int, nonce: str) -> str:
    message = f"charlie-device:{user_id}:{nonce}".encode()
    return hmac.new(stored_hash.encode(), message, hashlib.sha256).hexdigest()


def new_device(db: Connection, user: User) -> str:
    """A device token for a browser `user` just signed in with: `user_id.nonce.mac`."""
    stored = password_hash(db, user.name)
    nonce = secrets.token_urlsafe(16)
    return f"{user.id}.{nonce}.{_device_mac(stored or '', user.id, nonce)}"


def known_device(db: Connection, name: str, device: str | None) -> str | None:
    """The device's id (its nonce) if `device` is a valid token of the person named `name`."""
    if not device or device.count(".") != 2:
        return None
    user_id, nonce, mac = device.split(".")
    row = db.execute(
        "SELECT id, password_hash FROM users WHERE lower(name) = lower(?)", (name,)
    ).fetchone()
    if row is None or not row["password_hash"] or str(row["id"]) != user_id:
        return None
    if not hmac.compare_digest(mac, _device_mac(row["password_hash"], row["id"], nonce)):
        return None
    return nonce


def limit_keys(db: Connection, name: str, address: str, device: str | None) -> list[str]:
    """What this attempt counts against: a known device alone, else the name and address."""
    nonce = known_device(db, name, device)
    if nonce is not None:
        return [f"device:{nonce}"]
    return [f"name:{name.lower()}", f"addr:{address}"]


def reserve_attempt(db: Connection, keys: list[str]) -> list[int]:
    """Count and record an attempt against `keys` in one transaction; raise
    `TooManyAttempts` if any key is used up. Returns the rows to free if it succeeds."""
    since = (_now() - FAILURE_WINDOW).isoformat()
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(
            "DELETE FROM login_failures WHERE at < ?", ((_now() - timedelta(days=1)).isoformat(),)
        )
        for key in keys:
            (count,) = db.execute(
                "SELECT count(*) FROM login_failures WHERE key = ? AND at > ?", (key, since)
            ).fetchone()
            if count >= (MAX_ADDRESS_FAILURES if key.startswith("addr:") else MAX_FAILURES):
                raise TooManyAttempts(
                    "Too many sign-in attempts for this name (failed ones, or several at the "
                    "same moment); try again in a moment, or after ten minutes if they "
                    "failed (a browser you signed in with before can keep trying)."
                )
        reserved = []
        for key in keys:
            cursor = db.execute(
                "INSERT INTO login_failures (key, at) VALUES (?, ?)", (key, _now().isoformat())
            )
            assert cursor.lastrowid is not None
            reserved.append(cursor.lastrowid)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return reserved


def sign_in(
    db: Connection, name: str, password: str, address: str, device: str | None = None
) -> Session | None:
    """A new session if the password is right; None if not. Raises `TooManyAttempts`.

    `device` is the device token the browser holds, if any; the session carries the
    device token to keep (the same one, or a new one)."""
    reserved = reserve_attempt(db, limit_keys(db, name, address, device))
    user = authenticate(db, name, password)
    if user is None:
        return None
    db.executemany("DELETE FROM login_failures WHERE id = ?", [(r,) for r in reserved])
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
    kept = device if known_device(db, name, device) else new_device(db, user)
    return Session(token, csrf, user, kept or "")


def lookup(db: Connection, token: str) -> Session | None:
    row = db.execute(
        "SELECT s.csrf, s.expires_at, u.id, u.name, u.is_admin FROM sessions s "
        "JOIN users u ON u.id = s.user_id WHERE s.token_hash = ?",
        (_hash(token),),
    ).fetchone()
    if row is None or row["expires_at"] < _now().isoformat():
        return None
    return Session(token, row["csrf"], User(row["id"], row["name"], bool(row["is_admin"])))


def sign_out(db: Connection, token: str) -> None:
    db.execute("DELETE FROM sessions WHERE token_hash = ?", (_hash(token),))


def sign_out_everywhere(db: Connection, user: User) -> None:
    """End every session of `user` (after a password change)."""
    db.execute("DELETE FROM sessions WHERE user_id = ?", (user.id,))


def sign_out_others(db: Connection, session: Session) -> int:
    """End every session of the person but this one (a phone left signed in somewhere);
    how many were ended."""
    cursor = db.execute(
        "DELETE FROM sessions WHERE user_id = ? AND token_hash <> ?",
        (session.user.id, _hash(session.token)),
    )
    return cursor.rowcount


def count(db: Connection, user: User) -> int:
    """How many sessions `user` has that have not expired."""
    (found,) = db.execute(
        "SELECT count(*) FROM sessions WHERE user_id = ? AND expires_at >= ?",
        (user.id, _now().isoformat()),
    ).fetchone()
    return int(found)


def count_stored(db: Connection, user: User) -> int:
    """How many sessions `user` has stored, expired ones included (what removing them
    deletes)."""
    (found,) = db.execute("SELECT count(*) FROM sessions WHERE user_id = ?", (user.id,)).fetchone()
    return int(found)


def change_password(db: Connection, session: Session, current: str, new: str) -> int:
    """Change the signed-in person's own password, proving it with the current one, and
    end their other sessions (this one stays); how many were ended.

    Guesses at the current password count like sign-in attempts (per person), so a
    session left open on someone else's screen cannot be used to find the password."""
    check_password(new)
    user = session.user
    reserved = reserve_attempt(db, [f"password:{user.id}"])
    if authenticate(db, user.name, current) is None:
        raise WrongPassword("Your current password is not right; nothing was changed.")
    db.executemany("DELETE FROM login_failures WHERE id = ?", [(r,) for r in reserved])
    set_password(db, user.name, new)
    return sign_out_others(db, session)
