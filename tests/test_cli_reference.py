"""docs/cli.md is the `--help` of every command as it is now (`scripts/cli-reference`)."""

from __future__ import annotations

from pathlib import Path

from charlie.adapters.cli import cli
from charlie.adapters.cli.reference import SCRIPT, render

PAGE = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def test_docs_cli_md_is_what_the_commands_say_now() -> None:
    assert PAGE.read_text() == render(cli), f"docs/cli.md is out of date: run `{SCRIPT}`"


def test_the_reference_holds_every_command_once_with_its_help() -> None:
    page = render(cli)
    for path in ("charlie", "charlie chat", "charlie memory undo", "charlie import chatgpt"):
        assert page.count(f"\n## {path}\n") == 1, path
        assert f"Usage: {path} [OPTIONS]" in page
    assert "\n## charlie serve\n" in page  # plugin commands (entry points) included
    assert "  -h, --help" in page
    assert (
        "\n  Charlie: a local-first personal assistant whose memory you can read and\n  edit."
        in page
    )
