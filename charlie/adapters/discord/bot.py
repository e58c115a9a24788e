"""The Discord bot: discord.py's client, wired to the core through `conversation` and
`commands`.

Everything that touches the core (SQLite, the model, the index) runs in a worker thread
with its own connection to the data home, so a slow model never stalls the gateway's
heartbeat. discord.py keeps the gateway connected (`reconnect=True`: it resumes the
session, or identifies again, after a drop) and waits out HTTP 429s by itself; what it
gives up on (`RateLimited`, for waits longer than `MAX_RATELIMIT_WAIT`, or a 429 after
its own retries) is retried here after the time Discord asked for.

A voice message (or another audio attachment) is downloaded only once its author and
channel are admitted, then heard and answered in the worker thread like a typed message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

import aiohttp
import discord
from discord import app_commands

from charlie.adapters.discord import commands, conversation
from charlie.adapters.discord.conversation import Answer, Incoming, Recording, suggestion_text
from charlie.adapters.discord.text import split
from charlie.config import Settings
from charlie.errors import CharlieError, NotFound
from charlie.home import Home, Shared
from charlie.household import discord_links as links
from charlie.household import discord_places
from charlie.household.discord_places import Place
from charlie.llm.client import LLMClient
from charlie.retrieval import suggestions
from charlie.voice.turn import Voice

log = logging.getLogger("charlie.discord")
T = TypeVar("T")

ACCEPT, DISMISS = "✅", "❌"
MAX_RATELIMIT_WAIT = 30.0  # discord.py sleeps through shorter 429s itself
SEND_ATTEMPTS = 4
LONGEST_WAIT = 300.0  # never sleep longer than this for one retry
NOT_DOWNLOADED = "⚠️ I couldn't download that recording from Discord ({error}). Send it again?"


# ---------------------------------------------------------------- sending, rate limits


def retry_after(exc: Exception) -> float | None:
    """Seconds to wait before sending again, when `exc` is a rate limit; else None."""
    if isinstance(exc, discord.RateLimited):
        return float(exc.retry_after)
    if isinstance(exc, discord.HTTPException) and exc.status == 429:
        headers = getattr(exc.response, "headers", None) or {}
        try:
            return float(headers.get("Retry-After", 1.0))
        except (TypeError, ValueError):
            return 1.0
    return None


async def send_with_retry(
    send: Callable[[], Awaitable[T]],
    *,
    attempts: int = SEND_ATTEMPTS,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """`send()`, again after the wait Discord asks for when it answers 429; other errors
    (and a rate limit that outlasts `attempts`) propagate."""
    for attempt in range(1, attempts + 1):
        try:
            return await send()
        except (discord.RateLimited, discord.HTTPException) as exc:
            wait = retry_after(exc)
            if wait is None or attempt == attempts:
                raise
            log.warning("Discord rate limit: sending again in %.2f s", wait)
            await sleep(min(max(wait, 0.0), LONGEST_WAIT))
    raise AssertionError("unreachable")


TYPING_EVERY = 8.0  # Discord shows "typing…" for about 10 seconds


async def keep_typing(channel: discord.abc.Messageable) -> None:
    """Show "Charlie is typing…" until cancelled. Failing to show it (a missing permission,
    a rate limit) never stops the answer."""
    while True:
        try:
            await channel.typing()
        except (discord.HTTPException, discord.RateLimited) as exc:
            log.warning("Could not show typing in Discord: %s", exc)
            return
        await asyncio.sleep(TYPING_EVERY)


# ---------------------------------------------------------------- where things happen


def place_of(channel: Any, guild_id: int | None) -> Place:
    """A Discord channel as plain ids: DMs have no guild; threads know their channel."""
    if guild_id is None:
        return Place(channel.id)
    parent = channel.parent_id if isinstance(channel, discord.Thread) else None
    return Place(channel.id, guild_id, parent)


def recording_of(message: discord.Message) -> discord.Attachment | None:
    """The message's first audio attachment: a voice message, or a file that is audio."""
    for attachment in message.attachments:
        voice = message.flags.voice or attachment.is_voice_message()
        if conversation.is_recording(attachment.filename, attachment.content_type, voice):
            return attachment
    return None


def incoming_from(message: discord.Message, me: discord.abc.User) -> Incoming | None:
    """The message as plain data, or None when it is not for Charlie at all (a bot, a
    system message, nothing but a mention or attachments that are not audio). A message
    with text is its text, whatever is attached; one with only a recording is heard."""
    if message.author.bot or message.author.id == me.id:
        return None
    if message.type not in (discord.MessageType.default, discord.MessageType.reply):
        return None
    text = conversation.without_mention(message.content, me.id)
    recording = None
    if not text:
        attachment = recording_of(message)
        if attachment is None:
            return None
        recording = Recording(
            filename=attachment.filename,
            size=attachment.size,
            content_type=attachment.content_type,
            voice_message=message.flags.voice or attachment.is_voice_message(),
        )
    return Incoming(
        author_id=message.author.id,
        place=place_of(message.channel, message.guild.id if message.guild else None),
        text=text,
        mentions_me=any(user.id == me.id for user in message.mentions),
        recording=recording,
    )


def interaction_place(interaction: discord.Interaction) -> Place:
    channel = interaction.channel
    if channel is None:
        return Place(interaction.channel_id or 0, interaction.guild_id)
    return place_of(channel, interaction.guild_id)


# ---------------------------------------------------------------- the client


class CharlieBot(discord.Client):
    """Charlie in Discord: DMs are private channels, bound server channels are projects."""

    def __init__(self, settings: Settings, llm: LLMClient, **options: Any) -> None:
        intents = discord.Intents.default()
        intents.message_content = True  # privileged: switched on in the developer portal
        super().__init__(
            intents=intents,
            allowed_mentions=discord.AllowedMentions.none(),  # a reply never pings anyone
            max_ratelimit_timeout=MAX_RATELIMIT_WAIT,
            **options,
        )
        self.settings = settings
        self.llm = llm
        self.shared = Shared()  # the embedding model, loaded once
        self._voice: Voice | None = None  # the speech recogniser, loaded on first use
        self.sleep: Callable[[float], Awaitable[object]] = asyncio.sleep  # rate-limit waits
        self.tree = app_commands.CommandTree(self)
        self.tree.add_command(command_group(self))

    @property
    def voice(self) -> Voice:
        """The bot's voice parts, made on the first recording and kept for the next."""
        if self._voice is None:
            self._voice = Voice(self.settings)
        return self._voice

    async def setup_hook(self) -> None:
        await self.tree.sync()

    async def send(self, send: Callable[[], Awaitable[T]]) -> T:
        return await send_with_retry(send, sleep=self.sleep)

    async def in_home(self, work: Callable[[Home], T]) -> T:
        """Run `work` in a worker thread with its own connection to the data home."""

        def run() -> T:
            home = Home.open(self.settings, shared=self.shared)
            try:
                return work(home)
            finally:
                home.close()

        return await asyncio.to_thread(run)

    # ------------------------------------------------------------ gateway events

    async def on_ready(self) -> None:
        log.info("Connected to Discord as %s, in %d server(s).", self.user, len(self.guilds))

    async def on_resumed(self) -> None:
        log.info("The Discord connection was resumed.")

    async def on_disconnect(self) -> None:
        log.warning("Disconnected from Discord; discord.py reconnects on its own.")

    async def on_message(self, message: discord.Message) -> None:
        if self.user is None:
            return
        incoming = incoming_from(message, self.user)
        if incoming is None:
            return
        if not await self.in_home(partial(conversation.addressed, incoming=incoming)):
            return
        typing = asyncio.create_task(keep_typing(message.channel))
        try:
            if incoming.recording is None:
                answer = await self.in_home(
                    partial(conversation.answer, llm=self.llm, incoming=incoming)
                )
            else:
                answer = await self.hear(message, incoming)
        finally:
            typing.cancel()
        if answer is not None:
            await self.deliver(message, answer)

    async def hear(self, message: discord.Message, incoming: Incoming) -> Answer | None:
        """The answer to a recording: its author and channel are admitted (and its size
        checked) before it is downloaded; it is heard and answered in the worker thread."""
        try:
            await self.in_home(partial(conversation.admit, incoming=incoming))
        except conversation.Refused as refused:
            return refused.answer
        attachment = recording_of(message)
        assert attachment is not None  # incoming_from found it
        try:
            data = await attachment.read()
        except (discord.HTTPException, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("Could not download a recording from Discord: %s", exc)
            return Answer([NOT_DOWNLOADED.format(error=str(exc) or type(exc).__name__)])
        return await self.in_home(
            partial(
                conversation.answer_recording,
                llm=self.llm,
                voice=self.voice,
                incoming=incoming,
                data=data,
            )
        )

    async def deliver(self, message: discord.Message, answer: Answer) -> None:
        """Send the answer's parts (the first as a reply in a server), then one message per
        suggested note with ✅ and ❌ to react with."""
        channel = message.channel
        reference = (
            None if message.guild is None else message.to_reference(fail_if_not_exists=False)
        )
        for number, part in enumerate(answer.parts):
            await self.send(
                partial(
                    channel.send,
                    part,
                    reference=reference if number == 0 else None,
                    mention_author=False,
                )
            )
        for suggestion in answer.suggestions:
            sent = await self.send(partial(channel.send, suggestion_text(suggestion)))
            await self.in_home(
                partial(
                    discord_places.remember_suggestion,
                    message_id=sent.id,
                    suggestion_id=suggestion.id,
                )
            )
            for emoji in (ACCEPT, DISMISS):
                await self.send(partial(sent.add_reaction, emoji))

    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        if self.user is None or payload.user_id == self.user.id:
            return
        decision = {ACCEPT: "accepted", DISMISS: "dismissed"}.get(str(payload.emoji))
        if decision is None:
            return
        said = await self.in_home(
            partial(
                decide,
                message_id=payload.message_id,
                discord_id=payload.user_id,
                decision=decision,
            )
        )
        if said:
            channel = self.get_partial_messageable(payload.channel_id)
            await self.send(partial(channel.send, said))

    # ------------------------------------------------------------ slash commands

    async def respond(self, interaction: discord.Interaction, work: Callable[[Home], str]) -> None:
        """Answer a slash command with `work`'s text, shown only to the person who asked."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            text = await self.in_home(work)
        except (conversation.NotLinked, discord_places.NotBound) as exc:
            text = str(exc)  # a polite answer, not a failure
        except CharlieError as exc:
            text = f"⚠️ {exc}"
        for part in split(text):
            await self.send(partial(interaction.followup.send, part, ephemeral=True))


def decide(home: Home, message_id: int, discord_id: int, decision: str) -> str | None:
    """A ✅ or ❌ on a suggested-note message, as the usage model's accept or dismiss.

    Only the person the note was suggested to can answer it, and only once; anyone else's
    reaction changes nothing.
    """
    suggestion_id = discord_places.undecided_suggestion(home, message_id)
    user = links.user_for_discord(home.db, discord_id)
    if suggestion_id is None or user is None:
        return None
    try:
        if decision == "accepted":
            note = suggestions.accept(home, user, suggestion_id)
        else:
            note = suggestions.dismiss(home, user, suggestion_id)
    except NotFound:
        return None  # suggested to someone else
    discord_places.mark_decided(home, message_id, decision)
    if decision == "accepted":
        return f"-# 📌 Pinned `{note}` into this conversation for the next answers."
    return f"-# Dismissed `{note}`: it won't be suggested to you again."


CONTEXTS = app_commands.AppCommandContext(guild=True, dm_channel=True, private_channel=False)
INSTALLS = app_commands.AppInstallationType(guild=True, user=False)


def command_group(bot: CharlieBot) -> app_commands.Group:
    """`/charlie memory|search|distill|style|link` and `/charlie project bind|unbind`."""
    group = app_commands.Group(
        name="charlie",
        description="Charlie's memory, notes and settings for this channel",
        allowed_contexts=CONTEXTS,
        allowed_installs=INSTALLS,
    )
    project = app_commands.Group(
        name="project", description="Tie this channel to a Charlie project", parent=group
    )

    def who(interaction: discord.Interaction) -> tuple[Place, int]:
        return interaction_place(interaction), interaction.user.id

    @group.command(name="memory", description="Summary, decisions and recent quotes")
    async def memory_command(interaction: discord.Interaction) -> None:
        place, user_id = who(interaction)
        await bot.respond(
            interaction, partial(commands.memory_text, place=place, discord_id=user_id)
        )

    @group.command(name="search", description="Search the notes")
    @app_commands.describe(query="What to look for")
    async def search_command(interaction: discord.Interaction, query: str) -> None:
        place, user_id = who(interaction)
        await bot.respond(
            interaction,
            partial(commands.search_text, place=place, discord_id=user_id, query=query),
        )

    @group.command(name="distill", description="Fold the conversation into memory now")
    async def distill_command(interaction: discord.Interaction) -> None:
        place, user_id = who(interaction)
        await bot.respond(
            interaction,
            partial(commands.distill_text, llm=bot.llm, place=place, discord_id=user_id),
        )

    @group.command(name="forget", description="Forget a message for good (default: your last)")
    @app_commands.describe(message="The message's id (default: your last message here)")
    async def forget_command(interaction: discord.Interaction, message: int | None = None) -> None:
        place, user_id = who(interaction)
        await bot.respond(
            interaction,
            partial(commands.forget_text, place=place, discord_id=user_id, message_id=message),
        )

    @group.command(name="style", description="Show (or set) the project's response style")
    @app_commands.describe(text="A new response style, e.g. 'Brief, practical.'")
    async def style_command(interaction: discord.Interaction, text: str | None = None) -> None:
        place, user_id = who(interaction)
        await bot.respond(
            interaction,
            partial(commands.style_text, place=place, discord_id=user_id, new_style=text),
        )

    @group.command(name="link", description="Link your Discord account with a code from the app")
    @app_commands.describe(code="The code from the app's Settings → Link Discord")
    async def link_command(interaction: discord.Interaction, code: str) -> None:
        await bot.respond(
            interaction, partial(commands.link_text, discord_id=interaction.user.id, code=code)
        )

    @project.command(name="bind", description="Make this channel a Charlie project's")
    @app_commands.describe(name="The project's name (its slug, e.g. kitchen-reno)")
    async def bind_command(interaction: discord.Interaction, name: str) -> None:
        place, user_id = who(interaction)
        await bot.respond(
            interaction, partial(commands.bind_text, place=place, discord_id=user_id, slug=name)
        )

    @project.command(name="unbind", description="Untie this channel from its project")
    async def unbind_command(interaction: discord.Interaction) -> None:
        place, user_id = who(interaction)
        await bot.respond(
            interaction, partial(commands.unbind_text, place=place, discord_id=user_id)
        )

    return group


def run(settings: Settings) -> None:
    """Run the bot until interrupted; a refused token or intent is a `CharlieError`."""
    assert settings.discord_token is not None
    token = settings.discord_token.get_secret_value().strip()
    handler = logging.StreamHandler()  # connection news on stderr; the token is never logged
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger("discord"), logging.getLogger("charlie")]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    llm = LLMClient.from_settings(settings)

    async def main() -> None:
        async with CharlieBot(settings, llm) as bot:
            await bot.start(token, reconnect=True)

    try:
        asyncio.run(main())
    except discord.LoginFailure as exc:
        raise CharlieError(
            f"Discord refused the bot token in CHARLIE_DISCORD_TOKEN ({exc}). Copy it again "
            "from the developer portal (your application → Bot → Reset Token)."
        ) from exc
    except discord.PrivilegedIntentsRequired as exc:
        raise CharlieError(
            "Discord refused to connect the bot: it needs the Message Content intent. Turn it "
            "on in the developer portal (your application → Bot → Privileged Gateway Intents)."
        ) from exc
    except (aiohttp.ClientConnectionError, TimeoutError) as exc:
        # After signing in, discord.py reconnects by itself; this is Discord never reached.
        raise CharlieError(
            f"Cannot reach Discord ({exc}). Check this machine's internet connection (and "
            "any proxy or firewall), then start the bot again."
        ) from exc
    except KeyboardInterrupt:
        log.info("Stopped.")
    finally:
        llm.close()
        for logger in loggers:
            logger.removeHandler(handler)
