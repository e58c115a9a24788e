"""`charlie users`: the household's accounts."""

from __future__ import annotations

import sys

import click

from charlie import links, sessions, users
from charlie.adapters.cli.common import opened_home
from charlie.errors import CharlieError


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    return str(click.prompt("Password", hide_input=True, confirmation_prompt=True))


@click.group("users")
def users_group() -> None:
    """Add household members, set passwords, list accounts."""


@users_group.command("add")
@click.argument("name")
@click.option("--admin", is_flag=True, help="Make this person an administrator.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def add_command(name: str, admin: bool, password_stdin: bool) -> None:
    """Create an account for NAME (asks for a password)."""
    with opened_home() as home:
        existing = {u.name.lower(): has for u, has in users.list_users(home.db)}
        if existing.get(name.lower()):
            raise CharlieError(f"{name!r} already has an account; use `charlie users passwd`.")
        users.ensure_user(home.db, name, is_admin=admin)
        if admin:
            users.set_admin(home.db, name, True)
        users.set_password(home.db, name, _password(password_stdin))
        click.echo(f"Added {name}{' (admin)' if admin else ''}.")


@users_group.command("passwd")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def passwd_command(name: str, password_stdin: bool) -> None:
    """Change NAME's password (signs them out everywhere)."""
    with opened_home() as home:
        user = users.set_password(home.db, name, _password(password_stdin))
        sessions.sign_out_everywhere(home.db, user)
        click.echo(f"Changed {name}'s password.")


@users_group.command("list")
def list_command() -> None:
    """List accounts."""
    with opened_home() as home:
        for user, has_password in users.list_users(home.db):
            on_discord = bool(links.discord_ids(home.db, user))
            flags = [
                f
                for f, on in (
                    ("admin", user.is_admin),
                    ("can sign in", has_password),
                    ("linked on Discord", on_discord),
                )
                if on
            ]
            click.echo(f"{user.name}\t{', '.join(flags)}".rstrip())


@users_group.command("link-discord")
@click.argument("name")
@click.argument("discord_id", metavar="DISCORD_ID")
def link_discord_command(name: str, discord_id: str) -> None:
    """Let the Discord user DISCORD_ID talk to Charlie as NAME.

    DISCORD_ID is the number Discord shows with Developer Mode on (right-click the person,
    Copy User ID). Their DMs with the bot become NAME's private channel.
    """
    with opened_home() as home:
        user = links.link_discord(home.db, name, discord_id)
        click.echo(f"Linked Discord user {discord_id.strip()} to {user.name}.")


@users_group.command("unlink-discord")
@click.argument("name")
@click.argument("discord_id", metavar="[DISCORD_ID]", required=False)
def unlink_discord_command(name: str, discord_id: str | None) -> None:
    """Stop a Discord user (or, without DISCORD_ID, every one) speaking as NAME."""
    with opened_home() as home:
        count = links.unlink_discord(home.db, name, discord_id)
        which = f"Discord user {discord_id.strip()}" if discord_id else f"{count} Discord user(s)"
        click.echo(f"Unlinked {which} from {name}.")
