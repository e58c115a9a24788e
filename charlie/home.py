"""The data home: where Charlie keeps everything, opened once at the edge and passed down."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from charlie import db as database
from charlie.config import Settings


@dataclass
class Home:
    """The settings plus an open connection to the data home's database."""

    settings: Settings
    db: sqlite3.Connection = field(repr=False)

    @classmethod
    def open(cls, settings: Settings) -> Home:
        settings.projects_dir.mkdir(parents=True, exist_ok=True)
        return cls(settings=settings, db=database.connect(settings.db_path))

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Home:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
