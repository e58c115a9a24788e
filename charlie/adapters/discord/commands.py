"""What the `/charlie …` slash commands do, as plain functions returning the text to show.

Each takes the Discord user id and the `Place` the command was used in; the bot calls them
in a worker thread and sends the text (only to the person who asked). Failures are
`CharlieError`s with a message for that person.
"""

from __future__ import annotations

from charlie import conversations, projects
from charlie.adapters.discord.conversation import caller
from charlie.conversations import Channel
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.household import discord_links as links
from charlie.household import forget
from charlie.household.discord_places import Place, bind, bound_slug, channel_for, unbind
from charlie.llm.client import LLMClient
from charlie.memory import batches, distill
from charlie.memory import layers as memory
from charlie.retrieval.upkeep import searcher_for
from charlie.text import plural

SEARCH_LIMIT = 5


def _title(channel: Channel) -> str:
    return channel.project.config.name if channel.project else "Your private channel"


def memory_text(home: Home, place: Place, discord_id: int) -> str:
    """The three memory layers of the bound project (in a DM: of your private channel)."""
    user = caller(home, discord_id)
    channel = channel_for(home, place, user)
    layers = memory.load(home, channel)
    lines = [f"## {_title(channel)} — memory", "**Summary**", layers.summary or "_(none yet)_"]
    lines += ["", "**Decisions**"]
    lines += [f"- {memory.decision_line(d)}" for d in layers.decisions] or ["_(none yet)_"]
    lines += ["", "**Recent quotes**"]
    lines += [f'> {q.speaker}: "{q.text}"' for q in layers.quotes] or ["_(none yet)_"]
    if layers.earlier:
        lines += ["", "**Earlier decisions**"]
        lines += [f"- ~~{e.text}~~ _({e.until or 'no longer holds'})_" for e in layers.earlier]
    return "\n".join(lines)


def search_text(home: Home, place: Place, discord_id: int, query: str) -> str:
    """The notes that match `query`: the bound project's, or (in a DM or an unbound
    channel) every project's. Notes are the household's; private memory is never searched."""
    user = caller(home, discord_id)
    slug = None if place.is_dm else bound_slug(home, place)
    scope = [projects.get_project(home, slug)] if slug else []
    result = searcher_for(home).search(query, user, scope, limit=SEARCH_LIMIT)
    where = f"in {slug}" if slug else "in every project"
    if not result.hits:
        return f"No notes {where} match {query!r}."
    lines = [f"Notes {where} for {query!r}:"]
    for number, hit in enumerate(result.hits, start=1):
        snippet = " ".join(hit.snippet.split())
        snippet = snippet if len(snippet) <= 160 else snippet[:159] + "…"
        lines.append(f"{number}. **{hit.title}** (`{hit.key}`) {hit.score:.2f}")
        if snippet:
            lines.append(f"-# {snippet}")
    return "\n".join(lines)


def distill_text(home: Home, llm: LLMClient, place: Place, discord_id: int) -> str:
    """Distill the conversation into memory now, without waiting for the cadence."""
    user = caller(home, discord_id)
    channel = channel_for(home, place, user)
    results = list(batches.distill_all(home, channel, llm))  # in batches that fit the model
    if not results:
        return f"🧠 {distill.nothing_new(channel)}"
    result = results[-1]
    first = results[0].first_message_id
    m = result.memory
    line = (
        f"🧠 Memory of {_title(channel)} updated from messages {first}–"
        f"{result.last_message_id}: {len(m.decisions)} decisions, {len(m.quotes)} quotes."
    )
    rejected = sum(len(r.rejected_quotes) for r in results)
    if rejected:
        line += f" {rejected} quote(s) were left out (not verbatim, a question, or a decision)."
    return line


def forget_text(home: Home, place: Place, discord_id: int, message_id: int | None) -> str:
    """Forget a message for good (default: your last one here) and Charlie's answer to it.
    In a DM it is your private channel's; in a server channel, only your own messages."""
    user = caller(home, discord_id)
    channel = channel_for(home, place, user)
    if message_id is None:
        message_id = conversations.last_said_by(home, channel, user)
        if message_id is None:
            raise CharlieError("You have no message here to forget.")
    done = forget.forget(home, channel, user, message_id)
    line = f"🧹 Forgot {done.messages} {plural(done.messages, 'message')}"
    if done.quotes:
        line += f"; {done.quotes} {plural(done.quotes, 'quote')} left the memory"
    line += "."
    if done.restated:
        line += f" {done.restated} decision(s) only restated it: gone with it."
    if done.flagged:
        line += f" {len(done.flagged)} decision(s) came only from it: flagged in the memory."
    return line


def style_text(home: Home, place: Place, discord_id: int, new_style: str | None) -> str:
    """The bound project's response style; with `new_style`, set it."""
    user = caller(home, discord_id)
    channel = channel_for(home, place, user)
    if channel.project is None:
        raise CharlieError(
            "Your private channel has no response style; styles belong to projects. "
            "Use this in a channel bound to a project."
        )
    slug = channel.project.slug
    if new_style is not None and new_style.strip():
        project = projects.update_project(home, slug, style=new_style.strip())
        return f"Response style of {project.config.name} is now: {project.config.style}"
    style = channel.project.config.style.strip()
    if not style:
        return (
            f"{channel.project.config.name} has no response style yet; set one with "
            "`/charlie style text:…`."
        )
    return f"Response style of {channel.project.config.name}: {style}"


def bind_text(home: Home, place: Place, discord_id: int, slug: str) -> str:
    user = caller(home, discord_id)
    project = bind(home, place, slug.strip().lower(), user)
    where = "thread" if place.parent_id is not None else "channel"
    return (
        f"This {where} is now project **{project.config.name}** (`{project.slug}`): what is "
        "said here goes into its memory. DMs with me stay private."
    )


def unbind_text(home: Home, place: Place, discord_id: int) -> str:
    caller(home, discord_id)
    slug = unbind(home, place)
    return f"This channel is no longer tied to `{slug}`."


def link_text(home: Home, discord_id: int, code: str) -> str:
    user = links.redeem_code(home.db, code, discord_id)
    return (
        f"Linked: here you are **{user.name}**. DMs with me are your private channel; "
        "channels bound to a project are shared with the household."
    )
