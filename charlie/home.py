"""The data home: where Charlie keeps everything, opened once at the edge and passed down."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from charlie import db as database
from charlie.config import Settings

INDEX_FILE = "index.db"


@dataclass
class Home:
    """The settings plus an open connection to the data home's database."""

    settings: Settings
    db: sqlite3.Connection = field(repr=False)
    # Expensive things built once per opened home and reused (the search index, whose
    # embedding model takes a moment to load), keyed by name.
    shared: dict[str, Any] = field(default_factory=dict, repr=False)
    # The search index's own database file, opened on first use by `charlie.index.Index`
    # and closed with the home. It is derived data, kept apart from `db` so that a damaged
    # index can be replaced whole and its long writes never hold up the message log.
    index_db: sqlite3.Connection | None = field(default=None, repr=False)

    @classmethod
    def open(cls, settings: Settings, shared: dict[str, Any] | None = None) -> Home:
        """Open the data home; `shared` lets several opened homes (one per web request, say)
        share one cache of expensive things."""
        settings.projects_dir.mkdir(parents=True, exist_ok=True)
        db = database.connect(settings.db_path)
        return cls(settings=settings, db=db, shared={} if shared is None else shared)

    @property
    def index_path(self) -> Path:
        """The search index's database file, beside `charlie.db`."""
        return self.settings.db_path.with_name(INDEX_FILE)

    def close(self) -> None:
        if self.index_db is not None:
            self.index_db.close()
            self.index_db = None
        self.db.close()

    def __enter__(self) -> Home:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
