"""Every relative link in README.md and docs/ names a file or folder that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HTML_SOURCE = re.compile(r"<img\s[^>]*src=\"([^\"]+)\"")
ELSEWHERE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|#)", re.IGNORECASE)  # http:, mailto:, #anchor
CODE = re.compile(r"^```.*?^```|`[^`\n]*`", re.MULTILINE | re.DOTALL)


def relative_links(text: str) -> list[str]:
    """The targets of a page's links and images that point into this repository (code
    blocks and code spans are text, not links)."""
    prose = CODE.sub("", text)
    targets = LINK.findall(prose) + HTML_SOURCE.findall(prose)
    return [t for t in targets if not ELSEWHERE.match(t)]


def test_links_are_found_in_prose_only() -> None:
    text = (
        'See [the API](docs/api.md#sessions), ![a shot](s.png "title"), [web](https://x.org),'
        ' [mail](mailto:a@b.c), [here](#top), <img src="p.png" width="9">, `[no](code.md)`\n'
        "```\n[no](block.md)\n```\n"
    )
    assert relative_links(text) == ["docs/api.md#sessions", "s.png", "p.png"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_a_file_that_exists(page: Path) -> None:
    broken = [
        target
        for target in relative_links(page.read_text())
        if not (page.parent / target.split("#", 1)[0]).exists()
    ]
    assert not broken, f"{page.relative_to(ROOT)} links to files that do not exist: {broken}"
