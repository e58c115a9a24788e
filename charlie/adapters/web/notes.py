"""Notes, search, suggestions, pins and usage events (docs/api.md)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from charlie import projects
from charlie.adapters.web import schemas
from charlie.adapters.web.deps import (
    HomeDep,
    SessionDep,
)
from charlie.adapters.web.shapes import channel_for, note_full, note_name, note_out
from charlie.notes import files as notes
from charlie.retrieval import suggestions, usage
from charlie.retrieval.upkeep import mark_stale, searcher_for

router = APIRouter()


class NewNote(BaseModel):
    project: str
    title: str = Field(min_length=1, max_length=300)
    body: str = Field("", max_length=1_000_000)
    tags: list[str] = Field(default_factory=list, max_length=50)


class NoteChanges(BaseModel):
    title: str | None = Field(None, max_length=300)
    body: str | None = Field(None, max_length=1_000_000)
    base_sha256: str | None = Field(None, max_length=64)  # 409 if the note changed since


class TagChanges(BaseModel):
    add: list[str] = Field(default_factory=list, max_length=50)
    remove: list[str] = Field(default_factory=list, max_length=50)


@router.get("/notes", response_model=schemas.NoteList)
def list_notes(session: SessionDep, home: HomeDep, project: str) -> schemas.NoteList:
    found, problems = notes.list_notes(projects.get_project(home, project))
    return schemas.NoteList(
        notes=[note_out(n) for n in found],
        problems=[schemas.Problem(path=str(p.path), reason=p.reason) for p in problems],
    )


@router.get("/notes/{project}/{name:path}", response_model=schemas.NoteFull)
def get_note(project: str, name: str, session: SessionDep, home: HomeDep) -> schemas.NoteFull:
    note = notes.get_note(projects.get_project(home, project), note_name(name))
    usage.record(home.db, session.user.id, "view", note=note.key)
    return note_full(note)


@router.post("/notes", status_code=201, response_model=schemas.NoteFull)
def create_note(body: NewNote, session: SessionDep, home: HomeDep) -> schemas.NoteFull:
    made = notes.create_note(
        projects.get_project(home, body.project), body.title, body.body, body.tags
    )
    mark_stale(home)
    return note_full(made)


@router.put("/notes/{project}/{name:path}", response_model=schemas.NoteFull)
def update_note(
    project: str, name: str, body: NoteChanges, session: SessionDep, home: HomeDep
) -> schemas.NoteFull:
    changed = notes.update_note(
        projects.get_project(home, project),
        note_name(name),
        body=body.body,
        title=body.title,
        base_sha256=body.base_sha256,
    )
    mark_stale(home)
    return note_full(changed)


@router.post("/notes/{project}/{name:path}/tags", response_model=schemas.NoteFull)
def tag_note(
    project: str, name: str, body: TagChanges, session: SessionDep, home: HomeDep
) -> schemas.NoteFull:
    changed = notes.tag_note(
        projects.get_project(home, project), note_name(name), body.add, body.remove
    )
    mark_stale(home)
    for tag in body.add:
        usage.record(home.db, session.user.id, "tag", tag=tag, note=changed.key)
    return note_full(changed)


@router.get("/search", response_model=schemas.SearchOut)
def search(
    session: SessionDep,
    home: HomeDep,
    q: str,
    project: str | None = None,
    limit: int = 10,
    mode: Literal["vector", "keyword", "fallback", "fusion"] | None = None,
) -> schemas.SearchOut:
    scope = [projects.get_project(home, project)] if project else []
    searcher = searcher_for(home)
    result = searcher.search(q, session.user, scope, limit=max(1, min(limit, 50)), mode=mode)
    return schemas.SearchOut(
        query=result.query,
        mode=result.mode,
        fallback_reason=result.fallback_reason,
        keyword_used=result.keyword_used,
        terms=result.terms,
        incomplete=result.incomplete,  # the index is still filling: say so
        results=[h.public() for h in result.hits],
    )


@router.post("/suggestions/{suggestion_id}/accept", response_model=schemas.NoteKey)
def accept(suggestion_id: int, session: SessionDep, home: HomeDep) -> dict[str, str]:
    return {"note": suggestions.accept(home, session.user, suggestion_id)}


@router.post("/suggestions/{suggestion_id}/dismiss", response_model=schemas.NoteKey)
def dismiss(suggestion_id: int, session: SessionDep, home: HomeDep) -> dict[str, str]:
    return {"note": suggestions.dismiss(home, session.user, suggestion_id)}


@router.get("/channels/{channel}/pins", response_model=list[schemas.Pin])
def list_pins(channel: str, session: SessionDep, home: HomeDep) -> list[dict[str, str]]:
    found = channel_for(home, channel, session.user)
    return [{"note": key, "pinned_at": when} for key, when in suggestions.pins(home, found)]


@router.delete("/channels/{channel}/pins/{note:path}", response_model=schemas.Unpinned)
def unpin(channel: str, note: str, session: SessionDep, home: HomeDep) -> schemas.Unpinned:
    found = channel_for(home, channel, session.user)
    suggestions.unpin(home, found, note)
    return schemas.Unpinned(ok=True, pins=[key for key, _ in suggestions.pins(home, found)])


class UsageEvent(BaseModel):
    kind: Literal["tag", "view"]
    tag: str | None = None
    note: str | None = None


@router.post("/usage", status_code=201, response_model=schemas.Created)
def record_usage(body: UsageEvent, session: SessionDep, home: HomeDep) -> dict[str, int]:
    event_id = usage.record(home.db, session.user.id, body.kind, note=body.note, tag=body.tag)
    return {"id": event_id}
