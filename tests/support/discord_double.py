"""Test doubles for the Discord network (not reachable here), with the payloads and ids the
Discord tests share:

- `DiscordHttpDouble` is discord.py's own `HTTPClient` with only `request` replaced: every
  REST call the library makes (send a message, show typing, add a reaction) arrives with
  the route and JSON body discord.py built, is recorded, and is answered with the payload
  Discord would send — or fails with a scripted discord.py exception (rate limits).
- `InteractionAdapterDouble` replaces discord.py's webhook adapter, the seam
  (`discord.webhook.async_.async_context`) through which the library answers slash
  commands and sends their follow-ups; it records the payloads the same way.
- `ResponseDouble` is what discord.py's HTTPException reads from an aiohttp response.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import discord
from discord.http import HTTPClient, Route
from discord.webhook.async_ import async_context

from charlie.adapters.discord.bot import CharlieBot
from charlie.config import load_settings
from charlie.home import Home
from charlie.llm.client import LLMClient
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


def bind_kitchen(household: Home, slug: str = "auth") -> None:
    from charlie.household import discord_places

    alice = ensure_user(household.db, "alice")
    discord_places.bind(household, discord_places.Place(KITCHEN, GUILD_ID), slug, alice)


def messages_in(home: Home) -> list[tuple[str, str, int]]:
    rows = home.db.execute("SELECT role, content, private FROM messages ORDER BY id")
    return [(r[0], r[1], r[2]) for r in rows]


class ResponseDouble:
    """Test double: what discord.py's HTTPException reads from an aiohttp response."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.reason = {429: "Too Many Requests", 403: "Forbidden"}.get(status, "Error")
        self.headers = headers or {}
