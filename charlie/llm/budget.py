"""Budgets: every request fits the model's context window, with room kept for the answer.

Tokens are estimated from the text, never asked of the server (one more round trip per
request, and not every server has `/tokenize`). The estimate errs high on purpose: a word
of n letters is n/5 + 0.5 tokens, every digit and ASCII punctuation mark one (tokenizers
split numbers digit by digit), a line break, a run of spaces, or a space before a digit or
mark one, a character of two UTF-8 bytes (accents, Cyrillic) one, of three (CJK) 1.25, of
four (emoji, byte-split by small vocabularies) four. Measured against six real tokenizers
(Llama 3, Qwen2, Gemma, Phi-3, Llama 2, DeepSeek; `llama-tokenize`) on markdown, code, JSON,
French, German, Japanese, emoji chat and a table of numbers, it came out 0.86 to 1.94 times
the true count (prose 1.1–1.4); plain characters/3 ranged 0.42 (numbers) to 1.5. Erring high
costs a little history; erring low costs a refused request, which gets one retry at half
the budget (`charlie.chat.toolloop.ToolLoop`).

What gives way, in order, when a request is too long (`fit`; one that fits is sent as is):
1. any one earlier message longer than a quarter of the room is shortened, its start and
   end kept around a visible marker ("[… 12,345 characters cut …]");
2. the oldest messages are left out, first to last;
3. the current turn (the person's message, tool results) is shortened, biggest part first;
4. the system prompt itself is shortened (its memory and pins are shortened before, in
   `charlie.chat.turn.context`, to at most half of the room).
The person's message and the system prompt are never left out.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from charlie.llm.messages import ChatMessage, ContentPart, ToolSchema

CHARS_PER_TOKEN = 3  # how much text to keep when shortening, before measuring again
MESSAGE_TOKENS = 8  # role markers and template tokens around each message
IMAGE_TOKENS = 1024  # one image part: vision encoders take 256 to about 1,500 tokens
DEFAULT_WINDOW = 4096  # when neither the setting nor the server says (Ollama's default)
MIN_PROMPT = 256  # the smallest prompt budget; below it nothing useful fits anyway
SHARE_OF_ONE_MESSAGE = 4  # one earlier message or tool result: at most a quarter of the room
EARLY_DISTILL = 0.5  # distill before the cadence once undistilled text passes half the room
MIN_KEPT = 48  # tokens a shortened text keeps at the least


@dataclass(frozen=True)
class Budget:
    """How a context window is shared: the prompt, then `answer` tokens for the reply."""

    window: int
    answer: int

    @classmethod
    def of(cls, window: int, max_tokens: int) -> Budget:
        """The answer gets `max_tokens`, but never more than half the window."""
        return cls(window, max(16, min(max_tokens, window // 2)))

    @property
    def margin(self) -> int:
        """Slack for what the estimate cannot see (the chat template's own text)."""
        return max(32, self.window // 32)

    @property
    def prompt(self) -> int:
        """Tokens the request itself may take."""
        return max(MIN_PROMPT, self.window - self.answer - self.margin)


_WORD = re.compile(r"[A-Za-z]+")
_SINGLE = re.compile(r"[\d!-/:-@\[-`{-~]")  # a digit or ASCII punctuation mark
_SPACE = re.compile(r"\n|\t| {2,}| (?=[\d!-/:-@\[-`{-~])")
_TWO_BYTES = re.compile("[\u0080-\u07ff]")
_THREE_BYTES = re.compile("[\u0800-\uffff]")
_FOUR_BYTES = re.compile("[\U00010000-\U0010ffff]")


def estimate(text: str) -> int:
    """Tokens `text` takes, erring high (see the module docstring)."""
    if not text:
        return 0
    words = _WORD.findall(text)
    tokens = (
        sum(map(len, words)) / 5
        + len(words) / 2
        + len(_SINGLE.findall(text))
        + len(_SPACE.findall(text))
        + len(_TWO_BYTES.findall(text))
        + 1.25 * len(_THREE_BYTES.findall(text))
        + 4 * len(_FOUR_BYTES.findall(text))
    )
    return math.ceil(tokens)


def message_tokens(message: ChatMessage) -> int:
    """Tokens one chat message takes: its text, images, tool calls and the template's."""
    total = MESSAGE_TOKENS
    content = message.get("content")
    if isinstance(content, str):
        total += estimate(content)
    elif isinstance(content, list):
        for part in content:
            if part.get("type") == "text":
                total += estimate(str(part.get("text", "")))
            else:
                total += IMAGE_TOKENS
    for call in message.get("tool_calls") or []:
        total += estimate(json.dumps(call, ensure_ascii=False))
    return total


def request_tokens(messages: list[ChatMessage], tools: list[ToolSchema] | None) -> int:
    """Tokens a whole request takes: messages and the tool schemas the template renders."""
    return sum(message_tokens(m) for m in messages) + tools_tokens(tools)


def tools_tokens(tools: list[ToolSchema] | None) -> int:
    return estimate(json.dumps(tools, ensure_ascii=False)) if tools else 0


def marker(cut: int) -> str:
    return f"[… {cut:,} characters cut …]"


def shorten(text: str, tokens: int) -> str:
    """`text` within `tokens`: its start (two thirds) and end (one third) kept around a
    marker saying how much was cut; unchanged when it already fits."""
    tokens = max(tokens, MIN_KEPT)
    if estimate(text) <= tokens:
        return text
    keep = tokens * CHARS_PER_TOKEN
    while True:
        keep = max(keep - len(marker(len(text))) - 2, 0)
        head, tail = keep * 2 // 3, keep - keep * 2 // 3
        shortened = (
            f"{text[:head]}\n{marker(len(text) - head - tail)}\n{text[len(text) - tail :]}"
            if tail
            else f"{text[:head]}\n{marker(len(text) - head)}"
        )
        if estimate(shortened) <= tokens or keep == 0:
            return shortened
        keep = keep * tokens // estimate(shortened)  # many non-ASCII characters: try smaller


def shorten_message(message: ChatMessage, tokens: int) -> ChatMessage:
    """A copy of `message` whose text is shortened so the message takes about `tokens`."""
    content = message.get("content")
    room = tokens - (message_tokens(message) - _text_tokens(content))
    if isinstance(content, str):
        return message | {"content": shorten(content, room)}
    if isinstance(content, list):
        texts = [p for p in content if p.get("type") == "text"]
        share = room // max(len(texts), 1)
        parts = [
            p | {"text": shorten(str(p.get("text", "")), share)} if p.get("type") == "text" else p
            for p in content
        ]
        return message | {"content": parts}
    return message


def _text_tokens(content: str | list[ContentPart] | None) -> int:
    if isinstance(content, str):
        return estimate(content)
    if isinstance(content, list):
        return sum(estimate(str(p.get("text", ""))) for p in content if p.get("type") == "text")
    return 0


def fit(
    messages: list[ChatMessage],
    limit: int,
    *,
    current: int,
    tools: list[ToolSchema] | None = None,
) -> list[ChatMessage]:
    """`messages` within `limit` tokens (tool schemas included), as the module says.

    `messages[0]` is the system prompt, `messages[1:current]` the earlier conversation
    (oldest first), `messages[current:]` this turn: the person's message and the tool
    rounds since, whose pairs of call and result must stay whole. Returns a new list."""
    room = limit - tools_tokens(tools)
    system, turn, history = messages[0], list(messages[current:]), list(messages[1:current])
    fixed = message_tokens(system) + sum(message_tokens(m) for m in turn)
    if fixed + sum(message_tokens(m) for m in history) > room:
        one = max(room // SHARE_OF_ONE_MESSAGE, MIN_KEPT)
        history = [shorten_message(m, one) if message_tokens(m) > one else m for m in history]
    sizes = [message_tokens(m) for m in history]
    dropped = 0
    while dropped < len(history) and fixed + sum(sizes[dropped:]) > room:
        dropped += 1
    if dropped:  # a conversation starts with the person speaking, as chat templates expect
        while dropped < len(history) and history[dropped].get("role") != "user":
            dropped += 1
    history = history[dropped:]
    used = fixed + sum(sizes[dropped:])
    for _ in range(len(turn)):  # this turn's biggest parts give way next
        if used <= room:
            break
        biggest = max(range(len(turn)), key=lambda i: message_tokens(turn[i]))
        size = message_tokens(turn[biggest])
        turn[biggest] = shorten_message(turn[biggest], size - (used - room))
        used += message_tokens(turn[biggest]) - size
    if used > room:  # the system prompt last
        size = message_tokens(system)
        system = shorten_message(system, size - (used - room))
    return [system, *history, *turn]


def share(sizes: list[int], room: int) -> int:
    """The largest cap such that texts of these sizes, each cut to the cap, fill at most
    `room` tokens: short texts stay whole and the long ones share what is left."""
    left = len(sizes)
    for size in sorted(sizes):
        if size * left > room:
            return max(room // left, MIN_KEPT)
        room -= size
        left -= 1
    return max(sizes, default=MIN_KEPT)
