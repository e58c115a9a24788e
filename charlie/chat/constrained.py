"""A constrained step of the tool loop (`charlie.chat.toolloop`): the JSON the model is held
to — which tool and its arguments, or `answer`, and in the first step what the person's
message is (`asks`, or only `tells`) — how it is shown in the instruction and read back, and
the order a small model is shown the tools in.
"""

from __future__ import annotations

import json
import re

from charlie.jsonvalue import JSONObject
from charlie.llm.client import strip_think
from charlie.tools.registry import META_TOOL, Registry, Tool

ANSWER = "answer"
ASKS, TELLS = "asks", "tells"  # what the person's message is, as the first step says
STEP_TOKENS = 256  # a step is a tool name and a few arguments


def step_format(
    tools: list[Tool], *, answer: bool = True, classify: bool = False
) -> dict[str, object]:
    """The `response_format` of a constrained step: one of `tools` with its arguments, or
    `answer` (each a branch of `anyOf`, so the arguments always fit the tool chosen); with
    `classify`, first what the person's message is: `asks`, or only `tells` — judged by the
    model, by meaning, in the request it makes anyway."""
    said: dict[str, object] = {"message": {"enum": [ASKS, TELLS]}} if classify else {}
    first = list(said)
    branches: list[dict[str, object]] = [
        {
            "type": "object",
            "properties": {**said, "tool": {"const": tool.name}, "arguments": tool.parameters},
            "required": [*first, "tool", "arguments"],
        }
        for tool in tools
    ]
    if answer:
        branches.append(
            {
                "type": "object",
                "properties": {**said, "tool": {"const": ANSWER}},
                "required": [*first, "tool"],
            }
        )
    return {
        "type": "json_schema",
        "json_schema": {"name": "step", "schema": {"anyOf": branches}},
    }


def step_shape(*, answer: bool, classify: bool) -> str:
    """The JSON a step is, as the instruction shows it."""
    said = '"message": "asks" or "tells", ' if classify else ""
    call = f'{{{said}"tool": "<tool name>", "arguments": {{...}}}}'
    return f'{{{said}"tool": "answer"}} or {call}' if answer else call


def read_step(content: str, names: set[str]) -> tuple[str, JSONObject, str] | None:
    """The step's tool, its arguments and what the message is (`asks` unless it says)."""
    try:
        data = json.loads(strip_think(content))
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    said = TELLS if data.get("message") == TELLS else ASKS
    name = data.get("tool")
    if name == ANSWER:
        return ANSWER, {}, said
    arguments = data.get("arguments") or {}
    if not isinstance(name, str) or name not in names or not isinstance(arguments, dict):
        return None
    return name, arguments, said


def call_text(name: str, arguments: JSONObject) -> str:
    """`date_add(start="2026-12-25", days=10)`."""
    shown = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items()
    )
    return f"{name}({shown})"


def ranked(tools: list[Tool], text: str) -> list[Tool]:
    """`tools`, those whose name and description share the most words with `text` first (a
    small model takes the first fitting tool it is shown); ties keep their order."""
    words = {stem(w) for w in re.findall(r"[a-z]{4,}", text.lower())}

    def shared(tool: Tool) -> int:
        about = re.findall(
            r"[a-z]{4,}", f"{tool.name} {tool.description}".lower().replace("_", " ")
        )
        return len(words & {stem(w) for w in about})

    return sorted(tools, key=shared, reverse=True)


def stem(word: str) -> str:
    """`word` without a common ending (`searching` → `search`), for `ranked`."""
    for ending in ("ions", "ion", "ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 4:
            return word[: -len(ending)]
    return word


def meta_tool(registry: Registry) -> Tool:
    """`load_tools` as a step may choose it."""
    schema = registry.meta_tool()["function"]
    return Tool(META_TOOL, "", schema["description"], schema["parameters"], lambda _: None)
