"""`charlie store copy`: a household's rows moved between charlie.db and PostgreSQL."""

from __future__ import annotations

from contextlib import closing

import click

from charlie import db as database
from charlie.adapters.cli.common import runnable
from charlie.config import load_settings
from charlie.errors import CharlieError
from charlie.store import connect_postgres, is_postgres, shown
from charlie.store.copy import copy_rows


@click.group("store")
def store_group() -> None:
    """Where the household's rows are kept: charlie.db (SQLite) or PostgreSQL."""


@click.command("copy")
@click.option("--to", "to_url", metavar="URL", help="Copy this home's charlie.db into it.")
@click.option("--from", "from_url", metavar="URL", help="Copy it into this home's charlie.db.")
def copy_command(to_url: str | None, from_url: str | None) -> None:
    """Copy every row between this data home's charlie.db and an empty PostgreSQL database
    (postgresql://…), either way: people with their passwords and sign-ins, threads and
    messages, private channels, memory revisions, usage. One transaction: a copy that fails
    leaves the target empty. Each table is checked by its count of rows and a digest of
    them. The source is not changed, nor are the data home's files; afterwards set (or
    unset) CHARLIE_DATABASE_URL to use the copy."""
    if (to_url is None) == (from_url is None):
        raise CharlieError("Say which way: --to postgresql://… or --from postgresql://….")
    url = to_url or from_url or ""
    if not is_postgres(url):
        raise CharlieError(f"{url!r} is not a postgresql:// URL.")
    settings = load_settings()
    if from_url is not None and settings.db_path.exists():
        raise CharlieError(
            f"{settings.db_path} exists already: a copy goes into a new charlie.db only. Move "
            "it aside (or set CHARLIE_HOME to a new folder) and copy again."
        )
    if to_url is not None and not settings.db_path.is_file():
        raise CharlieError(f"There is no {settings.db_path} to copy. Check CHARLIE_HOME.")
    with (
        closing(database.connect(settings.db_path)) as lite,
        closing(connect_postgres(url)) as pg,
    ):
        try:
            copied = copy_rows(lite, pg) if to_url else copy_rows(pg, lite)
        except CharlieError:
            if from_url is not None:
                settings.db_path.unlink(missing_ok=True)  # the new, empty file goes again
            raise
    where = shown(url)
    source, target = (settings.db_path, where) if to_url else (where, settings.db_path)
    click.echo(
        f"Copied {copied.rows:,} rows of {len(copied.tables)} tables from {source} to {target}:"
    )
    for table in copied.tables:
        click.echo(f"  {table.name:<28} {table.rows:>9,} rows  digest {table.digest[:12]} ✓")
    if copied.left_out:
        click.echo(f"Left out, no longer Charlie's: {', '.join(copied.left_out)}")
    use = f"set CHARLIE_DATABASE_URL={where}" if to_url else "unset CHARLIE_DATABASE_URL"
    click.echo(runnable(f"To use the copy, {use}; the source is as it was."))


store_group.add_command(copy_command)
