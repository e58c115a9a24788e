"""What every CLI command needs: the data home, the model client, the channel."""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from charlie.config import SETTINGS_FILE, load_settings
from charlie.conversations import Channel, private_channel, shared_channel
from charlie.errors import CharlieError, NotFound
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.projects import DEFAULT_PROJECT, ensure_project, get_project
from charlie.retrieval import embeddings
from charlie.retrieval.index import Index
from charlie.retrieval.message_index import MessageIndex
from charlie.text import plural
from charlie.users import User, list_users, require_user

F = TypeVar("F", bound=Callable[..., Any])
LAUNCHER = "CHARLIE_LAUNCHER"  # set by ./scripts/run: the command as the person typed it


def command_name() -> str:
    """`charlie` as the person can run it here, for the hints Charlie prints: what started
    this process when that was ./scripts/run (which says so in CHARLIE_LAUNCHER); `charlie`
    when it is on PATH; else how this process was started (`python -m charlie`, or the path
    of the `charlie` script)."""
    launcher = os.environ.get(LAUNCHER, "").strip()
    if launcher:
        return shlex.quote(launcher)
    if shutil.which("charlie"):
        return "charlie"
    started = Path(sys.argv[0])
    if started.name == "__main__.py" and started.parent.name == "charlie":
        python = Path(sys.executable)
        on_path = shutil.which(python.name)
        same = on_path is not None and os.path.abspath(on_path) == os.path.abspath(python)
        return f"{python.name if same else shlex.quote(str(python))} -m charlie"
    if started.name == "charlie":
        return shlex.quote(sys.argv[0])
    return "charlie"


class _Told(logging.Handler):
    """Log records shown as plain lines on stderr (through click, so a test's runner sees
    them too)."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(runnable(self.format(record)), err=True)


# What people are told as it happens: which model server answers and why, and the built-in
# model's start (loading takes seconds).
TOLD_LOGGERS = ("charlie.llm.servers", "charlie.llm.runtime")


def tell_model_news() -> None:
    """Show the model server's news (`TOLD_LOGGERS`, INFO and up) on stderr; once."""
    for name in TOLD_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, _Told) for h in logger.handlers):
            logger.addHandler(_Told())
            logger.setLevel(logging.INFO)


def runnable(text: str) -> str:
    """`text` with each command in it (written `` `charlie …` ``) as the person can run it
    here (`command_name`): a person using ./scripts/run has no `charlie` on PATH."""
    name = command_name()
    return text if name == "charlie" else text.replace("`charlie ", f"`{name} ")


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
        "--private", is_flag=True, help="Use your private channel (yours alone, never a file)."
    )(func)
    func = click.option(
        "-p", "--project", metavar="PROJECT", help=f"Project name (default: {DEFAULT_PROJECT})."
    )(func)
    return func


def resolve_channel(
    home: Home, project: str | None, private: bool, user_name: str | None, *, create: bool
) -> tuple[Channel, User]:
    user = cli_user(home, user_name)
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
        line += f"; {len(result.rejected_quotes)} quote(s) left out"
    return line + ")"


def open_index(home: Home) -> Index:
    """The notes index, brought up to date with the files (only changed files are read)."""
    index = Index(home, embeddings.from_settings(home.settings))
    reembedding = index.reembedding()
    if reembedding is not None:
        left = reembedding[1] - reembedding[0]
        click.echo(
            f"Embedding {left} {plural(left, 'passage')} of your notes again for the model "
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


ONLY_MEMBER_SAID = "charlie.only-member-said"  # ctx.meta: the note below was printed


def cli_user(home: Home, name: str | None) -> User:
    """Who is speaking: --user NAME, else CHARLIE_USER (or `user` in charlie.toml), else the
    login name. A login name nobody was added as (root, on a server) is no error while the
    household has one member: that member speaks, and a note says so once per command."""
    settings = home.settings
    if name or "user" in settings.model_fields_set:
        return require_user(home.db, name or settings.user)
    login = settings.user
    people = [person for person, _ in list_users(home.db)]
    if not people or any(person.name == login for person in people):
        return require_user(home.db, login)  # no one yet: it says how to make the first
    if len(people) > 1:
        raise NotFound(
            f"Who is speaking? Your login name {login!r} has no account in this household "
            f"({', '.join(p.name for p in people)}). Say who you are once for every command "
            f'with `export CHARLIE_USER=NAME` (or user = "NAME" in '
            f"{settings.home / SETTINGS_FILE}), or each time with --user NAME."
        )
    only = people[0]
    context = click.get_current_context(silent=True)
    if context is None or not context.meta.get(ONLY_MEMBER_SAID):
        click.echo(
            f"(Speaking as {only.name}, the household's only member: the login name {login!r} "
            f"has no account. `export CHARLIE_USER={only.name}` says so and ends this note.)",
            err=True,
        )
        if context is not None:
            context.meta[ONLY_MEMBER_SAID] = True
    return only
