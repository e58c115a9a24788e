"""The Discord bot, driven with discord.py's own objects: `discord.Message`, `discord.Interaction`
and `discord.RawReactionActionEvent` built from gateway payloads, handled by the real
`CharlieBot`, the real core, real SQLite and the scripted LLM server on loopback.

Two test doubles stand in for the Discord network, which is not reachable here:

- `DiscordHttpDouble` is discord.py's own `HTTPClient` with only `request` replaced: every
  REST call the library makes (send a message, show typing, add a reaction) arrives with
  the route and JSON body discord.py built, is recorded, and is answered with the payload
  Discord would send — or fails with a scripted discord.py exception (rate limits).
- `InteractionAdapterDouble` replaces discord.py's webhook adapter, the seam
  (`discord.webhook.async_.async_context`) through which the library answers slash
  commands and sends their follow-ups; it records the payloads the same way.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

import discord
import pytest
from discord.http import HTTPClient, Route
from discord.webhook.async_ import async_context
from llm_double import ScriptedLLMServer

from charlie import conversations, projects
from charlie.adapters.discord.bot import CharlieBot, send_with_retry
from charlie.adapters.discord.text import LIMIT, length
from charlie.config import load_settings
from charlie.conversations import private_channel
from charlie.home import Home
from charlie.household import discord_links as links
from charlie.llm.client import LLMClient
from charlie.memory import layers as memory
from charlie.memory.layers import Memory
from charlie.notes import files as notes
from charlie.trace import Called
from charlie.users import ensure_user

BOT_ID = 100000000000000001
ALICE_ID = 200000000000000002
BOB_ID = 300000000000000003
STRANGER_ID = 400000000000000004
GUILD_ID = 500000000000000005
KITCHEN = 600000000000000006  # a server channel, bound to a project in most tests
LOBBY = 600000000000000007  # a server channel bound to nothing
THREAD = 700000000000000008  # a thread in KITCHEN
DM_ALICE = 800000000000000009
DM_BOB = 800000000000000010
DM_STRANGER = 800000000000000011
WHEN = "2026-01-01T00:00:00+00:00"
MESSAGES = "/channels/{channel_id}/messages"  # the REST route that sends a message
EPHEMERAL = 64


def user_payload(user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(user_id),
        "username": name,
        "discriminator": "0",
        "avatar": None,
        "global_name": name.title(),
        "bot": bot,
    }


BOT = user_payload(BOT_ID, "charlie", bot=True)
PEOPLE = {
    ALICE_ID: user_payload(ALICE_ID, "alice"),
    BOB_ID: user_payload(BOB_ID, "bob"),
    STRANGER_ID: user_payload(STRANGER_ID, "stranger"),
}
DMS = {ALICE_ID: DM_ALICE, BOB_ID: DM_BOB, STRANGER_ID: DM_STRANGER}


def message_payload(
    message_id: int,
    channel_id: int,
    author: dict[str, Any],
    content: str,
    *,
    mentions: list[dict[str, Any]] | None = None,
    guild_id: int | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": str(message_id),
        "channel_id": str(channel_id),
        "type": 0,
        "content": content,
        "author": author,
        "attachments": [],
        "embeds": [],
        "mentions": mentions or [],
        "mention_roles": [],
        "pinned": False,
        "tts": False,
        "mention_everyone": False,
        "timestamp": WHEN,
        "edited_timestamp": None,
        "flags": 0,
    }
    if guild_id is not None:
        data["guild_id"] = str(guild_id)
    return data


GUILD = {
    "id": str(GUILD_ID),
    "name": "Our house",
    "roles": [],
    "emojis": [],
    "features": [],
    "member_count": 3,
    "channels": [
        {"id": str(KITCHEN), "type": 0, "name": "kitchen", "position": 0},
        {"id": str(LOBBY), "type": 0, "name": "lobby", "position": 1},
    ],
    "threads": [
        {
            "id": str(THREAD),
            "type": 11,
            "guild_id": str(GUILD_ID),
            "parent_id": str(KITCHEN),
            "owner_id": str(ALICE_ID),
            "name": "worktops",
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": WHEN,
                "locked": False,
            },
        }
    ],
}


# ---------------------------------------------------------------- test doubles


@dataclass
class Recorded:
    method: str
    path: str
    url: str
    channel_id: int | None
    body: Any
    refused: bool = False  # answered with a scripted failure


class DiscordHttpDouble(HTTPClient):
    """Test double: discord.py's REST client, recording instead of calling Discord."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.requests: list[Recorded] = []
        self.failures: dict[str, deque[BaseException]] = {}
        self._ids = itertools.count(900000000000000001)

    def fail_next(self, path: str, *errors: BaseException) -> None:
        """The next requests to `path` (a route such as MESSAGES) raise `errors`, in order."""
        self.failures.setdefault(path, deque()).extend(errors)

    async def request(self, route: Route, **kwargs: Any) -> Any:
        channel = int(route.channel_id) if route.channel_id is not None else None
        failures = self.failures.get(route.path)
        recorded = Recorded(route.method, route.path, route.url, channel, kwargs.get("json"))
        self.requests.append(recorded)
        if failures:
            recorded.refused = True
            raise failures.popleft()
        if route.method == "POST" and route.path == MESSAGES:
            body = kwargs["json"]
            sent = message_payload(next(self._ids), channel or 0, BOT, body.get("content", ""))
            return sent
        return None

    def sent(self, channel_id: int | None = None) -> list[dict[str, Any]]:
        return [
            r.body
            for r in self.requests
            if r.method == "POST"
            and r.path == MESSAGES
            and not r.refused
            and (channel_id is None or r.channel_id == channel_id)
        ]

    def texts(self, channel_id: int | None = None) -> list[str]:
        return [body["content"] for body in self.sent(channel_id)]


class InteractionAdapterDouble:
    """Test double: discord.py's webhook adapter, recording slash-command responses."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def create_interaction_response(
        self, interaction_id: int, token: str, *, params: Any, **_: Any
    ) -> dict[str, Any]:
        self.calls.append(("response", params.payload))
        return {"interaction": {"id": str(interaction_id), "type": 2}}

    async def execute_webhook(
        self, webhook_id: int, token: str, *, payload: dict[str, Any], **_: Any
    ) -> dict[str, Any]:
        self.calls.append(("followup", payload))
        return message_payload(999, KITCHEN, BOT, payload.get("content", ""))

    def followups(self) -> list[dict[str, Any]]:
        return [payload for kind, payload in self.calls if kind == "followup"]

    def text(self) -> str:
        return "\n".join(p["content"] for p in self.followups())


class Harness:
    """The real bot, with discord.py's state holding the two doubles above."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.llm = LLMClient.from_settings(load_settings())
        self.bot = CharlieBot(load_settings(), self.llm)
        self.http = DiscordHttpDouble(loop)
        self.bot.http = self.http
        self.state = state = self.bot._connection
        state.http = self.http
        state.loop = loop
        state.user = discord.ClientUser(state=state, data=BOT)  # type: ignore[arg-type]
        self.guild = discord.Guild(data=GUILD, state=state)  # type: ignore[arg-type]
        state._add_guild(self.guild)
        self.adapter = InteractionAdapterDouble()
        async_context.set(self.adapter)  # type: ignore[arg-type]
        self._ids = itertools.count(1000000000000000001)

    def dm(self, author_id: int, text: str) -> discord.Message:
        person = PEOPLE[author_id]
        channel = discord.DMChannel(
            me=self.state.user,  # type: ignore[arg-type]
            state=self.state,
            data={"id": str(DMS[author_id]), "type": 1, "recipients": [person]},  # type: ignore[typeddict-item]
        )
        data = message_payload(next(self._ids), DMS[author_id], person, text)
        return discord.Message(state=self.state, channel=channel, data=data)  # type: ignore[arg-type]

    def said(
        self, channel_id: int, author_id: int, text: str, *, mention: bool = False
    ) -> discord.Message:
        channel = self.guild.get_channel_or_thread(channel_id)
        assert channel is not None
        content = f"<@{BOT_ID}> {text}" if mention else text
        data = message_payload(
            next(self._ids),
            channel_id,
            PEOPLE[author_id],
            content,
            mentions=[BOT] if mention else [],
            guild_id=GUILD_ID,
        )
        return discord.Message(state=self.state, channel=channel, data=data)  # type: ignore[arg-type]

    def interaction(
        self, author_id: int, where: int | None, path: list[str], **options: str
    ) -> discord.Interaction:
        """A `/charlie …` slash command, as the gateway delivers it. `where`: a server
        channel or thread; None for the person's DM with the bot."""
        leaf: dict[str, Any] = {
            "name": path[-1],
            "type": 1,
            "options": [{"name": k, "type": 3, "value": v} for k, v in options.items()],
        }
        for name in reversed(path[:-1]):
            leaf = {"name": name, "type": 2, "options": [leaf]}
        payload: dict[str, Any] = {
            "id": str(next(self._ids)),
            "application_id": str(BOT_ID),
            "type": 2,
            "token": "interaction-token",
            "version": 1,
            "locale": "en-US",
            "attachment_size_limit": 8_000_000,
            "app_permissions": "0",
            "data": {"id": "1", "name": "charlie", "type": 1, "options": [leaf]},
        }
        if where is None:
            payload["channel"] = {"id": str(DMS[author_id]), "type": 1}
            payload["channel_id"] = str(DMS[author_id])
            payload["user"] = PEOPLE[author_id]
        else:
            channel = self.guild.get_channel_or_thread(where)
            assert channel is not None
            payload["guild_id"] = str(GUILD_ID)
            payload["channel"] = {"id": str(where), "type": channel.type.value}
            payload["channel_id"] = str(where)
            payload["member"] = {
                "user": PEOPLE[author_id],
                "roles": [],
                "joined_at": WHEN,
                "deaf": False,
                "mute": False,
                "flags": 0,
                "permissions": "0",
            }
        return discord.Interaction(data=payload, state=self.state)  # type: ignore[arg-type]

    async def command(
        self, author_id: int, where: int | None, path: list[str], **options: str
    ) -> str:
        """Run a slash command through discord.py's command tree; the text it answered."""
        before = len(self.adapter.followups())
        await self.bot.tree._call(self.interaction(author_id, where, path, **options))  # type: ignore[arg-type]
        new = self.adapter.followups()[before:]
        assert new, "the command answered nothing"
        assert all(p.get("flags") == EPHEMERAL for p in new)  # only the asker sees it
        return "\n".join(p["content"] for p in new)

    def reaction(
        self, user_id: int, message_id: int, emoji: str, channel_id: int = KITCHEN
    ) -> discord.RawReactionActionEvent:
        data = {
            "message_id": str(message_id),
            "channel_id": str(channel_id),
            "user_id": str(user_id),
            "guild_id": str(GUILD_ID),
            "type": 0,
        }
        return discord.RawReactionActionEvent(
            data,  # type: ignore[arg-type]
            discord.PartialEmoji(name=emoji),
            "REACTION_ADD",
        )


def play(scenario: Callable[[Harness], Awaitable[None]]) -> None:
    async def main() -> None:
        harness = Harness(asyncio.get_running_loop())
        try:
            await scenario(harness)
        finally:
            harness.llm.close()

    asyncio.run(main())


@pytest.fixture
def household(home: Home) -> Home:
    """alice and bob, linked to their Discord accounts; a stranger who is not."""
    for name, discord_id in (("alice", ALICE_ID), ("bob", BOB_ID)):
        ensure_user(home.db, name)
        links.link_discord(home.db, name, discord_id)
    return home


@pytest.fixture
def auth(household: Home) -> projects.Project:
    made = projects.create_project(household, "Auth")
    notes.create_note(made, "JWT refresh tokens", "We rotate the refresh_token on every use.")
    notes.create_note(made, "Password storage", "Hash passwords with argon2id.")
    notes.create_note(made, "Session cookies", "Cookies are HttpOnly and SameSite=Lax.")
    return made


def bind_kitchen(household: Home, slug: str = "auth") -> None:
    from charlie.adapters.discord import store

    alice = ensure_user(household.db, "alice")
    store.bind(household, store.Place(KITCHEN, GUILD_ID), slug, alice)


def messages_in(home: Home) -> list[tuple[str, str, int]]:
    rows = home.db.execute("SELECT role, content, private FROM messages ORDER BY id")
    return [(r[0], r[1], r[2]) for r in rows]


# ---------------------------------------------------------------- who is speaking, where


def test_an_unlinked_person_is_refused_politely_and_nothing_is_kept(
    household: Home, llm: ScriptedLLMServer
) -> None:
    async def scenario(h: Harness) -> None:
        await h.bot.on_message(h.dm(STRANGER_ID, "What did alice decide?"))
        (text,) = h.http.texts(DM_STRANGER)
        assert "I don't know who you are in this household" in text
        assert f"charlie users link-discord NAME {STRANGER_ID}" in text
        assert "/charlie link CODE" in text
        answer = await h.command(STRANGER_ID, None, ["memory"])
        assert answer.startswith("Hi! I don't know who you are")

    play(scenario)
    assert messages_in(household) == []
    assert llm.requests == []


def test_a_dm_is_the_linked_persons_private_channel(
    household: Home, llm: ScriptedLLMServer, charlie_home: Any
) -> None:
    llm.reply("Noted — just between us.")

    async def scenario(h: Harness) -> None:
        await h.bot.on_message(h.dm(ALICE_ID, "I'm planning a surprise party for bob."))
        kinds = [(r.method, r.path) for r in h.http.requests]
        assert kinds == [
            ("POST", "/channels/{channel_id}/typing"),  # typing while Charlie thinks
            ("POST", "/channels/{channel_id}/messages"),
        ]
        (sent,) = h.http.sent(DM_ALICE)
        assert sent["content"] == "Noted — just between us."
        assert "message_reference" not in sent  # a DM needs no reply marker
        assert sent["allowed_mentions"] == {"parse": [], "replied_user": False}

    play(scenario)
    alice = ensure_user(household.db, "alice")
    stored = conversations.recent(household, private_channel(household, alice), 10)
    assert [(m.role, m.content) for m in stored] == [
        ("user", "I'm planning a surprise party for bob."),
        ("assistant", "Noted — just between us."),
    ]
    assert all(private for _, _, private in messages_in(household))
    assert "alice's private channel" in llm.requests[0]["messages"][0]["content"]
    assert list((charlie_home / "projects").iterdir()) == []  # no file written anywhere


def test_an_answer_arrives_even_when_typing_cannot_be_shown(
    household: Home, llm: ScriptedLLMServer
) -> None:
    llm.reply("Still here.")

    async def scenario(h: Harness) -> None:
        refused = discord.Forbidden(ResponseDouble(403), {"message": "Missing Access"})  # type: ignore[arg-type]
        h.http.fail_next("/channels/{channel_id}/typing", refused)
        await h.bot.on_message(h.dm(ALICE_ID, "Hello?"))
        assert h.http.texts(DM_ALICE) == ["Still here."]

    play(scenario)


def test_a_bound_channel_talks_to_its_project_with_a_compact_trace(
    household: Home, auth: projects.Project, llm: ScriptedLLMServer
) -> None:
    llm.tool_calls([("search_notes", {"query": "JWT refresh"})])
    llm.reply("We rotate the refresh token on every use.")

    async def scenario(h: Harness) -> None:
        bound = await h.command(ALICE_ID, KITCHEN, ["project", "bind"], name="auth")
        assert "This channel is now project **Auth** (`auth`)" in bound
        message = h.said(KITCHEN, BOB_ID, "What did we decide about refresh tokens?")
        await h.bot.on_message(message)
        sent = h.http.sent(KITCHEN)[0]
        lines = sent["content"].splitlines()
        assert lines[0].startswith("-# searched notes for 'JWT refresh' → ")
        assert lines[0].endswith(" notes")
        assert lines[-1] == "We rotate the refresh token on every use."
        assert sent["message_reference"]["message_id"] == message.id  # a reply to bob
        assert sent["message_reference"]["fail_if_not_exists"] is False

    play(scenario)
    channel = conversations.shared_channel(household, auth)
    stored = conversations.recent(household, channel, 2)
    assert [m.speaker for m in stored] == ["bob", "Charlie"]
    assert stored[1].trace is not None
    step = stored[1].trace[1]
    assert isinstance(step, Called) and step.name == "search_notes"
    assert step.hits and step.count == len(step.hits)


def test_a_thread_follows_its_channels_project(
    household: Home, auth: projects.Project, llm: ScriptedLLMServer
) -> None:
    bind_kitchen(household)
    llm.reply("Marble stains; oak needs oil.")

    async def scenario(h: Harness) -> None:
        await h.bot.on_message(h.said(THREAD, ALICE_ID, "Oak or marble?"))
        assert h.http.texts(THREAD) == ["Marble stains; oak needs oil."]

    play(scenario)
    stored = conversations.recent(household, conversations.shared_channel(household, auth), 1)
    assert stored[0].content == "Marble stains; oak needs oil."


def test_an_unbound_channel_is_left_alone_unless_charlie_is_mentioned(
    household: Home, llm: ScriptedLLMServer
) -> None:
    async def scenario(h: Harness) -> None:
        await h.bot.on_message(h.said(LOBBY, ALICE_ID, "lunch anyone?"))
        assert h.http.requests == []  # not even typing
        await h.bot.on_message(h.said(LOBBY, ALICE_ID, "can you help?", mention=True))
        (text,) = h.http.texts(LOBBY)
        assert text.startswith("This channel isn't tied to a Charlie project yet.")
        assert "/charlie project bind NAME" in text

    play(scenario)
    assert messages_in(household) == [] and llm.requests == []


def test_bots_system_messages_and_empty_messages_are_ignored(
    household: Home, llm: ScriptedLLMServer
) -> None:
    async def scenario(h: Harness) -> None:
        own = discord.Message(
            state=h.state,
            channel=h.guild.get_channel(KITCHEN),  # type: ignore[arg-type]
            data=message_payload(1, KITCHEN, BOT, "my own words", guild_id=GUILD_ID),  # type: ignore[arg-type]
        )
        await h.bot.on_message(own)
        await h.bot.on_message(h.dm(ALICE_ID, f"<@{BOT_ID}>   "))  # nothing but a mention
        assert h.http.requests == []

    play(scenario)
    assert messages_in(household) == []


# ---------------------------------------------------------------- privacy


def test_a_server_message_can_never_read_a_dms_memory(
    household: Home, auth: projects.Project, llm: ScriptedLLMServer
) -> None:
    alice = ensure_user(household.db, "alice")
    secret = "Surprise party for bob on the 14th"
    memory.save(household, private_channel(household, alice), Memory(summary=secret), "edit")
    bind_kitchen(household)
    llm.reply("Sure.")  # the DM
    llm.tool_calls([("read_memory", {"layer": "all"})])  # the server message
    llm.tool_calls([("search_conversation", {"query": "party"})])
    llm.reply("Nothing about a party here.")

    async def scenario(h: Harness) -> None:
        await h.bot.on_message(h.dm(ALICE_ID, "Remember: the party is a secret."))
        await h.bot.on_message(h.said(KITCHEN, ALICE_ID, "Any plans for the 14th? party?"))
        assert h.http.texts(KITCHEN)[0].endswith("Nothing about a party here.")
        shown = await h.command(ALICE_ID, KITCHEN, ["memory"])
        assert shown.startswith("## Auth — memory")
        own = await h.command(ALICE_ID, None, ["memory"])
        assert secret in own  # alice sees it in her own DM
        bobs = await h.command(BOB_ID, None, ["memory"])
        assert secret not in bobs and bobs.startswith("## Your private channel — memory")
        for text in (shown, bobs, *h.http.texts(KITCHEN)):
            assert secret not in text and "the party is a secret" not in text

    play(scenario)
    server_requests = llm.requests[1:]
    assert len(server_requests) == 3
    for request in server_requests:
        sent = json.dumps(request["messages"])
        assert secret not in sent and "the party is a secret" not in sent


def test_a_guild_channel_with_the_same_id_as_a_dm_is_still_not_private(
    household: Home, auth: projects.Project, llm: ScriptedLLMServer
) -> None:
    from charlie.adapters.discord import conversation, store

    bind_kitchen(household)
    server = store.Place(KITCHEN, GUILD_ID)
    dm = store.Place(KITCHEN)  # a DM whose id collides with the bound channel's
    alice = ensure_user(household.db, "alice")
    assert conversation.channel_for(household, server, alice).project is not None
    private = conversation.channel_for(household, dm, alice)
    assert private.private and private.owner == alice and private.project is None


# ---------------------------------------------------------------- replies


def test_a_long_reply_is_split_with_its_code_block_kept_whole(
    household: Home, llm: ScriptedLLMServer
) -> None:
    code = "```python\n" + "\n".join(f"step_{n} = {n}" for n in range(60)) + "\n```"
    plan = " ".join(f"Step {n} of the plan." for n in range(100))  # a repeat would be cut
    reply = plan + "\n\n" + code + "\n\n" + " ".join(f"Done {n}." for n in range(300))
    llm.reply(reply, chunk_size=200)

    async def scenario(h: Harness) -> None:
        message = h.dm(ALICE_ID, "Write me the script")
        await h.bot.on_message(message)
        parts = h.http.texts(DM_ALICE)
        assert len(parts) >= 3
        assert all(length(p) <= LIMIT for p in parts)
        assert sum(code in p for p in parts) == 1
        assert all(p.count("```") % 2 == 0 for p in parts)

    play(scenario)


def test_when_the_model_is_down_the_message_is_kept_and_charlie_says_so(
    household: Home, dead_url: str
) -> None:
    async def scenario(h: Harness) -> None:
        await h.bot.on_message(h.dm(ALICE_ID, "Are you there?"))
        (text,) = h.http.texts(DM_ALICE)
        assert text.startswith("⚠️ Charlie's language model could not answer.")
        assert dead_url in text and "Your message is saved" in text

    play(scenario)
    assert messages_in(household) == [("user", "Are you there?", 1)]


# ---------------------------------------------------------------- suggested notes


def test_reactions_on_suggested_notes_feed_the_usage_model(
    household: Home, auth: projects.Project, llm: ScriptedLLMServer
) -> None:
    bind_kitchen(household)
    llm.reply("Cookies should be HttpOnly.")

    def usage() -> list[tuple[str, str, str]]:
        rows = household.db.execute(
            "SELECT u.name, e.kind, e.note FROM usage_events e JOIN users u ON u.id = e.user_id "
            "WHERE e.kind IN ('accepted', 'dismissed') ORDER BY e.id"
        )
        return [(r[0], r[1], r[2]) for r in rows]

    async def scenario(h: Harness) -> None:
        await h.bot.on_message(
            h.said(KITCHEN, ALICE_ID, "How should session cookies and passwords work?")
        )
        offers = [r for r in h.http.sent(KITCHEN) if r["content"].startswith("📎 Related note")]
        assert 1 <= len(offers) <= 3
        assert "React ✅ to pin it" in offers[0]["content"]
        reacted = [r.url.rsplit("/", 2)[-2] for r in h.http.requests if "reactions" in r.path]
        assert reacted == ["%E2%9C%85", "%E2%9D%8C"] * len(offers)  # ✅ ❌ on each offer
        posted = [r for r in h.http.requests if r.path == MESSAGES]
        ids = [int(r.url.split("/")[-4]) for r in h.http.requests if "reactions" in r.path]
        first_offer = ids[0]
        assert len(posted) == 1 + len(offers)

        await h.bot.on_raw_reaction_add(h.reaction(BOT_ID, first_offer, "✅"))  # its own
        await h.bot.on_raw_reaction_add(h.reaction(BOB_ID, first_offer, "✅"))  # not bob's
        await h.bot.on_raw_reaction_add(h.reaction(STRANGER_ID, first_offer, "✅"))
        await h.bot.on_raw_reaction_add(h.reaction(ALICE_ID, first_offer, "👍"))
        assert usage() == []
        await h.bot.on_raw_reaction_add(h.reaction(ALICE_ID, first_offer, "✅"))
        assert h.http.texts(KITCHEN)[-1].startswith("-# 📌 Pinned `auth/")
        await h.bot.on_raw_reaction_add(h.reaction(ALICE_ID, first_offer, "❌"))  # too late
        accepted = usage()
        assert len(accepted) == 1 and accepted[0][:2] == ("alice", "accepted")
        pins = household.db.execute("SELECT note FROM pins").fetchall()
        assert [p[0] for p in pins] == [accepted[0][2]]
        if len(offers) > 1:
            await h.bot.on_raw_reaction_add(h.reaction(ALICE_ID, ids[2], "❌"))
            assert usage()[-1][:2] == ("alice", "dismissed")
            assert "won't be suggested to you again" in h.http.texts(KITCHEN)[-1]

    play(scenario)


# ---------------------------------------------------------------- slash commands


def test_the_commands_discord_is_told_about() -> None:
    bot = CharlieBot(load_settings(), LLMClient("http://127.0.0.1:9/v1", "m"))
    (group,) = bot.tree.get_commands()
    described = group.to_dict(bot.tree)
    names = {o["name"]: o for o in described["options"]}
    assert set(names) == {"memory", "search", "distill", "forget", "style", "link", "project"}
    assert [o["name"] for o in names["project"]["options"]] == ["bind", "unbind"]
    assert names["search"]["options"][0] == {
        "name": "query",
        "description": "What to look for",
        "type": 3,
        "required": True,
    }
    assert described["contexts"] == [0, 1]  # servers and DMs with the bot, not group DMs
    assert described["integration_types"] == [0]  # installed to a server, not to a user
    bot.llm.close()


def test_memory_search_style_and_unbind(
    household: Home, auth: projects.Project, llm: ScriptedLLMServer
) -> None:
    bind_kitchen(household)
    channel = conversations.shared_channel(household, auth)
    memory.save(
        household,
        channel,
        Memory("Securing logins.", ["Rotate refresh tokens"], [memory.Quote("bob", "Yes.")]),
        "edit",
    )

    async def scenario(h: Harness) -> None:
        shown = await h.command(BOB_ID, KITCHEN, ["memory"])
        assert shown.splitlines() == [
            "## Auth — memory",
            "**Summary**",
            "Securing logins.",
            "",
            "**Decisions**",
            f"- Rotate refresh tokens _(since {date.today().isoformat()} · by hand)_",
            "",
            "**Recent quotes**",
            '> bob: "Yes."',
        ]
        found = await h.command(BOB_ID, KITCHEN, ["search"], query="refresh_token")
        assert found.startswith("Notes in auth for 'refresh_token':")
        assert "1. **JWT refresh tokens** (`auth/jwt-refresh-tokens`)" in found
        assert await h.command(BOB_ID, KITCHEN, ["style"]) == (
            "Auth has no response style yet; set one with `/charlie style text:…`."
        )
        assert await h.command(BOB_ID, THREAD, ["style"], text="Brief, practical.") == (
            "Response style of Auth is now: Brief, practical."
        )
        private_style = await h.command(BOB_ID, None, ["style"])
        assert private_style.startswith("⚠️ Your private channel has no response style")
        unbound = await h.command(ALICE_ID, KITCHEN, ["project", "unbind"])
        assert unbound == "This channel is no longer tied to `auth`."
        after = await h.command(ALICE_ID, KITCHEN, ["memory"])
        assert after.startswith("This channel isn't tied to a Charlie project yet.")
        missing = await h.command(ALICE_ID, KITCHEN, ["project", "bind"], name="attic")
        assert missing.startswith("⚠️ There is no project 'attic'.")
        in_dm = await h.command(ALICE_ID, None, ["project", "bind"], name="auth")
        assert in_dm.startswith("⚠️ A DM is always your private channel")
        # Every command was first deferred, privately, while the work ran.
        responses = [p for kind, p in h.adapter.calls if kind == "response"]
        assert responses and all(p == {"type": 5, "data": {"flags": 64}} for p in responses)

    play(scenario)
    assert projects.get_project(household, "auth").config.style == "Brief, practical."


def test_distill_now(household: Home, auth: projects.Project, llm: ScriptedLLMServer) -> None:
    bind_kitchen(household)
    llm.reply("Oak it is.")
    llm.reply(
        json.dumps(
            {
                "summary": "Choosing worktops.",
                "decisions": ["Oak worktops"],
                "quotes": [{"speaker": "alice", "text": "Oak worktops, final answer."}],
            }
        )
    )

    async def scenario(h: Harness) -> None:
        await h.bot.on_message(h.said(KITCHEN, ALICE_ID, "Oak worktops, final answer."))
        said = await h.command(ALICE_ID, KITCHEN, ["distill"])
        assert said.startswith("🧠 Memory of Auth updated from messages ")
        assert said.endswith(": 1 decisions, 1 quotes.")
        again = await h.command(ALICE_ID, KITCHEN, ["distill"])
        assert again == "⚠️ There are no new messages to distill in project auth."

    play(scenario)
    assert memory.load(household, conversations.shared_channel(household, auth)).texts == [
        "Oak worktops"
    ]


def test_linking_with_a_code_from_the_app(household: Home, llm: ScriptedLLMServer) -> None:
    carol = ensure_user(household.db, "carol")
    code = links.new_code(household.db, carol).code
    llm.reply("Hello carol.")

    async def scenario(h: Harness) -> None:
        wrong = await h.command(STRANGER_ID, None, ["link"], code="ZZZZ-ZZZZ")
        assert wrong.startswith("⚠️ That code is wrong or has expired.")
        linked = await h.command(STRANGER_ID, None, ["link"], code=code)
        assert linked.startswith("Linked: here you are **carol**.")
        await h.bot.on_message(h.dm(STRANGER_ID, "Hi, it's me"))
        assert h.http.texts(DM_STRANGER) == ["Hello carol."]

    play(scenario)
    assert "carol's private channel" in llm.requests[0]["messages"][0]["content"]


# ---------------------------------------------------------------- rate limits


class ResponseDouble:
    """Test double: what discord.py's HTTPException reads from an aiohttp response."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.reason = {429: "Too Many Requests", 403: "Forbidden"}.get(status, "Error")
        self.headers = headers or {}


def test_a_rate_limited_send_is_sent_again_after_the_wait_discord_asked_for() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def scenario() -> None:
        attempts: list[int] = []
        failures: deque[BaseException] = deque(
            [
                discord.RateLimited(42.5),
                discord.HTTPException(
                    ResponseDouble(429, {"Retry-After": "1.5"}),  # type: ignore[arg-type]
                    {"message": "You are being rate limited.", "code": 0},
                ),
            ]
        )

        async def send() -> str:
            attempts.append(1)
            if failures:
                raise failures.popleft()
            return "sent"

        assert await send_with_retry(send, sleep=sleep) == "sent"
        assert len(attempts) == 3 and waits == [42.5, 1.5]

        forbidden = discord.Forbidden(ResponseDouble(403), {"message": "Missing Access"})  # type: ignore[arg-type]

        async def refused() -> str:
            raise forbidden

        with pytest.raises(discord.Forbidden):
            await send_with_retry(refused, sleep=sleep)
        assert waits == [42.5, 1.5]  # a refusal is not retried

        async def always_limited() -> str:
            raise discord.RateLimited(2.0)

        with pytest.raises(discord.RateLimited):
            await send_with_retry(always_limited, attempts=3, sleep=sleep)
        assert waits == [42.5, 1.5, 2.0, 2.0]

    asyncio.run(scenario())


def test_a_reply_still_arrives_when_discord_rate_limits_it(
    household: Home, llm: ScriptedLLMServer
) -> None:
    llm.reply("Here you are.")
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def scenario(h: Harness) -> None:
        h.bot.sleep = sleep
        # Typing goes through; the reply is refused twice (a wait longer than discord.py
        # sleeps through by itself), then sent.
        h.http.fail_next(MESSAGES, discord.RateLimited(35.0), discord.RateLimited(31.0))
        await h.bot.on_message(h.dm(ALICE_ID, "Quick question"))
        assert waits == [35.0, 31.0]
        assert h.http.texts(DM_ALICE) == ["Here you are."]
        posts = [r for r in h.http.requests if r.path == MESSAGES]
        assert len(posts) == 3

    play(scenario)
