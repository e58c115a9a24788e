"""The tools other apps get over MCP: thin wrappers over Charlie's own
(`charlie.tools.builtin`).

Each tool names the project it works in — a project's slug, or "private" for the caller's
own private channel — builds the `ToolContext` chat would have there, and runs Charlie's
own tool through `charlie.tools.registry.run_tool`. So the rules are the ones chat follows:
writes go only into that project and only if its `write_tools` allows them, a private
channel writes no files, note text comes back inside a <note> fence, long results are cut
with a note saying so, and the notes and messages read count as cited in the caller's usage.
On top of that, a read-only token is refused every write tool before anything runs.

The wrappers are plain functions as well, so their schemas and descriptions come from their
signatures and docstrings (`charlie.tools.registry.Tool.from_function`), as for Charlie's
own model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

from charlie import projects
from charlie.conversations import Channel, channel_named
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.jsonvalue import JSONObject
from charlie.llm.fence import escape, fence
from charlie.memory import layers as memory
from charlie.projects import PRIVATE
from charlie.tools import builtin as toolkit
from charlie.tools import registry as tools
from charlie.tools.registry import Result, Tool, ToolContext
from charlie.users import User


@dataclass(frozen=True)
class Caller:
    """Who is asking: a household member, and whether what they hold may write."""

    user: User
    read_only: bool = False


@dataclass(frozen=True)
class Reply:
    """A tool's answer: the text the calling app reads, and whether it is an error."""

    text: str
    error: bool = False


@dataclass(frozen=True)
class Call:
    """What a tool runs with: the opened data home and the caller."""

    home: Home
    caller: Caller


def channel_for(home: Home, user: User, project: str | None) -> Channel:
    """The channel `project` names for `user`: a shared project's, or (for "private" or
    None) the user's own private channel — never anyone else's."""
    slug = (project or PRIVATE).strip()
    return channel_named(home, user, PRIVATE if slug.lower() == PRIVATE else slug)


def _run(call: Call, project: str | None, tool: Tool, arguments: JSONObject) -> Reply:
    """Run one of Charlie's own tools in `project`'s channel, as chat would."""
    user = call.caller.user
    context = ToolContext(call.home, channel_for(call.home, user, project), user)
    outcome = tools.run_tool(tool, context, arguments)
    toolkit.record_citations(context)
    return Reply(outcome.content, outcome.error)


@cache
def _own() -> dict[str, Tool]:
    return toolkit.registry().tools


# ---------------------------------------------------------------- reads


def _search_explained(context: ToolContext, query: str, limit: int = 5) -> Result:
    """toolkit.search_notes, with why each note ranked (for an app that shows its sources)."""
    limit = max(1, min(limit, 10))
    scope = (
        [context.channel.project]
        if context.channel.project is not None
        else projects.list_projects(context.home)
    )
    found = context.searcher().search(query, context.user, scope, limit=limit)
    if not found.hits:
        return Result("No notes matched.", "no notes", hits=(), count=0)
    lines = []
    for hit in (h.public() for h in found.hits):  # the shape the web API answers
        lines.append(
            fence(
                "note",
                escape(hit.snippet),
                id=hit.id,
                title=hit.title,
                tags=" ".join(f"#{t}" for t in hit.tags),
                score=f"{hit.score:.2f}",
                why=hit.why,
            )
        )
    return Result("\n".join(lines), f"{len(found.hits)} notes", count=len(found.hits))


_SEARCH = Tool.from_function(_search_explained, "memory")


def list_projects(call: Call) -> Reply:
    """List the household's projects (slug: name). Tools take a slug as `project`, or
    "private" for your own private channel."""
    return _run(call, PRIVATE, _own()["list_projects"], {})


def search_notes(call: Call, query: str, project: str | None = None, limit: int = 5) -> Reply:
    """Search notes by meaning and keywords. Each hit gives its id (project/name), title,
    a snippet and why it ranked (cosine, keyword terms, your usage).

    Args:
        query: What to look for: a few words or a question.
        project: A project slug; omit to search every project.
        limit: How many notes (1-10).
    """
    return _run(call, project, _SEARCH, {"query": query, "limit": limit})


def read_note(call: Call, note: str, project: str | None = None) -> Reply:
    """Read one note in full.

    Args:
        note: The note's id as search_notes gives it (project/name), or its name.
        project: The project slug, when note is just a name.
    """
    if project is None:
        head, _, tail = note.strip().partition("/")
        if not tail:
            return Reply("Error: Name the note as project/name (search_notes gives ids).", True)
        project = head
    return _run(call, project, _own()["read_note"], {"note": note})


def read_memory(call: Call, project: str) -> Reply:
    """Read a project's memory as JSON: its summary, its decisions (each with since when it
    holds, who made it and from which messages), recent quotes, and superseded decisions.

    Args:
        project: A project slug, or "private".
    """
    channel = channel_for(call.home, call.caller.user, project)
    layers = memory.load(call.home, channel)
    return Reply(json.dumps(memory.as_json(layers), ensure_ascii=False))


def recall(call: Call, question: str, project: str | None = None, limit: int = 5) -> Reply:
    """Find what was said in conversations with Charlie, by meaning and words; a time in
    the question ("in May", "last spring") is understood. Each hit has its date, speaker
    and the messages around it.

    Args:
        question: What to look for, as a question or words.
        project: A project slug, or "private"; omit for your private channel and every project.
        limit: How many messages (1-10).
    """
    arguments: JSONObject = {"query": question, "limit": limit, "all_projects": project is None}
    return _run(call, project, _own()["search_conversation"], arguments)


# ---------------------------------------------------------------- writes


def record_decision(call: Call, project: str, text: str) -> Reply:
    """Record a decision in a project's memory (undo with `charlie memory undo`).

    Args:
        project: A project slug, or "private".
        text: The decision, as one short sentence.
    """
    return _run(call, project, _own()["record_decision"], {"decision": text})


def write_note(
    call: Call, project: str, title: str, body: str, tags: list[str] | None = None
) -> Reply:
    """Create a note in a project.

    Args:
        project: A project slug.
        title: The note's title.
        body: Its text (markdown).
        tags: Tags for it.
    """
    arguments: JSONObject = {"title": title, "body": body, "tags": list(tags or [])}
    return _run(call, project, _own()["create_note"], arguments)


def append_to_note(call: Call, project: str, note: str, text: str) -> Reply:
    """Add text at the end of a note.

    Args:
        project: The note's project slug.
        note: The note's name or id.
        text: The text to add.
    """
    return _run(call, project, _own()["append_to_note"], {"note": note, "text": text})


def tag_note(call: Call, project: str, note: str, tags: list[str]) -> Reply:
    """Add tags to a note.

    Args:
        project: The note's project slug.
        note: The note's name or id.
        tags: The tags to add.
    """
    return _run(call, project, _own()["tag_note"], {"note": note, "tags": list(tags)})


# ---------------------------------------------------------------- the list

READS = (list_projects, search_notes, read_note, read_memory, recall)
WRITES = (record_decision, write_note, append_to_note, tag_note)


@cache
def catalog() -> dict[str, Tool]:
    """The tools by name, reads first; `Tool.writes` marks those a read-only token may not use."""
    built = [Tool.from_function(f, "mcp") for f in READS]
    built += [Tool.from_function(f, "mcp", writes=True) for f in WRITES]
    return {tool.name: tool for tool in built}


def call_tool(home: Home, caller: Caller, name: str, arguments: JSONObject | None) -> Reply:
    """Run tool `name` for `caller`. Every failure Charlie can explain is an error reply with
    the text the CLI would print; a read-only caller's write is refused before it runs."""
    tool = catalog().get(name)
    if tool is None:
        known = ", ".join(catalog())
        return Reply(f"Error: There is no tool {name!r}; the tools are: {known}.", True)
    if tool.writes and caller.read_only:
        return Reply(
            f"Refused: {name} writes, and this token is read-only; nothing was changed. To let "
            "this app write, give it a token that is not read-only.",
            True,
        )
    try:
        bound = tool.bind(arguments or {})
        reply: Reply = tool.function(Call(home, caller), **bound)
    except CharlieError as exc:
        return Reply(f"Error: {exc}", True)
    return reply
