"""The data home: where Charlie keeps everything, opened once at the edge and passed down."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from charlie import db as database
from charlie.config import Settings


@dataclass
class Home:
    """The settings plus an open connection to the data home's database."""

    settings: Settings
    db: sqlite3.Connection = field(repr=False)
    # Expensive things built once per opened home and reused (the search index, whose
    # embedding model takes a moment to load), keyed by name.
    shared: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, settings: Settings, shared: dict[str, Any] | None = None) -> Home:
        """Open the data home; `shared` lets several opened homes (one per web request, say)
        share one cache of expensive things."""
        settings.projects_dir.mkdir(parents=True, exist_ok=True)
        db = database.connect(settings.db_path)
        return cls(settings=settings, db=db, shared={} if shared is None else shared)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Home:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
