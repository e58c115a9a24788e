"""Signing in and out, who you are, and the tokens for other apps (docs/api.md)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field

from charlie.adapters.web import schemas
from charlie.adapters.web.deps import (
    CSRF_COOKIE,
    DEVICE_COOKIE,
    SESSION_COOKIE,
    HomeDep,
    SessionDep,
)
from charlie.errors import Forbidden
from charlie.household import discord_links as links
from charlie.household import signin, tokens
from charlie.users import User

router = APIRouter()


class Credentials(BaseModel):
    name: str = Field(max_length=100)
    password: str = Field(max_length=1000)


@router.post("/login", response_model=schemas.SignedIn | schemas.Refused)
def login(
    body: Credentials, request: Request, response: Response, home: HomeDep
) -> schemas.SignedIn | schemas.Refused:
    # The peer's address: uvicorn replaces it from X-Forwarded-For only for a trusted proxy
    # (CHARLIE_TRUSTED_PROXIES), so a client cannot pick its own.
    address = request.client.host if request.client else "unknown"
    device = request.cookies.get(DEVICE_COOKIE)
    session = signin.sign_in(home.db, body.name, body.password, address, device)
    if session is None:
        response.status_code = 401
        return schemas.Refused(error="Wrong name or password.", kind="Unauthorized")
    secure = request.url.scheme == "https"
    response.set_cookie(
        DEVICE_COOKIE,
        session.device,
        max_age=signin.DEVICE_DAYS * 24 * 3600,
        httponly=True,
        samesite="strict",
        secure=secure,
        path="/api/login",
    )
    age = signin.SESSION_DAYS * 24 * 3600
    response.set_cookie(
        SESSION_COOKIE,
        session.token,
        max_age=age,
        httponly=True,
        samesite="lax",
        secure=secure,
        path="/",
    )
    response.set_cookie(
        CSRF_COOKIE,
        session.csrf,
        max_age=age,
        httponly=False,
        samesite="lax",
        secure=secure,
        path="/",
    )
    return schemas.SignedIn(user=me_out(session.user))


@router.post("/logout", response_model=schemas.Ok)
def logout(session: SessionDep, response: Response, home: HomeDep) -> schemas.Ok:
    signin.sign_out(home.db, session.token)
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(CSRF_COOKIE, path="/")
    return schemas.Ok(ok=True)


@router.get("/me", response_model=schemas.Me)
def me(session: SessionDep) -> schemas.Me:
    return me_out(session.user)


def me_out(user: User) -> schemas.Me:
    return schemas.Me(name=user.name, is_admin=user.is_admin)


@router.post("/me/discord-code", response_model=schemas.DiscordCode)
def discord_code(session: SessionDep, home: HomeDep) -> schemas.DiscordCode:
    """A one-time code that links the caller's Discord account (`/charlie link CODE`)."""
    made = links.new_code(home.db, session.user)
    linked = len(links.discord_ids(home.db, session.user))
    return schemas.DiscordCode(code=made.code, expires_at=made.expires_at, linked=linked)


class NewToken(BaseModel):
    label: str = Field(default="", max_length=200)
    read_only: bool = False


def token_out(token: tokens.Token) -> schemas.TokenOut:
    return schemas.TokenOut(**asdict(token), active=token.active)


@router.get("/tokens", response_model=schemas.Tokens)
def list_tokens(
    session: SessionDep, home: HomeDep, everyone: Annotated[bool, Query(alias="all")] = False
) -> schemas.Tokens:
    """The caller's tokens (never their secrets); an administrator may ask for everyone's."""
    if everyone and not session.user.is_admin:
        raise Forbidden("Only a household administrator can see everyone's tokens.")
    found = tokens.list_tokens(home.db, None if everyone else session.user)
    return schemas.Tokens(tokens=[token_out(t) for t in found])


@router.post("/tokens", status_code=201, response_model=schemas.NewTokenOut)
def create_token(body: NewToken, session: SessionDep, home: HomeDep) -> schemas.NewTokenOut:
    """A new token for the caller. The secret is in this answer only: it is never stored."""
    made, secret = tokens.create(home.db, session.user, label=body.label, read_only=body.read_only)
    return schemas.NewTokenOut(token=token_out(made), secret=secret)


@router.delete("/tokens/{token_id}", response_model=schemas.OneToken)
def revoke_token(token_id: int, session: SessionDep, home: HomeDep) -> schemas.OneToken:
    return schemas.OneToken(token=token_out(tokens.revoke(home.db, token_id, by=session.user)))
