"""Where a Discord message goes, and what the bot remembers in SQLite: which of Charlie's
channels a message is for (`channel_for`: a DM is its author's private channel, a server
channel the project bound to it), which server channel is which project, and which of its
messages offer which suggested note (`charlie.adapters.discord` calls these; an adapter
writes no SQL).

No discord.py here: ids are plain numbers, so this is tested without a client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from charlie import projects
from charlie.conversations import Channel, private_channel, shared_channel
from charlie.db import now, placeholders
from charlie.errors import CharlieError, NotFound
from charlie.home import Home
from charlie.projects import Project
from charlie.store import Connection
from charlie.users import User

NOT_BOUND = (
    "This channel isn't tied to a Charlie project yet. Bind it with "
    "`/charlie project bind NAME` (a project from `charlie projects`), or DM me to talk "
    "in your private channel."
)


class NotBound(CharlieError):
    """The server channel is not bound to a project."""


@dataclass(frozen=True)
class Place:
    """Where a Discord message was written, as plain ids."""

    channel_id: int  # the channel, or the thread
    guild_id: int | None = None  # None: a DM with the bot
    parent_id: int | None = None  # a thread's channel

    @property
    def is_dm(self) -> bool:
        return self.guild_id is None


def bind(home: Home, place: Place, slug: str, by: User) -> Project:
    """Bind the channel (or thread) to project `slug`, replacing any earlier binding."""
    if place.is_dm:
        raise NotFound("A DM is always your private channel; bind a server channel instead.")
    project = projects.get_project(home, slug)  # NotFound says how to create it
    home.db.execute(
        "INSERT INTO discord_bindings (channel_id, guild_id, project_slug, bound_by, bound_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT(channel_id) DO UPDATE SET "
        "project_slug = excluded.project_slug, bound_by = excluded.bound_by, "
        "bound_at = excluded.bound_at",
        (str(place.channel_id), str(place.guild_id), project.slug, by.id, now()),
    )
    return project


def unbind(home: Home, place: Place) -> str:
    """Remove this channel's own binding; the slug it had."""
    row = home.db.execute(
        "SELECT project_slug FROM discord_bindings WHERE channel_id = ?", (str(place.channel_id),)
    ).fetchone()
    if row is None:
        raise NotFound("This channel is not bound to a project.")
    home.db.execute("DELETE FROM discord_bindings WHERE channel_id = ?", (str(place.channel_id),))
    return str(row[0])


def bound_slug(home: Home, place: Place) -> str | None:
    """The project slug of a server channel: its own binding, else (for a thread) its
    channel's. A DM has none, ever: it is a private channel."""
    if place.is_dm:
        return None
    for channel_id in (place.channel_id, place.parent_id):
        if channel_id is None:
            continue
        row = home.db.execute(
            "SELECT project_slug FROM discord_bindings WHERE channel_id = ?", (str(channel_id),)
        ).fetchone()
        if row is not None:
            return str(row[0])
    return None


def channel_for(home: Home, place: Place, user: User) -> Channel:
    """A DM is the speaker's own private channel; a server channel is its bound project.

    A DM never resolves to a project and a server channel never to a private channel, so a
    message in a server cannot reach anyone's private memory.
    """
    if place.is_dm:
        return private_channel(home, user)
    slug = bound_slug(home, place)
    if slug is None:
        raise NotBound(NOT_BOUND)
    return shared_channel(home, projects.get_project(home, slug))


def remember_suggestion(home: Home, message_id: int, suggestion_id: int) -> None:
    home.db.execute(
        "INSERT OR IGNORE INTO discord_suggestion_messages (message_id, suggestion_id) "
        "VALUES (?, ?)",
        (str(message_id), suggestion_id),
    )


def undecided_suggestion(home: Home, message_id: int) -> int | None:
    """The suggestion a bot message offers, if it has not been answered yet."""
    row = home.db.execute(
        "SELECT suggestion_id FROM discord_suggestion_messages "
        "WHERE message_id = ? AND decided IS NULL",
        (str(message_id),),
    ).fetchone()
    return None if row is None else int(row[0])


def mark_decided(home: Home, message_id: int, decision: str) -> None:
    home.db.execute(
        "UPDATE discord_suggestion_messages SET decided = ? WHERE message_id = ?",
        (decision, str(message_id)),
    )


def forget_offers(db: Connection, suggestion_ids: Sequence[int]) -> None:
    """Forget which messages offered the suggestions `suggestion_ids`, which are about to
    be deleted."""
    db.execute(
        "DELETE FROM discord_suggestion_messages WHERE suggestion_id IN "
        f"({placeholders(suggestion_ids)})",
        list(suggestion_ids),
    )


def detach_bindings(db: Connection, user: User) -> None:
    """Leave the channels `user` bound tied to their projects, bound by no one (they are
    being removed)."""
    db.execute("UPDATE discord_bindings SET bound_by = NULL WHERE bound_by = ?", (user.id,))
