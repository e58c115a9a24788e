from pathlib import Path

import pytest

from charlie import projects
from charlie.errors import CharlieError, InvalidName, NotFound
from charlie.home import Home

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


def test_create_writes_project_toml_with_defaults(home: Home) -> None:
    project = projects.create_project(home, "Kitchen renovation", style="Short answers.")
    assert project.slug == "kitchen-renovation"
    assert project.path == home.settings.projects_dir.resolve() / "kitchen-renovation"
    text = project.config_path.read_text()
    assert 'name = "Kitchen renovation"' in text
    assert "distill_every = 5" in text
    again = projects.get_project(home, "kitchen-renovation")
    assert again.config.style == "Short answers."
    assert again.id == project.id


@pytest.mark.parametrize(
    "slug", ["../escape", "..", "a/b", "/etc", "Upper", "-lead", "trail-", "x" * 65, "", "a b"]
)
def test_bad_slugs_never_leave_the_data_home(home: Home, slug: str) -> None:
    with pytest.raises(InvalidName):
        projects.project_dir(home, slug)
    with pytest.raises(InvalidName):
        projects.create_project(home, "x", slug=slug)
    assert not (home.settings.home / "escape").exists()
    assert list(home.settings.projects_dir.iterdir()) == []


def test_symlinked_project_folder_cannot_point_outside(home: Home, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (home.settings.projects_dir / "sneaky").symlink_to(outside)
    with pytest.raises(InvalidName, match="is a symbolic link"):
        projects.project_dir(home, "sneaky")


def test_names_become_slugs() -> None:
    assert projects.slugify("  Trip to Oslo, 2027! ") == "trip-to-oslo-2027"
    with pytest.raises(InvalidName):
        projects.slugify("!!!")


def test_update_keeps_unknown_keys_a_person_added(home: Home) -> None:
    project = projects.create_project(home, "Garden")
    project.config_path.write_text(project.config_path.read_text() + 'mood = "sunny"\n')
    updated = projects.update_project(home, "garden", distill_every=3)
    assert updated.config.distill_every == 3
    assert 'mood = "sunny"' in project.config_path.read_text()


def test_update_refuses_bad_cadence(home: Home) -> None:
    projects.create_project(home, "Garden")
    with pytest.raises(CharlieError, match="distill_every"):
        projects.update_project(home, "garden", distill_every=0)
    assert projects.get_project(home, "garden").config.distill_every == 5


def test_hand_broken_project_toml_is_reported_with_its_path(home: Home) -> None:
    project = projects.create_project(home, "Garden")
    project.config_path.write_text('name = "Garden"\ndistill_every = "often"\n')
    with pytest.raises(CharlieError, match=r"project\.toml has a bad setting: 'distill_every'"):
        projects.get_project(home, "garden")


def test_missing_project_says_how_to_create_it(home: Home) -> None:
    with pytest.raises(NotFound, match="charlie projects create nope"):
        projects.get_project(home, "nope")


def test_list_is_sorted_and_reads_folders(home: Home) -> None:
    projects.create_project(home, "Zeta")
    projects.create_project(home, "Alpha")
    assert [p.slug for p in projects.list_projects(home)] == ["alpha", "zeta"]
