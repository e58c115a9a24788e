"""Stray HTML tags a model writes are taken out of its answer as it streams; code showing
HTML, and text that only looks like a tag, stay as written."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charlie.llm.htmltags import TagFilter


def filtered(text: str, size: int = 0) -> str:
    """`text` through the filter whole, or in pieces of `size` characters."""
    tags = TagFilter()
    pieces = [text[i : i + size] for i in range(0, len(text), size)] if size else [text]
    return "".join(tags.feed(piece) for piece in pieces) + tags.flush()


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("<p>The loaf is £4.80.</p>", "The loaf is £4.80.\n\n"),
        ("<p>One.</p><p>Two.</p>", "One.\n\nTwo.\n\n"),
        ("Line one<br>line two<br/>line three", "Line one\nline two\nline three"),
        (
            '<div class="answer">Oak, <b>38 mm</b>, <em>oiled</em>.</div>',
            "Oak, **38 mm**, *oiled*.\n\n",
        ),
        ("<ul><li>flour</li><li>yeast</li></ul>", "- flour\n- yeast\n"),
        ("<P>Shouting tags</P>", "Shouting tags\n\n"),
        ('<span style="x">kept text</span>', "kept text"),
    ],
)
def test_stray_tags_are_taken_out_and_paragraphs_stay_paragraphs(written: str, shown: str) -> None:
    assert filtered(written) == shown
    assert filtered(written, 1) == shown  # however it streams


@pytest.mark.parametrize(
    "kept",
    [
        "Use `<br>` for a line break and `</p>` to end a paragraph.",
        "```html\n<p>Hello</p>\n<div>there</div>\n```\n",
        "Write ``<p>`` in double backticks.",
        "If a < b and b > c, then a <3 c.",
        "Replace <name> with your name and <date> with today's.",
        "The tool_call tag <tool> is not HTML.",
        "x <p",  # cut off: shown as it came
    ],
)
def test_code_and_text_that_only_looks_like_a_tag_stay_as_written(kept: str) -> None:
    assert filtered(kept) == kept
    assert filtered(kept, 1) == kept


def test_tags_after_a_fence_closes_are_taken_out_again() -> None:
    written = "```\n<p>code</p>\n```\n<p>Prose.</p>"
    assert filtered(written, 2) == "```\n<p>code</p>\n```\nProse.\n\n"


@given(st.text(alphabet="<>/pbrdiv `\nab.", max_size=60), st.integers(1, 7))
def test_how_the_answer_streams_never_changes_what_is_shown(text: str, size: int) -> None:
    assert filtered(text, size) == filtered(text)
