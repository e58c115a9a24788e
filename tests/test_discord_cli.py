"""`charlie discord`: its errors, and discord.py's real HTTP client against a loopback stand-in
for Discord's REST API (a sign-in refused, HTTP 429 rate limits).

`DiscordRestDouble` is a test double: a standard-library HTTP server on 127.0.0.1 that answers
the few REST routes used here in Discord's wire format (JSON bodies, the `Via` header
discord.py expects on a genuine 429). discord.py is pointed at it by its own `Route.BASE`.
The gateway (websocket) is not reached: nothing here connects a bot to Discord.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import Cli
from discord.http import Route

from charlie.adapters.discord.bot import MAX_RATELIMIT_WAIT, CharlieBot, send_with_retry
from charlie.config import load_settings
from charlie.llm.client import LLMClient

GOOD_TOKEN = "good.bot.token"
BOT_USER = {
    "id": "100000000000000001",
    "username": "charlie",
    "discriminator": "0",
    "avatar": None,
    "bot": True,
    "global_name": None,
}


class DiscordRestDouble:
    """Test double: Discord's REST API on loopback, scripted per test."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.message_answers: deque[tuple[int, dict[str, Any]]] = deque()
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: Any, headers: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                double.requests.append(("GET", self.path, None))
                if self.path == "/api/v10/users/@me":
                    if self.headers.get("Authorization") == f"Bot {GOOD_TOKEN}":
                        self._answer(200, BOT_USER, {})
                    else:
                        self._answer(401, {"message": "401: Unauthorized", "code": 0}, {})
                    return
                self._answer(404, {"message": "Unknown", "code": 0}, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"null")
                double.requests.append(("POST", self.path, body))
                if double.message_answers:
                    status, answer = double.message_answers.popleft()
                    self._answer(status, answer, {"Via": "1.1 google"} if status == 429 else {})
                    return
                channel = self.path.split("/")[-2]
                self._answer(200, message(channel, body.get("content", "")), {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/api/v10"

    def rate_limit_next(self, retry_after: float) -> None:
        self.message_answers.append(
            (429, {"message": "You are being rate limited.", "retry_after": retry_after})
        )

    def posts(self) -> list[Any]:
        return [body for method, _, body in self.requests if method == "POST"]


def message(channel_id: str, content: str) -> dict[str, Any]:
    return {
        "id": "900000000000000001",
        "channel_id": channel_id,
        "type": 0,
        "content": content,
        "author": BOT_USER,
        "attachments": [],
        "embeds": [],
        "mentions": [],
        "mention_roles": [],
        "pinned": False,
        "tts": False,
        "mention_everyone": False,
        "timestamp": "2026-01-01T00:00:00+00:00",
        "edited_timestamp": None,
        "flags": 0,
    }


@pytest.fixture
def rest(monkeypatch: pytest.MonkeyPatch) -> Iterator[DiscordRestDouble]:
    double = DiscordRestDouble()
    double.thread.start()
    monkeypatch.setattr(Route, "BASE", double.base)
    yield double
    double.server.shutdown()
    double.server.server_close()


def test_a_missing_token_says_which_setting_and_where_to_get_it(charlie: Cli) -> None:
    result = charlie("discord")
    assert result.exit_code == 1
    assert result.output.startswith("Error: The Discord bot needs its token: set ")
    assert "CHARLIE_DISCORD_TOKEN" in result.output and "Reset Token" in result.output


def test_without_discord_py_it_says_what_to_install(
    charlie: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHARLIE_DISCORD_TOKEN", "anything")
    monkeypatch.delitem(sys.modules, "charlie.adapters.discord.bot", raising=False)
    monkeypatch.setitem(sys.modules, "discord", None)  # as if it were not installed
    result = charlie("discord")
    assert result.exit_code == 1
    assert result.output == (
        "Error: The Discord bot needs discord.py: pip install 'charlie[discord]' "
        "(in a checkout: .venv/bin/pip install -e '.[discord]')\n"
    )


def test_an_invalid_token_is_refused_with_a_clear_error(
    charlie: Cli, rest: DiscordRestDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHARLIE_DISCORD_TOKEN", "not-a-real-token")
    result = charlie("discord")
    assert result.exit_code == 1
    assert "Error: Discord refused the bot token in CHARLIE_DISCORD_TOKEN" in result.output
    assert "Reset Token" in result.output
    assert "not-a-real-token" not in result.output  # the token is never echoed
    assert rest.requests[0][:2] == ("GET", "/api/v10/users/@me")


def test_discord_out_of_reach_is_a_clear_error_not_a_traceback(
    charlie: Cli, monkeypatch: pytest.MonkeyPatch, dead_url: str
) -> None:
    monkeypatch.setattr(Route, "BASE", dead_url.removesuffix("/v1") + "/api/v10")
    monkeypatch.setenv("CHARLIE_DISCORD_TOKEN", "some-token")
    result = charlie("discord")
    assert result.exit_code == 1
    assert "Error: Cannot reach Discord (" in result.output
    assert "internet connection" in result.output
    assert "Traceback" not in result.output and "some-token" not in result.output


def test_discord_py_waits_out_a_429_and_charlie_retries_a_long_one(
    rest: DiscordRestDouble,
) -> None:
    waits: list[float] = []

    async def recording_sleep(seconds: float) -> None:
        waits.append(seconds)

    async def scenario() -> None:
        bot = CharlieBot(load_settings(), LLMClient("http://127.0.0.1:9/v1", "m"))
        try:
            await bot.http.static_login(GOOD_TOKEN)
            channel = bot.get_partial_messageable(600000000000000006)
            # A short wait: discord.py sleeps through it and sends again by itself.
            rest.rate_limit_next(0.05)
            sent = await send_with_retry(lambda: channel.send("first"), sleep=recording_sleep)
            assert sent.content == "first" and waits == []
            # A wait longer than discord.py is allowed to sleep: it raises RateLimited,
            # and Charlie waits that long and sends again.
            rest.rate_limit_next(MAX_RATELIMIT_WAIT + 10)
            sent = await send_with_retry(lambda: channel.send("second"), sleep=recording_sleep)
            assert sent.content == "second" and waits == [MAX_RATELIMIT_WAIT + 10]
        finally:
            await bot.http.close()
            bot.llm.close()

    asyncio.run(scenario())
    assert [body["content"] for body in rest.posts()] == ["first", "first", "second", "second"]
