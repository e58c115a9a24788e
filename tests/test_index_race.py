"""The search index under concurrency: parallel requests of one server, and several processes
(web, Discord, CLI) refreshing one data home at once."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from live_server import live_server, signed_in_client, together
from web_support import PASSWORD

from charlie import projects
from charlie.config import load_settings
from charlie.home import Home, Shared
from charlie.notes import files as notes
from charlie.retrieval.embeddings import LocalEmbedder
from charlie.retrieval.index import Index
from charlie.users import ensure_user, set_password

OAK_NOTES = [
    ("Oak worktops", "Oiled oak worktops along the kitchen wall."),
    ("Oak floor", "Reclaimed oak boards for the hall floor."),
    ("Oak table", "An oak table seating eight in the dining room."),
    ("Oak door", "A solid oak front door with a brass knocker."),
    ("Oak shelves", "Floating oak shelves above the desk."),
]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    model = LocalEmbedder()
    model.load()
    return model


def test_parallel_searches_after_new_notes_all_answer(home: Home) -> None:
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    projects.create_project(home, "House")
    with live_server() as url:
        clients = [signed_in_client(url, "alice") for _ in range(12)]
        try:
            assert clients[0].get("/api/search", params={"q": "oak"}).status_code == 200
            for round_ in range(2):  # each round makes the index stale, then 12 refresh at once
                for title, body in OAK_NOTES:
                    made = clients[0].post(
                        "/api/notes",
                        json={"project": "house", "title": f"{title} {round_}", "body": body},
                    )
                    assert made.status_code == 201, made.text

                def search(i: int) -> httpx.Response:
                    return clients[i].get("/api/search", params={"q": "oak", "limit": 50})

                answers = together(12, search)
                assert [a.status_code for a in answers] == [200] * 12, [
                    a.text for a in answers if a.status_code != 200
                ]
                found = [sorted(r["id"] for r in a.json()["results"]) for a in answers]
                expected = sorted(
                    f"house/{title.lower().replace(' ', '-')}-{r}"
                    for r in range(round_ + 1)
                    for title, _ in OAK_NOTES
                )
                assert found == [expected] * 12
        finally:
            for client in clients:
                client.close()


def _house(home: Home) -> None:
    house = projects.create_project(home, "House")
    for title, body in OAK_NOTES:
        notes.create_note(house, title, body)


OAK_NAMES = sorted((title.lower().replace(" ", "-"), 1) for title, _ in OAK_NOTES)


def _indexed(home: Home) -> list[tuple[str, int]]:
    index = Index(home, LocalEmbedder())
    rows = index.db.execute(
        "SELECT notes.name, count(chunks.id) FROM notes JOIN chunks ON chunks.note_id = notes.id"
        " GROUP BY notes.id ORDER BY notes.name"
    ).fetchall()
    return [(row[0], row[1]) for row in rows]


def test_threads_refreshing_one_process_share_one_lock(home: Home, embedder: LocalEmbedder) -> None:
    _house(home)
    shared = Shared()
    homes = [Home.open(load_settings(), shared=shared) for _ in range(8)]
    try:
        reports = together(8, lambda i: Index(homes[i], embedder).refresh())
    finally:
        for opened in homes:
            opened.close()
    assert sorted(len(r.added) for r in reports) == [0] * 7 + [5]  # one did it, seven waited
    assert _indexed(home) == OAK_NAMES


def test_processes_refreshing_at_once_never_collide(
    home: Home, embedder: LocalEmbedder, charlie_home: Path
) -> None:
    """Each `shared` dict stands for one process (web, Discord, CLI): they share no lock, only
    the files, so each write must re-read what is indexed inside its transaction."""
    _house(home)
    homes = [Home.open(load_settings(), shared=Shared()) for _ in range(6)]
    try:
        reports = together(6, lambda i: Index(homes[i], embedder).refresh())
    finally:
        for opened in homes:
            opened.close()
    assert all(not r.problems for r in reports)
    assert sum(len(r.added) for r in reports) >= 5
    assert _indexed(home) == OAK_NAMES
