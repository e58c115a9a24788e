"""Tool calls a model wrote as text, in every form small models use, read whole or streamed.

A model offered tools does not always answer with native `tool_calls`: small ones (1–14B)
write the call into the text, in whichever form their training favoured, and a server that
cannot parse that form passes it on as content. This module is the one place that reads
them:

- Hermes / Qwen: `<tool_call>{"name": …, "arguments": {…}}</tool_call>` — the closing tag
  often missing, prose around it, braces doubled as in Qwen's own template
  (`{{"name": …}}}}`); Qwen3-Coder's XML inside it:
  `<function=NAME><parameter=KEY>value</parameter></function>`
- `<function name="NAME" arguments='{…}'></function>` and `<function name="NAME">{…}</function>`
- Llama 3.1: `<function=NAME>{…}</function>`, `<|python_tag|>{…}`
- Mistral: `[TOOL_CALLS][{"name": …, "arguments": {…}}]`, `[TOOL_CALLS]NAME[ARGS]{…}`
- JSON, fenced (```json) or bare: `{"name": …, "arguments" | "parameters": …}`, a list of
  them, or OpenAI's own `{"type": "function", "function": {…}}`
- pythonic (Llama 3.2, Gemma): `[search_notes(query="oak"), now()]`, bare or in a
  ```tool_code fence

JSON that is not quite JSON (single quotes, trailing commas, doubled braces, a call cut off
at the end) is repaired with `json_repair`; arguments sent as a JSON string are decoded.

A tag form is always a call attempt, whatever tool it names (an unknown name is for the
tool loop to refuse, with the real names). JSON and pythonic forms count only when they
name a known tool, or when they are the whole message: a JSON sample in an answer stays
text. Markup recognised as a call but unreadable is reported (`Reading.unreadable`), never
shown.

`MarkupFilter` applies this to a stream: text that may be the start of a call is held back
until it is known not to be one, so no markup reaches the person on any path.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import json_repair

from charlie.jsonvalue import JSON
from charlie.llm.messages import ToolSchema

# Tool names with their parameter names in order (positional pythonic arguments map to them).
Known = Mapping[str, Sequence[str]]

# Openers that make everything after them a call attempt, read at the end of the message.
TAGS = (
    "<tool_call",
    "<|tool_call|>",
    "<tools>",
    "<function",
    "<|python_tag|>",
    "[TOOL_CALLS]",
)
# Markers a model sometimes writes as text, never shown: its chat template's (`<|im_end|>`,
# `<end_of_turn>`), stray call tags, and the fences Charlie puts around data (`<note …>`,
# `<memory>`, `<tool_result …>`: a small model copies them into its answer). After it was
# shown such fences, their fields written as tags too (`<title>…</title>`: `echoes`).
FENCE_TAGS = ("note", "memory", "tool_result", "tool_response", "messages", "lookup")
FIELD_TAGS = (
    *("id", "title", "score", "snippet", "tags", "speaker", "query"),
    *("notes", "content", "result", "results", "snippets", "hits", "search_result"),
)
TEMPLATE_NAMES = ("im_start", "im_end", "eot_id", "eom_id", "end", "python_tag", "tool_call")
_MARKERS = (
    r"</?tool_call>|</function>|</tools>|<\|(?:" + "|".join(TEMPLATE_NAMES) + r")\|>"
    r"|<(?:end|start)_of_turn>|\[/?TOOL_CALLS\]|\[ARGS\]"
    r"|</?(?:" + "|".join(FENCE_TAGS) + r")\b[^<>]{0,300}>"
)
MARKERS = re.compile(_MARKERS, re.IGNORECASE)
# A field written as a tag, not where it is code (`<title>` in backticks stays).
ECHOES = re.compile(_MARKERS + r"|(?<!`)</?(?:" + "|".join(FIELD_TAGS) + r")>(?!`)", re.IGNORECASE)
MARKER_NAMES = (
    *(f"|{name}|" for name in TEMPLATE_NAMES),
    "end_of_turn",
    "start_of_turn",
    "tool_call",
    "function",
    "tools",
    *FENCE_TAGS,
)
MARKER_LONGEST = 320
CALL_KEYS = ("name", "function", "tool", "tool_name", "type", "tool_calls")
ARGUMENT_KEYS = ("arguments", "parameters", "args", "input", "params")
FENCE = "```"
OPENER_WINDOW = 160  # characters enough to tell whether a call opens here
CALL_FENCES = ("", "json", "tool_call", "tool_code", "python", "py", "function", "tool")

Verdict = Literal["no", "maybe", "yes"]


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for: natively (`tool_calls`) or written as text."""

    id: str
    name: str
    arguments: str  # the JSON object text, as the model sent it


def arguments_text(arguments: object) -> str:
    """A tool call's arguments as the JSON text the tool loop parses: servers send a string,
    some an object, some nothing."""
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


@dataclass
class Reading:
    """What a reply's text held: the calls, the text left to show, and any markup that was
    recognised as a call but could not be read."""

    calls: list[ToolCall] = field(default_factory=list)
    text: str = ""
    unreadable: list[str] = field(default_factory=list)

    @property
    def markup(self) -> bool:
        """The text held a call attempt, read or not."""
        return bool(self.calls or self.unreadable)


def known_of(tools: Iterable[ToolSchema]) -> dict[str, list[str]]:
    """Tool names and parameter names, from OpenAI tool schemas."""
    known: dict[str, list[str]] = {}
    for tool in tools:
        function = tool["function"]
        parameters = function.get("parameters")
        known[function["name"]] = list(parameters.get("properties") or {}) if parameters else []
    return known


# ---------------------------------------------------------------- reading whole text


def read(text: str, known: Known, *, whole: bool = True, echoes: bool = False) -> Reading:
    """Every call written in `text`, and the text without them. `whole`: `text` is the
    whole message (a JSON call of an unknown tool then counts when it is all there is)."""
    reading = Reading()
    at = _first_tag(text)
    prose, tagged = (text, "") if at < 0 else (text[:at], text[at:])
    shown = _read_loose(prose, known, reading, whole=whole and not tagged, eager=echoes)
    if tagged:
        shown += _read_tagged(tagged, known, reading)
    reading.text = _tidy(shown, _echoes(known) if echoes else MARKERS)
    for number, call in enumerate(reading.calls):
        if not call.id:
            reading.calls[number] = ToolCall(f"text_call_{number}", call.name, call.arguments)
    return reading


def _first_tag(text: str) -> int:
    lowered = text.lower()
    found = [lowered.find(tag.lower()) for tag in TAGS]
    found = [at for at in found if at >= 0]
    return min(found) if found else -1


def _echoes(known: Known) -> re.Pattern[str]:
    """`ECHOES`, and tags named after the tools offered."""
    if not known:
        return ECHOES
    names = "|".join(re.escape(name) for name in known)
    return re.compile(f"{ECHOES.pattern}|(?<!`)</?(?:{names})\\b[^<>]{{0,300}}>", re.IGNORECASE)


def _tidy(text: str, markers: re.Pattern[str] = MARKERS) -> str:
    return re.sub(r"\n{3,}", "\n\n", markers.sub("", text)).strip()


def _read_loose(
    text: str, known: Known, reading: Reading, *, whole: bool, eager: bool = False
) -> str:
    """Fenced, JSON and pythonic calls in `text`; returns the text around them."""
    kept: list[str] = []
    at = 0
    while at < len(text):
        start, end, calls = _next_loose(text, at, known, whole=whole, eager=eager)
        if start < 0:
            kept.append(text[at:])
            break
        before = text[at:start]
        if before.endswith(" ") and text[end : end + 1] in (" ", ""):
            before = before[:-1]  # "search: {…} now" reads "search: now"
        kept.append(before)
        reading.calls += calls
        at = end
    return "".join(kept)


def _next_loose(
    text: str, at: int, known: Known, *, whole: bool, eager: bool = False
) -> tuple[int, int, list[ToolCall]]:
    """The next loose call from `at`: its span and calls, or (-1, -1, [])."""
    position = at
    while position < len(text):
        if text.startswith(FENCE, position):
            end = _fence_end(text, position)
            alone = _alone(text, position, end)
            calls = _fenced_calls(text[position:end], known, alone=alone, eager=eager)
            if calls:
                return position, end, calls
            position = end
            continue
        window = text[position : position + OPENER_WINDOW]
        verdict = opener(window, known, after=text[position - 1 : position])
        if verdict == "yes":
            end = _balanced_end(text, position)
            segment = text[position:end]
            alone = whole and _alone(text, position, end)
            calls = _segment_calls(segment, known, alone=alone, eager=eager)
            if calls:
                return position, end, calls
        position += 1
    return -1, -1, []


def _alone(text: str, start: int, end: int) -> bool:
    return not (text[:start].strip() or text[end:].strip())


def _fence_end(text: str, start: int) -> int:
    close = text.find(FENCE, start + len(FENCE))
    return len(text) if close < 0 else close + len(FENCE)


def _fenced_calls(block: str, known: Known, *, alone: bool, eager: bool = False) -> list[ToolCall]:
    inner = block[len(FENCE) :]
    inner = inner[: -len(FENCE)] if inner.endswith(FENCE) else inner
    language, _, body = inner.partition("\n")
    if language.strip().lower() not in CALL_FENCES:
        return []
    if not body.strip():
        body, language = language, ""
    coded = alone or language.strip() == "tool_code"
    return _segment_calls(body.strip(), known, alone=coded, eager=eager)


def _segment_calls(
    segment: str, known: Known, *, alone: bool, eager: bool = False
) -> list[ToolCall]:
    """The calls in one JSON or pythonic segment. An unknown name counts when the segment
    is `alone`, or (`eager`: tools were offered) when it is JSON with a name and arguments —
    an attempt at a call (the loop says which tools there are), not a sample."""
    calls = _json_calls(segment)
    if calls and eager and _ARGUMENTED.search(segment):
        return calls
    calls = calls or _pythonic_calls(segment, known)
    if not calls:
        return []
    if alone or all(call.name in known for call in calls):
        return calls
    return []


_ARGUMENTED = re.compile(r"[\"']\s*(?:arguments|parameters)\s*[\"']\s*:")


# ---------------------------------------------------------------- tag forms


_TOOL_CALL_TAG = re.compile(r"<tool_call\b[^>]*>", re.IGNORECASE)
_FUNCTION_EQ = re.compile(r"<function=([\w.\-]+)>(.*?)(?:</function>|(?=<function[=\s>])|$)", re.S)
_FUNCTION_NAMED = re.compile(
    r"<function\s+([^>]*?)/?>(.*?)(?:</function>|(?=<function[=\s>])|$)", re.S
)
_PARAMETER = re.compile(
    r"<parameter=([\w.\-]+)>\s*(.*?)\s*(?:</parameter>|(?=<parameter=)|$)", re.S
)
_ATTRIBUTE = re.compile(r"([\w\-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')", re.S)


def _read_tagged(text: str, known: Known, reading: Reading) -> str:
    """Calls from the first tag on: each tag's body, split at the next tag."""
    pieces = _split_tags(text)
    shown = []
    for opening, body in pieces:
        calls, rest = _tag_calls(opening, body, known)
        if calls:
            reading.calls += calls
            shown.append(rest)
        else:
            reading.unreadable.append(opening + body)
    return "".join(shown)


def _split_tags(text: str) -> list[tuple[str, str]]:
    """`text` (which starts with a tag) as (tag, body up to the next tag) pairs."""
    lowered = text.lower()
    starts = sorted(
        {m for tag in TAGS for m in _all(lowered, tag.lower())}
        - {m for m in _all(lowered, "<function") if _inside_tool_call(lowered, m)}
    )
    pieces = []
    for number, start in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else len(text)
        chunk = text[start:end]
        tag = next(t for t in TAGS if chunk.lower().startswith(t.lower()))
        if tag == "<function":
            pieces.append(("", chunk))  # its attributes are part of what is read
        elif tag == "<tool_call":
            opened = _TOOL_CALL_TAG.match(chunk)
            size = opened.end() if opened else len(tag)
            pieces.append(("<tool_call>", chunk[size:]))
        else:
            pieces.append((tag, chunk[len(tag) :]))
    return pieces


def _all(text: str, needle: str) -> list[int]:
    return [m.start() for m in re.finditer(re.escape(needle), text)]


def _inside_tool_call(lowered: str, at: int) -> bool:
    """A `<function` that is the body of an open `<tool_call>` (Qwen3-Coder's XML)."""
    before = lowered[:at]
    opened = max(before.rfind("<tool_call>"), before.rfind("<|tool_call|>"))
    return opened >= 0 and before.rfind("</tool_call>") < opened


def _tag_calls(opening: str, body: str, known: Known) -> tuple[list[ToolCall], str]:
    """The calls of one tag and the prose after them."""
    if opening == "[TOOL_CALLS]":
        return _mistral_calls(body, known), ""
    if opening == "<|python_tag|>":
        return (_json_calls(body) or _pythonic_calls(body, known, dotted=True)), ""
    closed = re.search(r"</tool_call>|<\|/tool_call\|>|</tools>", body, re.IGNORECASE)
    inner, after = (body[: closed.start()], body[closed.end() :]) if closed else (body, "")
    if re.search(r"<function[=\s>]", inner):
        calls = _function_calls(inner)
        rest = _FUNCTION_EQ.sub("", _FUNCTION_NAMED.sub("", inner))
        return calls, rest + after
    stripped = inner.strip()
    calls = _json_calls(stripped) or _pythonic_calls(stripped, known)
    return calls, after


def _function_calls(text: str) -> list[ToolCall]:
    """`<function=NAME>…` and `<function name="NAME" …>…` calls."""
    calls: list[ToolCall] = []
    for match in _FUNCTION_EQ.finditer(text):
        calls.append(_function_call(match.group(1), match.group(2), {}))
    for match in _FUNCTION_NAMED.finditer(text):
        attributes = {
            m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
            for m in _ATTRIBUTE.finditer(match.group(1))
        }
        name = attributes.get("name")
        if not name:
            continue
        raw = _quoted_arguments(match.group(1))
        calls.append(_function_call(name, match.group(2), {"raw": raw} if raw else {}))
    return calls


def _quoted_arguments(attributes: str) -> str | None:
    """The `arguments='…'` attribute, up to its last quote: the JSON inside may hold the
    same quote unescaped (`'{"q": "it's"}'`)."""
    found = re.search(r"\b(?:arguments|parameters)\s*=\s*(['\"])", attributes)
    if not found:
        return None
    quote, body = found.group(1), attributes[found.end() :]
    end = body.rfind(quote)
    return body[:end] if end >= 0 else body


def _function_call(name: str, body: str, given: dict[str, str]) -> ToolCall:
    if "raw" in given:
        return ToolCall("", name, _arguments(given["raw"].strip("'\" ")))
    parameters = {m.group(1): _value(m.group(2)) for m in _PARAMETER.finditer(body)}
    if parameters:
        return ToolCall("", name, json.dumps(parameters, ensure_ascii=False))
    return ToolCall("", name, _arguments(body.strip()) if body.strip() else "{}")


def _value(text: str) -> JSON:
    try:
        loaded: JSON = json.loads(text)
        return loaded
    except json.JSONDecodeError:
        return text


def _mistral_calls(body: str, known: Known) -> list[ToolCall]:
    """`[{"name": …}]`, or `NAME[ARGS]{…}` (Mistral's newer templates), one or more."""
    calls = _json_calls(body)
    if calls:
        return calls
    found = []
    for chunk in body.split("[TOOL_CALLS]"):
        match = re.match(
            r"\s*([\w.\-]+)\s*(?:\[CALL_ID\]\s*\w+\s*)?(?:\[ARGS\])?\s*(\{.*)", chunk, re.S
        )
        if match:
            found.append(ToolCall("", match.group(1), _arguments(match.group(2))))
    return found or _pythonic_calls(body.strip(), known)


# ---------------------------------------------------------------- JSON and pythonic


def _json_calls(text: str) -> list[ToolCall]:
    """The calls in a JSON object or list (repaired when it is not quite JSON)."""
    text = text.strip()
    if not text or text[0] not in "{[":
        return []
    value = _loads(text)
    return _calls_in(value) if value is not None else []


def _loads(text: str) -> JSON:
    try:
        loaded: JSON = json.loads(text)
        return loaded
    except json.JSONDecodeError:
        pass
    try:
        value: JSON
        value, _ = json.JSONDecoder().raw_decode(text)  # a whole object, then more braces
        return value
    except json.JSONDecodeError:
        pass
    repaired = json_repair.repair_json(text, return_objects=True)
    return repaired if isinstance(repaired, dict | list) and repaired else None


def _calls_in(value: JSON) -> list[ToolCall]:
    if isinstance(value, list):
        calls = [call for item in value for call in _calls_in(item)]
        return calls if len(calls) == len(value) else []  # a list of calls, nothing else
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("tool_calls"), list):
        return _calls_in(value["tool_calls"])
    if isinstance(value.get("function"), dict):
        return _calls_in(value["function"])
    name = next(
        (
            named
            for k in ("name", "function", "tool", "tool_name")
            if isinstance(named := value.get(k), str)
        ),
        None,
    )
    if not name or not re.fullmatch(r"[\w.\-]+", name):
        return []
    arguments = next((value[k] for k in ARGUMENT_KEYS if k in value), {})
    if not isinstance(arguments, dict | str) and arguments is not None:
        return []
    extra = set(value) - {"name", "function", "tool", "tool_name", "id", "type", *ARGUMENT_KEYS}
    if extra:
        return []  # an object that merely has a name: data, not a call
    return [ToolCall(str(value.get("id") or ""), name, _arguments(arguments))]


def _arguments(raw: JSON) -> str:
    """Arguments as the JSON object text the tool loop parses."""
    if isinstance(raw, str):
        stripped = raw.strip()
        if not stripped:
            return "{}"
        value = _loads(stripped) if stripped[0] in "{[" else None
        if isinstance(value, dict):
            return json.dumps(value, ensure_ascii=False)
        return raw
    if raw is None:
        return "{}"
    return arguments_text(raw)


def _pythonic_calls(text: str, known: Known, *, dotted: bool = False) -> list[ToolCall]:
    """`name(a="v")`, `[name(a="v"), other()]` or `print(name(…))`, literals only."""
    text = text.strip().rstrip(";")
    if not text or not re.match(r"[\[\w]", text):
        return []
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return []
    nodes = tree.elts if isinstance(tree, ast.List | ast.Tuple) else [tree]
    calls = []
    for node in nodes:
        call = _python_call(node, known, dotted=dotted)
        if call is None:
            return []
        calls.append(call)
    return calls


def _python_call(node: ast.expr, known: Known, *, dotted: bool) -> ToolCall | None:
    if not isinstance(node, ast.Call):
        return None
    target = node.func
    if isinstance(target, ast.Name) and target.id == "print" and len(node.args) == 1:
        return _python_call(node.args[0], known, dotted=dotted)
    if isinstance(target, ast.Attribute) and dotted and isinstance(target.value, ast.Name):
        name = target.value.id  # Llama 3.1's `brave_search.call(query=…)`
    elif isinstance(target, ast.Name):
        name = target.id
    else:
        return None
    try:
        arguments: dict[str, object] = {
            k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg
        }
        positional = [ast.literal_eval(a) for a in node.args]
    except ValueError:
        return None
    order = list(known.get(name, ()))
    if len(positional) > len(order):
        return None
    arguments.update(zip(order, positional, strict=False))
    return ToolCall("", name, json.dumps(arguments, ensure_ascii=False))


# ---------------------------------------------------------------- where a call may start


def opener(text: str, known: Known, *, after: str = "") -> Verdict:
    """Whether `text` starts with the opening of a JSON or pythonic call: "yes", "no", or
    "maybe" (too short to tell). `after` is the character before it."""
    if not text:
        return "maybe"
    first = text[0]
    if first == "{":
        return _json_opener(text)
    if first == "[":
        rest = text[1:].lstrip()
        if not rest:
            return "maybe"
        if rest[0] == "{":
            return _json_opener(rest)
        return _name_opener(rest, known)
    if (first.isalpha() or first == "_") and not (after.isalnum() or after == "_"):
        return _name_opener(text, known)
    return "no"


def _json_opener(text: str) -> Verdict:
    rest = text.lstrip("{ \t\r\n")
    if not rest:
        return "maybe"
    quote = rest[0]
    if quote not in "\"'":
        return "no"
    close = rest.find(quote, 1)
    key = rest[1:] if close < 0 else rest[1:close]
    if close < 0:
        return "maybe" if any(k.startswith(key) for k in CALL_KEYS) else "no"
    return "yes" if key in CALL_KEYS else "no"


def _name_opener(text: str, known: Known) -> Verdict:
    match = re.match(r"[\w.]*", text)
    name = match.group(0) if match else ""
    rest = text[len(name) :].lstrip(" ")
    if not rest:
        return "maybe" if any(k.startswith(name) for k in known) else "no"
    return "yes" if name in known and rest[0] == "(" else "no"


def marker(text: str, *, echoes: bool = False, tools: Iterable[str] = ()) -> tuple[Verdict, int]:
    """Whether `text` starts with a marker never to show (`MARKERS`, or `ECHOES`, and a tag
    named after one of `tools`, as a model invents for their results): ("yes", its length),
    ("maybe", 0) while too short to tell, or ("no", 0)."""
    close = "]" if text[:1] == "[" else ">"
    end = text.find(close, 1, MARKER_LONGEST)
    if end >= 0:
        found = (ECHOES if echoes else MARKERS).match(text[: end + 1])
        if found and found.end() == end + 1:
            return "yes", end + 1
        named = _NAMED_TAG.match(text[: end + 1])
        return ("yes", end + 1) if echoes and named and named[1] in tools else ("no", 0)
    if len(text) >= MARKER_LONGEST:
        return "no", 0
    if close == "]":
        return (
            ("maybe", 0)
            if any(m.startswith(text) for m in ("[TOOL_CALLS]", "[/TOOL_CALLS]", "[ARGS]"))
            else ("no", 0)
        )
    opened = re.match(r"</?([|\w]*)(.*)", text, re.S)
    if opened is None:
        return ("maybe", 0) if text == "<" else ("no", 0)
    name, rest = opened.group(1).lower(), opened.group(2)
    names = (*MARKER_NAMES, *FIELD_TAGS, *tools) if echoes else MARKER_NAMES
    if not rest:
        return ("maybe", 0) if any(m.startswith(name) for m in names) else ("no", 0)
    tagged = FENCE_TAGS + tuple(tools) if echoes else FENCE_TAGS
    attributes = name in tagged and rest[0].isspace() and "<" not in rest
    return ("maybe", 0) if attributes else ("no", 0)


_NAMED_TAG = re.compile(r"</?(\w+)(?:\s[^<>]*)?/?>$")


def _balanced_end(text: str, start: int) -> int:
    """Where the bracketed structure opening at `start` closes (or the end of `text`)."""
    depth, quote, escaped = 0, "", False
    for at in range(start, len(text)):
        char = text[at]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "\"'":
            quote = char
        elif char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
            if depth <= 0:
                end = at + 1
                while end < len(text) and text[end] in "}])":  # doubled closing braces
                    end += 1
                return end
    return len(text)


# ---------------------------------------------------------------- streaming


class MarkupFilter:
    """Holds streamed text back while it may be a tool call, so none is ever shown.

    From a tag (`<tool_call>`, `<function…`, `[TOOL_CALLS]`…) on, everything waits for the
    end of the message. A fence, or a `{`, `[` or known tool name that opens like a call,
    waits until it closes: then it is a call (kept, never shown) or text (released).
    `finish` reads what was held and returns the calls and the text still to show.
    """

    def __init__(self, known: Known, *, speaker: str = "", echoes: bool = False) -> None:
        self.known = known
        self.echoes = echoes  # the model was shown Charlie's fences: their fields too
        # "Charlie:" before the answer: a small model copies the "name: text" of the turns
        self._prefix = f"{speaker}:" if speaker else ""
        self._pending = ""  # not yet shown: may open a call
        self._tagged = False  # a tag came: the rest of the message is held
        self._shown_any = False
        self._held: list[str] = []  # segments judged to be calls
        self.shown = ""

    def feed(self, text: str) -> str:
        self._pending += text
        if self._tagged:
            return ""
        visible = self._release()
        self.shown += visible
        self._shown_any |= bool(visible.strip())
        return visible

    def _release(self) -> str:
        out: list[str] = []
        while self._pending:
            if self._prefix and not (self._shown_any or "".join(out).strip()):
                start = self._pending.lstrip()
                if not start.startswith("<") or start.startswith(self._prefix[:1]):
                    if self._prefix.lower().startswith(start.lower()):
                        break  # too short to tell
                    if start.lower().startswith(self._prefix.lower()):
                        self._pending = start[len(self._prefix) :].lstrip()
                    self._prefix = ""
            at, verdict = self._candidate(self._pending)
            if at < 0:
                out.append(self._pending)
                self._pending = ""
                break
            out.append(self._pending[:at])
            self._pending = self._pending[at:]
            if verdict == "tag":
                self._tagged = True
                break
            if verdict == "maybe":
                break
            if verdict == "marker":
                _, size = marker(
                    self._pending[:MARKER_LONGEST], echoes=self.echoes, tools=self.known
                )
                self._pending = self._pending[size:]  # dropped: never shown
                continue
            end = self._closed_at(self._pending)
            if end < 0:
                break  # wait for it to close
            segment, self._pending = self._pending[:end], self._pending[end:]
            before = "".join(out)
            alone = not (self.shown + before).strip() and not self._pending.strip()
            if self._is_call(segment, alone=alone):
                self._held.append(segment)
            else:
                out.append(segment)
                # shown whole; go on after it
        return "".join(out)

    def _candidate(self, text: str) -> tuple[int, str]:
        """The first place in `text` where a call may start, and how sure: "tag", "yes"
        (a fence or an opener, to wait for), "maybe" (too short to tell); (-1, "")."""
        lowered = text.lower()
        for at in range(len(text)):
            char = text[at]
            if char in "<[":
                for tag in TAGS:
                    piece = lowered[at : at + len(tag)]
                    if piece == tag.lower():
                        return at, "tag"
                    if tag.lower().startswith(piece) and at + len(piece) == len(text):
                        return at, "maybe"
                in_code = text[at - 1 : at] == "`"
                verdict, _ = marker(
                    text[at : at + MARKER_LONGEST],
                    echoes=self.echoes and not in_code,
                    tools=self.known,
                )
                if verdict != "no":
                    return at, "marker" if verdict == "yes" else "maybe"
            if char == "`":
                piece = text[at : at + 3]
                if piece == FENCE:
                    return at, "yes"
                if FENCE.startswith(piece) and at + len(piece) == len(text):
                    return at, "maybe"
                continue
            if char in "{[" or char.isalpha() or char == "_":
                window = text[at : at + OPENER_WINDOW]
                verdict = opener(window, self.known, after=text[at - 1 : at])
                if verdict != "no":
                    return at, verdict
        return -1, ""

    def _closed_at(self, text: str) -> int:
        """Where the candidate at the start of `text` closes; -1 while it may go on (a
        structure closing at the very end may yet get a doubled brace)."""
        if text.startswith(FENCE):
            close = text.find(FENCE, len(FENCE))
            return -1 if close < 0 else close + len(FENCE)
        end = _balanced_end(text, 0)
        return end if end < len(text) else -1

    def _is_call(self, segment: str, *, alone: bool) -> bool:
        if segment.startswith(FENCE):
            return bool(_fenced_calls(segment, self.known, alone=alone, eager=self.echoes))
        return bool(_segment_calls(segment, self.known, alone=alone, eager=self.echoes))

    def finish(self) -> Reading:
        """The calls in what was held, and the text still to show."""
        held = "".join(self._held) + self._pending
        self._pending, self._held = "", []
        if not held:
            return Reading()
        return read(held, self.known, whole=not self._shown_any, echoes=self.echoes)
