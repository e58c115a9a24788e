"""Documents brought in as notes: upload a PDF, text, markdown or Word file (docs/documents.md).

`POST /api/notes/upload` (multipart: `project`, `file`) makes a note of the document and
keeps the original in the project's `attachments/` folder; `GET /api/attachments/{project}/
{name}` downloads a kept original. The note is indexed before the upload is answered, so
the person's next search finds it. Uploads are bigger than any other request, so the app's
body limit is raised for the upload route alone (`LARGER_BODIES`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse
from starlette.datastructures import UploadFile

from charlie import projects
from charlie.adapters.web import schemas
from charlie.adapters.web.deps import HomeDep, SessionDep, files, problem
from charlie.adapters.web.shapes import note_full
from charlie.notes import documents
from charlie.retrieval.upkeep import index_in_background

router = APIRouter()
LIMITS = documents.Limits()
UPLOAD_PATH = "/api/notes/upload"
# The whole multipart request: the file, plus room for its headers and the project field.
LARGER_BODIES = {UPLOAD_PATH: LIMITS.max_bytes + 1024 * 1024}
MEDIA_TYPES = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".md": "text/markdown; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".text": "text/plain; charset=utf-8",
    ".markdown": "text/markdown; charset=utf-8",
}
UNKNOWN = "application/octet-stream"  # any other kept original


@router.post(
    "/notes/upload",
    status_code=201,
    response_model=None,  # a refusal is a JSONResponse of its own
    responses={201: {"model": schemas.Uploaded}},
)
async def upload(
    request: Request, session: SessionDep, home: HomeDep
) -> schemas.Uploaded | JSONResponse:
    """Make a note of an uploaded document. The body is read only once the session is
    known, so nobody signed out can make the server take in 25 MB."""
    async with request.form(max_files=1, max_fields=2) as form:
        slug, file = form.get("project"), form.get("file")
        if not isinstance(slug, str) or not slug:
            return problem(
                400, "Say which project the document goes into (field 'project').", "BadRequest"
            )
        if not isinstance(file, UploadFile):
            return problem(400, "Attach the document as the field 'file'.", "BadRequest")
        project = projects.get_project(home, slug)
        name = documents.display_name(file.filename or "document")
        too_large = LIMITS.too_large(file.size or 0)
        if too_large is not None:
            return problem(413, f"{name} was not added: {too_large}", "DocumentTooLarge")
        with tempfile.TemporaryDirectory(prefix="charlie-upload-") as folder:
            received = Path(folder) / "document"
            await run_in_threadpool(_save, file, received)
            try:
                made = await run_in_threadpool(
                    documents.import_document, project, received, name, LIMITS
                )
            except documents.DocumentTooLarge as exc:
                return problem(413, str(exc), type(exc).__name__)
            except documents.UnsupportedDocument as exc:
                return problem(415, str(exc), type(exc).__name__)
    # Indexed in the background: embedding a large document takes minutes on a small
    # machine, and nobody's search or chat may wait for it (issue 23).
    index_in_background(home, project)
    return schemas.Uploaded(
        note=note_full(made.note),
        original=f"{documents.ATTACHMENTS_DIR}/{made.original.name}",
        kind=made.kind,
        pages=made.pages,
        warning=made.warning,
        indexing=True,  # searchable in a moment
    )


def _save(file: UploadFile, target: Path) -> None:
    file.file.seek(0)
    with open(target, "wb") as out:
        shutil.copyfileobj(file.file, out, 1024 * 1024)


@router.get(
    "/attachments/{project}/{name}",
    response_class=FileResponse,
    responses=files(*MEDIA_TYPES.values(), UNKNOWN),
)
def attachment(project: str, name: str, session: SessionDep, home: HomeDep) -> FileResponse:
    """A kept original, always as a download (never shown inline, whatever it holds)."""
    path = documents.original_path(projects.get_project(home, project), name)
    return FileResponse(
        path,
        media_type=MEDIA_TYPES.get(path.suffix.lower(), UNKNOWN),
        filename=path.name,
        content_disposition_type="attachment",
    )
