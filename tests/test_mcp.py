"""`charlie mcp`: Charlie's notes, memory and recall served to other apps over MCP, driven by
the SDK's own client — over stdio (a real `charlie mcp --user NAME` process) and over
streamable HTTP (a real `charlie serve` on loopback, personal bearer tokens)."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import httpx2
import pytest
import uvicorn
from live_server import free_port
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from charlie import conversations, projects
from charlie.adapters.mcp.catalog import catalog
from charlie.adapters.mcp.server import tool_list
from charlie.adapters.web.cli import server_config
from charlie.config import load_settings
from charlie.home import Home
from charlie.household import tokens
from charlie.memory import layers as memory
from charlie.notes import files as notes
from charlie.users import ensure_user

CHARLIE = str(Path(sys.executable).with_name("charlie"))
ALICE_SECRET = "The surprise party for Bob is on June 3rd"
T = TypeVar("T")


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(scenario)


def text(result: Any) -> str:
    return "\n".join(part.text for part in result.content)


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def household(root: Path) -> None:
    """alice and bob; project garden with a note; project archive whose project.toml allows
    no write tools; alice's private memory and a private message only she may read."""
    with Home.open(load_settings(home=root)) as home:
        alice = ensure_user(home.db, "alice")
        ensure_user(home.db, "bob")
        garden = projects.create_project(home, "Garden", slug="garden")
        notes.create_note(garden, "Tomatoes", "Plant tomatoes after the last frost.", ["veg"])
        projects.create_project(home, "Archive", slug="archive")
        projects.update_project(home, "archive", write_tools=[])
        private = conversations.private_channel(home, alice)
        memory.save(home, private, memory.Memory(decisions=[ALICE_SECRET]), "edit")
        conversations.add_message(home, private, "user", ALICE_SECRET + ".", user=alice)


# ---------------------------------------------------------------- the tool list


def test_the_tool_list_is_small_and_says_which_tools_only_read() -> None:
    listed = tool_list()
    names = {t.name for t in listed}
    assert names == {
        "list_projects",
        "search_notes",
        "read_note",
        "read_memory",
        "recall",
        "record_decision",
        "write_note",
        "append_to_note",
        "tag_note",
    }
    writes = {t.name for t in listed if t.annotations and not t.annotations.read_only_hint}
    assert writes == {name for name, tool in catalog().items() if tool.writes}
    assert writes == {"record_decision", "write_note", "append_to_note", "tag_note"}
    as_json = json.dumps(
        [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed]
    )
    assert len(as_json) / 4 < 2000  # about 4 characters a token: well under 2k tokens


# ---------------------------------------------------------------- stdio


@asynccontextmanager
async def over_stdio(home: Path, *args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=CHARLIE, args=["mcp", *args], env={"CHARLIE_HOME": str(home)}
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def test_over_stdio_search_read_write_and_decide_as_the_named_person(charlie_home: Path) -> None:
    household(charlie_home)

    async def scenario() -> dict[str, Any]:
        async with over_stdio(charlie_home, "--user", "alice") as s:
            out = {"tools": [t.name for t in (await s.list_tools()).tools]}
            out["uris"] = [str(r.uri) for r in (await s.list_resources()).resources]
            out["search"] = await s.call_tool("search_notes", {"query": "when to plant tomatoes"})
            out["read"] = await s.call_tool("read_note", {"note": "garden/tomatoes"})
            out["write"] = await s.call_tool(
                "write_note",
                {"project": "garden", "title": "Compost", "body": "Turn the heap monthly."},
            )
            out["found"] = await s.call_tool("search_notes", {"query": "compost heap"})
            out["decide"] = await s.call_tool(
                "record_decision", {"project": "garden", "text": "We grow no potatoes."}
            )
            out["locked"] = await s.call_tool(
                "write_note", {"project": "archive", "title": "x", "body": "y"}
            )
            out["bad"] = await s.call_tool("search_notes", {"query": "x", "limit": "many"})
            out["missing"] = await s.call_tool("read_note", {"note": "garden/nothing-here"})
            out["private"] = await s.call_tool("read_memory", {"project": "private"})
            return out

    out = run(scenario)
    assert out["tools"][0] == "list_projects" and "write_note" in out["tools"]
    assert "charlie://projects/garden/notes/tomatoes" in out["uris"]
    assert "charlie://projects/garden/memory" in out["uris"]
    assert "charlie://private/memory" in out["uris"]

    assert not out["search"].is_error
    assert '<note id="garden/tomatoes" title="Tomatoes"' in text(out["search"])
    assert 'why="score ' in text(out["search"])  # each hit says why it ranked
    assert "Plant tomatoes after the last frost." in text(out["read"])
    assert text(out["read"]).startswith("<note ")  # note text comes inside the data fence

    assert text(out["write"]) == "Created note garden/compost."
    written = charlie_home / "projects" / "garden" / "notes" / "compost.md"
    assert "Turn the heap monthly." in written.read_text()
    assert 'id="garden/compost"' in text(out["found"])  # the index knows it at once

    assert text(out["decide"]) == "I recorded the decision: We grow no potatoes."
    with Home.open(load_settings(home=charlie_home)) as home:
        garden = projects.get_project(home, "garden")
        channel = conversations.shared_channel(home, garden)
        newest = memory.revisions(home, channel)[0]
        citations = home.db.execute(
            "SELECT note FROM usage_events WHERE kind = 'cited' AND user_id = "
            "(SELECT id FROM users WHERE name = 'alice')"
        ).fetchall()
    assert newest.source == "tool" and newest.memory.texts == ["We grow no potatoes."]
    assert "We grow no potatoes." in garden.memory_path.read_text()
    assert [row[0] for row in citations] == ["garden/tomatoes"]  # read_note cites, as chat

    assert out["locked"].is_error
    assert text(out["locked"]) == (
        "Refused: create_note is not allowed in project archive "
        "(its project.toml's write_tools does not name it)."
    )
    assert not (charlie_home / "projects" / "archive" / "notes" / "x.md").exists()
    assert out["bad"].is_error
    assert text(out["bad"]) == "Error: search_notes: argument limit must be an integer, not 'many'."
    assert out["missing"].is_error
    assert text(out["missing"]).startswith("Error: There is no note 'nothing-here'")
    assert ALICE_SECRET in text(out["private"])


def test_over_stdio_read_only_refuses_every_write_before_it_runs(charlie_home: Path) -> None:
    household(charlie_home)

    async def scenario() -> list[Any]:
        async with over_stdio(charlie_home, "--user", "alice", "--read-only") as s:
            return [
                await s.call_tool("write_note", {"project": "garden", "title": "A", "body": "b"}),
                await s.call_tool("record_decision", {"project": "garden", "text": "No."}),
                await s.call_tool("tag_note", {"project": "garden", "note": "tomatoes", "tags": 1}),
                await s.call_tool("search_notes", {"query": "tomatoes"}),
            ]

    write, decide, tag, search = run(scenario)
    for refused in (write, decide, tag):
        assert refused.is_error
        assert "this token is read-only; nothing was changed" in text(refused)
    assert not search.is_error and "garden/tomatoes" in text(search)
    assert not (charlie_home / "projects" / "garden" / "notes" / "a.md").exists()
    assert not (charlie_home / "projects" / "garden" / "memory.md").exists()


def test_over_stdio_another_persons_private_channel_is_out_of_reach(charlie_home: Path) -> None:
    household(charlie_home)

    async def scenario() -> list[str]:
        async with over_stdio(charlie_home, "--user", "bob") as s:
            replies = [
                await s.call_tool("read_memory", {"project": "private"}),
                await s.call_tool("recall", {"question": "surprise party June"}),
                await s.call_tool("recall", {"question": "surprise party", "project": "private"}),
                await s.call_tool("search_notes", {"query": "surprise party"}),
                await s.call_tool("read_memory", {"project": "alice"}),
                await s.call_tool("read_note", {"note": "private/memory"}),
            ]
            seen = [text(r) for r in replies]
            resource = await s.read_resource("charlie://private/memory")
            seen += [part.text for part in resource.contents]  # type: ignore[union-attr]
            prompt = await s.get_prompt("continue_project", {"project": "private"})
            seen += [m.content.text for m in prompt.messages]  # type: ignore[union-attr]
            for uri in ("charlie://private/alice/memory", "charlie://projects/alice/memory"):
                with pytest.raises(MCPError) as refused:
                    await s.read_resource(uri)
                seen.append(str(refused.value))
            return seen

    seen = run(scenario)
    assert all(ALICE_SECRET not in s and "June" not in s for s in seen), seen
    assert "bob (private)" in seen[6]


def test_over_stdio_the_owner_recalls_her_own_private_messages(charlie_home: Path) -> None:
    """The privacy test above can fail: alice herself finds what bob must not."""
    household(charlie_home)

    async def scenario() -> str:
        async with over_stdio(charlie_home, "--user", "alice") as s:
            return text(await s.call_tool("recall", {"question": "surprise party June"}))

    assert ALICE_SECRET in run(scenario)


# ---------------------------------------------------------------- streamable HTTP


@dataclass
class Served:
    url: str
    home: Path
    alice: str
    alice_read_only: str
    bob: str
    revoked: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One real `charlie serve` for the module, its /mcp reached with personal tokens."""
    root = tmp_path_factory.mktemp("mcp") / "home"
    household(root)
    with Home.open(load_settings(home=root)) as home:
        alice, bob = ensure_user(home.db, "alice"), ensure_user(home.db, "bob")
        secrets = {
            "alice": tokens.create(home.db, alice, label="app")[1],
            "alice_read_only": tokens.create(home.db, alice, read_only=True)[1],
            "bob": tokens.create(home.db, bob)[1],
        }
        old, secrets["revoked"] = tokens.create(home.db, alice)
        tokens.revoke(home.db, old.id, by=alice)
    settings = load_settings(home=root)
    server = uvicorn.Server(server_config(settings, "127.0.0.1", free_port()))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield Served(f"http://127.0.0.1:{server.config.port}/mcp", root, **secrets)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@asynccontextmanager
async def over_http(url: str, secret: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def call_over_http(
    served: Served, secret: str | None, work: Callable[[ClientSession], Awaitable[T]]
) -> T:
    async def scenario() -> T:
        async with over_http(served.url, secret) as session:
            return await work(session)

    return run(scenario)


def test_over_http_a_token_acts_as_its_owner(served: Served) -> None:
    async def work(s: ClientSession) -> list[Any]:
        return [
            await s.list_tools(),
            await s.call_tool("search_notes", {"query": "tomatoes", "project": "garden"}),
            await s.call_tool(
                "append_to_note",
                {"project": "garden", "note": "tomatoes", "text": "Stake them early."},
            ),
            await s.call_tool("read_memory", {"project": "private"}),
            await s.read_resource("charlie://projects/garden/notes/tomatoes"),
        ]

    listed, search, appended, private, resource = call_over_http(served, served.alice, work)
    assert len(listed.tools) == 9
    assert "garden/tomatoes" in text(search) and not search.is_error
    assert text(appended) == "Appended to garden/tomatoes."
    assert ALICE_SECRET in text(private)
    assert "Stake them early." in resource.contents[0].text
    note = served.home / "projects" / "garden" / "notes" / "tomatoes.md"
    assert "Stake them early." in note.read_text()
    with Home.open(load_settings(home=served.home)) as home:
        views = home.db.execute(
            "SELECT u.name, e.note FROM usage_events e JOIN users u ON u.id = e.user_id "
            "WHERE e.kind = 'view'"
        ).fetchall()
    assert [tuple(v) for v in views] == [("alice", "garden/tomatoes")]


def test_over_http_a_read_only_token_reads_but_never_writes(served: Served) -> None:
    async def work(s: ClientSession) -> list[Any]:
        return [
            await s.call_tool("read_memory", {"project": "garden"}),
            await s.call_tool("record_decision", {"project": "garden", "text": "Dig it all up."}),
            await s.call_tool("write_note", {"project": "garden", "title": "RO", "body": "x"}),
        ]

    read, decide, write = call_over_http(served, served.alice_read_only, work)
    assert not read.is_error
    assert set(json.loads(text(read))) == {"summary", "decisions", "quotes", "superseded"}
    assert decide.is_error and write.is_error
    assert text(decide).startswith("Refused: record_decision writes, and this token is read-only")
    memory_md = served.home / "projects" / "garden" / "memory.md"
    assert not memory_md.exists() or "Dig it all up." not in memory_md.read_text()
    assert not (served.home / "projects" / "garden" / "notes" / "ro.md").exists()


@pytest.mark.parametrize(
    ("which", "said"),
    [
        (None, "Error: Charlie's MCP server needs a personal token"),
        ("revoked", "Error: This token was revoked on "),
        ("chk_not-a-real-token", "Error: This token is not valid"),
    ],
)
def test_over_http_no_valid_token_no_session(served: Served, which: str | None, said: str) -> None:
    secret = getattr(served, which) if which in ("revoked",) else which

    async def work(s: ClientSession) -> Any:
        return await s.list_tools()

    with pytest.raises(BaseExceptionGroup) as refused:  # the client's task groups wrap it
        call_over_http(served, secret, work)
    (error,) = leaves(refused.value)
    assert isinstance(error, MCPError)
    assert str(error).startswith(said)


def test_over_http_bob_cannot_reach_alices_private_channel(served: Served) -> None:
    async def work(s: ClientSession) -> list[str]:
        seen = [
            text(await s.call_tool("read_memory", {"project": "private"})),
            text(await s.call_tool("recall", {"question": "surprise party June"})),
            text(await s.call_tool("search_notes", {"query": "surprise party"})),
        ]
        resource = await s.read_resource("charlie://private/memory")
        seen += [part.text for part in resource.contents]  # type: ignore[union-attr]
        prompt = await s.get_prompt("continue_project", {"project": "private"})
        seen += [m.content.text for m in prompt.messages]  # type: ignore[union-attr]
        return seen

    seen = call_over_http(served, served.bob, work)
    assert all("June" not in s for s in seen), seen
    assert "bob (private)" in seen[3]


def test_over_http_pages_of_other_sites_and_rebound_names_are_refused(served: Served) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Authorization": f"Bearer {served.alice}", "Accept": "application/json"}
    evil_origin = httpx.post(
        served.url, json=body, headers=headers | {"Origin": "http://evil.test"}
    )
    assert evil_origin.status_code == 403
    assert "http://evil.test" in evil_origin.json()["error"]["message"]
    rebound = httpx.post(served.url, json=body, headers=headers | {"Host": "evil.test:80"})
    assert rebound.status_code == 421
    no_token = httpx.post(served.url, json=body, headers={"Accept": "application/json"})
    assert no_token.status_code == 401
    assert no_token.headers["www-authenticate"].startswith('Bearer error="invalid_token"')


def test_the_web_apps_mcp_answers_to_the_names_it_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from starlette.testclient import TestClient

    from charlie.adapters.mcp.http import web_app

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    for allowed, expected in (("", 421), ("charlie.home.arpa", 401)):
        monkeypatch.setenv("CHARLIE_MCP_ALLOWED_HOSTS", allowed)
        app = web_app(load_settings(), {})
        with TestClient(app, base_url="http://charlie.home.arpa") as client:
            answer = client.post("/mcp", json=body, headers=headers)
        assert answer.status_code == expected, answer.text
