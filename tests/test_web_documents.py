"""Uploading documents as notes over the web API, in-process (FastAPI's TestClient)."""

from __future__ import annotations

import httpx
import pytest
from document_files import kitchen_docx, scanned_pdf, text_pdf
from fastapi.testclient import TestClient
from web_support import PASSWORD, signed_in

from charlie import projects
from charlie.adapters.web import documents as web_documents
from charlie.adapters.web.app import MAX_BODY, create_app
from charlie.config import load_settings
from charlie.home import Home
from charlie.notes import documents
from charlie.notes import files as notes
from charlie.notes.document_text import NO_TEXT_LAYER
from charlie.users import ensure_user, set_password

PDF = "application/pdf"


@pytest.fixture
def app_home(home: Home) -> Home:
    for name in ("alice", "bob"):
        ensure_user(home.db, name, is_admin=name == "alice")
        set_password(home.db, name, PASSWORD)
    projects.create_project(home, "Kitchen")
    return home


def upload(
    client: TestClient, name: str, data: bytes, project: str = "kitchen", kind: str = PDF
) -> httpx.Response:
    return client.post(
        "/api/notes/upload", data={"project": project}, files={"file": (name, data, kind)}
    )


def kept(home: Home) -> list[str]:
    project = projects.get_project(home, "kitchen")
    found = [n.name for n in notes.list_notes(project)[0]]
    folder = documents.attachments_dir(project)
    return found + (sorted(p.name for p in folder.iterdir()) if folder.is_dir() else [])


def test_an_uploaded_pdf_becomes_a_note_found_by_search(alice: TestClient, app_home: Home) -> None:
    data = text_pdf(["Bleed the radiators every October.", "Page two"], title="Heating")
    response = upload(alice, "heating manual.pdf", data)
    assert response.status_code == 201, response.text
    answer = response.json()
    assert answer["note"]["id"] == "kitchen/heating"
    assert answer["note"]["title"] == "Heating"
    assert answer["note"]["body"].startswith(
        "Original: [heating manual.pdf](../attachments/heating-manual.pdf) (PDF, 2 pages)\n\n"
        "## Page 1\n\nBleed the radiators every October."
    )
    assert (answer["original"], answer["kind"], answer["pages"], answer["warning"]) == (
        "attachments/heating-manual.pdf",
        "pdf",
        2,
        None,
    )
    found = alice.get("/api/search", params={"q": "bleed radiators", "project": "kitchen"})
    assert [r["id"] for r in found.json()["results"]][:1] == ["kitchen/heating"]

    original = alice.get("/api/attachments/kitchen/heating-manual.pdf")
    assert original.status_code == 200
    assert original.content == data
    assert original.headers["content-type"] == PDF
    assert original.headers["content-disposition"].startswith("attachment;")


def test_a_word_file_upload_keeps_its_structure(alice: TestClient) -> None:
    response = upload(alice, "plan.docx", kitchen_docx(), kind="application/octet-stream")
    assert response.status_code == 201, response.text
    body = response.json()["note"]["body"]
    assert "# Budget" in body and "| Item | Cost |" in body and "- Oak worktop" in body


def test_a_scanned_pdf_is_refused_plainly_and_nothing_kept(
    alice: TestClient, app_home: Home
) -> None:
    response = upload(alice, "scan.pdf", scanned_pdf())
    assert response.status_code == 400
    assert response.json() == {
        "error": f"scan.pdf was not added: {NO_TEXT_LAYER}",
        "kind": "NoTextLayer",
    }
    assert kept(app_home) == []


def test_a_file_of_another_kind_is_refused_whatever_its_name(
    alice: TestClient, app_home: Home
) -> None:
    response = upload(alice, "photo.pdf", b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert response.status_code == 415
    assert response.json()["kind"] == "UnsupportedDocument"
    assert "named .pdf but holds a picture (PNG)" in response.json()["error"]
    assert kept(app_home) == []


def test_a_file_over_the_limit_is_refused_with_its_size(
    alice: TestClient, app_home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_documents, "LIMITS", documents.Limits(max_bytes=10_000))
    response = upload(alice, "big.txt", b"x" * 20_000, kind="text/plain")
    assert response.status_code == 413
    assert response.json()["error"].startswith(
        "big.txt was not added: It is 20 KB, and Charlie takes documents of up to 10 KB."
    )
    assert kept(app_home) == []


def test_only_the_upload_takes_bodies_over_the_app_limit(alice: TestClient) -> None:
    picture = b"\x89PNG\r\n\x1a\n" + bytes(MAX_BODY + 1024 * 1024)
    assert MAX_BODY < len(picture) < web_documents.LIMITS.max_bytes
    response = upload(alice, "photo.png", picture, kind="image/png")
    assert response.status_code == 415  # taken in whole, then refused for what it is
    assert (
        "It is a picture (PNG); Charlie can't read text in pictures yet"
        in (response.json()["error"])
    )
    elsewhere = alice.post(
        "/api/notes",
        content=b'{"project": "kitchen", "title": "x", "body": "' + bytes(MAX_BODY) + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert elsewhere.status_code == 413
    too_big = bytes(web_documents.LARGER_BODIES[web_documents.UPLOAD_PATH] + 1)
    refused = upload(alice, "huge.txt", too_big, kind="text/plain")
    assert refused.status_code == 413
    assert refused.json()["error"] == "The request is larger than 26 MB."


def test_a_name_with_folders_in_it_is_only_a_name(alice: TestClient, app_home: Home) -> None:
    response = upload(alice, "../../etc/notes.txt", b"Plain words", kind="text/plain")
    assert response.status_code == 201, response.text
    assert response.json()["original"] == "attachments/notes.txt"
    assert kept(app_home) == ["notes", "notes.txt"]


def test_uploads_need_a_signed_in_person_and_the_csrf_header(app_home: Home) -> None:
    anonymous = TestClient(create_app(load_settings()))
    assert upload(anonymous, "a.txt", b"hi", kind="text/plain").status_code == 401
    with signed_in("bob") as bob:
        del bob.headers["X-CSRF-Token"]
        assert upload(bob, "a.txt", b"hi", kind="text/plain").status_code == 403
        assert anonymous.get("/api/attachments/kitchen/a.txt").status_code == 401
    assert kept(app_home) == []


@pytest.mark.parametrize(
    ("form", "files", "status", "message"),
    [
        ({}, {"file": ("a.txt", b"hi", "text/plain")}, 400, "Say which project"),
        ({"project": "kitchen"}, {}, 400, "Attach the document"),
        ({"project": "nowhere"}, {"file": ("a.txt", b"hi", "text/plain")}, 404, "no project"),
        ({"project": "private"}, {"file": ("a.txt", b"hi", "text/plain")}, 400, "is reserved"),
    ],
    ids=["no-project", "no-file", "unknown-project", "private"],
)
def test_a_malformed_upload_is_refused(
    alice: TestClient,
    app_home: Home,
    form: dict[str, str],
    files: dict[str, tuple[str, bytes, str]],
    status: int,
    message: str,
) -> None:
    if not files:  # a multipart body with a field and no file
        response = alice.post("/api/notes/upload", files={"project": (None, "kitchen")})
    else:
        response = alice.post("/api/notes/upload", data=form, files=files)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]
    assert kept(app_home) == []


def test_only_kept_originals_are_downloadable(alice: TestClient, app_home: Home) -> None:
    project = projects.get_project(app_home, "kitchen")
    assert alice.get("/api/attachments/kitchen/project.toml").status_code == 404
    assert alice.get("/api/attachments/kitchen/..%2Fproject.toml").status_code == 404
    notes.create_note(project, "Plan")
    assert alice.get("/api/attachments/kitchen/plan.md").status_code == 404
