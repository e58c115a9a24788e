"""A reply as safe HTML: markdown read by markdown-it-py, code coloured by Pygments, and
the result checked against an explicit allow-list by nh3 before anyone sees it.

Three walls, each enough on its own against the usual injections, so that a bug in one
does not open the page to a reply (docs/rendering.md says why it is done on the server):

1. markdown-it runs with raw HTML off: `<script>` or `<img onerror=…>` in a reply is text.
   A link to anything but an http, https or mailto address keeps its words only
   (`allowed_address`). An image is shown as a link to it, never as a picture: a picture
   would be fetched unasked, telling its server that the reply was read.
2. Pygments escapes every character of the code it colours, and names its tokens with CSS
   classes only (`hl-k`, `hl-s2`…): no inline style ever reaches the page.
3. nh3 (ammonia) keeps only the tags, attributes, classes and URL schemes listed in
   `allowed()`; every link opens in a new tab with `rel="noopener noreferrer"`, and a task
   list's checkbox is always a disabled checkbox.

Headings move down two levels (`#` is `<h3>`): inside a message, a heading is a section of
that message, never a title of the page around it.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cache

import nh3
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

from charlie.notes import markup
from charlie.notes.markup import Markdown

LINK_SCHEMES = frozenset({"http", "https", "mailto"})
TOKEN_PREFIX = "hl-"  # Pygments' token classes, e.g. `hl-k` for a keyword (style.css colours them)
MAX_HIGHLIGHT_CHARS = 20_000  # a longer code block is shown as it is, uncoloured (~60 ms)
# Bounds on what one text may cost to draw: a note is up to 1 MB, written by any member of
# the household, and drawn on every request that shows it (benchmarks/render_speed.py).
MAX_HIGHLIGHT_LINE = 300  # a code block with a longer line is uncoloured: some lexers
#                           (java, make, http, desktop…) take the square of a line's length
HIGHLIGHT_BUDGET = 40_000  # characters coloured in one text; the blocks after it are not
MAX_MARKDOWN_CHARS = 50_000  # past this, the text is shown as plain paragraphs: markdown-it
#                              has inputs (runs of `[` or `![`) that take minutes at 1 MB
MAX_TASK_ITEMS = 200  # a text with more `- [ ]` items is drawn without checkboxes
CACHE_BYTES = 16 << 20  # drawn HTML kept per process, by the text's hash
_TASK_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[[ xX]\]", re.M)
HEADING_SHIFT = 2  # `#` → <h3>, … `####` and below → <h6>
BLOCK_TAGS = frozenset({"p", "br", "hr", "h3", "h4", "h5", "h6", "blockquote", "pre"})
INLINE_TAGS = frozenset({"strong", "em", "s", "del", "code", "span", "a"})
LIST_TAGS = frozenset({"ul", "ol", "li", "input"})  # input: a task list's checkbox
TABLE_TAGS = frozenset({"table", "thead", "tbody", "tr", "th", "td"})
_LANGUAGE = re.compile(r"[^\w+#.-]")


def allowed_address(url: str) -> bool:
    """Whether a link may lead to `url`: http, https and mailto addresses only."""
    scheme, colon, _ = url.strip().partition(":")
    return bool(colon) and scheme.lower() in LINK_SCHEMES


def render_markdown(text: str) -> str:
    """`text` (a reply, a note, a memory's summary, in markdown) as HTML that is safe to put
    into the page as it is. Drawn once per text and process (kept by its hash), and bounded:
    a long text's tail is plain paragraphs, a long task list has no checkboxes, a code block
    with very long lines is not coloured."""
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    html = _drawn.get(key)
    if html is None:
        html = draw(text)
        _drawn.put(key, html)
    return html


def draw(text: str) -> str:
    """`render_markdown` without the cache: drawn now, whatever was drawn before."""
    head, tail = text, ""
    if len(text) > MAX_MARKDOWN_CHARS:
        cut = text.rfind("\n", 0, MAX_MARKDOWN_CHARS) + 1 or MAX_MARKDOWN_CHARS
        head, tail = text[:cut], text[cut:]
    tasks = len(_TASK_ITEM.findall(head, 0, len(head))) <= MAX_TASK_ITEMS
    html = _parser(tasks).render(head, {"highlight_left": HIGHLIGHT_BUDGET})
    if tail:
        html += (
            "<p><em>(The rest of this long text is shown as it is, without formatting.)</em></p>"
            + _plain_paragraphs(tail)
        )
    return sanitize(html)


def _plain_paragraphs(text: str) -> str:
    """Text as paragraphs of escaped lines: linear, whatever the text holds."""
    blocks = re.split(r"\n[ \t]*\n", text.strip())
    return "".join(
        "<p>" + "<br>".join(escapeHtml(line) for line in block.split("\n")) + "</p>"
        for block in blocks
        if block.strip()
    )


class _Drawn:
    """HTML already drawn, by the hash of its text, up to `CACHE_BYTES` (oldest out first)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size = limit, 0
        self.kept: OrderedDict[bytes, str] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: bytes) -> str | None:
        with self.lock:
            html = self.kept.get(key)
            if html is not None:
                self.kept.move_to_end(key)
            return html

    def put(self, key: bytes, html: str) -> None:
        if len(html) > self.limit // 4:
            return  # one huge text would push out everything else
        with self.lock:
            if key not in self.kept:
                self.kept[key] = html
                self.size += len(html)
            while self.size > self.limit:
                _, gone = self.kept.popitem(last=False)
                self.size -= len(gone)


_drawn = _Drawn(CACHE_BYTES)


def sanitize(html: str) -> str:
    """`html` with everything outside `allowed()` taken out (the last wall, on its own)."""
    return _cleaner().clean(html)


# ---------------------------------------------------------------- the parser


@cache
def _parser(task_lists: bool = True) -> Markdown:
    """Built once per process: markdown-it compiles its rules on construction."""
    md = markup.new_parser(task_lists=task_lists)  # the product's one parser (checkboxes
    # of a task list: disabled)
    md.core.ruler.push("charlie_links", _check_links)
    md.core.ruler.push("charlie_headings", _shift_headings)
    md.core.ruler.push("charlie_alignment", _alignment_classes)
    md.add_render_rule("fence", _fence)
    md.add_render_rule("code_block", _code_block)
    return md


def _check_links(state: StateCore) -> None:
    """A link to anything but an allowed address becomes its words alone; an image becomes
    a link to the picture, its description as the words (never fetched unasked)."""
    for block in state.tokens:
        if block.type == "inline" and block.children:
            block.children = _checked(block.children)


def _checked(tokens: list[Token]) -> list[Token]:
    kept: list[Token] = []
    opened: list[bool] = []  # for each link still open: whether it was kept
    for token in tokens:
        if token.type == "image":
            kept.extend(_image_link(token, inside_link=any(opened)))
        elif token.type == "link_open":
            opened.append(allowed_address(str(token.attrGet("href") or "")))
            if opened[-1]:
                kept.append(token)
        elif token.type == "link_close":
            if opened.pop() if opened else True:
                kept.append(token)
        else:
            kept.append(token)
    return kept


def _image_link(image: Token, *, inside_link: bool) -> list[Token]:
    """The words of an image (its address when it has none), linked to it where allowed."""
    address = str(image.attrGet("src") or "")
    words = _checked(image.children or []) or [Token("text", "", 0, content=address)]
    if inside_link or not allowed_address(address):  # links never nest
        return words
    return [
        Token("link_open", "a", 1, attrs={"href": address}),
        *words,
        Token("link_close", "a", -1),
    ]


def _shift_headings(state: StateCore) -> None:
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            level = int(token.tag[1])
            token.tag = f"h{min(level + HEADING_SHIFT, 6)}"


def _alignment_classes(state: StateCore) -> None:
    """A table column's alignment as a class (`align-right`): the page's Content Security
    Policy allows no inline style, so markdown-it's `style="text-align:right"` would not
    apply, and no `style` attribute needs to be allowed at all."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open") and token.attrs.get("style"):
            side = str(token.attrs.pop("style")).removeprefix("text-align:")
            token.attrSet("class", f"align-{side}")


def _fence(
    self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    words = token.info.strip().split(maxsplit=1)
    language = _LANGUAGE.sub("", words[0])[:40] if words else ""
    code = token.content
    left = int(env.get("highlight_left", HIGHLIGHT_BUDGET))
    env["highlight_left"] = left - len(code)
    return code_html(code, language, colour=len(code) <= left)


def _code_block(
    self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return code_html(tokens[idx].content, "")


def code_html(code: str, language: str, *, colour: bool = True) -> str:
    """A code block: coloured when Pygments knows `language` (and `colour`), labelled with it."""
    label = f' data-language="{escapeHtml(language)}"' if language else ""
    shown = _highlighted(code, language) if colour else escapeHtml(code.rstrip("\n"))
    return f"<pre{label}><code>{shown}</code></pre>\n"


def _highlighted(code: str, language: str) -> str:
    code = code.rstrip("\n")
    if not language or len(code) > MAX_HIGHLIGHT_CHARS:
        return escapeHtml(code)
    if max(map(len, code.split("\n"))) > MAX_HIGHLIGHT_LINE:
        return escapeHtml(code)
    try:
        lexer = get_lexer_by_name(language, stripnl=False)
    except ClassNotFound:
        return escapeHtml(code)
    drawn: str = highlight(code, lexer, _formatter())
    return drawn.rstrip("\n")


@cache
def _formatter() -> HtmlFormatter[str]:
    # nowrap: only the token spans; the <pre><code> around them is `code_html`'s.
    return HtmlFormatter(nowrap=True, classprefix=TOKEN_PREFIX)


# ---------------------------------------------------------------- the allow-list


@dataclass(frozen=True)
class Allowed:
    """What may reach the page: nh3's options, named so that docs and tests can read them."""

    tags: frozenset[str]
    attributes: dict[str, set[str]]
    classes: dict[str, set[str]]
    values: dict[str, dict[str, set[str]]]  # attributes allowed only with these values
    forced: dict[str, dict[str, str]]  # attributes set on every such tag, whatever was there


@cache
def allowed() -> Allowed:
    token_classes = {TOKEN_PREFIX + short for short in STANDARD_TYPES.values() if short}
    aligned = {f"align-{side}" for side in ("left", "center", "right")}
    return Allowed(
        tags=BLOCK_TAGS | INLINE_TAGS | LIST_TAGS | TABLE_TAGS,
        attributes={
            "a": {"href", "title"},
            "ol": {"start"},
            "pre": {"data-language"},
        },
        classes={
            "span": token_classes,
            "ul": {"contains-task-list"},
            "li": {"task-list-item"},
            "input": {"task-list-item-checkbox"},
            "th": aligned,
            "td": aligned,
        },
        values={"input": {"checked": {"checked", ""}}},
        forced={"a": {"target": "_blank"}, "input": {"type": "checkbox", "disabled": "disabled"}},
    )


@cache
def _cleaner() -> nh3.Cleaner:
    rules = allowed()
    return nh3.Cleaner(
        tags=set(rules.tags),
        clean_content_tags={"script", "style"},
        attributes=rules.attributes,
        allowed_classes=rules.classes,
        tag_attribute_values=rules.values,
        set_tag_attribute_values=rules.forced,
        url_schemes=set(LINK_SCHEMES),
        url_relative="deny",
        link_rel="noopener noreferrer",
        strip_comments=True,
    )
