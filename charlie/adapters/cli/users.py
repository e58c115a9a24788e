"""`charlie users`: the household's accounts, and making the first one on a new data home."""

from __future__ import annotations

import sys

import click

from charlie import users
from charlie.adapters.cli.common import command_name, opened_home
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.household import discord_links as links
from charlie.household import removal as household
from charlie.household import signin


def _password(from_stdin: bool, command: str) -> str:
    """The password: read from standard input (--password-stdin), or typed twice at the
    terminal. Without a terminal (a script, a container), the command that works instead:
    asking would only end in `GetPassWarning … Aborted!`."""
    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    if not at_terminal():
        raise CharlieError(
            "There is no terminal here to type the password at: give it on standard input "
            f"instead, e.g. `printf '%s\\n' \"$PASSWORD\" | {command_name()} {command} "
            "--password-stdin`."
        )
    return str(click.prompt("Password", hide_input=True, confirmation_prompt=True))


def at_terminal() -> bool:
    """Whether a person is typing at this command (so it may ask them something)."""
    return sys.stdin.isatty()


def first_run(home: Home, user_name: str | None) -> str | None:
    """Who is speaking, on a data home where no one has an account yet: at a terminal,
    offer to make the first account (an administrator) and speak as it; otherwise say
    which command makes it. With people already, `user_name` as given."""
    if users.has_people(home.db):
        return user_name
    suggested = user_name or home.settings.user
    command = f"{command_name()} users add {suggested} --admin"
    if not at_terminal():
        raise CharlieError(
            f"No one has an account yet: run `{command}` to make the first one (an "
            "administrator), then try again."
        )
    click.echo("No one has an account in this Charlie yet.", err=True)
    if not click.confirm(
        "Make the first one now (you, as the administrator)?", default=True, err=True
    ):
        raise CharlieError(f"Nothing was made. `{command}` makes the first account.")
    name = click.prompt("Your name", default=suggested, value_proc=_valid_name, err=True)
    password = _optional_password()
    users.add_user(home.db, name, password, is_admin=True)
    click.echo(
        f"Added {name} (admin). "
        + (
            "Sign in to the app with that password."
            if password
            else f"Give yourself a password for the app later: `{command_name()} users passwd "
            f"{name}`."
        ),
        err=True,
    )
    return str(name)


def _valid_name(value: str) -> str:
    try:
        return users.validate_name(value.strip())
    except CharlieError as exc:
        raise click.BadParameter(str(exc)) from exc


def _optional_password() -> str | None:
    """A password typed twice, or None when the person just presses Enter."""
    while True:
        first = click.prompt(
            "Password for the app (Enter for none)",
            hide_input=True,
            default="",
            show_default=False,
            err=True,
        )
        if not first:
            return None
        try:
            users.check_password(first)
        except CharlieError as exc:
            click.echo(f"Error: {exc}", err=True)
            continue
        if click.prompt("Repeat the password", hide_input=True, err=True) == first:
            return str(first)
        click.echo("Error: the two passwords differ; try again.", err=True)


@click.group("users")
def users_group() -> None:
    """Add and remove household members, set passwords, list accounts."""


@users_group.command("add")
@click.argument("name")
@click.option("--admin", is_flag=True, help="Make this person an administrator.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def add_command(name: str, admin: bool, password_stdin: bool) -> None:
    """Create an account for NAME (asks for a password)."""
    with opened_home() as home:
        users.validate_name(name)
        if any(u.name.lower() == name.lower() and has for u, has in users.list_users(home.db)):
            raise CharlieError(f"{name!r} already has an account; use `charlie users passwd`.")
        typed = f"users add {name}{' --admin' if admin else ''}"
        users.add_user(home.db, name, _password(password_stdin, typed), is_admin=admin)
        click.echo(f"Added {name}{' (admin)' if admin else ''}.")


@users_group.command("rm")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Remove without asking.")
def rm_command(name: str, yes: bool) -> None:
    """Remove NAME from the household.

    Their private channel and its memory, their sessions, app tokens, usage history and
    Discord links are deleted; what they said in shared projects stays, under their name.
    """
    with opened_home() as home:
        household.check_removable(home.db, name)
        click.echo(household.removal_of(home.db, name).describe(), err=True)
        if not yes:
            if not at_terminal():
                raise CharlieError(f"Add --yes to remove {name} without being asked.")
            if not click.confirm(f"Remove {name}?", default=False, err=True):
                raise CharlieError(f"{name} was not removed.")
        removal = household.remove_person(home, name)
        click.echo(f"Removed {removal.name}.")


@users_group.command("admin")
@click.argument("name")
@click.option("--off", is_flag=True, help="Take the administrator's rights away instead.")
def admin_command(name: str, off: bool) -> None:
    """Make NAME an administrator (or, with --off, no longer one)."""
    with opened_home() as home:
        user = users.set_admin(home.db, name, not off)
        click.echo(f"{user.name} is {'no longer ' if off else ''}an administrator.")


@users_group.command("passwd")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def passwd_command(name: str, password_stdin: bool) -> None:
    """Change NAME's password (signs them out everywhere)."""
    with opened_home() as home:
        user = users.set_password(home.db, name, _password(password_stdin, f"users passwd {name}"))
        signin.sign_out_everywhere(home.db, user)
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
