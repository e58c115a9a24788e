"""Removing a person from the household everywhere Charlie keeps something of theirs.

Removing takes everything that was theirs alone (their private channel and its memory,
sessions, tokens, usage, Discord links) and keeps what they said in shared projects, under
their name. The database part is `remove_user` (one transaction). The search index of
messages is derived data in its own file: it must not keep a word of the removed person's
private channel either, so their messages are dropped from it at once rather than at its
next check. Every front end (the command line, the app) removes people through
`remove_person`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from charlie import conversations, users
from charlie import db as database
from charlie.db import transaction
from charlie.errors import CharlieError, Conflict
from charlie.home import Home
from charlie.household import discord_links, discord_places, forget, signin, tokens
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.retrieval import suggestions, usage
from charlie.retrieval.message_index import UPTO, WORDS
from charlie.retrieval.recall import recaller_for
from charlie.store import Connection
from charlie.users import User, admins, get_user

# What is done with a table's rows that refer to a person being removed.
LetGo = Callable[[Connection, User], object]


def _withdraw_suggestions(db: Connection, user: User) -> None:
    """The suggestions made to `user` or in their private channel, with the Discord messages
    that offered them."""
    made = suggestions.made_to(db, user, conversations.private_thread_ids(db, user))
    discord_places.forget_offers(db, made)
    suggestions.delete(db, made)


def _unpin(db: Connection, user: User) -> None:
    """The notes `user` pinned anywhere, and every note pinned in their private channel."""
    suggestions.unpin_all(db, user, conversations.private_thread_ids(db, user))


def _delete_private_channel(db: Connection, user: User) -> None:
    """Every thread of `user`'s private channel, with its messages, its memory's revisions
    and the distillations that wrote them."""
    threads = conversations.private_thread_ids(db, user)
    distill.delete_distillations_in(db, threads)
    memory.delete_revisions_in(db, threads)
    conversations.delete_threads(db, threads)


# Every table that refers to a person, and what happens to its rows when they are removed:
# each entry is the function that does it, the table owner's (or one above that calls the
# owners of what refers to its rows first). Rows in their private channel go with it
# whatever the table. Elsewhere, the columns in `ATTRIBUTED` are cleared (the row stays: a
# message keeps its speaker's name), and every other row that refers to them is deleted, in
# the order of `WITH_PERSON` (what refers to a row goes before it). A reference these do not
# know stops the removal before anything is changed (`_check_references`), so a new table
# cannot silently keep, or lose, a person's data.
WITH_PERSON: dict[tuple[str, str], LetGo] = {
    ("suggestions", "user_id"): _withdraw_suggestions,
    ("pins", "user_id"): _unpin,
    ("conversations", "owner_id"): _delete_private_channel,  # each of its threads
    ("usage_events", "user_id"): usage.forget_person,
    ("sessions", "user_id"): signin.sign_out_everywhere,
    ("api_tokens", "user_id"): tokens.delete_all,
    ("discord_links", "user_id"): discord_links.unlink_all,
    ("discord_link_codes", "user_id"): discord_links.drop_codes,
}
ATTRIBUTED: dict[tuple[str, str], LetGo] = {
    # what they said in shared projects stays, under their name
    ("messages", "user_id"): conversations.detach_messages,
    ("memory_revisions", "owner_id"): memory.detach_revisions,
    ("distillations", "owner_id"): distill.detach_distillations,
    ("discord_bindings", "bound_by"): discord_places.detach_bindings,
    # when and how much was forgotten stays; no longer by whom
    ("forget_log", "by_user_id"): forget.detach_log,
}
# What refers to a private thread, or to what is in one: deleted with it.
IN_THREAD = {
    "conversations": {
        ("messages", "conversation_id"),
        ("memory_revisions", "conversation_id"),
        ("distillations", "conversation_id"),
        ("suggestions", "conversation_id"),
        ("pins", "conversation_id"),
    },
    "messages": {("suggestions", "message_id")},
    "suggestions": {("discord_suggestion_messages", "suggestion_id")},
    "memory_revisions": {("distillations", "revision_id")},
}


@dataclass(frozen=True)
class Removal:
    """What removing a person takes, and what stays: shown before (to confirm) and after."""

    name: str
    private_threads: int
    private_messages: int
    private_memory_revisions: int
    sessions: int
    tokens: int
    usage_events: int
    discord_links: int
    shared_messages: int  # kept, attributed by name
    message_ids: tuple[int, ...] = ()  # the private messages deleted (for the search index)

    def describe(self) -> str:
        """The confirmation, in words (the same in the app and on the command line)."""
        threads = "" if self.private_threads <= 1 else f" in {self.private_threads} threads"
        gone = [
            f"their private channel ({_count(self.private_messages, 'message')}{threads}) and "
            f"its memory ({_count(self.private_memory_revisions, 'revision')})",
            f"{_count(self.sessions, 'signed-in session')}",
            f"{_count(self.tokens, 'app token')}",
            f"their usage history ({_count(self.usage_events, 'event')})",
        ]
        if self.discord_links:
            gone.append(f"{_count(self.discord_links, 'linked Discord account')}")
        kept = (
            f"Their {_count(self.shared_messages, 'message')} in shared projects "
            f"{'stays' if self.shared_messages == 1 else 'stay'}, attributed to {self.name}."
            if self.shared_messages
            else "They have no messages in shared projects."
        )
        return f"Removing {self.name} deletes {', '.join(gone)}. {kept}"


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}{'' if number == 1 else 's'}"


def _check_references(db: Connection) -> None:
    unknown = database.references_to(db, "users") - set(ATTRIBUTED) - set(WITH_PERSON)
    for target, known in IN_THREAD.items():
        unknown |= database.references_to(db, target) - known
    if unknown:
        names = ", ".join(f"{t}.{c}" for t, c in sorted(unknown))
        raise CharlieError(
            f"Charlie does not know what removing a person should do to {names}; nothing was "
            "removed. This is a bug: please report it."
        )


def removal_of(db: Connection, name: str) -> Removal:
    """What removing `name` would take and keep (changes nothing)."""
    user = get_user(db, name)
    threads = conversations.private_thread_ids(db, user)
    private_ids = conversations.ids_in_threads(db, threads)
    return Removal(
        name=user.name,
        private_threads=len(threads),
        private_messages=len(private_ids),
        private_memory_revisions=memory.count_revisions_in(db, threads),
        sessions=signin.count_stored(db, user),
        tokens=len(tokens.list_tokens(db, user)),
        usage_events=usage.count_for(db, user),
        discord_links=len(discord_links.discord_ids(db, user)),
        shared_messages=conversations.count_shared_by(db, user.id),
        message_ids=tuple(private_ids),
    )


def check_removable(db: Connection, name: str) -> User:
    """`name`, if they may be removed: anyone but the household's last administrator."""
    user = get_user(db, name)
    if user.is_admin and len(admins(db)) == 1:
        raise Conflict(
            f"{user.name} is the household's only administrator: make someone else an "
            "administrator first (`charlie users admin NAME`), then remove them."
        )
    return user


def remove_user(db: Connection, name: str) -> Removal:
    """Remove `name` from the household, in one transaction: their private channel (every
    thread, its messages, memory revisions, distillations, suggestions and pins), their
    sessions, tokens, usage events, suggestions and pins anywhere, and their Discord links
    go; their messages in shared projects stay, with their name as the speaker.

    The household's last administrator cannot be removed. Returns what was removed (its
    `message_ids` are the private messages, for the search index to forget)."""
    with transaction(db):
        _check_references(db)
        user = check_removable(db, name)
        removal = removal_of(db, name)
        for let_go in [*WITH_PERSON.values(), *ATTRIBUTED.values()]:
            let_go(db, user)
        users.delete_user(db, user)
    return removal


def remove_person(home: Home, name: str) -> Removal:
    """Remove `name` (see `remove_user`) and drop their private messages from the
    search index."""
    removal = remove_user(home.db, name)
    try:
        forget_messages(home, removal.message_ids)
    except (CharlieError, sqlite3.Error) as exc:
        raise CharlieError(
            f"{removal.name} was removed, but the search index could not drop their private "
            f"messages yet ({exc}). It drops them by itself the next time it is used; "
            "`charlie reindex` does it now."
        ) from exc
    return removal


def forget_messages(home: Home, message_ids: Sequence[int]) -> None:
    """Drop deleted messages from the search index of messages.

    SQLite gives a new row the id after the largest one left, so when the newest messages
    were deleted the next ones reuse their ids: the index's marks of what it has indexed
    (words, vectors) are lowered to the newest stored message, or those new messages would
    never be indexed."""
    if not message_ids:
        return
    index = recaller_for(home).index
    with index.lock:
        index.forget(message_ids)
        newest = conversations.newest_stored_id(home)
        with transaction(index.db):
            for mark in (UPTO, WORDS):
                if int(index.index.state(mark) or 0) > int(newest):
                    index.index.set_state(mark, str(newest))
