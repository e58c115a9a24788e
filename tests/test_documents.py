"""Documents brought in as notes: PDF, Word, text and markdown files, from the core and the CLI.

Every document is made here (tests/document_files.py); every refusal is checked to leave
nothing behind: no note, no kept original, no temp file.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest
from conftest import Cli
from document_files import kitchen_docx, scanned_pdf, text_pdf, zip_bomb_docx

from charlie.config import load_settings
from charlie.home import Home
from charlie.notes import documents
from charlie.notes import files as notes
from charlie.notes.document_text import NO_TEXT_LAYER, decode_text
from charlie.notes.documents import Limits
from charlie.projects import Project, create_project
from charlie.retrieval.embeddings import from_settings
from charlie.retrieval.index import Index
from charlie.retrieval.search import Searcher
from charlie.users import ensure_user


@pytest.fixture
def project(home: Home) -> Project:
    return create_project(home, "Kitchen")


def write(folder: Path, name: str, data: bytes | str) -> Path:
    path = folder / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def saved(project: Project) -> list[str]:
    """Every file now in the project's notes and attachments folders (hidden ones too)."""
    found = []
    for folder in (notes.notes_dir(project), documents.attachments_dir(project)):
        if folder.is_dir():
            found += sorted(p.relative_to(project.path).as_posix() for p in folder.rglob("*"))
    return found


# ---------------------------------------------------------------- PDF


def test_a_pdf_becomes_a_note_with_its_pages_and_the_original_kept(
    project: Project, tmp_path: Path
) -> None:
    pdf = write(
        tmp_path,
        "Q3 report.pdf",
        text_pdf(
            [
                "Heating costs rose by (12%) in Q3.\n• boiler service\nin spring\n# 4 invoices",
                "Café plans",
            ],
            title="Quarterly heating report",
        ),
    )
    made = documents.import_document(project, pdf)
    note = notes.get_note(project, made.note.name)
    assert (note.name, note.title, made.kind, made.pages) == (
        "quarterly-heating-report",
        "Quarterly heating report",
        "pdf",
        2,
    )
    assert made.warning is None
    assert note.body == (
        "Original: [Q3 report.pdf](../attachments/Q3-report.pdf) (PDF, 2 pages)\n\n"
        "## Page 1\n\n"
        "Heating costs rose by (12%) in Q3.\n- boiler service\n  in spring\n\n\\# 4 invoices\n\n"
        "## Page 2\n\nCafé plans\n"
    )
    assert made.original == documents.attachments_dir(project) / "Q3-report.pdf"
    assert made.original.read_bytes() == pdf.read_bytes()
    assert saved(project) == ["notes/quarterly-heating-report.md", "attachments/Q3-report.pdf"]


def test_a_pdf_without_a_title_is_named_after_its_file(project: Project, tmp_path: Path) -> None:
    pdf = write(tmp_path, "boiler_manual.pdf", text_pdf(["Bleed the radiators yearly."]))
    made = documents.import_document(project, pdf)
    assert (made.note.title, made.note.name) == ("boiler manual", "boiler-manual")


def test_a_page_printed_from_a_browser_loses_its_file_name_title_and_print_margins(
    project: Project, tmp_path: Path
) -> None:
    """A browser's "print to PDF" titles the file after the page's file name and prints the
    date, the address and the page count around every page: none of it is the document."""
    pages = [
        f"12/1/26, 3:04 PM quote.html\nKitchen quote from Oakwood\nWorktops: 2,400\n"
        f"file:///home/sam/Downloads/quote.html {n}/2"
        for n in (1, 2)
    ]
    pdf = write(tmp_path, "Oakwood quote.pdf", text_pdf(pages, title="quote.html"))
    made = documents.import_document(project, pdf)
    assert made.note.title == "Oakwood quote"
    assert "file://" not in made.note.body and "3:04 PM" not in made.note.body
    assert made.note.body.count("Worktops: 2,400") == 2


def test_a_note_from_a_document_is_found_by_search(
    home: Home, project: Project, tmp_path: Path
) -> None:
    pdf = write(tmp_path, "manual.pdf", text_pdf(["Descale the Zanussi kettle monthly."]))
    made = documents.import_document(project, pdf)
    index = Index(home, from_settings(home.settings))
    index.refresh()
    result = Searcher(home, index).search(
        "Zanussi descale", ensure_user(home.db, "alice"), [project], limit=3
    )
    assert [hit.key for hit in result.hits][:1] == [made.note.key]


def test_a_scanned_pdf_is_refused_and_nothing_saved(project: Project, tmp_path: Path) -> None:
    pdf = write(tmp_path, "scan.pdf", scanned_pdf())
    with pytest.raises(documents.NoTextLayer) as refused:
        documents.import_document(project, pdf)
    assert str(refused.value) == f"scan.pdf was not added: {NO_TEXT_LAYER}"
    assert "This PDF has no text layer (it looks scanned); Charlie can't read it yet — run OCR" in (
        str(refused.value)
    )
    assert saved(project) == []


def test_a_partly_scanned_pdf_keeps_its_text_and_marks_the_picture_pages(
    project: Project, tmp_path: Path
) -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for data in (text_pdf(["Typed cover letter"]), scanned_pdf(1)):
        writer.append(PdfReader(write(tmp_path, "part.pdf", data)))
    path = tmp_path / "mixed.pdf"
    writer.write(path)
    made = documents.import_document(project, path)
    assert "## Page 1\n\nTyped cover letter\n\n## Page 2\n\n*(No text on this page" in (
        made.note.body
    )


def test_a_password_protected_pdf_is_refused(project: Project, tmp_path: Path) -> None:
    pdf = write(tmp_path, "bank.pdf", text_pdf(["Account 1234"], password="secret"))
    with pytest.raises(documents.EncryptedDocument, match="protected by a password"):
        documents.import_document(project, pdf)
    assert saved(project) == []


def test_a_pdf_locked_only_against_printing_is_read(project: Project, tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(write(tmp_path, "a.pdf", text_pdf(["Open text"]))))
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-128")
    path = tmp_path / "locked.pdf"
    writer.write(path)
    assert "Open text" in documents.import_document(project, path).note.body


def test_a_damaged_pdf_is_refused(project: Project, tmp_path: Path) -> None:
    whole = text_pdf(["Some text"])
    pdf = write(tmp_path, "cut.pdf", whole[:120])
    with pytest.raises(documents.DocumentError, match=r"^cut\.pdf was not added: "):
        documents.import_document(project, pdf)
    assert saved(project) == []


def test_pages_past_the_limit_are_left_in_the_original(project: Project, tmp_path: Path) -> None:
    pdf = write(tmp_path, "long.pdf", text_pdf([f"Page text {n}" for n in range(1, 6)]))
    made = documents.import_document(project, pdf, limits=Limits(max_pages=2))
    assert made.warning == (
        "Only the first 2 of 5 pages were read; the whole document is in the original file."
    )
    assert "## Page 2" in made.note.body and "## Page 3" not in made.note.body
    assert made.note.body.endswith(
        "*Charlie stopped reading after page 2 of 5; the whole document is in the original file.*\n"
    )


# ---------------------------------------------------------------- Word


def test_a_word_file_keeps_headings_emphasis_lists_and_tables(
    project: Project, tmp_path: Path
) -> None:
    made = documents.import_document(project, write(tmp_path, "plan.docx", kitchen_docx()))
    assert made.note.title == "Kitchen renovation"
    assert made.note.body == (
        "Original: [plan.docx](../attachments/plan.docx) (Word document)\n\n"
        "# Budget\n\n"
        "The budget is **12,000 euros**, *not a cent more*.\n\n"
        "- Tiles from the \\*outlet\\* store\n"
        "- Oak worktop\n"
        "   - Matt finish\n\n"
        "## Steps\n\n"
        "1. Strip the old units\n"
        "1. Fit the worktop\n\n"
        "| Item | Cost |\n"
        "| --- | --- |\n"
        "| Tiles | 1,800 |\n"
        "| Worktop \\| oak | 2,400 |\n\n"
        "Ask Sam about the plumber.\n"
    )


def test_a_word_file_without_a_title_property_takes_its_title_paragraph(
    project: Project, tmp_path: Path
) -> None:
    made = documents.import_document(project, write(tmp_path, "x.docx", kitchen_docx(None)))
    assert made.note.title == "Kitchen renovation"
    assert "Kitchen renovation" not in made.note.body  # the title paragraph is the title


def test_a_zip_bomb_named_docx_is_refused_before_python_docx_opens_it(
    project: Project, tmp_path: Path
) -> None:
    bomb = write(tmp_path, "huge.docx", zip_bomb_docx(12))
    with pytest.raises(documents.DamagedDocument, match="unpacks to more than 8 MB"):
        documents.import_document(project, bomb, limits=Limits(max_unpacked=8 * documents.MB))
    assert saved(project) == []


# ---------------------------------------------------------------- text and markdown


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("Crème brûlée\n".encode("utf-16"), "Crème brûlée\n"),  # with its byte-order mark
        ("Crème brûlée\n".encode("utf-16-le"), "Crème brûlée\n"),  # without one
        ("Crème brûlée\n".encode("utf-8-sig"), "Crème brûlée\n"),
        ("Crème brûlée – 5 €\n".encode("cp1252"), "Crème brûlée – 5 €\n"),
        ("Crème brûlée\n".encode("latin-1"), "Crème brûlée\n"),
        ("Crème brûlée\n".encode(), "Crème brûlée\n"),
    ],
    ids=["utf-16-bom", "utf-16-le", "utf-8-bom", "cp1252", "latin-1", "utf-8"],
)
def test_text_in_any_common_encoding_is_read(data: bytes, expected: str) -> None:
    assert decode_text(data) == expected


def test_a_latin1_text_file_becomes_a_note(project: Project, tmp_path: Path) -> None:
    path = write(tmp_path, "recettes.txt", "Crème brûlée\n# pas un titre\n".encode("latin-1"))
    made = documents.import_document(project, path)
    assert made.note.title == "recettes"
    assert made.note.body.endswith("Crème brûlée\n\\# pas un titre\n")
    assert made.original.read_bytes() == path.read_bytes()  # the original as it came


def test_a_markdown_file_keeps_its_front_matter_title_and_tags(
    project: Project, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        "tiles.md",
        "---\ntitle: Tile choices\ntags: [kitchen, 'bad tag!']\n---\n# Options\n\n- slate\n",
    )
    made = documents.import_document(project, path)
    assert (made.note.title, made.note.tags) == ("Tile choices", ["kitchen"])
    assert made.note.body.endswith("# Options\n\n- slate\n")


def test_a_markdown_file_opening_with_a_heading_takes_it_as_title(
    project: Project, tmp_path: Path
) -> None:
    made = documents.import_document(project, write(tmp_path, "x.md", "# Grout\n\nGrey, 2 mm.\n"))
    assert made.note.title == "Grout"
    assert (
        made.note.body == "Original: [x.md](../attachments/x.md) (markdown file)\n\nGrey, 2 mm.\n"
    )


def test_text_past_the_character_limit_stops_with_a_mark(project: Project, tmp_path: Path) -> None:
    path = write(tmp_path, "log.txt", "\n".join(f"line {n}" for n in range(1000)))
    made = documents.import_document(project, path, limits=Limits(max_chars=500))
    assert made.warning is not None and "longer than 500 characters" in made.warning
    assert len(made.note.body) < 800
    assert made.note.body.endswith("The whole document is in the original file.*\n")


# ---------------------------------------------------------------- what the file is


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("photo.pdf", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "named .pdf but holds a picture (PNG)"),
        ("page.txt", "<!DOCTYPE html><html><body>Hi</body></html>", "It is a web page (HTML)"),
        ("old.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 64, "an old Office file"),
        ("data.csv", "a,b\n1,2\n", "a .csv file is none of those"),
        ("blob", bytes(range(256)) * 4, "binary data"),
        ("fake.docx", "just some text", "named .docx but holds text"),
    ],
    ids=["png-as-pdf", "html-as-txt", "old-doc", "csv", "binary", "text-as-docx"],
)
def test_a_file_is_judged_by_its_content(
    project: Project, tmp_path: Path, name: str, data: bytes | str, message: str
) -> None:
    with pytest.raises(documents.UnsupportedDocument, match=re.escape(message)):
        documents.import_document(project, write(tmp_path, name, data))
    assert saved(project) == []


def test_a_zip_that_is_not_a_word_file_is_named(project: Project, tmp_path: Path) -> None:
    path = tmp_path / "sheet.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
    with pytest.raises(documents.UnsupportedDocument, match="holds an Excel workbook"):
        documents.import_document(project, path)


def test_a_pdf_with_another_name_is_still_read_as_a_pdf(project: Project, tmp_path: Path) -> None:
    made = documents.import_document(project, write(tmp_path, "download", text_pdf(["Hi"])))
    assert made.kind == "pdf" and made.original.name == "download.pdf"


def test_a_file_over_the_size_limit_is_refused(project: Project, tmp_path: Path) -> None:
    path = write(tmp_path, "big.txt", "x" * 3000)
    with pytest.raises(
        documents.DocumentTooLarge, match="It is 3 KB, and Charlie takes documents of up to 2 KB"
    ):
        documents.import_document(project, path, limits=Limits(max_bytes=2000))
    assert saved(project) == []


# ---------------------------------------------------------------- limits on reading


def test_reading_that_takes_too_long_is_stopped(project: Project, tmp_path: Path) -> None:
    pdf = write(tmp_path, "slow.pdf", text_pdf(["text"]))
    with pytest.raises(documents.DamagedDocument, match=r"took longer than 0\.01 s"):
        documents.import_document(project, pdf, limits=Limits(seconds=0.01))
    assert saved(project) == []


def test_reading_that_needs_too_much_memory_is_stopped(project: Project, tmp_path: Path) -> None:
    pdf = write(tmp_path, "heavy.pdf", text_pdf(["text"] * 3))
    with pytest.raises(documents.DamagedDocument, match="more than the 8 MB of memory"):
        documents.import_document(project, pdf, limits=Limits(memory_bytes=8 * documents.MB))
    assert saved(project) == []


# ---------------------------------------------------------------- never losing anything


def test_the_same_document_twice_gets_new_names_and_replaces_nothing(
    project: Project, tmp_path: Path
) -> None:
    pdf = write(tmp_path, "plan.pdf", text_pdf(["v1"], title="Plan"))
    mine = notes.create_note(project, "Plan", "My own plan, by hand.")
    first = documents.import_document(project, pdf)
    second = documents.import_document(project, pdf)
    assert (first.note.name, second.note.name) == ("plan-2", "plan-3")
    assert (first.original.name, second.original.name) == ("plan.pdf", "plan-2.pdf")
    assert notes.get_note(project, "plan").body == mine.body


def test_when_the_note_cannot_be_written_the_kept_original_goes_too(
    project: Project, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    notes.notes_dir(project).rmdir() if notes.notes_dir(project).exists() else None
    notes.notes_dir(project).symlink_to(elsewhere, target_is_directory=True)
    pdf = write(tmp_path, "a.pdf", text_pdf(["text"]))
    with pytest.raises(notes.CharlieError, match="symbolic link"):
        documents.import_document(project, pdf)
    assert list(documents.attachments_dir(project).iterdir()) == []
    assert list(elsewhere.iterdir()) == []


def test_an_attachments_folder_that_is_a_link_is_never_written_through(
    project: Project, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    documents.attachments_dir(project).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(notes.CharlieError, match="symbolic link"):
        documents.import_document(project, write(tmp_path, "a.txt", "hello"))
    assert list(elsewhere.iterdir()) == []
    assert notes.list_notes(project) == ([], [])


@pytest.mark.parametrize("name", ["../project.toml", ".hidden", "", "a/b.pdf", "missing.pdf"])
def test_only_kept_originals_are_served(project: Project, name: str) -> None:
    (documents.attachments_dir(project)).mkdir()
    (documents.attachments_dir(project) / ".hidden").write_text("x")
    with pytest.raises(notes.NotFound):
        documents.original_path(project, name)


# ---------------------------------------------------------------- the command line


def test_cli_imports_documents_and_folders_and_names_each_refusal(
    charlie: Cli, tmp_path: Path
) -> None:
    pdf = write(tmp_path, "manual.pdf", text_pdf(["Descale monthly.", "Page two"], title="Kettle"))
    scan = write(tmp_path, "scan.pdf", scanned_pdf())
    text = write(tmp_path, "todo.txt", "Buy grout")
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "one.md").write_text("# One\nfirst")
    result = charlie("notes", "import", str(pdf), str(scan), str(text), str(vault), "-p", "home")
    folder = load_settings().projects_dir / "home" / "attachments"
    assert result.exit_code == 1
    assert result.stdout == (
        "Imported manual.pdf as home/kettle (PDF, 2 pages).\n"
        f"  original kept in {folder / 'manual.pdf'}\n"
        "Imported todo.txt as home/todo (text file).\n"
        f"  original kept in {folder / 'todo.txt'}\n"
        "Imported 1 notes, skipped 0.\n"
    )
    assert result.stderr == (
        f"Error: scan.pdf was not added: {NO_TEXT_LAYER}\nError: 1 of 4 not imported (see above).\n"
    )
    listed = charlie("notes", "list", "-p", "home").stdout
    assert listed == "kettle\tKettle\none\tOne\ntodo\ttodo\n"
    found = charlie("search", "descale", "-p", "home").stdout
    assert found.startswith("1. Kettle  [home/kettle]")


def test_cli_size_limit_is_an_option(charlie: Cli, tmp_path: Path) -> None:
    big = write(tmp_path, "big.txt", "x" * (2 * 1024 * 1024))
    result = charlie("notes", "import", str(big), "-p", "home", "--max-mb", "1")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: big.txt was not added: It is 2 MB, and Charlie takes documents of up to 1 MB."
    )


def lying_docx(path: Path, real: int = 30 << 20, declared: int = 1000) -> Path:
    """A .docx whose document part really unpacks to `real` bytes while the zip declares
    `declared` (in the local header and in the central directory)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b"<w>" + b" " * real + b"</w>")
    data = bytearray(path.read_bytes())
    name = b"word/document.xml"
    for signature, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (start := data.find(signature, start)) != -1:
            name_at = start + (30 if signature == b"PK\x03\x04" else 46)
            if data[name_at : name_at + len(name)] == name:
                data[start + at : start + at + 4] = declared.to_bytes(4, "little")
            start += 4
    path.write_bytes(bytes(data))
    return path


def test_a_zip_that_lies_about_its_sizes_is_refused(tmp_path: Path) -> None:
    source = lying_docx(tmp_path / "lying.docx")
    limits = Limits(max_unpacked=10 << 20)
    with pytest.raises(documents.DocumentError, match=r"damaged|unpacks to more than"):
        documents.read_document(source, "docx", "lying.docx", limits)


def test_only_a_few_documents_are_read_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charlie.errors import Busy

    monkeypatch.setattr(documents, "READER_WAIT", 0.1)
    source = tmp_path / "plain.txt"
    source.write_text("Oak worktops.")
    taken = [documents.READERS.acquire(timeout=1) for _ in range(2)]
    try:
        assert all(taken)
        with pytest.raises(Busy, match="try this one again"):
            documents.read_document(source, "text", "plain.txt", Limits())
    finally:
        for _ in taken:
            documents.READERS.release()
    assert documents.read_document(source, "text", "plain.txt", Limits()).body.strip()
