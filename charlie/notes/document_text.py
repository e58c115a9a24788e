"""A document's text as markdown: PDF (pypdf), Word (python-docx), text and markdown files.

This is the part of bringing a document in (`charlie.notes.documents`) that reads files from
anywhere, so it runs in a child process of its own, `python -m charlie.notes.document_text PATH
KIND LIMITS`, capped in memory and CPU time (`Limits`), and answers with JSON on its
standard output. It imports little, so the child starts quickly; the parent raises the
child's `DocumentError` as its own.

What a reader library exposes is kept as markdown: headings, paragraphs, bold and italic,
links, lists and tables from a Word file; from a PDF its text page by page (pypdf gives no
structure), under one `## Page N` heading each, with bullet glyphs made list items. Text
that markdown would misread (a line starting `# ` in a text file) is made literal.
"""

from __future__ import annotations

import json
import logging
import re
import resource
import sys
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from charlie.errors import CharlieError

log = logging.getLogger(__name__)

MB = 1024 * 1024
Kind = Literal["pdf", "docx", "markdown", "text"]
KIND_NAMES: dict[str, str] = {
    "pdf": "PDF",
    "docx": "Word document",
    "markdown": "markdown file",
    "text": "text file",
}
MAX_ZIP_MEMBERS = 10_000  # parts of a Word file; a real one has dozens


@dataclass(frozen=True)
class Limits:
    """How much of a document Charlie reads. Every limit keeps a hostile file (a "PDF
    bomb", a zip bomb) from hanging the server or filling its memory."""

    max_bytes: int = 25 * MB  # the file as uploaded
    max_pages: int = 2000  # PDF pages read; the rest is left in the original file
    max_chars: int = 1_000_000  # of the note's text: at most 4 MB, under a note's 5 MB
    seconds: float = 60.0  # reading one document, start to end
    memory_bytes: int = 1536 * MB  # address space of the process that reads it
    max_unpacked: int = 400 * MB  # a Word file's parts, unpacked: more is a zip bomb

    def too_large(self, size: int) -> str | None:
        """What to tell the person about a file of `size` bytes, if it is too large."""
        if size <= self.max_bytes:
            return None
        return (
            f"It is {file_size(size)}, and Charlie takes documents of up to "
            f"{file_size(self.max_bytes)}. Split it, or save a smaller copy (without "
            "pictures), then add that."
        )


def file_size(size: int) -> str:
    """`size` bytes as a person reads it: "25 MB", "2.4 MB", "830 KB"."""
    if size >= MB:
        return f"{size / MB:.3g} MB"
    return f"{max(1, round(size / 1024))} KB"


class DocumentError(CharlieError):
    """A document Charlie cannot turn into a note; nothing was saved."""


class DocumentTooLarge(DocumentError):
    """The file is over `Limits.max_bytes`."""


class UnsupportedDocument(DocumentError):
    """The file's content is not a kind Charlie reads (whatever its name says)."""


class NoTextLayer(DocumentError):
    """A PDF with pages but no text: a scan, or pictures of text."""


class EncryptedDocument(DocumentError):
    """A password-protected PDF."""


class DamagedDocument(DocumentError):
    """The reader library could not read the file, or reading it ran out of time or memory."""


ERRORS: dict[str, type[DocumentError]] = {
    kind.__name__: kind
    for kind in (
        DocumentError,
        DocumentTooLarge,
        UnsupportedDocument,
        NoTextLayer,
        EncryptedDocument,
        DamagedDocument,
    )
}
NO_TEXT_LAYER = (
    "This PDF has no text layer (it looks scanned); Charlie can't read it yet — run OCR on it "
    "first (ocrmypdf does, for one), then add the file it makes."
)


@dataclass
class Extracted:
    """What reading a document gave: its title (None: name it after the file), its text as
    markdown, how many pages it has (PDF only), and whether the text stops short."""

    kind: Kind
    title: str | None
    body: str
    pages: int | None = None
    pages_read: int | None = None
    truncated: bool = False
    tags: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- text encodings


def utf16_without_bom(data: bytes) -> str | None:
    """'utf-16-le' or 'utf-16-be' for text saved as UTF-16 with no byte-order mark (every
    other byte zero, as in mostly-Latin text); else None."""
    sample = data[:4096]
    if len(sample) < 4:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) > len(odd) * 0.9 and even.count(0) < len(even) * 0.1:
        return "utf-16-le"
    if even.count(0) > len(even) * 0.9 and odd.count(0) < len(odd) * 0.1:
        return "utf-16-be"
    return None


BOMS: list[tuple[bytes, str]] = [
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
]


def decode_text(data: bytes) -> str:
    """Text in whatever encoding it came: a byte-order mark says which (UTF-8, UTF-16,
    UTF-32); else UTF-8 if it is valid, UTF-16 if it looks it, else Windows-1252 (a superset
    of Latin-1, what old Windows and Mac text files mostly are)."""
    for bom, codec in BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    utf16 = utf16_without_bom(data)
    if utf16 is not None:
        return data.decode(utf16, errors="replace")
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:  # the five bytes cp1252 leaves undefined
        return data.decode("latin-1")


# ---------------------------------------------------------------- the child


def _child(argv: list[str]) -> int:
    """`python -m charlie.notes.document_text PATH KIND LIMITS`: read one document and print
    what it holds as JSON (`{"ok": …}` or `{"error": …, "type": …}`) on standard output."""
    path, kind, raw = argv
    limits = Limits(**json.loads(raw))
    if kind not in KIND_NAMES:
        raise SystemExit(f"unknown kind {kind!r}")
    _load_reader(cast(Kind, kind))
    _bound(limits)
    try:
        answer: dict[str, object] = {"ok": asdict(extract(Path(path), cast(Kind, kind), limits))}
    except DocumentError as exc:
        answer = {"error": str(exc), "type": type(exc).__name__}
    except (MemoryError, ImportError):  # a module loaded late found no memory to map into
        answer = {"error": memory_message(limits), "type": "DamagedDocument"}
    except RecursionError:
        answer = {
            "error": "It is nested too deeply to read: it may be damaged.",
            "type": "DamagedDocument",
        }
    except Exception as exc:  # the reader library's own error on a file it cannot read
        answer = {"error": _damaged(exc), "type": "DamagedDocument"}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    return 0


def _load_reader(kind: Kind) -> None:
    """Import the reader library before the memory cap, which is for the reading only."""
    if kind == "pdf":
        import pypdf  # noqa: F401
    elif kind == "docx":
        import docx  # noqa: F401
    else:
        from charlie.notes import files as notes  # noqa: F401  (markdown front matter


def memory_message(limits: Limits) -> str:
    return (
        f"Reading it needed more than the {limits.memory_bytes // MB} MB of memory Charlie "
        "allows, so it stopped. The file may be damaged, or made to overload readers."
    )


def _damaged(exc: Exception) -> str:
    detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return f"It could not be read; the file looks damaged ({detail})."


def _bound(limits: Limits) -> None:
    """Cap this (child) process's memory and CPU time, where the system lets a process."""
    for which, value in (
        (resource.RLIMIT_AS, limits.memory_bytes),
        (resource.RLIMIT_CPU, int(limits.seconds) + 2),
    ):
        try:
            _, hard = resource.getrlimit(which)
            wanted = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (wanted, hard))
        except (ValueError, OSError) as exc:  # macOS refuses RLIMIT_AS: the timeout still holds
            log.debug("could not set limit %s: %s", which, exc)


def extract(path: Path, kind: Kind, limits: Limits) -> Extracted:
    """Read the document in this process (the child calls this; tests may too)."""
    if kind == "pdf":
        return _read_pdf(path, limits)
    if kind == "docx":
        return _read_docx(path, limits)
    return _read_text(path, kind, limits)


# ---------------------------------------------------------------- text and markdown


def _read_text(path: Path, kind: Kind, limits: Limits) -> Extracted:
    text = decode_text(path.read_bytes()).replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\x00", "")
    title: str | None = None
    tags: list[str] = []
    if kind == "markdown":
        from charlie.notes import files as notes  # here: a child reading a PDF starts without it

        try:
            meta, text = notes.parse(text, path)
        except notes.NoteFormatError as exc:
            raise DamagedDocument(
                str(exc).removeprefix(f"{path}: ") + " Fix it, then add the file again."
            ) from None
        raw_title = meta.get("title")
        title = _clean_title(raw_title) if isinstance(raw_title, str) else None
        tags = [t for t in notes.normalise_tags(meta.get("tags")) if notes.TAG_RE.match(t)]
        if title is None:
            title, text = _first_heading(text)
    else:
        text = "\n".join(_literal_line(line) for line in text.split("\n"))
    if not text.strip():
        raise DocumentError("It holds no text, so there is nothing to make a note of.")
    truncated = len(text) > limits.max_chars
    if truncated:
        text = _cut(text, limits.max_chars) + "\n\n" + _stopped(limits)
    return Extracted(kind, title, text, truncated=truncated, tags=tags)


def _first_heading(text: str) -> tuple[str | None, str]:
    """The first line's `# heading` as the title, and the text without it."""
    lines = text.lstrip("\n").split("\n")
    match = re.match(r"^ {0,3}#\s+(.+?)\s*#*\s*$", lines[0]) if lines else None
    if match is None or _clean_title(match.group(1)) is None:
        return None, text
    return _clean_title(match.group(1)), "\n".join(lines[1:])


def _cut(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, at a paragraph or line end if one is near."""
    cut = text[:limit]
    for mark in ("\n\n", "\n"):
        at = cut.rfind(mark)
        if at > limit * 0.8:
            return cut[:at]
    return cut


def _stopped(limits: Limits, pages: tuple[int, int] | None = None) -> str:
    if pages is not None:
        read, total = pages
        return (
            f"*Charlie stopped reading after page {read} of {total}; the whole document is in "
            "the original file.*"
        )
    return (
        f"*Charlie stopped reading here: the document is longer than {limits.max_chars:,} "
        "characters. The whole document is in the original file.*"
    )


_BLOCK_START = re.compile(r"^( {0,3})(#{1,6}(?=[ \t]|$)|```|~~~)")


def _literal_line(line: str) -> str:
    """A line of plain text that markdown would read as a heading or a code fence, made
    literal (a list or a quote in a text file is meant as one, so those stay)."""
    return _BLOCK_START.sub(lambda m: f"{m.group(1)}\\{m.group(2)}", line, count=1)


_INLINE = re.compile(r"([\\`*\[\]])|(?<![^\W_])_|_(?![^\W_])")


def escape_inline(text: str) -> str:
    """Text that markdown shows as typed: `*`, backquotes, brackets and `_` at a word's
    edge escaped (snake_case stays as it is)."""
    return _INLINE.sub(lambda m: "\\" + m.group(0), text)


def _clean_title(raw: str | None) -> str | None:
    """A title worth using: one line, not a placeholder a program put in (`Untitled`,
    `Microsoft Word - draft.docx`, a file name)."""
    if not raw:
        return None
    title = re.sub(r"\s+", " ", raw).strip()
    if not title or len(title) > 200 or not any(c.isalnum() for c in title):
        return None
    lowered = title.lower()
    if lowered in {"untitled", "untitled document", "document", "title"}:
        return None
    if lowered.startswith(("microsoft word - ", "microsoft powerpoint - ")):
        return None
    if re.fullmatch(
        r"[\w .-]+\.(docx?|pdf|txt|md|rtf|odt|indd|tex|dvi|ps|x?html?|php|aspx?|png|jpe?g)",
        lowered,
    ):  # a browser prints a page without a <title> under its file name
        return None
    if re.match(r"(file|https?)://", lowered):
        return None
    return title


# ---------------------------------------------------------------- PDF


_BULLET = re.compile(r"^(\s*)[•◦▪‣●○■□–·](?:\s+)")
# What a browser prints around each page: a header of the date and the page's title, a
# footer of its address and the page count ("file:///home/sam/quote.html 1/2").
_PRINTED_FOOTER = re.compile(r"^\s*(file|https?)://\S*(\s+\d+\s*/\s*\d+)?\s*$", re.I)
_PRINTED_HEADER = re.compile(
    r"^\s*\d{1,4}[/.-]\d{1,2}[/.-]\d{1,4},?\s+\d{1,2}:\d{2}(:\d{2})?(\s*[ap]\.?m\.?)?(\s+.*)?$",
    re.I,
)


def _without_print_margins(text: str) -> str:
    """A page's text without the header and footer a browser prints on it."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if lines and _PRINTED_FOOTER.match(lines[-1]):
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and _PRINTED_HEADER.match(lines[0]):
        lines.pop(0)
    return "\n".join(lines)


def _read_pdf(path: Path, limits: Limits) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    reader = PdfReader(path, strict=False)
    if reader.is_encrypted:
        opened: Any
        try:
            opened = reader.decrypt("")  # many "protected" PDFs only limit printing
        except (DependencyError, NotImplementedError):
            opened = 0
        if not opened:
            raise EncryptedDocument(
                "This PDF is protected by a password, so Charlie can't read it. Open it, "
                "save or print a copy without the password, then add that."
            )
    try:
        total = len(reader.pages)
    except FileNotDecryptedError:
        raise EncryptedDocument("This PDF is protected by a password.") from None
    if total == 0:
        raise DocumentError("This PDF has no pages, so there is nothing to make a note of.")
    title = _clean_title(_pdf_title(reader))
    parts: list[str] = []
    chars = 0
    texts_found = images_found = 0
    read = 0
    truncated = False
    for number, page in enumerate(reader.pages, start=1):
        if number > limits.max_pages:
            truncated = True
            break
        text = _page_markdown(_without_print_margins(page.extract_text() or ""))
        read = number
        if text:
            texts_found += 1
        elif _has_images(page):
            images_found += 1
            text = "*(No text on this page: it may be a scanned picture.)*"
        else:
            text = "*(This page is blank.)*"
        block = f"## Page {number}\n\n{text}"
        if chars + len(block) > limits.max_chars:
            room = limits.max_chars - chars
            if room > 200:
                parts.append(_cut(block, room))
            truncated = True
            break
        parts.append(block)
        chars += len(block) + 2
    if not texts_found:
        if images_found:
            raise NoTextLayer(NO_TEXT_LAYER)
        raise DocumentError(
            "This PDF holds no text (its pages are blank, or its letters are drawn as "
            "shapes); run OCR on it first, then add the file it makes."
        )
    if truncated:
        parts.append(_stopped(limits, (read, total)))
    return Extracted("pdf", title, "\n\n".join(parts), total, read, truncated)


def _pdf_title(reader: Any) -> str | None:
    try:
        metadata = reader.metadata
        title = metadata.title if metadata is not None else None
    except Exception:  # a damaged Info dictionary: the file name will do
        return None
    return title if isinstance(title, str) else None


def _page_markdown(text: str) -> str:
    """A page's extracted text as markdown: lines kept (the PWA keeps line breaks), bullet
    glyphs made list items, heading-like marks made literal, blank runs squeezed.

    After a list item, a line starting in lower case is taken as the item's wrapped text;
    any other line ends the list (markdown would otherwise fold it into the last item)."""
    lines: list[str] = []
    in_list = False
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw.rstrip().replace("\x00", "")
        item = _BULLET.sub(lambda m: f"{m.group(1)}- ", line)
        if item != line:
            in_list = True
            lines.append(item)
            continue
        if in_list and line.strip():
            if line.lstrip()[:1].islower():
                lines.append("  " + _literal_line(line.lstrip()))
                continue
            lines.append("")
        in_list = False
        lines.append(_literal_line(line))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _has_images(page: Any) -> bool:
    try:
        resources = page.get("/Resources")
        xobjects = resources.get_object().get("/XObject") if resources is not None else None
        if xobjects is None:
            return False
        return any(
            ref.get_object().get("/Subtype") == "/Image" for ref in xobjects.get_object().values()
        )
    except Exception:  # a damaged resource dictionary: say "blank", not "scanned"
        return False


# ---------------------------------------------------------------- Word (.docx)


def _read_docx(path: Path, limits: Limits) -> Extracted:
    _check_zip(path, limits)
    import docx

    document = docx.Document(str(path))
    title = _clean_title(document.core_properties.title)
    blocks: list[tuple[str, str]] = []  # (kind: "item" | "block" | "title", markdown)
    chars = 0
    truncated = False
    for part in document.iter_inner_content():
        block = _docx_block(part)
        if block is None:
            continue
        if chars + len(block[1]) > limits.max_chars:
            truncated = True
            break
        blocks.append(block)
        chars += len(block[1]) + 2
    title, blocks = _docx_title(title, blocks)
    body = _join_blocks(blocks)
    if not body.strip():
        raise DocumentError(
            "This Word document holds no text, so there is nothing to make a note of."
        )
    if truncated:
        body += "\n\n" + _stopped(limits)
    return Extracted("docx", title, body, truncated=truncated)


def _docx_title(
    title: str | None, blocks: list[tuple[str, str]]
) -> tuple[str | None, list[tuple[str, str]]]:
    """The title of a Word document (`title`, from its properties, if it has one; else its
    first paragraph in the Title style, else a heading it opens with), and the body without
    the paragraph that says the title (shown once, as the note's title)."""
    titled = [i for i, (kind, _) in enumerate(blocks) if kind == "title"]
    if titled:
        at = titled[0]
    elif blocks and blocks[0][0] == "heading":
        at = 0
    else:
        return title, blocks
    said = _clean_title(re.sub(r"^#+\s*", "", blocks[at][1]).replace("\\", ""))
    if said is None or (title is not None and said != title):
        return title, blocks
    return said, blocks[:at] + blocks[at + 1 :]


def _check_zip(path: Path, limits: Limits) -> None:
    """Refuse a .docx whose parts unpack to far more than any real document (a zip bomb)
    before python-docx unpacks it in memory."""
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        if len(members) > MAX_ZIP_MEMBERS:
            raise DamagedDocument(
                f"It holds {len(members):,} parts; no Word document has that many."
            )
        unpacked = 0  # counted as it really unpacks: the sizes a zip declares may lie
        for member in members:
            with archive.open(member) as part:
                while chunk := part.read(1 << 20):
                    unpacked += len(chunk)
                    if unpacked > limits.max_unpacked:
                        raise DamagedDocument(
                            f"It unpacks to more than {limits.max_unpacked / MB:,.0f} MB, far "
                            "more than a Word document holds; it may be made to overload "
                            "readers."
                        )


def _docx_block(part: Any) -> tuple[str, str] | None:
    """One paragraph or table of a Word document as (kind, markdown); None when empty."""
    from docx.table import Table

    if isinstance(part, Table):
        table = _docx_table(part)
        return ("block", table) if table else None
    style = (part.style.name if part.style is not None else "") or ""
    heading = re.fullmatch(r"Heading (\d)", style)
    if style == "Title":
        text = _plain(part.text)
        return ("title", f"# {text}") if text else None
    if heading:
        text = _plain(part.text)
        return ("heading", f"{'#' * min(int(heading.group(1)), 6)} {text}") if text else None
    text = _docx_inline(part)
    if not text.strip():
        return None
    level = _list_level(part, style)
    if level is not None:
        marker = "1." if "Number" in style else "-"
        return ("item", f"{'   ' * level}{marker} {text.strip()}")
    if style in ("Quote", "Intense Quote"):
        return ("block", "\n".join(f"> {line}" for line in text.split("\n")))
    return ("block", "\n".join(_literal_line(line) for line in text.split("\n")))


def _plain(text: str) -> str:
    return escape_inline(re.sub(r"\s+", " ", text).strip())


def _list_level(paragraph: Any, style: str) -> int | None:
    """The nesting level (0 = top) of a list paragraph, by its list style ("List Bullet 2")
    or its numbering properties; None for a paragraph that is no list item."""
    listed = re.fullmatch(r"List (?:Bullet|Number|Continue)(?: (\d))?", style)
    if listed:
        return int(listed.group(1) or 1) - 1
    properties = paragraph._p.pPr
    numbering = properties.numPr if properties is not None else None
    if numbering is None or numbering.numId is None:
        return None
    level = numbering.ilvl.val if numbering.ilvl is not None else 0
    return min(int(level), 8)


def _docx_inline(paragraph: Any) -> str:
    """A paragraph's runs as markdown: bold, italic and links kept, everything else
    escaped; whitespace kept outside the emphasis marks, where markdown needs it."""
    from docx.text.hyperlink import Hyperlink

    out: list[str] = []
    for item in paragraph.iter_inner_content():
        if isinstance(item, Hyperlink):
            text = escape_inline(item.text)
            address = item.address or ""
            if text.strip() and re.match(r"(?i)^(https?:|mailto:)", address):
                out.append(f"[{text}]({address.replace(' ', '%20').replace(')', '%29')})")
            else:
                out.append(text)
            continue
        text = item.text
        if not text:
            continue
        marks = ("**" if item.bold else "") + ("*" if item.italic else "")
        if not marks or not text.strip():
            out.append(escape_inline(text))
            continue
        lead = text[: len(text) - len(text.lstrip())]
        tail = text[len(text.rstrip()) :]
        out.append(f"{lead}{marks}{escape_inline(text.strip())}{marks[::-1]}{tail}")
    return "".join(out).replace("\t", " ")


def _docx_table(table: Any) -> str:
    rows: list[list[str]] = []
    for row in table.rows:
        rows.append([_plain(cell.text).replace("|", "\\|") for cell in row.cells])
    rows = [row for row in rows if any(cell for cell in row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    lines = [_table_row(rows[0]), _table_row(["---"] * width)]
    lines += [_table_row(row) for row in rows[1:]]
    return "\n".join(lines)


def _table_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _join_blocks(blocks: list[tuple[str, str]]) -> str:
    """Blocks one blank line apart; consecutive list items one line apart (one list)."""
    out = ""
    previous = None
    for kind, text in blocks:
        if out:
            out += "\n" if kind == "item" and previous == "item" else "\n\n"
        out += text
        previous = kind
    return out


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
