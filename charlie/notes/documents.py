"""Documents brought in as notes: a PDF, a Word file (.docx), a text or a markdown file.

A document becomes an ordinary note (`notes.create_note`, so the index and the usage model
treat it like any other), written as markdown: the title from the document's own metadata,
else its first heading, else the file's name; headings, paragraphs, lists and tables kept
where the reader library exposes them (python-docx does, pypdf gives text only, one
`## Page N` heading per page). The original file is kept beside the notes, in the project's
`attachments/` folder, and the note's first line links to it.

The kind of a file is told from its content, not its name: a `.pdf` that holds a web page
is refused, and so is a scanned PDF (no text layer), a password-protected one, a damaged
file, or anything bigger than `Limits.max_bytes`. Whatever is refused, nothing is saved.

Files come from anywhere, so reading one must not hang Charlie or eat its memory (a "PDF
bomb", a zip bomb dressed as .docx): `charlie.notes.document_text` reads it in a child process
with a time limit and a memory ceiling, and stops at `Limits.max_pages` pages or
`Limits.max_chars` characters, saying so at the end of the note.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from charlie.errors import Busy, CharlieError, NotFound
from charlie.files import fsync_folder, link_new
from charlie.notes import files as notes
from charlie.notes.document_text import (
    ERRORS,
    KIND_NAMES,
    MB,
    DamagedDocument,
    DocumentError,
    DocumentTooLarge,
    EncryptedDocument,
    Extracted,
    Kind,
    Limits,
    NoTextLayer,
    UnsupportedDocument,
    escape_inline,
    memory_message,
    utf16_without_bom,
)
from charlie.projects import Project
from charlie.text import plural

__all__ = [
    "KIND_NAMES",
    "MB",
    "DamagedDocument",
    "DocumentError",
    "DocumentTooLarge",
    "EncryptedDocument",
    "Imported",
    "Limits",
    "NoTextLayer",
    "UnsupportedDocument",
    "import_document",
]

log = logging.getLogger(__name__)

ATTACHMENTS_DIR = "attachments"
SUFFIXES: dict[str, Kind] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
}
ACCEPTED = "PDF, Word (.docx), text (.txt) and markdown (.md) files"
SNIFF_BYTES = 8192


@dataclass
class Imported:
    """A document brought in: the note made of it, where the original is kept, and what
    the person should know (the text stopped short, say)."""

    note: notes.Note
    original: Path
    kind: Kind
    pages: int | None
    warning: str | None


# ---------------------------------------------------------------- bringing one in


def import_document(
    project: Project, source: Path, name: str | None = None, limits: Limits | None = None
) -> Imported:
    """Make a note of the document at `source` (shown as `name`, its original file name)
    in `project`, and keep the file itself in the project's `attachments/` folder.

    Raises a `DocumentError` (nothing written) when the file is too big, of a kind Charlie
    does not read, scanned, encrypted or damaged. No existing note or file is ever replaced:
    a taken name gets `-2`, `-3`…
    """
    limits = limits or Limits()
    name = display_name(name or source.name)
    try:
        extracted = _read(source, name, limits)
    except DocumentError as exc:
        raise type(exc)(f"{name} was not added: {exc}") from None
    original = keep_original(project, source, name, extracted.kind)
    try:
        title = extracted.title or title_from_name(name)
        body = note_body(extracted, original, name)
        note = notes.create_note(project, title, body, extracted.tags)
    except BaseException:
        original.unlink(missing_ok=True)  # written a moment ago by us: nothing of theirs lost
        raise
    return Imported(note, original, extracted.kind, extracted.pages, _warning(extracted, limits))


def _read(source: Path, name: str, limits: Limits) -> Extracted:
    too_large = limits.too_large(source.stat().st_size)
    if too_large is not None:
        raise DocumentTooLarge(too_large)
    return read_document(source, sniff(source, name), name, limits)


def display_name(raw: str) -> str:
    """A file name as a browser or a shell gave it, without any folders or control
    characters (a name is only ever shown and used to name the kept copy)."""
    base = re.split(r"[/\\]", raw)[-1]
    clean = "".join(c for c in base if ord(c) >= 32 and c != "\x7f").strip()
    return clean[:200] or "document"


def title_from_name(name: str) -> str:
    stem = Path(name).stem if Path(name).suffix.lower() in SUFFIXES else name
    return re.sub(r"\s+", " ", stem.replace("_", " ")).strip() or "Document"


def note_body(extracted: Extracted, original: Path, name: str) -> str:
    """The note: a first line linking to the kept original, then the document's text."""
    facts = KIND_NAMES[extracted.kind]
    if extracted.pages is not None:
        facts += f", {extracted.pages} {plural(extracted.pages, 'page')}"
    link = f"../{ATTACHMENTS_DIR}/{original.name}"
    first = f"Original: [{escape_inline(name)}]({link}) ({facts})"
    return f"{first}\n\n{extracted.body.strip()}\n"


def _warning(extracted: Extracted, limits: Limits) -> str | None:
    if not extracted.truncated:
        return None
    if extracted.pages and extracted.pages_read and extracted.pages_read < extracted.pages:
        return (
            f"Only the first {extracted.pages_read} of {extracted.pages} pages were read; the "
            "whole document is in the original file."
        )
    return (
        f"The document is longer than {limits.max_chars:,} characters, so the note holds its "
        "beginning; the whole document is in the original file."
    )


# ---------------------------------------------------------------- the kept original


def attachments_dir(project: Project) -> Path:
    return project.path / ATTACHMENTS_DIR


def _attachments_folder(project: Project) -> Path:
    folder = attachments_dir(project)
    if folder.is_symlink():
        raise CharlieError(
            f"The attachments of project {project.slug} are in {folder}, which {notes.LINK_REASON}."
        )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def keep_original(project: Project, source: Path, name: str, kind: Kind) -> Path:
    """Copy `source` into the project's attachments folder under a name no file there has
    (the file name made safe, then `-2`, `-3`…); an existing file is never replaced."""
    folder = _attachments_folder(project)
    suffix = Path(name).suffix.lower()
    if SUFFIXES.get(suffix) != kind:
        suffix = {"pdf": ".pdf", "docx": ".docx", "markdown": ".md", "text": ".txt"}[kind]
    stem = _safe_stem(Path(name).stem if Path(name).suffix else name)
    fd, tmp = tempfile.mkstemp(prefix=".upload.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as data:
            shutil.copyfileobj(data, out, 1024 * 1024)
            out.flush()
            os.fsync(out.fileno())
        for candidate in _candidates(stem, suffix):
            target = folder / candidate
            if link_new(Path(tmp), target):
                fsync_folder(folder)
                return target
    finally:
        Path(tmp).unlink(missing_ok=True)
    raise AssertionError("unreachable: the names never run out")


def _safe_stem(stem: str) -> str:
    """A file name any file system takes, recognisably the original's: letters, digits,
    '-', '_' and '.' kept, the rest made '-', at most 100 bytes, never hidden."""
    clean = re.sub(r"[^\w.-]+", "-", stem, flags=re.UNICODE).strip("-_.")
    while len(clean.encode("utf-8")) > 100:
        clean = clean[:-1]
    return clean.strip("-_.") or "document"


def _candidates(stem: str, suffix: str) -> Iterator[str]:
    yield f"{stem}{suffix}"
    number = 2
    while True:
        yield f"{stem}-{number}{suffix}"
        number += 1


def original_path(project: Project, name: str) -> Path:
    """The kept original called `name` in the project's attachments folder; `NotFound` for
    anything else (a path, a hidden file, a symbolic link, a file that is not there)."""
    missing = NotFound(f"There is no attached file {name!r} in project {project.slug}.")
    if not name or name.startswith(".") or any(c in name for c in "/\\") or "\x00" in name:
        raise missing
    folder = attachments_dir(project)
    path = folder / name
    if folder.is_symlink() or path.is_symlink() or not path.is_file():
        raise missing
    return path


# ---------------------------------------------------------------- what kind of file


def sniff(path: Path, name: str) -> Kind:
    """The kind of document the file holds, told from its content; its name only tells
    markdown from plain text, and a name that promises a PDF or a Word file must hold one."""
    with open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
    suffix = Path(name).suffix.lower()
    named = SUFFIXES.get(suffix)
    found = _kind_of(head, path)
    if found == "pdf" or found == "docx":
        return found
    if named in ("pdf", "docx"):
        holds = found.what if found is not None else "text"
        raise UnsupportedDocument(
            f"It is named {suffix} but holds {holds}, not a {KIND_NAMES[named]}: the file "
            "may be damaged, or misnamed."
        )
    if found is not None:
        raise UnsupportedDocument(f"It is {found.what}; {found.advice}. Charlie reads {ACCEPTED}.")
    if named is None and suffix:
        raise UnsupportedDocument(
            f"Charlie reads {ACCEPTED}, and a {suffix} file is none of those. If it is plain "
            "text, rename it .txt and add it again."
        )
    return named or "text"


class Other(NamedTuple):
    """A file Charlie does not read: what it is, and what to do instead."""

    what: str
    advice: str


PICTURE = "Charlie can't read text in pictures yet — run OCR on it first"
MAGIC: list[tuple[bytes, Other]] = [
    (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        Other("an old Office file (.doc, .xls)", "save it as .docx"),
    ),
    (b"{\\rtf", Other("rich text (RTF)", "save it as .docx or .txt")),
    (b"\x89PNG", Other("a picture (PNG)", PICTURE)),
    (b"\xff\xd8\xff", Other("a picture (JPEG)", PICTURE)),
    (b"GIF8", Other("a picture (GIF)", PICTURE)),
    (b"II*\x00", Other("a picture (TIFF)", PICTURE)),
    (b"MM\x00*", Other("a picture (TIFF)", PICTURE)),
    (b"\x1f\x8b", Other("a compressed (gzip) file", "unpack it first")),
    (b"7z\xbc\xaf", Other("a 7-Zip archive", "unpack it first")),
    (b"Rar!", Other("a RAR archive", "unpack it first")),
]


def _kind_of(head: bytes, path: Path) -> Literal["pdf", "docx"] | Other | None:
    """'pdf' or 'docx'; None for what may be text; else what the file is."""
    if b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return _zip_kind(path)
    for magic, other in MAGIC:
        if head.startswith(magic):
            return other
    if head[:512].lstrip().lower().startswith((b"<!doctype html", b"<html")):
        return Other("a web page (HTML)", "save it as PDF, or copy its text into a note")
    if not _looks_like_text(head):
        return Other("binary data, not a document", "export the document as PDF or text")
    return None


def _zip_kind(path: Path) -> Literal["docx"] | Other:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            mimetype = archive.read("mimetype")[:100] if "mimetype" in names else b""
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError):
        return Other("a damaged ZIP archive", "export the document again")
    if "word/document.xml" in names:
        return "docx"
    if b"opendocument" in mimetype:
        return Other("an OpenDocument file (.odt, .ods)", "save it as .docx or PDF")
    if b"epub" in mimetype:
        return Other("an e-book (EPUB)", "save it as PDF")
    if "xl/workbook.xml" in names:
        return Other("an Excel workbook", "save it as PDF")
    if "ppt/presentation.xml" in names:
        return Other("a PowerPoint presentation", "save it as PDF")
    return Other("a ZIP archive", "unpack it first")


def _looks_like_text(head: bytes) -> bool:
    if head.startswith((b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf")):
        return True
    if utf16_without_bom(head) is not None:
        return True
    if b"\x00" in head:
        return False
    odd = sum(1 for byte in head if byte < 32 and byte not in b"\t\n\r\f\x1b")
    return odd <= len(head) // 100


# ---------------------------------------------------------------- reading, in a child


# Documents read at once in this process: each reader may take up to its memory limit, so
# a few uploads at once must not add up to more than the machine has.
READERS = threading.BoundedSemaphore(2)
READER_WAIT = 60.0  # seconds an upload waits for a reader before it is told to try again


def read_document(path: Path, kind: Kind, name: str, limits: Limits) -> Extracted:
    """Read the document in a child process bounded in time and memory (see the module's
    docstring); its `DocumentError` is raised here as it was there."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    command = [
        sys.executable,
        "-m",
        "charlie.notes.document_text",
        str(path),
        kind,
        json.dumps(asdict(limits)),
    ]
    if not READERS.acquire(timeout=READER_WAIT):
        raise Busy("Other documents are being read right now; try this one again in a minute.")
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=limits.seconds,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DamagedDocument(
            f"Reading it took longer than {limits.seconds:g} s, so Charlie stopped. The file "
            "may be damaged, or made to stall readers."
        ) from None
    finally:
        READERS.release()
    try:
        answer: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        log.warning("reading %s failed (exit %s): %s", name, done.returncode, done.stderr[-2000:])
        raise DamagedDocument(_crash_message(done.returncode, done.stderr, limits)) from None
    if "error" in answer:
        raise ERRORS.get(answer["type"], DocumentError)(answer["error"])
    return Extracted(**answer["ok"])


def _crash_message(returncode: int, stderr: bytes, limits: Limits) -> str:
    if b"MemoryError" in stderr or returncode in (-9, -24):  # SIGKILL, SIGXCPU
        return memory_message(limits)
    return (
        f"The reader stopped without an answer (exit status {returncode}); the file may be damaged."
    )
