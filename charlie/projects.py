"""Projects: a folder each under `projects/`, with `project.toml` and `memory.md`.

The folder is the source of truth; the database only gives each slug a stable id.

A deleted project is never destroyed: its folder moves whole to the data home's trash
(`trash/_projects/<slug>.<time>/`), where nothing lists, searches or chats with it, and its
database row is renamed to point there, so its conversation and memory history wait for it
and a new project of the same name starts afresh. `restore_project` moves it back as it was.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import tomllib
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from charlie.db import now, transaction
from charlie.errors import CharlieError, Conflict, InvalidName, NotFound
from charlie.files import write_atomic
from charlie.home import Home
from charlie.store import Connection

SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
CONFIG_FILE = "project.toml"
MEMORY_FILE = "memory.md"
DEFAULT_PROJECT = "general"
PRIVATE = "private"  # the name of each person's private channel: never a project's


class ProjectConfig(BaseModel):
    """What `project.toml` holds. Keys this version does not know are kept as they are."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    name: str = Field(min_length=1, max_length=200)
    style: str = Field("", description="How replies should read in this project.")
    persona: str = Field("", description="Extra instructions for the assistant.")
    distill_every: int = Field(5, ge=1, le=1000, description="Messages between distillations.")
    quotes_window: int | None = Field(None, ge=1, le=100, description="Recent quotes kept.")
    write_tools: list[str] | None = Field(
        None, description="Write tools the model may use here (unset: all of them)."
    )
    max_tokens: int | None = Field(
        None, ge=16, le=1_000_000, description="The longest answer (unset: CHARLIE_LLM_MAX_TOKENS)."
    )
    model: str | None = Field(
        None,
        min_length=1,
        max_length=300,
        description="The model this project's chat uses (unset: CHARLIE_LLM_MODEL).",
    )
    tool_mode: Literal["auto", "native", "text", "constrained"] | None = Field(
        None, description="How the model is offered tools here (unset: CHARLIE_TOOL_MODE)."
    )
    distill_mode: Literal["auto", "whole", "steps"] | None = Field(
        None, description="How memory is distilled here (unset: CHARLIE_DISTILL_MODE)."
    )


@dataclass(frozen=True)
class Project:
    id: int
    slug: str
    path: Path
    config: ProjectConfig

    @property
    def memory_path(self) -> Path:
        return self.path / MEMORY_FILE

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE


def validate_slug(slug: str) -> str:
    if not SLUG_RE.match(slug):
        raise InvalidName(
            f"{slug!r} is not a valid project name: use lower-case letters, digits and '-' "
            "(at most 64), starting and ending with a letter or digit, e.g. 'kitchen-reno'."
        )
    if slug == PRIVATE:
        raise InvalidName(
            f"{PRIVATE!r} is reserved: it names each person's own private channel (`--private` "
            "on the command line). Choose another name for the project."
        )
    return slug


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:64].strip("-")
    if not slug:
        raise InvalidName(f"Cannot make a project name from {name!r}: use some letters or digits.")
    return validate_slug(slug)


def project_dir(home: Home, slug: str) -> Path:
    """The folder of project `slug`, refusing any slug that could leave the data home, and
    a folder that is a symbolic link (never followed: it could lead anywhere)."""
    validate_slug(slug)
    root = home.settings.projects_dir.resolve()
    if (root / slug).is_symlink():
        raise InvalidName(
            f"{root / slug} is a symbolic link; Charlie does not follow links (one could lead "
            "anywhere on this computer): put the project's folder itself there instead."
        )
    path = (root / slug).resolve()
    if path.parent != root:
        raise InvalidName(f"{slug!r} would place a project outside {root}.")
    return path


def _project_id(db: Connection, slug: str) -> int:
    db.execute(
        "INSERT INTO projects (slug, created_at) VALUES (?, ?) ON CONFLICT(slug) DO NOTHING",
        (slug, now()),
    )
    row = db.execute("SELECT id FROM projects WHERE slug = ?", (slug,)).fetchone()
    return int(row[0])


def read_config(path: Path) -> ProjectConfig:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CharlieError(f"{path} is not valid TOML ({exc}); fix the file by hand.") from exc
    try:
        return ProjectConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"'{'.'.join(str(p) for p in e['loc'])}': {e['msg']}" for e in exc.errors()
        )
        raise CharlieError(f"{path} has a bad setting: {problems}. Fix the file by hand.") from exc


def write_config(path: Path, config: ProjectConfig) -> None:
    data: dict[str, object] = {k: v for k, v in config.model_dump().items() if v is not None}
    write_atomic(path, tomli_w.dumps(data))


def get_project(home: Home, slug: str) -> Project:
    path = project_dir(home, slug)
    config_path = path / CONFIG_FILE
    if not config_path.is_file():
        close = _close_to(home, slug)
        hint = f" Did you mean {close}?" if close else ""
        raise NotFound(
            f"There is no project {slug!r}.{hint} Create it with `charlie projects create "
            f"{slug}`, or see `charlie projects list`."
        )
    return Project(_project_id(home.db, slug), slug, path, read_config(config_path))


def _close_to(home: Home, slug: str) -> str | None:
    """The project a mistyped or shortened `slug` most likely means ("kitchen" for
    kitchen-renovation, "kitchn" for kitchen), or None."""
    root = home.settings.projects_dir
    names = (
        sorted(p.name for p in root.iterdir() if (p / CONFIG_FILE).is_file())
        if root.is_dir()
        else []
    )
    holding = [name for name in names if slug in name or name in slug]
    if holding:
        return min(holding, key=len)
    close = difflib.get_close_matches(slug, names, n=1, cutoff=0.6)
    return close[0] if close else None


def validate_name(name: str) -> str:
    """A project's display name; never one that reads as the private channel's."""
    if unicodedata.normalize("NFKC", name).strip().casefold() == PRIVATE:
        raise InvalidName(
            f"{name!r} would look like each person's own private channel: choose another "
            "name for a shared project."
        )
    return name


def create_project(
    home: Home,
    name: str,
    *,
    slug: str | None = None,
    style: str = "",
    persona: str = "",
    distill_every: int = 5,
) -> Project:
    validate_name(name)
    slug = validate_slug(slug) if slug is not None else slugify(name)
    path = project_dir(home, slug)
    if (path / CONFIG_FILE).exists():
        raise Conflict(f"A project {slug!r} already exists at {path}.")
    try:
        config = ProjectConfig(name=name, style=style, persona=persona, distill_every=distill_every)
    except ValidationError as exc:
        raise CharlieError(f"Cannot create project {slug!r}: {exc.errors()[0]['msg']}.") from exc
    path.mkdir(parents=True, exist_ok=True)
    write_config(path / CONFIG_FILE, config)
    return Project(_project_id(home.db, slug), slug, path, config)


def ensure_project(home: Home, slug: str) -> Project:
    """Project `slug`, created with default settings if it does not exist yet."""
    try:
        return get_project(home, slug)
    except NotFound:
        return create_project(home, slug.replace("-", " ").capitalize(), slug=slug)


def update_project(home: Home, slug: str, **changes: Any) -> Project:
    """Change settings of `slug` (a None value leaves that setting as it is; `model=""`
    unsets the project's model, so the server's default is used again)."""
    project = get_project(home, slug)
    if changes.get("name") is not None:
        validate_name(changes["name"])
    data = project.config.model_dump() | {k: v for k, v in changes.items() if v is not None}
    if isinstance(data.get("model"), str) and not data["model"].strip():
        data["model"] = None
    try:
        config = ProjectConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CharlieError(f"Cannot set {err['loc'][0]} of {slug!r}: {err['msg']}.") from exc
    write_config(project.config_path, config)
    return Project(project.id, slug, project.path, config)


@dataclass(frozen=True)
class Problem:
    """A project folder or a note file that was skipped, and why (to show the person, who
    fixes it)."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def scan_projects(home: Home) -> tuple[list[Project], list[Problem]]:
    """Every project folder with a readable `project.toml`, by slug, and the folders that
    could not be read (a broken project.toml, a reserved or invalid folder name)."""
    found, problems = [], []
    for config_path in sorted(home.settings.projects_dir.glob(f"*/{CONFIG_FILE}")):
        slug = config_path.parent.name
        if not SLUG_RE.match(slug):
            continue  # not a project folder name: someone's own folder, left alone
        try:
            found.append(get_project(home, slug))
        except CharlieError as exc:  # InvalidName for a reserved name, or a bad project.toml
            problems.append(Problem(config_path.parent, str(exc)))
    return found, problems


def list_projects(home: Home) -> list[Project]:
    """Every project that can be read, by slug (`scan_projects` also says which cannot)."""
    return scan_projects(home)[0]


# ---------------------------------------------------------------- the trash

TRASH_DIR = "trash"
PROJECT_TRASH = "_projects"  # never a slug (a slug starts with a letter or digit)
TRASH_MARK = "~trash/"  # a trashed project's database row: never a slug either
STAMP = "%Y%m%dT%H%M%S%f"
TRASH_ENTRY_RE = re.compile(
    r"^(?P<slug>[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?)\.(?P<stamp>\d{8}T\d{12})$"
)


@dataclass(frozen=True)
class TrashedProject:
    """A project in the trash: `entry` names it there (`<slug>.<time>`)."""

    entry: str
    slug: str
    name: str
    path: Path
    deleted_at: str  # ISO-8601, UTC


def project_trash(home: Home) -> Path:
    return home.settings.home / TRASH_DIR / PROJECT_TRASH


def _deleted_at(stamp: str) -> str:
    return datetime.strptime(stamp, STAMP).replace(tzinfo=UTC).isoformat(timespec="seconds")


def _trashed(path: Path) -> TrashedProject | None:
    match = TRASH_ENTRY_RE.match(path.name)
    if match is None or path.is_symlink() or not path.is_dir():
        return None
    try:
        name = read_config(path / CONFIG_FILE).name
    except (CharlieError, OSError):
        name = match["slug"]  # a project.toml that cannot be read still restores as it is
    return TrashedProject(path.name, match["slug"], name, path, _deleted_at(match["stamp"]))


def trashed_projects(home: Home) -> list[TrashedProject]:
    """The projects in the trash, most recently deleted first."""
    folder = project_trash(home)
    found = [t for p in folder.iterdir() if (t := _trashed(p))] if folder.is_dir() else []
    return sorted(found, key=lambda t: (t.deleted_at, t.entry), reverse=True)


def _move(source: Path, target: Path) -> None:
    """Move a folder, never onto one that exists (a rename inside the data home)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() or target.is_symlink():
        raise Conflict(f"{target} is in the way; nothing was moved.")
    try:
        os.rename(source, target)
    except OSError:  # another file system (a data home spread over mounts): copy, then remove
        shutil.copytree(source, target, symlinks=True)
        shutil.rmtree(source)


def trash_project(home: Home, slug: str) -> TrashedProject:
    """Move project `slug` to the trash, whole (notes, memory.md, settings and any file of
    the person's own). It is no longer listed, searched or chatted with; its conversation and
    memory history stay in the database for `restore_project`."""
    project = get_project(home, slug)
    stamp = datetime.now(UTC).strftime(STAMP)
    target = project_trash(home) / f"{slug}.{stamp}"
    _move(project.path, target)
    try:
        with transaction(home.db):
            home.db.execute(
                "UPDATE projects SET slug = ? WHERE id = ?", (TRASH_MARK + target.name, project.id)
            )
    except BaseException:
        _move(target, project.path)  # the folder goes back: nothing half-deleted
        raise
    return TrashedProject(target.name, slug, project.config.name, target, _deleted_at(stamp))


def find_trashed(home: Home, which: str) -> TrashedProject:
    """The trashed project named by its entry (`<slug>.<time>`), or by its slug (the most
    recently deleted of that slug)."""
    found = trashed_projects(home)
    chosen = [t for t in found if t.entry == which] or [t for t in found if t.slug == which]
    if not chosen:
        raise NotFound(f"There is no project {which!r} in the trash; `charlie trash` lists it.")
    return chosen[0]


def restore_project(home: Home, which: str) -> Project:
    """Move a trashed project back (by entry, or the newest of a slug), with its
    conversation and memory history. A project of that name made since is never replaced:
    `Conflict`, and nothing moves."""
    trashed = find_trashed(home, which)
    path = project_dir(home, trashed.slug)
    if path.exists() or path.is_symlink():
        raise Conflict(
            f"There is a project {trashed.slug!r} now ({path}): rename or delete it first, "
            "then restore this one."
        )
    with transaction(home.db):
        taken = home.db.execute(
            "SELECT id FROM projects WHERE slug = ?", (trashed.slug,)
        ).fetchone()
        if taken is not None:  # the row of a folder removed by hand: its history stays apart
            home.db.execute(
                "UPDATE projects SET slug = ? WHERE id = ?",
                (f"~gone/{taken[0]}/{trashed.slug}", taken[0]),
            )
        home.db.execute(
            "UPDATE projects SET slug = ? WHERE slug = ?",
            (trashed.slug, TRASH_MARK + trashed.entry),
        )
        _move(trashed.path, path)
    return get_project(home, trashed.slug)
