"""`charlie chat`: talk to Charlie in a project or in your private channel."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import assert_never

import click

from charlie import conversations, trace
from charlie.adapters.cli.common import (
    channel_options,
    distilled_line,
    opened_home,
    opened_llm,
    resolve_channel,
    runnable,
)
from charlie.adapters.cli.users import first_run
from charlie.chat import turn as core_chat
from charlie.conversations import Channel
from charlie.errors import CharlieError, LLMError
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.memory import batches, distill, start_over
from charlie.memory import layers as memory
from charlie.retrieval import suggestions
from charlie.users import User

HELP_TEXT = """Commands: /memory shows the memory, /distill folds the conversation into memory now,
/start-over begins the memory again (/undo takes that back), /accept N and /dismiss N answer
a suggested note, /pins lists pinned notes, /unpin NOTE takes one out, /quit leaves (so does
Ctrl-D). Anything else is sent to Charlie."""


def trace_line(step: trace.Step) -> str | None:
    """One compact line for a trace step, or None when there is nothing worth showing."""
    match step:
        case trace.Preloaded(categories=categories):
            return f"· hint: {', '.join(categories)}" if categories else None
        case trace.Loaded(category=category, ok=ok):
            return f"· loaded {category} tools{'' if ok else ' (no such category)'}"
        case trace.Moded(mode=mode, reason=reason):
            return f"· tool mode: {mode} ({reason})" if mode != "native" else None
        case trace.Stopped(guard=guard, detail=detail):
            return f"· stopped: {detail or guard}"
        case trace.Called():
            return _call_line(step)
        case _:
            assert_never(step)


def _call_line(step: trace.Called) -> str:
    arguments = step.arguments
    shown = (
        ", ".join(repr(v) for v in arguments.values())
        if isinstance(arguments, dict)
        else repr(arguments)
    )
    mark = "" if step.ok else "✗ "
    write = " [write]" if step.writes else ""
    found = ", ".join(f"{hit.title} {hit.score:.2f}" for hit in step.hits or ())
    summary = f"{step.summary}: {found}" if found else step.summary
    did = "looked up" if step.count is not None else "worked out"  # a search, or day arithmetic
    who = f"Charlie {did}: " if step.by == "charlie" else ""
    return f"· {who}{mark}{step.name}({shown}){write} → {summary}"


class Printer:
    """Shows a turn's events: the reply on stdout as it streams, everything else on stderr."""

    def __init__(self, full_trace: bool = False) -> None:
        self.full_trace = full_trace
        self.streamed = False
        self.said = ""  # every piece of reply text printed in this turn
        self.offered: list[int] = []  # ids of the suggestions shown, by their number

    def show(self, event: core_chat.Event) -> None:
        if isinstance(event, core_chat.Token):
            click.echo(event.text, nl=False)
            self.streamed = True
            self.said += event.text
        elif isinstance(event, core_chat.Reply):
            if self.streamed:
                click.echo()
            kept = event.message.content
            if not " ".join(self.said.split()).endswith(" ".join(kept.split())):
                # Text that streamed was taken out of the reply once it was complete (a
                # sentence of Charlie's own prompt): what is kept is the answer.
                click.echo("Note: the reply as kept, without what was not an answer:", err=True)
                click.echo(kept)
        elif isinstance(event, core_chat.Distilled):
            click.echo(distilled_line(event.result), err=True)
        elif isinstance(event, core_chat.Notice):
            click.echo(f"Note: {event.text}", err=True)
        elif isinstance(event, core_chat.TraceEvent):
            line = (
                json.dumps(trace.to_json(event.step), ensure_ascii=False)
                if self.full_trace
                else trace_line(event.step)
            )
            if line:
                if self.streamed:
                    click.echo(err=True)
                    self.streamed = False
                click.echo(line, err=True)
        elif isinstance(event, core_chat.Suggested):
            click.echo("Related notes you might want (/accept N, /dismiss N):", err=True)
            for number, suggestion in enumerate(event.suggestions, start=1):
                click.echo(f"  [{number}] {suggestion.title} ({suggestion.note})", err=True)
                self.offered.append(suggestion.id)


def _say(
    home: Home,
    llm: LLMClient,
    channel: Channel,
    user: User,
    text: str,
    images: list[Path],
    full_trace: bool = False,
    *,
    wait: bool = True,
) -> list[int]:
    """Send one message and print the reply; return the ids of the suggestions shown. A
    distillation that is due then runs here (`wait`, saying so first: it may take a minute
    with a slow model), or in a process of its own that outlives this one."""
    printer = Printer(full_trace)
    for event in core_chat.turn(home, llm, channel, user, text, images, distill_after=False):
        printer.show(event)
    if not core_chat.due(home, llm, channel):
        return printer.offered
    if not wait:
        _distill_elsewhere(channel, user, llm)
        return printer.offered
    click.echo("(updating memory from the latest messages…)", err=True)
    for event in core_chat.distill_due(home, llm, channel):
        printer.show(event)
    return printer.offered


DETACHED: list[subprocess.Popen[bytes]] = []  # distillations started in the background


def _distill_elsewhere(channel: Channel, user: User, llm: LLMClient) -> None:
    """Start `charlie distill --due` for this thread in a detached process, so that
    `charlie chat -m` returns once the reply is shown. Its claim keeps two distillations of
    a thread from running at once; a failure is recorded with the thread (`distillations`)
    and said by the next `charlie chat` — nothing is printed or logged elsewhere, so a
    private channel's words go nowhere but charlie.db."""
    where = (
        ["--private"]
        if channel.private
        else ["-p", channel.project.slug if channel.project else ""]
    )
    command = [
        sys.executable,
        "-m",
        "charlie",
        "distill",
        "--due",
        *where,
        "--thread",
        str(channel.conversation_id),
        "--user",
        user.name,
    ]
    started = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not stopped by the terminal closing or Ctrl-C here
        close_fds=True,
    )
    DETACHED.append(started)  # it outlives this command: never waited for, never warned of
    if llm.server is not None:
        llm.server.lend(started.pid)  # the built-in model stays loaded for it
    shown = (
        "--private" if channel.private else f"-p {channel.project.slug if channel.project else ''}"
    )
    click.echo(
        runnable(
            f"(updating memory in the background; `charlie memory show {shown}` shows it in "
            "a minute or so)"
        ),
        err=True,
    )


@click.command()
@channel_options
@click.option("-m", "--message", metavar="TEXT", help="Send one message, print the reply, exit.")
@click.option("--trace", "full_trace", is_flag=True, help="Show every tool step in full (JSON).")
@click.option(
    "--image",
    "images",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Attach an image (PNG, JPEG, WebP, GIF) to the message; repeatable.",
)
@click.option("--new", "new", is_flag=True, help="Start a new thread (conversation).")
@click.option(
    "--thread", "thread", type=int, metavar="ID", help="Continue thread ID (`charlie threads`)."
)
@click.option(
    "--wait",
    is_flag=True,
    help="With -m: a distillation that is due runs before exiting, not in the background.",
)
def chat(
    project: str | None,
    private: bool,
    user_name: str | None,
    message: str | None,
    full_trace: bool,
    images: tuple[Path, ...],
    new: bool,
    thread: int | None,
    wait: bool,
) -> None:
    """Chat with Charlie (interactive, or one message with -m).

    The project must exist (`charlie projects create`). Without --new or --thread the
    thread written in most recently continues. Every few messages (the project's cadence)
    the conversation is distilled into the project's memory.md — every thread of a project
    feeds the same memory. With -m that runs in the background once the reply is printed
    (--wait runs it first).
    """
    if new and thread is not None:
        raise click.UsageError("Choose either --new or --thread ID, not both.")
    with opened_home() as home, opened_llm(home) as llm:
        user_name = first_run(home, user_name)  # no one yet: make the first account
        channel, user = resolve_channel(home, project, private, user_name, create=False)
        if new:
            channel = conversations.new_thread(home, channel)
        elif thread is not None:
            channel = conversations.thread_of(home, channel, thread)
        if message is not None:
            failed = distill.last_failure(home, channel)
            if failed is not None:
                click.echo(
                    runnable(
                        f"Note: the last update of this thread's memory failed: {failed}. It "
                        "is tried again as the conversation goes on; `charlie distill` tries now."
                    ),
                    err=True,
                )
            _say(home, llm, channel, user, message, list(images), full_trace, wait=wait)
            return
        _interactive(home, llm, channel, user, list(images), full_trace)


def _interactive(
    home: Home,
    llm: LLMClient,
    channel: Channel,
    user: User,
    images: list[Path],
    full_trace: bool,
) -> None:
    offered: list[int] = []
    title = conversations.get_thread(home, channel).title
    click.echo(
        f"Charlie — {channel.label}, thread {channel.conversation_id} ({title}), as {user.name}. "
        "/help for commands.",
        err=True,
    )
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
                results = list(batches.distill_all(home, channel, llm))
                if not results:
                    click.echo(distill.nothing_new(channel), err=True)
                for result in results:
                    click.echo(distilled_line(result), err=True)
            except CharlieError as exc:
                click.echo(f"Error: {exc}", err=True)
            continue
        if command in {"/start-over", "/undo"}:
            try:
                if command == "/undo":
                    revision = memory.undo(home, channel)
                    click.echo(f"The memory is back as it was (new revision {revision.id}).")
                else:
                    click.echo(start_over.start_over(home, channel).said(channel, "/undo"))
            except CharlieError as exc:
                click.echo(f"Error: {exc}", err=True)
            continue
        if command == "/pins":
            for key, when in suggestions.pins(home, channel):
                click.echo(f"{key}\t(pinned {when[:10]})")
            continue
        if command.startswith("/unpin "):
            key = text.strip().removeprefix("/unpin ").strip()
            try:
                suggestions.unpin(home, channel, key)
            except CharlieError as exc:
                click.echo(f"Error: {exc}", err=True)
                continue
            click.echo(f"Unpinned {key}.")
            continue
        decided = re.fullmatch(r"/(accept|dismiss)\s+(\d+)", command)
        if decided:
            number = int(decided.group(2))
            if not 1 <= number <= len(offered):
                click.echo(
                    f"Error: there is no suggestion {number} to {decided.group(1)}.", err=True
                )
                continue
            if decided.group(1) == "accept":
                key = suggestions.accept(home, user, offered[number - 1])
                click.echo(f"Pinned {key} into this conversation.")
            else:
                key = suggestions.dismiss(home, user, offered[number - 1])
                click.echo(f"Dismissed {key}.")
            continue
        if not text.strip():
            continue
        try:
            offered = _say(home, llm, channel, user, text, images, full_trace)
        except LLMError as exc:
            click.echo(f"\nError: {exc}", err=True)
        images = []  # an image given on the command line goes with the first message only
