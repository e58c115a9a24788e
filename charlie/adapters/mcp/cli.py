"""`charlie mcp`: serve Charlie to other apps over MCP (registered with the CLI as a plugin
command, like `charlie serve`)."""

from __future__ import annotations

import click

from charlie.config import Settings, load_settings
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.users import require_user

DEFAULT_PORT = 8766


@click.command("mcp")
@click.option(
    "--user", "user_name", metavar="NAME", help="Over stdio: who the app acts as (CHARLIE_USER)."
)
@click.option("--read-only", is_flag=True, help="Over stdio: refuse every tool that writes.")
@click.option(
    "--http",
    "over_http",
    is_flag=True,
    help="Serve streamable HTTP at /mcp instead; each app sends its own personal token.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Over HTTP: the address.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int)
@click.option(
    "--allow-host",
    "names",
    multiple=True,
    metavar="NAME",
    help="Over HTTP: a DNS name clients reach this server by (addresses and localhost always "
    "work); others are refused, against DNS rebinding.",
)
def mcp_command(
    user_name: str | None,
    read_only: bool,
    over_http: bool,
    host: str,
    port: int,
    names: tuple[str, ...],
) -> None:
    """Serve your notes, memory and recall to other apps (Claude Desktop, …) over MCP.

    By default one person over stdin/stdout, for an app that starts `charlie mcp --user
    NAME` itself. With --http, anyone in the household over streamable HTTP at
    http://HOST:PORT/mcp, each with a personal token (`charlie serve` also serves /mcp).
    """
    settings = load_settings()
    if over_http:
        if user_name or read_only:
            raise CharlieError(
                "Over HTTP each app acts as the owner of the token it sends (read-only or not); "
                "--user and --read-only are for stdio."
            )
        _serve_http(settings, host, port, names)
        return
    import anyio

    from charlie.adapters.mcp.catalog import Caller
    from charlie.adapters.mcp.server import run_stdio

    with Home.open(settings) as home:
        user = require_user(home.db, user_name or settings.user)
    anyio.run(run_stdio, settings, Caller(user, read_only=read_only))


def _serve_http(settings: Settings, host: str, port: int, names: tuple[str, ...]) -> None:
    import uvicorn

    from charlie.adapters.mcp.http import PATH, mcp_app

    app = mcp_app(settings, (host, *names))
    where = f"http://{host}:{port}{PATH}"
    click.echo(f"Charlie's MCP server is at {where} (Ctrl-C stops it).", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
