"""The judge of a change alone: does the model rewrite a decision when a message changes it,
and leave it be when a message only talks about it?

    CHARLIE_LLM_BASE_URL=http://127.0.0.1:8089/v1 .venv/bin/python \
        benchmarks/judge_step.py --part tune [--ids a,b] [--out F.json]

A fast look at one step of the distillation (`charlie.memory.steps.judge`), on the
conversations of the fidelity benchmark (`benchmarks/data/memory_fidelity/`). Each planted
decision is held in its person's words, as the decision step holds it; then the judge is
shown, beside it:
- the message that revises it (the planted revision): its rewrite should change it;
- each trap sentence of the conversation (ordinary talk with forget / drop / cancel …), beside
  each planted decision held by then that it would be asked about (`decisions.candidates`:
  a word in common, or a value moved): its rewrite should change nothing.
Counted: revisions whose rewrite changed the decision, and trap-and-decision pairs whose
rewrite did — the judge with its second looks (`steps.RECHECKS`), before the checks
`charlie.memory.decisions.changes` makes on a rewrite (a value nobody said, a copy of the
message, one change per message): those catch some of its mistakes, and
`memory_fidelity.py` runs them all end to end.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from decision_step import chosen, messages_of, report

from charlie.config import load_settings
from charlie.conversations import Message
from charlie.errors import DistillationError
from charlie.llm.client import LLMClient
from charlie.memory import decisions, steps
from charlie.memory.layers import DISTILLED, Decision


def held(message: Message) -> Decision:
    return Decision(steps._cut(message.content), by=DISTILLED, sources=(message.id,))


def judged(judge: decisions.Judge, change: decisions.Change) -> str | None:
    try:
        return judge(change)
    except (DistillationError, decisions.Kept):  # unusable, or a second look kept it
        return None


def score(plan: dict[str, Any], judge: decisions.Judge) -> dict[str, Any]:
    shown = messages_of(plan)
    names = frozenset(decisions.words(" ".join(set(plan["speakers"]))))
    revised, wrong = [], []
    for revision in plan["revisions"]:
        old, at = held(shown[revision["decided_at"]]), revision["changed_at"]
        change = decisions.Change(
            old, shown[at], decisions.asked_before(shown[at], shown), "", names
        )
        now = judged(judge, change)
        revised.append({"old": old.text, "message": shown[at].content, "now": now})
    planted = [d["at"] for d in plan["decisions"]] + [r["decided_at"] for r in plan["revisions"]]
    pairs = 0
    for trap in plan["traps"]:
        before = [held(shown[at]) for at in planted if at < trap]  # held when it is said
        for old in decisions.candidates(shown[trap].content, before, names):
            pairs += 1  # a decision it would be asked about: sharing a word, or a value moved
            change = decisions.Change(
                old, shown[trap], decisions.asked_before(shown[trap], shown), "", names
            )
            now = judged(judge, change)
            if now is not None:
                wrong.append({"old": old.text, "trap": shown[trap].content, "now": now})
    return {
        "id": plan["id"],
        "revisions": [sum(r["now"] is not None for r in revised), len(revised)],
        "traps": [len(wrong), pairs],
        "revised": revised,
        "wrong": wrong,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("tune", "heldout"), default="tune")
    parser.add_argument("--ids", default="", help="only these conversations, comma-separated")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/judge_step.json"))
    args = parser.parse_args()
    plans = chosen(parser, args.part, args.ids)
    judge = steps.judge(steps.Asker(LLMClient.from_settings(load_settings())))
    scores = []
    for plan in plans:
        started = time.perf_counter()
        s = score(plan, judge)
        scores.append(s)
        print(
            f"{plan['id']:<30} revisions {s['revisions'][0]}/{s['revisions'][1]} "
            f"trap pairs changed {s['traps'][0]}/{s['traps'][1]} "
            f"({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    report(scores, ("revisions", "traps"), args.out)


if __name__ == "__main__":
    main()
