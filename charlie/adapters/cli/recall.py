"""`charlie recall`: find what was said in a conversation, one question or a file of them."""

from __future__ import annotations

import json
from pathlib import Path

import click

from charlie.adapters.cli.common import (
    channel_options,
    message_index,
    opened_home,
    resolve_channel,
    runnable,
)
from charlie.errors import CharlieError
from charlie.retrieval.recall import Recaller, RecallHit, RecallResult, conversations_for


def hit_json(hit: RecallHit, explain: bool) -> dict[str, object]:
    m = hit.message
    out: dict[str, object] = {
        "message_id": m.id,
        "source_id": m.source_id,
        "speaker": m.speaker,
        "role": m.role,
        "time": m.created_at,
        "text": m.content,
        "score": round(hit.score, 6),
        "channel": hit.channel,
    }
    if explain:
        out |= {"cosine": round(hit.vector, 6), "bm25": round(hit.bm25, 4), "why": hit.why()}
    return out


def result_json(result: RecallResult, explain: bool) -> dict[str, object]:
    out: dict[str, object] = {
        "query": result.query,
        "results": [hit_json(h, explain) for h in result.hits],
    }
    if result.when is not None:
        out["when"] = result.when.describe()
    if explain:
        out["terms"] = result.terms
    if result.incomplete:
        out["incomplete"] = result.incomplete
    return out


def legend(recaller: Recaller) -> list[str]:
    """What each symbol of `RecallHit.why` means, with this recaller's values."""
    config, usage = recaller.config, recaller.usage
    return [
        f"score = similarity × (1 + {config.time_weight:g} when in the time asked about) "
        f"× (1 + boost × weight), weight = {usage.weight:g} (CHARLIE_USAGE_WEIGHT); "
        f"similarity = {config.alpha:g} × cosine + {1 - config.alpha:g} × BM25 ÷ the "
        "question's best BM25",
        "cosine: closeness in meaning, 0 to 1 · BM25: how well the words match, higher is "
        "better · boost: 0 to 1, from answers that drew on the message, halving every "
        f"{usage.half_life_days:g} days unused",
    ]


def _show(result: RecallResult, explain: bool, recaller: Recaller) -> None:
    if result.when is not None:
        click.echo(f"(about {result.when.describe()})")
    if not result.hits:
        click.echo("Nothing found.")
    elif explain:
        for line in legend(recaller):
            click.echo(f"({line})")
    for number, hit in enumerate(result.hits, start=1):
        m = hit.message
        when = m.created_at[:16].replace("T", " ")
        click.echo(f"{number}. [{when}] {m.speaker} (message {m.id}): {m.content}")
        if explain:
            click.echo(f"   {hit.why()}")


def _queries(path: Path) -> list[tuple[str, str]]:
    """(id, question) of each line of a queries file: {"id": …, "query": …} per line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CharlieError(f"Cannot read the queries file {path}: {exc}") from exc
    found = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            found.append((str(item["id"]), str(item["query"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise CharlieError(
                f'{path}, line {number}: not a query ({exc}); write {{"id": …, "query": …}}.'
            ) from exc
    return found


@click.command("recall")
@click.argument("question", required=False)
@channel_options
@click.option("--all", "everywhere", is_flag=True, help="Also look in every shared project.")
@click.option("--limit", default=10, show_default=True, help="How many messages to show.")
@click.option("--around", default=1, show_default=True, help="Messages shown around each hit.")
@click.option("--queries", type=click.Path(path_type=Path), help="A JSONL file of questions.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (one line per question).")
@click.option("--explain", is_flag=True, help="Say why each message ranked where it did.")
def recall_command(
    question: str | None,
    project: str | None,
    private: bool,
    user_name: str | None,
    everywhere: bool,
    limit: int,
    around: int,
    queries: Path | None,
    as_json: bool,
    explain: bool,
) -> None:
    """Find what was said: the messages that best answer QUESTION, with their dates.

    Searches the project's conversation (or your private one with --private) by meaning and
    by words; a time in the question ("last spring", "in May 2023", "the first time") is
    understood. With --queries FILE, one question per line ({"id": …, "query": …}) and one
    JSON line of results per question."""
    if (question is None) == (queries is None):
        raise CharlieError("Give a QUESTION, or --queries FILE (not both).")
    with opened_home() as home:
        channel, user = resolve_channel(home, project, private, user_name, create=False)
        channels = conversations_for(home, user, channel, everywhere=everywhere)
        recaller = Recaller(home, message_index(home))
        asked = [("", question)] if question is not None else _queries(queries)  # type: ignore[arg-type]
        for query_id, text in asked:
            result = recaller.recall(user, channels, text, limit=limit, around=around)
            if queries is not None:
                click.echo(json.dumps({"id": query_id, **result_json(result, explain)}))
            elif as_json:
                click.echo(json.dumps(result_json(result, explain), ensure_ascii=False))
            else:
                if result.incomplete:
                    click.echo(runnable(result.incomplete), err=True)
                _show(result, explain, recaller)
