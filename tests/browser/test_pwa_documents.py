"""Documents in the PWA: "Add document" and drag-and-drop onto the notes view make a note of a
PDF or Word file, show the upload's progress, open the new note with its original a click
away, and say plainly why a file was refused (nothing is saved then)."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from document_files import kitchen_docx, scanned_pdf, text_pdf
from playwright.sync_api import Page, expect

from .pwa import Console, Server, sign_in

pytestmark = pytest.mark.browser

REPORT = text_pdf(
    [
        "Heating costs for the winter\n• boiler service in October\n• bleed every radiator\n"
        "Gas rose 12% on last year; the new thermostat saved about 40 euros a month.",
        "Next steps\nAsk two installers for quotes on a heat pump before March.",
    ],
    title="Heating report, winter 2024",
)
WATCH_STATUS = """() => {
  window.statuses = [];
  new MutationObserver(() => {
    const line = document.querySelector('#document-status');
    if (line && line.textContent) window.statuses.push(line.textContent);
  }).observe(document.querySelector('#note-pane'), {
    subtree: true, childList: true, characterData: true,
  });
}"""
DROP = """([name, type, data]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], name, { type }));
  const view = document.querySelector('#notes-view');
  for (const kind of ['dragenter', 'dragover', 'drop'])
    view.dispatchEvent(new DragEvent(kind, { dataTransfer: transfer, bubbles: true }));
}"""


def drop(page: Page, name: str, kind: str, data: bytes) -> None:
    """Drop a file onto the notes view, as a person dragging it from their files would."""
    page.evaluate(DROP, [name, kind, base64.b64encode(data).decode()])


def test_add_document_makes_a_note_of_a_pdf_and_opens_it(
    page: Page, server: Server, shoot: Callable[[Page, str], None]
) -> None:
    server.project("Home")
    server.note("home", "Boiler", "Service it every autumn.")
    sign_in(page)
    page.goto("/#/notes/home")
    expect(page.locator("#notes-status")).to_have_text("1 note")

    page.get_by_role("button", name="Add document").click()
    pane = page.locator("#note-pane")
    expect(pane.get_by_role("heading", name="Add a document")).to_be_visible()
    expect(pane.get_by_label("Project")).to_have_value("home")
    expect(pane.get_by_role("button", name="Choose a file…")).to_be_focused()
    page.evaluate(WATCH_STATUS)
    page.locator("#document-input").set_input_files(
        files=[{"name": "heating.pdf", "mimeType": "application/pdf", "buffer": REPORT}]
    )

    expect(pane.get_by_role("heading", name="Heating report, winter 2024")).to_be_visible()
    assert page.url.endswith("#/notes/home/home/heating-report-winter-2024")
    body = pane.locator(".note-body")
    expect(body.get_by_role("heading", name="Page 1")).to_be_visible()
    expect(body.locator("li")).to_have_text(["boiler service in October", "bleed every radiator"])
    expect(body).to_contain_text("Original: heating.pdf (PDF, 2 pages)")
    expect(page.locator("#notes-status")).to_have_text("2 notes")
    expect(page.locator("#toast")).to_contain_text("Added heating.pdf as the note")
    statuses = page.evaluate("window.statuses")
    assert any(s.startswith("Uploading heating.pdf") for s in statuses), statuses
    assert "Reading and indexing heating.pdf…" in statuses, statuses

    original = pane.get_by_role("link", name="Original file")
    expect(original).to_have_attribute("href", "/api/attachments/home/heating.pdf")
    downloaded = page.request.get("/api/attachments/home/heating.pdf")
    assert downloaded.ok and downloaded.body() == REPORT
    kept = server.settings.projects_dir / "home" / "attachments" / "heating.pdf"
    assert kept.read_bytes() == REPORT
    shoot(page, "pwa-document")

    page.get_by_role("searchbox", name="Search notes").fill("heat pump quotes")
    page.get_by_role("button", name="Search", exact=True).click()
    first = page.locator("#notes-results .result").first
    expect(first.locator(".note-link")).to_have_text("Heating report, winter 2024")


def test_dropping_files_adds_them_and_a_refusal_is_said_plainly(
    page: Page, server: Server, console: Console
) -> None:
    console.allow(r"status of 400 .*/api/notes/upload")  # the browser logs the refusal itself
    server.project("Home")
    sign_in(page)
    page.goto("/#/notes/home")
    expect(page.locator("#notes-status")).to_contain_text("No notes in Home yet")

    drop(page, "scan.pdf", "application/pdf", scanned_pdf())
    pane = page.locator("#note-pane")
    refusal = pane.get_by_role("alert")
    expect(refusal).to_have_text(
        "scan.pdf was not added: This PDF has no text layer (it looks scanned); Charlie can't "
        "read it yet — run OCR on it first (ocrmypdf does, for one), then add the file it makes."
    )
    expect(page.locator("#document-progress")).to_be_hidden()
    expect(page.locator("#notes-view")).not_to_have_class("dropping")
    assert not (server.settings.projects_dir / "home" / "attachments").exists() or not any(
        (server.settings.projects_dir / "home" / "attachments").iterdir()
    )

    docx_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    drop(page, "plan.docx", docx_type, kitchen_docx())
    expect(pane.get_by_role("heading", name="Kitchen renovation")).to_be_visible()
    body = pane.locator(".note-body")
    expect(body.get_by_role("heading", name="Budget")).to_be_visible()
    expect(body.locator("strong")).to_have_text("12,000 euros")
    expect(page.locator("#notes-status")).to_have_text("1 note")


def test_a_file_too_big_is_refused_before_it_is_sent(page: Page, server: Server) -> None:
    server.project("Home")
    sign_in(page)
    page.goto("/#/notes/home")
    page.get_by_role("button", name="Add document").click()
    sent: list[str] = []
    page.on("request", lambda request: sent.append(request.url))
    # a 26 MB file chosen in the page's file input (made in the page: handing 26 MB to the
    # browser through Playwright's protocol takes half a minute)
    page.locator("#document-input").evaluate(
        """input => {
            const big = new File([new Uint8Array(26 * 1024 * 1024)], 'atlas.pdf',
                                 {type: 'application/pdf'});
            const chosen = new DataTransfer();
            chosen.items.add(big);
            input.files = chosen.files;
            input.dispatchEvent(new Event('change', {bubbles: true}));
        }"""
    )
    expect(page.locator("#note-pane").get_by_role("alert")).to_have_text(
        "atlas.pdf was not added: it is 26.0 MB, and Charlie takes documents of up to 25 MB."
    )
    assert not [url for url in sent if "/api/notes/upload" in url]
