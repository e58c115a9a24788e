"""`charlie tokens`: personal bearer tokens other apps (an MCP client) use to act as one person.

Whoever can run the CLI owns the data home, so the CLI acts as the household's administrator:
it makes tokens for anyone, lists everyone's and revokes any.
"""

from __future__ import annotations

import click

from charlie import users
from charlie.adapters.cli.common import opened_home, runnable
from charlie.errors import NotFound
from charlie.household import tokens

# The data home's owner, as `tokens.revoke` sees the one running the CLI.
LOCAL_ADMIN = users.User(id=0, name="the data home's owner", is_admin=True)


def _when(stamp: str | None, missing: str = "") -> str:
    return stamp[:16].replace("T", " ") if stamp else missing


def _access(token: tokens.Token) -> str:
    return "read-only" if token.read_only else "read-write"


@click.group("tokens")
def tokens_group() -> None:
    """Tokens that let another app (an MCP client, a script) act as a household member."""


@tokens_group.command("add")
@click.argument("name")
@click.option("--label", default="", help="What the token is for (say, 'Claude Desktop').")
@click.option("--read-only", is_flag=True, help="The app may read, but never change anything.")
def add_command(name: str, label: str, read_only: bool) -> None:
    """Make a token that acts as NAME, and show its secret (once)."""
    with opened_home() as home:
        try:
            user = users.get_user(home.db, name)
        except NotFound as exc:
            raise NotFound(f"{exc} Add them first with `charlie users add {name}`.") from exc
        token, secret = tokens.create(home.db, user, label=label, read_only=read_only)
    what = ", ".join(p for p in (_access(token), repr(token.label) if token.label else "") if p)
    click.echo(f"Made token {token.id} for {user.name} ({what}):\n\n{secret}\n")
    click.echo("Copy it now: it will not be shown again. An app sends it with every request:")
    click.echo(f"  Authorization: Bearer {secret}")
    click.echo(runnable(f"Revoke it with `charlie tokens revoke {token.id}`."))


@tokens_group.command("list")
@click.option("--user", "user_name", metavar="NAME", help="Only NAME's tokens.")
def list_command(user_name: str | None) -> None:
    """List tokens (never their secrets), newest first."""
    with opened_home() as home:
        user = users.get_user(home.db, user_name) if user_name else None
        found = tokens.list_tokens(home.db, user)
    if not found:
        click.echo(runnable("No tokens yet. Make one with `charlie tokens add NAME`."))
        return
    click.echo("ID\tPERSON\tLABEL\tACCESS\tCREATED\tLAST USED\tREVOKED")
    for token in found:
        row = (
            str(token.id),
            token.user,
            token.label or "-",
            _access(token),
            _when(token.created_at),
            _when(token.last_used_at, "never"),
            _when(token.revoked_at, "-"),
        )
        click.echo("\t".join(row))


@tokens_group.command("revoke")
@click.argument("token_id", metavar="ID", type=int)
def revoke_command(token_id: int) -> None:
    """Revoke token ID for good (`charlie tokens list` shows the ids)."""
    with opened_home() as home:
        token = tokens.revoke(home.db, token_id, by=LOCAL_ADMIN)
    label = f" ({token.label})" if token.label else ""
    click.echo(f"Revoked token {token.id} of {token.user}{label}; apps using it are refused now.")
