"""Conversations and their messages, kept in SQLite.

A *channel* is where a conversation happens: a shared project (seen by the household) or one
person's private channel (their DM with Charlie, readable by them alone). Every message is
stored before anything else happens to it, so a failing model never loses what was said.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from charlie.db import now
from charlie.home import Home
from charlie.projects import Project
from charlie.trace import Step, steps_from_json, steps_to_json
from charlie.users import User

ASSISTANT = "Charlie"


@dataclass(frozen=True)
class Channel:
    conversation_id: int
    project: Project | None = None
    owner: User | None = None

    @property
    def private(self) -> bool:
        return self.owner is not None

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


def _conversation(home: Home, *, project_id: int | None, owner_id: int | None) -> int:
    private = int(owner_id is not None)
    column, value = ("owner_id", owner_id) if private else ("project_id", project_id)
    home.db.execute(
        "INSERT INTO conversations (project_id, owner_id, private, created_at) "
        f"SELECT ?, ?, ?, ? WHERE NOT EXISTS "
        f"(SELECT 1 FROM conversations WHERE {column} = ? AND private = ?)",
        (project_id, owner_id, private, now(), value, private),
    )
    row = home.db.execute(
        f"SELECT id FROM conversations WHERE {column} = ? AND private = ?", (value, private)
    ).fetchone()
    return int(row[0])


def shared_channel(home: Home, project: Project) -> Channel:
    return Channel(_conversation(home, project_id=project.id, owner_id=None), project=project)


def private_channel(home: Home, user: User) -> Channel:
    """`user`'s own private channel. Only ever built from the person who is asking."""
    return Channel(_conversation(home, project_id=None, owner_id=user.id), owner=user)


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
) -> Message:
    speaker = user.name if (role == "user" and user is not None) else ASSISTANT
    created = now()
    cursor = home.db.execute(
        "INSERT INTO messages (conversation_id, project_id, private, role, user_id, speaker, "
        "content, images, created_at, trace, incomplete) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
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
        ),
    )
    assert cursor.lastrowid is not None
    return Message(
        cursor.lastrowid,
        role,
        speaker,
        content,
        created,
        user.id if user else None,
        images or [],
        trace,
        incomplete,
    )


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
    rows = home.db.execute(
        "SELECT * FROM messages WHERE conversation_id = ? AND id > ? AND incomplete = 0 "
        "AND distill = 1 ORDER BY id LIMIT ?",
        (channel.conversation_id, distilled_upto(home, channel), -1 if limit is None else limit),
    )
    return [_message(row) for row in rows]


def recent(home: Home, channel: Channel, limit: int) -> list[Message]:
    """The last `limit` messages in time, oldest first (imported history takes its place
    by its own times, not by when it was imported)."""
    rows = home.db.execute(
        "SELECT * FROM (SELECT * FROM messages WHERE conversation_id = ? "
        "ORDER BY created_at DESC, id DESC LIMIT ?) ORDER BY created_at, id",
        (channel.conversation_id, limit),
    )
    return [_message(row) for row in rows]


def around(home: Home, channel: Channel, message_id: int, before: int, after: int) -> list[Message]:
    """Message `message_id` of the channel with up to `before` messages before it and `after`
    after it in time, oldest first; empty when the channel has no such message."""
    target = home.db.execute(
        "SELECT created_at, id FROM messages WHERE id = ? AND conversation_id = ?",
        (message_id, channel.conversation_id),
    ).fetchone()
    if target is None:
        return []
    key = (channel.conversation_id, target[0], target[1])
    earlier = home.db.execute(
        "SELECT * FROM messages WHERE conversation_id = ? AND (created_at, id) < (?, ?) "
        "ORDER BY created_at DESC, id DESC LIMIT ?",
        (*key, before),
    ).fetchall()
    later = home.db.execute(
        "SELECT * FROM messages WHERE conversation_id = ? AND (created_at, id) >= (?, ?) "
        "ORDER BY created_at, id LIMIT ?",
        (*key, after + 1),
    ).fetchall()
    return [_message(row) for row in [*reversed(earlier), *later]]


def newest_id(home: Home, channel: Channel) -> int:
    """The id of the channel's last stored message (0 when it has none)."""
    row = home.db.execute(
        "SELECT max(id) FROM messages WHERE conversation_id = ?", (channel.conversation_id,)
    ).fetchone()
    return int(row[0] or 0)


def count_messages(home: Home, channel: Channel) -> int:
    row = home.db.execute(
        "SELECT count(*) FROM messages WHERE conversation_id = ?", (channel.conversation_id,)
    ).fetchone()
    return int(row[0])


def mark_distilled(home: Home, channel: Channel, upto_id: int) -> None:
    home.db.execute(
        "UPDATE conversations SET distilled_upto = max(distilled_upto, ?) WHERE id = ?",
        (upto_id, channel.conversation_id),
    )
