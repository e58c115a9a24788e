"""`charlie memory …` and `charlie distill`: read, edit, restore and rebuild memory."""

from __future__ import annotations

import json
import sys

import click

from charlie import conversations
from charlie.adapters.cli.common import (
    channel_options,
    command_name,
    distilled_line,
    opened_home,
    opened_llm,
    resolve_channel,
)
from charlie.chat import turn as chat
from charlie.errors import CharlieError
from charlie.memory import batches, distill, start_over, why
from charlie.memory import layers as memory


@click.group("memory")
def memory_group() -> None:
    """Show, edit, list the history of, or undo a project's (or your private) memory."""


@memory_group.command("show")
@channel_options
@click.option(
    "--json", "as_json", is_flag=True, help="The layers as JSON, each decision's provenance too."
)
def show_command(project: str | None, private: bool, user_name: str | None, as_json: bool) -> None:
    """Print the memory: Summary, Decisions, Recent quotes (and Earlier decisions)."""
    with opened_home() as home:
        channel, _ = resolve_channel(home, project, private, user_name, create=False)
        if as_json:
            layers = memory.load(home, channel)
            click.echo(json.dumps(memory.as_json(layers), ensure_ascii=False, indent=1))
        elif channel.project is not None:
            text = memory.read_file_text(channel) or ""
            memory.parse(text)  # a malformed file is reported, not shown as if fine
            click.echo(text, nl=False)
        else:
            click.echo(memory.render(memory.load(home, channel), channel.label), nl=False)


@memory_group.command("edit")
@channel_options
def edit_command(project: str | None, private: bool, user_name: str | None) -> None:
    """Edit the memory in $EDITOR (private memory: pipe the new markdown on stdin)."""
    with opened_home() as home:
        channel, _ = resolve_channel(home, project, private, user_name, create=False)
        if channel.private:
            if sys.stdin.isatty():
                raise CharlieError(
                    "Private memory is never written to a file, so it is not opened in an "
                    "editor. Pipe the new memory in: `charlie memory show --private > x.md`, "
                    "edit, then `charlie memory edit --private < x.md`."
                )
            edited = memory.parse(sys.stdin.read())
            revision = memory.save(home, channel, edited, "edit")
            click.echo(f"Saved your private memory (revision {revision.id}).")
            return
        assert channel.project is not None
        path = channel.project.memory_path
        click.edit(filename=str(path))
        recorded = memory.sync_hand_edits(home, channel)
        if recorded is None:
            click.echo("No changes.")
        else:
            click.echo(f"Saved {path} (revision {recorded.id}). Your edits win.")


@memory_group.command("history")
@channel_options
@click.option("--show", "show_id", type=int, metavar="ID", help="Print one revision in full.")
def history_command(
    project: str | None, private: bool, user_name: str | None, show_id: int | None
) -> None:
    """List earlier versions of the memory, newest first."""
    with opened_home() as home:
        channel, _ = resolve_channel(home, project, private, user_name, create=False)
        if not channel.private:
            memory.sync_hand_edits(home, channel)
        history = memory.revisions(home, channel)
        if show_id is not None:
            match = [r for r in history if r.id == show_id]
            if not match:
                raise CharlieError(f"There is no revision {show_id} in {channel.label}.")
            click.echo(memory.render(match[0].memory, channel.label), nl=False)
            return
        if not history:
            click.echo(f"No memory revisions yet in {channel.label}.")
        for revision in history:
            m = revision.memory
            click.echo(
                f"{revision.id}\t{revision.created_at[:19].replace('T', ' ')}\t"
                f"{revision.source}\t{len(m.summary)} chars, {len(m.decisions)} decisions, "
                f"{len(m.quotes)} quotes"
            )


@memory_group.command("undo")
@channel_options
@click.option("--to", "to", type=int, metavar="ID", help="Restore this revision (see history).")
def undo_command(project: str | None, private: bool, user_name: str | None, to: int | None) -> None:
    """Restore the previous version of the memory (kept as a new revision, so undo is undoable)."""
    with opened_home() as home:
        channel, _ = resolve_channel(home, project, private, user_name, create=False)
        revision = memory.undo(home, channel, to)
        click.echo(
            f"Restored memory as it was in revision {revision.source.split(':')[1]} "
            f"(new revision {revision.id})."
        )


@memory_group.command("start-over")
@channel_options
@click.option("--yes", is_flag=True, help="Do not ask first.")
def start_over_command(
    project: str | None, private: bool, user_name: str | None, yes: bool
) -> None:
    """Begin the memory again: summary and quotes emptied, every decision moved to the earlier
    ones. One revision: `charlie memory undo` takes it back."""
    with opened_home() as home:
        channel, _ = resolve_channel(home, project, private, user_name, create=False)
        if not yes:
            click.confirm(f"Start the memory of {channel.label} over?", abort=True)
        done = start_over.start_over(home, channel)
        undo = f"{command_name()} memory undo {undo_options(project, private)}"
        click.echo(done.said(channel, undo))


def undo_options(project: str | None, private: bool) -> str:
    """The channel options that name this channel again, for a hint to the person."""
    return "--private" if private else f"-p {project}" if project else ""


@click.command("distill")
@channel_options
@click.option(
    "--thread", "thread", type=int, metavar="ID", help="The thread (default: the latest)."
)
@click.option(
    "--due",
    is_flag=True,
    help="Only what the cadence has made due, as after a chat turn (what `chat -m` runs).",
)
def distill_command(
    project: str | None, private: bool, user_name: str | None, thread: int | None, due: bool
) -> None:
    """Distill the conversation into memory now, without waiting for the cadence."""
    with opened_home() as home, opened_llm(home) as llm:
        channel, _ = resolve_channel(home, project, private, user_name, create=False)
        if thread is not None:
            channel = conversations.thread_of(home, channel, thread)
        if due:
            for event in chat.distill_due(home, llm, channel):
                if isinstance(event, chat.Distilled):
                    click.echo(distilled_line(event.result))
                elif isinstance(event, chat.Notice):
                    click.echo(event.text, err=True)
            return
        done = 0
        for result in batches.distill_all(home, channel, llm):
            click.echo(distilled_line(result))  # one line a batch: each fits the model
            done += 1
        if not done:
            click.echo(distill.nothing_new(channel))


@memory_group.command("why")
@click.argument("topic")
@channel_options
@click.option("--json", "as_json", is_flag=True, help="The answer as JSON.")
def why_command(
    topic: str, project: str | None, private: bool, user_name: str | None, as_json: bool
) -> None:
    """What Charlie remembers about TOPIC, and why: the decisions about it (since when, by
    whom, from which messages), the earlier ones, the quotes and what was said."""
    with opened_home() as home:
        channel, user = resolve_channel(home, project, private, user_name, create=False)
        items = why.remembered(home, channel, user, topic)
        if as_json:
            click.echo(json.dumps([i.as_json() for i in items], ensure_ascii=False, indent=1))
        else:
            click.echo(why.as_text(items, topic))
