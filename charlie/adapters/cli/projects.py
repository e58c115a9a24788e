"""`charlie projects`: list, create, configure, delete and restore projects; `charlie trash`."""

from __future__ import annotations

import click

from charlie import projects as core
from charlie.adapters.cli.common import opened_home, runnable
from charlie.adapters.cli.users import at_terminal
from charlie.errors import CharlieError
from charlie.household import trash


@click.group(invoke_without_command=True)
@click.pass_context
def projects(ctx: click.Context) -> None:
    """List projects (the default), or create and configure them."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_command)


@projects.command("list")
def list_command() -> None:
    """List every project: slug, cadence and display name."""
    with opened_home() as home:
        found, problems = core.scan_projects(home)
        if not found and not problems:
            click.echo(runnable("No projects yet. Create one with `charlie projects create NAME`."))
        for project in found:
            config = project.config
            click.echo(f"{project.slug}\tevery {config.distill_every}\t{config.name}")
        for problem in problems:
            click.echo(f"Skipped {problem}", err=True)


@projects.command("create")
@click.argument("name")
@click.option("--slug", help="Folder name (default: made from NAME).")
@click.option("--style", default="", help="Response style, e.g. 'short, practical answers'.")
@click.option("--persona", default="", help="Extra instructions for the assistant.")
@click.option(
    "--every",
    "distill_every",
    default=5,
    show_default=True,
    type=int,
    help="Distill the conversation into memory every N messages.",
)
def create_command(
    name: str, slug: str | None, style: str, persona: str, distill_every: int
) -> None:
    """Create a project called NAME."""
    with opened_home() as home:
        project = core.create_project(
            home, name, slug=slug, style=style, persona=persona, distill_every=distill_every
        )
        click.echo(f"Created project {project.slug} at {project.path}")


@projects.command("set")
@click.argument("slug")
@click.option("--name", help="Display name.")
@click.option("--style", help="Response style.")
@click.option("--persona", help="Extra instructions for the assistant.")
@click.option("--every", "distill_every", type=int, help="Distillation cadence in messages.")
@click.option("--quotes", "quotes_window", type=int, help="How many recent quotes to keep.")
@click.option(
    "--model",
    metavar="NAME",
    help="The model this project's chat uses (one the server lists; '' for the default).",
)
def set_command(
    slug: str,
    name: str | None,
    style: str | None,
    persona: str | None,
    distill_every: int | None,
    quotes_window: int | None,
    model: str | None,
) -> None:
    """Change a project's settings (written to its project.toml)."""
    with opened_home() as home:
        project = core.update_project(
            home,
            slug,
            name=name,
            style=style,
            persona=persona,
            distill_every=distill_every,
            quotes_window=quotes_window,
            model=model,
        )
        click.echo(f"Updated {project.config_path}")


@projects.command("show")
@click.argument("slug")
def show_command(slug: str) -> None:
    """Show a project's settings."""
    with opened_home() as home:
        project = core.get_project(home, slug)
        click.echo(f"slug: {project.slug}\nfolder: {project.path}")
        for key, value in project.config.model_dump().items():
            click.echo(f"{key}: {value if value is not None else '(default)'}")


@projects.command("rm")
@click.argument("slug")
@click.option("--yes", is_flag=True, help="Delete without asking.")
def rm_command(slug: str, yes: bool) -> None:
    """Move project SLUG to the trash (its folder, notes and memory; nothing is destroyed).

    `charlie projects restore SLUG` brings it back with its conversation and memory.
    """
    with opened_home() as home:
        project = core.get_project(home, slug)
        if not yes:
            if not at_terminal():
                raise CharlieError(f"Add --yes to delete project {slug} without being asked.")
            if not click.confirm(
                f"Move project {slug} ({project.config.name}) to the trash?",
                default=False,
                err=True,
            ):
                raise CharlieError(f"Project {slug} was not deleted.")
        trashed = trash.delete_project(home, slug)
        click.echo(
            runnable(
                f"Moved project {slug} to the trash ({trashed.path}). "
                f"`charlie projects restore {slug}` brings it back."
            )
        )


@projects.command("restore")
@click.argument("slug")
def restore_command(slug: str) -> None:
    """Bring project SLUG back from the trash (the most recently deleted of that name, or
    the trash entry `charlie trash` shows)."""
    with opened_home() as home:
        project = trash.restore_project(home, slug)
        click.echo(f"Restored project {project.slug} at {project.path}")


@click.group("trash", invoke_without_command=True)
@click.pass_context
def trash_group(ctx: click.Context) -> None:
    """List what is in the trash (the default), or restore something from it."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(trash_list_command)


@trash_group.command("list")
def trash_list_command() -> None:
    """List deleted projects and notes, newest first, with the id that restores each."""
    with opened_home() as home:
        found = trash.contents(home)
        if not found.projects and not found.notes:
            click.echo("The trash is empty.")
        for project in found.projects:
            click.echo(f"project\t{project.entry}\t{project.deleted_at}\t{project.name}")
        for note in found.notes:
            click.echo(f"note\t{note.id}\t{note.deleted_at}\t{note.title}")


@trash_group.command("restore")
@click.argument("trash_id", metavar="ID")
def trash_restore_command(trash_id: str) -> None:
    """Restore ID (as `charlie trash` lists it): a project's entry or slug, or a note's id."""
    with opened_home() as home:
        if "/" in trash_id:
            note = trash.restore_note(home, trash_id)
            click.echo(f"Restored note {note.key} ({note.path})")
        else:
            project = trash.restore_project(home, trash_id)
            click.echo(f"Restored project {project.slug} at {project.path}")
