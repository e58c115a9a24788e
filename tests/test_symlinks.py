"""Symbolic links are never followed where notes are read: a link could lead to any file
the server can read. Import skips them, naming each; the index and the note listing report
them as problems; reading a note refuses them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Cli
from fastapi.testclient import TestClient
from web_support import PASSWORD, signed_in

from charlie import projects
from charlie.config import load_settings
from charlie.conversations import shared_channel
from charlie.errors import CharlieError, MemoryFormatError
from charlie.home import Home
from charlie.memory import layers as memory
from charlie.notes import files as notes
from charlie.notes.files import IMPORT_LINK_REASON, LINK_REASON, NoteFormatError
from charlie.projects import Project
from charlie.retrieval.embeddings import LocalEmbedder
from charlie.retrieval.index import Index
from charlie.retrieval.search import Searcher
from charlie.users import ensure_user, set_password

SECRET = "Zanzibar-7 is the vault combination"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Files the server can read but that are no one's notes."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    (folder / "secret.md").write_text(f"# Secret\n{SECRET}")
    return folder


@pytest.fixture
def project(home: Home) -> Project:
    made = projects.create_project(home, "House")
    notes.create_note(made, "Kitchen plan", "Oak worktops and a tiled floor.")
    return made


def test_import_skips_links_and_names_each(charlie: Cli, tmp_path: Path, outside: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "real.md").write_text("# Real\nA note of my own.")
    (vault / "leak.md").symlink_to(outside / "secret.txt")
    (vault / "linked").symlink_to(outside, target_is_directory=True)
    result = charlie("notes", "import", str(vault), "-p", "vault")
    assert result.exit_code == 0
    assert result.stderr == (
        f"Skipped {vault / 'leak.md'}: {IMPORT_LINK_REASON}\n"
        f"Skipped {vault / 'linked'}: {IMPORT_LINK_REASON}\n"
    )
    assert result.stdout == "Imported 1 notes, skipped 2.\n"
    folder = load_settings().projects_dir / "vault" / "notes"
    assert sorted(p.name for p in folder.rglob("*")) == ["real.md"]
    assert SECRET not in charlie("search", "vault combination Zanzibar").stdout


def test_import_never_writes_through_a_link_in_the_notes_folder(
    project: Project, tmp_path: Path, outside: Path
) -> None:
    (notes.notes_dir(project) / "sub").symlink_to(outside, target_is_directory=True)
    vault = tmp_path / "vault"
    (vault / "sub").mkdir(parents=True)
    (vault / "sub" / "new.md").write_text("would land outside")
    report = notes.import_folder(project, vault)
    assert report.imported == []
    assert [(p.path, p.reason) for p in report.skipped] == [
        (
            vault / "sub" / "new.md",
            f"would be written through {notes.notes_dir(project) / 'sub'}, which {LINK_REASON}",
        )
    ]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md", "secret.txt"]


def test_links_planted_in_the_notes_folder_are_problems_never_indexed(
    home: Home, project: Project, outside: Path
) -> None:
    folder = notes.notes_dir(project)
    (folder / "leak.md").symlink_to(outside / "secret.txt")
    (folder / "vault").symlink_to(outside, target_is_directory=True)
    (folder / "alias.md").symlink_to(folder / "kitchen-plan.md")  # even one that stays inside
    index = Index(home, LocalEmbedder())
    report = index.refresh()
    assert report.added == ["house/kitchen-plan"]
    expected = sorted(
        (str(folder / name), LINK_REASON) for name in ("alias.md", "leak.md", "vault")
    )
    assert sorted(report.problems) == expected
    assert index.problems() == expected
    alice = ensure_user(home.db, "alice")
    for mode in ("keyword", "vector", "fusion"):
        hits = Searcher(home, index).search("Zanzibar vault combination", alice, mode=mode).hits
        assert [h.key for h in hits] in ([], ["house/kitchen-plan"])  # never the secret
        assert all(SECRET not in h.snippet for h in hits)

    found, problems = notes.list_notes(project)
    assert [n.name for n in found] == ["kitchen-plan"]
    assert sorted((str(p.path), p.reason) for p in problems) == expected

    (folder / "leak.md").unlink()  # a problem that is gone is forgotten
    assert [path for path, _ in index.refresh().problems] == [expected[0][0], expected[2][0]]
    assert [path for path, _ in index.problems()] == [expected[0][0], expected[2][0]]


def test_a_note_that_became_a_link_leaves_the_index(
    home: Home, project: Project, outside: Path
) -> None:
    index = Index(home, LocalEmbedder())
    index.refresh()
    path = notes.notes_dir(project) / "kitchen-plan.md"
    path.unlink()
    path.symlink_to(outside / "secret.md")
    report = index.refresh()
    assert report.removed == ["house/kitchen-plan"]
    assert report.problems == [(str(path), LINK_REASON)]
    assert index.stats()["notes"] == 0


def test_reading_a_note_refuses_links(project: Project, outside: Path) -> None:
    folder = notes.notes_dir(project)
    (folder / "leak.md").symlink_to(outside / "secret.md")
    (folder / "alias.md").symlink_to(folder / "kitchen-plan.md")
    (folder / "vault").symlink_to(outside, target_is_directory=True)
    for name in ("leak", "alias", "vault/secret"):
        with pytest.raises(CharlieError, match="is a symbolic link"):
            notes.get_note(project, name)
    with pytest.raises(NoteFormatError, match="is a symbolic link"):
        notes.read_note(folder / "leak.md", project.slug, folder)
    with pytest.raises(CharlieError, match="is a symbolic link"):
        notes.update_note(project, "alias", body="overwrites the target")
    assert "Oak worktops" in notes.get_note(project, "kitchen-plan").body


@pytest.fixture
def alice_client(home: Home, project: Project) -> Iterator[TestClient]:
    ensure_user(home.db, "alice")
    set_password(home.db, "alice", PASSWORD)
    with signed_in("alice") as client:
        yield client


def test_the_api_neither_serves_nor_finds_a_planted_link(
    alice_client: TestClient, project: Project, outside: Path
) -> None:
    (notes.notes_dir(project) / "leak.md").symlink_to(outside / "secret.md")
    answer = alice_client.get("/api/notes/house/leak")
    assert answer.status_code == 400 and SECRET not in answer.text
    assert LINK_REASON in answer.json()["error"]
    found = alice_client.get("/api/search", params={"q": "Zanzibar vault combination"})
    assert found.status_code == 200 and SECRET not in found.text
    listed = alice_client.get("/api/notes", params={"project": "house"}).json()
    assert [n["name"] for n in listed["notes"]] == ["kitchen-plan"]
    assert SECRET not in str(listed)


# ---------------------------------------------------------------- links at the project level


def test_a_notes_folder_that_is_a_link_is_never_read_indexed_or_written(
    home: Home, outside: Path
) -> None:
    garden = projects.create_project(home, "Garden")
    folder = notes.notes_dir(garden)
    folder.symlink_to(outside, target_is_directory=True)
    assert notes.list_notes(garden) == ([], [projects.Problem(folder, LINK_REASON)])
    for attempt in (
        lambda: notes.get_note(garden, "secret"),
        lambda: notes.create_note(garden, "Through", "written through the link"),
        lambda: notes.update_note(garden, "secret", body="overwritten"),
        lambda: notes.append_to_note(garden, "secret", "appended"),
        lambda: notes.tag_note(garden, "secret", add=["x"]),
        lambda: notes.import_folder(garden, outside),
    ):
        with pytest.raises(CharlieError, match=f"are in {folder}, which is a symbolic link"):
            attempt()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md", "secret.txt"]
    assert (outside / "secret.md").read_text() == f"# Secret\n{SECRET}"

    index = Index(home, LocalEmbedder())
    report = index.refresh()
    assert report.added == [] and report.problems == [(str(folder), LINK_REASON)]
    alice = ensure_user(home.db, "alice")
    for mode in ("keyword", "vector", "fusion"):
        hits = Searcher(home, index).search("Zanzibar vault combination", alice, mode=mode).hits
        assert hits == []


def test_a_notes_folder_that_became_a_link_leaves_the_index(
    home: Home, project: Project, outside: Path
) -> None:
    index = Index(home, LocalEmbedder())
    assert index.refresh().added == ["house/kitchen-plan"]
    folder = notes.notes_dir(project)
    folder.rename(folder.with_name("notes-moved"))
    folder.symlink_to(outside, target_is_directory=True)
    report = index.refresh()
    assert report.removed == ["house/kitchen-plan"] and report.added == []
    assert index.stats()["notes"] == 0


def test_the_api_neither_lists_serves_nor_writes_through_a_linked_notes_folder(
    alice_client: TestClient, home: Home, outside: Path
) -> None:
    garden = projects.create_project(home, "Garden")
    notes.notes_dir(garden).symlink_to(outside, target_is_directory=True)
    listed = alice_client.get("/api/notes", params={"project": "garden"}).json()
    assert listed["notes"] == []
    assert listed["problems"] == [{"path": str(notes.notes_dir(garden)), "reason": LINK_REASON}]
    read = alice_client.get("/api/notes/garden/secret")
    assert read.status_code == 400 and SECRET not in read.text
    made = alice_client.post(
        "/api/notes", json={"project": "garden", "title": "Through", "body": "x"}
    )
    assert made.status_code == 400 and "is a symbolic link" in made.json()["error"]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md", "secret.txt"]
    found = alice_client.get("/api/search", params={"q": "Zanzibar vault combination"})
    assert found.status_code == 200 and SECRET not in found.text


def test_a_project_folder_that_is_a_link_is_a_problem_never_a_project(
    home: Home, project: Project, outside: Path
) -> None:
    (outside / "project.toml").write_text('name = "Outside"\n')
    root = home.settings.projects_dir.resolve()
    (root / "elsewhere").symlink_to(outside, target_is_directory=True)
    (root / "alias").symlink_to(project.path, target_is_directory=True)  # even one inside
    found, problems = projects.scan_projects(home)
    assert [p.slug for p in found] == ["house"]
    assert sorted((p.path.name, p.reason) for p in problems) == [
        (
            name,
            f"{root / name} is a symbolic link; Charlie does not follow links (one could lead "
            "anywhere on this computer): put the project's folder itself there instead.",
        )
        for name in ("alias", "elsewhere")
    ]
    for slug in ("elsewhere", "alias"):
        with pytest.raises(CharlieError, match="is a symbolic link"):
            projects.get_project(home, slug)
        with pytest.raises(CharlieError, match="is a symbolic link"):
            projects.create_project(home, "Linked", slug=slug)


def test_a_memory_file_that_is_a_link_is_neither_read_nor_written_through(
    home: Home, project: Project, outside: Path, alice_client: TestClient
) -> None:
    target = outside / "secret.txt"
    project.memory_path.symlink_to(target)
    channel = shared_channel(home, project)
    with pytest.raises(MemoryFormatError, match=r"memory\.md is a symbolic link"):
        memory.read_file_text(channel)
    with pytest.raises(MemoryFormatError, match="is a symbolic link"):
        memory.load(home, channel)
    with pytest.raises(MemoryFormatError, match="is a symbolic link"):
        memory.save(home, channel, memory.Memory(summary="Written by Charlie."), "edit")
    assert project.memory_path.is_symlink() and target.read_text() == SECRET  # link kept

    shown = alice_client.get("/api/channels/house/memory")
    assert shown.status_code == 200 and SECRET not in shown.text
    assert "is a symbolic link" in shown.json()["error"]
    saved = alice_client.put(
        "/api/channels/house/memory",
        json={"summary": "Through the link", "decisions": [], "quotes": []},
    )
    assert saved.status_code == 400 and "is a symbolic link" in saved.json()["error"]
    assert project.memory_path.is_symlink() and target.read_text() == SECRET
