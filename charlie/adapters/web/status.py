"""The export of your data, the health of this Charlie and the model checks (docs/api.md)."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from charlie import __version__, conversations, tls
from charlie.adapters.web import schemas
from charlie.adapters.web.deps import (
    HomeDep,
    SessionDep,
    files,
    llm_of,
)
from charlie.jsonvalue import JSONObject
from charlie.llm import doctor
from charlie.retrieval.index import status as index_status
from charlie.retrieval.message_index import history_status
from charlie.transfer import export as archive

router = APIRouter()
ZIP = "application/zip"


@router.get("/export", response_class=FileResponse, responses=files(ZIP))
def export(session: SessionDep, home: HomeDep) -> FileResponse:
    """The caller's own copy of the household: every shared project and their private
    channel (never anyone else's), as the zip `charlie export --private` writes. It is built
    in a temporary folder and removed once sent."""
    folder = tempfile.TemporaryDirectory(prefix="charlie-export-")
    name = session.user.name
    try:
        result = archive.export_archive(
            home, Path(folder.name) / "export.zip", exporter=name, private=True
        )
    except BaseException:
        folder.cleanup()
        raise
    day = export_day()
    return FileResponse(
        result.path,
        media_type=ZIP,
        filename=f"charlie-export-{name}-{day}.zip",
        background=BackgroundTask(folder.cleanup),
    )


def export_day() -> str:
    """Today's date (UTC) as the download's name shows it: YYYYmmdd."""
    return datetime.now(UTC).strftime("%Y%m%d")


@router.get("/health", response_model=schemas.Health)
def health(session: SessionDep, request: Request, home: HomeDep) -> schemas.Health:
    settings = home.settings
    base_url = llm_of(request).base_url  # the server CHARLIE_LLM chose at the start
    llm: JSONObject = {"base_url": base_url, "model": settings.llm_model}
    try:
        with httpx.Client(timeout=3.0, verify=tls.context()) as client:
            key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            answer = client.get(f"{base_url}/models", headers=headers)
        models = [m.get("id") for m in answer.json().get("data", [])]
        llm |= {"reachable": answer.status_code < 400, "models": models, "error": None}
        if settings.llm_model and settings.llm_model not in models:
            llm["error"] = f"The server has no model {settings.llm_model!r}."
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        llm |= {"reachable": False, "error": f"Cannot reach {base_url} ({exc})."}
    history = history_status(home, conversations.readable_by(home, session.user))
    return schemas.Health.model_validate(
        {"version": __version__, "llm": llm, "index": index_status(home), "history": history}
    )


@router.get("/doctor", response_model=schemas.Doctor)
def run_doctor(session: SessionDep, request: Request, home: HomeDep) -> dict[str, object]:
    """What the model server can do, as `charlie doctor --json` says it: each check is a small
    model call and the whole run takes at most a minute, so the app runs it on request."""
    return doctor.examine(home.settings, server=llm_of(request).server).as_json()
