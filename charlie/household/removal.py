"""Removing a person from the household everywhere Charlie keeps something of theirs.

The database part is `users.remove_user` (one transaction). The search index of messages
is derived data in its own file: it must not keep a word of the removed person's private
channel either, so their messages are dropped from it at once rather than at its next
check. Every front end (the command line, the app) removes people through `remove_person`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from charlie.errors import CharlieError
from charlie.home import Home
from charlie.retrieval import index_file
from charlie.retrieval.message_index import UPTO, WORDS
from charlie.retrieval.recall import recaller_for
from charlie.users import Removal, remove_user


def remove_person(home: Home, name: str) -> Removal:
    """Remove `name` (see `users.remove_user`) and drop their private messages from the
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
        (newest,) = home.db.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
        with index_file.transaction(index.db):
            for mark in (UPTO, WORDS):
                if int(index.index.state(mark) or 0) > int(newest):
                    index.index.set_state(mark, str(newest))
