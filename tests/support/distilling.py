"""Telling a distillation request from a chat request, and scripting the model's answer."""

from __future__ import annotations

import json
import re
from typing import Any


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
