"""The FastAPI application: sessions, CSRF, errors, body limits, and the PWA's files.

Every route calls the same core functions the CLI does. Each request opens the data home
(a SQLite connection) and closes it; expensive things (the embedding model, the vectors)
live in one cache shared by all requests.
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charlie import __version__, sessions
from charlie.config import Settings, load_settings
from charlie.errors import (
    CharlieError,
    Conflict,
    InvalidName,
    LLMError,
    LLMUnavailable,
    NotFound,
    PrivacyError,
    SettingsError,
    VoiceUnavailable,
)
from charlie.home import Home
from charlie.llm import LLMClient
from charlie.voice.turn import Voice

STATIC = Path(__file__).parent / "static"
mimetypes.add_type("text/javascript", ".js")  # some systems map .js to text/plain
mimetypes.add_type("application/manifest+json", ".webmanifest")
SESSION_COOKIE = "charlie_session"
CSRF_COOKIE = "charlie_csrf"
DEVICE_COOKIE = "charlie_device"  # a browser that signed in before (see charlie.sessions)
CSRF_HEADER = "x-csrf-token"
MAX_BODY = 16 * 1024 * 1024  # images travel as data URLs
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}

STATUS: list[tuple[type[Exception], int]] = [
    (NotFound, 404),
    (Conflict, 409),
    (InvalidName, 400),
    (PrivacyError, 403),
    (sessions.TooManyAttempts, 429),
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


class BodyLimit:
    """Refuses request bodies over `limit` bytes with 413, declared or streamed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            413, f"The request is larger than {self.limit // (1024 * 1024)} MB.", "TooLarge"
        )
        await response(scope, receive, send)


class _TooLarge(Exception):
    pass


def open_home(request: Request) -> Iterator[Home]:
    home = Home.open(request.app.state.settings, shared=request.app.state.shared)
    try:
        yield home
    finally:
        home.close()


HomeDep = Annotated[Home, Depends(open_home)]


def current_session(request: Request, home: HomeDep) -> sessions.Session:
    """The signed-in session; 401 without one, 403 for a state change without CSRF proof."""
    token = request.cookies.get(SESSION_COOKIE)
    session = sessions.lookup(home.db, token) if token else None
    if session is None:
        raise HTTPException(401, "Sign in first.")
    if request.method in UNSAFE and request.headers.get(CSRF_HEADER) != session.csrf:
        raise HTTPException(403, "Missing or wrong X-CSRF-Token header; reload the page.")
    return session


SessionDep = Annotated[sessions.Session, Depends(current_session)]


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        app.state.llm.close()

    app = FastAPI(
        title="Charlie",
        version=__version__,
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/api/openapi.json",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.shared = {}
    app.state.llm = LLMClient.from_settings(settings)
    app.state.voice = Voice(settings)  # loads its models on first use

    @app.exception_handler(CharlieError)
    async def charlie_error(request: Request, exc: CharlieError) -> JSONResponse:
        return problem(status_of(exc), str(exc), type(exc).__name__)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return problem(exc.status_code, str(exc.detail), "HTTPError")

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors: list[dict[str, Any]] = list(exc.errors())
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":
            message = (
                f"The request body is not valid JSON ({first.get('ctx', {}).get('error', '')})."
            )
        else:
            where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
            message = f"Bad request: {where or 'body'}: {first.get('msg', 'invalid')}."
        return problem(400, message, "BadRequest")

    from charlie.adapters.web import api, voice

    app.include_router(api.router, prefix="/api")
    app.include_router(voice.router, prefix="/api")

    @app.middleware("http")
    async def safety_headers(request: Request, call_next: Any) -> Any:
        response = await call_next(request)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        if not request.url.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-cache"  # the PWA updates at once
        return response

    if STATIC.is_dir():
        app.mount("/", StaticFiles(directory=STATIC, html=True), name="pwa")
    app.add_middleware(BodyLimit, limit=MAX_BODY)
    return app


def sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"
