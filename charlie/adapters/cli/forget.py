"""`charlie forget`: forget a message (and Charlie's answer to it), or a whole thread."""

from __future__ import annotations

import click

from charlie import conversations
from charlie.adapters.cli.common import channel_options, opened_home, resolve_channel
from charlie.errors import CharlieError
from charlie.household import forget
from charlie.llm.client import preview
from charlie.text import plural


@click.command("forget")
@click.argument("message_id", type=int, required=False)
@channel_options
@click.option("--thread", "thread_id", type=int, metavar="ID", help="Forget a whole thread.")
@click.option("--only", is_flag=True, help="Only this message, not Charlie's answer to it.")
@click.option("--yes", is_flag=True, help="Do not ask first.")
def forget_command(
    message_id: int | None,
    project: str | None,
    private: bool,
    user_name: str | None,
    thread_id: int | None,
    only: bool,
    yes: bool,
) -> None:
    """Forget MESSAGE_ID for good: the message and Charlie's answer to it leave the
    conversation, the memory's quotes (and their history), recall and the search index,
    suggestions and later exports. A decision whose only source it was is flagged for you to
    keep or drop. A log keeps when, by whom and how many — never what.

    Message ids are shown as "message 42" by `charlie recall` and `charlie memory why`
    (and as "message_id" by `charlie recall --json`); in the app, each message has its own
    Forget button."""
    if (message_id is None) == (thread_id is None):
        raise click.UsageError("Give a MESSAGE_ID or --thread ID (one of them).")
    with opened_home() as home:
        channel, user = resolve_channel(home, project, private, user_name, create=False)
        if thread_id is not None:
            thread = conversations.thread_of(home, channel, thread_id)
            count = conversations.count_messages(home, thread)
            what = f"thread {thread_id} ({count} {plural(count, 'message')})"
            if not yes:
                click.confirm(f"Forget {what} for good?", abort=True, err=True)
            done = forget.forget_thread(home, thread, user)
        else:
            assert message_id is not None
            taken = forget.planned(home, channel, user, message_id, only=only)
            if not yes:
                for message in taken:
                    click.echo(
                        f"  {message.id} {message.speaker}: {preview(message.content, 70)}",
                        err=True,
                    )
                click.confirm(f"Forget {len(taken)} message(s) for good?", abort=True, err=True)
            done = forget.forget_messages_of(home, channel, user, taken, answers=not only)
        if not done.messages:
            raise CharlieError("There was nothing to forget.")
        click.echo(
            f"Forgot {done.messages} {plural(done.messages, 'message')}"
            f" ({done.quotes} {plural(done.quotes, 'quote')} taken out of the memory, "
            f"{done.revisions} earlier {plural(done.revisions, 'revision')} scrubbed)."
        )
        if done.restated:
            click.echo(
                f"{done.restated} {plural(done.restated, 'decision')} only restated what "
                "was forgotten and went with it."
            )
        for text in done.flagged:
            click.echo(
                f"The decision {text!r} came only from what was forgotten: it is flagged in the "
                "memory; keep it (delete the flag) or drop it."
            )
