"""The trash: deleted projects and notes, kept in the data home until someone restores them.

Nothing Charlie deletes is destroyed: a note moves to `trash/<project>/`, a project's whole
folder to `trash/_projects/` (`charlie.notes.files`, `charlie.projects`). This module is what every
front end calls to delete, list and restore, so the search index follows at once: a deleted
project's notes are dropped from it before the delete returns, a restored one is indexed
again on the next search.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from charlie import projects
from charlie.errors import CharlieError, NotFound
from charlie.home import Home
from charlie.notes import files as notes
from charlie.notes.files import TrashedNote
from charlie.projects import Project, TrashedProject
from charlie.retrieval.upkeep import mark_stale, searcher_for


@dataclass(frozen=True)
class Contents:
    projects: list[TrashedProject]
    notes: list[TrashedNote]


def contents(home: Home) -> Contents:
    """Everything in the trash, most recently deleted first."""
    return Contents(projects.trashed_projects(home), notes.trashed_notes(home))


def delete_project(home: Home, slug: str) -> TrashedProject:
    """Move project `slug` to the trash and drop its notes from the search index."""
    trashed = projects.trash_project(home, slug)
    try:
        searcher_for(home, max_age=0)  # checks every project now: the trashed one is gone
    except (CharlieError, sqlite3.Error) as exc:
        raise CharlieError(
            f"Project {slug} is in the trash, but the search index could not drop its notes "
            f"yet ({exc}); `charlie reindex` does it."
        ) from exc
    return trashed


def restore_project(home: Home, which: str) -> Project:
    """Bring a project back from the trash (by its trash entry, or the newest of a slug)."""
    project = projects.restore_project(home, which)
    mark_stale(home, project)
    return project


def delete_note(home: Home, project: Project, name: str) -> Path:
    """Move a note to the trash; the next search no longer finds it."""
    target = notes.delete_note(home, project, name)
    mark_stale(home, project)
    return target


def restore_note(home: Home, trash_id: str) -> notes.Note:
    """Bring a note back from the trash (`trash_id` as `contents` lists it) into its project,
    which must exist (restore a deleted project first)."""
    slug = trash_id.split("/", 1)[0]
    if not any(t.id == trash_id for t in notes.trashed_notes(home, slug)):
        raise NotFound(
            f"There is no note {trash_id!r} in the trash; `charlie trash` lists what is there."
        )
    try:
        project = projects.get_project(home, slug)
    except NotFound as exc:
        raise NotFound(
            f"The note's project {slug!r} is not there (is it in the trash too? restore it "
            "first with `charlie projects restore`)."
        ) from exc
    restored = notes.restore_note(home, project, trash_id)
    mark_stale(home, project)
    return restored
