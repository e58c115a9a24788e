"""Words that follow a number."""

from __future__ import annotations

import pytest

from charlie.text import plural


@pytest.mark.parametrize(
    ("count", "words"),
    [(0, "notes"), (1, "note"), (2, "notes"), (4000, "notes"), (-1, "note"), (-3, "notes")],
)
def test_one_is_singular_and_every_other_count_plural(count: int, words: str) -> None:
    assert plural(count, "note") == words


def test_an_irregular_plural_is_given() -> None:
    assert [plural(n, "was", "were") for n in (0, 1, 2)] == ["were", "was", "were"]
