"""The Discord bot, driven with discord.py's own objects: `discord.Message`, `discord.Interaction`
and `discord.RawReactionActionEvent` built from gateway payloads, handled by the real
`CharlieBot`, the real core, real SQLite and the scripted LLM server on loopback.

The Discord network, which is not reachable here, is played by the test doubles in
`tests/support/discord_double.py` (discord.py's own HTTP client and webhook adapter, with
only the network call replaced).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from datetime import date
from typing import Any

import discord
import pytest
from llm_double import ScriptedLLMServer
from support.discord_double import (
    ALICE_ID,
    BOB_ID,
    BOT,
    BOT_ID,
    DM_ALICE,
    DM_STRANGER,
    GUILD_ID,
    KITCHEN,
    LOBBY,
    MESSAGES,
    STRANGER_ID,
    THREAD,
    Harness,
    ResponseDouble,
    bind_kitchen,
    message_payload,
    messages_in,
    play,
)

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
    from charlie.household import discord_places

    bind_kitchen(household)
    server = discord_places.Place(KITCHEN, GUILD_ID)
    dm = discord_places.Place(KITCHEN)  # a DM whose id collides with the bound channel's
    alice = ensure_user(household.db, "alice")
    assert discord_places.channel_for(household, server, alice).project is not None
    private = discord_places.channel_for(household, dm, alice)
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
        assert again == (
            "🧠 There are no new messages to distill in project auth: its memory is up to date."
        )

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
