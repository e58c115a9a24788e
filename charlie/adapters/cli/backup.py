"""`charlie backup`: a consistent copy of the data home, safe to take while Charlie runs."""

from __future__ import annotations

from pathlib import Path

import click

from charlie.config import load_settings
from charlie.text import plural
from charlie.transfer import backup


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


@click.command("backup")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--keep",
    type=click.IntRange(min=1),
    metavar="N",
    help="Then delete the oldest backups in FOLDER beyond the newest N (default: keep all).",
)
def backup_command(folder: Path, keep: int | None) -> None:
    """Back up the data home into a new charlie-backup-YYYYmmdd-HHMMSS folder (UTC) inside
    FOLDER: the database (copied live: `charlie serve` may keep running), the project
    folders, charlie.toml when there is one, and a manifest of every file's sha256. The
    search index is not copied; after a restore, `charlie reindex` rebuilds it.
    """
    result = backup.make_backup(load_settings(), folder, keep=keep)
    click.echo(f"Backed up to {result.path}")
    click.echo(
        f"  charlie.db: {_size(result.database_bytes)}, {result.messages} messages "
        f"(database version {result.user_version})"
    )
    files = f"{result.project_files} {plural(result.project_files, 'file')}"
    click.echo(f"  projects: {files}, {_size(result.project_bytes)}")
    if result.settings_file:
        click.echo("  charlie.toml: copied (it may hold keys: keep the backup private)")
    for line in result.skipped:
        click.echo(f"Skipped {line}", err=True)
    for path in result.removed:
        click.echo(f"Removed older backup {path.name}")
