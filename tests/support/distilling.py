"""Telling a distillation request from a chat request, and scripting the model's answer."""

from __future__ import annotations

import json
import re
from typing import Any

from llm_double import ErrorReply, Responder

from charlie.home import Home
from charlie.memory.steps import RECHECKS, SETTLES


def is_distillation(request: dict[str, Any]) -> bool:
    return str(request["messages"][0]["content"]).startswith("You maintain the long-term memory")


def is_step(request: dict[str, Any]) -> bool:
    """A constrained tool step: JSON held to the `step` schema."""
    response_format = request.get("response_format") or {}
    return (response_format.get("json_schema") or {}).get("name") == "step"


def distill_answer(
    summary: str = "Planning the kitchen.",
    decisions: tuple[str, ...] = ("Oak worktops",),
    quotes: tuple[tuple[str, str], ...] = (),
) -> str:
    return json.dumps(
        {
            "summary": summary,
            "decisions": list(decisions),
            "quotes": [{"speaker": s, "text": t} for s, t in quotes],
        }
    )


def naming_answer(request: dict[str, Any], **layers: Any) -> str:
    """`distill_answer(**layers)` whose decisions name the people's messages of the request,
    as a model that says where each decision came from."""
    told = str(request["messages"][-1]["content"]).split("New messages", 1)[-1]
    people = [
        int(n) for n, who in re.findall(r"^\[(\d+)\] ([^:]+):", told, re.M) if who != "Charlie"
    ]
    data = json.loads(distill_answer(**layers))
    data["decisions"] = [{"text": d, "messages": people} for d in data["decisions"]]
    return json.dumps(data)


STEP_PROMPTS = {
    "decision": "A message from a household's conversation about their plans. Which is it?",
    "change": "You compare an earlier decision of a household with a new message",
    "summary": "You keep the summary of a household's conversation",
    "quotes": "From a household's conversation, pick",
}


def step_of(request: dict[str, Any]) -> str | None:
    """Which step of a stepwise distillation a request is (`charlie.memory.steps`), by its
    instructions (a server refusing `response_format` gets the same ones), else None. The
    judge's second looks at a change (`steps.RECHECKS`) are the change step asked otherwise:
    "change" too, unless `rechecks` names them apart."""
    system = str(request["messages"][0]["content"])
    if system in RECHECKS:
        return "change"
    return next((name for name, start in STEP_PROMPTS.items() if system.startswith(start)), None)


def is_recheck(request: dict[str, Any]) -> bool:
    """A second look at a change the judge made (`steps.RECHECKS`)."""
    return str(request["messages"][0]["content"]) in RECHECKS


def judged(request: dict[str, Any]) -> str:
    """The message a decision or change step asks about (the text after its speaker)."""
    user = str(request["messages"][1]["content"])
    line = user.rsplit("\n", 1)[-1]
    return line.split(": ", 1)[1] if ": " in line else line


def earlier(request: dict[str, Any]) -> str:
    """The held decision a change step asks about."""
    user = str(request["messages"][1]["content"])
    return user.split("Earlier decision: ", 1)[1].split("\n", 1)[0]


def step_answer(request: dict[str, Any], quotable: str = "If it's not oak") -> str:
    """A sensible small model's answer to one step: decisions are what "decided", "let's go
    with" or "change of plan" say, a change of plan changes what it names, the summary says
    "Planning the kitchen.", and the message holding `quotable` is worth quoting."""
    step = step_of(request)
    if step == "decision":
        text = judged(request)
        decided = re.match(r"(?i)(we decided:? |let's go with |change of plan: )(.*)", text)
        what = decided.group(2).split(", not ")[0] if decided else ""
        return json.dumps({"kind": SETTLES if decided is not None else "only news", "what": what})
    if step == "change":  # the decision as it stands: the plan named, or the old one copied
        text = judged(request)
        if text.lower().startswith("change of plan: "):
            return json.dumps({"now": text[len("change of plan: ") :].split(", not ")[0]})
        return json.dumps({"now": earlier(request)})
    if step == "summary":
        return json.dumps({"summary": "Planning the kitchen."})
    if step == "quotes":
        told = str(request["messages"][1]["content"])
        numbers = [
            int(n)
            for n, text in re.findall(r"^\[(\d+)\] [^:]+: (.*)$", told, re.M)
            if quotable in text
        ]
        return json.dumps({"quotes": numbers})
    raise AssertionError(f"not a step of a stepwise distillation: {request['messages'][0]}")


def judge_says(changes: bool) -> Responder:
    """A model that answers only the question whether a message changes a held decision
    (with `changes`); anything else finds no scripted response, as the empty queue does."""

    def respond(request: dict[str, Any]) -> ErrorReply | str:
        if step_of(request) == "change":  # called off, or copied as it was
            return json.dumps({"now": "Called off." if changes else earlier(request)})
        return ErrorReply(500, "ScriptedLLMServer: no scripted response left")

    return respond


def last_refused(home: Home) -> str:
    """What the latest distillation refused, with why (its `refused_decisions`, as stored)."""
    row = home.db.execute(
        "SELECT refused_decisions FROM distillations ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return str(row[0])
