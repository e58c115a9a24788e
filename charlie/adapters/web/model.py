"""The built-in model, for administrators: what it is, and the starter model's install in
the background — started by a POST (the administrator's yes to the download), polled by
GET, stopped by DELETE (docs/api.md)."""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter, Request

from charlie.adapters.web import schemas
from charlie.adapters.web.admin import AdminDep
from charlie.errors import ModelMissing, ModelRefused
from charlie.llm import models, starter

router = APIRouter()


def _job(request: Request) -> starter.Job:
    job: starter.Job = request.app.state.model_install
    return job


def _install(job: starter.Job) -> schemas.ModelInstall:
    return schemas.ModelInstall(**dataclasses.asdict(job.snapshot()))


@router.get("/model", response_model=schemas.ModelStatus)
def model_status(session: AdminDep, request: Request) -> schemas.ModelStatus:
    settings = request.app.state.settings
    offered = starter.STARTER
    problem: str | None = None
    model: schemas.BuiltinModel | None = None
    try:
        found = models.status(settings)
    except (ModelMissing, ModelRefused) as exc:
        problem = str(exc)
    else:
        if found.chosen is not None:
            model = schemas.BuiltinModel(
                name=found.name,
                path=str(found.chosen.path),
                size=found.size,
                source=found.chosen.source,
                speed=found.speed.words() if found.speed else None,
            )
    return schemas.ModelStatus(
        model=model,
        problem=problem,
        starter=schemas.StarterModel(
            name=offered.name,
            size=offered.size,
            offer=starter.offer(offered),
            installed=starter.installed(settings, offered) is not None,
            parts=offered.parts,
            downloaded_parts=starter.downloaded_parts(settings, offered),
        ),
        install=_install(_job(request)),
        folder=str(settings.model_dir),
    )


@router.get("/model/install", response_model=schemas.ModelInstall)
def install_progress(session: AdminDep, request: Request) -> schemas.ModelInstall:
    return _install(_job(request))


@router.post("/model/install", status_code=202, response_model=schemas.ModelInstall)
def start_install(session: AdminDep, request: Request) -> schemas.ModelInstall:
    """Download the starter model in the background: the request is the administrator's
    consent (the app asks it with the size and time in words)."""
    job = _job(request)
    job.start(request.app.state.settings, starter.STARTER)
    return _install(job)


@router.delete("/model/install", response_model=schemas.ModelInstall)
def cancel_install(session: AdminDep, request: Request) -> schemas.ModelInstall:
    """Stop the install: answered once it has stopped, with nothing half-written left."""
    _job(request).cancel()
    return _install(_job(request))
