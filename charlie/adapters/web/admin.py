"""Household administration and your own account: people, passwords, sessions, trash, models.

Every route here is a call into the core (`charlie.users`, `charlie.household.removal`,
`charlie.household.signin`, `charlie.household.trash`). The routes that manage other
people take `AdminDep`: a signed-in person who is not an administrator gets 403 from each of
them, whatever the request holds.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from charlie import projects, users
from charlie.adapters.web import schemas
from charlie.adapters.web.deps import HomeDep, SessionDep, llm_of
from charlie.errors import Conflict, Forbidden, InvalidName
from charlie.home import Home
from charlie.household import discord_links as links
from charlie.household import removal as household
from charlie.household import signin, trash
from charlie.notes.files import TrashedNote
from charlie.projects import TrashedProject
from charlie.users import User

router = APIRouter()


def current_admin(session: SessionDep) -> signin.Session:
    """The signed-in session, if it is an administrator's (403 otherwise)."""
    if not session.user.is_admin:
        raise Forbidden("Only a household administrator can do this.")
    return session


AdminDep = Annotated[signin.Session, Depends(current_admin)]


def not_yourself(session: signin.Session, name: str, what: str) -> None:
    """Refuse an administrator's action on their own account that could lock them out by
    accident; the message says where to do it on purpose."""
    if name.casefold() == session.user.name.casefold():
        raise Conflict(f"You cannot {what} here. {SELF_HELP}")


SELF_HELP = (
    "Ask another administrator, or run the `charlie users` command on the machine running Charlie."
)


# ---------------------------------------------------------------- first run (no session)


@router.get("/household", response_model=schemas.Household)
def household_state(home: HomeDep) -> schemas.Household:
    """Whether anyone has an account yet: the sign-in page says how to make the first one.
    The only thing said to someone not signed in, and it names no one."""
    return schemas.Household(has_people=users.has_people(home.db))


# ---------------------------------------------------------------- people (administrators)


class NewPerson(BaseModel):
    name: str = Field(min_length=1, max_length=40)
    password: str = Field(max_length=users.MAX_PASSWORD)
    is_admin: bool = False


class PersonChanges(BaseModel):
    is_admin: bool


class NewPassword(BaseModel):
    password: str = Field(max_length=users.MAX_PASSWORD)


def person_out(home: Home, user: User, can_sign_in: bool, you: User) -> schemas.Person:
    return schemas.Person(
        name=user.name,
        is_admin=user.is_admin,
        can_sign_in=can_sign_in,
        sessions=signin.count(home.db, user),
        discord=bool(links.discord_ids(home.db, user)),
        you=user.id == you.id,
    )


@router.get("/people", response_model=schemas.People)
def list_people(session: AdminDep, home: HomeDep) -> schemas.People:
    return schemas.People(
        people=[
            person_out(home, user, can_sign_in, session.user)
            for user, can_sign_in in users.list_users(home.db)
        ]
    )


@router.post("/people", status_code=201, response_model=schemas.Person)
def add_person(body: NewPerson, session: AdminDep, home: HomeDep) -> schemas.Person:
    made = users.add_user(home.db, body.name.strip(), body.password, is_admin=body.is_admin)
    return person_out(home, made, True, session.user)


@router.patch("/people/{name}", response_model=schemas.Person)
def change_person(
    name: str, body: PersonChanges, session: AdminDep, home: HomeDep
) -> schemas.Person:
    if not body.is_admin:
        not_yourself(session, name, "take away your own administrator's rights")
    changed = users.set_admin(home.db, name, body.is_admin)
    can_sign_in = users.password_hash(home.db, changed.name) is not None
    return person_out(home, changed, can_sign_in, session.user)


@router.post("/people/{name}/password", response_model=schemas.PasswordReset)
def reset_password(
    name: str, body: NewPassword, session: AdminDep, home: HomeDep
) -> schemas.PasswordReset:
    """Set someone's password (they forgot theirs): every session of theirs ends."""
    not_yourself(session, name, "reset your own password (change it under Your account)")
    user = users.set_password(home.db, name, body.password)
    ended = signin.count(home.db, user)
    signin.sign_out_everywhere(home.db, user)
    return schemas.PasswordReset(name=user.name, ended_sessions=ended)


@router.get("/people/{name}/removal", response_model=schemas.Removal)
def removal_preview(name: str, session: AdminDep, home: HomeDep) -> schemas.Removal:
    """What removing `name` would delete and keep, in words, for the confirmation."""
    not_yourself(session, name, "remove yourself")
    household.check_removable(home.db, name)
    return removal_out(household.removal_of(home.db, name))


@router.delete("/people/{name}", response_model=schemas.Removal)
def remove_person(name: str, session: AdminDep, home: HomeDep) -> schemas.Removal:
    not_yourself(session, name, "remove yourself")
    return removal_out(household.remove_person(home, name))


def removal_out(removal: household.Removal) -> schemas.Removal:
    data = asdict(removal)
    del data["message_ids"]
    return schemas.Removal(**data, text=removal.describe())


# ---------------------------------------------------------------- your own account


class PasswordChange(BaseModel):
    current: str = Field(max_length=users.MAX_PASSWORD)
    new: str = Field(max_length=users.MAX_PASSWORD)


@router.get("/me/sessions", response_model=schemas.MySessions)
def my_sessions(session: SessionDep, home: HomeDep) -> schemas.MySessions:
    total = signin.count(home.db, session.user)
    return schemas.MySessions(sessions=total, others=max(0, total - 1))


@router.post("/me/password", response_model=schemas.Ended)
def change_my_password(body: PasswordChange, session: SessionDep, home: HomeDep) -> schemas.Ended:
    """Change your own password (the current one proves it is you); your other sessions end,
    this one stays."""
    ended = signin.change_password(home.db, session, body.current, body.new)
    return schemas.Ended(ended_sessions=ended)


@router.post("/me/sign-out-others", response_model=schemas.Ended)
def sign_out_others(session: SessionDep, home: HomeDep) -> schemas.Ended:
    return schemas.Ended(ended_sessions=signin.sign_out_others(home.db, session))


# ---------------------------------------------------------------- models


class ModelChoice(BaseModel):
    model: str = Field("", max_length=300)  # "": the server's default (CHARLIE_LLM_MODEL)


@router.get("/models", response_model=schemas.Models)
def list_models(session: SessionDep, request: Request, home: HomeDep) -> schemas.Models:
    """The models the configured server offers (its GET /v1/models)."""
    return schemas.Models(
        models=llm_of(request).models(),
        default=home.settings.llm_model or None,
        base_url=llm_of(request).base_url,
    )


@router.put("/projects/{slug}/model", response_model=schemas.ProjectModel)
def choose_model(
    slug: str, body: ModelChoice, session: SessionDep, request: Request, home: HomeDep
) -> schemas.ProjectModel:
    """The model this project's chat uses: one the server lists, or "" for the default."""
    projects.get_project(home, slug)  # 404 before asking the server
    chosen = body.model.strip()
    if chosen:
        offered = llm_of(request).models()
        if chosen not in offered:
            raise InvalidName(
                f"The model server has no model {chosen!r}; it offers: "
                f"{', '.join(offered) or 'none'}. Nothing was changed."
            )
    project = projects.update_project(home, slug, model=chosen)
    return schemas.ProjectModel(slug=project.slug, model=project.config.model)


# ---------------------------------------------------------------- trash


def trashed_project_out(found: TrashedProject) -> schemas.TrashedProject:
    return schemas.TrashedProject(
        kind="project",
        id=found.entry,
        slug=found.slug,
        name=found.name,
        deleted_at=found.deleted_at,
    )


def trashed_note_out(found: TrashedNote) -> schemas.TrashedNote:
    return schemas.TrashedNote(
        kind="note",
        id=found.id,
        project=found.project,
        name=found.name,
        title=found.title,
        deleted_at=found.deleted_at,
    )


class Restore(BaseModel):
    kind: Literal["project", "note"]
    id: str = Field(min_length=1, max_length=2000)


@router.get("/trash", response_model=schemas.Trash)
def list_trash(session: SessionDep, home: HomeDep) -> schemas.Trash:
    found = trash.contents(home)
    return schemas.Trash(
        projects=[trashed_project_out(p) for p in found.projects],
        notes=[trashed_note_out(n) for n in found.notes],
    )


@router.delete("/projects/{slug}", response_model=schemas.Trashed)
def delete_project(slug: str, session: AdminDep, home: HomeDep) -> schemas.Trashed:
    """Move a project to the trash (administrators: it is the whole household's)."""
    found = trash.delete_project(home, slug)
    return schemas.Trashed(trashed=trashed_project_out(found))


@router.delete("/notes/{project}/{name:path}", response_model=schemas.Trashed)
def delete_note(project: str, name: str, session: SessionDep, home: HomeDep) -> schemas.Trashed:
    if any(ord(c) < 32 for c in name):
        raise InvalidName(f"{name!r} is not a note name: it holds a control character.")
    path = trash.delete_note(home, projects.get_project(home, project), name)
    listed = [n for n in trash.contents(home).notes if n.path == path]
    return schemas.Trashed(trashed=trashed_note_out(listed[0]) if listed else None)


@router.post("/trash/restore", response_model=schemas.RestoredProject | schemas.RestoredNote)
def restore(
    body: Restore, session: SessionDep, home: HomeDep
) -> schemas.RestoredProject | schemas.RestoredNote:
    """Bring a project (administrators) or a note back from the trash."""
    if body.kind == "project":
        current_admin(session)
        project = trash.restore_project(home, body.id)
        return schemas.RestoredProject(kind="project", slug=project.slug, name=project.config.name)
    note = trash.restore_note(home, body.id)
    return schemas.RestoredNote(kind="note", id=note.key, title=note.title)
