"""Projects: list, create, read and change their settings (docs/api.md)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from charlie import projects
from charlie.adapters.web import schemas
from charlie.adapters.web.deps import (
    HomeDep,
    SessionDep,
)
from charlie.adapters.web.shapes import project_out
from charlie.conversations import shared_channel
from charlie.errors import Forbidden, InvalidName
from charlie.memory import layers as memory
from charlie.tools import builtin as toolkit

router = APIRouter()


class NewProject(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    style: str = ""
    distill_every: int = 5


class ProjectChanges(BaseModel):
    name: str | None = None
    style: str | None = None
    persona: str | None = None
    distill_every: int | None = None
    quotes_window: int | None = None
    write_tools: list[str] | None = None


@router.get("/projects", response_model=schemas.ProjectList)
def list_projects(session: SessionDep, home: HomeDep) -> schemas.ProjectList:
    found, problems = projects.scan_projects(home)
    return schemas.ProjectList(
        projects=[project_out(p) for p in found],
        problems=[schemas.Problem(path=str(p.path), reason=p.reason) for p in problems],
    )


@router.post("/projects", status_code=201, response_model=schemas.ProjectOut)
def create_project(body: NewProject, session: SessionDep, home: HomeDep) -> schemas.ProjectOut:
    made = projects.create_project(
        home, body.name, style=body.style, distill_every=body.distill_every
    )
    memory.ensure_file(home, shared_channel(home, made))  # a memory.md to look at and edit
    return project_out(made)


@router.get("/projects/{slug}", response_model=schemas.ProjectOut)
def get_project(slug: str, session: SessionDep, home: HomeDep) -> schemas.ProjectOut:
    return project_out(projects.get_project(home, slug))


@router.patch("/projects/{slug}", response_model=schemas.ProjectOut)
def change_project(
    slug: str, body: ProjectChanges, session: SessionDep, home: HomeDep
) -> schemas.ProjectOut:
    changes = body.model_dump(exclude_unset=True)
    if "write_tools" in changes and not session.user.is_admin:
        raise Forbidden(
            "Only an administrator can change which write tools the model may use in a project."
        )
    if "write_tools" in changes and changes["write_tools"] is not None:
        unknown = set(changes["write_tools"]) - set(toolkit.write_tools())
        if unknown:
            raise InvalidName(f"Unknown write tools: {', '.join(sorted(unknown))}.")
    return project_out(projects.update_project(home, slug, **changes))
