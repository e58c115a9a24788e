"""The FastAPI application: sessions, CSRF, errors, body limits, and the PWA's files.

Other front ends that speak HTTP plug in without this adapter importing them: each entry
point in the `charlie.web` group (the MCP server, at /mcp) is a function of the settings and
the cache of expensive things giving a Starlette app, served at /<entry name>, whose
lifespan runs with this app's.

Every route calls the same core functions the CLI does. Each request opens the data home
(a SQLite connection) and closes it; expensive things (the embedding model, the vectors)
live in one cache shared by all requests.
"""

from __future__ import annotations

import mimetypes
import sqlite3
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from charlie import __version__
from charlie.adapters.web import (
    admin,
    chat,
    documents,
    memory,
    model,
    notes,
    projects,
    sessions,
    status,
    threads,
    voice,
)
from charlie.adapters.web.deps import StreamSlots, problem, status_of
from charlie.config import Settings, load_settings
from charlie.db import explain_storage
from charlie.errors import CharlieError
from charlie.home import Home, Shared
from charlie.llm import starter
from charlie.llm.client import LLMClient
from charlie.retrieval import message_index, upkeep
from charlie.voice.turn import Voice

# The API, one router a resource, in the order their routes are matched.
ROUTERS = (
    sessions,
    status,
    projects,
    chat,
    memory,
    notes,
    voice,
    threads,
    admin,
    documents,
    model,
)
STATIC = Path(__file__).parent / "static"
mimetypes.add_type("text/javascript", ".js")  # some systems map .js to text/plain
mimetypes.add_type("application/manifest+json", ".webmanifest")
MAX_BODY = 16 * 1024 * 1024  # images travel as data URLs


class BodyLimit:
    """Refuses request bodies over `limit` bytes with 413, declared or streamed; the paths
    in `larger` (a document upload) have a limit of their own.

    A body declared too large is refused before the app runs. A streamed (chunked) one is
    counted as it arrives: past the limit, 413 is sent at once and the app is told the client
    went away, so whatever it does next (a 400 for an unreadable body) never reaches the wire.
    """

    def __init__(self, app: ASGIApp, limit: int, larger: dict[str, int] | None = None) -> None:
        self.app, self.limit, self.larger = app, limit, larger or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.larger.get(scope["path"], self.limit)
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(limit, scope, receive, send)
            return
        seen = 0
        refused = False

        async def counted() -> Message:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                refused = True
                await self._refuse(limit, scope, receive, send)
                return {"type": "http.disconnect"}
            return message

        async def unless_refused(message: Message) -> None:
            if not refused:
                await send(message)

        try:
            await self.app(scope, counted, unless_refused)
        except ClientDisconnect:
            if not refused:
                raise  # a real disconnect is the server's to log

    async def _refuse(self, limit: int, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            413, f"The request is larger than {limit // (1024 * 1024)} MB.", "TooLarge"
        )
        await response(scope, receive, send)


CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "media-src 'self' data: blob:; connect-src 'self'; worker-src 'self'; "
    "manifest-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One connection open while the server runs keeps the database's -wal and -shm
        # files in place between requests (each request opens its own): no churn, and on a
        # full disk reads still work instead of failing to recreate them.
        keeper = Home.open(settings, shared=app.state.shared)
        message_index.keep_indexed(keeper)  # history imported from the command line, too
        try:
            async with AsyncExitStack() as running:
                for plugin in plugins.values():
                    await running.enter_async_context(plugin.router.lifespan_context(plugin))
                yield
        finally:
            upkeep.stop_background_work(keeper)  # a document being indexed: the next start goes on
            message_index.stop_indexing(keeper)  # the same for messages
            keeper.close()
            app.state.llm.close()
            app.state.model_install.cancel()  # a download stopped: the next install goes on

    app = FastAPI(
        title="Charlie",
        version=__version__,
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/api/openapi.json",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.shared = Shared()
    plugins = {
        entry.name: entry.load()(settings, app.state.shared)
        for entry in entry_points(group="charlie.web")
    }
    app.state.llm = LLMClient.from_settings(settings)
    app.state.voice = Voice(settings)  # loads its models on first use
    app.state.streams = StreamSlots()  # answers streaming now, per person
    app.state.model_install = starter.Job()  # the starter model's download, when one runs

    @app.exception_handler(CharlieError)
    async def charlie_error(request: Request, exc: CharlieError) -> JSONResponse:
        return problem(status_of(exc), str(exc), type(exc).__name__)

    async def storage_error(request: Request, exc: Exception) -> JSONResponse:
        explained = explain_storage(exc, settings.db_path)
        if explained is None:
            raise exc  # a bug: the server's 500, with its traceback in the log
        return problem(status_of(explained), str(explained), type(explained).__name__)

    app.add_exception_handler(sqlite3.Error, storage_error)
    app.add_exception_handler(OSError, storage_error)

    @app.exception_handler(OverflowError)
    async def out_of_range(request: Request, exc: OverflowError) -> JSONResponse:
        # An id past SQLite's 64-bit integers (`?thread=9223372036854775808`): none has it.
        return problem(404, "There is nothing with that id (it is out of range).", "NotFound")

    @app.exception_handler(HTTPException)  # Starlette's: its form parser raises it too
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

    for module in ROUTERS:  # the API, one router a resource (docs/api.md)
        app.include_router(module.router, prefix="/api")

    @app.middleware("http")
    async def safety_headers(request: Request, call_next: Any) -> Any:
        response = await call_next(request)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        if not request.url.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-cache"  # the PWA updates at once
            # A second line behind the renderer's allow-list: no script, style or frame from
            # anywhere but the app itself, no inline script or style, no plugin.
            response.headers.setdefault("Content-Security-Policy", CSP)
        return response

    for name, plugin in plugins.items():
        app.add_route(f"/{name}", plugin, include_in_schema=False)
    if STATIC.is_dir():
        app.mount("/", StaticFiles(directory=STATIC, html=True), name="pwa")
    app.add_middleware(BodyLimit, limit=MAX_BODY, larger=documents.LARGER_BODIES)
    return app
