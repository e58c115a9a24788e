"""Documents for the tests, made on the spot: PDFs written with pypdf (text in the standard
Helvetica font, or only a picture, as a scan is), Word files written with python-docx."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

import docx
from pypdf import PdfWriter
from pypdf.generic import (
    ArrayObject,
    DecodedStreamObject,
    DictionaryObject,
    NameObject,
    NumberObject,
)


def _pdf_string(text: str) -> bytes:
    raw = text.encode("cp1252")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def _stream(data: bytes, **entries: object) -> DecodedStreamObject:
    stream = DecodedStreamObject()
    stream.set_data(data)
    for key, value in entries.items():
        stream[NameObject(f"/{key}")] = value  # type: ignore[assignment]
    return stream


def text_pdf(pages: Sequence[str], title: str | None = None, password: str | None = None) -> bytes:
    """A PDF with one page per item of `pages`, each line of it a line of text."""
    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
                NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
            }
        )
    )
    for text in pages:
        page = writer.add_blank_page(612, 792)
        shown = b" T* ".join(_pdf_string(line) + b" Tj" for line in text.split("\n"))
        content = b"BT /F1 11 Tf 14 TL 72 740 Td " + shown + b" ET"
        page[NameObject("/Contents")] = writer._add_object(_stream(content))
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
    if title is not None:
        writer.add_metadata({"/Title": title})
    if password is not None:
        writer.encrypt(user_password=password, owner_password=password, algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def scanned_pdf(pages: int = 2) -> bytes:
    """A PDF whose pages are pictures only, as a scanner makes them: no text layer."""
    writer = PdfWriter()
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        picture = writer._add_object(
            _stream(
                bytes(range(64)),
                Type=NameObject("/XObject"),
                Subtype=NameObject("/Image"),
                Width=NumberObject(8),
                Height=NumberObject(8),
                ColorSpace=NameObject("/DeviceGray"),
                BitsPerComponent=NumberObject(8),
            )
        )
        page[NameObject("/Contents")] = writer._add_object(
            _stream(b"q 500 0 0 700 50 50 cm /Im1 Do Q")
        )
        page[NameObject("/Resources")] = DictionaryObject(
            {
                NameObject("/XObject"): DictionaryObject({NameObject("/Im1"): picture}),
                NameObject("/ProcSet"): ArrayObject([NameObject("/PDF"), NameObject("/ImageB")]),
            }
        )
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def kitchen_docx(title: str | None = "Kitchen renovation") -> bytes:
    """A Word file with a title, headings, formatted text, both kinds of list and a table."""
    document = docx.Document()
    if title is not None:
        document.core_properties.title = title
    document.add_heading("Kitchen renovation", 0)
    document.add_heading("Budget", 1)
    paragraph = document.add_paragraph("The budget is ")
    paragraph.add_run("12,000 euros").bold = True
    paragraph.add_run(", ")
    paragraph.add_run("not a cent more").italic = True
    paragraph.add_run(".")
    document.add_paragraph("Tiles from the *outlet* store", style="List Bullet")
    document.add_paragraph("Oak worktop", style="List Bullet")
    document.add_paragraph("Matt finish", style="List Bullet 2")
    document.add_heading("Steps", 2)
    document.add_paragraph("Strip the old units", style="List Number")
    document.add_paragraph("Fit the worktop", style="List Number")
    table = document.add_table(rows=3, cols=2)
    for row, cells in zip(
        table.rows, [("Item", "Cost"), ("Tiles", "1,800"), ("Worktop | oak", "2,400")], strict=True
    ):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    document.add_paragraph("Ask Sam about the plumber.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def long_docx(pages: int, words_per_page: int = 450) -> bytes:
    """About `pages` pages of a Word report: a heading and paragraphs per page."""
    document = docx.Document()
    sentence = "The committee reviewed the heating costs of building {} in detail. "
    for number in range(1, pages + 1):
        document.add_heading(f"Section {number}", 1)
        for paragraph in range(words_per_page // 90):
            document.add_paragraph((sentence.format(number * 10 + paragraph)) * 8)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_bomb_docx(unpacked_mb: int) -> bytes:
    """A .docx in name and shape whose body unpacks to `unpacked_mb` MB of nothing."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w") as body:
            block = b" " * (1024 * 1024)
            for _ in range(unpacked_mb):
                body.write(block)
    return out.getvalue()
