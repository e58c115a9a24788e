"""Replies rendered as HTML on the server: what markdown becomes, and what never gets through."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charlie.adapters.web import render
from charlie.adapters.web.render import LINK_SCHEMES, allowed, render_markdown, sanitize
from charlie.notes import markup

LINK = 'target="_blank" rel="noopener noreferrer"'


class Elements(HTMLParser):
    """Every start tag of some HTML, with its attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {name: value or "" for name, value in attrs}))


def elements(html: str) -> list[tuple[str, dict[str, str]]]:
    parser = Elements()
    parser.feed(html)
    parser.close()
    return parser.found


def assert_allowed(html: str) -> None:
    """Only allow-listed tags, attributes and classes; links to allowed schemes only."""
    rules = allowed()
    for tag, attrs in elements(html):
        assert tag in rules.tags, (tag, html)
        for name, value in attrs.items():
            if name == "class":
                assert set(value.split()) <= rules.classes.get(tag, set()), (tag, value)
            elif name == "href":
                assert value.split(":", 1)[0].lower() in LINK_SCHEMES, value
            elif name == "rel":
                assert tag == "a" and value == "noopener noreferrer", (tag, value)
            else:
                permitted = (
                    rules.attributes.get(tag, set())
                    | set(rules.values.get(tag, {}))
                    | set(rules.forced.get(tag, {}))
                )
                assert name in permitted, (tag, name, html)
        if tag == "a":
            assert attrs["target"] == "_blank" and attrs["rel"] == "noopener noreferrer"
        if tag == "input":
            assert attrs["type"] == "checkbox" and "disabled" in attrs


# ---------------------------------------------------------------- what markdown becomes


def test_a_table_with_aligned_columns() -> None:
    html = render_markdown("| Wood | Price |\n|:--|--:|\n| oak | 120 |\n| ash | 95 |")
    assert html == (
        "<table>\n<thead>\n<tr>\n"
        '<th class="align-left">Wood</th>\n<th class="align-right">Price</th>\n'
        "</tr>\n</thead>\n<tbody>\n<tr>\n"
        '<td class="align-left">oak</td>\n<td class="align-right">120</td>\n'
        "</tr>\n<tr>\n"
        '<td class="align-left">ash</td>\n<td class="align-right">95</td>\n'
        "</tr>\n</tbody>\n</table>\n"
    )


def test_fenced_code_is_highlighted_with_classes_and_labelled() -> None:
    html = render_markdown('```python\ndef oil(wood):\n    return "<b>" # soon\n```')
    assert html.startswith('<pre data-language="python"><code><span class="hl-k">def</span>')
    assert '<span class="hl-nf">oil</span>' in html
    assert '<span class="hl-s2">"&lt;b&gt;"</span>' in html  # escaped inside its token
    assert '<span class="hl-c1"># soon</span></code></pre>' in html
    assert "style=" not in html  # colours come from style.css, never inline


def test_code_in_a_language_pygments_does_not_know_is_shown_as_it_is() -> None:
    assert render_markdown("```klingon\n<i>qapla'</i>\n```") == (
        '<pre data-language="klingon"><code>&lt;i&gt;qapla\'&lt;/i&gt;</code></pre>\n'
    )
    assert render_markdown("    indented <code>\n") == (
        "<pre><code>indented &lt;code&gt;</code></pre>\n"
    )


def test_a_fence_label_cannot_carry_attributes() -> None:
    html = render_markdown('```py"onmouseover="alert(1)\nx = 1\n```')
    assert html.startswith('<pre data-language="pyonmouseoveralert1"><code>')
    assert "onmouseover=" not in html


def test_task_lists_are_disabled_checkboxes() -> None:
    html = render_markdown("- [ ] order samples\n- [x] measure the run")
    box = {"class": "task-list-item-checkbox", "type": "checkbox", "disabled": "disabled"}
    assert elements(html) == [  # (nh3 writes forced attributes in no fixed order)
        ("ul", {"class": "contains-task-list"}),
        ("li", {"class": "task-list-item"}),
        ("input", box),
        ("li", {"class": "task-list-item"}),
        ("input", box | {"checked": "checked"}),
    ]
    assert "> order samples</li>" in html and "> measure the run</li>" in html


def test_blockquote_emphasis_lists_and_headings() -> None:
    assert render_markdown("> Oil *little* and **often**") == (
        "<blockquote>\n<p>Oil <em>little</em> and <strong>often</strong></p>\n</blockquote>\n"
    )
    assert render_markdown("# Plan\n### Step") == "<h3>Plan</h3>\n<h5>Step</h5>\n"
    assert (
        render_markdown("3. cut\n4. oil") == '<ol start="3">\n<li>cut</li>\n<li>oil</li>\n</ol>\n'
    )
    assert render_markdown("~~ash~~ `oak`") == "<p><s>ash</s> <code>oak</code></p>\n"


def test_links_open_in_a_new_tab_without_a_referrer() -> None:
    assert render_markdown("[the guide](https://example.org/oak)") == (
        f'<p><a href="https://example.org/oak" {LINK}>the guide</a></p>\n'
    )
    assert render_markdown("see https://example.org/x.") == (
        f'<p>see <a href="https://example.org/x" {LINK}>https://example.org/x</a>.</p>\n'
    )
    assert render_markdown("write to ana@example.org") == (
        f'<p>write to <a href="mailto:ana@example.org" {LINK}>ana@example.org</a></p>\n'
    )


# ---------------------------------------------------------------- what never gets through

ATTACKS = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "<svg onload=alert(1)><circle r=10 /></svg>",
    '<svg><a xlink:href="javascript:alert(1)"><text>x</text></a></svg>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    '<iframe src="https://evil.example"></iframe>',
    "<style>body{display:none}</style>",
    '<a href="javascript:alert(1)">raw link</a>',
    '<div style="position:fixed;inset:0">cover</div>',
    "<!-- <script>alert(1)</script> -->",
    '<form action="https://evil.example"><input name=p></form>',
    '<object data="data:text/html,<script>alert(1)</script>"></object>',
    "<details open ontoggle=alert(1)>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x]( javascript:alert(1) )",
    "[x](&#106;avascript:alert(1))",
    "[x](java%0ascript:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](file:///etc/passwd)",
    "[x](/api/export)",
    "[x](//evil.example/path)",
    '[x](https://e.org "title\\" onmouseover=\\"alert(1)")',
    "<javascript:alert(1)>",
    "![pic](javascript:alert(1))",
    "![pic](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "`<script>alert(1)</script>`",
    "```html\n<script>alert(1)</script>\n```",
    "```svg\n<svg onload=alert(1)>\n```",
    "| <script>alert(1)</script> | <img src=x onerror=alert(1)> |\n|---|---|\n| a | b |",
    "- [x] <img src=x onerror=alert(1)>",
    "> <iframe src=https://evil.example>",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_no_injection(attack: str) -> None:
    html = render_markdown(attack)
    assert_allowed(html)
    lowered = html.lower()
    for bad in ("<script", "<img", "<svg", "<iframe", "<style", "<form", "<object", "<math"):
        assert bad not in lowered, (attack, html)
    assert " on" not in "".join(f" {name}" for _, attrs in elements(html) for name in attrs)


RAW = [
    '<p onclick="alert(1)">hi<script>alert(2)</script></p>',
    '<img src=x onerror="alert(1)"><svg onload="alert(1)"></svg>',
    '<a href="javascript:alert(1)" target="_self" rel="opener">x</a>',
    '<a href="/api/export">x</a><a href="data:text/html,hi">y</a>',
    '<span class="hl-k evil" style="position:fixed">k</span>',
    '<input type="text" value="secret" autofocus onfocus="alert(1)">',
    '<td style="text-align:right;background:url(https://evil.example)">1</td>',
    '<pre data-language="x" onmouseover="alert(1)"><code>x</code></pre>',
    "<iframe srcdoc='<script>alert(1)</script>'></iframe><style>*{}</style>",
]


@pytest.mark.parametrize("raw", RAW)
def test_the_allow_list_alone_stops_raw_html(raw: str) -> None:
    """nh3 is a wall of its own: even HTML markdown-it would never write is cleaned."""
    html = sanitize(raw)
    assert_allowed(html)
    assert not any(word in html for word in ("alert", "evil", "secret", "_self", "url("))


def test_raw_html_is_shown_as_typed() -> None:
    assert render_markdown('Look: <img src=x onerror="alert(1)">') == (
        '<p>Look: &lt;img src=x onerror="alert(1)"&gt;</p>\n'
    )
    assert render_markdown("<b>not bold</b>") == "<p>&lt;b&gt;not bold&lt;/b&gt;</p>\n"


def test_a_refused_link_keeps_its_words_only() -> None:
    assert render_markdown("[click **me**](javascript:alert(1))") == (
        "<p>click <strong>me</strong></p>\n"
    )
    assert render_markdown("[export](/api/export)") == "<p>export</p>\n"
    assert render_markdown("chat at xmpp:ana@example.org") == (
        "<p>chat at xmpp:ana@example.org</p>\n"
    )


def test_images_become_links_and_are_never_fetched() -> None:
    assert render_markdown("![the worktop](https://example.org/oak.png)") == (
        f'<p><a href="https://example.org/oak.png" {LINK}>the worktop</a></p>\n'
    )
    assert render_markdown("![](https://example.org/t.gif?user=ana)") == (
        f'<p><a href="https://example.org/t.gif?user=ana" {LINK}>'
        "https://example.org/t.gif?user=ana</a></p>\n"
    )
    assert render_markdown("[![logo](https://e.org/l.png)](https://e.org)") == (
        f'<p><a href="https://e.org" {LINK}>logo</a></p>\n'  # links never nest
    )


MARKDOWN_BITS = st.sampled_from(
    [
        "<", ">", "&", '"', "'", "`", "```", "~~~", "*", "_", "[", "]", "(", ")", "!", "#",
        "|", "-", ":", "\n", "\n\n", " ", "    ", "> ", "- [ ] ", "1. ", "javascript:",
        "https://e.org", "data:", "mailto:", "on", "error=", "load=", "script", "img", "svg",
        "style", "href=", "src=", "alert(1)", "&#x6a;", "%0a", "\\", "|---|", "<!--", "-->",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(MARKDOWN_BITS, st.text(max_size=8)), max_size=40).map("".join))
def test_any_text_renders_within_the_allow_list(text: str) -> None:
    html = render_markdown(text)
    assert_allowed(html)
    assert "<script" not in html.lower()


# ---------------------------------------------------------------- bounds on what a text costs


def test_a_long_text_is_formatted_up_to_the_bound_and_plain_after() -> None:
    """A note can be 1 MB, written by anyone in the household: past MAX_MARKDOWN_CHARS its
    tail is shown as typed (escaped paragraphs), so no input makes a view take minutes."""
    head = "**bold** words\n\n" * (render.MAX_MARKDOWN_CHARS // 16)
    html = render_markdown(head + "**late** and [x](javascript:y) <b>z</b>\n\nlast line")
    drawn, _, tail = html.partition("without formatting.)</em></p>")
    assert drawn.count("<strong>bold</strong>") > 1000
    assert tail.startswith("<p>**late** and [x](javascript:y) &lt;b&gt;z&lt;/b&gt;</p>")
    assert tail.endswith("<p>last line</p>")


def test_a_long_task_list_is_a_plain_list() -> None:
    few = render_markdown("- [ ] sand\n- [x] oil\n")
    many = render_markdown("- [ ] x\n" * (render.MAX_TASK_ITEMS + 1))
    assert few.count("<input") == 2
    assert "<input" not in many and many.count("<li>[ ] x</li>") == render.MAX_TASK_ITEMS + 1


def test_code_with_a_very_long_line_is_shown_uncoloured_but_labelled() -> None:
    long_line = render_markdown("```java\n" + "a " * render.MAX_HIGHLIGHT_LINE + "\n```")
    short = render_markdown("```java\nclass A {}\n```")
    assert 'data-language="java"' in long_line and "hl-" not in long_line
    assert "hl-k" in short


def test_colouring_stops_after_the_budget_of_one_text() -> None:
    block = "```python\n" + "x = 1\n" * 1000 + "```\n\n"  # 6,000 characters of code
    html = render_markdown(block * (render.HIGHLIGHT_BUDGET // 6000 + 2))
    coloured = [b for b in html.split("<pre") if "hl-" in b]
    assert len(coloured) == render.HIGHLIGHT_BUDGET // 6000
    assert html.count('data-language="python"') == render.HIGHLIGHT_BUDGET // 6000 + 2


def test_a_text_is_drawn_once() -> None:
    text = "A *note* read by everyone, " + "again " * 50
    assert render_markdown(text) is render_markdown(text)
    assert render.draw(text) == render_markdown(text) and render.draw(text) is not render.draw(text)


@pytest.mark.parametrize(
    ("cut", "words"),
    [
        (
            "After the restart, **zebracorn password** is in [the vault](https://va",
            "After the restart, zebracorn password is in the vault",
        ),
        ("number 16 | | Tuesday17 | blue bin | | Tuesda", "number 16 Tuesday17 blue bin Tuesda"),
        ("| Day | Bin |\n|---|---|", "Day Bin"),
        (
            "[meter guide][g] **emphasised words that go on",
            "meter guide emphasised words that go on",
        ),
        (
            "## Page 1\n\nWe chose **oak**; 2 * 3 = 6, a_b_c.",
            "Page 1 We chose oak; 2 * 3 = 6, a_b_c.",
        ),
    ],
)
def test_plain_words_of_markdown_cut_in_the_middle(cut: str, words: str) -> None:
    """A search snippet is cut from one chunk of a note: what the cut leaves of a link, an
    emphasis or a table is taken out, the words stay."""
    assert markup.plain_text(cut) == words
