"""Memory fidelity: does what Charlie distils stay true over many rounds?

    .venv/bin/python benchmarks/memory_fidelity.py           # the scripted double
    ./scripts/real-llm --model qwen serve                    # then, in another terminal:
    CHARLIE_LLM_BASE_URL=http://127.0.0.1:PORT/v1 .venv/bin/python \
        benchmarks/memory_fidelity.py --server --conversations 3

Ten scripted household conversations (40–60 messages each, two or three speakers and
Charlie) plant what a memory must get right: decisions, a revision of one of them,
suggestions and questions that are not decisions, lines worth quoting, a decision the
person writes into memory.md by hand between rounds, and a secret that is forgotten after
it was distilled. Each conversation is distilled every 5 messages, as a project is (about
10 distillations).

Scored by string checks, per conversation:
- decisions: each planted decision is held (its key words in one decision)
- revision: the new value is held and the old one is among the earlier decisions, and no held
  decision says the old value without the new one
- not decisions: no suggestion or question became a decision
- hand edit: the person's decision is intact after every later distillation
- quotes: every quote is verbatim and said by a person
- forgotten: the secret is found nowhere — memory.md, charlie.db, index.db, an export

`--server` sends the distillations to a real OpenAI-compatible server; without it they go
to the scripted double (tests/llm_double.py), playing a careless model: it drops earlier
decisions, rewrites a person's, calls suggestions decisions and quotes Charlie — Charlie's
checks must hold against that. `--quick` runs one conversation (the suite's smoke run).
Writes benchmarks/out/memory_fidelity.json.
"""

from __future__ import annotations

import argparse
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
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.household import forget
from charlie.llm.client import LLMClient
from charlie.memory import batches, steps
from charlie.memory import layers as memory
from charlie.projects import create_project, update_project
from charlie.transfer import export as archive
from charlie.users import ensure_user

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from llm_double import ScriptedLLMServer  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "out" / "memory_fidelity.json"
EVERY = 5


@dataclass(frozen=True)
class Plan:
    """One conversation's plants."""

    topic: str
    speakers: tuple[str, ...]
    decisions: tuple[tuple[str, str], ...]  # (what is said, the key words a decision holds)
    revision: tuple[str, str, str, str]  # (decided first, the change, old words, new words)
    suggestions: tuple[str, ...]  # said, never decisions (their key words must not appear)
    quotable: tuple[str, ...]
    hand: str  # a decision the person writes by hand
    secret: str  # forgotten after it was distilled


PLANS = [
    Plan(
        "kitchen",
        ("sam", "alex"),
        (
            ("We decided: the worktops are solid oak.", "oak"),
            ("Let's go with green metro tiles for the splashback.", "metro"),
            ("Final answer: the budget is 18,000 pounds.", "18,000"),
        ),
        (
            "We decided the plumber comes on Tuesday 9 December.",
            "Change of plan: the plumber comes on Thursday 11 December, not Tuesday 9 December.",
            "tuesday 9",
            "thursday 11",
        ),
        ("Maybe we should paint the ceiling yellow?", "What if we moved the fridge to the hall?"),
        ("If it's not oak, it's not our kitchen.",),
        "The cabinets are dusty blue",
        "The alarm code is 4471.",
    ),
    Plan(
        "garden",
        ("jo", "max"),
        (
            ("We agreed the hedge gets trimmed in April.", "april"),
            ("Let's go with a Bramley apple tree by the fence.", "bramley"),
            ("Decided: the shed gets a green roof.", "roof"),
        ),
        (
            "We decided the pond is 3 metres wide.",
            "Change of plan: the pond is 2 metres wide, not 3 metres.",
            "3 metres",
            "2 metres",
        ),
        ("Should we get chickens?", "Maybe a trampoline for the kids?"),
        ("A garden is a conversation with the weather.",),
        "The compost heap stays behind the shed",
        "The gate padlock code is 9026.",
    ),
    Plan(
        "holiday",
        ("ana", "ben", "cleo"),
        (
            ("We decided on Lisbon for the spring trip.", "lisbon"),
            ("Let's go with the flat in Alfama.", "alfama"),
            ("Final: we fly from Bristol.", "bristol"),
        ),
        (
            "We decided we leave on 12 April.",
            "Change of plan: we leave on 14 April, not 12 April.",
            "12 april",
            "14 april",
        ),
        ("Should we hire a car there?", "What if we added a day in Porto?"),
        ("Holidays are for naps, not itineraries.",),
        "Passports are in the blue folder",
        "The booking PIN is 5583.",
    ),
    Plan(
        "party",
        ("kim", "lee"),
        (
            ("We decided the party is a picnic in the park.", "picnic"),
            ("Let's go with a chocolate cake from the bakery.", "chocolate"),
            ("Agreed: twenty children are invited.", "twenty"),
        ),
        (
            "We decided the party starts at 11am.",
            "Change of plan: the party starts at 2pm, not 11am.",
            "11am",
            "2pm",
        ),
        ("Maybe a magician?", "Should we rent a bouncy castle?"),
        ("Nobody remembers the cake, everyone remembers the games.",),
        "Grandma brings the lemonade",
        "The park gate code is 3319.",
    ),
    Plan(
        "car",
        ("pat", "sam"),
        (
            ("We decided to keep the Skoda another year.", "skoda"),
            ("Let's go with winter tyres in November.", "winter tyres"),
            ("Final: the MOT is booked at Kwik Fit.", "kwik fit"),
        ),
        (
            "We decided the service is on 3 March.",
            "Change of plan: the service is on 5 March, not 3 March.",
            "3 march",
            "5 march",
        ),
        ("Should we get an electric car next?", "What if we sold it in spring?"),
        ("A car is a hole you pour money into.",),
        "The spare key hangs by the door",
        "The app password is orchid-lantern-42.",
    ),
    Plan(
        "school",
        ("mia's mum", "mia's dad"),
        (
            ("We decided Mia starts piano lessons.", "piano"),
            ("Let's go with the Tuesday swimming class.", "swimming"),
            ("Agreed: homework before screens.", "homework"),
        ),
        (
            "We decided pickup is at 3:15pm.",
            "Change of plan: pickup is at 3:30pm, not 3:15pm.",
            "3:15pm",
            "3:30pm",
        ),
        ("Maybe karate as well?", "Should she walk to school alone?"),
        ("She reads like other children breathe.",),
        "Lunch money goes in on Mondays",
        "The school portal password is maple-42-river.",
    ),
    Plan(
        "money",
        ("nia", "omar"),
        (
            ("We decided to save 300 pounds a month.", "300"),
            ("Let's go with the fixed-rate energy deal.", "fixed-rate"),
            ("Final: the holiday budget is 2,000 pounds.", "2,000"),
        ),
        (
            "We decided the savings go in on the 1st.",
            "Change of plan: the savings go in on the 28th, not the 1st.",
            "the 1st",
            "28th",
        ),
        ("Should we switch banks?", "Maybe we could cancel the gym?"),
        ("A budget is telling your money where to go.",),
        "The emergency fund stays untouched",
        "The bank login is 77-plum-77.",
    ),
    Plan(
        "move",
        ("ruth", "tom"),
        (
            ("We decided to hire Swift Movers.", "swift"),
            ("Let's go with packing the books first.", "books"),
            ("Agreed: the piano goes to Ruth's sister.", "sister"),
        ),
        (
            "We decided we move on 13 June.",
            "Change of plan: we move on 20 June, not 13 June.",
            "13 june",
            "20 june",
        ),
        ("Should we paint before moving in?", "What if we kept the old sofa?"),
        ("Home is wherever the kettle is.",),
        "The cat travels with Tom",
        "The storage unit code is 6402.",
    ),
    Plan(
        "health",
        ("eve", "finn"),
        (
            ("We decided on the Smile Studio dentist.", "smile studio"),
            ("Let's go with walking to work on Fridays.", "walking"),
            ("Final: flu jabs in October.", "flu"),
        ),
        (
            "We decided the check-up is on 8 January.",
            "Change of plan: the check-up is on 12 January, not 8 January.",
            "8 january",
            "12 january",
        ),
        ("Should we join a running club?", "Maybe a standing desk?"),
        ("Sleep is the best medicine nobody takes.",),
        "Finn takes his tablets at breakfast",
        "The surgery PIN is 1207.",
    ),
    Plan(
        "pets",
        ("gus", "ivy", "jay"),
        (
            ("We decided to adopt the grey cat from the shelter.", "grey cat"),
            ("Let's go with the vet on Mill Road.", "mill road"),
            ("Agreed: the cat sleeps downstairs.", "downstairs"),
        ),
        (
            "We decided to call the cat Pepper.",
            "Change of plan: we call the cat Biscuit, not Pepper.",
            "pepper",
            "biscuit",
        ),
        ("Should we get a dog too?", "What if we got pet insurance?"),
        ("Cats don't have owners, they have staff.",),
        "Mrs Hughes feeds the cat when we travel",
        "The microchip account password is tabby-tabby-9.",
    ),
]
FILLER = [
    "The weather is grim again today.",
    "I'll be late tonight, traffic.",
    "Did anyone see my keys?",
    "Dinner is pasta, as usual.",
    "The neighbours are loud again.",
    "I found an old photo of us, so funny.",
    "Remind me to call my mother.",
    "The post came early today.",
]
CHARLIE = [
    "Noted.",
    "That sounds good.",
    "I'll keep that in mind.",
    "Charlie can help plan the next step.",
]


def script(plan: Plan, rng: random.Random) -> list[tuple[str, str]]:
    """The conversation: (speaker, text), Charlie's turns as "Charlie". 40–60 messages."""
    told = [*(d for d, _ in plan.decisions), *plan.suggestions, *plan.quotable]
    rng.shuffle(told)
    first, change = plan.revision[:2]
    lines: list[str] = [first, *told[:3], plan.secret, *told[3:5], change, *told[5:]]
    out: list[tuple[str, str]] = []
    speakers = list(plan.speakers)
    filler = iter(rng.sample(FILLER * 6, len(FILLER) * 6))
    for at, line in enumerate(lines):
        for _ in range(rng.randint(1, 2) if at % 2 else 1):
            out.append((rng.choice(speakers), next(filler)))
            out.append(("Charlie", rng.choice(CHARLIE)))
        out.append((speakers[at % len(speakers)], line))
        out.append(("Charlie", rng.choice(CHARLIE)))
    while len(out) < 40:
        out.append((rng.choice(speakers), next(filler)))
        out.append(("Charlie", rng.choice(CHARLIE)))
    return out[:60]


# ---------------------------------------------------------------- the careless double


NEW = re.compile(r"^\[(\d+)\] (.+?): (.*)$", re.M)
DECIDED = re.compile(
    r"^(we decided[:,]? |let's go with |final answer: |final: |decided: |agreed: |we agreed )", re.I
)


def careless(request: dict[str, Any], rng: random.Random) -> str:
    """A small model's distillation, at its worst: it finds the decisions, but drops the
    earlier ones, rewrites a person's, calls a suggestion a decision and quotes Charlie."""
    user = request["messages"][-1]["content"]
    current = json.loads(user.split("Current memory:\n", 1)[1].split("\n\nNew messages", 1)[0])
    new = NEW.findall(user)
    decisions: list[dict[str, Any]] = []
    superseded: list[dict[str, Any]] = []
    quotes: list[dict[str, str]] = []
    for number, speaker, text in new:
        if speaker != "Charlie" and DECIDED.match(text):
            decisions.append(
                {"text": DECIDED.sub("", text).rstrip(".").capitalize(), "messages": [int(number)]}
            )
        if speaker != "Charlie" and text.startswith("Change of plan: "):
            value = text.removeprefix("Change of plan: ").split(",")[0].split(" instead of ")[0]
            decisions.append({"text": value.rstrip(".").capitalize(), "messages": [int(number)]})
            said = set(re.findall(r"[a-z]{4,}", value.lower()))
            alike = [
                (len(said & set(re.findall(r"[a-z]{4,}", d.lower()))), d)
                for d in current.get("decisions", [])
            ]
            best = max(alike, default=(0, ""))
            if best[0]:
                superseded.append({"decision": best[1], "message": int(number)})
        if speaker != "Charlie" and text.endswith("?") and rng.random() < 0.7:
            decisions.append({"text": text.rstrip("?"), "messages": [int(number)]})  # a suggestion
        if rng.random() < 0.2:
            quotes.append({"speaker": speaker, "text": text})  # Charlie's own words included
    kept = [d for d in current.get("decisions", []) if rng.random() < 0.4]  # drops the rest
    if kept and rng.random() < 0.5:
        kept[0] = kept[0] + " (maybe)"  # rewrites one
    summary = (current.get("summary") or "") + " More was said about the " + "plan."
    return json.dumps(
        {
            "summary": summary.strip(),
            "decisions": [*kept, *decisions],
            "superseded": superseded,
            "quotes": quotes[:3],
        }
    )


STEP_PROMPTS = {
    "decision": steps.DECISION_PROMPT,
    "change": steps.CHANGE_PROMPT,
    "summary": steps.SUMMARY_PROMPT,
    "quotes": steps.QUOTE_PROMPT,
}


def careless_step(request: dict[str, Any], rng: random.Random) -> str:
    """A small model's answer to one step of a stepwise distillation (`distill_mode =
    steps`): mostly right, but now and then unreadable, and it offers Charlie's messages
    and unknown numbers as quotes."""
    system, user = (str(m["content"]) for m in request["messages"][:2])
    step = next(name for name, prompt in STEP_PROMPTS.items() if system == prompt)
    if rng.random() < 0.05:
        return "Let me think about that."  # no JSON: asked again
    said = user.rsplit("\n", 1)[-1].split(": ", 1)[-1]
    if step == "decision":
        if DECIDED.match(said):
            return json.dumps({"decision": True, "what": DECIDED.sub("", said)})
        if said.startswith("Change of plan: "):
            value = said.removeprefix("Change of plan: ").split(", not ")[0]
            return json.dumps({"decision": True, "what": value})
        return json.dumps({"decision": rng.random() < 0.1, "what": ""})  # now and then a remark
    if step == "change":
        return json.dumps({"changes": said.startswith("Change of plan: ")})
    if step == "summary":
        return json.dumps({"summary": "The household plans the " + "project together."})
    numbers = [int(n) for n in re.findall(r"^\[(\d+)\]", user, re.M)]
    return json.dumps({"quotes": [*rng.sample(numbers, min(2, len(numbers))), 99999]})


def careless_model(request: dict[str, Any], rng: random.Random) -> str:
    system = str(request["messages"][0]["content"])
    if system in STEP_PROMPTS.values():
        return careless_step(request, rng)
    return careless(request, rng)


# ---------------------------------------------------------------- one conversation


@dataclass
class Score:
    topic: str
    decisions: str  # held / planted
    revision: bool
    no_false_decisions: bool
    hand_edit: bool
    quotes_true: bool
    forgotten: bool
    distillations: int
    failures: int
    seconds: float
    held: list[str] = field(default_factory=list)
    earlier: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    noise: int = 0  # held decisions that are none of the plants: remarks kept as decisions

    @property
    def points(self) -> tuple[int, int]:
        held, planted = (int(x) for x in self.decisions.split("/"))
        checks = [
            self.revision,
            self.no_false_decisions,
            self.hand_edit,
            self.quotes_true,
            self.forgotten,
        ]
        return held + sum(checks), planted + len(checks)


def _has(texts: list[str], words: str) -> bool:
    return any(words.lower() in t.lower() for t in texts)


def run_one(plan: Plan, llm: LLMClient, root: Path, seed: int, mode: str | None = None) -> Score:
    rng = random.Random(seed)
    folder = root / plan.topic
    os.environ["CHARLIE_HOME"] = str(folder)
    started = time.perf_counter()
    distillations = failures = 0
    problems: list[str] = []
    with Home.open(load_settings()) as home:
        project = create_project(home, plan.topic.title(), distill_every=EVERY)
        if mode is not None:
            project = update_project(home, project.slug, distill_mode=mode)
        channel = conversations.shared_channel(home, project)
        memory.ensure_file(home, channel)
        people = {
            name: ensure_user(home.db, re.sub(r"[^a-z]", "", name) or "someone")
            for name in plan.speakers
        }
        secret_id, author = 0, None
        for number, (speaker, text) in enumerate(script(plan, rng), start=1):
            person = people.get(speaker)
            role = "user" if person else "assistant"
            added = conversations.add_message(home, channel, role, text, user=person)
            if text == plan.secret:
                secret_id, author = added.id, person
            for event in chat.distill_due(home, llm, channel):
                if isinstance(event, chat.Distilled):
                    distillations += 1
                elif isinstance(event, chat.Notice):
                    failures += 1
                    problems.append(event.text[:160])
            if number == 15:  # the person writes a decision by hand
                path = project.memory_path
                path.write_text(
                    path.read_text().replace(
                        "## Recent quotes", f"- {plan.hand}\n\n## Recent quotes", 1
                    )
                )
            if number == 30 and author is not None:  # and its author forgets the secret
                forget.forget(home, channel, author, secret_id)
        try:  # what the cadence left: `charlie distill`
            for _ in batches.distill_all(home, channel, llm):
                distillations += 1
        except CharlieError as exc:  # counted, as a failure at the cadence is
            failures += 1
            problems.append(str(exc)[:160])
        list(chat.index_messages(home))
        held = memory.load(home, channel)
        texts, earlier = held.texts, [e.text for e in held.earlier]
        planted = sum(_has(texts, words) for _, words in plan.decisions)
        _, _, old, new = plan.revision
        # the old value superseded: no held decision says it without the new one
        # ("Thursday 11 December, not Tuesday 9 December" states the revision)
        stale = [t for t in texts if _has([t], old) and not _has([t], new)]
        revision = _has(texts, new) and _has(earlier, old) and not stale
        wanted = [*(w for _, w in plan.decisions), new, old, plan.hand]
        noise = sum(not any(w.lower() in t.lower() for w in wanted) for t in texts)
        false = [s.rstrip("?") for s in plan.suggestions if _has(texts, s.rstrip("?")[:25])]
        said = [m.content for m in conversations.recent(home, channel, 1000) if m.role == "user"]
        quotes_true = all(
            q.speaker != "Charlie"
            and any(memory.normalise(q.text) in memory.normalise(s) for s in said)
            for q in held.quotes
        )
        export = folder / "export.zip"
        archive.export_archive(home, export, exporter=next(iter(people.values())).name)
        home.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    secret = plan.secret.split()[-1].rstrip(".").encode()
    places = [p for p in folder.rglob("*") if p.is_file() and p != export]
    found = [str(p.relative_to(folder)) for p in places if secret in p.read_bytes()]
    with zipfile.ZipFile(export) as z:
        found += [f"export:{n}" for n in z.namelist() if secret in z.read(n)]
    if found:
        problems.append(f"the secret is still in {', '.join(found)}")
    return Score(
        plan.topic,
        f"{planted}/{len(plan.decisions)}",
        revision,
        not false,
        _has(texts, plan.hand),
        quotes_true,
        not found,
        distillations,
        failures,
        round(time.perf_counter() - started, 1),
        texts,
        earlier,
        problems,
        noise,
    )


CHECKS = ("decisions", "revision", "no_false_decisions", "hand_edit", "quotes_true", "forgotten")


def plot(runs: list[Path], path: Path, label: str = "") -> bool:
    """Each run's share of every check, side by side (runs from `--out`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return False
    results = [json.loads(run.read_text()) for run in runs]
    summaries = [result["summary"] for result in results]
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / len(summaries)
    for n, (result, summary) in enumerate(zip(results, summaries, strict=True)):
        count = summary["conversations"]
        shares = []
        for check in CHECKS:
            value = summary[check]  # "held/planted", or how many conversations passed
            held, total = value.split("/") if check == "decisions" else (value, count)
            shares.append(100 * int(held) / int(total))
        topics = " ".join(score["topic"] for score in result["scores"])
        legend = (
            f"{summary.get('distill_mode', '?')}, {topics}: {summary['points']} points, "
            f"{summary.get('seconds', '?')} s"
        )
        ax.bar([x + n * width for x in range(len(CHECKS))], shares, width, label=legend)
    ax.set_xticks([x + width * (len(summaries) - 1) / 2 for x in range(len(CHECKS))])
    ax.set_xticklabels([c.replace("_", " ") for c in CHECKS])
    ax.set_ylabel("held (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"Memory fidelity, {label or summaries[0]['model']}")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=8, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--server", action="store_true", help="the configured real server")
    parser.add_argument("--conversations", type=int, default=len(PLANS))
    parser.add_argument(
        "--topics", default="", help="only these conversations, comma-separated (e.g. party,car)"
    )
    parser.add_argument("--quick", action="store_true", help="one conversation: a smoke run")
    parser.add_argument(
        "--distill-mode",
        choices=["auto", "whole", "steps"],
        default=None,
        help="how each project distills (default: CHARLIE_DISTILL_MODE, else auto)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--plot", type=Path, help="draw the runs of --from here, run nothing")
    parser.add_argument("--from", dest="runs", type=Path, nargs="*", default=[])
    parser.add_argument("--label", default="", help="the model, as the plot names it")
    args = parser.parse_args()
    if args.plot:
        if plot(args.runs, args.plot, args.label):
            print(f"wrote {args.plot}")
        return
    plans = PLANS[: 1 if args.quick else args.conversations]
    if args.topics:
        wanted = args.topics.split(",")
        plans = [p for p in PLANS if p.topic in wanted]
        if len(plans) != len(wanted):
            parser.error(f"--topics: known ones are {', '.join(p.topic for p in PLANS)}")
    double: ScriptedLLMServer | None = None
    if args.server:
        settings = load_settings()
        llm = LLMClient.from_settings(settings)
        where = settings.llm_base_url
    else:
        double = ScriptedLLMServer(model="careless").start()
        rng = random.Random(args.seed)
        double.default = lambda request: careless_model(request, rng)
        llm = LLMClient(double.base_url, "careless", retries=0)
        where = "the scripted double (a careless model)"
    scores: list[Score] = []
    try:
        with tempfile.TemporaryDirectory(prefix="charlie-fidelity-") as root:
            for number, plan in enumerate(plans):
                try:
                    score = run_one(plan, llm, Path(root), args.seed + number, args.distill_mode)
                except CharlieError as exc:
                    print(f"{plan.topic}: {exc}", file=sys.stderr)
                    raise
                scores.append(score)
                got, total = score.points
                print(
                    f"{plan.topic:<8} decisions {score.decisions} revision={score.revision} "
                    f"no-false={score.no_false_decisions} hand={score.hand_edit} "
                    f"quotes={score.quotes_true} forgotten={score.forgotten} noise={score.noise} "
                    f"({got}/{total}; {score.distillations} distillations, {score.failures} "
                    f"failed, {score.seconds}s) {'; '.join(score.problems)[:200]}",
                    flush=True,
                )
    finally:
        llm.close()
        if double is not None:
            double.stop()
    got = sum(s.points[0] for s in scores)
    total = sum(s.points[1] for s in scores)
    held = sum(int(s.decisions.split("/")[0]) for s in scores)
    planted = sum(int(s.decisions.split("/")[1]) for s in scores)
    summary = {
        "model": where,
        "conversations": len(scores),
        "points": f"{got}/{total}",
        "decisions": f"{held}/{planted}",
        "revision": sum(s.revision for s in scores),
        "no_false_decisions": sum(s.no_false_decisions for s in scores),
        "hand_edit": sum(s.hand_edit for s in scores),
        "quotes_true": sum(s.quotes_true for s in scores),
        "forgotten": sum(s.forgotten for s in scores),
        "distillations": sum(s.distillations for s in scores),
        "failed": sum(s.failures for s in scores),
        "noise": sum(s.noise for s in scores),
        "distill_mode": args.distill_mode or os.environ.get("CHARLIE_DISTILL_MODE", "auto"),
        "seconds": round(sum(s.seconds for s in scores), 1),
    }
    print(json.dumps(summary, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"summary": summary, "machine": machine(), "scores": [asdict(s) for s in scores]},
            indent=1,
            ensure_ascii=False,
        )
    )
    print(f"wrote {args.out}")
    if got < total and not args.server:
        raise SystemExit(1)  # against the double every check must hold


if __name__ == "__main__":
    main()
