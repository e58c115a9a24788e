"""Tools the model can call: plain functions, grouped in categories, run behind guards.

A tool is a plain function whose first parameter is the `ToolContext`; its JSON schema
comes from the other parameters' type hints and defaults, its description from the
docstring (the first paragraph, plus an `Args:` section for each parameter). Categories
are loaded on demand: a turn starts with the `load_tools` meta-tool and whatever the
pre-suggestion pass chose, and the model asks for more.

Models call tools natively (OpenAI `tool_calls`) or in text; `charlie.llm.textcalls` reads every
text form and keeps such markup from ever reaching the person, and `charlie.chat.toolloop` runs
the calls.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import re
import time
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from charlie.conversations import Channel
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.jsonvalue import JSON, JSONObject
from charlie.llm.client import preview
from charlie.llm.messages import ParameterSchema, ParametersSchema, ToolSchema
from charlie.retrieval.recall import Recaller, recaller_for
from charlie.retrieval.search import Searcher
from charlie.retrieval.upkeep import searcher_for
from charlie.trace import Hit
from charlie.users import User

META_TOOL = "load_tools"
RESULT_CAP = 4000  # characters of a tool result fed back to the model
TOOL_TIMEOUT = 20.0  # seconds


class ToolError(CharlieError):
    """A tool could not do what was asked; the message goes back to the model."""


class WriteRefused(ToolError):
    """A write tool was stopped by the write policy (see `ToolContext.write_refusal`)."""


# ---------------------------------------------------------------- context and write policy


@dataclass
class ToolContext:
    """What a tool may touch: the data home, the channel and the person asking.

    Writes are confined here, whatever the model was told: a write tool writes only into the
    channel's own project (in a private channel, only the person's own private memory), only
    if the project's `write_tools` allows it, and, in a private channel, only while the
    answer has read nothing that other people wrote (`untrusted`).
    """

    home: Home
    channel: Channel
    user: User
    cited: list[str] = field(default_factory=list)  # note keys the answer drew on
    found: list[str] = field(default_factory=list)  # note keys search tools returned
    asked: int | None = None  # the message being answered: recall never offers it back
    extra_projects: list[str] = field(default_factory=list)  # projects switched to
    untrusted: list[str] = field(default_factory=list)  # what others wrote, read so far
    # Built on first use by this answer's tools and kept for its next calls.
    _searcher: Searcher | None = field(default=None, repr=False)
    _recaller: Recaller | None = field(default=None, repr=False)

    def searcher(self) -> Searcher:
        """The notes searcher; its index is re-checked against the files at most every 10 s."""
        if self._searcher is None:
            self._searcher = searcher_for(self.home)
        return self._searcher

    def forget_searcher(self) -> None:
        """A note changed: the next search of this answer builds its searcher again."""
        self._searcher = None

    def recaller(self) -> Recaller:
        """The searcher of earlier messages."""
        if self._recaller is None:
            self._recaller = recaller_for(self.home)
        return self._recaller

    def read_untrusted(self, source: str) -> None:
        """This answer has read text others wrote (a note, another project's memory)."""
        if source not in self.untrusted:
            self.untrusted.append(source)

    def write_refusal(self, tool: str) -> str | None:
        """Why write tool `tool` may not run now, or None when it may. (Each write tool also
        refuses a target outside the channel's own project itself.)"""
        project = self.channel.project
        if project is not None:
            allowed = project.config.write_tools
            if allowed is not None and tool not in allowed:
                return (
                    f"{tool} is not allowed in project {project.slug} "
                    "(its project.toml's write_tools does not name it)."
                )
            return None
        if self.untrusted:
            sources = ", ".join(self.untrusted[:3]) + ("…" if len(self.untrusted) > 3 else "")
            return (
                f"{tool} may not write to {self.user.name}'s private memory after this answer "
                f"read text other people wrote ({sources}); if {self.user.name} wants it "
                "recorded, they can ask for it in their next message."
            )
        return None


@dataclass(frozen=True)
class Tool:
    name: str
    category: str
    description: str
    parameters: ParametersSchema
    function: Callable[..., Any]
    writes: bool = False

    @classmethod
    def from_function(
        cls, function: Callable[..., Any], category: str, *, writes: bool = False
    ) -> Tool:
        doc = inspect.getdoc(function) or ""
        summary, arg_docs = _parse_docstring(doc)
        hints = typing.get_type_hints(function)
        properties: dict[str, ParameterSchema] = {}
        required: list[str] = []
        for position, (name, param) in enumerate(inspect.signature(function).parameters.items()):
            if position == 0:
                continue  # the ToolContext
            schema = _json_schema(hints[name])
            if name in arg_docs:
                schema["description"] = arg_docs[name]
            if param.default is inspect.Parameter.empty:
                required.append(name)
            else:
                schema["default"] = param.default
            properties[name] = schema
        parameters: ParametersSchema = {
            "type": "object",
            "properties": properties,
            "required": required,
        }
        return cls(function.__name__, category, summary, parameters, function, writes)

    def schema(self) -> ToolSchema:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def bind(self, arguments: JSONObject) -> dict[str, JSON]:
        """Check `arguments` against the signature; raise `ToolError` saying what is wrong."""
        props, required = self.parameters["properties"], self.parameters["required"]
        # null for an optional argument means "not given" (models and MCP clients send it)
        arguments = {k: v for k, v in arguments.items() if v is not None or k in required}
        unknown = sorted(set(arguments) - set(props))
        if unknown:
            raise ToolError(
                f"{self.name} has no argument {', '.join(unknown)}; it takes "
                f"{', '.join(props) or 'no arguments'}."
            )
        missing = [name for name in required if name not in arguments]
        if missing:
            raise ToolError(f"{self.name} needs the argument {', '.join(missing)}.")
        return {
            name: _coerce(self.name, name, props[name], value) for name, value in arguments.items()
        }


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    summary, _, rest = doc.partition("\n\nArgs:\n")
    args: dict[str, str] = {}
    for line in rest.splitlines():
        match = re.match(r"^\s+(\w+):\s*(.+)$", line)
        if match:
            args[match.group(1)] = match.group(2).strip()
    return " ".join(summary.split()), args


def _json_schema(hint: object) -> ParameterSchema:
    origin = typing.get_origin(hint)
    if origin is Literal:
        return {"type": "string", "enum": list(typing.get_args(hint))}
    if origin in (list, Sequence) or hint is list:
        (item,) = typing.get_args(hint) or (str,)
        return {"type": "array", "items": _json_schema(item)}
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _json_schema(options[0])
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if hint in simple:
        return {"type": simple[hint]}
    raise TypeError(f"no JSON schema for {hint!r}")


def _coerce(tool: str, name: str, schema: ParameterSchema, value: JSON) -> JSON:
    kind = schema["type"]
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "array": isinstance(value, list),
    }[kind]
    if kind == "integer" and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)  # small models often quote numbers
    if kind == "array" and isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if not ok:
        article = "an" if kind[:1] in "aeiou" else "a"
        raise ToolError(f"{tool}: argument {name} must be {article} {kind}, not {value!r}.")
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError(f"{tool}: argument {name} must be one of {', '.join(schema['enum'])}.")
    return value


# ---------------------------------------------------------------- registry


@dataclass(frozen=True)
class Category:
    name: str
    description: str
    cues: tuple[str, ...] = ()  # regular expressions that hint this category is useful


class Registry:
    """Tools by category. New categories plug in with `add`; the loop never changes."""

    def __init__(self) -> None:
        self.categories: dict[str, Category] = {}
        self.tools: dict[str, Tool] = {}

    def add(self, category: Category, tools: Iterable[Tool]) -> None:
        self.categories[category.name] = category
        for tool in tools:
            self.tools[tool.name] = tool

    def in_category(self, name: str) -> list[Tool]:
        return [tool for tool in self.tools.values() if tool.category == name]

    def meta_tool(self) -> ToolSchema:
        names = sorted(self.categories)
        listing = "; ".join(f"{c}: {self.categories[c].description}" for c in names)
        return {
            "type": "function",
            "function": {
                "name": META_TOOL,
                "description": "Make a category of tools available for your next step. "
                f"Categories — {listing}",
                "parameters": {
                    "type": "object",
                    "properties": {"category": {"type": "string", "enum": names}},
                    "required": ["category"],
                },
            },
        }

    def suggest(self, text: str) -> list[str]:
        """The categories whose cues appear in `text` (a hint for the model, no LLM call)."""
        lowered = text.lower()
        return [
            name
            for name, category in self.categories.items()
            if any(re.search(cue, lowered) for cue in category.cues)
        ]


# ---------------------------------------------------------------- running


@dataclass(frozen=True)
class Result:
    """What every tool gives back: the text for the model, a summary for the person, and for
    a search what it found (`hits`, best first) and how many things (`count`)."""

    text: str
    summary: str = ""  # empty: a preview of the text
    hits: tuple[Hit, ...] | None = None
    count: int | None = None


@dataclass
class Outcome:
    """What one call gave back: text for the model, a summary (and any hits and count)
    for the person."""

    content: str
    summary: str
    error: bool = False
    seconds: float = 0.0
    hits: tuple[Hit, ...] | None = None
    count: int | None = None
    guard: str = ""  # the guard that stopped the call: "timeout", "write_refused"


def run_tool(
    tool: Tool, context: ToolContext, arguments: JSONObject, timeout: float | None = None
) -> Outcome:
    """Run `tool` with a time limit; a failure becomes an error outcome, never a crash: a
    `CharlieError` (told to the model as it is) or an `OSError` (a file it could not use).

    A tool that overruns is abandoned (its thread cannot be killed and finishes on its own);
    the model is told, and the answer goes on. A write tool runs only if the context's write
    policy allows it (`ToolContext.write_refusal`), whoever asked for it.
    """
    timeout = TOOL_TIMEOUT if timeout is None else timeout
    started = time.perf_counter()
    refusal = context.write_refusal(tool.name) if tool.writes else None
    if refusal is not None:
        return _refused(refusal, started)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        bound = tool.bind(arguments)
        future = pool.submit(tool.function, context, **bound)
        value = future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        return Outcome(
            f"Error: {tool.name} took longer than {timeout:g} s and was abandoned.",
            f"timed out after {timeout:g} s",
            error=True,
            seconds=time.perf_counter() - started,
            guard="timeout",
        )
    except WriteRefused as exc:
        return _refused(str(exc), started)
    except CharlieError as exc:
        return Outcome(f"Error: {exc}", f"error: {exc}", True, time.perf_counter() - started)
    except OSError as exc:  # a file the tool could not use: the answer goes on without it
        return _failed(f"{tool.name} could not use a file ({exc.strerror or exc})", started)
    finally:
        pool.shutdown(wait=False)
    if not isinstance(value, Result):  # a tool's bug, told as one: the answer goes on
        return _failed(f"{tool.name} gave back {type(value).__name__}, not a Result", started)
    text = value.text
    if len(text) > RESULT_CAP:
        text = text[:RESULT_CAP] + f"\n…[cut: {len(text) - RESULT_CAP} more characters]"
    seconds = time.perf_counter() - started
    return Outcome(
        text, value.summary or preview(text, 80), False, seconds, value.hits, value.count
    )


def _failed(problem: str, started: float) -> Outcome:
    return Outcome(f"Error: {problem}.", f"error: {problem}", True, time.perf_counter() - started)


def _refused(reason: str, started: float) -> Outcome:
    return Outcome(
        f"Refused: {reason}",
        f"refused: {reason}",
        error=True,
        seconds=time.perf_counter() - started,
        guard="write_refused",
    )
