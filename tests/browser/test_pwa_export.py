"""Settings → Your data: "Export my data" downloads the signed-in person's archive."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, expect

from charlie import conversations
from charlie.conversations import private_channel
from charlie.users import get_user

from .pwa import Server, sign_in

pytestmark = pytest.mark.browser


def test_export_my_data_downloads_a_zip_with_a_manifest(
    new_context: Callable[..., BrowserContext], server: Server, tmp_path: Path
) -> None:
    server.project("Garden")
    with server.home() as home:
        bob = get_user(home.db, "bob")
        conversations.add_message(home, private_channel(home, bob), "user", "BOB-SECRET", user=bob)
    page = sign_in(new_context(accept_downloads=True).new_page(), "alice")
    page.goto("/#/settings/private")
    card = page.get_by_role("region", name="Your data")
    expect(card).to_contain_text("never anyone else")

    with page.expect_download() as started:
        card.get_by_role("button", name="Export my data").click()
    download = started.value
    assert download.failure() is None
    assert download.suggested_filename.startswith("charlie-export-alice-")
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)

    with zipfile.ZipFile(saved) as made:
        manifest = json.loads(made.read("manifest.json"))
        for name in made.namelist():
            assert b"BOB-SECRET" not in made.read(name), name
    assert manifest["projects"] == ["garden"]
    assert manifest["private"] == "alice"
