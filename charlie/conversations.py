"""Conversations and their messages, kept in SQLite.

A *channel* is where a conversation happens: a shared project (seen by the household) or one
person's private channel (their DM with Charlie, readable by them alone). Every message is
stored before anything else happens to it, so a failing model never loses what was said.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from charlie.db import now, placeholders, transaction
from charlie.errors import BrokenThread, CharlieError, MessageGone, NotFound
from charlie.home import Home
from charlie.jsonvalue import JSONObject
from charlie.projects import PRIVATE, Project, get_project
from charlie.store import Connection
from charlie.trace import Step, steps_from_json, steps_to_json
from charlie.users import User

ASSISTANT = "Charlie"


@dataclass(frozen=True)
class Channel:
    """One thread of a shared project or of a private channel. `memory_id` is the project's
    (or private channel's) first thread: memory revisions and the distillation claim are
    keyed to it, so every thread feeds the same memory."""

    conversation_id: int
    project: Project | None = None
    owner: User | None = None
    memory_id: int | None = None

    @property
    def private(self) -> bool:
        return self.owner is not None

    @property
    def memory_key(self) -> int:
        return self.conversation_id if self.memory_id is None else self.memory_id

    @property
    def label(self) -> str:
        if self.owner is not None:
            return f"{self.owner.name}'s private channel"
        assert self.project is not None
        return f"project {self.project.slug}"


@dataclass(frozen=True)
class Message:
    id: int
    role: str
    speaker: str
    content: str
    created_at: str
    user_id: int | None = None
    images: list[str] = field(default_factory=list)
    trace: list[Step] | None = None  # the tool trace of a reply
    incomplete: bool = False  # a reply the server cut off mid-stream: kept, never distilled
    source_id: str | None = None  # the id an imported message had where it came from
    parent_id: int | None = None  # the message this one follows (0: the first; None: imported)
    hidden: bool = False  # off the branch the person kept: an alternative, never distilled


@dataclass(frozen=True)
class Thread:
    """A conversation as the thread list shows it."""

    id: int
    title: str
    created_at: str
    updated_at: str
    messages: int
    snippet: str  # the start of its last message
    archived: bool = False
    deleted: bool = False
    source_id: str | None = None


UNTITLED = "New chat"
TITLE_CHARS = 60


def _holder(project_id: int | None, owner_id: int | None) -> tuple[str, int, int]:
    """The column naming whose threads these are, its value, and the `private` flag."""
    if owner_id is not None:
        return "owner_id", owner_id, 1
    assert project_id is not None
    return "project_id", project_id, 0


def _first_thread(home: Home, *, project_id: int | None, owner_id: int | None) -> int:
    """The holder's first thread, made when there is none (one statement: two processes
    asking at once still make one)."""
    column, value, private = _holder(project_id, owner_id)
    stamp = now()
    home.db.execute(
        "INSERT INTO conversations (project_id, owner_id, private, created_at, updated_at) "
        f"SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS "
        f"(SELECT 1 FROM conversations WHERE {column} = ? AND private = ?)",
        (project_id, owner_id, private, stamp, stamp, value, private),
    )
    row = home.db.execute(
        f"SELECT min(id) FROM conversations WHERE {column} = ? AND private = ?", (value, private)
    ).fetchone()
    return int(row[0])


def _thread_of(
    home: Home, first: int, thread: int | None, *, project_id: int | None, owner_id: int | None
) -> int:
    """`thread` when it is one of the holder's threads (not in the trash); without one, the
    thread most recently written in."""
    column, value, private = _holder(project_id, owner_id)
    if thread is None:
        row = home.db.execute(
            f"SELECT id FROM conversations WHERE {column} = ? AND private = ? "
            "AND deleted_at IS NULL AND archived_at IS NULL "
            "ORDER BY updated_at DESC, id DESC LIMIT 1",
            (value, private),
        ).fetchone()
        return first if row is None else int(row[0])
    row = home.db.execute(
        f"SELECT deleted_at FROM conversations WHERE id = ? AND {column} = ? AND private = ?",
        (thread, value, private),
    ).fetchone()
    if row is None:
        raise NotFound(f"There is no thread {thread} here: `charlie threads` lists them.")
    if row[0] is not None:
        raise NotFound(f"Thread {thread} is in the trash: restore it to use it.")
    return thread


def shared_channel(home: Home, project: Project, thread: int | None = None) -> Channel:
    """A thread of `project`: `thread` by id, or the one most recently written in."""
    first = _first_thread(home, project_id=project.id, owner_id=None)
    found = _thread_of(home, first, thread, project_id=project.id, owner_id=None)
    return Channel(found, project=project, memory_id=first)


def private_channel(home: Home, user: User, thread: int | None = None) -> Channel:
    """A thread of `user`'s own private channel. Only ever built from the person asking."""
    first = _first_thread(home, project_id=None, owner_id=user.id)
    found = _thread_of(home, first, thread, project_id=None, owner_id=user.id)
    return Channel(found, owner=user, memory_id=first)


def settle_imported(home: Home, channel: Channel) -> None:
    """After messages were imported into a thread: it takes its place in the list by its
    newest message's time, and, untitled, is named by its first words."""
    home.db.execute(
        "UPDATE conversations SET updated_at = max(ifnull(updated_at, ''), "
        "ifnull((SELECT max(created_at) FROM messages WHERE conversation_id = ?), '')) "
        "WHERE id = ?",
        (channel.conversation_id, channel.conversation_id),
    )
    row = home.db.execute(
        "SELECT content FROM messages WHERE conversation_id = ? AND role = 'user' "
        "AND (SELECT title FROM conversations WHERE id = ?) IS NULL "
        "ORDER BY created_at, id LIMIT 1",
        (channel.conversation_id, channel.conversation_id),
    ).fetchone()
    if row is not None and row[0].strip():
        home.db.execute(
            "UPDATE conversations SET title = ? WHERE id = ? AND title IS NULL",
            (_clean_title(row[0]), channel.conversation_id),
        )


def channel_named(home: Home, user: User, name: str, thread: int | None = None) -> Channel:
    """The channel `name` names for `user`: "private" is the caller's own private channel,
    never anyone else's; any other name a shared project's. With `thread`, that thread of
    it; without, the thread most recently written in."""
    if name == PRIVATE:
        return private_channel(home, user, thread)
    return shared_channel(home, get_project(home, name), thread)


def thread_of(home: Home, channel: Channel, thread: int) -> Channel:
    """Thread `thread` beside `channel` (a `NotFound` when it is not one of its threads)."""
    if channel.project is not None:
        return shared_channel(home, channel.project, thread)
    assert channel.owner is not None
    return private_channel(home, channel.owner, thread)


def new_thread(
    home: Home,
    channel: Channel,
    *,
    title: str | None = None,
    source_id: str | None = None,
    created_at: str | None = None,
) -> Channel:
    """A new, empty thread beside `channel`'s (same project or private channel, same
    memory). With `source_id` (an imported conversation), the thread already imported
    from it is returned instead of a second one."""
    project_id = channel.project.id if channel.project else None
    owner_id = channel.owner.id if channel.owner else None
    stamp = created_at or now()
    cursor = home.db.execute(
        "INSERT OR IGNORE INTO conversations (project_id, owner_id, private, created_at, "
        "updated_at, title, title_set, source_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            project_id,
            owner_id,
            int(channel.private),
            stamp,
            stamp,
            _clean_title(title) if title else None,
            int(bool(title)),
            source_id,
        ),
    )
    if source_id is not None:
        column, value, private = _holder(project_id, owner_id)
        row = home.db.execute(
            f"SELECT id FROM conversations WHERE {column} = ? AND private = ? AND source_id = ?",
            (value, private, source_id),
        ).fetchone()
        thread_id = int(row[0])  # one put in the trash stays there (`restore_thread`)
    else:
        assert cursor.lastrowid is not None
        thread_id = cursor.lastrowid
    return replace(channel, conversation_id=thread_id)


def thread_channels(home: Home, channel: Channel) -> list[Channel]:
    """Every thread beside `channel` (its own included) that is not in the trash."""
    column, value, private = _holder(
        channel.project.id if channel.project else None, channel.owner.id if channel.owner else None
    )
    rows = home.db.execute(
        f"SELECT id FROM conversations WHERE {column} = ? AND private = ? "
        "AND deleted_at IS NULL ORDER BY id",
        (value, private),
    ).fetchall()
    return [replace(channel, conversation_id=int(r[0])) for r in rows]


def every_thread(home: Home, channel: Channel) -> list[int]:
    """Every thread beside `channel`, its own included, the archived ones and those in the
    trash too: all that could have seen one of its messages."""
    column, value, private = _holder(
        channel.project.id if channel.project else None, channel.owner.id if channel.owner else None
    )
    rows = home.db.execute(
        f"SELECT id FROM conversations WHERE {column} = ? AND private = ? ORDER BY id",
        (value, private),
    )
    return [int(r[0]) for r in rows]


def readable_by(home: Home, user: User) -> list[int]:
    """The conversations (threads) `user` may read, not in the trash: every shared
    project's and their own private ones — never another person's."""
    rows = home.db.execute(
        "SELECT id FROM conversations WHERE (private = 0 OR owner_id = ?) "
        "AND deleted_at IS NULL ORDER BY id",
        (user.id,),
    )
    return [int(r[0]) for r in rows]


def thread_holding(home: Home, channel: Channel, message_id: int) -> Channel | None:
    """The thread beside `channel` (not in the trash) that holds message `message_id`."""
    row = home.db.execute(
        "SELECT conversation_id FROM messages WHERE id = ?", (message_id,)
    ).fetchone()
    if row is None:
        return None
    return next((t for t in thread_channels(home, channel) if t.conversation_id == row[0]), None)


def threads(
    home: Home, channel: Channel, *, archived: bool = False, trash: bool = False
) -> list[Thread]:
    """The threads beside `channel`, most recently written first: the active ones, or the
    archived ones, or those in the trash."""
    column, value, private = _holder(
        channel.project.id if channel.project else None, channel.owner.id if channel.owner else None
    )
    where = (
        "deleted_at IS NOT NULL"
        if trash
        else ("deleted_at IS NULL AND archived_at IS " + ("NOT NULL" if archived else "NULL"))
    )
    rows = home.db.execute(
        "SELECT c.*, (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id "
        "AND m.hidden = 0) AS n, (SELECT content FROM messages m WHERE m.conversation_id = c.id "
        "AND m.hidden = 0 ORDER BY created_at DESC, id DESC LIMIT 1) AS last "
        f"FROM conversations c WHERE {column} = ? AND private = ? AND {where} "
        "ORDER BY updated_at DESC, id DESC",
        (value, private),
    ).fetchall()
    return [_thread(row) for row in rows]


def get_thread(home: Home, channel: Channel) -> Thread:
    row = home.db.execute(
        "SELECT c.*, (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id "
        "AND m.hidden = 0) AS n, (SELECT content FROM messages m WHERE m.conversation_id = c.id "
        "AND m.hidden = 0 ORDER BY created_at DESC, id DESC LIMIT 1) AS last "
        "FROM conversations c WHERE id = ?",
        (channel.conversation_id,),
    ).fetchone()
    return _thread(row)


def _thread(row: sqlite3.Row) -> Thread:
    last = " ".join(str(row["last"] or "").split())
    return Thread(
        id=int(row["id"]),
        title=row["title"] or UNTITLED,
        created_at=row["created_at"],
        updated_at=row["updated_at"] or row["created_at"],
        messages=int(row["n"]),
        snippet=last[:120] + ("…" if len(last) > 120 else ""),
        archived=row["archived_at"] is not None,
        deleted=row["deleted_at"] is not None,
        source_id=row["source_id"],
    )


def _clean_title(title: str) -> str:
    words = " ".join(title.split())
    if len(words) <= TITLE_CHARS:
        return words
    cut = words[:TITLE_CHARS].rsplit(" ", 1)[0] or words[:TITLE_CHARS]
    return cut.rstrip(" ,.;:") + "…"


def retitle(home: Home, conversation_id: int) -> None:
    """An untitled thread named again by its first message (after messages were forgotten:
    the name must not keep their words); a title someone chose stays."""
    row = home.db.execute(
        "SELECT content FROM messages WHERE conversation_id = ? AND role = 'user' "
        "AND trim(content) <> '' ORDER BY id LIMIT 1",
        (conversation_id,),
    ).fetchone()
    home.db.execute(
        "UPDATE conversations SET title = ? WHERE id = ? AND title_set = 0",
        (_clean_title(row[0]) if row else None, conversation_id),
    )


def rename_thread(home: Home, channel: Channel, title: str) -> None:
    """A title the person chose: it is never replaced by a generated one."""
    if not title.strip():
        raise CharlieError("A thread's title can't be empty.")
    if len(title) > 500:
        raise CharlieError("That title is too long: keep it under 500 characters.")
    home.db.execute(
        "UPDATE conversations SET title = ?, title_set = 1 WHERE id = ?",
        (_clean_title(title), channel.conversation_id),
    )


def archive_thread(home: Home, channel: Channel, archived: bool = True) -> None:
    home.db.execute(
        "UPDATE conversations SET archived_at = ? WHERE id = ?",
        (now() if archived else None, channel.conversation_id),
    )


def trash_thread(home: Home, channel: Channel) -> None:
    """Into the trash: hidden from the list and from recall, kept whole, undoable
    (`restore_thread`). The memory it fed keeps what was distilled from it."""
    home.db.execute(
        "UPDATE conversations SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
        (now(), channel.conversation_id),
    )


def restore_thread(home: Home, channel: Channel, thread_id: int) -> Channel:
    """Thread `thread_id` (beside `channel`) out of the trash."""
    column, value, private = _holder(
        channel.project.id if channel.project else None, channel.owner.id if channel.owner else None
    )
    cursor = home.db.execute(
        f"UPDATE conversations SET deleted_at = NULL WHERE id = ? AND {column} = ? "
        "AND private = ? AND deleted_at IS NOT NULL",
        (thread_id, value, private),
    )
    if cursor.rowcount != 1:
        raise NotFound(f"Thread {thread_id} is not in the trash here.")
    return replace(channel, conversation_id=thread_id)


def add_message(
    home: Home,
    channel: Channel,
    role: str,
    content: str,
    *,
    user: User | None = None,
    images: list[str] | None = None,
    trace: list[Step] | None = None,
    incomplete: bool = False,
    parent_id: int | None = None,
    replacing: Message | None = None,
    hidden: bool = False,
) -> Message:
    """Store a message at the end of the thread's kept branch, or after `parent_id` (a
    reply, or an alternative: a regenerated reply, an edited message) — `MessageGone` when
    that one was forgotten meanwhile: nothing is stored after a forgotten message. A message
    after one set aside meanwhile is set aside too. With `replacing`, that message and what
    followed it are set aside in the same transaction (an alternative takes its place, or
    nothing changes); with `hidden`, the new one is stored set aside (an alternative not
    chosen). A new message's id is above every id ever given (AUTOINCREMENT), so none can
    follow itself."""
    speaker = user.name if (role == "user" and user is not None) else ASSISTANT
    created = now()
    follows = (
        "?"
        if parent_id is not None
        else "(SELECT ifnull(max(id), 0) FROM messages WHERE conversation_id = ? AND hidden = 0)"
    )
    values = (
        channel.conversation_id,
        channel.project.id if channel.project else None,
        int(channel.private),
        role,
        user.id if user else None,
        speaker,
        content,
        json.dumps(images or []),
        created,
        None if trace is None else json.dumps(steps_to_json(trace), ensure_ascii=False),
        int(incomplete),
        parent_id if parent_id is not None else channel.conversation_id,
    )
    with transaction(home.db):
        if parent_id and not _holds(home, channel, parent_id):
            raise MessageGone(
                f"Message {parent_id} was forgotten meanwhile, so nothing was stored after it. "
                "Try again."
            )
        if replacing is not None:
            _show(home, [replacing.id, *_subtree(home, replacing.id)], shown=False)
        cursor = home.db.execute(
            "INSERT INTO messages (conversation_id, project_id, private, role, user_id, "
            "speaker, content, images, created_at, trace, incomplete, parent_id) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {follows})",
            values,
        )
        new_id = cursor.lastrowid
        assert new_id is not None
        home.db.execute(  # after a message set aside (meanwhile, or by choice): aside too
            "UPDATE messages SET hidden = 1 WHERE id = ? AND (? <> 0 OR EXISTS "
            "(SELECT 1 FROM messages p WHERE p.id = messages.parent_id AND p.hidden = 1))",
            (new_id, int(hidden)),
        )
        home.db.execute(  # the thread moves up the list; its first words name it until renamed
            "UPDATE conversations SET updated_at = ?, title = CASE WHEN title IS NULL AND ? "
            "THEN ? ELSE title END WHERE id = ?",
            (
                created,
                role == "user" and bool(content.strip()),
                _clean_title(content),
                channel.conversation_id,
            ),
        )
        row = home.db.execute(
            "SELECT parent_id, hidden FROM messages WHERE id = ?", (new_id,)
        ).fetchone()
    return Message(
        new_id,
        role,
        speaker,
        content,
        created,
        user.id if user else None,
        images or [],
        trace,
        incomplete,
        parent_id=row[0],
        hidden=bool(row[1]),
    )


def _holds(home: Home, channel: Channel, message_id: int) -> bool:
    """Whether message `message_id` is stored in this thread."""
    row = home.db.execute(
        "SELECT 1 FROM messages WHERE id = ? AND conversation_id = ?",
        (message_id, channel.conversation_id),
    ).fetchone()
    return row is not None


def _message(row: object) -> Message:
    r = dict(row)  # type: ignore[call-overload]
    return Message(
        id=r["id"],
        role=r["role"],
        speaker=r["speaker"],
        content=r["content"],
        created_at=r["created_at"],
        user_id=r["user_id"],
        images=json.loads(r["images"]),
        trace=steps_from_json(json.loads(r["trace"])) if r.get("trace") else None,
        incomplete=bool(r["incomplete"]),
        source_id=r.get("source_id"),
        parent_id=r.get("parent_id"),
        hidden=bool(r.get("hidden", 0)),
    )


def distilled_upto(home: Home, channel: Channel) -> int:
    row = home.db.execute(
        "SELECT distilled_upto FROM conversations WHERE id = ?", (channel.conversation_id,)
    ).fetchone()
    return int(row[0])


def undistilled(home: Home, channel: Channel, *, limit: int | None = None) -> list[Message]:
    """Messages not yet folded into memory, oldest first (at most `limit`, the oldest ones).

    A reply cut off mid-stream is not among them: only whole replies are distilled. Nor is
    history imported without asking for its distillation (`distill` = 0)."""
    sql = (
        "SELECT * FROM messages WHERE conversation_id = ? AND id > ? AND incomplete = 0 "
        "AND distill = 1 AND hidden = 0 ORDER BY id"
    )
    params: tuple[int, ...] = (channel.conversation_id, distilled_upto(home, channel))
    rows = (
        home.db.execute(sql, params)
        if limit is None
        else home.db.execute(sql + " LIMIT ?", (*params, limit))
    )
    return [_message(row) for row in rows]


def recent(
    home: Home, channel: Channel, limit: int, *, upto: Message | None = None
) -> list[Message]:
    """The last `limit` messages in time (up to and with `upto`, when given), oldest first
    (imported history takes its place by its own times, not by when it was imported)."""
    until = "" if upto is None else "AND (created_at, id) <= (?, ?) "
    rows = home.db.execute(
        "SELECT * FROM (SELECT * FROM messages WHERE conversation_id = ? AND hidden = 0 "
        f"{until}ORDER BY created_at DESC, id DESC LIMIT ?) ORDER BY created_at, id",
        (
            channel.conversation_id,
            *(() if upto is None else (upto.created_at, upto.id)),
            limit,
        ),
    )
    return [_message(row) for row in rows]


def around(home: Home, channel: Channel, message_id: int, before: int, after: int) -> list[Message]:
    """Message `message_id` of the channel with up to `before` messages before it and `after`
    after it in time, oldest first; empty when the channel has no such message."""
    # One statement (one round trip to a database server): the messages before the
    # message in time (newest first, turned round here), it and those after it.
    place = (
        "(SELECT created_at, id FROM messages WHERE id = ? AND conversation_id = ? AND hidden = 0)"
    )
    rows = home.db.execute(
        "SELECT * FROM (SELECT *, 0 AS side FROM messages WHERE conversation_id = ? "
        f"AND hidden = 0 AND (created_at, id) < {place} "
        "ORDER BY created_at DESC, id DESC LIMIT ?) AS earlier UNION ALL "
        "SELECT * FROM (SELECT *, 1 AS side FROM messages WHERE conversation_id = ? "
        f"AND hidden = 0 AND (created_at, id) >= {place} "
        "ORDER BY created_at, id LIMIT ?) AS later",
        (channel.conversation_id, message_id, channel.conversation_id, before,
         channel.conversation_id, message_id, channel.conversation_id, after + 1),
    ).fetchall()  # fmt: skip
    earlier = [row for row in rows if row["side"] == 0]
    later = [row for row in rows if row["side"] == 1]
    if not any(row["id"] == message_id for row in later):
        return []  # no such message in the channel
    return [_message(row) for row in [*reversed(earlier), *later]]


def newest_id(home: Home, channel: Channel) -> int:
    """The id of the channel's last stored message (0 when it has none)."""
    row = home.db.execute(
        "SELECT max(id) FROM messages WHERE conversation_id = ? AND hidden = 0",
        (channel.conversation_id,),
    ).fetchone()
    return int(row[0] or 0)


def count_messages(home: Home, channel: Channel) -> int:
    row = home.db.execute(
        "SELECT count(*) FROM messages WHERE conversation_id = ? AND hidden = 0",
        (channel.conversation_id,),
    ).fetchone()
    return int(row[0])


def mark_distilled(home: Home, channel: Channel, upto_id: int) -> None:
    home.db.execute(
        "UPDATE conversations SET distilled_upto = max(distilled_upto, ?) WHERE id = ?",
        (upto_id, channel.conversation_id),
    )


@dataclass(frozen=True)
class DistillFailures:
    """The model failed the thread's last `times` distillations, the last after message
    `after_id` (`charlie.chat.turn` waits longer after each)."""

    after_id: int
    times: int


def distill_failures(home: Home, channel: Channel) -> DistillFailures | None:
    """The thread's failed distillations in a row (None when the last one did not fail)."""
    row = home.db.execute(
        "SELECT distill_failed_at, distill_failures FROM conversations WHERE id = ?",
        (channel.conversation_id,),
    ).fetchone()
    if row is None or row["distill_failed_at"] is None:
        return None
    return DistillFailures(int(row["distill_failed_at"]), int(row["distill_failures"]))


def note_distill_failure(home: Home, channel: Channel) -> None:
    home.db.execute(
        "UPDATE conversations SET distill_failed_at = ?, distill_failures = distill_failures + 1 "
        "WHERE id = ?",
        (newest_id(home, channel), channel.conversation_id),
    )


def clear_distill_failures(home: Home, channel: Channel) -> None:
    home.db.execute(
        "UPDATE conversations SET distill_failed_at = NULL, distill_failures = 0 "
        "WHERE id = ? AND distill_failures > 0",
        (channel.conversation_id,),
    )


def count_since(home: Home, channel: Channel, message_id: int) -> int:
    """How many messages the thread stored after message `message_id` (set aside included)."""
    (count,) = home.db.execute(
        "SELECT count(*) FROM messages WHERE conversation_id = ? AND id > ?",
        (channel.conversation_id, message_id),
    ).fetchone()
    return int(count)


def still_stored(home: Home, ids: Sequence[int]) -> set[int]:
    """Those of the messages `ids` still stored (not forgotten meanwhile)."""
    marks = ", ".join("?" * len(ids))
    rows = home.db.execute(f"SELECT id FROM messages WHERE id IN ({marks})", list(ids))
    return {int(row[0]) for row in rows}


def speakers_of(home: Home, channel: Channel, ids: Sequence[int]) -> dict[int, str]:
    """Who said each of the messages `ids` that is stored in one of `channel`'s threads."""
    threads = every_thread(home, channel)
    if not ids or not threads:
        return {}
    rows = home.db.execute(
        f"SELECT id, speaker FROM messages WHERE id IN ({placeholders(ids)}) "
        f"AND conversation_id IN ({placeholders(threads)})",
        [*ids, *threads],
    )
    return {int(row[0]): str(row[1]) for row in rows}


# ---------------------------------------------------------------- branches


def get_message(home: Home, channel: Channel, message_id: int) -> Message:
    """Message `message_id` of this thread (404 otherwise: the same answer whether or not it
    exists elsewhere)."""
    row = home.db.execute(
        "SELECT * FROM messages WHERE id = ? AND conversation_id = ?",
        (message_id, channel.conversation_id),
    ).fetchone()
    if row is None:
        raise NotFound(f"There is no message {message_id} in this conversation.")
    return _message(row)


def alternatives(home: Home, channel: Channel, shown: list[Message]) -> dict[int, list[int]]:
    """For each shown message that has alternatives (the replies regenerated in its place,
    the versions of an edited message), the ids of all of them, oldest first."""
    parents = sorted({m.parent_id for m in shown if m.parent_id is not None})
    found: dict[tuple[int, str], list[int]] = {}
    for start in range(0, len(parents), 500):
        part = parents[start : start + 500]
        for row in home.db.execute(
            "SELECT id, parent_id, role FROM messages WHERE conversation_id = ? AND parent_id IN "
            f"({','.join('?' * len(part))}) ORDER BY id",
            (channel.conversation_id, *part),
        ):
            found.setdefault((int(row[1]), str(row[2])), []).append(int(row[0]))
    out: dict[int, list[int]] = {}
    for m in shown:
        if m.parent_id is None:
            continue
        siblings = found.get((m.parent_id, m.role), [])
        if len(siblings) > 1:
            out[m.id] = siblings
    return out


def _subtree(home: Home, message_id: int) -> list[int]:
    """The ids of every message that follows `message_id` on any branch. UNION, not UNION
    ALL: each message is visited once, so even a chain that loops (a damaged database) ends;
    a loop through `message_id` is a `BrokenThread` (a loop elsewhere cannot be reached
    from it: each message follows one message only)."""
    rows = home.db.execute(
        "WITH RECURSIVE below(id) AS (SELECT id FROM messages WHERE parent_id = ? "
        "UNION SELECT m.id FROM messages m JOIN below b ON m.parent_id = b.id) "
        "SELECT id FROM below",
        (message_id,),
    ).fetchall()
    found = [int(r[0]) for r in rows]
    if message_id in found:
        raise _broken(home, message_id)
    return found


def _broken(home: Home, message_id: int) -> BrokenThread:
    return BrokenThread(
        f"Message {message_id} follows itself or a later message in {home.settings.db_path} "
        "(the file was changed by hand, or is damaged), so Charlie cannot tell its branch "
        "and stopped; nothing was changed. Keep a copy of the file, then set that message's "
        "parent_id to the id of the message it answers (0 for a thread's first message)."
    )


def others_after(home: Home, message: Message, user: User) -> list[str]:
    """The names of the other people whose shown messages follow `message` on its branch:
    setting it aside would set theirs aside too."""
    below = _subtree(home, message.id)
    names: set[str] = set()
    for start in range(0, len(below), 500):
        part = below[start : start + 500]
        names |= {
            str(r[0])
            for r in home.db.execute(
                "SELECT DISTINCT speaker FROM messages WHERE role = 'user' AND hidden = 0 "
                f"AND user_id IS NOT ? AND id IN ({','.join('?' * len(part))})",
                (user.id, *part),
            )
        }
    return sorted(names)


def set_aside(home: Home, channel: Channel, message: Message) -> None:
    """Hide `message` and everything after it on its branch: kept as an alternative, left
    out of the conversation, the model's context and distillation."""
    with transaction(home.db):
        _show(home, [message.id, *_subtree(home, message.id)], shown=False)


def _show(home: Home, ids: list[int], *, shown: bool) -> None:
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        home.db.execute(
            f"UPDATE messages SET hidden = ? WHERE id IN ({','.join('?' * len(part))})",
            (int(not shown), *part),
        )


def shown_siblings(home: Home, channel: Channel, message: Message) -> list[Message]:
    """The alternatives of `message` now shown (choosing it sets them aside)."""
    rows = home.db.execute(
        "SELECT * FROM messages WHERE conversation_id = ? AND parent_id IS ? AND role = ? "
        "AND id != ? AND hidden = 0",
        (channel.conversation_id, message.parent_id, message.role, message.id),
    ).fetchall()
    return [_message(row) for row in rows]


def choose(home: Home, channel: Channel, message_id: int) -> None:
    """Keep the branch through alternative `message_id`: its siblings and what followed them
    are hidden; it and the newest path below it are shown."""
    chosen = get_message(home, channel, message_id)
    if chosen.parent_id is None:
        return
    with transaction(home.db):
        _choose(home, channel, chosen)


def _choose(home: Home, channel: Channel, chosen: Message) -> None:
    for row in home.db.execute(
        "SELECT id FROM messages WHERE conversation_id = ? AND parent_id = ? AND role = ? "
        "AND id != ?",
        (channel.conversation_id, chosen.parent_id, chosen.role, chosen.id),
    ).fetchall():
        _show(home, [int(row[0]), *_subtree(home, int(row[0]))], shown=False)
    path = [chosen.id]
    while True:  # down the newest child at each step: ids only grow, so this ends
        row = home.db.execute(
            "SELECT max(id) FROM messages WHERE parent_id = ? AND conversation_id = ?",
            (path[-1], channel.conversation_id),
        ).fetchone()
        if row[0] is None:
            break
        if int(row[0]) <= path[-1]:  # follows itself or a later one: a damaged database
            raise _broken(home, int(row[0]))
        path.append(int(row[0]))
    _show(home, path, shown=True)
    _show(home, sorted(set(_subtree(home, chosen.id)) - set(path)), shown=False)


# ---------------------------------------------------------------- forgetting


def thread_message_ids(home: Home, channel: Channel) -> list[int]:
    """Every message of the thread, set aside ones included, oldest first."""
    rows = home.db.execute(
        "SELECT id FROM messages WHERE conversation_id = ? ORDER BY id", (channel.conversation_id,)
    ).fetchall()
    return [int(r[0]) for r in rows]


def answer_ids(home: Home, message_id: int) -> list[int]:
    """Charlie's replies to message `message_id`, the ones set aside included, oldest first."""
    rows = home.db.execute(
        "SELECT id FROM messages WHERE parent_id = ? AND role = 'assistant' ORDER BY id",
        (message_id,),
    ).fetchall()
    return [int(r[0]) for r in rows]


def answers_to(home: Home, asked: Sequence[int]) -> list[tuple[int, int]]:
    """(id, thread) of Charlie's replies to any of the messages `asked`, in any thread."""
    rows = home.db.execute(
        f"SELECT id, conversation_id FROM messages WHERE role = 'assistant' "
        f"AND parent_id IN ({placeholders(asked)})",
        list(asked),
    ).fetchall()
    return [(int(r[0]), int(r[1])) for r in rows]


def said_elsewhere(home: Home, word: str, ids: Sequence[int]) -> bool:
    """Whether a stored message other than `ids` holds `word` (lower case), in any thread."""
    found = home.db.execute(
        f"SELECT 1 FROM messages WHERE id NOT IN ({placeholders(ids)}) "
        "AND instr(lower(content), ?) > 0 LIMIT 1",
        [*ids, word],
    ).fetchone()
    return found is not None


@dataclass(frozen=True)
class StoredTrace:
    """A reply's tool trace as stored (JSON steps, not read into `Step`s)."""

    message_id: int
    conversation_id: int
    steps: list[JSONObject]


def traces_naming(home: Home, threads: Sequence[int]) -> list[StoredTrace]:
    """The traces that may name a message: every one with a message search hit, and every
    one in the threads `threads`."""
    rows = home.db.execute(
        "SELECT id, conversation_id, trace FROM messages WHERE trace IS NOT NULL AND "
        f"(trace LIKE '%message:%' OR conversation_id IN ({placeholders(threads)}))",
        list(threads),
    ).fetchall()
    return [
        StoredTrace(int(r["id"]), int(r["conversation_id"]), json.loads(r["trace"])) for r in rows
    ]


def rewrite_trace(home: Home, message_id: int, steps: list[JSONObject]) -> None:
    home.db.execute(
        "UPDATE messages SET trace = ? WHERE id = ?",
        (json.dumps(steps, ensure_ascii=False), message_id),
    )


def failed_distillations_over(home: Home, ids: Sequence[int]) -> set[int]:
    """The failed distillations (with an error) whose messages included one of `ids`."""
    return {
        int(r[0])
        for r in home.db.execute(
            "SELECT DISTINCT d.id FROM distillations d JOIN messages m ON "
            "m.conversation_id = d.conversation_id AND m.id BETWEEN d.first_message_id AND "
            f"d.last_message_id WHERE d.error IS NOT NULL AND m.id IN ({placeholders(ids)})",
            list(ids),
        )
    }


@dataclass(frozen=True)
class Beside:
    """A message and the ids of the messages just before and after it in its thread."""

    message_id: int
    conversation_id: int
    neighbours: list[int]


def beside(home: Home, ids: Sequence[int]) -> list[Beside]:
    """Each stored message of `ids` with its neighbours in time in its thread (the one just
    before, the one just after), leaving out those among `ids`."""
    rows = home.db.execute(
        f"SELECT id, conversation_id, created_at FROM messages WHERE id IN ({placeholders(ids)})",
        list(ids),
    ).fetchall()
    out, taken = [], set(ids)
    for message_id, conversation_id, created_at in rows:
        near_ids = []
        for where, order in (("<", "DESC"), (">", "ASC")):
            near = home.db.execute(
                "SELECT id FROM messages WHERE conversation_id = ? AND "
                f"(created_at, id) {where} (?, ?) ORDER BY created_at {order}, id {order} LIMIT 1",
                (conversation_id, created_at, message_id),
            ).fetchone()
            if near is not None and int(near[0]) not in taken:
                near_ids.append(int(near[0]))
        out.append(Beside(message_id, conversation_id, near_ids))
    return out


def delete_messages(home: Home, ids: Sequence[int]) -> None:
    """Delete the messages `ids` (in the caller's transaction); a message that followed one
    of them follows its parent now, and an untitled thread is named again (`retitle`)."""
    marks = placeholders(ids)
    for message_id in ids:
        row = home.db.execute(
            "SELECT parent_id FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        if row is None:
            continue
        home.db.execute(
            "UPDATE messages SET parent_id = ? WHERE parent_id = ?", (row["parent_id"], message_id)
        )
    threads = [
        int(r[0])
        for r in home.db.execute(
            f"SELECT DISTINCT conversation_id FROM messages WHERE id IN ({marks})", list(ids)
        )
    ]
    home.db.execute(f"DELETE FROM messages WHERE id IN ({marks})", list(ids))
    for thread in threads:
        retitle(home, thread)  # an untitled thread was named by its words


def newest_stored_id(home: Home) -> int:
    """The largest message id stored, in any thread (0 when there is none)."""
    (newest,) = home.db.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
    return int(newest)


def last_said_by(home: Home, channel: Channel, user: User) -> int | None:
    """The id of `user`'s last message in any thread of `channel`'s project or private
    channel (None when they have none there)."""
    row = home.db.execute(
        "SELECT m.id FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE m.role = 'user' AND m.user_id = ? AND c.private = ? AND "
        "ifnull(c.project_id, 0) = ? AND ifnull(c.owner_id, 0) = ? ORDER BY m.id DESC LIMIT 1",
        (
            user.id,
            int(channel.private),
            channel.project.id if channel.project else 0,
            channel.owner.id if channel.owner else 0,
        ),
    ).fetchone()
    return None if row is None else int(row[0])


# ---------------------------------------------------------------- recall and provenance


def count_in(home: Home, conversation_ids: Sequence[int]) -> int:
    """How many messages the conversations `conversation_ids` store (set aside included)."""
    marks = ",".join("?" * len(conversation_ids))
    (count,) = home.db.execute(
        f"SELECT count(*) FROM messages WHERE conversation_id IN ({marks})", conversation_ids
    ).fetchone()
    return int(count)


def first_time(home: Home, conversation_id: int) -> str | None:
    """When the conversation's earliest message was written (None when it has none)."""
    row = home.db.execute(
        "SELECT min(created_at) FROM messages WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()
    return None if row[0] is None else str(row[0])


def shown_places(home: Home, ids: Sequence[int]) -> dict[int, tuple[int, str]]:
    """Each shown (not set aside) message of `ids`: its conversation and time."""
    out: dict[int, tuple[int, str]] = {}
    for start in range(0, len(ids), 500):
        part = list(ids[start : start + 500])
        for row in home.db.execute(
            f"SELECT id, conversation_id, created_at FROM messages WHERE hidden = 0 AND id IN "
            f"({','.join('?' * len(part))})",
            part,
        ):
            out[int(row[0])] = (int(row[1]), str(row[2]))
    return out


def sources_in(home: Home, channel: Channel, ids: Sequence[int]) -> list[tuple[int, str, str, str]]:
    """(id, speaker, time, text) of the messages `ids` held in a thread of `channel`'s
    project or private channel, oldest first; another channel's are never returned."""
    marks = ", ".join("?" * len(ids))
    holder = (
        "c.project_id = ? AND c.private = 0"
        if channel.project
        else "c.owner_id = ? AND c.private = 1"
    )
    owner = channel.project.id if channel.project else (channel.owner.id if channel.owner else -1)
    rows = home.db.execute(
        f"SELECT m.id, m.speaker, m.created_at, m.content FROM messages m JOIN conversations c "
        f"ON c.id = m.conversation_id WHERE m.id IN ({marks}) AND {holder} ORDER BY m.id",
        (*ids, owner),
    ).fetchall()
    return [(int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]


# ---------------------------------------------------------------- export, import, backup


@dataclass(frozen=True)
class Holder:
    """Whose threads these are: a shared project's, or one person's private channel's."""

    project_id: int | None
    owner_id: int | None

    @property
    def private(self) -> int:
        return int(self.owner_id is not None)


@dataclass(frozen=True)
class StoredThread:
    """A thread as stored: every column by name (an archive copies them all, so a column
    added later travels too), and the few an export reads itself."""

    id: int
    title: str | None
    archived_at: str | None
    deleted_at: str | None
    distilled_upto: int
    columns: JSONObject


def stored_threads(home: Home, holder: Holder) -> list[StoredThread]:
    """The holder's threads, oldest first, the archived ones and those in the trash included."""
    column, value, private = _holder(holder.project_id, holder.owner_id)
    rows = home.db.execute(
        f"SELECT * FROM conversations WHERE {column} = ? AND private = ? ORDER BY id",
        (value, private),
    )
    return [
        StoredThread(
            int(r["id"]),
            r["title"],
            r["archived_at"],
            r["deleted_at"],
            int(r["distilled_upto"]),
            dict(r),
        )
        for r in rows
    ]


def thread_columns(home: Home) -> set[str]:
    """The names of a thread's columns (what a restored thread may be given)."""
    return {str(row[1]) for row in home.db.execute("PRAGMA table_info(conversations)")}


def newest_thread_id(home: Home) -> int:
    """The largest thread id stored, in any project or channel (0 when there is none)."""
    (newest,) = home.db.execute("SELECT ifnull(max(id), 0) FROM conversations").fetchone()
    return int(newest)


def threads_like(
    home: Home,
    holder: Holder,
    *,
    upto: int,
    source_id: str | int | float | None,
    created_at: str | int | float | None,
) -> list[int]:
    """The holder's threads with ids up to `upto`, oldest first, that a restored thread may
    be: those imported from `source_id`, else (without one) those made at `created_at` and
    not imported, else (without either) every one."""
    column, value, private = _holder(holder.project_id, holder.owner_id)
    key: tuple[str | int | float, ...]
    if source_id is not None:
        match, key = "source_id = ?", (source_id,)
    elif created_at is not None:
        match, key = "created_at = ? AND source_id IS NULL", (created_at,)
    else:
        match, key = "1", ()
    rows = home.db.execute(
        f"SELECT id FROM conversations WHERE {column} = ? AND private = ? AND id <= ? "
        f"AND {match} ORDER BY id",
        (value, private, upto, *key),
    )
    return [int(r[0]) for r in rows]


def add_thread_as(home: Home, holder: Holder, columns: dict[str, str | int | float | None]) -> int:
    """A new thread of `holder` with these `columns` (a restored thread's, named as
    `thread_columns` names them; whose thread it is comes from `holder`); its id."""
    unknown = set(columns) - thread_columns(home)
    if unknown:
        raise ValueError(f"a thread has no column {sorted(unknown)[0]!r}")
    names = ["project_id", "owner_id", "private", *columns]
    cursor = home.db.execute(
        f"INSERT INTO conversations ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
        (holder.project_id, holder.owner_id, holder.private, *columns.values()),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def export_rows(home: Home, conversation_id: int) -> Iterator[sqlite3.Row]:
    """Every column of every message of the thread, set aside ones included, oldest first,
    with the account name of the person who wrote it as `user_name` (an export copies the
    columns as stored)."""
    yield from home.db.execute(
        "SELECT m.*, u.name AS user_name FROM messages m LEFT JOIN users u "
        "ON u.id = m.user_id WHERE m.conversation_id = ? ORDER BY m.id",
        (conversation_id,),
    )


def shown_in_time(home: Home, conversation_id: int) -> Iterator[sqlite3.Row]:
    """`speaker`, `content` and `created_at` of the thread's shown messages, in time order."""
    yield from home.db.execute(
        "SELECT speaker, content, created_at FROM messages WHERE conversation_id = ? "
        "AND hidden = 0 ORDER BY created_at, id",
        (conversation_id,),
    )


@dataclass(frozen=True)
class ImportedMessage:
    """A message brought in from a file (an import, a restored archive). The last five
    fields default to what the table gives a message stored without them."""

    conversation_id: int
    project_id: int | None
    private: int
    role: str
    user_id: int | None
    speaker: str
    content: str
    created_at: str
    source_id: str | None
    distill: int
    images: str = "[]"  # JSON
    trace: str | None = None  # JSON
    incomplete: int = 0
    parent_id: int | None = None
    hidden: int = 0


def add_imported(home: Home, message: ImportedMessage) -> int | None:
    """Store `message` (in the caller's transaction) and return its id; None when the
    thread holds it already (the same source id)."""
    cursor = home.db.execute(
        "INSERT INTO messages (conversation_id, project_id, private, role, user_id, speaker, "
        "content, images, created_at, trace, incomplete, source_id, distill, parent_id, hidden) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (
            message.conversation_id,
            message.project_id,
            message.private,
            message.role,
            message.user_id,
            message.speaker,
            message.content,
            message.images,
            message.created_at,
            message.trace,
            message.incomplete,
            message.source_id,
            message.distill,
            message.parent_id,
            message.hidden,
        ),
    )
    if cursor.rowcount == 1 and cursor.lastrowid is not None:
        return cursor.lastrowid
    return None


def imported_id(home: Home, conversation_id: int, source_id: str | None) -> int | None:
    """The id of the message the thread imported from `source_id`."""
    row = home.db.execute(
        "SELECT id FROM messages WHERE conversation_id = ? AND source_id = ?",
        (conversation_id, source_id),
    ).fetchone()
    return None if row is None else int(row[0])


def same_unsourced(
    home: Home, conversation_id: int, created_at: str, role: str, speaker: str, content: str
) -> int | None:
    """The id of a message of the thread with no source id and this time, role, speaker and
    text (a restored archive's message that is here already)."""
    row = home.db.execute(
        "SELECT id FROM messages WHERE conversation_id = ? AND created_at = ? AND role = ? "
        "AND speaker = ? AND content = ? AND source_id IS NULL",
        (conversation_id, created_at, role, speaker, content),
    ).fetchone()
    return None if row is None else int(row[0])


def distill_imported(home: Home, channel: Channel) -> None:
    """Mark the thread's imported messages not yet distilled to be folded into memory."""
    home.db.execute(
        "UPDATE messages SET distill = 1 WHERE conversation_id = ? AND distill = 0 "
        "AND source_id IS NOT NULL AND id > ?",
        (channel.conversation_id, distilled_upto(home, channel)),
    )


def count_stored(db: Connection) -> int:
    """How many messages the database `db` stores (a backup's copy, say)."""
    return int(db.execute("SELECT count(*) FROM messages").fetchone()[0])


# ---------------------------------------------------------------- removing a person


def private_thread_ids(db: Connection, user: User) -> list[int]:
    """Every thread of `user`'s private channel, those in the trash included."""
    rows = db.execute(
        "SELECT id FROM conversations WHERE owner_id = ? AND private = 1", (user.id,)
    ).fetchall()
    return [int(r[0]) for r in rows]


def delete_threads(db: Connection, threads: Sequence[int]) -> None:
    """Delete the threads `threads` and their messages, in the caller's transaction (what
    else refers to them goes first: their memory revisions, distillations, suggestions)."""
    marks = placeholders(threads)
    db.execute(f"DELETE FROM messages WHERE conversation_id IN ({marks})", list(threads))
    db.execute(f"DELETE FROM conversations WHERE id IN ({marks})", list(threads))


def detach_messages(db: Connection, user: User) -> None:
    """Leave what `user` said tied to no account (they are being removed): each message
    keeps its speaker's name."""
    db.execute("UPDATE messages SET user_id = NULL WHERE user_id = ?", (user.id,))


def ids_in_threads(db: Connection, threads: Sequence[int]) -> list[int]:
    """The ids of every message of the threads `threads`, oldest first."""
    marks = ",".join("?" * len(threads))
    rows = db.execute(
        f"SELECT id FROM messages WHERE conversation_id IN ({marks}) ORDER BY id", list(threads)
    )
    return [int(r[0]) for r in rows]


def count_shared_by(db: Connection, user_id: int) -> int:
    """How many messages the person `user_id` wrote in shared projects."""
    return int(
        db.execute(
            "SELECT count(*) FROM messages WHERE user_id = ? AND private = 0", (user_id,)
        ).fetchone()[0]
    )
