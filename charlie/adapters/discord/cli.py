"""`charlie discord`: run the Discord bot (registered with the CLI as a plugin command).

Loaded on every `charlie` command, so discord.py is imported only when the bot starts.
"""

from __future__ import annotations

import click

from charlie.config import load_settings
from charlie.errors import CharlieError

INSTALL = "pip install 'charlie[discord]' (in a checkout: .venv/bin/pip install -e '.[discord]')"


@click.command("discord")
def discord_command() -> None:
    """Run the Discord bot (needs CHARLIE_DISCORD_TOKEN; see docs/discord.md).

    DMs with the bot are each linked person's private channel; a server channel talks to
    the project bound with `/charlie project bind NAME`.
    """
    settings = load_settings()
    token = settings.discord_token.get_secret_value().strip() if settings.discord_token else ""
    if not token:
        raise CharlieError(
            "The Discord bot needs its token: set CHARLIE_DISCORD_TOKEN (or discord_token in "
            f"{settings.home / 'charlie.toml'}) to the token from the Discord developer portal "
            "(your application → Bot → Reset Token). docs/discord.md has the steps."
        )
    try:
        from charlie.adapters.discord.bot import run
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in {"discord", "aiohttp"}:
            raise
        raise CharlieError(f"The Discord bot needs discord.py: {INSTALL}") from exc
    click.echo("Starting the Discord bot (Ctrl-C stops it).", err=True)
    run(settings)
