"""A channel's memory: read, edit, history, undo and start over (docs/api.md)."""

from __future__ import annotations

import difflib
from datetime import UTC, datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from charlie.adapters.web import schemas
from charlie.adapters.web.deps import (
    HomeDep,
    SessionDep,
)
from charlie.adapters.web.shapes import channel_for, memory_json, memory_out
from charlie.errors import MemoryFormatError
from charlie.memory import layers as memory
from charlie.memory import start_over
from charlie.memory.layers import Memory

router = APIRouter()


class MemoryBody(BaseModel):
    summary: str = Field(max_length=20_000)
    decisions: list[str] = Field(max_length=500)
    quotes: list[dict[str, str]] = Field(max_length=200)


class UndoBody(BaseModel):
    to: int | None = None


@router.get("/channels/{channel}/memory", response_model=schemas.MemoryFile)
def get_memory(channel: str, session: SessionDep, home: HomeDep) -> schemas.MemoryFile:
    found = channel_for(home, channel, session.user)  # GET: reads, never writes
    markdown: str | None = None
    error: str | None = None
    try:
        markdown = memory.read_file_text(found) if found.project else None
        layers = memory.load(home, found)
    except MemoryFormatError as exc:
        layers, error = Memory(), str(exc)
    return schemas.MemoryFile.model_validate(
        memory_json(layers) | {"markdown": markdown, "error": error}
    )


@router.put("/channels/{channel}/memory", response_model=schemas.MemoryOut)
def put_memory(
    channel: str, body: MemoryBody, session: SessionDep, home: HomeDep
) -> schemas.MemoryOut:
    found = channel_for(home, channel, session.user)
    memory.ensure_file(home, found)  # the empty first revision, so this edit can be undone
    current = memory.load(home, found)  # a memory.md that cannot be read is fixed by hand first
    quotes = [(q.get("speaker", ""), q.get("text", "")) for q in body.quotes]
    today = datetime.now(UTC).date().isoformat()
    edited = memory.from_person(
        body.summary, body.decisions, quotes, current, session.user.name, today
    )
    return memory_out(memory.save(home, found, edited, "edit").memory)


@router.get("/channels/{channel}/memory/history", response_model=list[schemas.RevisionOut])
def memory_history(channel: str, session: SessionDep, home: HomeDep) -> list[schemas.RevisionOut]:
    found = channel_for(home, channel, session.user)
    if not found.private:
        memory.sync_hand_edits(home, found)
    history = memory.revisions(home, found)
    title = found.project.config.name if found.project else found.label
    rendered = [memory.render(r.memory, title).splitlines(keepends=True) for r in history]
    out = []
    for position, revision in enumerate(history):
        before = rendered[position + 1] if position + 1 < len(rendered) else []
        diff = "".join(
            difflib.unified_diff(
                before,
                rendered[position],
                f"revision {history[position + 1].id}" if position + 1 < len(history) else "empty",
                f"revision {revision.id}",
            )
        )
        out.append(
            schemas.RevisionOut(
                id=revision.id,
                source=revision.source,
                created_at=revision.created_at,
                memory=memory_out(revision.memory),
                diff=diff,
            )
        )
    return out


@router.post("/channels/{channel}/memory/undo", response_model=schemas.MemoryUndone)
def memory_undo(
    channel: str, body: UndoBody, session: SessionDep, home: HomeDep
) -> schemas.MemoryUndone:
    found = channel_for(home, channel, session.user)
    revision = memory.undo(home, found, body.to)
    return schemas.MemoryUndone.model_validate(
        memory_json(revision.memory) | {"revision_id": revision.id}
    )


@router.post("/channels/{channel}/memory/start-over", response_model=schemas.MemoryStartedOver)
def memory_start_over(
    channel: str, session: SessionDep, home: HomeDep
) -> schemas.MemoryStartedOver:
    """Begin the memory again (asked for plainly): one revision, undone by `…/memory/undo`."""
    found = channel_for(home, channel, session.user)
    done = start_over.start_over(home, found)
    said = done.said(found, f"POST /api/channels/{channel}/memory/undo")
    return schemas.MemoryStartedOver.model_validate(
        memory_json(done.revision.memory)
        | {"revision_id": done.revision.id, "retired": done.retired, "message": said}
    )
