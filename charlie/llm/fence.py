"""Fences: text from notes, memory, tools and people reaches the model inside tags
(<note>, <memory>, <tool_result>) that mark it as data. Such text must never be able to
close its fence and speak as the system: bodies are escaped, attribute values too, quotes
included."""

from __future__ import annotations

import html
import re


def escape(text: str) -> str:
    """Text written by anyone, made safe to put inside a fence: `<`, `>` and `&` escaped."""
    return html.escape(text, quote=False)


def fence(tag: str, body: str, **attributes: object) -> str:
    """`<tag name="value">` + body + `</tag>`. Attribute values are escaped here; the body
    must already be escaped (or be fences built with this function): any closing `</tag`
    still in it is neutralised, so nothing inside can end the fence early."""
    attrs = "".join(f' {name}="{html.escape(str(value))}"' for name, value in attributes.items())
    closing = re.compile(rf"<(\s*/\s*{re.escape(tag)})", re.IGNORECASE)
    inner = closing.sub(r"&lt;\1", body)
    return f"<{tag}{attrs}>\n{inner}\n</{tag}>"
