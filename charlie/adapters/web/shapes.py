"""The JSON shapes the API answers with, shared by its routers (docs/api.md)."""

from __future__ import annotations

from typing import Any

from charlie import projects, trace
from charlie.adapters.web.render import render_markdown
from charlie.conversations import Channel, channel_named
from charlie.errors import InvalidName
from charlie.home import Home
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


def memory_json(layers: Memory) -> dict[str, Any]:
    """The memory's layers; the summary also as safe HTML (`summary_html`), as a reply is."""
    data = memory.as_json(layers)
    data["summary_html"] = render_markdown(layers.summary) if layers.summary else ""
    return data


def project_json(project: projects.Project) -> dict[str, Any]:
    config = project.config
    return {
        "slug": project.slug,
        "name": config.name,
        "style": config.style,
        "persona": config.persona,
        "distill_every": config.distill_every,
        "quotes_window": config.quotes_window,
        "write_tools": config.write_tools,
        "model": config.model,  # None: the server's default (PUT /projects/{slug}/model)
    }


def message_json(message: Any) -> dict[str, Any]:
    """A message; a reply also as safe HTML (`html`), which the app shows as it is."""
    return {
        "id": message.id,
        "role": message.role,
        "speaker": message.speaker,
        "content": message.content,
        "html": render_markdown(message.content) if message.role == "assistant" else None,
        "created_at": message.created_at,
        "trace": None if message.trace is None else trace.steps_to_json(message.trace),
    }


def note_json(note: notes.Note, *, full: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": note.key,
        "project": note.project,
        "name": note.name,
        "title": note.title,
        "tags": note.tags,
        "updated": str(note.meta.get("updated", "")),
    }
    if full:
        data["body"] = note.body
        data["html"] = render_markdown(note.body)  # safe HTML, rendered as replies are
        data["sha256"] = note.sha256  # the version: send it back as a PUT's base_sha256
        data["meta"] = {
            k: str(v) if not isinstance(v, list | int | float | bool) else v
            for k, v in note.meta.items()
        }
    return data
