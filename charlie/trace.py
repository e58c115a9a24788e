"""The tool trace of an answer: each step the tool loop took, as a typed record.

One contract for every consumer: the web stream (the `trace` server-sent event), the trace
stored with a reply (`messages.trace`), the Discord and CLI lines, and the PWA's
`trace.js`. A step becomes JSON with `to_json` — an object whose `type` names the kind of
step, with every field of that kind present — and is read back with `from_json`. A reader
that meets a kind it does not know fails loudly (`UnknownStep` here, a console error in
the PWA) rather than guessing.

Traces stored before hits were recorded (no `hits`/`count`, `tools` as one string) are
read by the same `from_json`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal, get_args

from charlie.jsonvalue import JSONObject

Guard = Literal[
    "max_iterations",  # the round limit was reached; the model must answer now
    "ignored_calls",  # tool calls after the final-answer request were ignored
    "bad_arguments",  # the arguments were not a JSON object
    "duplicate_call",  # the same call twice in one answer
    "unknown_tool",  # a tool that is not loaded
    "write_not_allowed",  # a write tool this project does not allow
    "write_refused",  # a write the channel's write policy refused when the tool ran
    "timeout",  # the tool ran past its time limit
    "unreadable_call",  # the model wrote a call Charlie could not read; it was asked again
    "not_an_answer",  # the reply was a tool's note, the prompt, or an earlier reply again
]
ToolMode = Literal["native", "text", "constrained"]
By = Literal["model", "charlie"]
GUARDS: tuple[str, ...] = get_args(Guard)


class UnknownStep(ValueError):
    """JSON that is not a trace step this version of Charlie knows (a bug, or a trace
    written by a newer Charlie)."""


@dataclass(frozen=True)
class Hit:
    """A note a search found: its key ("project/name"), title, score and a snippet."""

    key: str
    title: str
    score: float
    snippet: str


@dataclass(frozen=True)
class Preloaded:
    """The tool categories pre-loaded from the person's message, before the model spoke."""

    type: ClassVar[str] = "suggested"
    categories: tuple[str, ...]


@dataclass(frozen=True)
class Loaded:
    """The model loaded a category of tools with `load_tools` (`ok` is false for a
    category that does not exist)."""

    type: ClassVar[str] = "load"
    category: str
    ok: bool
    tools: tuple[str, ...] = ()
    ms: float = 0.0


@dataclass(frozen=True)
class Called:
    """A tool call: run (`ok`), failed, or refused before it ran — then `guard` says why.

    `arguments` is the JSON object the model sent, or its raw text when that was not a
    JSON object. `hits` is what a search found, best first; `count` how many things the
    tool found (None for tools that find nothing). `by` says who asked for it: the model, or
    Charlie itself (its own look-up before the model answers).
    """

    type: ClassVar[str] = "tool_call"
    name: str
    arguments: JSONObject | str
    ok: bool
    summary: str
    ms: float = 0.0
    writes: bool = False
    guard: Guard | None = None
    hits: tuple[Hit, ...] | None = None
    count: int | None = None
    by: By = "model"


@dataclass(frozen=True)
class Moded:
    """How this answer talks to the model about tools (`charlie.llm.toolmode`), and why:
    native calls, calls written as text, or constrained JSON steps."""

    type: ClassVar[str] = "mode"
    mode: ToolMode
    reason: str


@dataclass(frozen=True)
class Stopped:
    """A guard ended or cut short tool use for this answer."""

    type: ClassVar[str] = "guard"
    guard: Guard
    detail: str


Step = Preloaded | Loaded | Called | Moded | Stopped
KINDS = {kind.type: kind for kind in (Preloaded, Loaded, Called, Moded, Stopped)}
MODES: tuple[str, ...] = get_args(ToolMode)


def to_json(step: Step) -> dict[str, Any]:
    """The step as JSON: `type` first, then every field of its kind (None where unset)."""
    fields = asdict(step)
    for name, value in fields.items():
        if isinstance(value, tuple):
            fields[name] = list(value)
    return {"type": step.type, **fields}


def from_json(data: Mapping[str, Any]) -> Step:
    """Read a step written by `to_json`, or by a Charlie from before hits were recorded."""
    kind = KINDS.get(str(data.get("type")))
    if kind is None:
        raise UnknownStep(f"unknown trace step type {data.get('type')!r}: {dict(data)}")
    try:
        if kind is Preloaded:
            return Preloaded(tuple(data["categories"]))
        if kind is Loaded:
            tools = data.get("tools") or ()
            if isinstance(tools, str):  # stored before names were a list: "now, date_add"
                tools = tools.split(", ")
            return Loaded(
                str(data["category"]), bool(data["ok"]), tuple(tools), data.get("ms", 0.0)
            )
        if kind is Called:
            hits = data.get("hits")
            return Called(
                name=str(data["name"]),
                arguments=data["arguments"],
                ok=bool(data["ok"]),
                summary=str(data.get("summary", "")),
                ms=data.get("ms", 0.0),
                writes=bool(data.get("writes", False)),
                guard=None if data.get("guard") is None else as_guard(data["guard"]),
                hits=None if hits is None else tuple(Hit(**hit) for hit in hits),
                count=data.get("count"),
                by="charlie" if data.get("by") == "charlie" else "model",
            )
        if kind is Moded:
            mode = str(data["mode"])
            if mode not in MODES:
                raise UnknownStep(f"unknown tool mode {mode!r}: {dict(data)}")
            return Moded(mode, str(data.get("reason", "")))  # type: ignore[arg-type]
        return Stopped(as_guard(data["guard"]), str(data.get("detail", "")))
    except (KeyError, TypeError) as exc:
        raise UnknownStep(f"a {kind.type} trace step without {exc}: {dict(data)}") from exc


def steps_to_json(steps: Sequence[Step]) -> list[dict[str, Any]]:
    return [to_json(step) for step in steps]


def steps_from_json(data: Sequence[Mapping[str, Any]]) -> list[Step]:
    return [from_json(item) for item in data]


def as_guard(value: Any) -> Guard:
    """`value` as a guard's name; `UnknownStep` if no guard has that name."""
    if value not in GUARDS:
        raise UnknownStep(f"unknown trace guard {value!r}")
    guard: Guard = value
    return guard
