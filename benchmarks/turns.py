"""Chat-turn benchmark: prompt tokens per turn, and a turn's own overhead without the LLM.

Drives `charlie.chat.turn` through a long synthetic household conversation (alice and bob
talking with Charlie in one shared project that distils every 5 messages) against the
scripted OpenAI-compatible test double (`tests/llm_double.py`), run in a child process so
that, as with a real LM Studio or Ollama, the model's work never competes with Charlie's
for the interpreter. It measures two figures:

1. Prompt tokens sent per turn at message 10, 100, 500 and 1000, against sending the whole
   transcript (system prompt + every message so far). Charlie sends persona + memory + the
   messages since the last distillation, so the figure must stay flat as the talk grows.
   Tokens are *estimated* as ceil(characters / 4) of the message contents, for both sides:
   that is what the double reports as `usage.prompt_tokens`. The prompt of each
   distillation call (a second request, every `distill_every` messages) is recorded too.
2. The overhead of a turn excluding the LLM's own time: the wall time of consuming the
   whole `turn(...)` generator minus the time spent inside `LLMClient.stream` / `.chat`
   (HTTP round trip, streaming and its parsing included), as p50 / p99 over every turn,
   split into turns with and without a distillation. The target is under 20 ms.

User messages and replies are synthetic sentences of 10-60 words over a handful of
household topics; the double answers distillation requests with a valid memory (a bounded
summary, at most 12 decisions, quotes copied verbatim from the new messages), as a real
model would. Everything is seeded, so two runs send the same text.

    .venv/bin/python benchmarks/turns.py [--turns 500] [--distill-every 5] [--seed 7]

Prints a table, writes benchmarks/out/turns.json (git-ignored) and, when matplotlib is
installed (benchmark only: `.venv/bin/pip install matplotlib`), the plot
docs/benchmarks/turns-prompt-tokens.png. To see where a turn's time goes, `--profile`
runs cProfile around the turns only (not the setup, not the double) and prints the top
functions; the timings of a profiled run are inflated, so take them from a plain run:

    .venv/bin/python benchmarks/turns.py --profile
"""

from __future__ import annotations

import argparse
import cProfile
import json
import multiprocessing
import os
import pstats
import random
import re
import sys
import tempfile
import time
from collections.abc import Generator
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from support import machine, percentile

from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.conversations import shared_channel
from charlie.home import Home
from charlie.llm.client import Completion, Delta, LLMClient
from charlie.llm.messages import ChatMessage, ToolSchema
from charlie.projects import create_project
from charlie.users import User, ensure_user

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
DEFAULT_OUT = ROOT / "benchmarks" / "out" / "turns.json"
DEFAULT_PLOT = ROOT / "docs" / "benchmarks" / "turns-prompt-tokens.png"
MODEL = "test-model"
CHECKPOINTS = (10, 100, 500, 1000)  # message numbers
TARGET_MS = 20.0
MAX_DECISIONS = 12
DISTILL_MARKER = "You maintain the long-term memory"
CHANGE_MARKER = "You compare an earlier decision"  # charlie.memory.steps.CHANGE_PROMPT


def estimate_tokens(chars: int) -> int:
    """The double's estimate: characters / 4, rounded up."""
    return -(-chars // 4)


def message_chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(m["content"]) for m in messages if isinstance(m.get("content"), str))


# -- synthetic conversation ---------------------------------------------------------------------


@dataclass(frozen=True)
class Topic:
    title: str
    things: tuple[str, ...]
    people: tuple[str, ...]
    verbs: tuple[str, ...]
    adjectives: tuple[str, ...]


TOPICS = (
    Topic(
        "Kitchen renovation",
        ("the worktop", "the wall tiles", "the oven", "the sink", "the cabinets", "the lights"),
        ("the plumber", "the electrician", "the joiner", "the tiler"),
        ("order", "replace", "measure", "paint", "move"),
        ("oak", "white", "cheaper", "matte", "darker"),
    ),
    Topic(
        "Summer holiday",
        ("the ferry", "the cottage", "the car hire", "the campsite", "the train tickets"),
        ("grandma", "the travel agent", "the neighbours", "uncle Tom"),
        ("book", "compare", "cancel", "confirm", "pay for"),
        ("shorter", "cheaper", "seaside", "quieter", "earlier"),
    ),
    Topic(
        "Household budget",
        ("the energy bill", "the savings pot", "the insurance", "the phone contract"),
        ("the bank", "the accountant", "the landlord", "the broker"),
        ("cut", "renegotiate", "review", "switch", "split"),
        ("fixed-rate", "monthly", "yearly", "joint", "smaller"),
    ),
    Topic(
        "Vegetable garden",
        ("the tomatoes", "the raised beds", "the compost", "the water butt", "the seedlings"),
        ("the allotment club", "the garden centre", "our neighbour Sam"),
        ("plant", "water", "cover", "harvest", "prune"),
        ("organic", "bigger", "sunnier", "early", "hardy"),
    ),
    Topic(
        "School and activities",
        ("the swimming lessons", "the school trip", "the homework club", "the lunch money"),
        ("the teacher", "the swim coach", "the other parents", "the headteacher"),
        ("sign up for", "pay for", "drop off", "reschedule", "ask about"),
        ("weekly", "later", "nearer", "cheaper", "shorter"),
    ),
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "the weekend")
USER_TEMPLATES = (
    "Can we {verb} {thing} before {day}?",
    "{Person} said {thing} will cost about {amount} euros, more than we planned.",
    "I think we should {verb} {thing} first and leave {thing2} for later.",
    "Let's settle {thing} this week, because {person} is only free on {day}.",
    "I looked at {thing} again and I prefer the {adjective} option.",
    "Remember that {thing} must fit with {thing2}, so check the sizes.",
    "Could you remind me what we agreed about {thing} last time?",
    "We also need to {verb} {thing} with {person} on {day}.",
    "Honestly I would rather spend {amount} euros on {thing2} than on {thing}.",
)
REPLY_TEMPLATES = (
    "Good idea: if we {verb} {thing} first, {thing2} stays on schedule.",
    "Noted, {person} on {day} for {thing}.",
    "So far the plan is to {verb} {thing}, with about {amount} euros set aside for it.",
    "One thing to watch is {thing2}, since it depends on {thing}.",
    "I can draft a list with {thing}, {thing2} and the dates if that helps.",
    "The {adjective} option for {thing} is within the budget you agreed.",
    "Shall I note that {person} handles {thing} and you decide on {thing2} by {day}?",
)
FIRST_SENTENCE = re.compile(r"^.+?[.?!](?=\s|$)")


def topic_of(text: str) -> Topic:
    """The topic whose vocabulary the text uses most (the first on a tie)."""
    lowered = text.lower()

    def hits(topic: Topic) -> int:
        words = (*topic.things, *topic.people)
        return sum(lowered.count(w.removeprefix("the ").lower()) for w in words)

    return max(TOPICS, key=hits)


def sentence(rng: random.Random, topic: Topic, template: str) -> str:
    thing, thing2 = rng.sample(topic.things, 2)
    person = rng.choice(topic.people)
    return template.format(
        verb=rng.choice(topic.verbs),
        thing=thing,
        thing2=thing2,
        person=person,
        Person=person[0].upper() + person[1:],
        day=rng.choice(DAYS),
        amount=rng.randrange(40, 4000, 10),
        adjective=rng.choice(topic.adjectives),
    )


def message(rng: random.Random, topic: Topic, templates: tuple[str, ...]) -> str:
    """Sentences about `topic` adding up to 10-60 words."""
    target = rng.randint(10, 60)
    words: list[str] = []
    for template in rng.sample(templates, len(templates)):  # no sentence twice
        if len(words) >= target:
            break
        candidate = sentence(rng, topic, template).split()
        if words and len(words) + len(candidate) > 60:
            break
        words += candidate
    return " ".join(words[:60])


class Household:
    """alice and bob taking turns on one topic at a time, switching every 5-20 turns."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.topic = self.rng.choice(TOPICS)
        self.left = self.rng.randint(5, 20)

    def next(self) -> tuple[str, str]:
        if self.left == 0:
            self.topic = self.rng.choice([t for t in TOPICS if t is not self.topic])
            self.left = self.rng.randint(5, 20)
        self.left -= 1
        speaker = self.rng.choice(("alice", "bob"))
        return speaker, message(self.rng, self.topic, USER_TEMPLATES)


# -- the scripted model (runs in the child process) ---------------------------------------------


class ScriptedModel:
    """Answers chat requests with a plausible reply and distillations with a valid memory."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed + 1)

    def __call__(self, request: dict[str, Any]) -> str:
        messages = request["messages"]
        if messages[0]["content"].startswith(CHANGE_MARKER):  # is an earlier decision changed?
            return json.dumps({"now": ""})
        if "response_format" in request or messages[0]["content"].startswith(DISTILL_MARKER):
            return self.distill(messages[-1]["content"])
        last = messages[-1]["content"]
        return message(self.rng, topic_of(last), REPLY_TEMPLATES)

    def distill(self, prompt: str) -> str:
        head, _, rest = prompt.partition("\n\nNew messages, each as [number] speaker: text:\n")
        current = json.loads(head.removeprefix("Current memory:\n"))
        transcript = rest.rpartition("\n\nReturn the updated memory as JSON.")[0]
        said = [
            (m.group(1), m.group(2))
            for m in map(re.compile(r"^\[\d+\] ([^:]+): (.*)$").match, transcript.splitlines())
            if m
        ]
        people = [(who, text) for who, text in said if who != "Charlie"] or said
        listed = re.search(r"Topics so far: ([^.]*)\.", current["summary"])
        latest = topic_of(people[-1][1]).title
        earlier = [t for t in (listed.group(1).split(", ") if listed else []) if t != latest]
        topics = [*earlier[-3:], latest]  # the four most recent, as a model would keep
        first = FIRST_SENTENCE.match(people[-1][1])
        summary = (
            "alice and bob use this project to run household plans with Charlie. "
            f"Topics so far: {', '.join(topics)}. "
            f"Latest point: {first.group(0) if first else people[-1][1][:200]}"
        )
        who, text = self.rng.choice(people)
        point = FIRST_SENTENCE.match(text)
        decision = f"{topic_of(text).title}: {point.group(0) if point else text}"
        decisions = [d for d in current["decisions"] if d != decision] + [decision]
        quotes = [{"speaker": who, "text": point.group(0) if point else text}]
        answer = {"summary": summary, "decisions": decisions[-MAX_DECISIONS:], "quotes": quotes}
        return json.dumps(answer)


def serve(conn: Connection, seed: int, capacity: int) -> None:
    """Child process: run the double until told to stop, then report what it received."""
    sys.path.insert(0, str(TESTS))
    from llm_double import ScriptedLLMServer

    model = ScriptedModel(seed)
    with ScriptedLLMServer(model=MODEL) as server:
        for _ in range(capacity):
            server.respond(model)
        conn.send(server.base_url)
        conn.recv()
        received = [
            {
                "distill": "response_format" in body,
                "prompt_tokens": estimate_tokens(message_chars(body["messages"])),
                "system_tokens": estimate_tokens(message_chars(body["messages"][:1])),
                "messages": len(body["messages"]) - 1,
            }
            for body in server.requests
        ]
        conn.send({"requests": received, "errors": [repr(e) for e in server.handler_errors]})


# -- measuring -------------------------------------------------------------------------------


@dataclass
class Call:
    kind: str  # "chat" (the streamed reply) or "distill"
    seconds: float
    prompt_tokens: int | None


class TimedLLM(LLMClient):
    """An `LLMClient` that adds up the time spent inside its calls."""

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
        call = Call("chat", 0.0, None)
        self.calls.append(call)
        while True:
            started = time.perf_counter()
            try:
                item = next(inner)
            except StopIteration:
                call.seconds += time.perf_counter() - started
                return
            call.seconds += time.perf_counter() - started
            if isinstance(item, Completion):
                call.prompt_tokens = item.usage.get("prompt_tokens")
            yield item

    def chat(self, messages: list[ChatMessage], **kwargs: Any) -> Completion:
        started = time.perf_counter()
        try:
            result = super().chat(messages, **kwargs)
        finally:
            self.calls.append(Call("distill", time.perf_counter() - started, None))
        self.calls[-1].prompt_tokens = result.usage.get("prompt_tokens")
        return result


@dataclass
class TurnRecord:
    turn: int
    message: int  # number of the reply message; the prompt carries messages 1..message-1
    prompt_tokens: int
    full_transcript_tokens: int
    system_tokens: int  # persona + memory, as sent in the system message
    context_messages: int  # conversation messages sent after the system message
    distilled: bool
    distill_prompt_tokens: list[int]
    wall_ms: float
    llm_ms: float
    overhead_ms: float
    reply_overhead_ms: float  # the part before the Reply event, i.e. before it is shown


def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "mean": sum(values) / len(values),
        "max": max(values),
    }


def run(
    turns: int,
    distill_every: int,
    seed: int,
    home_dir: Path,
    profiler: cProfile.Profile | None = None,
) -> list[TurnRecord]:
    os.environ["CHARLIE_HOME"] = str(home_dir)
    for key in [k for k in os.environ if k.startswith("CHARLIE_") and k != "CHARLIE_HOME"]:
        del os.environ[key]  # no stray settings (quotes window, …) from the environment
    home = Home.open(load_settings(home=home_dir, tool_mode="native"))
    project = create_project(home, "Bench", slug="bench", distill_every=distill_every)
    channel = shared_channel(home, project)
    users: dict[str, User] = {name: ensure_user(home.db, name) for name in ("alice", "bob")}

    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    capacity = turns + turns * 2 // distill_every + 16
    server = context.Process(target=serve, args=(child, seed, capacity), daemon=True)
    server.start()
    child.close()  # so that a crashed child reads as EOFError here, not a hang
    llm = TimedLLM(parent.recv(), MODEL, retries=0)

    household = Household(seed)
    transcript_chars = 0  # every message so far, as the model would see it
    records: list[TurnRecord] = []
    try:
        for index in range(1, turns + 1):
            speaker, text = household.next()
            user = users[speaker]
            full_system = chat.system_prompt(home, channel, user, "")
            transcript_chars += len(f"{speaker}: {text}")
            before = len(llm.calls)

            if profiler is not None:
                profiler.enable()
            events: list[chat.Event] = []
            to_reply = 0.0
            started = time.perf_counter()
            for event in chat.turn(home, llm, channel, user, text):
                if isinstance(event, chat.Reply):  # shown: what follows is distillation
                    to_reply = time.perf_counter() - started - llm.calls[before].seconds
                events.append(event)
            wall = time.perf_counter() - started
            if profiler is not None:
                profiler.disable()

            calls = llm.calls[before:]
            notices = [e.text for e in events if isinstance(e, chat.Notice)]
            if notices:
                raise SystemExit(f"turn {index}: {notices}")  # numbers would be meaningless
            reply = next(e for e in events if isinstance(e, chat.Reply))
            llm_seconds = sum(c.seconds for c in calls)
            records.append(
                TurnRecord(
                    turn=index,
                    message=2 * index,
                    prompt_tokens=reply.prompt_tokens or 0,
                    full_transcript_tokens=estimate_tokens(len(full_system) + transcript_chars),
                    system_tokens=0,  # filled in from what the double received
                    context_messages=0,
                    distilled=any(isinstance(e, chat.Distilled) for e in events),
                    distill_prompt_tokens=[
                        c.prompt_tokens or 0 for c in calls if c.kind == "distill"
                    ],
                    wall_ms=wall * 1000,
                    llm_ms=llm_seconds * 1000,
                    overhead_ms=(wall - llm_seconds) * 1000,
                    reply_overhead_ms=to_reply * 1000,
                )
            )
            transcript_chars += len(reply.message.content)
            if index % 100 == 0:
                print(f"  {index} turns ({2 * index} messages)", file=sys.stderr)
    finally:
        llm.close()
        parent.send("stop")
        received = parent.recv()
        server.join(timeout=10)
        home.close()
    _check(records, received, llm.calls)
    return records


def _check(records: list[TurnRecord], received: dict[str, Any], calls: list[Call]) -> None:
    """The double saw exactly the requests we timed, with the prompt sizes we recorded."""
    if received["errors"]:
        raise SystemExit(f"the scripted model failed: {received['errors']}")
    seen = [(r["distill"], r["prompt_tokens"]) for r in received["requests"]]
    timed = [(c.kind == "distill", c.prompt_tokens) for c in calls]
    if seen != timed:
        raise SystemExit("the double's requests do not match the timed LLM calls")
    replies = [r for r in received["requests"] if not r["distill"]]
    if [r.prompt_tokens for r in records] != [r["prompt_tokens"] for r in replies]:
        raise SystemExit("Reply.prompt_tokens does not match the requests the double received")
    for record, request in zip(records, replies, strict=True):
        record.system_tokens = request["system_tokens"]
        record.context_messages = request["messages"]


# -- reporting ---------------------------------------------------------------------------------


def checkpoints(records: list[TurnRecord]) -> list[dict[str, Any]]:
    """The turn that produces message N (the reply), for each checkpoint N reached."""
    rows = []
    for number in CHECKPOINTS:
        if number > records[-1].message:
            continue
        record = records[(number + 1) // 2 - 1]
        rows.append(
            {
                "message": number,
                "turn": record.turn,
                "prompt_tokens": record.prompt_tokens,
                "system_tokens": record.system_tokens,
                "context_messages": record.context_messages,
                "full_transcript_tokens": record.full_transcript_tokens,
                "ratio": record.full_transcript_tokens / record.prompt_tokens,
            }
        )
    return rows


def phases(records: list[TurnRecord], count: int = 5) -> list[dict[str, Any]]:
    """Overhead p50 per consecutive block of turns: does a turn get slower as talk grows?"""
    size = max(1, len(records) // count)
    blocks = [records[i : i + size] for i in range(0, len(records), size)]
    return [
        {
            "turns": f"{block[0].turn}-{block[-1].turn}",
            "no_distill_p50": percentile([r.overhead_ms for r in block if not r.distilled], 50),
            "distill_p50": percentile([r.overhead_ms for r in block if r.distilled], 50),
        }
        for block in blocks
        if any(r.distilled for r in block) and not all(r.distilled for r in block)
    ]


def results(records: list[TurnRecord], config: dict[str, Any]) -> dict[str, Any]:
    overhead = [r.overhead_ms for r in records]
    distill_prompts = [t for r in records for t in r.distill_prompt_tokens]
    return {
        "command": " ".join([".venv/bin/python", "benchmarks/turns.py", *sys.argv[1:]]),
        "machine": machine(),
        "config": config,
        "token_estimate": "ceil(characters of the message contents / 4)",
        "prompt_tokens": {
            "checkpoints": checkpoints(records),
            "chat_max": max(r.prompt_tokens for r in records),
            "chat_max_after_turn_10": max(r.prompt_tokens for r in records[10:] or records),
            "system_max": max(r.system_tokens for r in records),
            "context_messages_max": max(r.context_messages for r in records),
            "distill_max": max(distill_prompts, default=0),
            "full_transcript_last": records[-1].full_transcript_tokens,
        },
        "overhead_ms": {
            "all": stats(overhead),
            "no_distill": stats([r.overhead_ms for r in records if not r.distilled]),
            "distill": stats([r.overhead_ms for r in records if r.distilled]),
            "until_reply": stats([r.reply_overhead_ms for r in records]),
            "by_phase": phases(records),
            "target_ms": TARGET_MS,
        },
        "llm_ms": stats([r.llm_ms for r in records]),
        "turns": [asdict(r) for r in records],
    }


def report(data: dict[str, Any]) -> None:
    tokens = data["prompt_tokens"]
    print("\nPrompt tokens per turn (estimated as chars/4)")
    print(f"{'message':>8} {'charlie':>8} {'sys+mem':>8} {'msgs':>5} {'full':>9} {'ratio':>7}")
    for row in tokens["checkpoints"]:
        print(
            f"{row['message']:>8} {row['prompt_tokens']:>8} {row['system_tokens']:>8} "
            f"{row['context_messages']:>5} {row['full_transcript_tokens']:>9} "
            f"{row['ratio']:>6.1f}x"
        )
    print(
        f"max over all turns: {tokens['chat_max']} (after turn 10: "
        f"{tokens['chat_max_after_turn_10']}); system prompt + memory at most "
        f"{tokens['system_max']}; at most {tokens['context_messages_max']} messages; "
        f"distillation prompts at most {tokens['distill_max']}"
    )
    over = data["overhead_ms"]
    print(f"\nTurn overhead excluding LLM time, ms (target < {TARGET_MS:g})")
    print(f"{'turns':<14} {'n':>5} {'p50':>7} {'p99':>7} {'mean':>7} {'max':>7}")
    for name in ("all", "no_distill", "distill", "until_reply"):
        s = over[name]
        if s["n"]:
            print(
                f"{name:<14} {s['n']:>5} {s['p50']:>7.2f} {s['p99']:>7.2f} "
                f"{s['mean']:>7.2f} {s['max']:>7.2f}"
            )
    print("\np50 by block of turns, ms")
    print(f"{'turns':<14} {'no distill':>10} {'distill':>10}")
    for block in over["by_phase"]:
        print(
            f"{block['turns']:<14} {block['no_distill_p50']:>10.2f} {block['distill_p50']:>10.2f}"
        )
    llm = data["llm_ms"]
    print(f"\nLLM time per turn (the double, excluded above): p50 {llm['p50']:.2f} ms")


def plot(records: list[TurnRecord], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return False
    messages = [r.message for r in records]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    ax.plot(messages, [r.full_transcript_tokens for r in records], label="full transcript")
    ax.plot(messages, [r.prompt_tokens for r in records], label="Charlie (reply prompt)")
    ax.plot(messages, [r.system_tokens for r in records], label="of which persona + memory", lw=0.8)
    distills = [(r.message, t) for r in records for t in r.distill_prompt_tokens]
    ax.scatter([m for m, _ in distills], [t for _, t in distills], s=4, label="distillation prompt")
    for number in CHECKPOINTS:
        if number <= messages[-1]:
            ax.axvline(number, color="grey", lw=0.5, ls=":")
    ax.set_yscale("log")
    ax.set_xlabel("message number in the conversation")
    ax.set_ylabel("prompt tokens (chars / 4, log scale)")
    ax.set_title("Prompt tokens per turn: bounded context vs the whole transcript")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, which="major", lw=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=500, help="turns (two messages each)")
    parser.add_argument("--distill-every", type=int, default=5, help="the project's cadence")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--home", type=Path, help="new data home to use (default: a temp folder)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results")
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT, help="PNG plot")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile the turns")
    args = parser.parse_args()
    if args.turns < 1:
        parser.error("--turns must be at least 1")
    if args.home and args.home.exists() and any(args.home.iterdir()):
        parser.error(f"--home {args.home} is not empty: give a new folder")

    with tempfile.TemporaryDirectory(prefix="charlie-bench-") as tmp:
        home_dir = args.home or Path(tmp) / "home"
        print(f"{args.turns} turns in {home_dir}", file=sys.stderr)
        profiler = cProfile.Profile() if args.profile else None
        records = run(args.turns, args.distill_every, args.seed, home_dir, profiler)
    if profiler is not None:
        path = args.out.with_suffix(".prof")
        path.parent.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(path)
        print(f"profile of the turns (LLM calls included), written to {path}:")
        stats = pstats.Stats(profiler).strip_dirs()
        stats.sort_stats("tottime").print_stats(20)
        stats.sort_stats("cumulative").print_stats(30)
        return  # a profiled run's timings are inflated: no results written
    config = {"turns": args.turns, "distill_every": args.distill_every, "seed": args.seed}
    data = results(records, config)
    report(data)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    if not args.no_plot and plot(records, args.plot):
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
