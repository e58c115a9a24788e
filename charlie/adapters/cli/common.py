"""What every CLI command needs: the data home, the model client, the channel."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from charlie.config import load_settings
from charlie.conversations import Channel, private_channel, shared_channel
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.projects import DEFAULT_PROJECT, ensure_project, get_project
from charlie.retrieval import embeddings
from charlie.retrieval.index import Index
from charlie.retrieval.message_index import MessageIndex
from charlie.users import User, require_user

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def opened_home() -> Iterator[Home]:
    home = Home.open(load_settings())
    try:
        yield home
    finally:
        home.close()


@contextmanager
def opened_llm(home: Home) -> Iterator[LLMClient]:
    llm = LLMClient.from_settings(home.settings)
    try:
        yield llm
    finally:
        llm.close()


def channel_options(func: F) -> F:
    """-p/--project, --private and --user, shared by every command that works on a channel."""
    func = click.option(
        "--user", "user_name", metavar="NAME", help="Who is speaking (default: CHARLIE_USER)."
    )(func)
    func = click.option(
        "--private", is_flag=True, help="Use your private channel (SQLite only, yours alone)."
    )(func)
    func = click.option(
        "-p", "--project", metavar="PROJECT", help=f"Project name (default: {DEFAULT_PROJECT})."
    )(func)
    return func


def resolve_channel(
    home: Home, project: str | None, private: bool, user_name: str | None, *, create: bool
) -> tuple[Channel, User]:
    user = require_user(home.db, user_name or home.settings.user)
    if private:
        if project:
            raise CharlieError("Choose either --private or -p PROJECT, not both.")
        return private_channel(home, user), user
    slug = project or DEFAULT_PROJECT
    found = ensure_project(home, slug) if create or slug == DEFAULT_PROJECT else None
    channel = shared_channel(home, found or get_project(home, slug))
    memory.ensure_file(home, channel)
    return channel, user


def distilled_line(result: distill.DistillResult) -> str:
    m = result.memory
    line = (
        f"(memory updated from messages {result.first_message_id}-{result.last_message_id}: "
        f"{len(m.decisions)} decisions, {len(m.quotes)} quotes"
    )
    if result.rejected_quotes:
        line += f"; {len(result.rejected_quotes)} non-verbatim quote(s) rejected"
    return line + ")"


def open_index(home: Home) -> Index:
    """The notes index, brought up to date with the files (only changed files are read)."""
    index = Index(home, embeddings.from_settings(home.settings))
    reembedding = index.reembedding()
    if reembedding is not None:
        left = reembedding[1] - reembedding[0]
        click.echo(
            f"Embedding {left} passage{'' if left == 1 else 's'} of your notes again for the model "
            f"{index.embedder.name}: once after a model change, about a minute per 10,000 on "
            "two cores. Stopping is safe: it goes on from there next time.",
            err=True,
        )
    report = index.refresh()
    for path, reason in report.problems:
        click.echo(f"Skipped {path}: {reason}", err=True)
    return index


def message_index(home: Home) -> MessageIndex:
    """The messages' search index (`refresh` catches it up with every stored message)."""
    return MessageIndex(Index(home, embeddings.from_settings(home.settings)))


DETACHED: list[subprocess.Popen[bytes]] = []  # indexers started in the background


def index_elsewhere() -> None:
    """Start `charlie reindex --catch-up` in a detached process: it embeds the messages not
    indexed yet, and outlives this command (it leaves at once when a server or another
    indexer is at it). Nothing is printed or logged by it: private words go nowhere."""
    started = subprocess.Popen(
        [sys.executable, "-m", "charlie", "reindex", "--catch-up"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not stopped by the terminal closing or Ctrl-C here
        close_fds=True,
    )
    DETACHED.append(started)  # never waited for, never warned of


def project_option(func: F) -> F:
    return click.option(
        "-p", "--project", metavar="PROJECT", help=f"Project name (default: {DEFAULT_PROJECT})."
    )(func)


def cli_user(home: Home, name: str | None) -> User:
    return require_user(home.db, name or home.settings.user)
