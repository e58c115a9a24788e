"""The OpenAPI schema tells the truth about every /api answer: a JSON answer has a schema
(its `response_model`), and one that is not JSON — a zip, a stream of server-sent events, a
file — declares its own media type, which a real request answers with. (The voice routes'
real requests are in tests/test_voice_api.py, where speech is made.)"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from web_support import PASSWORD, declared, events, media_type

from charlie import projects
from charlie.adapters.web.app import create_app
from charlie.config import load_settings
from charlie.home import Home
from charlie.notes import documents
from charlie.users import ensure_user, set_password

JSON = "application/json"


@pytest.fixture
def app_home(home: Home, llm: ScriptedLLMServer) -> Home:
    for name in ("alice", "bob"):
        ensure_user(home.db, name, is_admin=name == "alice")
        set_password(home.db, name, PASSWORD)
    projects.create_project(home, "Kitchen")
    return home


def operations(openapi: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, methods in openapi["paths"].items()
        if path.startswith("/api/")
        for method, operation in methods.items()
    ]


def untruthful(operation: dict[str, Any]) -> str | None:
    """What is wrong with an operation's 2xx answers in the schema, or None."""
    answers = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
    if not answers:
        return "no 2xx answer"
    for status, response in answers.items():
        content = response.get("content")
        if not content:
            return f"{status} declares no content"
        for kind, body in content.items():
            if kind == JSON and not body.get("schema"):
                return f"{status} claims JSON with an empty schema"
    return None


def test_every_api_answer_is_typed_or_declares_its_media_type(charlie_home: Any) -> None:
    found = operations(create_app(load_settings()).openapi())
    assert len(found) > 60  # the walk saw the API
    wrong = {
        f"{method} {path}": problem
        for method, path, operation in found
        if (problem := untruthful(operation)) is not None
    }
    assert wrong == {}


def test_the_routes_that_do_not_answer_json_are_the_ones_expected(charlie_home: Any) -> None:
    not_json = {
        f"{method} {path}": sorted(
            kind
            for status, response in operation["responses"].items()
            if status.startswith("2")
            for kind in response["content"]
        )
        for method, path, operation in operations(create_app(load_settings()).openapi())
        if not any(
            JSON in response.get("content", {})
            for status, response in operation["responses"].items()
            if status.startswith("2")
        )
    }
    turn = "/api/channels/{channel}/threads/{thread}/messages/{message_id}"
    assert not_json == {
        "GET /api/export": ["application/zip"],
        "POST /api/channels/{channel}/chat": ["text/event-stream"],
        "POST /api/channels/{channel}/voice": ["text/event-stream"],
        "POST /api/voice/say": ["audio/wav"],
        f"POST {turn}/regenerate": ["text/event-stream"],
        f"POST {turn}/edit": ["text/event-stream"],
        "GET /api/attachments/{project}/{name}": [
            "application/octet-stream",
            "application/pdf",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "text/markdown",
            "text/plain",
        ],
    }


def test_the_export_answers_the_zip_it_declares(alice: TestClient) -> None:
    response = alice.get("/api/export")
    assert response.status_code == 200, response.text
    assert media_type(response) in declared(alice, "GET", "/api/export") == {"application/zip"}
    assert response.content.startswith(b"PK")


def test_the_chat_streams_answer_the_event_stream_they_declare(
    alice: TestClient, llm: ScriptedLLMServer
) -> None:
    stream = {"text/event-stream"}
    llm.reply("Quartz.")
    said = alice.post("/api/channels/kitchen/chat", json={"text": "Which worktop?"})
    assert said.status_code == 200, said.text
    assert media_type(said) in declared(alice, "POST", "/api/channels/{channel}/chat") == stream
    found = events(said)
    thread = found[0][1]["message"]["thread"]
    asked = found[0][1]["message"]["id"]
    reply = next(data["message"]["id"] for kind, data in found if kind == "reply")
    turn = "/api/channels/{channel}/threads/{thread}/messages/{message_id}"

    llm.reply("Oak.")
    again = alice.post(f"/api/channels/kitchen/threads/{thread}/messages/{reply}/regenerate")
    assert again.status_code == 200, again.text
    assert media_type(again) in declared(alice, "POST", f"{turn}/regenerate") == stream
    assert "Oak." in [d["message"]["content"] for kind, d in events(again) if kind == "reply"]

    llm.reply("Slate.")
    edited = alice.post(
        f"/api/channels/kitchen/threads/{thread}/messages/{asked}/edit",
        json={"text": "Which floor?"},
    )
    assert edited.status_code == 200, edited.text
    assert media_type(edited) in declared(alice, "POST", f"{turn}/edit") == stream
    assert "Slate." in [d["message"]["content"] for kind, d in events(edited) if kind == "reply"]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("manual.pdf", "application/pdf"),
        ("plan.md", "text/markdown"),
        ("list.txt", "text/plain"),
        ("floor.dwg", "application/octet-stream"),
    ],
)
def test_an_attachment_answers_a_type_it_declares(
    alice: TestClient, app_home: Home, name: str, kind: str
) -> None:
    folder = documents.attachments_dir(projects.get_project(app_home, "kitchen"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(b"kept as it came")
    response = alice.get(f"/api/attachments/kitchen/{name}")
    assert response.status_code == 200, response.text
    assert response.content == b"kept as it came"
    assert media_type(response) == kind
    assert kind in declared(alice, "GET", "/api/attachments/{project}/{name}")
