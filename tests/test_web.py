"""The web API in-process (FastAPI's TestClient), the LLM as the scripted server on loopback."""

from __future__ import annotations

import base64
import tempfile
import typing
from pathlib import Path

import pytest
from fastapi import Response
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from llm_double import ScriptedLLMServer
from support.images import tiny_png
from web_support import PASSWORD, events, signed_in

from charlie import projects
from charlie.adapters.web import apitypes
from charlie.adapters.web.app import ROUTERS, create_app
from charlie.config import load_settings
from charlie.home import Home
from charlie.notes import files as notes
from charlie.users import ensure_user, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


@pytest.fixture
def app_home(home: Home, llm: ScriptedLLMServer) -> Home:
    for name in ("alice", "bob"):
        ensure_user(home.db, name, is_admin=name == "alice")
        set_password(home.db, name, PASSWORD)
    auth = projects.create_project(home, "Auth")
    notes.create_note(
        auth, "JWT refresh tokens", "We rotate the refresh_token on every use.", ["jwt"]
    )
    return home


def test_login_sets_safe_cookies(app_home: Home) -> None:
    client = TestClient(create_app(load_settings()))
    response = client.post("/api/login", json={"name": "alice", "password": PASSWORD})
    cookies = response.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith("charlie_session="))
    assert "HttpOnly" in session and "SameSite=lax" in session and "Secure" not in session
    csrf = next(c for c in cookies if c.startswith("charlie_csrf="))
    assert "HttpOnly" not in csrf
    assert response.json() == {"user": {"name": "alice", "is_admin": True}}


def test_wrong_password_then_rate_limit(app_home: Home) -> None:
    client = TestClient(create_app(load_settings()))
    for _ in range(5):
        wrong = client.post("/api/login", json={"name": "alice", "password": "nope-nope"})
        assert wrong.status_code == 401
        assert wrong.json()["error"] == "Wrong name or password."
    limited = client.post("/api/login", json={"name": "alice", "password": PASSWORD})
    assert limited.status_code == 429
    assert "after ten minutes" in limited.json()["error"]


def test_chat_streams_trace_tokens_and_reply(
    alice: TestClient, llm: ScriptedLLMServer, app_home: Home
) -> None:
    llm.tool_calls([("search_notes", {"query": "refresh tokens"})])
    llm.reply("We rotate them on every use.")
    response = alice.post("/api/channels/auth/chat", json={"text": "What did we decide?"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    kinds = [kind for kind, _ in events(response)]
    assert kinds[:2] == ["saved", "trace"] and kinds[-1] == "done"
    assert kinds.index("trace") < kinds.index("token") < kinds.index("reply")
    tokens = "".join(d["text"] for k, d in events(response) if k == "token")
    assert tokens == "We rotate them on every use."
    stored = alice.get("/api/channels/auth/messages").json()
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["trace"][1]["name"] == "search_notes"


def test_llm_down_is_an_error_event_and_the_message_is_kept(
    app_home: Home, monkeypatch: pytest.MonkeyPatch, dead_url: str
) -> None:
    with signed_in("alice") as client:
        response = client.post("/api/channels/auth/chat", json={"text": "Anyone there?"})
        kinds = events(response)
        assert kinds[-2][0] == "error" and dead_url in kinds[-2][1]["error"]
        assert kinds[-2][1]["kind"] == "LLMUnavailable"
        assert [m["content"] for m in client.get("/api/channels/auth/messages").json()] == [
            "Anyone there?"
        ]


def test_private_channel_is_private(
    alice: TestClient, bob: TestClient, llm: ScriptedLLMServer
) -> None:
    llm.reply("Your secret is safe.")
    alice.post("/api/channels/private/chat", json={"text": "ALICE-SECRET gift idea"})
    alice.put(
        "/api/channels/private/memory",
        json={"summary": "ALICE-PRIVATE-SUMMARY", "decisions": [], "quotes": []},
    )
    for path in (
        "/api/channels/private/messages",
        "/api/channels/private/memory",
        "/api/channels/private/memory/history",
    ):
        assert "ALICE" not in bob.get(path).text
        assert "ALICE" in alice.get(path).text
    found = bob.get("/api/search", params={"q": "ALICE-SECRET gift"}).json()
    assert found["results"] == []
    for bad in ("private:alice", "..%2Fprivate", "alice"):
        assert bob.get(f"/api/channels/{bad}/messages").status_code in (400, 404)


def test_every_route_needs_a_session(app_home: Home) -> None:
    client = TestClient(create_app(load_settings()))
    spec = client.get("/api/openapi.json").json()
    checked = 0
    for path, methods in spec["paths"].items():
        if path in ("/api/login", "/api/household"):  # signing in; whether anyone can yet
            continue
        url = path.replace("{channel}", "private").replace("{slug}", "auth")
        url = url.replace("{project}", "auth").replace("{name}", "jwt-refresh-tokens")
        url = url.replace("{suggestion_id}", "1")
        for method in methods:
            response = client.request(method.upper(), url, json={}, params={"q": "x"})
            assert response.status_code == 401, (method, url, response.text)
            assert response.json() == {"error": "Sign in first.", "kind": "HTTPError"}
            checked += 1
    assert checked >= 20


def test_state_changes_need_the_csrf_header(alice: TestClient) -> None:
    token = alice.headers.pop("X-CSRF-Token")
    refused = alice.post("/api/projects", json={"name": "Garden"})
    assert refused.status_code == 403 and "X-CSRF-Token" in refused.json()["error"]
    alice.headers["X-CSRF-Token"] = "forged"
    assert alice.post("/api/projects", json={"name": "Garden"}).status_code == 403
    alice.headers["X-CSRF-Token"] = token
    assert alice.post("/api/projects", json={"name": "Garden"}).status_code == 201


def test_bad_input_gets_clear_errors(alice: TestClient) -> None:
    traversal = alice.get("/api/notes/auth/../../../etc/passwd")
    assert traversal.status_code in (400, 404)
    assert alice.get("/api/notes", params={"project": "../etc"}).status_code == 400
    malformed = alice.post(
        "/api/projects", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 400
    assert malformed.json()["error"].startswith("The request body is not valid JSON")
    missing = alice.post("/api/projects", json={})
    assert missing.status_code == 400 and "name" in missing.json()["error"]
    huge = alice.post(
        "/api/notes",
        content=b"x" * (17 * 1024 * 1024),
        headers={"content-type": "application/json"},
    )
    assert huge.status_code == 413
    empty = alice.post("/api/channels/auth/chat", json={"text": "  "})
    assert empty.status_code == 400 and "empty" in empty.json()["error"]


def test_memory_edit_history_and_undo(alice: TestClient, app_home: Home) -> None:
    first = alice.get("/api/channels/auth/memory").json()
    assert first["summary"] == "" and first["error"] is None
    saved = alice.put(
        "/api/channels/auth/memory",
        json={
            "summary": "Auth for the app.",
            "decisions": ["Use JWT"],
            "quotes": [{"speaker": "alice", "text": "Rotate always."}],
        },
    )
    assert saved.status_code == 200
    path = app_home.settings.projects_dir / "auth" / "memory.md"
    assert "- Use JWT" in path.read_text()
    history = alice.get("/api/channels/auth/memory/history").json()
    assert history[0]["source"] == "edit"
    assert "+- Use JWT" in history[0]["diff"]
    undone = alice.post("/api/channels/auth/memory/undo", json={}).json()
    assert undone["decisions"] == []
    path.write_text("## Decisions\n- a\n## Decisions\n- b\n")
    broken = alice.get("/api/channels/auth/memory").json()
    assert "a second '## Decisions'" in broken["error"]
    refused = alice.put(
        "/api/channels/auth/memory", json={"summary": "x", "decisions": [], "quotes": []}
    )
    assert refused.status_code == 400
    assert path.read_text() == "## Decisions\n- a\n## Decisions\n- b\n"


def test_notes_search_and_usage(alice: TestClient, app_home: Home) -> None:
    listed = alice.get("/api/notes", params={"project": "auth"}).json()
    assert [n["id"] for n in listed["notes"]] == ["auth/jwt-refresh-tokens"]
    opened = alice.get("/api/notes/auth/jwt-refresh-tokens").json()
    assert "rotate the refresh_token" in opened["body"]
    made = alice.post(
        "/api/notes",
        json={"project": "auth", "title": "Cookies", "body": "HttpOnly cookies.", "tags": ["web"]},
    )
    assert made.status_code == 201 and made.json()["id"] == "auth/cookies"
    edited = alice.put("/api/notes/auth/cookies", json={"body": "HttpOnly, SameSite cookies."})
    assert edited.json()["body"].startswith("HttpOnly, SameSite")
    tagged = alice.post("/api/notes/auth/cookies/tags", json={"add": ["security"]})
    assert tagged.json()["tags"] == ["web", "security"]
    found = alice.get("/api/search", params={"q": "refresh_token", "mode": "fallback"}).json()
    assert found["results"][0]["id"] == "auth/jwt-refresh-tokens"
    assert found["fallback_reason"] == "the query has literals: refresh_token"
    assert "cosine" in found["results"][0]["why"]
    assert alice.post("/api/usage", json={"kind": "tag", "tag": "jwt"}).status_code == 201
    kinds = [r[0] for r in app_home.db.execute("SELECT kind FROM usage_events ORDER BY id")]
    assert kinds == ["view", "tag", "tag"]


def test_projects_and_settings(alice: TestClient) -> None:
    assert [p["slug"] for p in alice.get("/api/projects").json()["projects"]] == ["auth"]
    changed = alice.patch(
        "/api/projects/auth",
        json={"style": "Brief.", "distill_every": 3, "write_tools": ["record_decision"]},
    )
    assert changed.json()["write_tools"] == ["record_decision"]
    bad = alice.patch("/api/projects/auth", json={"write_tools": ["rm_rf"]})
    assert bad.status_code == 400 and "rm_rf" in bad.json()["error"]
    assert alice.patch("/api/projects/auth", json={"distill_every": 0}).status_code == 400
    assert alice.post("/api/projects", json={"name": "Auth"}).status_code == 409


def test_only_an_administrator_changes_the_write_tools(alice: TestClient, bob: TestClient) -> None:
    refused = bob.patch("/api/projects/auth", json={"write_tools": ["record_decision"]})
    assert refused.status_code == 403
    assert "Only an administrator" in refused.json()["error"]
    assert bob.patch("/api/projects/auth", json={"style": "Terse."}).status_code == 200
    assert alice.get("/api/projects/auth").json()["write_tools"] is None  # unchanged: all


@pytest.mark.parametrize("name", ["Private", " PRIVATE ", "Ｐｒｉｖａｔｅ"])
def test_no_shared_project_looks_like_the_private_channel(alice: TestClient, name: str) -> None:
    created = alice.post("/api/projects", json={"name": name})
    assert created.status_code == 400 and "private channel" in created.json()["error"]
    renamed = alice.patch("/api/projects/auth", json={"name": name})
    assert renamed.status_code == 400


def test_health_reports_the_llm(alice: TestClient, llm: ScriptedLLMServer) -> None:
    health = alice.get("/api/health").json()
    assert health["llm"]["reachable"] and health["llm"]["models"] == ["test-model"]


def test_suggestion_accept_belongs_to_its_owner(
    alice: TestClient, bob: TestClient, llm: ScriptedLLMServer
) -> None:
    llm.reply("Rotation is good.")
    response = alice.post("/api/channels/auth/chat", json={"text": "refresh token rotation"})
    offered = [d for k, d in events(response) if k == "suggestions"]
    assert offered, "the related note is suggested"
    suggestion = offered[0]["suggestions"][0]
    assert bob.post(f"/api/suggestions/{suggestion['id']}/accept").status_code == 404
    accepted = alice.post(f"/api/suggestions/{suggestion['id']}/accept")
    assert accepted.json() == {"note": "auth/jwt-refresh-tokens"}


def test_a_memory_file_that_is_not_utf8_is_shown_with_its_error(
    alice: TestClient, app_home: Home
) -> None:
    path = projects.get_project(app_home, "auth").memory_path
    path.write_bytes(b"# Memory\n\n## Summary\n\n\xff\xfe broken\n")
    answer = alice.get("/api/channels/auth/memory")
    assert answer.status_code == 200, answer.text
    assert "UTF-8" in answer.json()["error"]
    assert answer.json()["summary"] == ""


def test_every_json_route_declares_what_it_answers(charlie_home: Path) -> None:
    """Each route's answer is a Pydantic model in `/api/openapi.json` (schemas.py) — or the
    route answers a stream, a file or audio, which a model cannot describe."""
    untyped = []
    for module in ROUTERS:
        for route in module.router.routes:
            if not isinstance(route, APIRoute):
                continue  # the voice websocket
            returns = typing.get_type_hints(route.endpoint).get("return")
            raw = isinstance(returns, type) and issubclass(returns, Response)
            documented = any("model" in r for r in route.responses.values())
            if route.response_model is None and not raw and not documented:
                untyped.append(f"{sorted(route.methods)} {route.path}")
    assert untyped == []
    schema = create_app(load_settings()).openapi()["paths"]["/api/channels/{channel}/memory"]["get"]
    answer = schema["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/MemoryFile"}


def test_the_apps_jsdoc_types_are_generated_from_the_current_schema(charlie_home: Path) -> None:
    """static/api-types.js is what `./scripts/api-types` writes now:
    regenerate it when a response model changes."""
    written = (Path(apitypes.__file__).parent / "static" / "api-types.js").read_text()
    current = apitypes.typedefs(create_app(load_settings()).openapi())
    assert written == current, "run ./scripts/api-types"
    assert "@typedef {Object} MemoryFile" in written
    assert " * @property {Array<DecisionOut>} decisions" in written


def test_an_image_is_in_a_folder_only_while_its_answer_streams(
    alice: TestClient,
    llm: ScriptedLLMServer,
    app_home: Home,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A message's images wait in a temporary folder for the model, which goes when the
    answer ends; a message without images makes no folder (one a killed server would leave)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    folders: list[list[str]] = []  # what each folder held while the model answered

    def answer(request: dict[str, typing.Any]) -> str:
        folders.append([" ".join(sorted(f.name for f in d.iterdir())) for d in scratch.iterdir()])
        return "A blue tile."

    llm.respond(answer)
    llm.respond(answer)
    png = base64.b64encode(tiny_png(tmp_path / "tile.png").read_bytes()).decode()
    with_image = {"text": "What colour?", "images": [f"data:image/png;base64,{png}"]}
    assert events(alice.post("/api/channels/auth/chat", json=with_image))[-1][0] == "done"
    assert events(alice.post("/api/channels/auth/chat", json={"text": "And?"}))[-1][0] == "done"
    assert folders == [["image-0.png"], []]  # the second made none
    assert list(scratch.iterdir()) == []
