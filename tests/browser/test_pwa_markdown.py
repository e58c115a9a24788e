"""The PWA's own markdown renderer, run in the browser: safe by construction."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

pytestmark = pytest.mark.browser

RENDER = """async (texts) => {
  const { renderMarkdown } = await import('/markdown.js');
  return texts.map((text) => {
    const box = document.createElement('div');
    box.append(renderMarkdown(text));
    return box.innerHTML;
  });
}"""

CASES = [
    ("plain words", "<p>plain words</p>"),
    ("line one\nline two", "<p>line one<br>line two</p>"),
    ("**bold** and *it* and _it_", "<p><strong>bold</strong> and <em>it</em> and <em>it</em></p>"),
    ("snake_case_name and refresh_token", "<p>snake_case_name and refresh_token</p>"),
    ("2 * 3 * 4", "<p>2 * 3 * 4</p>"),
    ("*outer **inner** end*", "<p><em>outer <strong>inner</strong> end</em></p>"),
    ("~~gone~~", "<p><del>gone</del></p>"),
    ("use `a <b> c` here", "<p>use <code>a &lt;b&gt; c</code> here</p>"),
    ("``code with ` tick``", "<p><code>code with ` tick</code></p>"),
    ("\\*not italic\\*", "<p>*not italic*</p>"),
    ("# Title", '<h3 class="md-h1">Title</h3>'),
    ("### Small ###", '<h5 class="md-h3">Small</h5>'),
    ("#hashtag", "<p>#hashtag</p>"),
    ("- a\n- b", "<ul><li>a</li><li>b</li></ul>"),
    ("3. c\n4. d", '<ol start="3"><li>c</li><li>d</li></ol>'),
    ("- a\n  - nested\n- b", "<ul><li>a<ul><li>nested</li></ul></li><li>b</li></ul>"),
    ("Options:\n- one\n- two", "<p>Options:</p><ul><li>one</li><li>two</li></ul>"),
    ("> quoted\n> more", "<blockquote><p>quoted<br>more</p></blockquote>"),
    ("---", "<hr>"),
    (
        "```python\nprint('<hi>')\n```",
        '<pre data-language="python"><code class="language-python">'
        "print('&lt;hi&gt;')</code></pre>",
    ),
    ("```\nstill streaming", "<pre><code>still streaming</code></pre>"),
    (
        "[docs](https://example.org/a_(b))",
        '<p><a href="https://example.org/a_(b)" target="_blank" '
        'rel="noopener noreferrer nofollow">docs</a></p>',
    ),
    (
        "see https://example.org/x.",
        '<p>see <a href="https://example.org/x" target="_blank" '
        'rel="noopener noreferrer nofollow">https://example.org/x</a>.</p>',
    ),
    ("[x](javascript:alert(1))", "<p>x</p>"),
    ("[x](data:text/html,hi)", "<p>x</p>"),
    ("<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"),
    ('<img src=x onerror="alert(1)">', '<p>&lt;img src=x onerror="alert(1)"&gt;</p>'),
    (
        "**[b](https://e.org)**",
        '<p><strong><a href="https://e.org/" target="_blank" '
        'rel="noopener noreferrer nofollow">b</a></strong></p>',
    ),
]


def test_markdown_renders_safe_html(page: Page) -> None:
    page.goto("/")  # one page renders every case: a server per case would be slow
    rendered = page.evaluate(RENDER, [text for text, _ in CASES])
    wrong = [
        (text, html, got) for (text, html), got in zip(CASES, rendered, strict=True) if got != html
    ]
    assert wrong == []
    assert page.evaluate("() => document.querySelectorAll('script:not([src])').length") == 0
