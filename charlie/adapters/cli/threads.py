"""`charlie threads`: the conversations of a project or of your private channel — list them,
rename, archive, put in the trash and restore. `charlie chat --new` starts one,
`charlie chat --thread ID` continues one."""

from __future__ import annotations

import dataclasses
import json

import click

from charlie import conversations
from charlie.adapters.cli.common import channel_options, opened_home, resolve_channel, runnable
from charlie.conversations import Channel, Thread
from charlie.home import Home


def _line(thread: Thread, current: int) -> str:
    mark = "*" if thread.id == current else " "
    when = thread.updated_at[:16].replace("T", " ")
    snippet = f" — {thread.snippet[:60]}" if thread.snippet else ""
    return f"{mark} {thread.id:>5}  {when}  {thread.title} ({thread.messages} messages){snippet}"


@click.group(name="threads", invoke_without_command=True)
@channel_options
@click.option("--archived", is_flag=True, help="List the archived threads.")
@click.option("--trash", is_flag=True, help="List the threads in the trash.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per thread.")
@click.pass_context
def threads_group(
    ctx: click.Context,
    project: str | None,
    private: bool,
    user_name: str | None,
    archived: bool,
    trash: bool,
    as_json: bool,
) -> None:
    """List the threads of a project (or, with --private, of your private channel), most
    recently written first; * marks the one `charlie chat` continues."""
    ctx.obj = (project, private, user_name)
    if ctx.invoked_subcommand is not None:
        return
    with opened_home() as home:
        channel, _ = resolve_channel(home, project, private, user_name, create=False)
        listed = conversations.threads(home, channel, archived=archived, trash=trash)
        if as_json:
            for thread in listed:
                click.echo(json.dumps(dataclasses.asdict(thread), ensure_ascii=False))
            return
        if not listed:
            click.echo(runnable("No threads here yet: `charlie chat --new` starts one."), err=True)
        for thread in listed:
            click.echo(_line(thread, channel.conversation_id))


def _channel(home: Home, ctx: click.Context, thread_id: int | None = None) -> Channel:
    project, private, user_name = ctx.obj
    channel, _ = resolve_channel(home, project, private, user_name, create=False)
    return channel if thread_id is None else conversations.thread_of(home, channel, thread_id)


@threads_group.command("rename")
@click.argument("thread_id", type=int)
@click.argument("title")
@click.pass_context
def rename(ctx: click.Context, thread_id: int, title: str) -> None:
    """Give thread THREAD_ID a title of your own (never replaced by a generated one)."""
    with opened_home() as home:
        channel = _channel(home, ctx, thread_id)
        conversations.rename_thread(home, channel, title)
        click.echo(f"Thread {thread_id} is now “{conversations.get_thread(home, channel).title}”.")


@threads_group.command("archive")
@click.argument("thread_id", type=int)
@click.option("--undo", is_flag=True, help="Bring it back from the archive.")
@click.pass_context
def archive(ctx: click.Context, thread_id: int, undo: bool) -> None:
    """Archive thread THREAD_ID: out of the list, still searched by recall."""
    with opened_home() as home:
        conversations.archive_thread(home, _channel(home, ctx, thread_id), not undo)
        click.echo(f"Thread {thread_id} {'unarchived' if undo else 'archived'}.")


@threads_group.command("rm")
@click.argument("thread_id", type=int)
@click.pass_context
def remove(ctx: click.Context, thread_id: int) -> None:
    """Put thread THREAD_ID in the trash (kept whole; `charlie threads restore` undoes it)."""
    with opened_home() as home:
        conversations.trash_thread(home, _channel(home, ctx, thread_id))
        click.echo(
            runnable(
                f"Thread {thread_id} is in the trash. `charlie threads restore {thread_id}` "
                "brings it back."
            )
        )


@threads_group.command("restore")
@click.argument("thread_id", type=int)
@click.pass_context
def restore(ctx: click.Context, thread_id: int) -> None:
    """Bring thread THREAD_ID back from the trash."""
    with opened_home() as home:
        conversations.restore_thread(home, _channel(home, ctx), thread_id)
        click.echo(f"Thread {thread_id} is back.")
