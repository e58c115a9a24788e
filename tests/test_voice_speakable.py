"""The spoken-length pass: long markdown answers become a few sentences worth hearing."""

from __future__ import annotations

import pytest

from charlie.voice.speakable import MORE, Unfolding, instruction, sentences_of, speakable

LONG_ANSWER = """# Kitchen plan

Here is where things stand after this week's calls.

## Decisions
1. **Worktop:** quartz, not oak — it copes with heat.
2. *Tiles:* the grey metro ones from [Topps](https://www.topps.example/metro?id=9).
3. Plumber: Tuesday at 9:30, see https://plumbers.example.com/booking/123.

| item | cost |
|------|------|
| quartz | £1,200 |
| tiles | £340 |

```python
total = 1200 + 340
print(total)
```

> Remember: the fitter needs the sink model before Friday.

Anything else you want me to note?
"""


def test_a_long_markdown_answer_becomes_three_plain_sentences() -> None:
    spoken = speakable(LONG_ANSWER, max_sentences=3)
    assert spoken == (
        "Here is where things stand after this week's calls. Worktop: quartz, not oak — it "
        "copes with heat. Tiles: the grey metro ones from Topps. The rest is in the chat."
    )
    for mark in ("#", "*", "|", "`", "[", "](", "http", "print(", "£1,200", "Kitchen plan"):
        assert mark not in spoken


def test_more_sentences_are_kept_when_allowed_and_urls_are_named_not_read() -> None:
    spoken = speakable(LONG_ANSWER, max_sentences=20, max_chars=2000)
    assert "the grey metro ones from Topps." in spoken
    assert "a link to plumbers.example.com." in spoken
    assert "Remember: the fitter needs the sink model before Friday." in spoken
    assert "total = 1200" not in spoken  # the code block is left to the chat
    assert spoken.endswith(MORE)


def test_a_short_plain_answer_is_left_as_it_is() -> None:
    assert speakable("We chose quartz. It copes with heat.") == (
        "We chose quartz. It copes with heat."
    )


def test_the_character_cap_cuts_at_a_sentence_or_clause_and_says_so() -> None:
    long_sentence = "We looked at " + ", ".join(f"option number {n}" for n in range(40)) + "."
    spoken = speakable(long_sentence, max_chars=120)
    assert len(spoken) <= 120 + len(MORE) + 1
    assert spoken.endswith(f". {MORE}")
    assert "option number 3" in spoken
    assert ",." not in spoken


def test_abbreviations_and_numbers_do_not_split_sentences() -> None:
    text = "Buy e.g. basil and mint. It costs 3.50 today. Dr. Jones agrees. Done."
    assert sentences_of(text) == [
        "Buy e.g. basil and mint.",
        "It costs 3.50 today.",
        "Dr. Jones agrees.",
        "Done.",
    ]
    assert speakable(text, max_sentences=2) == (
        f"Buy e.g. basil and mint. It costs 3.50 today. {MORE}"
    )


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("```\nonly code\n```", MORE),
        ("", ""),
        ("- milk\n- eggs\n- bread", "milk. eggs. bread."),
        ("Call <b>Sam</b> about ~~Monday~~ Tuesday.", "Call Sam about Monday Tuesday."),
        ("![a photo of the tiles](tiles.png)", "a photo of the tiles."),
        ("See www.example.org.", "See a link to example.org."),
        ("```python\nunclosed code block", MORE),
    ],
)
def test_edge_cases(markdown: str, expected: str) -> None:
    assert speakable(markdown) == expected


def test_the_instruction_asks_for_short_plain_speech() -> None:
    text = instruction(2)
    assert "at most 2 short spoken sentences" in text
    assert "no markdown" in text


def unfold(
    answer: str, step: int = 3, **limits: int
) -> tuple[list[tuple[int, str]], str, list[str]]:
    """Stream `answer` in pieces of `step` characters: (where each sentence became ready,
    sentence), then what `finish` says."""
    unfolding = Unfolding(**limits)
    ready = []
    for at in range(0, len(answer), step):
        ready += [(at + step, s) for s in unfolding.add(answer[at : at + step])]
    spoken, rest = unfolding.finish(answer)
    return ready, spoken, rest


def test_a_streaming_answer_is_spoken_sentence_by_sentence_as_it_arrives() -> None:
    answer = "We chose quartz. It copes with heat. The fitter comes on Friday. Tiles next."
    ready, spoken, rest = unfold(answer)
    assert [s for _, s in ready] == [
        "We chose quartz.",
        "It copes with heat.",
        "The fitter comes on Friday.",
    ]
    assert ready[0][0] <= len("We chose quartz. I") + 3  # ready as soon as it ended
    assert rest == [MORE]
    assert spoken == speakable(answer)


def test_streamed_markdown_speaks_as_the_whole_answer_would() -> None:
    for limits in ({}, {"max_sentences": 8, "max_chars": 2000}):
        ready, spoken, rest = unfold(LONG_ANSWER, step=5, **limits)
        assert spoken == speakable(LONG_ANSWER, **limits)
        assert " ".join([s for _, s in ready] + rest) == spoken


def test_nothing_inside_an_unfinished_code_block_or_table_row_is_spoken() -> None:
    answer = "Run this:\n```sh\necho done. Then more. And more.\n```\nThat is all. Bye.\n"
    unfolding = Unfolding(max_sentences=5)
    said = []
    for piece in answer.split(" "):
        said += unfolding.add(piece + " ")
    assert all("echo" not in s and "more" not in s.lower() for s in said)
    assert said == ["Run this.", "That is all.", "Bye."]
    table = Unfolding()
    assert table.add("| Quartz. | 1200. ") == []
    assert table.add("|\n") == []


def test_an_abbreviation_at_the_end_of_what_has_arrived_is_not_a_sentence_end() -> None:
    unfolding = Unfolding()
    assert unfolding.add("Call Dr. ") == []
    assert unfolding.add("Jones today. ") == ["Call Dr. Jones today."]
