"""What the web routers depend on: the data home and the session per request, the error →
status mapping, the one way a route streams server-sent events, and how a route that
answers something other than JSON says so in the OpenAPI schema (`EventStream`, `files`).

Routers (`chat.py`, `voice.py`, …) import this module, never `app.py`; `app.py` imports the
routers. So the web adapter has no import cycle.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse

from charlie.db import explain_storage
from charlie.errors import (
    Busy,
    CharlieError,
    Conflict,
    DatabaseDamaged,
    DatabaseError,
    Forbidden,
    InvalidName,
    LLMError,
    LLMUnavailable,
    NotFound,
    PrivacyError,
    SettingsError,
    Unauthorized,
    VoiceUnavailable,
)
from charlie.home import Home
from charlie.household import signin
from charlie.jsonvalue import JSONObject
from charlie.llm.client import LLMClient
from charlie.users import User

SESSION_COOKIE = "charlie_session"
CSRF_COOKIE = "charlie_csrf"
# A browser that signed in before (see `charlie.household.signin`).
DEVICE_COOKIE = "charlie_device"
CSRF_HEADER = "x-csrf-token"
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
log = logging.getLogger("charlie.web")
STREAMS_PER_PERSON = 3  # chat and voice answers streaming at once, per person


class TooManyStreams(CharlieError):
    """A person already has as many answers streaming as one person may."""


STATUS: list[tuple[type[Exception], int]] = [
    (NotFound, 404),
    (Conflict, 409),
    (InvalidName, 400),
    (Unauthorized, 401),
    (PrivacyError, 403),
    (Forbidden, 403),
    (signin.TooManyAttempts, 429),
    (TooManyStreams, 429),
    (Busy, 429),
    (DatabaseDamaged, 500),
    (DatabaseError, 503),  # a full disk, a disk error, a read-only or busy database
    (LLMUnavailable, 503),
    (VoiceUnavailable, 503),
    (LLMError, 502),
    (SettingsError, 500),
    (CharlieError, 400),
]


def status_of(exc: Exception) -> int:
    return next(code for kind, code in STATUS if isinstance(exc, kind))


def problem(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": message, "kind": kind}, status_code=status)


def sse(event: str, data: Mapping[str, object]) -> str:
    """One server-sent event; its data, a JSON object."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


# ---------------------------------------------------------------- per request


def open_home(request: Request) -> Iterator[Home]:
    home = Home.open(request.app.state.settings, shared=request.app.state.shared)
    try:
        yield home
    finally:
        home.close()


HomeDep = Annotated[Home, Depends(open_home)]


def current_session(request: Request, home: HomeDep) -> signin.Session:
    """The signed-in session; 401 without one, 403 for a state change without CSRF proof."""
    token = request.cookies.get(SESSION_COOKIE)
    session = signin.lookup(home.db, token) if token else None
    if session is None:
        raise HTTPException(401, "Sign in first.")
    if request.method in UNSAFE and request.headers.get(CSRF_HEADER) != session.csrf:
        raise HTTPException(403, "Missing or wrong X-CSRF-Token header; reload the page.")
    return session


SessionDep = Annotated[signin.Session, Depends(current_session)]


# ---------------------------------------------------------------- streaming


class StreamSlots:
    """How many answers each person has streaming; at most `limit` each, so one person's
    slow answers cannot take every worker thread from everyone else."""

    def __init__(self, limit: int = STREAMS_PER_PERSON) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._open: dict[int, int] = {}

    def take(self, user: User) -> Callable[[], None]:
        """A slot for `user`, or `TooManyStreams`; returns the (idempotent) release."""
        with self._lock:
            if self._open.get(user.id, 0) >= self.limit:
                raise TooManyStreams(
                    f"{user.name} already has {self.limit} answers on their way; wait for one "
                    "to finish (or stop it), then send again."
                )
            self._open[user.id] = self._open.get(user.id, 0) + 1
        released = threading.Event()

        def release() -> None:
            with self._lock:
                if released.is_set():
                    return
                released.set()
                self._open[user.id] -= 1
                if not self._open[user.id]:
                    del self._open[user.id]

        return release


class EventStream(StreamingResponse):
    """Server-sent events, as `stream` answers them. A streaming route names it as its
    `response_class`, so its OpenAPI schema says `text/event-stream`, never JSON."""

    media_type = "text/event-stream"


def files(*media_types: str) -> dict[int | str, JSONObject]:
    """A route's OpenAPI `responses` when its 200 is a file of one of `media_types` (their
    parameters, such as `; charset=utf-8`, left out). The route also names a non-JSON
    `response_class` (`FileResponse`, `Response`), or FastAPI claims JSON as well."""
    binary: JSONObject = {"schema": {"type": "string", "format": "binary"}}
    kinds = dict.fromkeys(kind.split(";")[0].strip() for kind in media_types)
    return {200: {"content": {kind: binary for kind in kinds}}}


def stream(
    request: Request,
    user: User,
    produce: Callable[[Home], Iterable[str]],
    *,
    first: Iterable[str] = (),
    cleanup: Callable[[], None] | None = None,
    before: Callable[[], None] | None = None,
) -> EventStream:
    """Server-sent events: `first`, then whatever `produce` yields on a data home of its own
    (the request's closes before the stream starts), then `done`. A `CharlieError` becomes an
    `error` event. Each person may have `STREAMS_PER_PERSON` streams at once (429 beyond).

    `before` runs once the person's slot is taken and before the response starts: what must
    be stored before a 200 is sent (the person's message). If it raises, that is the answer,
    and the slot is given back; a 429 comes before it, so a refused message is not stored."""
    slots: StreamSlots = request.app.state.streams
    try:
        release = slots.take(user)
    except TooManyStreams:
        if cleanup is not None:
            cleanup()
        raise
    if before is not None:
        try:
            before()
        except BaseException:
            release()
            if cleanup is not None:
                cleanup()
            raise
    settings, shared = request.app.state.settings, request.app.state.shared
    finished = threading.Event()

    def finish() -> None:
        if not finished.is_set():
            finished.set()
            release()
            if cleanup is not None:
                cleanup()

    def events() -> Iterator[str]:
        try:
            yield from first
            own = Home.open(settings, shared=shared)
            try:
                yield from produce(own)
            except CharlieError as exc:  # LLMError included
                yield sse("error", {"error": str(exc), "kind": type(exc).__name__})
            except Exception as exc:  # a storage failure told as such; a bug logged and told
                explained = explain_storage(exc, settings.db_path)
                if explained is None:
                    log.exception("an answer failed")
                    explained = CharlieError(
                        "Charlie failed while answering (the details are in the server's log). "
                        "What was already saved is kept; try again."
                    )
                yield sse("error", {"error": str(explained), "kind": type(explained).__name__})
            finally:
                own.close()
            yield sse("done", {})
        finally:
            finish()

    body = events()
    weakref.finalize(body, finish)  # a stream that never started still gives its slot back
    return EventStream(
        body,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


_LOOK_AGAIN_SECONDS = 10.0  # how often a server with no model looks for one again
_looking = threading.Lock()


def llm_of(request: Request) -> LLMClient:
    """The app's model client. Started with no model server (none configured, none found,
    no built-in model yet), it looks again — at most every few seconds — so a server
    started since, or the starter model installed from the app's banner, answers the next
    message without a restart (the built-in model loads then: the first answer waits)."""
    state = request.app.state
    client: LLMClient = state.llm
    if client.server is None or client.server.kind != "none":
        return client
    with _looking:
        client = state.llm
        now = time.monotonic()
        if client.server is None or client.server.kind != "none":
            return client
        if now - getattr(state, "llm_looked_at", 0.0) < _LOOK_AGAIN_SECONDS:
            return client
        state.llm_looked_at = now
        found = LLMClient.from_settings(state.settings)
        if found.server is not None and found.server.kind == "none":
            found.close()
            return client
        log.info("A model server answers now: %s", found.server and found.server.why)
        state.llm = found
        client.close()
        return found
