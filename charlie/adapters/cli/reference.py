"""The CLI reference (docs/cli.md), generated from the `--help` of `charlie` and every
subcommand, so the reference cannot drift from the commands.

    .venv/bin/python scripts/cli-reference     # writes docs/cli.md

A test fails when docs/cli.md is not what this renders. The help is drawn at a fixed width
under the name `charlie`, so the page is the same on every machine and terminal, and the same
as `charlie … --help` prints in a terminal at least 80 columns wide.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

# What click draws in any terminal 80 columns wide or wider (its help is at most 80 wide,
# less a margin of 2), whatever the terminal this runs in.
WIDTH = 78
PROGRAM = "charlie"
SCRIPT = ".venv/bin/python scripts/cli-reference"

HEADER = f"""\
# The `charlie` command

Every command's `--help`, generated from the commands themselves: do not edit this page
by hand; after changing a command, run `{SCRIPT}`.
`charlie COMMAND --help` (or `./scripts/run COMMAND --help`) prints the same.

Errors print `Error: …` with what to do, and exit 1; a mistake in the command line
itself (an unknown option, a missing argument, two options that exclude each other)
prints the usage and exits 2.
"""


def _contexts(
    command: click.Command, name: str, parent: click.Context | None
) -> Iterator[click.Context]:
    """The context of `command` and of every visible subcommand under it, depth first, in
    the order `--help` lists them."""
    ctx = command.context_class(
        command, info_name=name, parent=parent, terminal_width=WIDTH, **command.context_settings
    )
    yield ctx
    if isinstance(command, click.Group):
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            if sub is not None and not sub.hidden:
                yield from _contexts(sub, sub_name, ctx)


def render(command: click.Command) -> str:
    """docs/cli.md for `command`: a contents list, then each command's help in full."""
    contexts = list(_contexts(command, PROGRAM, None))
    contents = [
        f"- [`{ctx.command_path}`](#{ctx.command_path.replace(' ', '-')})" for ctx in contexts
    ]
    sections = [
        f"## {ctx.command_path}\n\n```\n{ctx.command.get_help(ctx).rstrip()}\n```\n"
        for ctx in contexts
    ]
    return "\n".join([HEADER, *contents, "", *sections]).rstrip("\n") + "\n"
