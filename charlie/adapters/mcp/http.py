"""MCP over streamable HTTP: served by the web app at /mcp, or alone by `charlie mcp --http`.

Every request passes the `Guard` before the SDK sees it:
- DNS rebinding: the Host must be this machine by address (an IP literal, `localhost`) or
  a name the server was told to answer to; a browser's Origin, when sent, the same. A page
  that rebinds its own name to this machine is refused, token or not.
- The bearer token (`Authorization: Bearer chk_…`, `charlie.household.tokens`) must be valid and not
  revoked. Otherwise the answer is 401 with a JSON-RPC error saying why, so MCP clients
  show the reason; nothing runs.
The verified caller travels in the request's ASGI scope (`server.CALLER`); the SDK also sees
the token as the session's owner, so one person's session is unusable with another's token.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from urllib.parse import urlsplit

import anyio
import mcp.types as mt
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from charlie.adapters.mcp.catalog import Caller
from charlie.adapters.mcp.server import CALLER, build_server, over_http
from charlie.config import Settings
from charlie.errors import CharlieError, Unauthorized
from charlie.home import Home, Shared
from charlie.household import tokens

PATH = "/mcp"
REFUSED = -32001  # JSON-RPC's range for a server's own errors: the request was not accepted
LOOPBACK_NAMES = {"localhost"}


def _host_of(value: str) -> str:
    """The host name of a Host header (`name:port`, `[::1]:port`) or an Origin (a URL)."""
    netloc = urlsplit(value).netloc if "://" in value else value
    return (urlsplit(f"//{netloc}").hostname or "").lower()


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class Guard:
    """Host and Origin checks, then the bearer token; only then the MCP app (see above)."""

    def __init__(self, app: ASGIApp, settings: Settings, names: Iterable[str] = ()) -> None:
        self.app = app
        self.settings = settings
        self.names = LOOPBACK_NAMES | {n.lower() for n in names if not _is_address(n)}

    def _trusted(self, host: str) -> bool:
        return bool(host) and (_is_address(host) or host in self.names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asgi = (scope, receive, send)
        headers = Headers(scope=scope)
        host = _host_of(headers.get("host", ""))
        if not self._trusted(host):
            await _refuse(421, f"This server does not answer to the name {host!r}.", *asgi)
            return
        origin = headers.get("origin")
        if origin is not None and not self._trusted(_host_of(origin)):
            await _refuse(403, f"Requests from web pages at {origin} are not accepted.", *asgi)
            return
        try:
            caller, token = await anyio.to_thread.run_sync(self._verify, headers)
        except CharlieError as exc:
            await _refuse(401, f"Error: {exc}", *asgi, challenge=True)
            return
        scope = dict(scope)
        scope[CALLER] = caller
        scope["user"] = AuthenticatedUser(
            AccessToken(
                token="",
                client_id=f"token-{token.id}",
                scopes=["read"] if token.read_only else ["read", "write"],
                subject=caller.user.name,
            )
        )
        await self.app(scope, receive, send)

    def _verify(self, headers: Headers) -> tuple[Caller, tokens.Token]:
        scheme, _, secret = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise Unauthorized(
                "Charlie's MCP server needs a personal token: send the header "
                f"'Authorization: Bearer chk_…'; create one {tokens.HOW_TO_CREATE}."
            )
        with Home.open(self.settings) as home:
            user, token = tokens.verify(home.db, secret)
        return Caller(user, read_only=token.read_only), token


async def _refuse(
    status: int,
    message: str,
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    challenge: bool = False,
) -> None:
    """A JSON-RPC error at an HTTP status: MCP clients show its message as it is."""
    error = mt.JSONRPCError(
        jsonrpc="2.0", id=None, error=mt.ErrorData(code=REFUSED, message=message)
    )
    headers: dict[str, str] = {}
    if challenge:  # RFC 6750
        headers["WWW-Authenticate"] = (
            f'Bearer error="invalid_token", error_description={json.dumps(message)}'
        )
    response = Response(
        error.model_dump_json(by_alias=True), status, headers, media_type="application/json"
    )
    await response(scope, receive, send)


def mcp_app(
    settings: Settings, names: Iterable[str] = (), shared: Shared | None = None
) -> Starlette:
    """The MCP endpoint at `PATH` as an app of its own; its lifespan runs the SDK's session
    manager. `names`: host names (besides addresses and localhost) it answers to; `shared`:
    a cache of expensive things (the embedding model) to share with the app serving it."""
    manager = StreamableHTTPSessionManager(app=build_server(settings, over_http, shared))
    guarded = Guard(StreamableHTTPASGIApp(manager), settings, names)
    return Starlette(routes=[Route(PATH, endpoint=guarded)], lifespan=lambda _app: manager.run())


def web_app(settings: Settings, shared: Shared) -> Starlette:
    """What `charlie serve` serves at /mcp (the `charlie.web` entry point named "mcp"): it
    answers to IP addresses, localhost and the names in CHARLIE_MCP_ALLOWED_HOSTS."""
    names = [n for n in settings.mcp_allowed_hosts.split(",") if n]
    return mcp_app(settings, names, shared=shared)
