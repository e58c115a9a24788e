"""`charlie serve`: the web app and PWA (registered with the CLI as a plugin command)."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

import click

from charlie.config import Settings, load_settings
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.users import list_users

if TYPE_CHECKING:
    import uvicorn

KEEP_ALIVE_SECONDS = 5  # an idle connection is closed after this long
HEADER_SECONDS = 10  # a request's headers must have arrived this long after it began
BODY_SECONDS = 120  # and its body (16 MB at most) this long after that
CONNECTIONS = 256  # at once; more are answered 503 (each holds a file descriptor)
MAX_HEADER_BYTES = 64 * 1024  # the request line and headers together, at most


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback serves your LAN.",
)
@click.option("--port", default=8765, show_default=True, type=int)
@click.option(
    "--certfile",
    type=click.Path(exists=True, dir_okay=False),
    help="TLS certificate (PEM): serve HTTPS, which phones need to use the microphone.",
)
@click.option(
    "--keyfile",
    type=click.Path(exists=True, dir_okay=False),
    help="The certificate's private key (PEM).",
)
def serve(host: str, port: int, certfile: str | None, keyfile: str | None) -> None:
    """Serve the PWA and its API (open http://127.0.0.1:8765 in a browser).

    Browsers allow the microphone (voice) only on https:// or on this machine itself, so to
    talk to Charlie from a phone on the LAN, serve HTTPS with --certfile and --keyfile.
    """
    if bool(certfile) != bool(keyfile):
        raise CharlieError("HTTPS needs both --certfile and --keyfile.")
    import uvicorn

    settings = load_settings()
    with Home.open(settings) as home:
        accounts = [u.name for u, can_sign_in in list_users(home.db) if can_sign_in]
    if not _loopback(host) and not accounts:
        raise CharlieError(
            f"Serving on {host} lets other machines connect, so it needs accounts: create one "
            "with `charlie users add NAME` first."
        )
    if not accounts:
        typed = click.get_current_context().meta.get("charlie.command", "charlie")  # the CLI's
        click.echo(
            f"No one can sign in yet: create an account with `{typed} users add NAME`.", err=True
        )
    scheme = "https" if certfile else "http"
    click.echo(f"Charlie is at {scheme}://{host}:{port} (Ctrl-C stops it).", err=True)
    uvicorn.Server(server_config(settings, host, port, certfile, keyfile)).run()


def server_config(
    settings: Settings,
    host: str,
    port: int,
    certfile: str | None = None,
    keyfile: str | None = None,
) -> uvicorn.Config:
    """How `charlie serve` runs uvicorn: X-Forwarded-For believed only from the proxies in
    CHARLIE_TRUSTED_PROXIES (none by default), idle connections closed after 5 s, request
    headers limited in size and in time (`HEADER_SECONDS`), bodies in time (`BODY_SECONDS`),
    at most `CONNECTIONS` at once."""
    import uvicorn

    from charlie.adapters.web.app import create_app
    from charlie.adapters.web.timeouts import header_timeout_protocol

    trusted = settings.trusted_proxies
    return uvicorn.Config(
        create_app(settings),
        host=host,
        port=port,
        log_level="warning",
        ssl_certfile=certfile,
        ssl_keyfile=keyfile,
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or None,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        http=header_timeout_protocol(HEADER_SECONDS, BODY_SECONDS),
        limit_concurrency=CONNECTIONS,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
