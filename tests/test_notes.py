from pathlib import Path

import pytest

from charlie.errors import CharlieError, NotFound
from charlie.home import Home
from charlie.notes import files as notes
from charlie.notes.files import NoteFormatError
from charlie.projects import Project, create_project


@pytest.fixture
def project(home: Home) -> Project:
    return create_project(home, "Auth")


def test_create_writes_front_matter_and_body(project: Project) -> None:
    note = notes.create_note(
        project, "JWT refresh tokens", "Rotate on every use.", ["Auth", "#jwt"]
    )
    assert note.name == "jwt-refresh-tokens"
    assert note.key == "auth/jwt-refresh-tokens"
    text = note.path.read_text()
    assert text.startswith("---\ntitle: JWT refresh tokens\ntags: [auth, jwt]\ncreated: ")
    assert text.endswith("---\n\nRotate on every use.\n")
    again = notes.get_note(project, "jwt-refresh-tokens")
    assert (again.title, again.tags, again.body) == (
        "JWT refresh tokens",
        ["auth", "jwt"],
        "Rotate on every use.\n",
    )


def test_same_title_gets_a_new_file(project: Project) -> None:
    first = notes.create_note(project, "Ideas")
    second = notes.create_note(project, "Ideas")
    assert (first.name, second.name) == ("ideas", "ideas-2")


def test_update_and_tag_keep_keys_a_person_added(project: Project) -> None:
    note = notes.create_note(project, "Plan", "v1")
    note.path.write_text(note.path.read_text().replace("title:", "aliases: [p]\ntitle:"))
    notes.update_note(project, "plan", body="v2")
    tagged = notes.tag_note(project, "plan", add=["todo"], remove=[])
    assert tagged.meta["aliases"] == ["p"]
    assert tagged.body == "v2\n" and tagged.tags == ["todo"]
    untagged = notes.tag_note(project, "plan", remove=["todo"])
    assert untagged.tags == []


def test_files_written_by_hand_are_read_as_they_are(project: Project) -> None:
    folder = notes.notes_dir(project)
    (folder / "recipes").mkdir(parents=True)
    (folder / "recipes" / "pasta.md").write_text("# Pasta carbonara\n\nEggs, not cream.\n")
    (folder / "obsidian.md").write_text("---\ntags: '#food, #quick'\nrating: 5\n---\nToast.\n")
    (folder / ".obsidian").mkdir()
    (folder / ".obsidian" / "workspace.md").write_text("ignored")
    found, problems = notes.list_notes(project)
    assert problems == []
    by_name = {n.name: n for n in found}
    assert set(by_name) == {"recipes/pasta", "obsidian"}
    assert by_name["recipes/pasta"].title == "Pasta carbonara"
    assert by_name["obsidian"].tags == ["food", "quick"]
    assert by_name["obsidian"].meta["rating"] == 5


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"---\ntitle: [unclosed\n---\nbody", "not valid YAML on line 3"),
        (b"---\ntitle: x\nbody without end", "never closes"),
        (b"---\n- a list\n---\n", "must be 'key: value' lines"),
        (b"caf\xe9 latin-1", "not UTF-8 text"),
    ],
)
def test_unreadable_notes_are_reported_with_path_and_reason(
    project: Project, content: bytes, reason: str
) -> None:
    folder = notes.notes_dir(project)
    folder.mkdir(parents=True)
    (folder / "good.md").write_text("fine")
    bad = folder / "bad.md"
    bad.write_bytes(content)
    found, problems = notes.list_notes(project)
    assert [n.name for n in found] == ["good"]
    assert len(problems) == 1 and problems[0].path == bad and reason in problems[0].reason
    assert bad.read_bytes() == content  # never rewritten
    with pytest.raises(NoteFormatError, match=reason):
        notes.get_note(project, "bad")


def test_delete_moves_to_the_trash(home: Home, project: Project) -> None:
    note = notes.create_note(project, "Old idea", "keep me somewhere")
    target = notes.delete_note(home, project, "old-idea")
    assert not note.path.exists()
    assert target.parent == home.settings.home / "trash" / "auth"
    assert "keep me somewhere" in target.read_text()
    with pytest.raises(NotFound, match="no note 'old-idea'"):
        notes.get_note(project, "old-idea")


def test_names_cannot_leave_the_notes_folder(project: Project) -> None:
    for name in ["../project", "../../charlie", "/etc/passwd", ""]:
        with pytest.raises(CharlieError):
            notes.note_path(project, name)


def test_import_copies_markdown_and_reports_what_it_skipped(
    project: Project, tmp_path: Path
) -> None:
    vault = tmp_path / "vault"
    (vault / "sub").mkdir(parents=True)
    (vault / "a.md").write_text("---\ntitle: A\n---\nalpha")
    (vault / "sub" / "b.md").write_text("beta")
    (vault / "broken.md").write_bytes(b"\xff\xfe")
    (vault / "image.png").write_bytes(b"png")
    notes.create_note(project, "a", "existing note called a")
    report = notes.import_folder(project, vault)
    assert sorted(n.name for n in report.imported) == ["a-2", "sub/b"]
    assert [p.path.name for p in report.skipped] == ["broken.md"]
    assert "existing note called a" in notes.get_note(project, "a").body
    assert (vault / "a.md").read_text() == "---\ntitle: A\n---\nalpha"


def test_bad_tag_is_refused(project: Project) -> None:
    notes.create_note(project, "Plan")
    with pytest.raises(CharlieError, match="not a usable tag"):
        notes.tag_note(project, "plan", add=["no spaces allowed"])


def test_the_scan_lists_notes_in_sub_folders_and_skips_hidden_files_and_linked_folders(
    project: Project, tmp_path: Path
) -> None:
    root = notes.notes_dir(project)
    (root / "2024" / "q1").mkdir(parents=True)
    (root / ".obsidian").mkdir()
    (root / "b.md").write_text("b")
    (root / "2024" / "q1" / "a.md").write_text("aa")
    (root / "2024" / "notes.txt").write_text("not markdown")
    (root / ".draft.md").write_text("hidden")
    (root / ".obsidian" / "workspace.md").write_text("hidden folder")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("elsewhere")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    found = notes.scan(project)
    assert [(f.name, f.size) for f in found] == [("2024/q1/a", 2), ("b", 1)]
    assert found[0].path == root / "2024" / "q1" / "a.md"
    assert found[0].mtime_ns == (root / "2024" / "q1" / "a.md").stat().st_mtime_ns
    assert notes.note_files(project) == [f.path for f in found]
