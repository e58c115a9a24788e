"""`charlie import …`: bring conversation history in from elsewhere."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import click

from charlie.adapters.cli.common import (
    distilled_line,
    index_elsewhere,
    message_index,
    opened_home,
    opened_llm,
    resolve_channel,
    runnable,
)
from charlie.conversations import Channel
from charlie.errors import CharlieError, DistillationError, LLMError, MemoryFormatError
from charlie.home import Home
from charlie.memory import batches
from charlie.text import plural
from charlie.transfer import chat_exports as exports
from charlie.transfer import jsonl as importing

SHOWN_PROBLEMS = 100  # skipped lines listed one by one; the rest are counted
WAIT_HELP = "Index every message for recall by meaning before returning, not in the background."


@click.group("import")
def import_group() -> None:
    """Bring conversation history in from other places."""


@import_group.command("jsonl")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("-p", "--project", metavar="PROJECT", help="The project to import into.")
@click.option("--private", is_flag=True, help="Import into your private channel instead.")
@click.option("--user", "user_name", metavar="NAME", help="Who you are (default: CHARLIE_USER).")
@click.option(
    "--distill", "distill", is_flag=True, help="Fold the messages into memory (asks the model)."
)
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def jsonl_command(
    file: Path,
    project: str | None,
    private: bool,
    user_name: str | None,
    distill: bool,
    wait: bool,
    as_json: bool,
) -> None:
    """Import the messages of FILE, one JSON object a line:

    \b
    {"id": "m1", "speaker": "Sam", "role": "user", "text": "…", "time": "2023-05-08T13:56Z"}

    "text" and "time" are required; a time without offset is UTC. "role" is "user" (the
    default) or "assistant"; "speaker" defaults to Charlie for the assistant and to you in
    your private channel. Lines that cannot be read are listed and skipped. Importing the
    same file again adds nothing. The history is folded into memory only with --distill.
    Every message is findable by its words once this returns; a long history is indexed by
    meaning in the background (`charlie reindex --status`), unless --wait.
    """
    if not project and not private:
        raise CharlieError("Say where the messages go: -p PROJECT, or --private.")
    with opened_home() as home:
        channel, _ = resolve_channel(home, project, private, user_name, create=False)
        report = importing.import_jsonl(home, channel, file, to_memory=distill)
        if not as_json:
            _print(report, channel)
        bar = ProgressBar(sys.stderr, enabled=not as_json and sys.stderr.isatty())
        with bar, _kept(f"{_counted(report.added, 'message')} stored in {channel.label}"):
            indexing = _index(home, bar, report.added, wait)
        if not as_json:
            _say_indexing(indexing)
        distilled, failure = _distill(home, channel, as_json) if distill else (0, None)
        if as_json:
            out = _as_json(report, channel, distill, distilled, failure)
            click.echo(json.dumps(out | {"indexing": indexing}))
        if failure is not None:
            raise CharlieError(failure)


def _export_command(service: str) -> click.Command:
    """`charlie import chatgpt|claude`: the same options for either service's export."""
    name = exports.NAMES[service]

    @click.argument("file", type=click.Path(path_type=Path))
    @click.option("-p", "--project", metavar="PROJECT", help="The project to import into.")
    @click.option("--private", is_flag=True, help="Import into your private channel instead.")
    @click.option(
        "--user", "user_name", metavar="NAME", help="Who you are (default: CHARLIE_USER)."
    )
    @click.option(
        "--by-title",
        metavar="PATTERN",
        help="Only conversations whose title holds PATTERN (any case; * and ? as wildcards).",
    )
    @click.option("--list", "listing", is_flag=True, help="List the conversations; import none.")
    @click.option(
        "--distill",
        "distill",
        is_flag=True,
        help="Fold each conversation into memory, oldest first (asks the model; resumable).",
    )
    @click.option("--wait", is_flag=True, help=WAIT_HELP)
    @click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
    def command(
        file: Path,
        project: str | None,
        private: bool,
        user_name: str | None,
        by_title: str | None,
        listing: bool,
        distill: bool,
        wait: bool,
        as_json: bool,
    ) -> None:
        export = exports.open_export(file, service)
        bar = ProgressBar(sys.stderr, enabled=not as_json and sys.stderr.isatty())
        if listing:
            with bar:
                found = exports.matching(export.conversations(bar.update), by_title)
                chosen = [c.summary() for c in found]
            _list(export, chosen, as_json)
            return
        if not project and not private:
            raise CharlieError("Say where the messages go: -p PROJECT, or --private.")
        with opened_home() as home:
            channel, user = resolve_channel(home, project, private, user_name, create=False)
            stored: list[exports.ConversationReport] = []

            def kept(done: exports.ConversationReport) -> None:
                stored.append(done)
                bar.stored(done)

            def so_far() -> str:
                added = sum(d.report.added for d in stored)
                return (
                    f"{len(stored):,} {plural(len(stored), 'conversation')} ({added:,} "
                    f"{plural(added, 'message')}) {plural(len(stored), 'was', 'were')} "
                    f"stored in {channel.label} before this"
                )

            with bar:
                export.check(bar.update)  # a file that is not valid JSON stores nothing
                found = exports.matching(export.conversations(bar.update), by_title)
                with _kept(so_far, again=True):
                    done = exports.import_conversations(
                        home,
                        channel,
                        service,
                        found,
                        user.name,
                        on_stored=kept,
                        to_memory=distill,
                    )
                added = sum(d.report.added for d in done)
                with _kept(f"{_counted(added, 'message')} stored in {channel.label}"):
                    indexing = _index(home, bar, added, wait)
            if not as_json:
                _print_export(export, done, channel)
                _say_indexing(indexing)
            folded = _distill_threads(home, channel, done, as_json) if distill else None
        if as_json:
            out = _export_json(export, done, channel) | {"indexing": indexing}
            if folded is not None:
                out |= folded
            click.echo(json.dumps(out))
        if folded is not None and folded["distill_error"] is not None:
            raise CharlieError(str(folded["distill_error"]))

    command.__doc__ = f"""Import the conversations of a {name} export.

    FILE is the zip {name} sends, or the conversations.json inside it. Each conversation's
    messages go into the channel as they were shown (for ChatGPT, the branch last seen:
    earlier edits and regenerations are left out); yours are spoken by you, the answers by
    {name}. Each conversation becomes a thread of its own, titled and dated as in the export.
    Conversations that cannot be read are listed and skipped. Importing the same export
    again adds nothing. Every message is findable by its words once this returns; a long
    history is indexed by meaning in the background (`charlie reindex --status` says how
    far), unless --wait. With --distill each conversation is then folded into the memory,
    oldest first, through the usual distiller (hand edits to memory.md still win); it says
    how many model requests that will take before it starts, and if it is interrupted,
    running the same command again carries on where it stopped.
    """
    return click.command(service)(command)


def _day(conversation: exports.Summary) -> str:
    return (conversation.created or "")[:10] or "?"


def _list(export: exports.ExportFile, chosen: list[exports.Summary], as_json: bool) -> None:
    if as_json:
        items = [
            {"id": c.id, "title": c.title, "created": c.created, "messages": c.messages}
            for c in chosen
        ]
        skipped = [{"conversation": name, "reason": why} for name, why in export.skipped]
        click.echo(
            json.dumps({"format": export.service, "conversations": items, "skipped": skipped})
        )
        return
    for c in chosen:
        click.echo(f"{_day(c)}  {c.title}  ({c.messages:,} {plural(c.messages, 'message')})")
    counted = (
        f"{len(chosen):,} {plural(len(chosen), 'conversation')} in this "
        f"{exports.NAMES[export.service]} export"
    )
    if not export.skipped:
        click.echo(f"{counted}.")
        return
    click.echo(f"{counted}; {len(export.skipped):,} cannot be imported:")
    _say_skipped(export.skipped)


def _say_skipped(skipped: list[tuple[str, str]]) -> None:
    """Each conversation that cannot be imported, by name, with why (the first hundred)."""
    for name, reason in skipped[:SHOWN_PROBLEMS]:
        click.echo(f"  {name}: {reason}")
    if len(skipped) > SHOWN_PROBLEMS:
        click.echo(f"  … and {len(skipped) - SHOWN_PROBLEMS:,} more")


def _print_export(
    export: exports.ExportFile, done: list[exports.ConversationReport], channel: Channel
) -> None:
    added = sum(d.report.added for d in done)
    already = sum(d.report.already for d in done)
    aside = f" ({already:,} already there)" if already else ""
    click.echo(
        f"Imported {added:,} {plural(added, 'message')} from {len(done):,} "
        f"{exports.NAMES[export.service]} {plural(len(done), 'conversation')} "
        f"into {channel.label}{aside}."
    )
    for d in done:
        c, r = d.conversation, d.report
        notes = [f"{r.added:,} added"] + ([f"{r.already:,} already there"] if r.already else [])
        click.echo(f"  {_day(c)}  {c.title}: {', '.join(notes)}")
        for _, reason in r.problems[:SHOWN_PROBLEMS]:
            click.echo(f"    skipped {reason}")
    if export.skipped:
        click.echo(
            f"Skipped {len(export.skipped):,} {plural(len(export.skipped), 'conversation')}:"
        )
        _say_skipped(export.skipped)


def _export_json(
    export: exports.ExportFile, done: list[exports.ConversationReport], channel: Channel
) -> dict[str, object]:
    return {
        "format": export.service,
        "channel": channel.label,
        "added": sum(d.report.added for d in done),
        "already": sum(d.report.already for d in done),
        "conversations": [
            {
                "id": d.conversation.id,
                "title": d.conversation.title,
                "created": d.conversation.created,
                "added": d.report.added,
                "already": d.report.already,
                "problems": [reason for _, reason in d.report.problems],
            }
            for d in done
        ],
        "skipped": [{"conversation": name, "reason": why} for name, why in export.skipped],
    }


for _service in (exports.CHATGPT, exports.CLAUDE):
    import_group.add_command(_export_command(_service))


def _print(report: importing.ImportReport, channel: Channel) -> None:
    notes = []
    if report.already:
        notes.append(f"{report.already:,} already there")
    if report.skipped:
        notes.append(f"{report.skipped:,} {plural(report.skipped, 'line')} skipped")
    aside = f" ({'; '.join(notes)})" if notes else ""
    click.echo(
        f"Imported {report.added:,} {plural(report.added, 'message')} into {channel.label}{aside}."
    )
    for line, reason in report.problems[:SHOWN_PROBLEMS]:
        click.echo(f"  line {line}: {reason}")
    if report.skipped > SHOWN_PROBLEMS:
        click.echo(f"  … and {report.skipped - SHOWN_PROBLEMS:,} more")


def _counted(count: int, noun: str) -> str:
    """ "1 message was", "4,000 messages were": a count as the start of a sentence."""
    return f"{count:,} {plural(count, noun)} {plural(count, 'was', 'were')}"


def _distill(home: Home, channel: Channel, quiet: bool) -> tuple[int, str | None]:
    """Fold what awaits distillation into memory: (how many requests it took, what went
    wrong or None). The messages stay stored whatever happens."""
    done = 0
    try:
        with opened_llm(home) as llm:
            for result in batches.distill_all(home, channel, llm):
                done += 1
                if not quiet:
                    click.echo(distilled_line(result))
    except (LLMError, DistillationError, MemoryFormatError) as exc:
        owner = channel.owner
        target = f"--private --user {owner.name}" if owner else f"-p {_slug(channel)}"
        return done, (
            f"Memory was not updated: {exc} The imported messages are stored: once that is "
            f"fixed, run this import again with --distill (nothing is added twice), or "
            f"`charlie distill {target}`."
        )
    if not done and not quiet:
        click.echo("(nothing new to distill)")
    return done, None


def _distill_threads(
    home: Home, channel: Channel, done: list[exports.ConversationReport], quiet: bool
) -> dict[str, object]:
    """Fold each imported thread into memory, oldest conversation first, saying beforehand
    about how many model requests it will take. A failure stops there: what is folded in
    stays, the rest waits for the same command again (nothing is imported twice)."""
    threads = [
        d.thread
        for d in sorted(done, key=lambda d: d.conversation.created or "")
        if d.thread is not None
    ]
    requests = made = 0
    failure = None
    try:
        with opened_llm(home) as llm:
            messages, requests = batches.requests_needed(home, threads, llm)
            if not quiet:
                click.echo(
                    f"Folding {messages:,} {plural(messages, 'message')} of {len(threads):,} "
                    f"{plural(len(threads), 'conversation')} into memory: about {requests:,} "
                    f"{plural(requests, 'request')} to the model.",
                    err=True,
                )
            for thread in threads:
                for result in batches.distill_all(home, thread, llm):
                    made += 1
                    if not quiet:
                        click.echo(f"[{made}/{max(requests, made)}] {distilled_line(result)}")
    except (LLMError, DistillationError, MemoryFormatError, CharlieError) as exc:
        target = (
            f"--private --user {channel.owner.name}" if channel.owner else f"-p {_slug(channel)}"
        )
        failure = (
            f"Memory was not updated past request {made}: {exc} The imported messages are "
            f"stored: once that is fixed, run the same import again with --distill ({target}); "
            "it carries on where it stopped."
        )
    return {"distill_estimate": requests, "distillations": made, "distill_error": failure}


def _slug(channel: Channel) -> str:
    assert channel.project is not None
    return channel.project.slug


def _as_json(
    report: importing.ImportReport,
    channel: Channel,
    distill: bool,
    distilled: int,
    failure: str | None,
) -> dict[str, object]:
    out: dict[str, object] = {
        "channel": channel.label,
        "added": report.added,
        "already": report.already,
        "skipped": report.skipped,
        "problems": [{"line": line, "reason": reason} for line, reason in report.problems],
        "first_time": report.first_time,
        "last_time": report.last_time,
    }
    if distill:
        out |= {"distillations": distilled, "distill_error": failure}
    return out


INDEX_STEP = 2048  # messages indexed between two updates of the progress bar


@contextmanager
def _kept(stored: str | Callable[[], str], *, again: bool = False) -> Iterator[None]:
    """A failure part-way through an import (a full disk, a damaged file) says what was
    stored before it: that is kept, and running the import again adds only the rest."""
    try:
        yield
    except (CharlieError, sqlite3.Error, OSError) as exc:
        said = stored() if callable(stored) else stored
        then = (
            "Once that is fixed, run the same command again: what is stored is not added twice."
            if again
            else "Once that is fixed, run `charlie reindex` (or just search: the rest are "
            "indexed then) to make them all searchable."
        )
        doing = (
            "" if again else "they are safe in charlie.db, but indexing them for recall stopped: "
        )
        raise CharlieError(f"{said}; {doing}{exc} {then}") from exc


FOREGROUND = 512  # messages embedded here, not in the background: a few seconds at most


def _index(home: Home, bar: ProgressBar, added: int, wait: bool) -> dict[str, object]:
    """Make every new message findable by its words now; embed them here too when they are
    few or the person asked to wait, or else leave that to a background indexer (the
    server's, or one started now). What was done, for the report."""
    index = message_index(home)
    bar.show(f"Indexing the words of {added:,} messages")
    index.index_words()
    progress = index.progress()
    if wait or progress.total - progress.indexed <= FOREGROUND:
        done = 0
        while True:
            done += index.refresh(limit=INDEX_STEP)
            bar.show(f"Indexing {min(done, added):,} of {added:,} messages for recall")
            if not index.pending():
                return {"background": False, "waiting": 0}
    index_elsewhere()
    return {"background": True, "waiting": progress.total - progress.indexed}


def _say_indexing(indexing: dict[str, object]) -> None:
    if indexing["background"]:
        click.echo(
            runnable(
                f"{indexing['waiting']:,} messages are being indexed for recall by meaning in "
                "the background; they are found by their words already. `charlie reindex "
                "--status` shows how far it is (the app shows it too)."
            ),
            err=True,
        )


class ProgressBar:
    """One line on the terminal, rewritten in place as an import goes: bytes read of the
    export, conversations done and messages added; then the indexing. Drawn only when asked
    (a terminal, no --json) and at most ten times a second; wiped when the work is done, so
    the report that follows stands alone."""

    EVERY = 0.1  # seconds between two drawings

    def __init__(self, stream: IO[str], *, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.added = 0
        self.drawn = 0  # characters of the line on screen
        self.last = float("-inf")

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled and self.drawn:
            self.stream.write("\r" + " " * self.drawn + "\r")
            self.stream.flush()
            self.drawn = 0

    def update(self, progress: exports.Progress) -> None:
        if not self._due(progress.read >= progress.total):
            return
        share = f" ({progress.read / progress.total:.0%})" if progress.total else ""
        counted = f"{progress.conversations:,}" + (f" of {progress.of:,}" if progress.of else "")
        line = (
            f"{'Checking' if progress.phase == 'checking' else 'Reading'} "
            f"{_megabytes(progress.read)} of {_megabytes(progress.total)}{share} · "
            f"{counted} conversations"
        )
        if progress.phase != "checking" and self.added:
            line += f" · {self.added:,} messages added"
        self._draw(line)

    def stored(self, done: exports.ConversationReport) -> None:
        self.added += done.report.added

    def show(self, line: str) -> None:
        if self._due(False):
            self._draw(line)

    def _due(self, final: bool) -> bool:
        if not self.enabled:
            return False
        now = time.monotonic()
        if not final and now - self.last < self.EVERY:
            return False
        self.last = now
        return True

    def _draw(self, line: str) -> None:
        self.stream.write("\r" + line.ljust(self.drawn))
        self.stream.flush()
        self.drawn = max(self.drawn, len(line))


def _megabytes(count: int) -> str:
    return f"{count / 1_000_000:,.1f} MB"
