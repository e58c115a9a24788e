"""Notes: markdown files a person owns, in `projects/<slug>/notes/`.

A note is YAML front matter (title, tags, created, updated, and any keys of the person's
own, all preserved) followed by a markdown body. Files written by hand or by another tool
(Obsidian, say) are first-class: front matter is optional, sub-folders are fine, and a file
that does not parse is reported with its path and reason, never rewritten.

Charlie writes a note only when asked to (create, update, tag); reading and indexing never
touch the files. Symbolic links are never followed (a link could lead anywhere the server
can read): a notes folder that is a link, or a link inside one, is reported as a problem,
never read, indexed or written through, and import skips links.

Writes never lose a note or an edit. A new note is linked into place under a name no other
file has (`write_atomic(replaces=None)` never replaces a file), so two notes created at once
with one title become `title` and `title-2`. A change to a note (update, append, tag) reads
the file, changes it and writes it back while holding the project's note lock (`writing`),
shared by every thread and process of the data home, and the write is made only if the file
still holds what was read: a person's save in an editor in between is kept and the change
is made again on top of it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import yaml

from charlie.errors import CharlieError, Conflict, InvalidName, NotFound
from charlie.files import FileChanged, sha256_text, write_atomic
from charlie.home import Home
from charlie.projects import SLUG_RE, Problem, Project

NOTES_DIR = "notes"
TRASH_DIR = "trash"
MAX_NOTE_BYTES = 5 * 1024 * 1024
TAG_RE = re.compile(r"^[\w/-]{1,64}$")
LINK_REASON = (
    "is a symbolic link; Charlie does not follow links (one could lead anywhere on this "
    "computer): put the file or folder itself there instead"
)
MAX_PART_BYTES = 200  # each part of a note name, in UTF-8: the file name and its temp fit in 255
MAX_NAME_CHARS = 1000
LOCK_WAIT = 10.0  # seconds a change waits for another change of the project's notes
CHANGE_TRIES = 3  # reads, changes and writes of one note while a person keeps saving it


class NoteFormatError(CharlieError):
    """A note file that cannot be read as front matter + markdown."""


@dataclass
class Note:
    project: str
    name: str  # path inside the notes folder, without ".md" (e.g. "recipes/pasta")
    path: Path
    meta: dict[str, object] = field(default_factory=dict)
    body: str = ""
    sha256: str = ""  # of the file's text as read (`files.text_sha`): the version changed

    @property
    def key(self) -> str:
        """The note's stable identity across the household: "project/name"."""
        return f"{self.project}/{self.name}"

    @property
    def title(self) -> str:
        title = self.meta.get("title")
        if isinstance(title, str) and title.strip():
            return title.strip()
        heading = re.search(r"^#\s+(.+?)\s*#*\s*$", self.body, re.MULTILINE)
        return heading.group(1) if heading else Path(self.name).name

    @property
    def tags(self) -> list[str]:
        return normalise_tags(self.meta.get("tags"))


def normalise_tags(raw: object) -> list[str]:
    """Tags as written by people and tools: a list, "a, b", or "#a #b" — lower-case, no '#'."""
    if raw is None:
        return []
    items: Iterable[object] = raw if isinstance(raw, list) else re.split(r"[,\s]+", str(raw))
    tags: list[str] = []
    for item in items:
        tag = str(item).strip().lstrip("#").lower()
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def validate_tag(tag: str) -> str:
    clean = tag.strip().lstrip("#").lower()
    if not TAG_RE.match(clean):
        raise CharlieError(
            f"{tag!r} is not a usable tag: use letters, digits, '-', '_' or '/' (at most 64)."
        )
    return clean


def notes_dir(project: Project) -> Path:
    return project.path / NOTES_DIR


# ---------------------------------------------------------------- reading and writing


def parse(text: str, path: Path) -> tuple[dict[str, object], str]:
    """Split a note into its front matter (a dict) and its body."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return {}, text
    for number, line in enumerate(lines[1:], start=2):
        if line.rstrip() in {"---", "..."}:
            raw = "".join(lines[1 : number - 1])
            body = "".join(lines[number:]).lstrip("\n")
            break
    else:
        raise NoteFormatError(
            f"{path}: the front matter opened with '---' on line 1 never closes; add a '---' "
            "line after it."
        )
    try:
        meta = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" on line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise NoteFormatError(
            f"{path}: the front matter is not valid YAML{where} ({problem})."
        ) from exc
    if not isinstance(meta, dict):
        raise NoteFormatError(f"{path}: the front matter must be 'key: value' lines.")
    return {str(k): v for k, v in meta.items()}, body


def render(meta: Mapping[str, object], body: str) -> str:
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=None)
    return f"---\n{front}---\n\n{body.strip()}\n"


def read_note(path: Path, project: str, root: Path) -> Note:
    """Read one note file, raising `NoteFormatError` with the path and the reason. A symbolic
    link (the file, or a folder between `root` and it) is refused, never followed."""
    link = link_inside(root, path)
    if link is not None:
        where = "" if link == path else f"passes through {link}, which "
        raise NoteFormatError(f"{path}: {where}{LINK_REASON}.")
    try:
        data = read_bytes(path, MAX_NOTE_BYTES)
        if data is None:
            raise NoteFormatError(f"{path}: larger than 5 MB; split it into smaller notes.")
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NoteFormatError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8."
        ) from exc
    except FileNotFoundError as exc:
        raise NoteFormatError(f"{path}: the file disappeared while being read.") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # became a link after the check above
            raise NoteFormatError(f"{path}: {LINK_REASON}.") from exc
        raise NoteFormatError(f"{path}: cannot be read ({exc.strerror}).") from exc
    meta, body = parse(text, path)
    name = path.relative_to(root).with_suffix("").as_posix()
    return Note(project, name, path, meta, body, version_of(text))


def version_of(text: str) -> str:
    """The sha256 that `files.text_sha` gives the file holding `text`: it reads with universal
    newlines, so a note saved with Windows line ends is compared as Charlie read it."""
    return sha256_text(text.replace("\r\n", "\n").replace("\r", "\n"))


def read_bytes(path: Path, limit: int) -> bytes | None:
    """The bytes of the file at `path`, or None when it holds more than `limit`. The last part
    of the path is not followed if it is a symbolic link (OSError ELOOP), so a file swapped
    for a link after a check is still not read through it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(fd).st_size > limit:
            return None
        return handle.read()


def link_inside(root: Path, path: Path) -> Path | None:
    """The first symbolic link on the way from `root` (not included) down to `path`, if any.
    `path` must be under `root`, both written the same way (resolved or not)."""
    current = root
    for part in path.relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            return current
    return None


class NoteFile(NamedTuple):
    """A note file as found on disk: its name (the path inside the notes folder, without
    `.md`), where it is, and its size and modification time."""

    name: str
    where: str  # the file's path
    mtime_ns: int
    size: int

    @property
    def path(self) -> Path:
        return Path(self.where)


class Found(NamedTuple):
    """What a notes folder holds: its note files, and the symbolic links in it (to a
    markdown file or to a folder), which are never followed."""

    files: list[NoteFile]
    links: list[Path]

    def link_problems(self) -> list[Problem]:
        return [Problem(link, LINK_REASON) for link in self.links]


def scan(project: Project) -> list[NoteFile]:
    """Every markdown file in the project's notes folder, sorted by name; hidden files and
    folders are skipped, and so are symbolic links (no loops, nothing outside)."""
    return find(project).files


def find(project: Project) -> Found:
    """The project's note files sorted by name, and the links skipped (see `scan`).

    One `os.scandir` walk with one `stat` per file: the index checks freshness with this on
    every search after a quiet spell, so it must stay cheap at 100,000 notes.
    """
    found: list[NoteFile] = []
    links: list[Path] = []
    folder_link = _folder_link(project)
    if folder_link is not None:
        return Found([], [folder_link])
    pending = [(str(notes_dir(project)), "")]
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_symlink():
                    if entry.name.endswith(".md") or entry.is_dir():  # stats the target only
                        links.append(Path(entry.path))
                elif entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, f"{prefix}{entry.name}/"))
                elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                    stat = entry.stat(follow_symlinks=False)
                    name = prefix + entry.name[:-3]
                    found.append(NoteFile(name, entry.path, stat.st_mtime_ns, stat.st_size))
            except FileNotFoundError:
                continue  # removed while we looked
    found.sort(key=lambda file: file.name)
    return Found(found, sorted(links))


def note_files(project: Project) -> list[Path]:
    """Every markdown file in the project's notes folder (hidden folders and links skipped)."""
    return [file.path for file in scan(project)]


def list_notes(project: Project) -> tuple[list[Note], list[Problem]]:
    notes: list[Note] = []
    found = find(project)
    problems: list[Problem] = found.link_problems()
    root = notes_dir(project)
    for file in found.files:
        try:
            notes.append(read_note(file.path, project.slug, root))
        except NoteFormatError as exc:
            problems.append(Problem(file.path, str(exc).removeprefix(f"{file.path}: ")))
    return notes, problems


def _folder_link(project: Project) -> Path | None:
    """The notes folder, when it is a symbolic link (never followed). A project folder that
    is a link is no project at all (`projects.project_dir`)."""
    folder = notes_dir(project)
    return folder if folder.is_symlink() else None


def _refuse_folder_link(project: Project) -> None:
    folder_link = _folder_link(project)
    if folder_link is not None:
        raise CharlieError(
            f"The notes of project {project.slug} are in {folder_link}, which {LINK_REASON}."
        )


def validate_name(name: str) -> str:
    """`name` (a path inside the notes folder, '.md' optional) if a file can have it; else
    `InvalidName`, saying what is allowed."""
    shown = name if len(name) <= 60 else f"{name[:60]}…"
    if any(ord(c) < 32 for c in name):
        raise InvalidName(f"{shown!r} is not a note name: it holds a control character.")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidName(f"{shown!r} is not a note name: it is not valid text.") from None
    clean = name.removesuffix(".md")
    if len(clean) > MAX_NAME_CHARS or any(
        len(part.encode("utf-8")) > MAX_PART_BYTES for part in clean.split("/")
    ):
        raise InvalidName(
            f"{shown!r} is not a note name: it is too long. Each part of a note name (between "
            f"'/') may be at most {MAX_PART_BYTES} bytes ({MAX_PART_BYTES} letters a-z, fewer "
            f"in other scripts), and the whole name at most {MAX_NAME_CHARS} characters."
        )
    return clean


def note_path(project: Project, name: str) -> Path:
    """Where note `name` lives, refusing names no file can have, names that would leave the
    notes folder, and any path through a symbolic link (the notes folder itself included)."""
    folder = notes_dir(project)
    clean = validate_name(name)
    _refuse_folder_link(project)
    written = Path(os.path.normpath(folder / f"{clean}.md"))
    if clean and written.is_relative_to(folder) and link_inside(folder, written) is not None:
        raise CharlieError(f"Note {name!r} of project {project.slug} {LINK_REASON}.")
    root = folder.resolve()
    path = (root / f"{clean}.md").resolve()
    if not clean or root not in path.parents:
        raise CharlieError(f"{name!r} is not a note name inside project {project.slug}.")
    return path


def get_note(project: Project, name: str) -> Note:
    path = note_path(project, name)
    if not path.is_file():
        raise NotFound(
            f"There is no note {name!r} in project {project.slug}; see `charlie notes list`."
        )
    return read_note(path, project.slug, notes_dir(project).resolve())


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


# ---------------------------------------------------------------- writing without losing


def _lock_path(project: Project) -> Path:
    """The project's note lock: in the data home's `locks/` folder (projects live in
    `<data home>/projects/<slug>`), never among the files a person sees."""
    return project.path.parent.parent / "locks" / "notes" / f"{project.slug}.lock"


@contextmanager
def writing(project: Project) -> Iterator[None]:
    """Hold the lock on changes to the project's notes, across the threads and processes of
    the data home (web, Discord, CLI); waits at most `LOCK_WAIT` seconds for it."""
    path = _lock_path(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:  # one open file each: flock then excludes threads too
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Conflict(
                        f"Another change to the notes of project {project.slug} has taken "
                        f"over {LOCK_WAIT:g} s; nothing was changed. Try again in a moment."
                    ) from None
                time.sleep(0.01)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _name_base(title: str) -> str:
    """The file name a title suggests: lower-case words joined by '-', short enough for any
    file system once a '-NNN' is added."""
    base = re.sub(r"[^\w-]+", "-", title.lower(), flags=re.UNICODE).strip("-_")[:80]
    while len(base.encode("utf-8")) > MAX_PART_BYTES - 20:
        base = base[:-1]
    return base.strip("-_") or "note"


def create_note(project: Project, title: str, body: str = "", tags: Sequence[str] = ()) -> Note:
    """Write a new note named after its title; when that name is taken (even by a note
    created at the same moment), the first free one of `title-2`, `title-3`…"""
    if not title.strip():
        raise CharlieError("A note needs a title.")
    stamp = _now()
    meta: dict[str, object] = {
        "title": title.strip(),
        "tags": [validate_tag(t) for t in tags],
        "created": stamp,
        "updated": stamp,
    }
    text = render(meta, body)
    base = _name_base(title)
    name, number = base, 2
    while True:
        path = note_path(project, name)
        if not (path.exists() or path.is_symlink()) and _write_new(path, text):
            return Note(project.slug, name, path, meta, parse(text, path)[1], version_of(text))
        name, number = f"{base}-{number}", number + 1


def _write_new(path: Path, text: str) -> bool:
    """Write the new file `path`, or return False, writing nothing, when a file of that name
    exists, even one made a moment ago: an existing note is never replaced."""
    try:
        write_atomic(path, text, replaces=None)
    except FileChanged:
        return False
    return True


def change_note(
    project: Project, name: str, change: Callable[[Note], tuple[dict[str, object], str]]
) -> Note:
    """Read note `name`, apply `change` (the note as read → its new front matter and body)
    and write the result, holding the project's note lock; if the file was saved by hand
    between the read and the write, the person's save is kept and `change` is applied again
    to it (up to `CHANGE_TRIES` reads). `change` may raise to write nothing."""
    with writing(project):
        for _ in range(CHANGE_TRIES):
            note = get_note(project, name)
            meta, body = change(note)
            meta["updated"] = _now()
            text = render(meta, body)
            try:
                write_atomic(note.path, text, replaces=note.sha256)
            except FileChanged:
                continue
            body = parse(text, note.path)[1]
            return Note(note.project, note.name, note.path, meta, body, version_of(text))
    raise Conflict(
        f"Note {name!r} of project {project.slug} kept changing on disk while Charlie was "
        "changing it; the file is left as it was last saved. Try again."
    )


def update_note(
    project: Project,
    name: str,
    *,
    body: str | None = None,
    title: str | None = None,
    base_sha256: str | None = None,
) -> Note:
    """Change a note's body and/or title; every other front-matter key is kept.

    With `base_sha256` (the `sha256` of the note as the person's editor loaded it), nothing
    is written if the file changed since — `Conflict`, so an edit nobody saw is never
    overwritten."""
    if title is not None and not title.strip():
        raise CharlieError("A note's title cannot be empty.")

    def change(note: Note) -> tuple[dict[str, object], str]:
        if base_sha256 is not None and note.sha256 != base_sha256:
            raise Conflict(
                f"Note {note.key} was changed (by hand, by Charlie or by someone else) since "
                "you opened it, so your text was not saved. Copy your text, reload the note "
                "to see the change, then make yours again."
            )
        meta = dict(note.meta)
        if title is not None:
            meta["title"] = title.strip()
        return meta, note.body if body is None else body

    return change_note(project, name, change)


def append_to_note(project: Project, name: str, text: str) -> Note:
    """Add `text` as a new paragraph at the end of the note's body."""

    def change(note: Note) -> tuple[dict[str, object], str]:
        return dict(note.meta), f"{note.body.rstrip()}\n\n{text.strip()}\n"

    return change_note(project, name, change)


def tag_note(
    project: Project, name: str, add: Sequence[str] = (), remove: Sequence[str] = ()
) -> Note:
    removing = {validate_tag(t) for t in remove}
    adding = [validate_tag(t) for t in add]

    def change(note: Note) -> tuple[dict[str, object], str]:
        tags = [t for t in note.tags if t not in removing]
        tags += [t for t in adding if t not in tags]
        return dict(note.meta) | {"tags": tags}, note.body

    return change_note(project, name, change)


def delete_note(home: Home, project: Project, name: str) -> Path:
    """Move the note to the data home's trash (never destroyed); return where it went:
    `trash/<project>/<name>.<time>.md`, from where `restore_note` brings it back."""
    with writing(project):
        note = get_note(project, name)
        stamp = datetime.now(UTC).strftime(TRASH_STAMP)
        target = home.settings.home / TRASH_DIR / project.slug / f"{note.name}.{stamp}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(note.path, target)
    return target


TRASH_STAMP = "%Y%m%dT%H%M%S%f"
TRASHED_RE = re.compile(r"^(?P<name>.+)\.(?P<stamp>\d{8}T\d{12})\.md$")


@dataclass(frozen=True)
class TrashedNote:
    """A note in the trash. `id` ("<project>/<name>.<time>.md") names it there."""

    id: str
    project: str
    name: str
    title: str
    path: Path
    deleted_at: str  # ISO-8601, UTC


def _trashed_note(folder: Path, path: Path) -> TrashedNote | None:
    relative = path.relative_to(folder).as_posix()
    match = TRASHED_RE.match(relative)
    if match is None or path.is_symlink() or not path.is_file():
        return None
    try:
        title = read_note(path, folder.name, folder).title
    except (CharlieError, OSError, UnicodeDecodeError):
        title = Path(match["name"]).name  # unreadable now: restored as it is all the same
    deleted = datetime.strptime(match["stamp"], TRASH_STAMP).replace(tzinfo=UTC)
    return TrashedNote(
        f"{folder.name}/{relative}",
        folder.name,
        match["name"],
        title,
        path,
        deleted.isoformat(timespec="seconds"),
    )


def trashed_notes(home: Home, project: str | None = None) -> list[TrashedNote]:
    """The notes in the trash (of `project`, or of every project), most recently deleted
    first. Links in the trash are never followed."""
    root = home.settings.home / TRASH_DIR
    if not root.is_dir():
        return []
    found = []
    for folder in sorted(root.iterdir()):
        if not SLUG_RE.match(folder.name) or folder.is_symlink() or not folder.is_dir():
            continue  # a deleted project's folder (`_projects`), or something else
        if project is not None and folder.name != project:
            continue
        for top, dirs, files in os.walk(folder):
            here = Path(top)
            dirs[:] = [d for d in dirs if not (here / d).is_symlink()]
            found += [t for f in files if (t := _trashed_note(folder, here / f))]
    return sorted(found, key=lambda t: (t.deleted_at, t.id), reverse=True)


def restore_note(home: Home, project: Project, trash_id: str) -> Note:
    """Bring a note back from the trash into `project`, under the name it had; if a note
    of that name was made since, under the first free one of `name-restored`,
    `name-restored-2`… — an existing note is never replaced."""
    found = {t.id: t for t in trashed_notes(home, project.slug)}
    trashed = found.get(trash_id)
    if trashed is None:
        raise NotFound(
            f"There is no note {trash_id!r} of project {project.slug} in the trash; "
            "`charlie trash` lists what is there."
        )
    _refuse_folder_link(project)
    try:
        text = trashed.path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CharlieError(
            f"{trashed.path} is not UTF-8 text ({exc.reason}): move it back by hand."
        ) from exc
    with writing(project):
        name, number = trashed.name, 1
        while True:
            path = note_path(project, name)  # refuses a way out through a link
            if not (path.exists() or path.is_symlink()) and _write_new(path, text):
                break
            name = f"{trashed.name}-restored" + (f"-{number}" if number > 1 else "")
            number += 1
        trashed.path.unlink()
    return read_note(path, project.slug, notes_dir(project).resolve())


@dataclass
class ImportReport:
    imported: list[Note] = field(default_factory=list)
    skipped: list[Problem] = field(default_factory=list)


IMPORT_LINK_REASON = (
    "is a symbolic link; Charlie does not follow links: copy the file itself to import it"
)


def import_folder(project: Project, folder: Path) -> ImportReport:
    """Copy every markdown file under `folder` into the project's notes, as it is.

    Files that do not parse are skipped and reported, and so are symbolic links (to a file
    or a folder: whatever they point to is never read); nothing in `folder` is changed, and
    a note already in the project is never overwritten (the copy gets a new name).
    """
    if not folder.is_dir():
        raise NotFound(f"{folder} is not a folder.")
    _refuse_folder_link(project)
    report = ImportReport()
    root = notes_dir(project)
    for source, is_link in _markdown_under(folder):
        if is_link:
            report.skipped.append(Problem(source, IMPORT_LINK_REASON))
            continue
        try:
            data = read_bytes(source, MAX_NOTE_BYTES)
            if data is None:
                report.skipped.append(Problem(source, "larger than 5 MB; split it first"))
                continue
            text = data.decode("utf-8")
            parse(text, source)
        except UnicodeDecodeError as exc:
            report.skipped.append(Problem(source, f"not UTF-8 text ({exc.reason}); save as UTF-8"))
            continue
        except NoteFormatError as exc:
            report.skipped.append(Problem(source, str(exc).removeprefix(f"{source}: ")))
            continue
        except OSError as exc:  # ELOOP: swapped for a link while we looked
            reason = IMPORT_LINK_REASON if exc.errno == errno.ELOOP else exc.strerror
            report.skipped.append(Problem(source, f"{reason}"))
            continue
        relative = source.relative_to(folder)
        link = link_inside(root, (root / relative).parent)
        if link is not None:
            report.skipped.append(
                Problem(source, f"would be written through {link}, which {LINK_REASON}")
            )
            continue
        target, number = root / relative, 2
        while target.exists() or target.is_symlink() or not _write_new(target, text):
            target = root / relative.with_name(f"{relative.stem}-{number}.md")
            number += 1
        report.imported.append(read_note(target, project.slug, root))
    return report


def _markdown_under(folder: Path) -> list[tuple[Path, bool]]:
    """The markdown files under `folder`, sorted, each with whether it is a symbolic link;
    links to folders are listed too (as links) and never entered. Hidden files and folders
    are left out."""
    found: list[tuple[Path, bool]] = []
    for top, dirs, files in os.walk(folder):
        here = Path(top)
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [(here / d, True) for d in dirs if (here / d).is_symlink()]
        found += [
            (here / f, (here / f).is_symlink())
            for f in files
            if f.endswith(".md") and not f.startswith(".")
        ]
    return sorted(found)
