"""Suggested notes: after a reply, up to three related notes the answer did not use.

A suggestion says why it is offered, in words (`why`: "matches 'oak' · you opened it 4×,
most recently today") and in numbers (`detail`, the search's score line). Accepting one
pins the note into the conversation's context for the next turns and counts as engagement
in the usage model; dismissing one counts against it. Both are the person's own: nobody
can decide another person's suggestion.

Pins are bounded: at most `MAX_PINS` per conversation (accepting another says to unpin one
first), and at most `PINNED_CHARS` characters of them in a prompt (`PIN_CHARS` of each).
`unpin` takes a note out again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from charlie import projects
from charlie.conversations import Channel
from charlie.db import now, placeholders
from charlie.errors import CharlieError, Conflict, NotFound
from charlie.home import Home
from charlie.llm.fence import escape, fence
from charlie.notes import files as notes
from charlie.retrieval import usage
from charlie.retrieval.search import Searcher
from charlie.store import Connection
from charlie.users import User

MAX_SUGGESTIONS = 3
MIN_SCORE = 0.35  # a weaker match is not worth interrupting the person for
PIN_CHARS = 3000  # of each pinned note, in the context
PINNED_CHARS = 6000  # of all pinned notes together, in the context
MAX_PINS = 5  # per conversation
MAX_ID = 2**63 - 1  # SQLite's largest integer


@dataclass(frozen=True)
class Suggestion:
    id: int
    note: str
    title: str
    why: str  # in words, for the person
    detail: str  # the numbers behind it (`charlie.retrieval.search.Hit.why`)


def offer(
    home: Home,
    searcher: Searcher,
    channel: Channel,
    user: User,
    query: str,
    message_id: int,
    *,
    exclude: set[str],
) -> list[Suggestion]:
    """Find, store and return up to three notes related to `query` but not in `exclude`."""
    scope = [channel.project] if channel.project is not None else projects.list_projects(home)
    limit = MAX_SUGGESTIONS + len(exclude) + 3
    result = searcher.search(query, user, scope, limit=limit, explain=True)  # words matched
    dismissed = {
        row[0]
        for row in home.db.execute(
            "SELECT note FROM suggestions WHERE user_id = ? AND status = 'dismissed'", (user.id,)
        )
    }
    pinned = {p for p, _ in pins(home, channel)}
    chosen: list[Suggestion] = []
    for hit in result.hits:
        if hit.key in exclude | dismissed | pinned or hit.score < MIN_SCORE:
            continue
        detail = hit.why()
        cursor = home.db.execute(  # the numbers are kept: the words can be said from them
            "INSERT INTO suggestions (message_id, conversation_id, user_id, note, title, why, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (message_id, channel.conversation_id, user.id, hit.key, hit.title, detail, now()),
        )
        assert cursor.lastrowid is not None
        usage.record(home.db, user.id, "shown", note=hit.key, private=channel.private)
        chosen.append(Suggestion(cursor.lastrowid, hit.key, hit.title, hit.in_words(), detail))
        if len(chosen) == MAX_SUGGESTIONS:
            break
    return chosen


def _own(home: Home, user: User, suggestion_id: int) -> tuple[str, int, bool]:
    if not 0 < suggestion_id <= MAX_ID:
        raise NotFound(f"There is no suggestion {suggestion_id} for {user.name}.")
    row = home.db.execute(
        "SELECT s.note, s.conversation_id, c.private FROM suggestions s "
        "JOIN conversations c ON c.id = s.conversation_id WHERE s.id = ? AND s.user_id = ?",
        (suggestion_id, user.id),
    ).fetchone()
    if row is None:
        raise NotFound(f"There is no suggestion {suggestion_id} for {user.name}.")
    return str(row[0]), int(row[1]), bool(row[2])


def accept(home: Home, user: User, suggestion_id: int) -> str:
    """Pin the suggested note into its conversation's context; return the note's key."""
    note, conversation_id, private = _own(home, user, suggestion_id)
    pinned = [
        str(row[0])
        for row in home.db.execute(
            "SELECT note FROM pins WHERE conversation_id = ? ORDER BY pinned_at", (conversation_id,)
        )
    ]
    if note not in pinned and len(pinned) >= MAX_PINS:
        raise Conflict(
            f"{MAX_PINS} notes are pinned into this conversation already ({', '.join(pinned)}); "
            f"unpin one first, then accept {note}."
        )
    home.db.execute(
        "UPDATE suggestions SET status = 'accepted', decided_at = ? WHERE id = ?",
        (now(), suggestion_id),
    )
    pin(home, conversation_id, Pin(note, user.id, now()))
    usage.record(home.db, user.id, "accepted", note=note, private=private)
    return note


def dismiss(home: Home, user: User, suggestion_id: int) -> str:
    note, _, private = _own(home, user, suggestion_id)
    home.db.execute(
        "UPDATE suggestions SET status = 'dismissed', decided_at = ? WHERE id = ?",
        (now(), suggestion_id),
    )
    usage.record(home.db, user.id, "dismissed", note=note, private=private)
    return note


def pins(home: Home, channel: Channel) -> list[tuple[str, str]]:
    """The notes pinned into this conversation: (key, pinned_at), oldest first."""
    rows = home.db.execute(
        "SELECT note, pinned_at FROM pins WHERE conversation_id = ? ORDER BY pinned_at",
        (channel.conversation_id,),
    )
    return [(str(r[0]), str(r[1])) for r in rows]


def unpin(home: Home, channel: Channel, note: str) -> None:
    """Take `note` out of the conversation's context; `NotFound` if it was not pinned."""
    cursor = home.db.execute(
        "DELETE FROM pins WHERE conversation_id = ? AND note = ?", (channel.conversation_id, note)
    )
    if cursor.rowcount == 0:
        pinned = ", ".join(key for key, _ in pins(home, channel)) or "none"
        raise NotFound(f"{note} is not pinned into {channel.label} (pinned: {pinned}).")


def pinned_text(home: Home, channel: Channel) -> str:
    """The pinned notes, delimited as data, for the system prompt ("" when none): each cut
    to `PIN_CHARS`, all together to `PINNED_CHARS`."""
    parts = []
    budget = PINNED_CHARS
    for key, _ in pins(home, channel):
        slug, _, name = key.partition("/")
        try:
            note = notes.get_note(projects.get_project(home, slug), name)
        except CharlieError as exc:  # gone, unreadable, or its project is
            parts.append(
                fence("note", escape(f"(cannot be read now: {exc})"), id=key, pinned="yes")
            )
            continue
        if budget <= 0:
            parts.append(fence("note", "(left out: the pinned notes are long)", id=key))
            continue
        body = note.body[: min(PIN_CHARS, budget)]
        budget -= len(body)
        parts.append(fence("note", escape(body), id=key, title=note.title, pinned="yes"))
    return "\n".join(parts)


# ---------------------------------------------------------------- archives, forgetting, removal


@dataclass(frozen=True)
class Pin:
    """A note pinned into a thread: by whom (an account id) and when."""

    note: str
    user_id: int
    pinned_at: str


def pins_in(home: Home, conversation_id: int) -> list[Pin]:
    """The notes pinned into the thread, oldest first (for an archive)."""
    rows = home.db.execute(
        "SELECT note, user_id, pinned_at FROM pins WHERE conversation_id = ? "
        "ORDER BY pinned_at, note",
        (conversation_id,),
    )
    return [Pin(str(r[0]), int(r[1]), str(r[2])) for r in rows]


def pin(home: Home, conversation_id: int, pinned: Pin) -> bool:
    """Pin a note into the thread; False when it is pinned there already."""
    cursor = home.db.execute(
        "INSERT OR IGNORE INTO pins (conversation_id, note, user_id, pinned_at) "
        "VALUES (?, ?, ?, ?)",
        (conversation_id, pinned.note, pinned.user_id, pinned.pinned_at),
    )
    return cursor.rowcount == 1


@dataclass(frozen=True)
class Made:
    """A suggestion as stored, for an archive: for whom (an account id), under which message,
    and what became of it."""

    message_id: int
    user_id: int
    note: str
    title: str
    why: str  # the numbers behind it, as `offer` keeps them
    status: str
    created_at: str
    decided_at: str | None


def made_in(home: Home, conversation_id: int) -> list[Made]:
    """The suggestions made in the thread, in the order they were made."""
    rows = home.db.execute(
        "SELECT message_id, user_id, note, title, why, status, created_at, decided_at "
        "FROM suggestions WHERE conversation_id = ? ORDER BY id",
        (conversation_id,),
    )
    return [Made(*row) for row in rows]


def add_made(home: Home, conversation_id: int, made: Made) -> bool:
    """Keep a suggestion an archive brought into the thread; False when the thread has it
    already (the same person, note and time)."""
    cursor = home.db.execute(
        "INSERT INTO suggestions (message_id, conversation_id, user_id, note, title, why, "
        "status, created_at, decided_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9 "
        "WHERE NOT EXISTS (SELECT 1 FROM suggestions WHERE conversation_id = ?2 AND "
        "user_id = ?3 AND note = ?4 AND created_at = ?8)",
        (
            made.message_id,
            conversation_id,
            made.user_id,
            made.note,
            made.title,
            made.why,
            made.status,
            made.created_at,
            made.decided_at,
        ),
    )
    return cursor.rowcount == 1


def offered_under(db: Connection, message_ids: Sequence[int]) -> list[int]:
    """The suggestions offered under the messages `message_ids`."""
    rows = db.execute(
        f"SELECT id FROM suggestions WHERE message_id IN ({placeholders(message_ids)})",
        list(message_ids),
    )
    return [int(r[0]) for r in rows]


def made_to(db: Connection, user: User, threads: Sequence[int] = ()) -> list[int]:
    """The suggestions made to `user`, and every one made in the threads `threads`."""
    rows = db.execute(
        "SELECT id FROM suggestions WHERE user_id = ? OR conversation_id IN "
        f"({placeholders(threads)})",
        (user.id, *threads),
    )
    return [int(r[0]) for r in rows]


def delete(db: Connection, suggestion_ids: Sequence[int]) -> None:
    """Delete the suggestions `suggestion_ids` (what refers to them went first: the Discord
    messages offering them)."""
    db.execute(
        f"DELETE FROM suggestions WHERE id IN ({placeholders(suggestion_ids)})",
        list(suggestion_ids),
    )


def unpin_all(db: Connection, user: User, threads: Sequence[int] = ()) -> None:
    """Take out every note `user` pinned, and every one pinned into the threads `threads`."""
    db.execute(
        f"DELETE FROM pins WHERE user_id = ? OR conversation_id IN ({placeholders(threads)})",
        (user.id, *threads),
    )
