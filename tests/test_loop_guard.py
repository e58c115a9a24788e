"""A reply that repeats itself is stopped, its useful part kept (issue 12: the first answer
of a small model on llama.cpp looped for 5 min 43 s until the window was full)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from llm_double import ScriptedLLMServer

from charlie import conversations
from charlie.chat import turn as chat
from charlie.conversations import shared_channel
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.llm.loops import LoopGuard, find_loop
from charlie.projects import create_project
from charlie.users import ensure_user

INTRO = "Sure! Here is what I would do with the kitchen.\n\n"


def streamed(text: str, size: int = 7) -> LoopGuard:
    """Feed `text` to a guard in pieces, as a stream arrives; stop where it trips."""
    guard = LoopGuard()
    for start in range(0, len(text), size):
        if guard.feed(text[start : start + size]):
            break
    return guard


# ------------------------------------------------------------------ loops found


def test_a_repeated_sentence_is_a_loop_and_the_first_copy_is_kept() -> None:
    sentence = "I will check the oven and then the garage door. "
    guard = streamed(INTRO + sentence * 40)
    assert guard.loop is not None
    assert guard.useful == INTRO + sentence.rstrip()
    assert len(guard.text) < len(INTRO + sentence * 8)  # stopped early, not at the end


def test_a_repeated_list_line_is_a_loop() -> None:
    text = (
        INTRO
        + "- Measure the worktop.\n- Order the oak.\n"
        + "- Remember to water the plants.\n" * 30
    )
    guard = streamed(text)
    assert (
        guard.useful
        == INTRO + "- Measure the worktop.\n- Order the oak.\n- Remember to water the plants."
    )


def test_a_repeated_paragraph_is_a_loop_after_three_copies() -> None:
    paragraph = (
        "The kitchen needs a new worktop, and oak is the warmest choice: it ages well, it can "
        "be sanded when it is scratched, and it suits the cupboards you already have. Marble "
        "is colder and stains with lemon and wine, though it is lovely to roll pastry on.\n\n"
    )
    assert len(paragraph) > 200
    found = find_loop(INTRO + paragraph * 3)
    assert found is not None and found.copies == 3
    assert find_loop(INTRO + paragraph * 2) is None


def test_a_short_phrase_repeated_many_times_is_a_loop() -> None:
    guard = streamed("The answer is " + "very, " * 200)
    assert guard.loop is not None and guard.useful.startswith("The answer is very,")
    assert len(guard.useful) < 60


# ------------------------------------------------------------------ no false alarms

MARKDOWN = """\
## Kitchen plan

Here is a plan, step by step:

1. Measure the worktop (length and depth).
2. Measure the worktop again, with the hob cut-out.
3. Order the oak from the timber yard.
4. Oil the oak three times before fitting it.

| Item | Quantity | Price |
|------|----------|-------|
| Oak worktop 3 m | 1 | £450 |
| Oak worktop 2 m | 1 | £300 |
| Worktop oil | 1 | £18 |
| Worktop bolts | 4 | £12 |
| Worktop bolts (spare) | 4 | £12 |

```python
matrix = [
    [0, 0, 0, 0, 0],
    [0, 0, 0, 0, 0],
    [0, 0, 0, 0, 0],
    [0, 0, 0, 0, 0],
    [0, 0, 0, 0, 0],
]


def test_one() -> None:
    assert worktop.length == 300


def test_two() -> None:
    assert worktop.length == 300
```

```json
[
  {"name": "oak", "price": 450, "unit": "m"},
  {"name": "oak", "price": 300, "unit": "m"},
  {"name": "oil", "price": 18, "unit": "l"}
]
```

------------------------------------------------------------------------------------------
- [ ] Check the oven.
- [ ] Check the hob.
- [ ] Check the sink.
- [ ] Check the tap.
- [ ] Check the lights.

> Note: measure twice, cut once. Measure twice, cut once!

Row, row, row your boat, gently down the stream.
Merrily, merrily, merrily, merrily, life is but a dream.
"""


def test_lists_tables_code_and_rules_are_not_loops() -> None:
    guard = streamed(MARKDOWN, 3)
    assert guard.loop is None
    assert guard.useful == MARKDOWN
    assert find_loop(MARKDOWN) is None
    assert find_loop("=" * 600) is None and find_loop("-" * 40 + "\n" + "|---" * 200) is None


def test_a_long_generated_table_of_distinct_rows_is_not_a_loop() -> None:
    rows = "".join(f"| 2026-01-{day:02d} | {day * 17 % 23} kWh | ok |\n" for day in range(1, 32))
    assert streamed("| day | use | state |\n|---|---|---|\n" + rows).loop is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=90), min_size=1, max_size=40, unique=True))
def test_distinct_lines_never_read_as_a_loop(lines: list[str]) -> None:
    text = "\n".join(f"{number}. {line}" for number, line in enumerate(lines, start=1))
    assert streamed(text).loop is None


# ------------------------------------------------------------------ in a chat turn


def test_a_looping_stream_is_stopped_kept_marked_cut_and_the_person_told(
    home: Home, llm: ScriptedLLMServer
) -> None:
    channel = shared_channel(home, create_project(home, "Kitchen"))
    alice = ensure_user(home.db, "alice")
    sentence = "Remember to measure the worktop twice before cutting. "
    looping = INTRO + sentence * 400
    llm.reply(looping, chunk_size=6)
    client = LLMClient(llm.base_url, "test-model", retries=0)
    events = list(chat.turn(home, client, channel, alice, "How do I fit the worktop?"))
    shown = "".join(e.text for e in events if isinstance(e, chat.Token))
    assert len(shown) < len(INTRO + sentence * 8)  # the stream was left, not read to the end
    reply = next(e for e in events if isinstance(e, chat.Reply)).message
    assert reply.content == INTRO + sentence.rstrip()
    assert reply.incomplete  # marked cut: never distilled
    assert [e.text for e in events if isinstance(e, chat.Notice)] == [chat.LOOPED]
    assert "repeating itself; I stopped it" in chat.LOOPED
    stored = conversations.recent(home, channel, 2)[-1]
    assert stored.incomplete and stored.content == reply.content
    llm.reply("Measure twice.")
    list(chat.turn(home, client, channel, alice, "Again?"))
    sent = [m["content"] for m in llm.requests[-1]["messages"]]
    assert any(c.endswith("[this reply was cut off before it finished]") for c in sent)
