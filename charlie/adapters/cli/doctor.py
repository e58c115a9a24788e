"""`charlie doctor`: what the configured model server can do, with a fix for each failure."""

from __future__ import annotations

import json

import click

from charlie import store
from charlie.adapters.cli.common import opened_home, runnable
from charlie.config import load_settings
from charlie.llm import doctor, servers


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="The checks as one JSON object.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1, max=doctor.TOTAL_SECONDS),
    default=doctor.PROBE_SECONDS,
    show_default=True,
    help="Seconds each request may take (all of them together: at most 60).",
)
def doctor_command(as_json: bool, timeout: float) -> None:
    """Probe the model server: reachable, model, context window, streaming, tool calls,
    json_schema output, images, embeddings and speed. Exits 1 when Charlie cannot chat
    (the server, the model or streaming failed).

    Each check costs a small model call; the whole run takes at most a minute.
    """
    settings = load_settings()
    server = servers.locate(settings)  # the built-in model may start: said as it goes
    try:
        report = doctor.examine(settings, timeout=timeout, server=server)
    finally:
        server.release()
    with opened_home() as home:
        doctor.remember(home, report)  # `auto` starts from what it saw
    database = store.described(settings)
    if as_json:
        out = report.as_json() | {"database": database}
        click.echo(json.dumps(out, ensure_ascii=False, indent=1))
    else:
        if server.kind != "configured":  # else the line below says it all
            click.echo(f"Model server: {report.source}")
        click.echo(f"Server: {report.server}  model: {report.model or '(the first offered)'}")
        click.echo(f"Database: {database['store']}, {database['where']} (open, up to date)")
        for line in doctor.table(report):
            click.echo(line)
        click.echo(runnable(report.verdict()))
    if not report.ok:
        raise SystemExit(1)
