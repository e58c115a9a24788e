"""The decision step alone: which of a conversation's messages the model takes for decisions.

    CHARLIE_LLM_BASE_URL=http://127.0.0.1:8089/v1 .venv/bin/python \
        benchmarks/decision_step.py --part tune [--ids a,b] [--out F.json]

A fast look at one step of the steps-mode distillation (`charlie.memory.steps`), on the
conversations of the fidelity benchmark (`benchmarks/data/memory_fidelity/`): each
conversation is cut into batches of 5 messages, as a project distills, and the decision
step is asked about each batch with the messages before it as context. Nothing is stored
and nothing is judged afterwards — `memory_fidelity.py` runs the whole distillation end to
end. Counted, over the part:
- planted decisions taken (a decision's message, and the message that made a revision)
- trap sentences taken (ordinary talk with forget / drop / cancel …: want none)
- suggestions and questions planted as not decisions, taken (want none)
- the other person messages taken: errands, remarks, news, answers to what was asked
A message taken that is no plant is one more line a person deletes from memory.md, and one
more held decision a real change must be told apart from.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from memory_fidelity import EVERY, load_part

from charlie.config import load_settings
from charlie.conversations import ASSISTANT, Message
from charlie.llm.client import LLMClient
from charlie.memory import steps


def messages_of(plan: dict[str, Any]) -> list[Message]:
    """The conversation's lines as messages, numbered from 1 (their index + 1)."""
    return [
        Message(
            id=at + 1,
            role="assistant" if line["speaker"] == "Charlie" else "user",
            speaker=ASSISTANT if line["speaker"] == "Charlie" else line["speaker"],
            content=line["text"],
            created_at="2026-01-01T12:00:00+00:00",
        )
        for at, line in enumerate(plan["messages"])
    ]


def taken(plan: dict[str, Any], asker: steps.Asker) -> set[int]:
    """The indexes of the messages the decision step took for decisions, batch by batch."""
    shown = messages_of(plan)
    found: set[int] = set()
    for start in range(0, len(shown), EVERY):
        batch = shown[start : start + EVERY]
        earlier = steps.context(shown, start)
        settled = frozenset(i + 1 for i in found)
        taken = steps._decided(asker, batch, earlier, settled)
        found |= {m.id - 1 for t in taken for m in (t.message, *t.agreed)}
    return found


def score(plan: dict[str, Any], found: set[int]) -> dict[str, Any]:
    decided = {d["at"] for d in plan["decisions"]} | {r["decided_at"] for r in plan["revisions"]}
    changed = {r["changed_at"] for r in plan["revisions"]}
    traps = set(plan["traps"])
    ideas = {n["at"] for n in plan["not_decisions"]}
    people = {at for at, line in enumerate(plan["messages"]) if line["speaker"] != "Charlie"}
    other = people - decided - changed - traps - ideas
    return {
        "id": plan["id"],
        "decisions": [len(found & decided), len(decided)],
        "changes": [len(found & changed), len(changed)],
        "traps": [len(found & traps), len(traps)],
        "ideas": [len(found & ideas), len(ideas)],
        "other": [len(found & other), len(other)],
        "taken_other": [plan["messages"][at]["text"] for at in sorted(found & other)],
        "missed": [plan["messages"][at]["text"] for at in sorted((decided | changed) - found)],
    }


KEYS = ("decisions", "changes", "traps", "ideas", "other")


def chosen(parser: argparse.ArgumentParser, part: str, ids: str) -> list[dict[str, Any]]:
    """The part's conversations, or only those `ids` names (comma-separated)."""
    plans = load_part(part)
    if not ids:
        return plans
    wanted = ids.split(",")
    plans = [p for p in plans if p["id"] in wanted]
    if len(plans) != len(wanted):
        parser.error("--ids: unknown conversation")
    return plans


def report(scores: list[dict[str, Any]], keys: tuple[str, ...], out: Path) -> None:
    """Each count summed over the conversations, printed, and written to `out` with them."""
    summed = {k: [sum(s[k][0] for s in scores), sum(s[k][1] for s in scores)] for k in keys}
    print(" ".join(f"{k} {v[0]}/{v[1]}" for k, v in summed.items()))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"total": summed, "conversations": scores}, indent=1))
    print(f"wrote {out}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("tune", "heldout"), default="tune")
    parser.add_argument("--ids", default="", help="only these conversations, comma-separated")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/decision_step.json"))
    parser.add_argument("--merge", type=Path, nargs="+", help="put runs (--out) together")
    args = parser.parse_args()
    if args.merge:
        scores = [s for run in args.merge for s in json.loads(run.read_text())["conversations"]]
    else:
        plans = chosen(parser, args.part, args.ids)
        llm = LLMClient.from_settings(load_settings())
        scores = []
        for plan in plans:
            started = time.perf_counter()
            asker = steps.Asker(llm)
            scores.append(score(plan, taken(plan, asker)))
            s = scores[-1]
            print(
                f"{plan['id']:<30} decisions {s['decisions'][0]}/{s['decisions'][1]} "
                f"changes {s['changes'][0]}/{s['changes'][1]} traps {s['traps'][0]} "
                f"ideas {s['ideas'][0]} other {s['other'][0]}/{s['other'][1]} "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    report(scores, KEYS, args.out)


if __name__ == "__main__":
    main()
