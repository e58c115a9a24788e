"""`charlie export` and `charlie restore`: projects in a zip, to keep or to take elsewhere."""

from __future__ import annotations

from pathlib import Path

import click

from charlie import users
from charlie.adapters.cli.common import opened_home, runnable
from charlie.text import plural
from charlie.transfer import export as archive
from charlie.transfer import restore


@click.command("export")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The zip file to write.",
)
@click.option(
    "-p",
    "--project",
    "projects",
    metavar="PROJECT",
    multiple=True,
    help="A project to export (repeat for more; default: every shared project).",
)
@click.option("--private", is_flag=True, help="Add your own private channel.")
@click.option("--user", "user_name", metavar="NAME", help="Who you are (default: CHARLIE_USER).")
def export_command(
    output: Path, projects: tuple[str, ...], private: bool, user_name: str | None
) -> None:
    """Export projects to a zip: their files as they are, their threads (readable, and as
    JSONL that `charlie import jsonl` reads, with traces, images, branches and pins), their
    memory's revisions, suggestions and the usage events. With --private, your private
    channel too (never anyone else's). Passwords, sign-ins, API tokens and charlie.toml are
    never exported. A manifest lists every file's sha256; `charlie restore` checks them all.
    """
    with opened_home() as home:
        who = user_name or home.settings.user
        result = archive.export_archive(
            home, output, slugs=list(projects) or None, exporter=who, private=private
        )
    shown = ", ".join(result.projects) or "no projects"
    mine = f" and {result.private}'s private channel" if result.private else ""
    click.echo(f"Exported {shown}{mine} to {result.path}")
    click.echo(f"  {result.files} files, {result.threads} threads, {result.messages} messages")
    for line in result.skipped:
        click.echo(f"Skipped {line}", err=True)


@click.command("restore")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--merge",
    is_flag=True,
    help="Restore into a data home that holds things already (nothing there is replaced).",
)
@click.option(
    "--private-owner",
    metavar="NAME",
    help="Confirm that the archive's private channel is NAME's and may be written.",
)
@click.option("--without-private", is_flag=True, help="Leave the archive's private channel out.")
def restore_command(
    file: Path, merge: bool, private_owner: str | None, without_private: bool
) -> None:
    """Restore an archive made by `charlie export` into the data home (CHARLIE_HOME), which
    must be empty unless --merge is given. Every file is checked against the archive's
    manifest first; a damaged or changed archive restores nothing. People are matched by
    name; anyone the home lacks gets an account without a password (listed at the end).
    The search index is not in the archive: run `charlie reindex` afterwards to make what
    was restored searchable. A private channel is written only when its owner exported it
    and has no account here yet, unless --private-owner names them.
    """
    checked = archive.open_archive(file)
    owner = restore.channel_owner(checked)
    if owner is not None and not without_private:
        exporter = checked.manifest.get("exported_by")
        click.echo(f"This archive holds {owner}'s private channel (exported by {exporter}).")
    with opened_home() as home:
        result = restore.restore_archive(
            home,
            checked,
            merge=merge,
            private_owner=private_owner,
            without_private=without_private,
        )
        admins = users.admins(home.db)
        people = users.has_people(home.db)
    click.echo(
        f"Restored {len(result.projects)} {plural(len(result.projects), 'project')} "
        f"({', '.join(result.projects) or 'none'}): "
        f"{result.files} files, {result.threads} threads, "
        f"{result.messages} messages ({result.already} already there), "
        f"{result.revisions} memory revisions, {result.usage_events} usage events, "
        f"{result.pins} pins, {result.suggestions} suggestions."
    )
    if result.private:
        click.echo(
            f"Wrote {result.private_messages} {plural(result.private_messages, 'message')}"
            f" into {result.private}'s private "
            "channel (no one else's)."
        )
    elif owner is not None:
        click.echo(f"Left out {owner}'s private channel.")
    for line in result.skipped:
        click.echo(f"Skipped {line}")
    if result.new_users:
        click.echo(
            runnable(
                f"New accounts: {', '.join(result.new_users)}. Passwords are never in an "
                "archive: give each one with `charlie users passwd NAME` before they sign in."
            )
        )
        if not admins:
            click.echo(
                runnable("No one is an administrator yet: `charlie users admin NAME` makes one.")
            )
    if not people:
        click.echo(
            runnable(
                "No one has an account in this home yet: `charlie users add NAME --admin` makes "
                "the first."
            )
        )
    click.echo(
        runnable("Run `charlie reindex` to make the restored notes and messages searchable.")
    )
