"""`charlie chat`: talk to Charlie in a project or in your private channel."""

from __future__ import annotations

from pathlib import Path

import click

from charlie import chat as core_chat
from charlie import distill, memory
from charlie.adapters.cli.common import (
    channel_options,
    distilled_line,
    opened_home,
    opened_llm,
    resolve_channel,
)
from charlie.conversations import Channel
from charlie.errors import CharlieError, LLMError
from charlie.home import Home
from charlie.llm import LLMClient
from charlie.users import User

HELP_TEXT = """Commands: /memory shows the memory, /distill folds the conversation into memory now,
/quit leaves (so does Ctrl-D). Anything else is sent to Charlie."""


def _say(
    home: Home, llm: LLMClient, channel: Channel, user: User, text: str, images: list[Path]
) -> None:
    streamed = False
    for event in core_chat.turn(home, llm, channel, user, text, images):
        if isinstance(event, core_chat.Token):
            click.echo(event.text, nl=False)
            streamed = True
        elif isinstance(event, core_chat.Reply):
            if streamed:
                click.echo()
        elif isinstance(event, core_chat.Distilled):
            click.echo(distilled_line(event.result), err=True)
        elif isinstance(event, core_chat.Notice):
            click.echo(f"Note: {event.text}", err=True)


@click.command()
@channel_options
@click.option("-m", "--message", metavar="TEXT", help="Send one message, print the reply, exit.")
@click.option(
    "--image",
    "images",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Attach an image (PNG, JPEG, WebP, GIF) to the message; repeatable.",
)
def chat(
    project: str | None,
    private: bool,
    user_name: str | None,
    message: str | None,
    images: tuple[Path, ...],
) -> None:
    """Chat with Charlie (interactive, or one message with -m).

    A project that does not exist yet is created. Every few messages (the project's
    cadence) the conversation is distilled into the project's memory.md.
    """
    with opened_home() as home, opened_llm(home) as llm:
        channel, user = resolve_channel(home, project, private, user_name, create=True)
        if message is not None:
            _say(home, llm, channel, user, message, list(images))
            return
        _interactive(home, llm, channel, user, list(images))


def _interactive(
    home: Home, llm: LLMClient, channel: Channel, user: User, images: list[Path]
) -> None:
    click.echo(f"Charlie — {channel.label}, as {user.name}. /help for commands.", err=True)
    while True:
        try:
            text = click.prompt("you", prompt_suffix="> ", default="", show_default=False)
        except (EOFError, click.Abort):
            click.echo(err=True)
            return
        command = text.strip().lower()
        if command in {"/quit", "/exit", "/q"}:
            return
        if command == "/help":
            click.echo(HELP_TEXT)
            continue
        if command == "/memory":
            click.echo(memory.render(memory.load(home, channel), channel.label))
            continue
        if command == "/distill":
            try:
                click.echo(distilled_line(distill.distill(home, channel, llm)), err=True)
            except CharlieError as exc:
                click.echo(f"Error: {exc}", err=True)
            continue
        if not text.strip():
            continue
        try:
            _say(home, llm, channel, user, text, images)
        except LLMError as exc:
            click.echo(f"\nError: {exc}", err=True)
        images = []  # an image given on the command line goes with the first message only
