"""Requests at the edges: ids past SQLite's integers, a multipart filename of 5,000
characters, and the app page's Content-Security-Policy (issue 23)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from web_support import PASSWORD

from charlie.home import Home
from charlie.projects import create_project
from charlie.users import ensure_user, set_password

BIG = 2**63  # one past SQLite's largest integer


@pytest.fixture
def app_home(home: Home) -> Home:
    ensure_user(home.db, "alice", is_admin=True)
    set_password(home.db, "alice", PASSWORD)
    create_project(home, "Kitchen")
    return home


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"/api/channels/kitchen/messages?thread={BIG}"),
        ("PATCH", f"/api/channels/kitchen/threads/{BIG}"),
        ("GET", f"/api/channels/kitchen/messages?around={10**26}"),
        ("POST", f"/api/channels/kitchen/threads/{BIG}/messages/1/forget"),
        ("POST", f"/api/channels/kitchen/threads/1/messages/{BIG}/forget"),
    ],
)
def test_an_id_out_of_range_is_a_json_404(alice: TestClient, method: str, path: str) -> None:
    answer = alice.request(method, path, json={"title": "x"} if method == "PATCH" else {})
    assert answer.status_code in (400, 404), answer.text
    assert answer.headers["content-type"].startswith("application/json")
    assert set(answer.json()) >= {"error", "kind"}


def test_a_very_long_upload_filename_gets_the_documented_error_shape(alice: TestClient) -> None:
    answer = alice.post(
        "/api/notes/upload",
        data={"project": "kitchen"},
        files={"file": ("x" * 5000 + ".txt", b"hello", "text/plain")},
    )
    assert answer.status_code in (400, 413), answer.text
    body = answer.json()
    assert "detail" not in body and set(body) >= {"error", "kind"}


def test_the_app_page_sends_a_content_security_policy(alice: TestClient) -> None:
    page = alice.get("/")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "object-src 'none'" in policy
    assert "unsafe-inline" not in policy
    assert "content-security-policy" not in alice.get("/api/health").headers
