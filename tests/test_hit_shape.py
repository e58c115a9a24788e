"""One search hit, one shape: the web API's results, `charlie search --json` and the MCP tool
`search_notes` all show what `Hit.public` makes, so the three agree for the same hit."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from html import unescape

from conftest import Cli
from web_support import PASSWORD, signed_in

from charlie import projects
from charlie.adapters.mcp.catalog import Caller, call_tool
from charlie.home import Home
from charlie.notes import files as notes
from charlie.retrieval.search import PublicHit
from charlie.users import ensure_user, set_password

QUERY = "oak worktop oil"


def test_web_cli_and_mcp_show_the_same_hit_alike(home: Home, charlie: Cli) -> None:
    alice = ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    kitchen = projects.create_project(home, "Kitchen")
    notes.create_note(
        kitchen, "Worktops", "The oak worktop wants hardwax oil twice a year.", ["oak"]
    )
    notes.create_note(kitchen, "Tiles", "Grey tiles behind the hob.", ["tiles"])

    with signed_in("alice") as web:
        answer = web.get("/api/search", params={"q": QUERY, "project": "kitchen"})
    assert answer.status_code == 200, answer.text
    from_web = answer.json()["results"][0]
    printed = charlie("search", QUERY, "--json", "--explain", "-p", "kitchen").stdout
    from_cli = json.loads(printed)["results"][0]
    assert from_web["id"] == "kitchen/worktops"
    assert from_cli == from_web
    assert list(from_cli) == [f.name for f in fields(PublicHit)]  # the web API's names

    reply = call_tool(home, Caller(alice), "search_notes", {"query": QUERY, "project": "kitchen"})
    assert not reply.error, reply.text
    opening = re.search(r"<note ([^>]*)>\n(.*?)\n</note>", reply.text, re.DOTALL)
    assert opening is not None, reply.text
    shown = {k: unescape(v) for k, v in re.findall(r'(\w+)="([^"]*)"', opening.group(1))}
    assert shown == {
        "id": from_web["id"],
        "title": from_web["title"],
        "tags": " ".join(f"#{tag}" for tag in from_web["tags"]),
        "score": f"{from_web['score']:.2f}",
        "why": from_web["why"],
    }
    assert unescape(opening.group(2)) == from_web["snippet"]
