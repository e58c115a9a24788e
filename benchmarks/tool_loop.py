"""Tool-loop benchmark: how well the pre-suggestion guesses, and what a loop iteration costs.

Two figures of the guarded tool loop (`charlie.chat.toolloop.ToolLoop`):

1. Pre-suggestion quality. `toolkit.registry().suggest(text)` picks tool categories from
   regular-expression cues before the first model call. Over the hand-labelled prompts of
   `benchmarks/prompts/tool_prompts.jsonl` (household questions over the notes folder
   `benchmarks/prompts/notes/`), it reports per-category and overall precision and recall,
   the share of prompts where a suggested category is not needed (its tool schemas ride in
   every request of the turn for nothing) and where a needed one is missed (the model must
   spend a round trip on `load_tools`), and every prompt where the cues were wrong, with the
   cue that fired. "Needed" is the hand label of what a good model would use: no real model
   is run here, so "the category the model then uses" is approximated by those labels.

2. Loop overhead per iteration, excluding LLM time. `chat.turn` is driven through scripted
   multi-iteration answers (search_notes -> read_note -> answer; load_tools first; now ->
   date_add; switch_project; record_decision; a plain answer) against the scripted
   OpenAI-compatible double of `tests/llm_double.py`, run in a child process as in
   `benchmarks/turns.py`, over a data home holding the notes folder, indexed with the
   packaged LocalEmbedder. Per turn: wall time minus the time spent inside
   `LLMClient.stream`; per iteration type: the loop's own time from the start of one model
   call to the start of the next (stream filtering, tool run, trace, message assembly).
   It runs in two modes:
   - `warm`: Charlie as it is: the embedding model and the in-memory vectors live in
     `home.shared` (loaded once per process); each answer builds a light Index/Searcher
     and re-checks the note files, so after warm-up no turn loads the model.
   - `cold`: `home.shared` is emptied before every turn (outside the timing), so every
     turn loads the embedding model and the vectors again: what a turn cost when the
     searcher was built from scratch once per answer, and what a caller still pays that
     opens a Home per message without passing `shared` (the one-shot `charlie chat "..."`
     pays it with its process start).
   It also times the pieces of building a searcher, to show where the cold cost goes.

    .venv/bin/python benchmarks/tool_loop.py [--turns 280] [--warmup 16] [--mode both]

Prints tables, writes benchmarks/out/tool_loop.json (git-ignored) and, with matplotlib,
docs/benchmarks/tool-loop-iterations.png. `--profile` runs cProfile around the measured
turns of the `--mode` given (its timings are inflated, so it writes no results);
`--suggest-only` runs part 1 alone (no model, a fraction of a second).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import multiprocessing
import os
import pstats
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from support import machine, percentile

from charlie import conversations
from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.conversations import Channel, private_channel, shared_channel
from charlie.home import Home
from charlie.llm.client import Completion, Delta, LLMClient
from charlie.llm.messages import ChatMessage, ToolSchema
from charlie.notes.files import notes_dir
from charlie.projects import create_project, get_project
from charlie.retrieval import embeddings
from charlie.retrieval.embeddings import MINILM_MODEL, MINILM_TOKENIZER, LocalEmbedder
from charlie.retrieval.index import Index
from charlie.retrieval.search import Searcher
from charlie.tools import builtin as toolkit
from charlie.tools.registry import Registry, ToolContext, run_tool
from charlie.trace import to_json
from charlie.users import User, ensure_user

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
PROMPTS = ROOT / "benchmarks" / "prompts" / "tool_prompts.jsonl"
NOTES = ROOT / "benchmarks" / "prompts" / "notes"
DEFAULT_OUT = ROOT / "benchmarks" / "out" / "tool_loop.json"
DEFAULT_PLOT = ROOT / "docs" / "benchmarks" / "tool-loop-iterations.png"
MODEL = "test-model"
PROJECT_NAMES = {"auth": "Auth service", "kitchen": "Kitchen renovation", "trip": "Portugal trip"}
DISTILL_EVERY = 4  # messages; marked distilled then, without an LLM call (a private
# channel distils every 5, so a turn never reaches a real distillation)


def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "min": min(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "mean": sum(values) / len(values),
        "max": max(values),
    }


# ============================================================== 1. pre-suggestion quality


@dataclass(frozen=True)
class Prompt:
    id: str
    channel: str  # the project slug the question is asked in, or "private"
    prompt: str
    needs: frozenset[str]
    why: str


def load_prompts(path: Path, registry: Registry) -> list[Prompt]:
    prompts: list[Prompt] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        data = json.loads(line)
        unknown = set(data["needs"]) - set(registry.categories)
        if unknown:
            raise SystemExit(f"{path}:{number}: unknown categories {sorted(unknown)}")
        prompts.append(
            Prompt(
                data["id"],
                data.get("channel", ""),
                data["prompt"],
                frozenset(data["needs"]),
                data.get("why", ""),
            )
        )
    if len({p.id for p in prompts}) != len(prompts):
        raise SystemExit(f"{path}: duplicate ids")
    return prompts


def fired_cues(registry: Registry, category: str, text: str) -> list[str]:
    """The cues of `category` that match `text` (as `Registry.suggest` lowercases it)."""
    lowered = text.lower()
    return [cue for cue in registry.categories[category].cues if re.search(cue, lowered)]


def score(
    prompts: list[Prompt], registry: Registry, suggest: Callable[[str], list[str]]
) -> dict[str, Any]:
    """Precision / recall of `suggest` against the labels, per category and overall."""
    rows = []
    for p in prompts:
        suggested = set(suggest(p.prompt))
        rows.append(
            {
                "id": p.id,
                "channel": p.channel,
                "prompt": p.prompt,
                "needs": sorted(p.needs),
                "suggested": sorted(suggested),
                "false_alarms": sorted(suggested - p.needs),
                "misses": sorted(p.needs - suggested),
                "why": p.why,
            }
        )

    def ratio(a: int, b: int) -> float | None:
        return a / b if b else None

    categories: dict[str, dict[str, Any]] = {}
    for name in registry.categories:
        tp = sum(1 for r in rows if name in r["suggested"] and name in r["needs"])
        fp = sum(1 for r in rows if name in r["false_alarms"])
        fn = sum(1 for r in rows if name in r["misses"])
        categories[name] = {
            "needed": tp + fn,
            "suggested": tp + fp,
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "precision": ratio(tp, tp + fp),
            "recall": ratio(tp, tp + fn),
        }
    tp = sum(c["tp"] for c in categories.values())
    fp = sum(c["fp"] for c in categories.values())
    fn = sum(c["fn"] for c in categories.values())
    n = len(rows)
    no_tool = [r for r in rows if not r["needs"]]
    return {
        "prompts": n,
        "prompts_needing_no_tool": len(no_tool),
        "categories": categories,
        "overall": {
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "precision": ratio(tp, tp + fp),
            "recall": ratio(tp, tp + fn),
        },
        "rate_any_false_alarm": sum(1 for r in rows if r["false_alarms"]) / n,
        "rate_any_miss": sum(1 for r in rows if r["misses"]) / n,
        "rate_exact": sum(1 for r in rows if not r["false_alarms"] and not r["misses"]) / n,
        "rate_no_tool_kept_clean": (
            sum(1 for r in no_tool if not r["suggested"]) / len(no_tool) if no_tool else None
        ),
        "rows": rows,
    }


def cue_attribution(registry: Registry, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For every cue: how often it fired on a prompt needing its category, and not."""
    tally: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        for category in registry.categories:
            for cue in fired_cues(registry, category, row["prompt"]):
                entry = tally.setdefault(
                    (category, cue), {"category": category, "cue": cue, "right": [], "wrong": []}
                )
                entry["right" if category in row["needs"] else "wrong"].append(row["id"])
    return sorted(tally.values(), key=lambda e: (-len(e["wrong"]), e["category"], e["cue"]))


def schema_tokens(registry: Registry) -> dict[str, int]:
    """Tokens (chars / 4) each category's tool schemas add to every request of a turn."""
    sizes = {
        name: -(-len(json.dumps([t.schema() for t in registry.in_category(name)])) // 4)
        for name in registry.categories
    }
    sizes["load_tools (always sent)"] = -(-len(json.dumps(registry.meta_tool())) // 4)
    return sizes


def suggest_seconds(registry: Registry, prompts: list[Prompt], rounds: int = 200) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        for p in prompts:
            registry.suggest(p.prompt)
    return (time.perf_counter() - started) / (rounds * len(prompts))


def suggestion_quality(path: Path) -> dict[str, Any]:
    registry = toolkit.registry()
    prompts = load_prompts(path, registry)
    shipped = score(prompts, registry, registry.suggest)
    for row in shipped["rows"]:
        row["cues"] = {name: fired_cues(registry, name, row["prompt"]) for name in row["suggested"]}

    def memory_always(text: str) -> list[str]:
        return sorted({*registry.suggest(text), "memory"})

    what_if = score(prompts, registry, memory_always)
    del what_if["rows"]
    return {
        "prompt_file": str(path.relative_to(ROOT)),
        "shipped": shipped,
        "cues": cue_attribution(registry, shipped["rows"]),
        "what_if_memory_always": what_if,
        "schema_tokens": schema_tokens(registry),
        "suggest_us": suggest_seconds(registry, prompts) * 1e6,
    }


def _pct(value: float | None) -> str:
    return "   -" if value is None else f"{100 * value:4.0f}%"


def report_suggestions(data: dict[str, Any]) -> None:
    shipped = data["shipped"]
    print(
        f"\nPre-suggestion vs hand labels: {shipped['prompts']} prompts "
        f"({shipped['prompts_needing_no_tool']} need no tool), {data['prompt_file']}"
    )
    print(
        f"{'category':<10} {'needed':>6} {'sugg.':>6} {'tp':>4} {'fp':>4} {'fn':>4} "
        f"{'prec.':>6} {'recall':>6}"
    )
    for name, c in [*shipped["categories"].items(), ("overall", shipped["overall"])]:
        needed = c.get("needed", c["tp"] + c["fn"])
        suggested = c.get("suggested", c["tp"] + c["fp"])
        print(
            f"{name:<10} {needed:>6} {suggested:>6} {c['tp']:>4} {c['fp']:>4} {c['fn']:>4} "
            f"{_pct(c['precision']):>6} {_pct(c['recall']):>6}"
        )
    print(
        f"prompts with a suggested category not needed: {_pct(shipped['rate_any_false_alarm'])}"
        f"; with a needed category missed: {_pct(shipped['rate_any_miss'])}"
        f"; exactly right: {_pct(shipped['rate_exact'])}"
        f"; no-tool prompts left with no suggestion: {_pct(shipped['rate_no_tool_kept_clean'])}"
    )
    print("\nWhere the cues were wrong (+x: suggested, not needed; -x: needed, missed)")
    for row in shipped["rows"]:
        if not row["false_alarms"] and not row["misses"]:
            continue
        marks = [f"+{c}" for c in row["false_alarms"]] + [f"-{c}" for c in row["misses"]]
        fired = "; ".join(
            f"{c}: {' '.join(row['cues'][c])}" for c in row["false_alarms"] if row["cues"].get(c)
        )
        print(f"  {row['id']:<4} {' '.join(marks):<24} {row['prompt']}")
        if fired:
            print(f"       {'':<24} fired: {fired}")
    print("\nCues that fired on prompts not needing their category")
    for entry in data["cues"]:
        if entry["wrong"]:
            print(
                f"  {entry['category']:<9} {entry['cue']:<22} wrong {len(entry['wrong']):>2} "
                f"right {len(entry['right']):>2}  ({' '.join(entry['wrong'])})"
            )
    what_if = data["what_if_memory_always"]
    print(
        f"\nWhat if memory were always loaded: precision {_pct(what_if['overall']['precision'])}"
        f", recall {_pct(what_if['overall']['recall'])}, prompts with a miss "
        f"{_pct(what_if['rate_any_miss'])}, with a false alarm "
        f"{_pct(what_if['rate_any_false_alarm'])}"
    )
    sizes = ", ".join(f"{k} {v}" for k, v in data["schema_tokens"].items())
    print(f"Tool schema tokens per request (chars/4): {sizes}")
    print(f"suggest() takes {data['suggest_us']:.1f} us per prompt")


# ============================================================== 2. loop overhead

Step = tuple[str, Any]  # ("tools", [(name, arguments), ...]) or ("reply", text)


@dataclass(frozen=True)
class Scenario:
    name: str
    channel: str
    prompt: str
    steps: Callable[[int], list[Step]]  # the model's answers, given the turn number


REPLY = (
    "Here is what I found. The tiles are white metro tiles, 10 by 20 cm, matte, and the area "
    "is 6.5 square metres, so with ten percent extra you need about 7.2 square metres. "
    "TegelHuis delivers about three weeks after the order."
)


def answer(turn: int) -> str:
    """The reply of turn `turn`: never word for word an earlier one (Charlie asks again for
    a reply that only repeats one)."""
    return f"{REPLY} (Turn {turn}.)"


def _today() -> str:
    return f"{datetime.now(UTC):%Y-%m-%d}"


SCENARIOS = (
    Scenario(
        "search_read",
        "kitchen",
        "What do my notes say about the tiles we need?",
        lambda n: [
            ("tools", [("search_notes", {"query": "wall tiles area square metres"})]),
            ("tools", [("read_note", {"note": "kitchen/tiles"})]),
            ("reply", answer(n)),
        ],
    ),
    Scenario(
        "load_search_read",
        "auth",
        "How long do refresh tokens live?",  # suggests time, needs memory
        lambda n: [
            ("tools", [("load_tools", {"category": "memory"})]),
            ("tools", [("search_notes", {"query": "refresh token lifetime"})]),
            ("tools", [("read_note", {"note": "auth/jwt-refresh-tokens"})]),
            ("reply", answer(n)),
        ],
    ),
    Scenario(
        "dates",
        "trip",
        "What date is 40 days from today?",
        lambda n: [
            ("tools", [("now", {})]),
            ("tools", [("date_add", {"start": _today(), "days": 40})]),
            ("reply", answer(n)),
        ],
    ),
    Scenario(
        "memory",
        "kitchen",
        "Summarise where the kitchen renovation stands.",
        lambda n: [
            ("tools", [("read_memory", {"layer": "all"})]),
            ("tools", [("search_notes", {"query": "kitchen dates budget status"})]),
            ("reply", answer(n)),
        ],
    ),
    Scenario(
        "cross_project",
        "kitchen",
        "What did we decide in the auth project about session timeouts?",
        lambda n: [
            ("tools", [("switch_project", {"project": "auth"})]),
            ("tools", [("search_notes", {"query": "session idle timeout"})]),
            ("tools", [("read_note", {"note": "auth/session-cookies"})]),
            ("reply", answer(n)),
        ],
    ),
    Scenario(
        "write",
        "auth",
        "We'll use EdDSA for the signing keys in the new service too, write that down.",
        lambda n: [
            ("tools", [("record_decision", {"decision": f"Service {n} signs with EdDSA."})]),
            ("reply", answer(n)),
        ],
    ),
    Scenario(
        "list_projects",
        "private",
        "Which projects do we have going on?",
        lambda n: [("tools", [("list_projects", {})]), ("reply", answer(n))],
    ),
    Scenario("plain", "trip", "Good morning Charlie!", lambda n: [("reply", answer(n))]),
)


def serve(conn: Connection) -> None:
    """Child process: the scripted model, fed each turn's answers over the pipe."""
    sys.path.insert(0, str(TESTS))
    from llm_double import ScriptedLLMServer

    with ScriptedLLMServer(model=MODEL) as server:
        conn.send(server.base_url)
        while True:
            command, payload = conn.recv()
            if command == "stop":
                break
            left = server.pending  # must be 0: the last turn used exactly its script
            for kind, body in payload:
                if kind == "tools":
                    server.tool_calls(body)
                else:
                    server.reply(body)
            conn.send(left)
        conn.send(
            {"requests": len(server.requests), "errors": [repr(e) for e in server.handler_errors]}
        )


@dataclass
class Call:
    start: float = 0.0  # when the loop first asked the stream for an item
    end: float = 0.0  # when the stream ended
    llm: float = 0.0  # seconds spent inside the client's own generator


class TimedLLM(LLMClient):
    """An `LLMClient` that times each streamed call; distillation is not expected here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[Call] = []

    def stream(
        self,
        messages: list[ChatMessage],
        *,
        tools: list[ToolSchema] | None = None,
        temperature: float | None = None,
    ) -> Generator[Delta | Completion]:
        inner = super().stream(messages, tools=tools, temperature=temperature)
        call = Call(start=time.perf_counter())
        self.calls.append(call)
        while True:
            started = time.perf_counter()
            try:
                item = next(inner)
            except StopIteration:
                call.end = time.perf_counter()
                call.llm += call.end - started
                return
            call.llm += time.perf_counter() - started
            yield item

    def chat(self, messages: list[ChatMessage], **kwargs: Any) -> Completion:
        raise AssertionError("no distillation call is expected in this benchmark")


@dataclass
class TurnRecord:
    turn: int
    scenario: str
    suggested: list[str]
    iterations: int
    wall_ms: float
    llm_ms: float
    overhead_ms: float
    per_iteration_ms: float  # overhead / model calls
    setup_ms: float  # before the first model call: store the message, build the context
    steps: list[tuple[str, float]]  # (iteration kind, the loop's own ms) per model call
    to_reply_ms: float  # after the last model call until the Reply event: store the reply
    after_reply_ms: float  # suggested notes (the searcher) and the distillation check
    warmup: bool = False


def build_home(home_dir: Path) -> tuple[Home, dict[str, Channel], User]:
    """A data home with the three projects of the notes folder, indexed like `reindex`."""
    os.environ["CHARLIE_HOME"] = str(home_dir)
    for key in [k for k in os.environ if k.startswith("CHARLIE_") and k != "CHARLIE_HOME"]:
        del os.environ[key]  # no stray settings from the environment
    home = Home.open(load_settings(home=home_dir, tool_mode="native"))
    for slug, name in PROJECT_NAMES.items():
        project = create_project(home, name, slug=slug, distill_every=1000)
        shutil.copytree(NOTES / slug / "notes", notes_dir(project), dirs_exist_ok=True)
        shutil.copyfile(NOTES / slug / "memory.md", project.memory_path)
    alice = ensure_user(home.db, "alice")
    channels = {slug: shared_channel(home, get_project(home, slug)) for slug in PROJECT_NAMES}
    channels["private"] = private_channel(home, alice)
    report = Index(home, LocalEmbedder()).refresh()
    if len(report.added) != sum(
        len(list((NOTES / s / "notes").glob("*.md"))) for s in channels if s != "private"
    ):
        raise SystemExit(f"indexing the notes folder failed: {report}")
    return home, channels, alice


def _kind(step: Step) -> str:
    if step[0] == "reply":
        return "answer"
    return "+".join(name for name, _ in step[1])


def _check(turn: int, scenario: Scenario, script: list[Step], events: list[Any]) -> list[str]:
    """The loop did what the script says: every call ran and succeeded, no guard fired."""
    notices = [e.text for e in events if isinstance(e, chat.Notice)]
    trace = [to_json(e.step) for e in events if isinstance(e, chat.TraceEvent)]
    expected = [name for kind, body in script if kind == "tools" for name, _ in body]
    # the model's calls (Charlie's own day arithmetic, by "charlie", is not the script's)
    calls = [t for t in trace if t["type"] in ("tool_call", "load") and t.get("by") != "charlie"]
    names = [t.get("name", "load_tools") for t in calls]
    problems = []
    if notices:
        problems.append(f"notices {notices}")
    if names != expected:
        problems.append(f"calls {names} != {expected}")
    if not all(t["ok"] for t in calls) or any(t.get("guard") for t in trace):
        problems.append(f"a call failed or a guard fired: {calls}")
    if problems:
        raise SystemExit(f"turn {turn} ({scenario.name}): " + "; ".join(problems))
    return list(trace[0]["categories"])


def run_loop(
    mode: str,
    turns: int,
    warmup: int,
    home_dir: Path,
    profiler: cProfile.Profile | None = None,
) -> list[TurnRecord]:
    home, channels, alice = build_home(home_dir)
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    server = context.Process(target=serve, args=(child,), daemon=True)
    server.start()
    child.close()  # so that a crashed child reads as EOFError here, not a hang
    llm = TimedLLM(parent.recv(), MODEL, retries=0)
    records: list[TurnRecord] = []
    try:
        for index in range(warmup + turns):
            scenario = SCENARIOS[index % len(SCENARIOS)]
            channel = channels[scenario.channel]
            script = scenario.steps(index)
            parent.send(("script", script))
            if parent.recv() != 0:
                raise SystemExit(f"turn {index}: the double had answers left from the last turn")
            if mode == "cold":
                home.shared.clear()  # the next turn builds its searcher from scratch
            before = len(llm.calls)
            measured = profiler if index >= warmup else None
            if measured is not None:
                measured.enable()
            events: list[Any] = []
            reply_at = 0.0
            started = time.perf_counter()
            for event in chat.turn(home, llm, channel, alice, scenario.prompt):
                if isinstance(event, chat.Reply):
                    reply_at = time.perf_counter()
                events.append(event)
            ended = time.perf_counter()
            if measured is not None:
                measured.disable()

            calls = llm.calls[before:]
            if len(calls) != len(script):
                raise SystemExit(f"turn {index}: {len(calls)} model calls, script {len(script)}")
            suggested = _check(index, scenario, script, events)
            steps = []
            for i, (call, step) in enumerate(zip(calls, script, strict=True)):
                inside = call.end - call.start - call.llm
                gap = calls[i + 1].start - call.end if i + 1 < len(calls) else 0.0
                steps.append((_kind(step), (inside + gap) * 1000))
            llm_s = sum(c.llm for c in calls)
            wall = ended - started
            records.append(
                TurnRecord(
                    turn=index,
                    scenario=scenario.name,
                    suggested=suggested,
                    iterations=len(calls),
                    wall_ms=wall * 1000,
                    llm_ms=llm_s * 1000,
                    overhead_ms=(wall - llm_s) * 1000,
                    per_iteration_ms=(wall - llm_s) * 1000 / len(calls),
                    setup_ms=(calls[0].start - started) * 1000,
                    steps=steps,
                    to_reply_ms=(reply_at - calls[-1].end) * 1000,
                    after_reply_ms=(ended - reply_at) * 1000,
                    warmup=index < warmup,
                )
            )
            pending = conversations.undistilled(home, channel)
            if len(pending) >= DISTILL_EVERY:  # as a distillation would, without its cost
                conversations.mark_distilled(home, channel, pending[-1].id)
            if (index + 1) % 50 == 0:
                print(f"  {mode}: {index + 1} turns", file=sys.stderr)
    finally:
        llm.close()
        parent.send(("stop", None))
        received = parent.recv()
        server.join(timeout=10)
        home.close()
    if received["errors"]:
        raise SystemExit(f"the scripted model failed: {received['errors']}")
    if received["requests"] != len(llm.calls):
        raise SystemExit("the double's requests do not match the timed model calls")
    return records


def loop_results(records: list[TurnRecord]) -> dict[str, Any]:
    measured = [r for r in records if not r.warmup]
    by_kind: dict[str, list[float]] = {}
    for r in measured:
        for kind, ms in r.steps:
            by_kind.setdefault(kind, []).append(ms)
    by_scenario: dict[str, dict[str, Any]] = {}
    for s in SCENARIOS:
        rows = [r for r in measured if r.scenario == s.name]
        if rows:
            by_scenario[s.name] = {
                "iterations": rows[0].iterations,
                "suggested": rows[0].suggested,
                "overhead_ms": stats([r.overhead_ms for r in rows]),
                "per_iteration_ms": stats([r.per_iteration_ms for r in rows]),
            }
    return {
        "turns": len(measured),
        "warmup_turns": len(records) - len(measured),
        "iterations": sum(r.iterations for r in measured),
        "per_iteration_ms": stats([r.per_iteration_ms for r in measured]),
        "overhead_ms": stats([r.overhead_ms for r in measured]),
        "llm_ms": stats([r.llm_ms for r in measured]),
        "by_iteration": {kind: stats(values) for kind, values in sorted(by_kind.items())},
        "phases_ms": {
            "setup": stats([r.setup_ms for r in measured]),
            "to_reply": stats([r.to_reply_ms for r in measured]),
            "after_reply": stats([r.after_reply_ms for r in measured]),
        },
        "by_scenario": by_scenario,
        "records": [r.__dict__ for r in records],
    }


def report_loop(mode: str, data: dict[str, Any]) -> None:
    print(
        f"\nLoop overhead excluding LLM time, mode {mode}: {data['turns']} turns, "
        f"{data['iterations']} model calls (after {data['warmup_turns']} warm-up turns), ms"
    )
    load = data.get("load_average")
    if load:
        print(f"(1-min load average {load['before'][0]:.1f} before, {load['after'][0]:.1f} after)")
    print(f"{'':<38} {'n':>5} {'min':>7} {'p50':>8} {'p99':>8} {'mean':>8} {'max':>8}")

    def line(name: str, s: dict[str, float]) -> None:
        print(
            f"{name:<38} {s['n']:>5} {s['min']:>7.2f} {s['p50']:>8.2f} {s['p99']:>8.2f} "
            f"{s['mean']:>8.2f} {s['max']:>8.2f}"
        )

    line("per iteration (turn overhead / calls)", data["per_iteration_ms"])
    line("per turn", data["overhead_ms"])
    print("by iteration (the loop's own time from one model call to the next)")
    for kind, s in data["by_iteration"].items():
        line(f"  {kind}", s)
    print("fixed parts of a turn")
    line("  setup (store message, context)", data["phases_ms"]["setup"])
    line("  store the reply", data["phases_ms"]["to_reply"])
    line("  after the reply (suggested notes)", data["phases_ms"]["after_reply"])
    print("by scenario: overhead per turn")
    for name, s in data["by_scenario"].items():
        line(f"  {name} ({s['iterations']} calls)", s["overhead_ms"])


# -------------------------------------------------------------- where a searcher's time goes


def _verify_model_files() -> None:
    for pinned in (MINILM_TOKENIZER, MINILM_MODEL):
        embeddings.verify_file(embeddings.installed_path(pinned), pinned)


QUERIES = ("plumber date", "wall tiles area", "worktop price", "budget left", "hob circuit")


def searcher_breakdown(home_dir: Path, repeats: int) -> dict[str, Any]:
    """Median ms of each piece of building a searcher from scratch (what a cold turn does),
    then of what a warm turn does: get the Home's searcher, embed the query, search; and the
    cost of running a tool through `run_tool` (a thread per call) against calling it."""
    home, channels, alice = build_home(home_dir)
    scope = [get_project(home, "kitchen")]
    now = toolkit.registry().tools["now"]
    timings: dict[str, list[float]] = {}

    def timed(name: str, action: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        value = action()
        timings.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        return value

    try:
        for _ in range(repeats):
            timed("cold: verify sha256 of model.onnx + tokenizer.json", _verify_model_files)
            embedder = LocalEmbedder()  # what embeddings.from_settings gives by default
            timed("cold: LocalEmbedder.load (verify + onnxruntime)", embedder.load)
            home.shared.clear()
            index = timed("cold: Index() (ensure_schema)", partial(Index, home, embedder))
            timed("cold: Index.refresh (nothing changed)", index.refresh)
            searcher = Searcher(home, index)
            timed(
                "cold: first search (load vectors, embed query)",
                partial(searcher.search, "tiles", alice, scope, limit=5),
            )
        home.shared.clear()
        context = ToolContext(home, channels["kitchen"], alice)
        for query in QUERIES:  # warm-up: load the model and the vectors once
            context.searcher().search(query, alice, scope, limit=5)
        for i in range(repeats * 10):
            query = QUERIES[i % len(QUERIES)]
            context = ToolContext(home, channels["kitchen"], alice)
            searcher = timed("warm: ToolContext.searcher (once per answer)", context.searcher)
            timed("warm: embed one query", partial(searcher.index.embedder.embed, [query]))
            timed(
                "warm: search (embed, vector + keyword, rank)",
                partial(searcher.search, query, alice, scope, limit=5),
            )
            timed("tool now() called directly", partial(toolkit.now, context))
            timed("tool now() through run_tool (a thread)", partial(run_tool, now, context, {}))
    finally:
        home.close()
    return {
        "repeats": repeats,
        "median_ms": {name: statistics.median(values) for name, values in timings.items()},
        "p99_ms": {name: percentile(values, 99) for name, values in timings.items()},
        "n": {name: len(values) for name, values in timings.items()},
    }


def report_breakdown(data: dict[str, Any]) -> None:
    print("\nBuilding and using the searcher, ms")
    print(f"  {'':<52} {'n':>4} {'median':>8} {'p99':>8}")
    for name, value in data["median_ms"].items():
        print(f"  {name:<52} {data['n'][name]:>4} {value:>8.2f} {data['p99_ms'][name]:>8.2f}")


# -------------------------------------------------------------- plot and main


def plot(results: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return False
    modes = [m for m in ("warm", "cold") if m in results["loop"]]
    kinds = sorted({k for m in modes for k in results["loop"][m]["by_iteration"]})
    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=120)
    width = 0.8 / (2 * len(modes))
    for j, mode in enumerate(modes):
        table = results["loop"][mode]["by_iteration"]
        for k, stat in enumerate(("p50", "p99")):
            xs = [i + (2 * j + k) * width - 0.4 + width / 2 for i in range(len(kinds))]
            ys = [table[kind][stat] if kind in table else 0 for kind in kinds]
            color = {"warm": ("#1f5fa8", "#8fb4e0"), "cold": ("#b03a2e", "#e6a59e")}[mode][k]
            ax.bar(xs, ys, width, label=f"{mode} {stat}", color=color)
    ax.set_xticks(range(len(kinds)), kinds, rotation=30, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ms per iteration, LLM time excluded (log)")
    ax.set_title("Tool-loop overhead per iteration type")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", which="major", lw=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--prompts", type=Path, default=PROMPTS, help="labelled prompts (JSONL)")
    parser.add_argument("--turns", type=int, default=280, help="measured turns per mode")
    parser.add_argument("--warmup", type=int, default=16, help="turns before measuring")
    parser.add_argument("--mode", choices=("warm", "cold", "both"), default="both")
    parser.add_argument("--repeats", type=int, default=15, help="searcher breakdown repeats")
    parser.add_argument("--suggest-only", action="store_true", help="part 1 only")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results")
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT, help="PNG plot")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile the measured turns")
    args = parser.parse_args()
    if args.turns < 1 or args.warmup < 0:
        parser.error("--turns must be at least 1 and --warmup at least 0")
    if args.profile and args.mode == "both":
        parser.error("--profile needs --mode warm or --mode cold")

    results: dict[str, Any] = {
        "command": " ".join([".venv/bin/python", "benchmarks/tool_loop.py", *sys.argv[1:]]),
        "machine": machine(),
        "suggestions": suggestion_quality(args.prompts.resolve()),
    }
    report_suggestions(results["suggestions"])
    if args.suggest_only:
        return

    modes = ["warm", "cold"] if args.mode == "both" else [args.mode]
    results["config"] = {"turns": args.turns, "warmup": args.warmup, "modes": modes}
    results["loop"] = {}
    with tempfile.TemporaryDirectory(prefix="charlie-tool-loop-") as tmp:
        for mode in modes:
            profiler = cProfile.Profile() if args.profile else None
            load_before = os.getloadavg()
            records = run_loop(mode, args.turns, args.warmup, Path(tmp) / mode, profiler)
            if profiler is not None:
                path = args.out.with_suffix(f".{mode}.prof")
                path.parent.mkdir(parents=True, exist_ok=True)
                profiler.dump_stats(path)
                print(f"profile of the measured turns ({mode}), written to {path}:")
                profile = pstats.Stats(profiler).strip_dirs()
                profile.sort_stats("tottime").print_stats(15)
                profile.sort_stats("cumulative").print_stats(30)
                return  # a profiled run's timings are inflated: no results written
            results["loop"][mode] = loop_results(records)
            results["loop"][mode]["load_average"] = {
                "before": load_before,
                "after": os.getloadavg(),
            }
            report_loop(mode, results["loop"][mode])
        results["searcher_build"] = searcher_breakdown(Path(tmp) / "breakdown", args.repeats)
    report_breakdown(results["searcher_build"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    if not args.no_plot and plot(results, args.plot):
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
