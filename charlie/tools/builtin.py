"""Charlie's own tools, by category: memory, notes, projects, time.

Each is a plain function (see `charlie.tools.registry`): the first parameter is the
`ToolContext`, the docstring is what the model reads. Each returns a
`charlie.tools.registry.Result`: the text the model gets back, the summary the person sees in
the trace, and for a search what it found (`trace.Hit`s). Text taken from notes, memory or
messages is escaped and wrapped in <note>/<memory>/<messages> tags (`charlie.llm.fence`): it
is data, not instructions, and cannot close its tag.

Writes are confined, whatever the model was told (a note it read may tell it otherwise):
a write tool writes only into the channel's own project — `switch_project` widens what is
*read*, never where writes go — and only if that project's `write_tools` allows it; in a
private channel, `record_decision` writes the person's private memory only while the answer
has read nothing other people wrote (no note, no other project's memory, no pinned note).
`charlie.tools.registry.run_tool` checks the policy before any write tool runs; each write
tool checks its target.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from charlie import conversations, projects
from charlie.conversations import Channel
from charlie.llm.fence import escape, fence
from charlie.memory import layers as memory
from charlie.memory import why
from charlie.notes import files as notes
from charlie.retrieval import recall, suggestions, usage
from charlie.retrieval.upkeep import mark_stale
from charlie.text import plural
from charlie.tools.registry import (
    Category,
    Registry,
    Result,
    Tool,
    ToolContext,
    ToolError,
    WriteRefused,
)
from charlie.trace import Hit


def scope(context: ToolContext) -> list[projects.Project]:
    """The projects a search may look in: the channel's (plus any switched to) — or, in a
    private channel, every shared project of the household."""
    if context.channel.project is None:
        return projects.list_projects(context.home)
    slugs = [context.channel.project.slug, *context.extra_projects]
    return [projects.get_project(context.home, slug) for slug in dict.fromkeys(slugs)]


def _note(context: ToolContext, ref: str) -> notes.Note:
    """A note from its id, "project/name", or just its name in the channel's project."""
    ref = ref.strip().removesuffix(".md")
    in_scope = {p.slug: p for p in scope(context)}
    head, _, tail = ref.partition("/")
    if tail and head in in_scope:
        return notes.get_note(in_scope[head], tail)
    if context.channel.project is None:
        raise ToolError("Name the note by its id, project/name, as search_notes shows it.")
    return notes.get_note(context.channel.project, ref)


# ---------------------------------------------------------------- memory


def search_notes(context: ToolContext, query: str, limit: int = 5) -> Result:
    """Search the project's notes by meaning and keywords. Returns note ids, titles, scores
    and a snippet; read a note in full with read_note.

    Args:
        query: What to look for, in a few words (names, terms, or a question).
        limit: How many notes to return (1-10).
    """
    limit = max(1, min(limit, 10))
    found = context.searcher().search(query, context.user, scope(context), limit=limit)
    partial = f"\n({found.incomplete})" if found.incomplete else ""
    if not found.hits:
        summary = "no notes (the index is still filling)" if partial else "no notes"
        return Result(f"No notes matched.{partial}", summary, hits=(), count=0)
    lines = []
    for hit in found.hits:
        context.found.append(hit.key)
        context.read_untrusted(f"note {hit.key}")
        lines.append(
            fence(
                "note", escape(hit.snippet), id=hit.key, title=hit.title, score=f"{hit.score:.2f}"
            )
        )
    hits = tuple(Hit(h.key, h.title, round(h.score, 4), h.snippet) for h in found.hits)
    count = len(hits)
    summary = f"{count} {plural(count, 'note')}" + (" (index still filling)" if partial else "")
    return Result("\n".join(lines) + partial, summary, hits, count)


def read_note(context: ToolContext, note: str) -> Result:
    """Read one note in full.

    Args:
        note: The note's id as search_notes gives it (project/name), or its name.
    """
    found = _note(context, note)
    if found.key not in context.cited:
        context.cited.append(found.key)
    context.read_untrusted(f"note {found.key}")
    tags = " ".join(f"#{t}" for t in found.tags)
    body = fence("note", escape(found.body), id=found.key, title=found.title, tags=tags)
    return Result(body, f"read {found.title}")


def read_memory(
    context: ToolContext, layer: Literal["summary", "decisions", "quotes", "all"] = "all"
) -> Result:
    """Read this project's memory: its summary, its decisions, its recent quotes, or all.

    Args:
        layer: Which layer to read.
    """
    current = memory.load(context.home, context.channel)
    decisions = [f"- {memory.decision_line(d)}" for d in current.decisions]
    earlier = [f"- {memory.earlier_line(e)}" for e in current.earlier]
    if earlier:
        decisions += ["Earlier decisions (no longer hold):", *earlier]
    parts = {
        "summary": current.summary or "(no summary yet)",
        "decisions": "\n".join(decisions) or "(no decisions yet)",
        "quotes": "\n".join(f'- {q.speaker}: "{q.text}"' for q in current.quotes)
        or "(no quotes yet)",
    }
    chosen = parts if layer == "all" else {layer: parts[layer]}
    text = "\n\n".join(f"## {name}\n{value}" for name, value in chosen.items())
    return Result(fence("memory", escape(text)), f"read {layer}")


def explain_memory(context: ToolContext, topic: str) -> Result:
    """What the memory holds about a topic, and why: the decisions about it (since when, who
    made them, from which messages), the decisions that held before, the quotes, and what
    was said about it. Use it for "what did we decide about X, and when?".

    Args:
        topic: What to explain, in a few words.
    """
    items = why.remembered(context.home, context.channel, context.user, topic)
    found = [i for i in items if i.kind != "message"]
    summary = f"{len(found)} in memory, {len(items) - len(found)} messages"
    return Result(fence("memory", escape(why.as_text(items, topic))), summary)


def search_conversation(
    context: ToolContext, query: str, limit: int = 5, all_projects: bool = False
) -> Result:
    """Find what was said earlier in this conversation — its whole history, by meaning and
    by words. Put a time in the query when it matters ("in May", "last spring", "the first
    time"). Each hit comes with its date, speaker and the messages around it.

    Args:
        query: What to look for, as a question or words.
        limit: How many messages to return (1-10).
        all_projects: Also look in every shared project's conversation.
    """
    recaller = context.recaller()
    channels = recall.conversations_for(
        context.home, context.user, context.channel, everywhere=all_projects
    )
    wanted = max(1, min(limit, 10))
    try:
        found = recaller.recall(context.user, channels, query, limit=wanted + 1)
    except recall.RecallError as exc:
        raise ToolError(str(exc)) from exc
    # The question being answered is not what was said earlier.
    found.hits = [h for h in found.hits if h.message.id != context.asked][:wanted]
    partial = f"\n({found.incomplete})" if found.incomplete else ""
    if not found.hits:
        return Result(f"No earlier messages matched.{partial}", "no messages", count=0)
    if any(h.conversation_id != context.channel.conversation_id for h in found.hits):
        context.read_untrusted("messages of other projects")
    blocks = []
    for hit in found.hits:
        key = usage.message_key(hit.message.id)
        if key not in context.cited:
            context.cited.append(key)
        lines = [f"[{when(hit.message.created_at)} · {hit.channel} · message {hit.message.id}]"]
        for m in hit.around:
            mark = "→" if m.id == hit.message.id else " "
            lines.append(f"{mark} [{when(m.created_at)}] {m.speaker}: {m.content}")
        blocks.append("\n".join(lines))
    about = f"(about {found.when.describe()})\n" if found.when is not None else ""
    text = fence("messages", escape(about + "\n\n".join(blocks))) + partial
    hits = tuple(
        Hit(
            usage.message_key(h.message.id),
            f"{h.message.speaker}, {when(h.message.created_at)}",
            h.score,
            h.message.content[:160],
        )
        for h in found.hits
    )
    return Result(text, f"{len(hits)} messages", hits=hits, count=len(hits))


def when(created_at: str) -> str:
    """A stored time as the model and the person read it: 2023-05-08 13:56 UTC."""
    return created_at[:16].replace("T", " ") + " UTC"


# ---------------------------------------------------------------- notes (writes)


def _wrote(context: ToolContext) -> None:
    """A note changed: the next search in this answer (or later) re-checks the files."""
    mark_stale(context.home)
    context.forget_searcher()


def _shared_project(context: ToolContext) -> projects.Project:
    if context.channel.project is None:
        raise WriteRefused(
            "This is a private channel: it writes no files, so notes cannot be written here."
        )
    return context.channel.project


def _own_note(context: ToolContext, ref: str) -> tuple[projects.Project, notes.Note]:
    """A note to write to: it must be in the channel's own project, whatever was read."""
    project = _shared_project(context)
    found = _note(context, ref)
    if found.project != project.slug:
        raise WriteRefused(
            f"{found.key} is in project {found.project}; writes here go only to this "
            f"channel's project ({project.slug}). Ask in {found.project}'s own channel."
        )
    return project, found


def create_note(
    context: ToolContext, title: str, body: str, tags: list[str] | None = None
) -> Result:
    """Create a new note in this project.

    Args:
        title: The note's title.
        body: The note's text (markdown).
        tags: Tags for the note.
    """
    created = notes.create_note(_shared_project(context), title, body, tags or [])
    _wrote(context)
    return Result(f"Created note {created.key}.", f"created {created.key}")


def append_to_note(context: ToolContext, note: str, text: str) -> Result:
    """Add text at the end of an existing note.

    Args:
        note: The note's id (project/name) or name.
        text: The text to add.
    """
    project, found = _own_note(context, note)
    notes.append_to_note(project, found.name, text)
    _wrote(context)
    return Result(f"Appended to {found.key}.", f"appended to {found.key}")


def tag_note(context: ToolContext, note: str, tags: list[str]) -> Result:
    """Add tags to a note.

    Args:
        note: The note's id (project/name) or name.
        tags: The tags to add.
    """
    project, found = _own_note(context, note)
    updated = notes.tag_note(project, found.name, add=tags)
    _wrote(context)
    return Result(f"{updated.key} is tagged {', '.join(updated.tags)}.", f"tagged {updated.key}")


def record_decision(context: ToolContext, decision: str) -> Result:
    """Record a decision in this project's memory (its Decisions list).

    Args:
        decision: The decision, as one short sentence.
    """
    text = " ".join(decision.split())
    if not text:
        raise ToolError("The decision is empty.")
    if context.channel.private:  # pinned notes are in the prompt: others wrote them
        for key, _ in suggestions.pins(context.home, context.channel):
            context.read_untrusted(f"pinned note {key}")
        refusal = context.write_refusal("record_decision")
        if refusal is not None:
            raise WriteRefused(refusal)
    current = memory.load(context.home, context.channel)
    if memory.key(text) in (memory.key(d) for d in current.texts):
        return Result("That decision is already recorded.", "already recorded")
    asked = (context.asked,) if context.asked else ()
    today = datetime.now(UTC).date().isoformat()
    current.decisions.append(memory.Decision(text, today, context.user.name, asked))
    memory.save(context.home, context.channel, current, "tool")
    return Result(f"I recorded the decision: {text}", f"recorded: {text}")  # as I say it


# ---------------------------------------------------------------- projects


def list_projects(context: ToolContext) -> Result:
    """List the household's projects with their names."""
    found = projects.list_projects(context.home)
    lines = [f"- {p.slug}: {escape(p.config.name)}" for p in found]
    return Result("\n".join(lines) or "No projects.", f"{len(found)} projects")


def switch_project(context: ToolContext, project: str) -> Result:
    """Bring another project into reach: returns its memory, and its notes become searchable
    for the rest of this answer. Writes still go only to this channel's project.

    Args:
        project: The project's name (slug), as list_projects gives it.
    """
    target = projects.get_project(context.home, project.strip())
    if target.slug not in context.extra_projects:
        context.extra_projects.append(target.slug)
    other = conversations.shared_channel(context.home, target)
    layers = memory.as_prompt(memory.load(context.home, other))
    if context.channel.project is None or target.slug != context.channel.project.slug:
        context.read_untrusted(f"memory of {target.slug}")
    return Result(
        fence("memory", escape(layers), project=target.slug), f"switched to {target.slug}"
    )


# ---------------------------------------------------------------- time


def now(context: ToolContext) -> Result:
    """The current date and time (UTC), with the weekday."""
    moment = datetime.now(UTC)
    return Result(f"{moment:%A %Y-%m-%d %H:%M} UTC")


def _date(text: str) -> date:
    """A date as a model writes it: YYYY-MM-DD (a time after it is ignored), or a day of
    the month alone ("14", "14th"): the next such day from today on."""
    written = text.strip()
    day = re.fullmatch(r"(?:the\s+)?(\d{1,2})(?:st|nd|rd|th)?", written, re.IGNORECASE)
    if day:
        return next_day_of_month(int(day[1]), datetime.now(UTC).date())
    try:
        return date.fromisoformat(written[:10])
    except ValueError as exc:
        raise ToolError(f"{text!r} is not a date; write it as YYYY-MM-DD.") from exc


def next_day_of_month(day: int, today: date) -> date:
    """The first date on or after `today` that falls on day `day` of its month."""
    if not 1 <= day <= 31:
        raise ToolError(f"There is no day {day} in a month; write the date as YYYY-MM-DD.")
    year, month = today.year, today.month
    if day < today.day:
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    while day > calendar.monthrange(year, month)[1]:  # the 31st: the next month that has one
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return date(year, month, day)


def date_add(context: ToolContext, start: str, days: int) -> Result:
    """The date a number of days after (or, if negative, before) a date, with its weekday.

    Args:
        start: A date as YYYY-MM-DD.
        days: Days to add; negative to go back.
    """
    result = _date(start) + timedelta(days=days)
    return Result(f"{result:%A %Y-%m-%d}")


def days_between(context: ToolContext, start: str, end: str) -> Result:
    """How many days from one date to another (negative when the end comes first). For
    "how many days until…", start is today.

    Args:
        start: A date as YYYY-MM-DD.
        end: A date as YYYY-MM-DD.
    """
    first, last = _date(start), _date(end)
    days = (last - first).days
    unit = plural(days, "day")
    return Result(f"{days} {unit} from {first:%A %Y-%m-%d} to {last:%A %Y-%m-%d}", f"{days} {unit}")


def weekday(context: ToolContext, day: str) -> Result:
    """The weekday of a date ("what day of the week is the 14th?").

    Args:
        day: A date as YYYY-MM-DD, or a day of this month ("14"): the next one to come.
    """
    found = _date(day)
    return Result(f"{found:%A %Y-%m-%d}")


# ---------------------------------------------------------------- the registry

MEMORY = Category(
    "memory",
    "search and read the project's notes, its memory (summary, decisions, quotes) and "
    "earlier messages",
    (
        r"\bnotes?\b",
        r"\bdecid",
        r"\bdecision",
        r"\bremember",
        r"\brecall",
        r"\bsaid\b",
        r"\bsay\b",
        r"\bagreed?\b",
        r"\bwhat did we\b",
        r"\bwhat was\b",
        r"\bearlier\b",
        r"\blast time\b",
        r"\bsummar",
        r"\bquote",
        r"\bfind\b",
        r"\blook up\b",
        r"\bsearch",
        r"\bwhere did\b",
        r"\bour\b",
        # a question about the household's own things: what the notes and history are for
        r"^\s*(when|where|who|which|how (much|many|long|often)|what time|what day)\b",
        r"\b(is|are|was|were|did|do|does|has|have) (the|our|we|my|your)\b.*\?",
    ),
)
NOTES = Category(
    "notes",
    "write: create a note, append to a note, tag a note, record a decision",
    (
        r"\bwrite (it|this|that) down\b",
        r"\bcreate a note\b",
        r"\bnote (it|this|that)\b",
        r"\bmake a note\b",
        r"\badd (it |this |that )?to\b.*\bnote",
        r"\btag\b",
        r"\brecord\b",
        r"\bsave (it|this|that)\b",
        r"\blet'?s go with\b",
        r"\bwe('ll| will) use\b",
    ),
)
PROJECTS = Category(
    "projects",
    "list the household's projects, and look into another project",
    (r"\bprojects?\b", r"\bother project\b", r"\bswitch\b"),
)
TIME = Category(
    "time",
    "today's date and time; date arithmetic — days between dates, a date's weekday, a date "
    "plus days (use these: never count days yourself)",
    (
        r"\btoday\b",
        r"\btomorrow\b",
        r"\byesterday\b",
        r"\bdate\b",
        r"\btime\b",
        r"\bdays?\b",
        r"\bweekdays?\b",
        r"\bday of the week\b",
        r"\bweeks?\b",
        r"\bmonths?\b",
        r"\bdeadline\b",
        r"\bhow long\b",
        r"\bnow\b",
    ),
)


def registry() -> Registry:
    """Charlie's standard tools."""
    built = Registry()
    built.add(
        MEMORY,
        [
            Tool.from_function(f, "memory")
            for f in (search_notes, read_note, read_memory, search_conversation, explain_memory)
        ],
    )
    built.add(
        NOTES,
        [
            Tool.from_function(f, "notes", writes=True)
            for f in (create_note, append_to_note, tag_note, record_decision)
        ],
    )
    built.add(
        PROJECTS, [Tool.from_function(f, "projects") for f in (list_projects, switch_project)]
    )
    built.add(TIME, [Tool.from_function(f, "time") for f in (now, date_add, days_between, weekday)])
    return built


def write_tools() -> tuple[str, ...]:
    """The names of the write tools (those registered with `writes=True`)."""
    return tuple(name for name, tool in registry().tools.items() if tool.writes)


def allowed_write_tools(channel: Channel) -> set[str]:
    """The write tools this channel offers the model: all, unless its project.toml's
    `write_tools` says; in a private channel only `record_decision` (it writes no files)."""
    if channel.project is None:
        return {"record_decision"}
    configured = channel.project.config.write_tools
    return set(write_tools() if configured is None else configured)


def record_citations(context: ToolContext) -> None:
    """Notes the answer drew on count as cited in the person's usage."""
    for key in context.cited:
        usage.record(
            context.home.db, context.user.id, "cited", note=key, private=context.channel.private
        )
