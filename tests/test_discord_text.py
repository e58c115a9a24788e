"""Discord's 2,000-character limit, code fences kept whole, and compact trace lines."""

from __future__ import annotations

import random
import re

import pytest

from charlie.adapters.discord.text import LIMIT, length, split, trace_block, trace_line
from charlie.trace import Called, Hit, Loaded, Preloaded, Stopped

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)


def balanced(part: str) -> bool:
    return len(FENCE.findall(part)) % 2 == 0


def test_short_text_is_one_part_unchanged() -> None:
    assert split("Oak worktops, final answer.") == ["Oak worktops, final answer."]
    assert split("") == []


def test_long_text_is_cut_between_paragraphs() -> None:
    paragraphs = [f"Paragraph {n}. " + "word " * 150 for n in range(6)]
    parts = split("\n\n".join(p.strip() for p in paragraphs))
    assert len(parts) > 1
    assert all(length(p) <= LIMIT for p in parts)
    for part in parts:  # every part starts at a paragraph, none is cut mid-paragraph
        assert part.startswith("Paragraph ")
    assert "".join(parts).count("Paragraph") == 6


def test_one_huge_line_is_cut_between_words() -> None:
    text = " ".join(f"w{n}" for n in range(1500))
    parts = split(text)
    assert all(length(p) <= LIMIT for p in parts)
    assert " ".join(parts).split() == text.split()  # no word was cut in two


def test_a_code_block_that_fits_is_never_split() -> None:
    code = "```python\n" + "\n".join(f"x{n} = {n}" for n in range(120)) + "\n```"
    text = "word " * 300 + "\n\n" + code + "\n\nAfter."
    parts = split(text)
    assert all(length(p) <= LIMIT for p in parts)
    assert all(balanced(p) for p in parts)
    assert sum(code in p for p in parts) == 1  # the whole block, in one part


def test_a_code_block_longer_than_a_message_is_closed_and_reopened() -> None:
    code = (
        "```python\n" + "\n".join(f"value_{n} = compute({n})  # step" for n in range(400)) + "\n```"
    )
    parts = split("Here it is:\n\n" + code + "\n\nThat's all.")
    code_parts = [p for p in parts if "value_" in p]
    assert len(code_parts) >= 3
    assert all(length(p) <= LIMIT for p in parts)
    for part in code_parts:
        body = part[part.index("```python") :]
        assert body.startswith("```python\n")
        assert re.search(r"\n```(\n|$)", body), part[-40:]  # closed in the same part
        assert balanced(part)
    lines = [line for p in code_parts for line in p.splitlines() if line.startswith("value_")]
    assert lines == [f"value_{n} = compute({n})  # step" for n in range(400)]  # none lost


def test_tilde_fences_and_longer_fences() -> None:
    inner = "```\nnot a fence end inside a longer one\n```"
    text = "````markdown\n" + (inner + "\n") * 80 + "````"
    parts = split(text)
    assert len(parts) > 1
    for part in parts:
        assert part.startswith("````markdown\n") and part.endswith("\n````")
        assert length(part) <= LIMIT


def test_emoji_count_twice_so_a_part_is_never_too_long_for_discord() -> None:
    text = "🧠" * 1500
    parts = split(text)
    assert len(parts) == 2
    assert all(len(p.encode("utf-16-le")) // 2 <= LIMIT for p in parts)


@pytest.mark.parametrize("seed", range(25))
def test_random_markdown_always_fits_and_keeps_fences_balanced(seed: int) -> None:
    rng = random.Random(seed)
    blocks = []
    for _ in range(rng.randint(1, 14)):
        kind = rng.random()
        if kind < 0.35:
            lines = [" ".join("x" * rng.randint(1, 12) for _ in range(rng.randint(1, 40)))]
            blocks.append("\n".join(lines * rng.randint(1, 8)))
        elif kind < 0.7:
            body = "\n".join("  code " * rng.randint(0, 30) for _ in range(rng.randint(1, 90)))
            blocks.append(f"```{rng.choice(['', 'py', 'sh'])}\n{body}\n```")
        else:
            blocks.append("y" * rng.randint(1, 4500))
    text = "\n\n".join(blocks)
    parts = split(text)
    assert parts
    for part in parts:
        assert 0 < length(part) <= LIMIT
        assert balanced(part), part
    # nothing but fences and whitespace is added or lost
    strip = re.compile(r"```[a-z]*|\s")
    assert strip.sub("", "\n".join(parts)) == strip.sub("", text)


def test_trace_lines_are_short_and_say_what_happened() -> None:
    hits = (
        Hit("auth/jwt", "JWT refresh tokens", 0.82, "We rotate…"),
        Hit("auth/cookies", "Session cookies", 0.41, "Cookies…"),
        Hit("auth/logins", "Logins", 0.40, "Logins…"),
    )
    search = Called("search_notes", {"query": "JWT refresh"}, True, "3 notes", hits=hits, count=3)
    assert trace_line(search) == "searched notes for 'JWT refresh' → 3 notes"
    read = Called("read_note", {"note": "auth/jwt"}, True, "read JWT refresh tokens")
    assert trace_line(read) == "read note 'auth/jwt' → read JWT refresh tokens"
    failed = Called("nope", "{not json", False, "bad arguments", guard="bad_arguments")
    assert trace_line(failed) == "✗ nope → bad arguments"
    assert trace_line(Preloaded(("memory",))) is None
    assert trace_line(Loaded("notes", ok=True, tools=("create_note",))) == "loaded the notes tools"
    assert trace_line(Stopped("max_iterations", "limit")) == "stopped: limit"
    block = trace_block([search, read])
    assert block.splitlines() == [
        "-# searched notes for 'JWT refresh' → 3 notes",
        "-# read note 'auth/jwt' → read JWT refresh tokens",
    ]


def test_a_long_trace_is_capped() -> None:
    step = Called("now", {}, True, "x")
    lines = trace_block([step] * 10).splitlines()
    assert len(lines) == 7 and lines[-1] == "-# … and 4 more steps"
    assert trace_block([Preloaded(())]) == ""
