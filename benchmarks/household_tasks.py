"""The household scorecard: Charlie against a real model on ~30 household tasks, per tool
mode, beside two baselines with the same model in the same run.

    ./scripts/real-llm --model qwen bench-tasks          # or, against any server:
    CHARLIE_LLM_BASE_URL=http://127.0.0.1:8080/v1 .venv/bin/python benchmarks/household_tasks.py

The household (benchmarks/household.py): one project, 40 notes, a memory.md, and 560
earlier messages — more than a small window holds. Each task is one question in a new
thread of that project (distillation off, so the memory stays as written), in a fresh
data home per mode: note look-ups, conversation recall (facts said 50 to 250 messages
back), memory, recording a decision, date arithmetic, and plain chat that needs no tool.

Modes: Charlie's `native`, `text`, `constrained` and `auto` (`charlie.llm.toolmode`); and two
baselines, the same model asked directly: `nothing` (the question alone) and `paste`
(every note, the memory and the whole transcript pasted in, the oldest left out first
until it fits the window).

Per task: right (every expected string group found in the reply, or, for a decision, in the
memory's decisions afterwards), found (the expected note or earlier message came back from a
look-up, the model's or Charlie's own), right tool (the tool it needed was called, by the
model or by Charlie for its day arithmetic, or none when none was needed), markup (the reply
shows tool-call or template markup), prompt tokens (the sum of `usage.prompt_tokens` over
every request), of them the tokens the server reused from its cache
(`usage.prompt_tokens_details.cached_tokens`, where the server says: llama.cpp does),
requests to the model, seconds. Per mode, besides the means: the median seconds, requests
per task and the share of prompt tokens reused — where a task's seconds go.

Writes benchmarks/out/household_tasks.json and, with matplotlib installed, the plot
docs/benchmarks/household-tasks.png. `--quick` runs three tasks in one mode (a smoke run).
`--from A.json B.json` runs nothing: it prints and plots the rows of earlier runs, a mode
in a later file replacing the same mode in an earlier one (a mode rerun after a fix).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from household import MEMORY, NOTES, TASKS, Task, transcript
from support import machine

from charlie import conversations, trace
from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.llm import budget
from charlie.llm.client import Completion, Delta, LLMClient
from charlie.memory import layers as memory
from charlie.notes import files as notes
from charlie.projects import create_project
from charlie.retrieval import message_index, recall
from charlie.users import ensure_user

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from real_llm.real_llm_support import RecordingLLM  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "out" / "household_tasks.json"
DEFAULT_PLOT = ROOT / "docs" / "benchmarks" / "household-tasks.png"
MODES = ("native", "text", "constrained", "auto")
BASELINES = ("nothing", "paste")
MARKUP = ("<tool_call", "<function", "[TOOL_CALLS]", "<|", '"name":', "<note", "</", "```json")
PERSONA = "You are Charlie, a personal assistant for a household. Today is Tuesday 2026-12-01."


@dataclass
class Outcome:
    task: str
    kind: str
    mode: str
    right: bool
    found: bool | None  # None where nothing was to be found
    right_tool: bool | None  # None for the baselines (they have no tools)
    markup: bool
    prompt_tokens: int
    seconds: float
    reply: str
    calls: list[str] = field(default_factory=list)
    error: str = ""
    requests: int = 0  # requests to the model for this task
    cached_tokens: int = 0  # prompt tokens the server reused from its cache


def _matches(text: str, groups: tuple[tuple[str, ...], ...]) -> bool:
    lowered = text.lower().replace("\u2019", "'")
    return all(any(option.lower() in lowered for option in group) for group in groups)


def _markup(text: str) -> bool:
    return any(sign in text for sign in MARKUP)


# ---------------------------------------------------------------- the household


def build(home: Home) -> Any:
    """The household in a new data home: its project channel (distillation off)."""
    project = create_project(home, "House", distill_every=1000)
    for title, body, _day in NOTES:
        notes.create_note(project, title, body)
    project.memory_path.write_text(MEMORY, encoding="utf-8")
    channel = conversations.shared_channel(home, project)
    memory.ensure_file(home, channel)
    people = {name: ensure_user(home.db, name.lower()) for name in ("Sam", "Alex")}
    for speaker, text, day in transcript():
        person = people.get(speaker)
        role = "assistant" if person is None else "user"
        message = conversations.add_message(home, channel, role, text, user=person)
        home.db.execute(
            "UPDATE messages SET created_at = ? WHERE id = ?", (f"{day}T18:00:00+00:00", message.id)
        )
    conversations.mark_distilled(home, channel, conversations.newest_id(home, channel))
    message_index.catch_up(recall.recaller_for(home).index)
    return channel, people["Sam"]


def _usage_total(client: RecordingLLM) -> int:
    calls = [*client.streams, *client.chats]
    return sum(
        int((c.completion.usage if c.completion else {}).get("prompt_tokens", 0)) for c in calls
    )


def _requests(client: RecordingLLM) -> int:
    return len(client.streams) + len(client.chats)


def _cached(client: RecordingLLM) -> int:
    """The prompt tokens the server reused from its cache, over every request."""
    total = 0
    for call in [*client.streams, *client.chats]:
        usage: dict[str, Any] = dict(call.completion.usage) if call.completion else {}
        details = usage.get("prompt_tokens_details") or {}
        total += int(details.get("cached_tokens", 0)) if isinstance(details, dict) else 0
    return total


# ---------------------------------------------------------------- Charlie


def charlie_task(
    home: Home, client: RecordingLLM, channel: Any, sam: Any, task: Task, mode: str
) -> Outcome:
    thread = conversations.new_thread(home, channel)
    client.streams.clear()
    client.chats.clear()
    started = time.perf_counter()
    steps: list[trace.Step] = []
    reply, error = "", ""
    try:
        for event in chat.turn(home, client, thread, sam, task.question):
            if isinstance(event, chat.TraceEvent):
                steps.append(event.step)
            elif isinstance(event, chat.Reply):
                reply = event.message.content
    except CharlieError as exc:
        error = str(exc)
    seconds = time.perf_counter() - started
    called = [s for s in steps if isinstance(s, trace.Called)]
    by_model = [s.name for s in called if s.by == "model" and s.ok]
    if task.kind == "decision":
        decisions = " ".join(memory.load(home, channel).texts).lower()
        right = task.decided in decisions
    else:
        right = _matches(reply, task.expect)
    return Outcome(
        task.id,
        task.kind,
        mode,
        right,
        _found(task, called),
        _right_tool(task, by_model, called),
        _markup(reply),
        _usage_total(client),
        round(seconds, 2),
        reply,
        [f"{s.name}{'' if s.by == 'model' else '*'}" for s in called],
        error,
        _requests(client),
        _cached(client),
    )


def _found(task: Task, called: list[trace.Called]) -> bool | None:
    if task.note:
        return any(h.key == task.note for s in called for h in s.hits or ()) or any(
            s.name == "read_note" and s.ok and task.note.split("/")[1] in json.dumps(s.arguments)
            for s in called
        )
    if task.said:
        return any(task.said.lower() in h.snippet.lower() for s in called for h in s.hits or ())
    return None


def _right_tool(task: Task, by_model: list[str], called: list[trace.Called]) -> bool | None:
    if task.tool == "-":
        return not by_model  # plain chat: the model called nothing (Charlie's look-ups aside)
    if task.tool:  # the model called it, or Charlie ran it itself (its day arithmetic)
        return task.tool in by_model or any(c.name == task.tool and c.ok for c in called)
    if task.note or task.said:
        return bool(_found(task, called))
    return True  # the memory is in the prompt: no tool is needed


# ---------------------------------------------------------------- the baselines


def _everything(window: int, answer: int, question: str) -> str:
    """Every note, the memory and the transcript, oldest first, the oldest dropped until
    it fits beside the question and the answer."""
    items = [(day, f"Note '{title}' ({day}): {body}") for title, body, day in NOTES]
    items += [(day, f"[{day}] {speaker}: {text}") for speaker, text, day in transcript()]
    items.sort(key=lambda item: item[0])
    lines = [MEMORY] + [text for _, text in items]
    room = budget.Budget.of(window, answer).prompt - budget.estimate(PERSONA + question) - 64
    while lines and budget.estimate("\n".join(lines)) > room:
        lines.pop(1 if len(lines) > 1 else 0)  # the memory stays; the oldest item goes
    return "\n".join(lines)


def baseline_task(client: RecordingLLM, task: Task, mode: str, window: int, answer: int) -> Outcome:
    client.streams.clear()
    client.chats.clear()
    system = PERSONA
    if mode == "paste":
        system += "\n\nEverything the household has written down and said:\n\n"
        system += _everything(window, answer, task.question)
    started = time.perf_counter()
    reply, error = "", ""
    try:
        for item in client.stream(
            [{"role": "system", "content": system}, {"role": "user", "content": task.question}]
        ):
            if isinstance(item, Delta):
                reply += item.text
            elif isinstance(item, Completion):
                reply = item.content
    except CharlieError as exc:
        error = str(exc)
    seconds = time.perf_counter() - started
    right = False if task.kind == "decision" else _matches(reply, task.expect)
    found = None if not (task.note or task.said) else False
    return Outcome(
        task.id,
        task.kind,
        mode,
        right,
        found,
        None,
        _markup(reply),
        _usage_total(client),
        round(seconds, 2),
        reply,
        [],
        error,
        _requests(client),
        _cached(client),
    )


# ---------------------------------------------------------------- running


def run_mode(mode: str, tasks: list[Task], answer: int, root: Path) -> list[Outcome]:
    folder = root / mode
    os.environ["CHARLIE_HOME"] = str(folder)
    os.environ["CHARLIE_TOOL_MODE"] = mode if mode in MODES else "auto"
    os.environ["CHARLIE_LLM_MAX_TOKENS"] = str(answer)
    settings = load_settings()
    outcomes: list[Outcome] = []
    with Home.open(settings) as home, RecordingLLM.from_settings(settings) as client:
        window = client.context_window()
        channel, sam = build(home) if mode in MODES else (None, None)
        for task in tasks:
            if mode in MODES:
                outcome = charlie_task(home, client, channel, sam, task, mode)
            else:
                outcome = baseline_task(client, task, mode, window, answer)
            outcomes.append(outcome)
            mark = "right" if outcome.right else "wrong"
            print(
                f"{mode:>11} {task.id:<18} {mark:<5} found={outcome.found} "
                f"tool={outcome.right_tool} markup={outcome.markup} "
                f"tokens={outcome.prompt_tokens} reused={outcome.cached_tokens} "
                f"requests={outcome.requests} {outcome.seconds:.1f}s "
                f"calls={outcome.calls} | {outcome.reply[:90]!r} {outcome.error[:80]}",
                flush=True,
            )
    return outcomes


def summary(outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for mode in dict.fromkeys(o.mode for o in outcomes):
        rows = [o for o in outcomes if o.mode == mode]
        lookups = [o for o in rows if o.kind in ("note", "recall")]
        tools = [o for o in rows if o.right_tool is not None]
        table[mode] = {
            "tasks": len(rows),
            "right": sum(o.right for o in rows),
            "lookup_tasks": len(lookups),
            "lookup_found_and_right": sum(bool(o.found) and o.right for o in lookups),
            "right_tool": sum(bool(o.right_tool) for o in tools),
            "tool_tasks": len(tools),
            "markup": sum(o.markup for o in rows),
            "errors": sum(bool(o.error) for o in rows),
            "prompt_tokens": sum(o.prompt_tokens for o in rows),
            "prompt_tokens_per_task": round(sum(o.prompt_tokens for o in rows) / len(rows)),
            "seconds_per_task": round(sum(o.seconds for o in rows) / len(rows), 1),
            "median_seconds": round(statistics.median(o.seconds for o in rows), 1),
            "requests_per_task": round(sum(o.requests for o in rows) / len(rows), 2),
            "prompt_tokens_reused": round(
                sum(o.cached_tokens for o in rows) / max(1, sum(o.prompt_tokens for o in rows)), 3
            ),
            "by_kind": {
                kind: f"{sum(o.right for o in rows if o.kind == kind)}/"
                f"{sum(1 for o in rows if o.kind == kind)}"
                for kind in dict.fromkeys(o.kind for o in rows)
            },
        }
    return table


def print_table(table: dict[str, dict[str, Any]]) -> None:
    print(
        f"\n{'mode':<12}{'right':>8}{'look-ups':>10}{'tool':>8}{'markup':>8}"
        f"{'tokens/task':>13}{'reused':>8}{'req/task':>10}{'s/task':>8}{'median':>8}  by kind"
    )
    for mode, row in table.items():
        lookups = f"{row['lookup_found_and_right']}/{row['lookup_tasks']}"
        tool = f"{row['right_tool']}/{row['tool_tasks']}" if row["tool_tasks"] else "-"
        kinds = " ".join(f"{k} {v}" for k, v in row["by_kind"].items())
        print(
            f"{mode:<12}{row['right']:>5}/{row['tasks']:<2}{lookups:>10}{tool:>8}"
            f"{row['markup']:>8}{row['prompt_tokens_per_task']:>13}"
            f"{row.get('prompt_tokens_reused', 0):>8.0%}{row.get('requests_per_task', 0):>10}"
            f"{row['seconds_per_task']:>8}{row.get('median_seconds', '-'):>8}  {kinds}"
        )


def plot(table: dict[str, dict[str, Any]], path: Path, model: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return False
    modes = list(table)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    shares = [100 * table[m]["right"] / table[m]["tasks"] for m in modes]
    colours = ["#3b7dd8" if m in MODES else "#999999" for m in modes]
    left.bar(modes, shares, color=colours)
    left.set_ylabel("right answers (%)")
    left.set_ylim(0, 100)
    left.set_title(f"Household tasks, {model}")
    for x, (mode, share) in enumerate(zip(modes, shares, strict=True)):
        left.text(x, share + 1, f"{table[mode]['right']}/{table[mode]['tasks']}", ha="center")
    right.bar(modes, [table[m]["prompt_tokens_per_task"] for m in modes], color=colours)
    right.set_ylabel("prompt tokens per task")
    right.set_title("What each answer cost")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return True


def served_model(settings: Any) -> str:
    """The model's name as configured, or as the server lists it (a file name: its stem)."""
    client = LLMClient.from_settings(settings)
    try:
        name = client.model
    except CharlieError:
        return settings.llm_model or "(the server's)"
    finally:
        client.close()
    return Path(name).stem if name.endswith(".gguf") else name


def replot(runs: list[Path], path: Path, label: str) -> None:
    table: dict[str, dict[str, Any]] = {}
    model = label
    for run in runs:
        result = json.loads(run.read_text())
        table.update(result["summary"])
        model = model or result["model"]
    ordered = {m: table[m] for m in [*MODES, *BASELINES] if m in table}
    print_table(ordered)
    if plot(ordered, path, model):
        print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--modes", default=",".join([*MODES, *BASELINES]))
    parser.add_argument("--tasks", default="", help="task ids or kinds, comma-separated")
    parser.add_argument("--max-tokens", type=int, default=256, help="the answer cap")
    parser.add_argument("--quick", action="store_true", help="three tasks, one mode: a smoke run")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT)
    parser.add_argument("--label", default="", help="the model's name in the plot's title")
    parser.add_argument("--from", dest="runs", type=Path, nargs="+", help="earlier runs' JSON")
    args = parser.parse_args()
    if args.runs:
        replot(args.runs, args.plot, args.label)
        return
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(MODES) - set(BASELINES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    chosen = {t.strip() for t in args.tasks.split(",") if t.strip()}
    tasks = [t for t in TASKS if not chosen or t.id in chosen or t.kind in chosen]
    if args.quick:
        modes, tasks = modes[:1], [TASKS[0], TASKS[10], TASKS[-3]]
    started = time.time()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="charlie-household-") as root:
        for mode in modes:
            outcomes += run_mode(mode, tasks, args.max_tokens, Path(root))
    table = summary(outcomes)
    print_table(table)
    settings = load_settings()
    result = {
        "server": settings.llm_base_url,
        "model": served_model(settings),
        "machine": machine(),
        "load": os.getloadavg(),
        "started": started,
        "seconds": round(time.time() - started),
        "max_tokens": args.max_tokens,
        "summary": table,
        "outcomes": [asdict(o) for o in outcomes],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False))
    print(f"\nwrote {args.out}")
    if not args.quick and plot(table, args.plot, args.label or result["model"]):
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
