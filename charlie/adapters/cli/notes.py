"""`charlie notes …`, `charlie reindex` and `charlie search`."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TextIO, cast

import click

from charlie import store
from charlie.adapters.cli.common import (
    cli_user,
    open_index,
    opened_home,
    project_option,
    runnable,
)
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.notes import documents
from charlie.notes import files as core
from charlie.projects import DEFAULT_PROJECT, Project, ensure_project, get_project, list_projects
from charlie.retrieval import usage
from charlie.retrieval.index import Index
from charlie.retrieval.message_index import Progress
from charlie.retrieval.search import MODES, Mode, Searcher, SearchResult
from charlie.text import plural


def _project(home: Home, slug: str | None, *, create: bool = False) -> Project:
    slug = slug or DEFAULT_PROJECT
    return (
        ensure_project(home, slug) if create or slug == DEFAULT_PROJECT else get_project(home, slug)
    )


@click.group("notes")
def notes_group() -> None:
    """Add, list, show, tag, remove and import notes (markdown files in the project)."""


@notes_group.command("add")
@click.argument("title")
@project_option
@click.option("-t", "--tag", "tags", multiple=True, help="A tag; repeatable.")
@click.option("-b", "--body", help="The note's text (default: read from stdin if piped).")
def add_command(title: str, project: str | None, tags: tuple[str, ...], body: str | None) -> None:
    """Create a note called TITLE."""
    if body is None and not sys.stdin.isatty():
        body = sys.stdin.read()
    with opened_home() as home:
        note = core.create_note(_project(home, project, create=True), title, body or "", tags)
        click.echo(f"Created {note.key} at {note.path}")


@notes_group.command("list")
@project_option
def list_command(project: str | None) -> None:
    """List notes: name, title and tags."""
    with opened_home() as home:
        found, problems = core.list_notes(_project(home, project))
        for note in found:
            tags = " ".join(f"#{t}" for t in note.tags)
            click.echo(f"{note.name}\t{note.title}\t{tags}".rstrip())
        if not found:
            click.echo(runnable("No notes yet. Add one with `charlie notes add TITLE`."))
        for problem in problems:
            click.echo(f"Skipped {problem}", err=True)


@notes_group.command("show")
@click.argument("name")
@project_option
@click.option("--user", "user_name", metavar="NAME", help="Who is reading (default: CHARLIE_USER).")
def show_command(name: str, project: str | None, user_name: str | None) -> None:
    """Print a note (this counts as a view in your usage)."""
    with opened_home() as home:
        note = core.get_note(_project(home, project), name)
        click.echo(note.path.read_text(encoding="utf-8"), nl=False)
        usage.record(home.db, cli_user(home, user_name).id, "view", note=note.key)


@notes_group.command("tag")
@click.argument("name")
@click.argument("tags", nargs=-1, required=True)
@project_option
@click.option("--remove", is_flag=True, help="Remove the tags instead of adding them.")
@click.option("--user", "user_name", metavar="NAME", help="Who is tagging (default: CHARLIE_USER).")
def tag_command(
    name: str, tags: tuple[str, ...], project: str | None, remove: bool, user_name: str | None
) -> None:
    """Add (or --remove) TAGS on note NAME."""
    with opened_home() as home:
        chosen = _project(home, project)
        if remove:
            note = core.tag_note(chosen, name, remove=tags)
        else:
            note = core.tag_note(chosen, name, add=tags)
            user = cli_user(home, user_name)
            for tag in tags:
                usage.record(home.db, user.id, "tag", tag=tag, note=note.key)
        click.echo(f"{note.key}: {' '.join('#' + t for t in note.tags) or 'no tags'}")


@notes_group.command("rm")
@click.argument("name")
@project_option
def rm_command(name: str, project: str | None) -> None:
    """Remove a note (it is moved to the data home's trash folder, not destroyed)."""
    with opened_home() as home:
        target = core.delete_note(home, _project(home, project), name)
        click.echo(f"Moved to {target}")


@notes_group.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@project_option
@click.option(
    "--max-mb",
    type=click.IntRange(1, 1024),
    default=documents.Limits().max_bytes // documents.MB,
    show_default=True,
    help="The largest document to take, in MB.",
)
@click.pass_context
def import_command(
    ctx: click.Context, paths: tuple[Path, ...], project: str | None, max_mb: int
) -> None:
    """Bring in notes, then index them. A FOLDER: every markdown file under it, copied as
    it is. A FILE (PDF, Word .docx, text or markdown): made a note, the original kept in
    the project's attachments folder and linked from the note."""
    failed = 0
    with opened_home() as home:
        chosen = _project(home, project, create=True)
        limits = documents.Limits(max_bytes=max_mb * documents.MB)
        for path in paths:
            if path.is_dir():
                report = core.import_folder(chosen, path)
                for problem in report.skipped:
                    click.echo(f"Skipped {problem}", err=True)
                click.echo(f"Imported {len(report.imported)} notes, skipped {len(report.skipped)}.")
            elif not _import_document(chosen, path, limits):
                failed += 1
        open_index(home)
    if failed:
        click.echo(f"Error: {failed} of {len(paths)} not imported (see above).", err=True)
        ctx.exit(1)


def _import_document(project: Project, path: Path, limits: documents.Limits) -> bool:
    """Make a note of the document at `path`, saying what happened; whether it was made."""
    try:
        made = documents.import_document(project, path, limits=limits)
    except documents.DocumentError as exc:
        click.echo(f"Error: {exc}", err=True)
        return False
    except CharlieError as exc:
        click.echo(f"Error: {path.name} was not added: {exc}", err=True)
        return False
    what = documents.KIND_NAMES[made.kind]
    if made.pages:
        what += f", {made.pages} {plural(made.pages, 'page')}"
    click.echo(f"Imported {path.name} as {made.note.key} ({what}).")
    click.echo(f"  original kept in {made.original}")
    if made.warning:
        click.echo(f"Warning: {path.name}: {made.warning}", err=True)
    return True


@click.command("reindex")
@click.option(
    "--catch-up",
    "catch_up",
    is_flag=True,
    help="Only index the messages not indexed yet (what a background indexer does); no rebuild.",
)
@click.option("--status", "status", is_flag=True, help="Say how far indexing the messages is.")
@click.option("--json", "as_json", is_flag=True, help="With --status: print it as JSON.")
def reindex_command(catch_up: bool, status: bool, as_json: bool) -> None:
    """Rebuild the search index from the note files and the stored messages alone.

    A long history (an import) is indexed by meaning in the background, by `charlie serve`
    or by a detached `charlie reindex --catch-up`; `--status` says how far it is. Killed or
    rebooted part-way, the next run carries on where it stopped."""
    from charlie.retrieval.embeddings import from_settings
    from charlie.retrieval.message_index import MessageIndex, index_all

    with opened_home() as home:
        index = Index(home, from_settings(home.settings))
        if status:
            progress = MessageIndex(index).progress()
            if as_json:
                click.echo(json.dumps(progress_json(progress)))
            else:
                click.echo(runnable(progress_line(progress)))
            return
        if catch_up:
            index_all(MessageIndex(index))
            return
        report = index.rebuild()  # a new index file: no message is in it either
        message_index = MessageIndex(index)
        messages = message_index.refresh()
        message_index.keep_file()
        for path, reason in report.problems:
            click.echo(f"Skipped {path}: {reason}", err=True)
        stats = index.stats()
        click.echo(
            f"Indexed {stats['notes']} notes ({stats['chunks']} chunks) and {messages} "
            f"messages with {stats['model']}; {len(report.problems)} skipped."
        )


def progress_json(progress: Progress) -> dict[str, object]:
    return {
        "total": progress.total,
        "indexed": progress.indexed,
        "findable_by_words": progress.total - progress.unworded,
        "done": progress.done,
        "running": progress.running,
        "messages_per_second": round(progress.rate, 1),
        "seconds_left": None if progress.seconds_left is None else round(progress.seconds_left),
        "line": progress.in_words(),
    }


def progress_line(progress: Progress) -> str:
    if progress.done:
        return f"Messages: every one of {progress.total:,} is indexed for recall."
    line = (
        f"Messages: {progress.indexed:,} of {progress.total:,} indexed for recall by meaning "
        f"({progress.in_words()})"
    )
    if progress.unworded:
        line += f"; {progress.unworded:,} not findable by their words yet"
    return line + "."


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print it as JSON.")
def status_command(as_json: bool) -> None:
    """Where the data home is, and how far its search index is: notes and messages."""
    from charlie.retrieval.embeddings import from_settings
    from charlie.retrieval.index import status as index_status
    from charlie.retrieval.message_index import MessageIndex

    with opened_home() as home:
        open_index(home)  # the notes' part brought up to date: changed files only
        notes = index_status(home)
        progress = MessageIndex(Index(home, from_settings(home.settings))).progress()
        database = store.described(home.settings)
        local = home.settings.local_dir
        if as_json:
            out: dict[str, object] = {"home": str(home.settings.home), "database": database}
            out |= {"local": str(local) if local else None, "notes": notes}
            click.echo(json.dumps(out | {"messages": progress_json(progress)}))
            return
        click.echo(f"Data home: {home.settings.home}")
        if local:
            click.echo(f"This machine's own files: {local} (the search index, the model's state)")
        click.echo(f"Database: {database['store']}, {database['where']}")
        click.echo(
            f"Notes: {notes['notes']:,} indexed ({notes['chunks']:,} chunks), "
            f"index {notes['state']}"
            + (f": {notes['incomplete']}" if notes.get("incomplete") else ".")
        )
        click.echo(runnable(progress_line(progress)))


def _result_json(result: SearchResult, explain: bool) -> dict[str, object]:
    out: dict[str, object] = {
        "query": result.query,
        "mode": result.mode,
        "results": [asdict(h.public()) for h in result.hits],  # as the web API answers them
    }
    if explain:
        out |= {
            "terms": result.terms,
            "literals": result.literals,
            "best_cosine": result.best_cosine,
            "keyword_used": result.keyword_used,
            "fallback_reason": result.fallback_reason,
        }
    if result.truncated:
        out["truncated"] = True
    if result.incomplete:
        out["incomplete"] = result.incomplete
    return out


@click.command("search")
@click.argument("query", required=False)
@click.option(
    "-p",
    "--project",
    "project_slugs",
    multiple=True,
    metavar="PROJECT",
    help="Search only this project; repeatable (default: every project).",
)
@click.option("-n", "--limit", default=10, show_default=True, help="How many results.")
@click.option("--mode", type=click.Choice(MODES), help="Retrieval mode (default: fusion).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per query.")
@click.option("--explain", is_flag=True, help="Say why each result ranked.")
@click.option(
    "--queries",
    type=click.File("r"),
    metavar="FILE.jsonl",
    help='Batch: one {"id": …, "query": …} per line; one JSON answer per line.',
)
@click.option("--user", "user_name", metavar="NAME", help="Whose usage shapes the ranking.")
def search_command(
    query: str | None,
    project_slugs: tuple[str, ...],
    limit: int,
    mode: str | None,
    as_json: bool,
    explain: bool,
    queries: TextIO | None,
    user_name: str | None,
) -> None:
    """Search notes for QUERY: meaning (vectors), literal words (keywords) and your usage."""
    if (query is None) == (queries is None):
        raise CharlieError("Give either a QUERY or --queries FILE.jsonl.")
    with opened_home() as home:
        index = open_index(home)
        searcher = Searcher(home, index)
        projects = [get_project(home, s) for s in project_slugs] or list_projects(home)
        user = cli_user(home, user_name)
        chosen_mode = cast(Mode, mode or searcher.config.mode)
        if queries is not None:
            for number, line in enumerate(queries, start=1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                    qid, text = item["id"], item["query"]
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise CharlieError(
                        f"Line {number} of the queries file is not a JSON object with "
                        f'"id" and "query" ({exc}).'
                    ) from exc
                result = searcher.search(
                    str(text),
                    user,
                    projects,
                    limit=limit,
                    mode=chosen_mode,
                    explain=explain,
                )
                click.echo(json.dumps({"id": qid} | _result_json(result, explain)))
            return
        assert query is not None
        result = searcher.search(
            query,
            user,
            projects,
            limit=limit,
            mode=chosen_mode,
            explain=explain,
        )
        if as_json:
            click.echo(json.dumps(_result_json(result, explain), indent=2))
            return
        if result.incomplete:
            click.echo(runnable(result.incomplete), err=True)
        if explain and result.fallback_reason:
            click.echo(f"keyword search joined: {result.fallback_reason}")
        if not result.hits:
            click.echo("No matching notes.")
        elif explain:
            for line in searcher.legend(result):
                click.echo(f"({line})")
        for rank, hit in enumerate(result.hits, start=1):
            click.echo(f"{rank}. {hit.title}  [{hit.key}]  {hit.score:.3f}")
            if explain:
                click.echo(f"   why: {hit.in_words()}")
                click.echo(f"   {hit.why()}")
                if hit.snippet:
                    click.echo(f"   {hit.snippet}")
