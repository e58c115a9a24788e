"""The `charlie` command."""

from __future__ import annotations

import sqlite3
from importlib.metadata import entry_points
from typing import Any

import click

from charlie import __version__
from charlie.adapters.cli.common import command_name, runnable, tell_model_news
from charlie.config import load_settings
from charlie.db import explain_storage
from charlie.errors import CharlieError

COMMAND_NAME = "charlie.command"  # ctx.meta: `charlie` as the person can run it here


class CharlieGroup(click.Group):
    """Prints a `CharlieError` (or a storage failure: a full disk…) as `Error: …` and exits
    1, instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        # How to run `charlie` here, for commands that other adapters add (`charlie serve`).
        ctx.meta[COMMAND_NAME] = command_name()
        tell_model_news()
        try:
            return super().invoke(ctx)
        except CharlieError as exc:
            click.echo(runnable(f"Error: {exc}"), err=True)
            ctx.exit(1)
        except (sqlite3.Error, OSError) as exc:
            explained = explain_storage(exc, load_settings().db_path)
            if explained is None:
                raise
            click.echo(runnable(f"Error: {explained}"), err=True)
            ctx.exit(1)


@click.group(cls=CharlieGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="charlie")
def cli() -> None:
    """Charlie: a local-first personal assistant whose memory you can read and edit.

    Settings come from CHARLIE_* environment variables or charlie.toml in the data home
    (CHARLIE_HOME). The README has a quickstart.
    """


def _register() -> None:
    from charlie.adapters.cli import (
        archive,
        backup,
        chat,
        doctor,
        forget,
        importing,
        memory,
        model,
        notes,
        projects,
        recall,
        store,
        threads,
        tokens,
        users,
        voice,
    )

    cli.add_command(chat.chat)
    cli.add_command(projects.projects)
    cli.add_command(projects.trash_group)
    cli.add_command(memory.memory_group)
    cli.add_command(memory.distill_command)
    cli.add_command(forget.forget_command)
    cli.add_command(notes.notes_group)
    cli.add_command(notes.reindex_command)
    cli.add_command(notes.status_command)
    cli.add_command(notes.search_command)
    cli.add_command(users.users_group)
    cli.add_command(tokens.tokens_group)
    cli.add_command(voice.voice_command)
    cli.add_command(voice.say_command)
    cli.add_command(doctor.doctor_command)
    cli.add_command(model.model_group)
    cli.add_command(importing.import_group)
    cli.add_command(recall.recall_command)
    cli.add_command(threads.threads_group)
    cli.add_command(backup.backup_command)
    cli.add_command(archive.export_command)
    cli.add_command(archive.restore_command)
    cli.add_command(store.store_group)
    # Other front ends add their commands (`charlie serve`, …) as plugins, so this
    # adapter never imports them.
    for entry in entry_points(group="charlie.commands"):
        cli.add_command(entry.load(), entry.name)


_register()


def main() -> None:
    cli()
