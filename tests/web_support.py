"""Test support for the web API in-process: a signed-in client, a stream's events, and the
media types the OpenAPI schema declares for a route."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from charlie.adapters.web.app import create_app
from charlie.config import load_settings

PASSWORD = "correct horse battery"


def signed_in(name: str) -> TestClient:
    """A client of a fresh app, signed in as `name` (whose password is PASSWORD), with CSRF."""
    client = TestClient(create_app(load_settings()))
    response = client.post("/api/login", json={"name": name, "password": PASSWORD})
    assert response.status_code == 200, response.text
    client.headers["X-CSRF-Token"] = client.cookies["charlie_csrf"]
    return client


def events(response: Any) -> list[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of a server-sent event stream, in order."""
    found = []
    for block in response.text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        found.append((lines["event"], json.loads(lines["data"])))
    return found


def declared(client: TestClient, method: str, path: str) -> set[str]:
    """The media types the app's OpenAPI schema says `method path` (a route's template, such
    as `/api/voice/say`) answers with a 2xx."""
    operation = client.app.openapi()["paths"][path][method.lower()]  # type: ignore[attr-defined]
    return {
        kind
        for status, response in operation["responses"].items()
        if status.startswith("2")
        for kind in response.get("content", {})
    }


def media_type(response: Any) -> str:
    """A response's media type, without its parameters (`; charset=utf-8`)."""
    return str(response.headers["content-type"]).split(";")[0].strip()
