"""The JSON API (docs/api.md). Thin: every route is a call into the core."""

from __future__ import annotations

import base64
import binascii
import difflib
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse, StreamingResponse
from pydantic import BaseModel, Field
from starlette.background import BackgroundTask

from charlie import __version__, conversations, projects, trace
from charlie.adapters.web.deps import (
    CSRF_COOKIE,
    DEVICE_COOKIE,
    SESSION_COOKIE,
    HomeDep,
    SessionDep,
    sse,
    stream,
)
from charlie.adapters.web.render import render_markdown
from charlie.chat import turn as chat
from charlie.conversations import Channel, Message, private_channel, recent, shared_channel
from charlie.errors import CharlieError, Forbidden, InvalidName, MemoryFormatError, NotFound
from charlie.home import Home
from charlie.household import discord_links as links
from charlie.household import sessions, tokens
from charlie.llm import doctor
from charlie.memory import layers as memory
from charlie.memory.layers import Memory
from charlie.notes import files as notes
from charlie.retrieval import suggestions, usage
from charlie.retrieval.index import status as index_status
from charlie.retrieval.recall import RecallHit, conversations_for, recaller_for
from charlie.retrieval.search import mark_stale, searcher_for
from charlie.tools import builtin as toolkit
from charlie.transfer import export as archive
from charlie.users import User

router = APIRouter()
PRIVATE = projects.PRIVATE
MAX_IMAGES = 4
MAX_AROUND = 50  # messages either side of one shown with `messages?around=ID`


# ---------------------------------------------------------------- helpers


def channel_for(home: Home, name: str, user: User, thread: int | None = None) -> Channel:
    """`private` is the caller's own private channel; anything else a shared project. With
    `thread`, that thread of it (404 when it has no such thread); without, the thread most
    recently written in."""
    if name == PRIVATE:
        return private_channel(home, user, thread)
    return shared_channel(home, projects.get_project(home, name), thread)


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


# ---------------------------------------------------------------- sessions


class Credentials(BaseModel):
    name: str = Field(max_length=100)
    password: str = Field(max_length=1000)


@router.post("/login")
def login(body: Credentials, request: Request, response: Response, home: HomeDep) -> dict[str, Any]:
    # The peer's address: uvicorn replaces it from X-Forwarded-For only for a trusted proxy
    # (CHARLIE_TRUSTED_PROXIES), so a client cannot pick its own.
    address = request.client.host if request.client else "unknown"
    device = request.cookies.get(DEVICE_COOKIE)
    session = sessions.sign_in(home.db, body.name, body.password, address, device)
    if session is None:
        response.status_code = 401
        return {"error": "Wrong name or password.", "kind": "Unauthorized"}
    secure = request.url.scheme == "https"
    response.set_cookie(
        DEVICE_COOKIE,
        session.device,
        max_age=sessions.DEVICE_DAYS * 24 * 3600,
        httponly=True,
        samesite="strict",
        secure=secure,
        path="/api/login",
    )
    age = sessions.SESSION_DAYS * 24 * 3600
    response.set_cookie(
        SESSION_COOKIE,
        session.token,
        max_age=age,
        httponly=True,
        samesite="lax",
        secure=secure,
        path="/",
    )
    response.set_cookie(
        CSRF_COOKIE,
        session.csrf,
        max_age=age,
        httponly=False,
        samesite="lax",
        secure=secure,
        path="/",
    )
    return {"user": {"name": session.user.name, "is_admin": session.user.is_admin}}


@router.post("/logout")
def logout(session: SessionDep, response: Response, home: HomeDep) -> dict[str, bool]:
    sessions.sign_out(home.db, session.token)
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(CSRF_COOKIE, path="/")
    return {"ok": True}


@router.get("/me")
def me(session: SessionDep) -> dict[str, Any]:
    return {"name": session.user.name, "is_admin": session.user.is_admin}


@router.post("/me/discord-code")
def discord_code(session: SessionDep, home: HomeDep) -> dict[str, Any]:
    """A one-time code that links the caller's Discord account (`/charlie link CODE`)."""
    made = links.new_code(home.db, session.user)
    linked = len(links.discord_ids(home.db, session.user))
    return {"code": made.code, "expires_at": made.expires_at, "linked": linked}


# ---------------------------------------------------------------- tokens for other apps


class NewToken(BaseModel):
    label: str = Field(default="", max_length=200)
    read_only: bool = False


def token_json(token: tokens.Token) -> dict[str, Any]:
    return asdict(token) | {"active": token.active}


@router.get("/tokens")
def list_tokens(
    session: SessionDep, home: HomeDep, everyone: Annotated[bool, Query(alias="all")] = False
) -> dict[str, Any]:
    """The caller's tokens (never their secrets); an administrator may ask for everyone's."""
    if everyone and not session.user.is_admin:
        raise Forbidden("Only a household administrator can see everyone's tokens.")
    found = tokens.list_tokens(home.db, None if everyone else session.user)
    return {"tokens": [token_json(t) for t in found]}


@router.post("/tokens", status_code=201)
def create_token(body: NewToken, session: SessionDep, home: HomeDep) -> dict[str, Any]:
    """A new token for the caller. The secret is in this answer only: it is never stored."""
    made, secret = tokens.create(home.db, session.user, label=body.label, read_only=body.read_only)
    return {"token": token_json(made), "secret": secret}


@router.delete("/tokens/{token_id}")
def revoke_token(token_id: int, session: SessionDep, home: HomeDep) -> dict[str, Any]:
    return {"token": token_json(tokens.revoke(home.db, token_id, by=session.user))}


# ---------------------------------------------------------------- export


@router.get("/export")
def export(session: SessionDep, home: HomeDep) -> FileResponse:
    """The caller's own copy of the household: every shared project and their private
    channel (never anyone else's), as the zip `charlie export --private` writes. It is built
    in a temporary folder and removed once sent."""
    folder = tempfile.TemporaryDirectory(prefix="charlie-export-")
    name = session.user.name
    try:
        result = archive.export_archive(
            home, Path(folder.name) / "export.zip", exporter=name, private=True
        )
    except BaseException:
        folder.cleanup()
        raise
    day = export_day()
    return FileResponse(
        result.path,
        media_type="application/zip",
        filename=f"charlie-export-{name}-{day}.zip",
        background=BackgroundTask(folder.cleanup),
    )


def export_day() -> str:
    """Today's date (UTC) as the download's name shows it: YYYYmmdd."""
    return datetime.now(UTC).strftime("%Y%m%d")


@router.get("/health")
def health(session: SessionDep, request: Request, home: HomeDep) -> dict[str, Any]:
    settings = home.settings
    llm: dict[str, Any] = {"base_url": settings.llm_base_url, "model": settings.llm_model}
    try:
        with httpx.Client(timeout=3.0) as client:
            key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            answer = client.get(f"{settings.llm_base_url}/models", headers=headers)
        models = [m.get("id") for m in answer.json().get("data", [])]
        llm |= {"reachable": answer.status_code < 400, "models": models, "error": None}
        if settings.llm_model and settings.llm_model not in models:
            llm["error"] = f"The server has no model {settings.llm_model!r}."
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        llm |= {"reachable": False, "error": f"Cannot reach {settings.llm_base_url} ({exc})."}
    return {"version": __version__, "llm": llm, "index": index_status(home)}


@router.get("/doctor")
def run_doctor(session: SessionDep, home: HomeDep) -> dict[str, Any]:
    """What the model server can do, as `charlie doctor --json` says it: each check is a small
    model call and the whole run takes at most a minute, so the app runs it on request."""
    return doctor.examine(home.settings).as_json()


# ---------------------------------------------------------------- projects


class NewProject(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    style: str = ""
    distill_every: int = 5


class ProjectChanges(BaseModel):
    name: str | None = None
    style: str | None = None
    persona: str | None = None
    distill_every: int | None = None
    quotes_window: int | None = None
    write_tools: list[str] | None = None


@router.get("/projects")
def list_projects(session: SessionDep, home: HomeDep) -> dict[str, Any]:
    found, problems = projects.scan_projects(home)
    return {
        "projects": [project_json(p) for p in found],
        "problems": [{"path": str(p.path), "reason": p.reason} for p in problems],
    }


@router.post("/projects", status_code=201)
def create_project(body: NewProject, session: SessionDep, home: HomeDep) -> dict[str, Any]:
    made = projects.create_project(
        home, body.name, style=body.style, distill_every=body.distill_every
    )
    memory.ensure_file(home, shared_channel(home, made))  # a memory.md to look at and edit
    return project_json(made)


@router.get("/projects/{slug}")
def get_project(slug: str, session: SessionDep, home: HomeDep) -> dict[str, Any]:
    return project_json(projects.get_project(home, slug))


@router.patch("/projects/{slug}")
def change_project(
    slug: str, body: ProjectChanges, session: SessionDep, home: HomeDep
) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True)
    if "write_tools" in changes and not session.user.is_admin:
        raise Forbidden(
            "Only an administrator can change which write tools the model may use in a project."
        )
    if "write_tools" in changes and changes["write_tools"] is not None:
        unknown = set(changes["write_tools"]) - set(toolkit.write_tools())
        if unknown:
            raise InvalidName(f"Unknown write tools: {', '.join(sorted(unknown))}.")
    return project_json(projects.update_project(home, slug, **changes))


# ---------------------------------------------------------------- chat


class ChatRequest(BaseModel):
    text: str = Field(max_length=20_000)
    images: list[str] = Field(default_factory=list, max_length=MAX_IMAGES)


def _save_images(images: list[str], folder: Path) -> list[Path]:
    """Data URLs → temporary files for this one request (images are not kept)."""
    paths = []
    for number, url in enumerate(images):
        header, _, payload = url.partition(",")
        kinds = {
            "image/png": ".png",
            "image/jpeg": ".jpg",
            "image/webp": ".webp",
            "image/gif": ".gif",
        }
        kind = header.removeprefix("data:").removesuffix(";base64")
        if kind not in kinds or not header.endswith(";base64"):
            raise CharlieError("Images must be PNG, JPEG, WebP or GIF data URLs.")
        try:
            data = base64.b64decode(payload, validate=True)
        except binascii.Error as exc:
            raise CharlieError(f"Image {number + 1} is not valid base64.") from exc
        path = folder / f"image-{number}{kinds[kind]}"
        path.write_bytes(data)
        paths.append(path)
    return paths


@router.get("/channels/{channel}/messages")
def messages(
    channel: str,
    session: SessionDep,
    home: HomeDep,
    limit: int = 50,
    around: int | None = None,
    before: int = 5,
    after: int = 5,
    thread: int | None = None,
) -> list[dict[str, Any]]:
    """The last `limit` messages of the thread; or, with `around=ID`, that message of this
    channel with `before` messages before it and `after` after it (404 when this channel has
    no such message — the same answer whether or not it exists elsewhere). Without `thread`,
    `around` finds the message in whichever of the channel's threads holds it."""
    found = channel_for(home, channel, session.user, thread)
    if around is None:
        return shown_json(home, found, recent(home, found, max(1, min(limit, 500))))
    if thread is None:
        found = conversations.thread_holding(home, found, around) or found
    shown = conversations.around(
        home, found, around, clamp(before, 0, MAX_AROUND), clamp(after, 0, MAX_AROUND)
    )
    if not shown:
        raise NotFound(f"There is no message {around} in this conversation.")
    return shown_json(home, found, shown)


def shown_json(home: Home, channel: Channel, shown: list[Message]) -> list[dict[str, Any]]:
    """Messages as the conversation shows them: each with its thread, and, where it has
    alternatives (regenerated replies, edited versions), their ids and its place among them."""
    others = conversations.alternatives(home, channel, shown)
    out = []
    for m in shown:
        data = message_json(m) | {"thread": channel.conversation_id}
        if m.id in others:
            data["alternatives"] = others[m.id]
        out.append(data)
    return out


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


def said_json(message: Message) -> dict[str, Any]:
    """A message as recall shows it (the shape `charlie recall --json` prints)."""
    return {
        "message_id": message.id,
        "speaker": message.speaker,
        "role": message.role,
        "time": message.created_at,
        "text": message.content,
    }


def recall_hit_json(hit: RecallHit) -> dict[str, Any]:
    return said_json(hit.message) | {
        "source_id": hit.message.source_id,
        "thread": hit.conversation_id,
        "score": round(hit.score, 6),
        "channel": hit.channel,
        "project": hit.project,
        "in_time": hit.in_time,
        "why": hit.why(),
        "around": [said_json(m) for m in hit.around],
    }


@router.get("/channels/{channel}/recall")
def recall(
    channel: str,
    session: SessionDep,
    home: HomeDep,
    q: str,
    limit: int = 10,
    around: int = 1,
    everywhere: Annotated[bool, Query(alias="all")] = False,
) -> dict[str, Any]:
    """What was said in this channel (and, with `all`, in every shared project) that best
    answers `q`, each hit with its neighbours. Which conversations may be read is decided by
    `charlie.recall.conversations_for`, never here."""
    found = channel_for(home, channel, session.user)
    channels = conversations_for(home, session.user, found, everywhere=everywhere)
    result = recaller_for(home).recall(
        session.user, channels, q, limit=clamp(limit, 1, 50), around=clamp(around, 0, 5)
    )
    return {
        "query": result.query,
        "when": result.when.describe() if result.when is not None else None,
        "terms": result.terms,
        "searched": result.searched,
        "truncated": result.truncated,
        "incomplete": result.incomplete,
        "results": [recall_hit_json(h) for h in result.hits],
    }


@router.post("/channels/{channel}/chat")
def chat_stream(
    channel: str,
    body: ChatRequest,
    request: Request,
    session: SessionDep,
    home: HomeDep,
    thread: int | None = None,
) -> StreamingResponse:
    thread = channel_for(home, channel, session.user, thread).conversation_id  # refuse early
    if not body.text.strip() and not body.images:
        raise CharlieError("The message is empty: type something to send.")
    llm, user = request.app.state.llm, session.user
    folder = tempfile.TemporaryDirectory(prefix="charlie-upload-")
    try:
        images = _save_images(body.images, Path(folder.name))  # refuse bad images up front
    except CharlieError:
        folder.cleanup()
        raise

    def answer(own: Home) -> Iterator[str]:
        target = channel_for(own, channel, user, thread)
        for event in chat.turn(own, llm, target, user, body.text, images):
            yield event_sse(event)

    return stream(request, user, answer, cleanup=folder.cleanup)


def event_sse(event: chat.Event) -> str:
    """One chat event as a server-sent event (the voice routes send the same ones)."""
    if isinstance(event, chat.Token):
        return sse("token", {"text": event.text})
    if isinstance(event, chat.TraceEvent):
        return sse("trace", trace.to_json(event.step))
    if isinstance(event, chat.Notice):
        return sse("notice", {"text": event.text})
    if isinstance(event, chat.Reply):
        return sse("reply", {"message": message_json(event.message)})
    if isinstance(event, chat.Suggested):
        return sse("suggestions", {"suggestions": [asdict(s) for s in event.suggestions]})
    return sse(
        "distilled",
        {"revision_id": event.result.revision_id, "memory": memory_json(event.result.memory)},
    )


# ---------------------------------------------------------------- memory


class MemoryBody(BaseModel):
    summary: str = Field(max_length=20_000)
    decisions: list[str] = Field(max_length=500)
    quotes: list[dict[str, str]] = Field(max_length=200)


class UndoBody(BaseModel):
    to: int | None = None


@router.get("/channels/{channel}/memory")
def get_memory(channel: str, session: SessionDep, home: HomeDep) -> dict[str, Any]:
    found = channel_for(home, channel, session.user)  # GET: reads, never writes
    markdown: str | None = None
    try:
        markdown = memory.read_file_text(found) if found.project else None
        layers = memory.load(home, found)
    except MemoryFormatError as exc:
        return memory_json(Memory()) | {"markdown": markdown, "error": str(exc)}
    return memory_json(layers) | {"markdown": markdown, "error": None}


@router.put("/channels/{channel}/memory")
def put_memory(
    channel: str, body: MemoryBody, session: SessionDep, home: HomeDep
) -> dict[str, Any]:
    found = channel_for(home, channel, session.user)
    memory.ensure_file(home, found)  # the empty first revision, so this edit can be undone
    current = memory.load(home, found)  # a memory.md that cannot be read is fixed by hand first
    quotes = [(q.get("speaker", ""), q.get("text", "")) for q in body.quotes]
    today = datetime.now(UTC).date().isoformat()
    edited = memory.from_person(
        body.summary, body.decisions, quotes, current, session.user.name, today
    )
    return memory_json(memory.save(home, found, edited, "edit").memory)


@router.get("/channels/{channel}/memory/history")
def memory_history(channel: str, session: SessionDep, home: HomeDep) -> list[dict[str, Any]]:
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
            {
                "id": revision.id,
                "source": revision.source,
                "created_at": revision.created_at,
                "memory": memory_json(revision.memory),
                "diff": diff,
            }
        )
    return out


@router.post("/channels/{channel}/memory/undo")
def memory_undo(channel: str, body: UndoBody, session: SessionDep, home: HomeDep) -> dict[str, Any]:
    found = channel_for(home, channel, session.user)
    revision = memory.undo(home, found, body.to)
    return memory_json(revision.memory) | {"revision_id": revision.id}


# ---------------------------------------------------------------- notes


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


@router.get("/notes")
def list_notes(session: SessionDep, home: HomeDep, project: str) -> dict[str, Any]:
    found, problems = notes.list_notes(projects.get_project(home, project))
    return {
        "notes": [note_json(n) for n in found],
        "problems": [{"path": str(p.path), "reason": p.reason} for p in problems],
    }


@router.get("/notes/{project}/{name:path}")
def get_note(project: str, name: str, session: SessionDep, home: HomeDep) -> dict[str, Any]:
    note = notes.get_note(projects.get_project(home, project), note_name(name))
    usage.record(home.db, session.user.id, "view", note=note.key)
    return note_json(note, full=True)


@router.post("/notes", status_code=201)
def create_note(body: NewNote, session: SessionDep, home: HomeDep) -> dict[str, Any]:
    made = notes.create_note(
        projects.get_project(home, body.project), body.title, body.body, body.tags
    )
    mark_stale(home)
    return note_json(made, full=True)


@router.put("/notes/{project}/{name:path}")
def update_note(
    project: str, name: str, body: NoteChanges, session: SessionDep, home: HomeDep
) -> dict[str, Any]:
    changed = notes.update_note(
        projects.get_project(home, project),
        note_name(name),
        body=body.body,
        title=body.title,
        base_sha256=body.base_sha256,
    )
    mark_stale(home)
    return note_json(changed, full=True)


@router.post("/notes/{project}/{name:path}/tags")
def tag_note(
    project: str, name: str, body: TagChanges, session: SessionDep, home: HomeDep
) -> dict[str, Any]:
    changed = notes.tag_note(
        projects.get_project(home, project), note_name(name), body.add, body.remove
    )
    mark_stale(home)
    for tag in body.add:
        usage.record(home.db, session.user.id, "tag", tag=tag, note=changed.key)
    return note_json(changed, full=True)


@router.get("/search")
def search(
    session: SessionDep,
    home: HomeDep,
    q: str,
    project: str | None = None,
    limit: int = 10,
    mode: Literal["vector", "keyword", "fallback", "fusion"] | None = None,
) -> dict[str, Any]:
    scope = [projects.get_project(home, project)] if project else []
    searcher = searcher_for(home)
    result = searcher.search(q, session.user, scope, limit=max(1, min(limit, 50)), mode=mode)
    return {
        "query": result.query,
        "mode": result.mode,
        "fallback_reason": result.fallback_reason,
        "keyword_used": result.keyword_used,
        "terms": result.terms,
        "incomplete": result.incomplete,  # the index is still filling: say so
        "results": [
            {
                "id": h.key,
                "title": h.title,
                "project": h.project,
                "name": h.name,
                "score": h.score,
                "similarity": h.similarity,
                "vector": h.vector,
                "bm25": h.bm25,
                "terms": h.terms,
                "boost": h.boost,
                "boost_causes": h.boost_causes,
                "tags": h.tags,
                "snippet": h.snippet,
                "why": h.why(),  # the numbers
                "in_words": h.in_words(),
            }
            for h in result.hits
        ],
    }


# ---------------------------------------------------------------- suggestions and usage


@router.post("/suggestions/{suggestion_id}/accept")
def accept(suggestion_id: int, session: SessionDep, home: HomeDep) -> dict[str, str]:
    return {"note": suggestions.accept(home, session.user, suggestion_id)}


@router.post("/suggestions/{suggestion_id}/dismiss")
def dismiss(suggestion_id: int, session: SessionDep, home: HomeDep) -> dict[str, str]:
    return {"note": suggestions.dismiss(home, session.user, suggestion_id)}


@router.get("/channels/{channel}/pins")
def list_pins(channel: str, session: SessionDep, home: HomeDep) -> list[dict[str, str]]:
    found = channel_for(home, channel, session.user)
    return [{"note": key, "pinned_at": when} for key, when in suggestions.pins(home, found)]


@router.delete("/channels/{channel}/pins/{note:path}")
def unpin(channel: str, note: str, session: SessionDep, home: HomeDep) -> dict[str, Any]:
    found = channel_for(home, channel, session.user)
    suggestions.unpin(home, found, note)
    return {"ok": True, "pins": [key for key, _ in suggestions.pins(home, found)]}


class UsageEvent(BaseModel):
    kind: Literal["tag", "view"]
    tag: str | None = None
    note: str | None = None


@router.post("/usage", status_code=201)
def record_usage(body: UsageEvent, session: SessionDep, home: HomeDep) -> dict[str, int]:
    event_id = usage.record(home.db, session.user.id, body.kind, note=body.note, tag=body.tag)
    return {"id": event_id}
