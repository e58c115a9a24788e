"""The JSON shapes the API answers with, shared by its routers (docs/api.md)."""

from __future__ import annotations

from charlie import projects, trace
from charlie.adapters.web import schemas
from charlie.adapters.web.render import render_markdown
from charlie.conversations import Channel, Message, channel_named
from charlie.errors import InvalidName
from charlie.home import Home
from charlie.jsonvalue import JSONObject
from charlie.memory import layers as memory
from charlie.memory.layers import Memory
from charlie.notes import files as notes
from charlie.users import User

PRIVATE = projects.PRIVATE


def channel_for(home: Home, name: str, user: User, thread: int | None = None) -> Channel:
    """`conversations.channel_named`, in the routes' order of arguments (404 when the
    project, or the thread, is not there)."""
    return channel_named(home, user, name, thread)


def note_name(name: str) -> str:
    """A note name from a URL: 400 for one no file can have (a NUL or control character)."""
    if any(ord(c) < 32 for c in name):
        raise InvalidName(f"{name!r} is not a note name: it holds a control character.")
    return name


def memory_json(layers: Memory) -> JSONObject:
    """The memory's layers; the summary also as safe HTML (`summary_html`), as a reply is."""
    data = memory.as_json(layers)
    data["summary_html"] = render_markdown(layers.summary) if layers.summary else ""
    return data


def memory_out(layers: Memory) -> schemas.MemoryOut:
    return schemas.MemoryOut.model_validate(memory_json(layers))


def project_out(project: projects.Project) -> schemas.ProjectOut:
    config = project.config
    return schemas.ProjectOut(
        slug=project.slug,
        name=config.name,
        style=config.style,
        persona=config.persona,
        distill_every=config.distill_every,
        quotes_window=config.quotes_window,
        write_tools=config.write_tools,
        model=config.model,  # None: the server's default (PUT /projects/{slug}/model)
    )


def message_json(message: Message) -> JSONObject:
    """A message; a reply also as safe HTML (`html`), which the app shows as it is."""
    return {
        "id": message.id,
        "role": message.role,
        "speaker": message.speaker,
        "content": message.content,
        "html": render_markdown(message.content) if message.role == "assistant" else None,
        "created_at": message.created_at,
        "trace": None if message.trace is None else [trace.to_json(s) for s in message.trace],
    }


def note_out(note: notes.Note) -> schemas.NoteOut:
    return schemas.NoteOut(
        id=note.key,
        project=note.project,
        name=note.name,
        title=note.title,
        tags=note.tags,
        updated=str(note.meta.get("updated", "")),
    )


def _meta_value(value: object) -> schemas.MetaValue:
    """A front-matter value as JSON shows it: a number, a yes/no or a list as written,
    anything else (a date, a table) as text."""
    if isinstance(value, list):
        return [v if isinstance(v, int | float | bool | str) else str(v) for v in value]
    return value if isinstance(value, int | float | bool | str) else str(value)


def note_full(note: notes.Note) -> schemas.NoteFull:
    """A note with its text, as reading or changing one answers."""
    return schemas.NoteFull(
        **note_out(note).model_dump(),
        body=note.body,
        html=render_markdown(note.body),  # safe HTML, rendered as replies are
        sha256=note.sha256,  # the version: send it back as a PUT's base_sha256
        meta={k: _meta_value(v) for k, v in note.meta.items()},
    )
