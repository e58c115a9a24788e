"""`charlie projects`: list, create and configure projects."""

from __future__ import annotations

import click

from charlie import projects as core
from charlie.adapters.cli.common import opened_home


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
            click.echo("No projects yet. Create one with `charlie projects create NAME`.")
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
def set_command(
    slug: str,
    name: str | None,
    style: str | None,
    persona: str | None,
    distill_every: int | None,
    quotes_window: int | None,
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
