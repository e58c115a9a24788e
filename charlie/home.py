"""The data home: where Charlie keeps everything, opened once at the edge and passed down."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, cast

from charlie import store
from charlie.config import Settings

Part = TypeVar("Part")


class Shared:
    """What the homes one process opens share (one per web request, per Discord message, per
    MCP call): the embedding model, loaded vectors, locks, caches and the state of background
    work. Each part is a dataclass of the module that owns it (`retrieval.index.NoteIndex`,
    say), made on first use, so every field is typed and has one owner, and the kernel knows
    none of them."""

    def __init__(self) -> None:
        self._parts: dict[type, object] = {}
        self._lock = threading.Lock()

    def of(self, kind: type[Part]) -> Part:
        """This process's one `kind`, made (with no arguments) the first time it is asked."""
        with self._lock:
            part = self._parts.get(kind)
            if part is None:
                part = self._parts[kind] = kind()
            return cast(Part, part)

    def put(self, part: object) -> None:
        """Share `part` as its kind's one instance (a background worker's fresh home, given
        some of its parent's parts)."""
        with self._lock:
            self._parts[type(part)] = part

    def clear(self) -> None:
        """Forget everything shared (the next home builds it all again)."""
        with self._lock:
            self._parts.clear()


@dataclass
class Home:
    """The settings plus an open connection to the data home's database (`charlie.db`, or
    PostgreSQL: `charlie.store`)."""

    settings: Settings
    db: store.Connection = field(repr=False)
    # Expensive things built once and reused by every home of the process (see `Shared`).
    shared: Shared = field(default_factory=Shared, repr=False)
    # The search index's own database file, opened on first use by `charlie.retrieval.index.Index`
    # and closed with the home. It is derived data, kept apart from `db` so that a damaged
    # index can be replaced whole and its long writes never hold up the message log.
    index_db: sqlite3.Connection | None = field(default=None, repr=False)

    @classmethod
    def open(cls, settings: Settings, shared: Shared | None = None) -> Home:
        """Open the data home; `shared` lets several opened homes (one per web request, say)
        share one cache of expensive things."""
        settings.projects_dir.mkdir(parents=True, exist_ok=True)
        db = store.connect(settings)
        return cls(settings=settings, db=db, shared=Shared() if shared is None else shared)

    @property
    def index_path(self) -> Path:
        """The search index's database file (`Settings.index_path`)."""
        return self.settings.index_path

    def close(self) -> None:
        if self.index_db is not None:
            self.index_db.close()
            self.index_db = None
        self.db.close()

    def __enter__(self) -> Home:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
