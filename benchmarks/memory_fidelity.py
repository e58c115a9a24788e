"""Memory fidelity: does what Charlie distils stay true, on conversations nobody tuned it on?

    .venv/bin/python benchmarks/memory_fidelity.py                 # the scripted double
    ~/.cache/charlie/llama/venv/bin/python benchmarks/serve_gguf.py MODEL.gguf --port 8089 &
    CHARLIE_LLM_BASE_URL=http://127.0.0.1:8089/v1 .venv/bin/python \
        benchmarks/memory_fidelity.py --server --part heldout

The conversations live apart from this code, in `benchmarks/data/memory_fidelity/`: 29
household conversations (2–4 speakers and Charlie, 20–64 messages, every topic and name
different) in two parts, `tune.json` (what the distillation may be tuned on) and
`heldout.json` (never tuned on; reported beside the other). Each plants decisions, revisions
of some of them, suggestions and questions that are not decisions, lines worth quoting, and
*trap sentences*: ordinary talk that says forget / drop / remove / clear / reset / change /
cancel / actually / never mind / scrap without revising anything. The run adds, in every
conversation alike: a decision and a summary sentence a person writes into memory.md by hand
after the first distillation, and a secret said, distilled and forgotten.

Each conversation is distilled every 5 messages, as a project is. Scored by string checks:
- decisions held: each planted decision still held *at the end* (its key words in one)
- revisions applied: the new value held, and no held decision says the old value alone
- traps that retired anything: trap messages that changed a decision (want 0)
- not decisions: no suggestion's key words in a held decision
- hand decision: the person's decision held at the end, never superseded
- hand summary: the person's summary sentence in the summary after every distillation
- summary repeats: sentences said twice in one summary, over every distillation (want 0)
- summary bound: the most sentences Charlie's part of a summary had (want ≤ 3)
- summary about Charlie: sentences naming the assistant or a tool (want 0)
- quotes: every quote verbatim and a person's; quotes that are questions (want 0)
- forgotten: the secret is found nowhere — memory.md, charlie.db, index.db, an export

`--server` sends the distillations to a real OpenAI-compatible server; without it they go to
the scripted double (tests/llm_double.py), playing a careless, hostile model: it finds the
decisions, but names every held decision superseded by every message (traps included), drops
and rewrites decisions, repeats and pads the summary with tool narration, and quotes Charlie
and questions — Charlie's checks must hold against that (it answers the question "does this
message change that decision?" honestly). `--quick` runs one conversation (the smoke run).
Writes benchmarks/out/memory_fidelity.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from support import machine

from charlie import conversations
from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.conversations import Message
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.household import forget
from charlie.llm.client import LLMClient
from charlie.memory import batches, steps, summary
from charlie.memory import layers as memory
from charlie.projects import create_project, update_project
from charlie.transfer import export as archive
from charlie.users import ensure_user

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from llm_double import ScriptedLLMServer  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "memory_fidelity"
PARTS = ("tune", "heldout")
DEFAULT_OUT = ROOT / "benchmarks" / "out" / "memory_fidelity.json"
EVERY = 5


def load_part(part: str) -> list[dict[str, Any]]:
    conversations_ = json.loads((DATA / f"{part}.json").read_text())["conversations"]
    return [{**c, "part": part} for c in conversations_]


def has(texts: list[str], words: list[str]) -> bool:
    """Whether one of `texts` holds every key word ("a|b": either)."""
    return any(
        all(any(alt.lower() in text.lower() for alt in word.split("|")) for word in words)
        for text in texts
    )


def secret_of(plan: dict[str, Any]) -> str:
    return str(1000 + sum(map(ord, plan["id"])) * 7 % 9000)


# ---------------------------------------------------------------- the careless double


NEW = re.compile(r"^\[(\d+)\] (.+?): (.*)$", re.M)


@dataclass
class Oracle:
    """What the double knows of the conversation it plays: which texts are decisions (with
    their key words), which are revisions (old words → new words), which are traps."""

    decided: dict[str, str] = field(default_factory=dict)  # message text → decision text
    changes: dict[str, list[str]] = field(default_factory=dict)  # message text → old words
    values: dict[str, list[str]] = field(default_factory=dict)  # message text → new words

    @classmethod
    def of(cls, plan: dict[str, Any]) -> Oracle:
        oracle = cls()
        said = [m["text"] for m in plan["messages"]]
        for decision in plan["decisions"]:
            oracle.decided[said[decision["at"]]] = said[decision["at"]].rstrip(".!")
        for revision in plan["revisions"]:
            oracle.decided[said[revision["decided_at"]]] = said[revision["decided_at"]].rstrip(".!")
            oracle.decided[said[revision["changed_at"]]] = said[revision["changed_at"]].rstrip(".!")
            oracle.changes[said[revision["changed_at"]]] = revision["old"]
            oracle.values[said[revision["changed_at"]]] = revision["new"]
        return oracle

    def changes_it(self, old: str, message: str) -> bool:
        wanted = self.changes.get(message)
        return wanted is not None and has([old], wanted)


def careless_whole(request: dict[str, Any], oracle: Oracle, rng: random.Random) -> str:
    user = request["messages"][-1]["content"]
    current = json.loads(user.split("Current memory:\n", 1)[1].split("\n\nNew messages", 1)[0])
    new = NEW.findall(user)
    decisions: list[dict[str, Any]] = []
    superseded: list[dict[str, Any]] = []
    quotes: list[dict[str, str]] = []
    for number, speaker, text in new:
        if speaker != "Charlie":
            if text in oracle.decided:
                decisions.append({"text": oracle.decided[text], "messages": [int(number)]})
            elif text.endswith("?") and rng.random() < 0.5:
                decisions.append({"text": text.rstrip("?"), "messages": [int(number)]})
            for held in current.get("decisions", []):  # everything, by everyone
                superseded.append({"decision": held, "message": int(number)})
        if rng.random() < 0.3:
            quotes.append({"speaker": speaker, "text": text})  # Charlie's and questions too
    kept = [d for d in current.get("decisions", []) if rng.random() < 0.4]  # drops the rest
    if kept and rng.random() < 0.5:
        kept[0] = kept[0] + " (maybe)"  # rewrites one
    old = current.get("summary") or ""
    padded = f"{old} {old} Charlie loaded the projects tools: list_projects. More was said."
    return json.dumps(
        {
            "summary": padded.strip(),
            "decisions": [*kept, *decisions],
            "superseded": superseded,
            "quotes": quotes[:3],
        }
    )


STEP_PROMPTS = {
    "decision": steps.DECISION_PROMPT,
    "change": steps.CHANGE_PROMPT,
    "recheck": steps.PLAN_NOW_PROMPT,  # the judge's second looks, answered as the change
    "instead": steps.PLAN_INSTEAD_PROMPT,
    "summary": steps.SUMMARY_PROMPT,
    "quotes": steps.QUOTE_PROMPT,
}


def careless_step(request: dict[str, Any], oracle: Oracle, rng: random.Random) -> str:
    system, user = (str(m["content"]) for m in request["messages"][:2])
    step = next(name for name, prompt in STEP_PROMPTS.items() if system == prompt)
    if rng.random() < 0.05:
        return "Let me think about that."  # no JSON: asked again
    said = user.rsplit("\n", 1)[-1].split(": ", 1)[-1]
    if step == "decision":
        if said in oracle.decided:
            return json.dumps({"kind": steps.SETTLES, "what": oracle.decided[said]})
        return json.dumps(
            {"kind": steps.SETTLES if rng.random() < 0.3 else "only news", "what": said}
        )  # traps too
    if step in ("change", "recheck", "instead"):
        old = user.split("Earlier decision: ", 1)[1].split("\n", 1)[0]
        if not oracle.changes_it(old, said):
            return json.dumps({"now": old})  # copied as it was
        new = " ".join(word.split("|")[0] for word in oracle.values[said])
        return json.dumps({"now": f"Now {new}."})  # the decision rewritten with its new value
    if step == "summary":
        old = json.loads(user.split("Current memory:\n", 1)[1].split("\n\nNew messages")[0])
        text = f"{old['summary']} {old['summary']} Charlie searched the notes. They plan."
        return json.dumps({"summary": text.strip()})
    numbers = [int(n) for n in re.findall(r"^\[(\d+)\]", user, re.M)]
    return json.dumps({"quotes": [*rng.sample(numbers, min(2, len(numbers))), 99999]})


def careless_model(request: dict[str, Any], oracle: Oracle, rng: random.Random) -> str:
    system = str(request["messages"][0]["content"])
    if system in STEP_PROMPTS.values():
        return careless_step(request, oracle, rng)
    return careless_whole(request, oracle, rng)


# ---------------------------------------------------------------- one conversation


@dataclass
class Score:
    id: str
    part: str
    speakers: int
    messages: int
    decisions: str  # held at the end / planted
    revisions: str  # applied / planted
    superseded_properly: int  # revisions whose old value is among the earlier decisions
    traps: int
    traps_retiring: int
    false_decisions: int
    hand_decision: bool
    hand_summary: str  # distillations it was in the summary after / distillations since
    summary_repeats: int
    summary_most_sentences: int  # Charlie's part
    summary_about_charlie: int
    quotes: int
    quotes_true: bool
    quote_questions: int
    forgotten: bool
    distillations: int
    failures: int
    seconds: float
    held: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)
    summary: str = ""
    problems: list[str] = field(default_factory=list)
    noise: int = 0  # held decisions that are none of the plants
    lost_retired: int = 0  # planted decisions not held that are among the earlier ones
    lost_unrecorded: int = 0  # … and not there either: never recorded, or dropped


def lost(plan: dict[str, Any], held: list[str], earlier: list[str]) -> tuple[int, int]:
    """Where the planted decisions not held at the end went: retired (among the earlier
    decisions: a change judged wrongly), or nowhere (never recorded, or reworded past
    their key words)."""
    missing = [d["holds"] for d in plan["decisions"] if not has(held, d["holds"])]
    retired = sum(has(earlier, words) for words in missing)
    return retired, len(missing) - retired


def _repeats(text: str) -> int:
    said = [memory.normalise(s).lower().rstrip(".!") for s in summary.sentences(text)]
    return len(said) - len(set(said))


def _about_charlie(text: str) -> int:
    backing = summary.Backing(text, ())
    return sum(
        summary.why_left_out(s, backing) == "about the assistant or its tools"
        for s in summary.sentences(text)
    )


def run_one(plan: dict[str, Any], llm: LLMClient, root: Path, mode: str | None) -> Score:
    folder = root / plan["id"]
    os.environ["CHARLIE_HOME"] = str(folder)
    started = time.perf_counter()
    distillations = failures = repeats = about_charlie = most = 0
    hand_rounds = hand_kept = 0
    problems: list[str] = []
    secret = secret_of(plan)
    lines: list[dict[str, Any]] = list(plan["messages"])
    third = len(lines) // 3
    lines.insert(third, {"speaker": plan["speakers"][0], "text": f"The alarm code is {secret}."})
    with Home.open(load_settings()) as home:
        project = create_project(home, plan["id"].replace("-", " ").title(), distill_every=EVERY)
        if mode is not None:
            project = update_project(home, project.slug, distill_mode=mode)
        channel = conversations.shared_channel(home, project)
        memory.ensure_file(home, channel)
        people = {name: ensure_user(home.db, name) for name in plan["speakers"]}
        added: list[Message] = []
        hand_written = False

        def after_distillation() -> None:
            nonlocal repeats, about_charlie, most, hand_rounds, hand_kept
            now = memory.load(home, channel)
            repeats += _repeats(now.summary)
            about_charlie += _about_charlie(now.summary)
            ours = [s for s in summary.sentences(now.summary) if s not in plan["hand_summary"]]
            most = max(most, len(ours))
            if hand_written:
                hand_rounds += 1
                hand_kept += plan["hand_summary"] in memory.normalise(now.summary)

        def distilled(events: Any) -> bool:
            nonlocal distillations, failures
            any_ = False
            for event in events:
                if isinstance(event, chat.Distilled):
                    distillations += 1
                    any_ = True
                    after_distillation()
                elif isinstance(event, chat.Notice):
                    failures += 1
                    problems.append(event.text[:160])
            return any_

        for line in lines:
            person = people.get(line["speaker"])
            role = "user" if person else "assistant"
            added.append(conversations.add_message(home, channel, role, line["text"], user=person))
            if distilled(chat.distill_due(home, llm, channel)) and not hand_written:
                path = project.memory_path  # the person writes a decision and a sentence
                edited = memory.parse(path.read_text())
                edited.summary = f"{plan['hand_summary']} {edited.summary}".strip()
                edited.decisions.append(memory.Decision(plan["hand_decision"]))
                path.write_text(memory.render(edited, project.config.name))
                hand_written = True
            if len(added) == 2 * third:
                told = next(m for m in added if m.content.endswith(f"{secret}."))
                forget.forget(home, channel, people[plan["speakers"][0]], told.id)
        try:  # what the cadence left: `charlie distill`
            for _ in batches.distill_all(home, channel, llm):
                distillations += 1
                after_distillation()
        except CharlieError as exc:
            failures += 1
            problems.append(str(exc)[:160])
        list(chat.index_messages(home))
        held = memory.load(home, channel)
        texts, earlier = held.texts, [e.text for e in held.earlier]
        ids = {
            n: m.id
            for n, m in enumerate(m for m in added if m.content != f"The alarm code is {secret}.")
        }
        planted = sum(has(texts, d["holds"]) for d in plan["decisions"])
        applied = proper = 0
        for revision in plan["revisions"]:
            stale = [
                t for t in texts if has([t], revision["old"]) and not has([t], revision["new"])
            ]
            if has(texts, revision["new"]) and not stale:
                applied += 1
                proper += has(earlier, revision["old"])
        trap_ids = {ids[n] for n in plan["traps"]}
        retiring = {e.changed_by for e in held.earlier if e.changed_by in trap_ids}
        false = sum(has(texts, d["words"]) for d in plan["not_decisions"])
        wanted = [
            *(d["holds"] for d in plan["decisions"]),
            *(r["new"] for r in plan["revisions"]),
            *(r["old"] for r in plan["revisions"]),
        ]
        noise = sum(
            not any(has([t], w) for w in wanted) and t != plan["hand_decision"] for t in texts
        )
        said = [m.content for m in conversations.recent(home, channel, 1000) if m.role == "user"]
        quotes_true = all(
            q.speaker != "Charlie"
            and any(memory.normalise(q.text) in memory.normalise(s) for s in said)
            for q in held.quotes
        )
        questions = sum(q.text.rstrip().endswith("?") for q in held.quotes)
        export = folder / "export.zip"
        archive.export_archive(home, export, exporter=next(iter(people.values())).name)
        home.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    places = [p for p in folder.rglob("*") if p.is_file() and p != export]
    # the secret as a number of its own: a sha256 may hold its four digits ("…8a1277bd…")
    alone = re.compile(rb"(?<![0-9A-Za-z])" + secret.encode() + rb"(?![0-9A-Za-z])")
    found = [str(p.relative_to(folder)) for p in places if alone.search(p.read_bytes())]
    with zipfile.ZipFile(export) as z:
        found += [f"export:{n}" for n in z.namelist() if alone.search(z.read(n))]
    if found:
        problems.append(f"the secret is still in {', '.join(found)}")
    return Score(
        plan["id"],
        plan["part"],
        len(plan["speakers"]),
        len(lines),
        f"{planted}/{len(plan['decisions'])}",
        f"{applied}/{len(plan['revisions'])}",
        proper,
        len(plan["traps"]),
        len(retiring),
        false,
        plan["hand_decision"] in texts,
        f"{hand_kept}/{hand_rounds}",
        repeats,
        most,
        about_charlie,
        len(held.quotes),
        quotes_true,
        questions,
        not found,
        distillations,
        failures,
        round(time.perf_counter() - started, 1),
        texts,
        earlier,
        held.summary,
        problems,
        noise,
        *lost(plan, texts, earlier),
    )


def _ratio(scores: list[Score], name: str) -> str:
    pairs = [getattr(s, name).split("/") for s in scores]
    return f"{sum(int(a) for a, _ in pairs)}/{sum(int(b) for _, b in pairs)}"


def totals(scores: list[Score]) -> dict[str, Any]:
    return {
        "conversations": len(scores),
        "messages": sum(s.messages for s in scores),
        "decisions_held": _ratio(scores, "decisions"),
        "revisions_applied": _ratio(scores, "revisions"),
        "revisions_superseded_properly": sum(s.superseded_properly for s in scores),
        "traps": sum(s.traps for s in scores),
        "traps_retiring": sum(s.traps_retiring for s in scores),
        "false_decisions": sum(s.false_decisions for s in scores),
        "hand_decision": f"{sum(s.hand_decision for s in scores)}/{len(scores)}",
        "hand_summary_kept": _ratio(scores, "hand_summary"),
        "summary_repeats": sum(s.summary_repeats for s in scores),
        "summary_most_sentences": max((s.summary_most_sentences for s in scores), default=0),
        "summary_about_charlie": sum(s.summary_about_charlie for s in scores),
        "quotes": sum(s.quotes for s in scores),
        "quotes_true": f"{sum(s.quotes_true for s in scores)}/{len(scores)}",
        "quote_questions": sum(s.quote_questions for s in scores),
        "forgotten": f"{sum(s.forgotten for s in scores)}/{len(scores)}",
        "noise": sum(s.noise for s in scores),
        "lost_retired": sum(s.lost_retired for s in scores),
        "lost_unrecorded": sum(s.lost_unrecorded for s in scores),
        "distillations": sum(s.distillations for s in scores),
        "failed": sum(s.failures for s in scores),
        "seconds": round(sum(s.seconds for s in scores), 1),
    }


def all_hold(total: dict[str, Any]) -> bool:
    """Every check that Charlie holds whatever the model says: what the double must give.
    (Which revisions are found and which remarks are taken for decisions is the model's.)"""
    whole = [total[k] for k in ("decisions_held", "hand_decision", "hand_summary_kept")]
    whole += [total[k] for k in ("quotes_true", "forgotten")]
    zero = ("traps_retiring", "summary_repeats", "summary_about_charlie", "quote_questions")
    return (
        all(a == b for a, b in (w.split("/") for w in whole))
        and all(total[k] == 0 for k in zero)
        and total["summary_most_sentences"] <= summary.MOST_SENTENCES
    )


PLOTTED = (  # (label, total's key, better when: "all" of a ratio, or "zero")
    ("decisions held", "decisions_held", "all"),
    ("revisions applied", "revisions_applied", "all"),
    ("hand decision", "hand_decision", "all"),
    ("hand summary kept", "hand_summary_kept", "all"),
    ("forgotten", "forgotten", "all"),
    ("traps that retired", "traps_retiring", "zero"),
    ("repeated sentences", "summary_repeats", "zero"),
    ("quoted questions", "quote_questions", "zero"),
)


def plot(run: Path, path: Path, label: str = "") -> bool:
    """Each part's checks side by side, as shares (a ratio) or counts (want 0)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return False
    result = json.loads(run.read_text())["summary"]
    parts = [p for p in PARTS if p in result and result[p]["conversations"]]
    fig, (shares, counts) = plt.subplots(1, 2, figsize=(12, 4.5), width_ratios=[5, 3])
    width = 0.8 / max(1, len(parts))
    ratios = [p for p in PLOTTED if p[2] == "all"]
    zeros = [p for p in PLOTTED if p[2] == "zero"]
    for n, part in enumerate(parts):
        total = result[part]
        values = []
        for _, name, _ in ratios:
            held, of = (int(x) for x in total[name].split("/"))
            values.append(100 * held / of if of else 0)
        bars = shares.bar([x + n * width for x in range(len(ratios))], values, width, label=part)
        shares.bar_label(bars, fmt="%.0f", fontsize=7)
        bars = counts.bar(
            [x + n * width for x in range(len(zeros))],
            [total[z[1]] for z in zeros],
            width,
            label=part,
        )
        counts.bar_label(bars, fontsize=7)
    for axis, chosen in ((shares, ratios), (counts, zeros)):
        axis.set_xticks([x + width * (len(parts) - 1) / 2 for x in range(len(chosen))])
        axis.set_xticklabels([c[0] for c in chosen], rotation=20, fontsize=8)
        axis.legend(fontsize=8)
    shares.set_ylabel("held (%)")
    shares.set_ylim(0, 110)
    counts.set_ylabel("count (want 0)")
    fig.suptitle(f"Memory fidelity, {label or result['model']} ({result['distill_mode']})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return True


def merge(runs: list[Path], out: Path) -> None:
    """One run from runs of parts of the conversations (each `--ids` on its own server,
    side by side): the scores together, each part's totals counted again."""
    loaded = [json.loads(run.read_text()) for run in runs]
    scores = [Score(**s) for run in loaded for s in run["scores"]]
    first = loaded[0]["summary"]
    result: dict[str, Any] = {"model": first["model"], "distill_mode": first["distill_mode"]}
    for part in PARTS:
        mine = [s for s in scores if s.part == part]
        if mine:
            result[part] = totals(mine)
            result[part]["seconds"] = round(
                max(r["summary"].get(part, {}).get("seconds", 0) for r in loaded), 1
            )
    print(json.dumps(result, indent=1))
    out.write_text(
        json.dumps(
            {
                "summary": result,
                "machine": loaded[0]["machine"],
                "scores": [asdict(s) for s in scores],
            },
            indent=1,
            ensure_ascii=False,
        )
    )
    print(f"wrote {out} (the seconds are the longest shard's: they ran side by side)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--server", action="store_true", help="the configured real server")
    parser.add_argument("--part", choices=[*PARTS, "both"], default="both")
    parser.add_argument("--ids", default="", help="only these conversations, comma-separated")
    parser.add_argument("--limit", type=int, default=0, help="at most this many per part")
    parser.add_argument("--quick", action="store_true", help="one conversation: a smoke run")
    parser.add_argument(
        "--distill-mode",
        choices=["auto", "whole", "steps"],
        default=None,
        help="how each project distills (default: CHARLIE_DISTILL_MODE, else auto)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--keep",
        type=Path,
        help="write each conversation's data home under this new folder and keep it there "
        "(its memory revisions and runs, to replay a distillation); default: a temporary one",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--plot", type=Path, help="draw the run of --from here, run nothing")
    parser.add_argument("--from", dest="run", type=Path, help="a run's JSON (--out)")
    parser.add_argument("--label", default="", help="the model, as the plot names it")
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        help="put together the runs (--out) of several --ids shards into --out, run nothing",
    )
    args = parser.parse_args()
    if args.merge:
        merge(args.merge, args.out)
        return
    if args.plot:
        if args.run is None:
            parser.error("--plot needs --from RUN.json")
        if plot(args.run, args.plot, args.label):
            print(f"wrote {args.plot}")
        return
    parts = PARTS if args.part == "both" else (args.part,)
    plans: list[dict[str, Any]] = []
    for part in parts:
        found = load_part(part)
        plans += found[: args.limit] if args.limit else found
    if args.ids:
        wanted = args.ids.split(",")
        plans = [p for p in plans if p["id"] in wanted]
        if len(plans) != len(wanted):
            parser.error("--ids: unknown conversation")
    if args.quick:
        plans = load_part("tune")[:1]
    double: ScriptedLLMServer | None = None
    rng = random.Random(args.seed)
    if args.server:
        settings = load_settings()
        llm = LLMClient.from_settings(settings)
        where = settings.llm_base_url
    else:
        double = ScriptedLLMServer(model="careless").start()
        llm = LLMClient(double.base_url, "careless", retries=0)
        where = "the scripted double (a careless, hostile model)"
    scores: list[Score] = []
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep} is not empty: name a new folder")
    try:
        with contextlib.ExitStack() as stack:
            root = args.keep or stack.enter_context(
                tempfile.TemporaryDirectory(prefix="charlie-fidelity-")
            )
            for plan in plans:
                if double is not None:
                    oracle = Oracle.of(plan)
                    double.default = lambda r, o=oracle: careless_model(r, o, rng)
                score = run_one(plan, llm, Path(root), args.distill_mode)
                scores.append(score)
                print(
                    f"{score.part:<7} {score.id:<28} decisions {score.decisions} revisions "
                    f"{score.revisions} traps-retiring {score.traps_retiring}/{score.traps} "
                    f"false {score.false_decisions} hand {score.hand_decision} "
                    f"hand-summary {score.hand_summary} repeats {score.summary_repeats} "
                    f"quotes-q {score.quote_questions} forgotten {score.forgotten} "
                    f"({score.distillations} distillations, {score.failures} failed, "
                    f"{score.seconds}s) {'; '.join(score.problems)[:200]}",
                    flush=True,
                )
    finally:
        llm.close()
        if double is not None:
            double.stop()
    result: dict[str, Any] = {
        "model": where,
        "distill_mode": args.distill_mode or os.environ.get("CHARLIE_DISTILL_MODE", "auto"),
    }
    for part in parts:
        result[part] = totals([s for s in scores if s.part == part])
    print(json.dumps(result, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"summary": result, "machine": machine(), "scores": [asdict(s) for s in scores]},
            indent=1,
            ensure_ascii=False,
        )
    )
    print(f"wrote {args.out}")
    if not args.server and not all(
        all_hold(result[p]) for p in parts if result[p]["conversations"]
    ):
        raise SystemExit(1)  # against the double every check must hold


if __name__ == "__main__":
    main()
