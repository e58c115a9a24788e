"""Markdown as Charlie reads it: one parser for every piece of markdown the product shows
(replies, notes, the memory's summary; `adapters/web/render.py` draws them as HTML), and
the same parse read back as plain words where markup would be noise (a search snippet).

The parser: CommonMark with raw HTML off (`<script>` in a note is text), tables,
strikethrough, task lists and bare links (`https://…`, `name@example.org`).
"""

from __future__ import annotations

import re
from functools import cache

from markdown_it import MarkdownIt
from mdit_py_plugins.gfm_autolink import gfm_autolink_plugin
from mdit_py_plugins.tasklists import tasklists_plugin


class Markdown(MarkdownIt):
    """markdown-it whose links are all parsed, so that whoever shows them checks each once
    (the web renderer's `_check_links`).

    markdown-it's own check would leave a refused link as its raw markdown, and the bare-URL
    plugin (mdit-py-plugins 0.7) loses the words before a link it is refused (`xmpp:`).
    Checking after parsing keeps the words of every refused link, and nothing else.
    """

    def validateLink(self, url: str) -> bool:
        return True


def new_parser(*, task_lists: bool = True) -> Markdown:
    """A parser with Charlie's markdown rules, for a renderer to add its own to. Without
    `task_lists`, `- [ ]` items are plain list items (the plugin's time grows with the
    square of a list's items: a note of 8,000 took 8 s)."""
    md = Markdown("commonmark", {"html": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    if task_lists:
        md.use(tasklists_plugin)  # `- [ ]` / `- [x]`: checkboxes
    md.use(gfm_autolink_plugin)  # a bare https://… or name@example.org is a link
    return md


@cache
def _reader() -> Markdown:
    """Built once per process: markdown-it compiles its rules on construction. Plain words
    need no checkboxes: no task lists, so reading back stays linear in the text."""
    return new_parser(task_lists=False)


def plain_text(text: str) -> str:
    """`text` in markdown as the words a person reads, markup gone: `## Page 1` is "Page 1",
    `**oak**` is "oak", a table its cells, a code block its code; blocks are joined by a
    space and every run of white space is one space."""
    words: list[str] = []
    for token in _reader().parse(text):
        if token.type in ("fence", "code_block"):
            words.append(f" {token.content} ")
        for child in token.children or ():
            if child.type in ("text", "code_inline"):
                words.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                words.append(" ")
        if token.block and token.nesting == -1:
            words.append(" ")
    return " ".join(_LEFTOVERS.sub(_kept_words, "".join(words)).split())


# What markdown leaves when it is cut in the middle (a search snippet is cut from one chunk
# of a note): a link without its end, emphasis marks without their pair, a table's pipes
# and rule; the words stay.
_LEFTOVERS = re.compile(
    r"!?\[([^\]\n]*)\](?:\([^)\s]*\)?|\[[^\]\n]*\])?"  # [words](address… or [words][ref]
    r"|(?:\*\*|__|~~)"  # a mark whose pair is in another chunk
    r"|(?:^|\s)\|?(?:\s*:?-{3,}:?\s*\|)+\s*(?=\s|$)"  # |---|:--|
    r"|\s\|(?=\s)|^\|\s|\s\|$"  # a table's cell walls
)


def _kept_words(match: re.Match[str]) -> str:
    return f" {match.group(1)} " if match.group(1) is not None else " "
