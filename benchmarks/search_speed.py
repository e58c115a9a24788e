"""Search speed at household scale: indexing, index size, memory and query latency.

For each size (default 10,000 and 100,000 notes) this builds a fresh data home of seeded
synthetic markdown notes, indexes it with `charlie.retrieval.index.Index.refresh()` and queries
it with `charlie.retrieval.search.Searcher`, measuring:

- indexing throughput (notes/s, chunks/s) of a from-scratch `refresh()`, split into the
  time inside the embedder and the rest (listing, reading + YAML, chunking, SQLite + FTS5);
- the cost of a no-change `refresh()` (the stat/mtime scan);
- the index on disk after a WAL checkpoint, per table (SQLite `dbstat`): vectors vs FTS5;
- peak memory (RSS high-water mark) of the indexing process and of the query process —
  each size and each phase runs in its own child process, so peaks never mix;
- the cold start of a query process (model load, vectors load, first query);
- query latency p50 / p99, query embedding included, in every mode (vector, keyword,
  fallback, fusion) with explain=False and explain=True, after a warm-up; the same for
  first-time query terms (IDF not cached yet), a one-project search, a search the way the
  web API and the tools make it (`searcher_for` with a stale index check), a per-stage
  breakdown of fusion, a cProfile of it, and diagnostics of the costs the profile points
  at (the keyword side with and without a project filter or common terms, IDF counts, the
  vectors load, the no-change refresh, a two-stage vector search).

The notes: ~50 household / work topics (authentication, Kubernetes, sourdough, taxes,
solar…), each with its own nouns and literals (`refresh_token`, `JWT`, `kubectl`, `401k`…);
sentences from templates, drawn from a per-topic pool (250 each), grouped in paragraphs,
headings and bullet lists; 30–400 words (log-normal, median ~110; about a quarter of the
notes are long enough to be cut into several chunks); YAML front matter with title, tags, created
and updated, written exactly as `charlie.notes.files.render` writes it; 20 projects, some notes in
sub-folders. Queries: natural questions, literal-carrying queries, two-word queries and
off-topic ones, seeded.

Every size's queries run twice, each in a fresh process: as shipped, and "tuned" — the same
code with one OpenBLAS thread (OPENBLAS_NUM_THREADS=1) and onnxruntime sessions that do not
spin (`session.intra_op.allow_spinning = 0`, patched in from here), the two settings the
profile of the shipped run points at. `--variants` picks the extra runs: `blas1` and `nospin`
(one setting each, latency table only) tell the two apart; `--variants` alone runs none.

Embeddings. Up to `--real-embed-max` notes (default 10,000) the index is built with the real
local model (`LocalEmbedder`, all-MiniLM-L6-v2 int8 on onnxruntime), so indexing
throughput is real. Above it (100,000 notes: about 40 minutes of model time on 2 idle
cores, hours on a busy one) the index is built with `PieceCacheEmbedder`: it embeds every
distinct piece of text of the generator's pools (title, heading, sentence) once with the
real model, and gives each chunk the normalised mean of its pieces' vectors. Those vectors
are approximations of the model's, but they are real 384-d unit vectors of real model
embeddings, so everything a query does (the brute-force matrix product, the FTS5 search,
the ranking) costs what it would; the query is always embedded by the real model. The
indexing time at such a size is reported without the embedder (the rest), and the total is
projected with the model throughput measured at the smaller size.

    .venv/bin/python benchmarks/search_speed.py [--sizes 10000 100000] [--queries 200]

One size at a time, keeping the data homes to query them again later:

    .venv/bin/python benchmarks/search_speed.py --sizes 100000 --merge --workdir DIR --keep
    .venv/bin/python benchmarks/search_speed.py --sizes 100000 --merge --workdir DIR --keep \
        --reuse    # queries only, on the kept home, with the earlier build results

Writes benchmarks/out/search-speed.json (git-ignored; cProfile listings next to it) and,
when matplotlib is installed, docs/benchmarks/search-speed-latency.png and
docs/benchmarks/search-speed-breakdown.png.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import hashlib
import importlib
import io
import json
import math
import os
import pstats
import random
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from support import code_fingerprint, machine

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "out" / "search-speed.json"
DEFAULT_PLOTS = ROOT / "docs" / "benchmarks"
GENERATOR_VERSION = "1"
PROJECTS = 20
SENTENCES_PER_TOPIC = 250
TITLES_PER_TOPIC = 40
USAGE_EVENTS = 2000
if TYPE_CHECKING:
    from charlie.retrieval.search import Mode

MODES: tuple[Mode, ...] = ("vector", "keyword", "fallback", "fusion")

# ----------------------------------------------------------------------------- vocabulary

# fmt: off
# (tag, title noun, nouns, literals). Literals are what people type as written: identifiers,
# acronyms, codes. They land in sentences (sometimes in backticks) and in queries.
TOPICS: list[tuple[str, str, str, str]] = [
    ("auth", "Login", "session token password cookie expiry rotation provider scope "
     "consent credential logout signup", "refresh_token JWT OAuth2 access_token"),
    ("kubernetes", "Cluster", "pod deployment node namespace ingress rollout replica "
     "manifest probe volume scheduler", "kubectl K8s HPA PodDisruptionBudget"),
    ("database", "Database", "table index query migration schema replica transaction "
     "connection backup vacuum lock", "PostgreSQL pg_dump WAL max_connections"),
    ("backups", "Backup", "snapshot archive restore bucket retention disk copy schedule "
     "checksum drive offsite", "restic S3 RPO backup_retention"),
    ("networking", "Network", "router subnet gateway firewall latency packet route "
     "address switch tunnel cable", "DNS TCP MTU ip_forward"),
    ("ci", "Pipeline", "build pipeline runner artifact cache job workflow test release "
     "branch merge tag", "CI build_cache ARM64 GITHUB_TOKEN"),
    ("python", "Python", "package module function virtualenv dependency test fixture "
     "decorator import typing profiler", "pytest asyncio PYTHONPATH mypy"),
    ("frontend", "Frontend", "component layout stylesheet button form bundle hook "
     "router state animation browser", "React CSS useEffect ESM"),
    ("monitoring", "Monitoring", "dashboard alert metric latency uptime pager "
     "threshold graph exporter incident log", "Prometheus SLO alert_rules p99"),
    ("security", "Security", "vulnerability patch certificate key firewall audit "
     "password phishing update scanner secret", "CVE TLS 2FA ssh_config"),
    ("gardening", "Garden", "tomato seedling compost bed soil mulch watering pruning "
     "greenhouse seed harvest", "NPK pH compost_bin"),
    ("cooking", "Dinner", "recipe pan oven sauce garlic onion stock spice roast "
     "marinade leftovers", "BBQ MSG meal_plan"),
    ("baking", "Bread", "sourdough starter flour dough loaf proof oven crust crumb "
     "hydration banneton", "levain_ratio KA5 T65"),
    ("budget", "Budget", "expense income category savings grocery subscription "
     "spreadsheet allowance bill envelope forecast", "YNAB monthly_budget CSV"),
    ("taxes", "Tax", "return deduction receipt payslip allowance refund deadline "
     "accountant form pension invoice", "HMRC W-2 1099-INT IRS"),
    ("mortgage", "Mortgage", "rate lender deposit valuation broker repayment term "
     "offer survey solicitor overpayment", "APR LTV ARM"),
    ("travel", "Trip", "itinerary hotel train visa passport luggage booking museum "
     "ferry guidebook adapter", "ESTA eSIM JR_pass"),
    ("flights", "Flight", "airport layover seat baggage checkin lounge delay "
     "connection ticket boarding terminal", "LHR SFO PNR"),
    ("hiking", "Hike", "trail summit map boots ridge campsite water route descent "
     "weather compass", "GPX AllTrails OS_map"),
    ("running", "Running", "pace interval tempo shoes marathon stride recovery "
     "warmup race mileage hill", "VO2max HRV 5K"),
    ("cycling", "Bike", "chain saddle gear tyre cadence climb commute helmet brake "
     "puncture wheel", "FTP Di2 Strava"),
    ("sleep", "Sleep", "bedtime alarm nap insomnia routine caffeine mattress "
     "pillow screen melatonin snoring", "CPAP REM sleep_score"),
    ("nutrition", "Nutrition", "protein vitamin breakfast snack calorie fibre "
     "supplement hydration portion sugar lunch", "B12 TDEE macros_v2"),
    ("health", "Health", "appointment doctor prescription symptom blood test "
     "referral scan allergy vaccine pharmacy", "MRI HbA1c GP"),
    ("school", "School", "homework teacher term uniform timetable report trip "
     "lunchbox reading spelling assembly", "PTA IEP SATs"),
    ("pets", "Dog", "walk vet lead food treat training kennel groomer flea "
     "insurance harness", "DHPP microchip_id"),
    ("car", "Car", "service tyre oil brake battery warning insurance mileage "
     "garage windscreen dashboard", "MOT OBD2 ABS"),
    ("renovation", "Kitchen", "cabinet worktop tile plaster paint builder quote "
     "sink extractor flooring skirting", "IKEA MDF quote_v3"),
    ("plumbing", "Plumbing", "leak pipe valve tap boiler radiator drain pressure "
     "washer fitting cistern", "PEX P-trap"),
    ("electrical", "Wiring", "socket circuit fuse breaker cable light switch "
     "electrician consumer load earth", "RCD GFCI AWG"),
    ("solar", "Solar", "panel inverter battery roof export tariff generation "
     "installer meter shading yield", "kWh MPPT inverter_limit"),
    ("heating", "Heating", "thermostat boiler radiator pump schedule insulation "
     "draught heatpump flow valve zone", "HVAC COP TRV"),
    ("insurance", "Insurance", "policy premium claim excess renewal cover broker "
     "quote document contents liability", "policy_number NCD"),
    ("investing", "Portfolio", "fund index allocation dividend rebalance fee "
     "account share bond broker contribution", "ETF VWRL ISA"),
    ("retirement", "Pension", "contribution employer annuity drawdown statement "
     "forecast age lump transfer scheme adviser", "401k SIPP RMD"),
    ("reading", "Books", "novel chapter author library shelf review series "
     "quote audiobook bookmark genre", "ISBN Kindle to_read"),
    ("music", "Guitar", "chord scale practice string song tuning metronome "
     "fingerpicking amp pedal lesson", "BPM DAW capo_2"),
    ("photography", "Photos", "lens camera exposure aperture shutter portrait "
     "album print tripod edit landscape", "ISO RAW Lightroom"),
    ("languages", "Spanish", "vocabulary grammar verb lesson flashcard tutor "
     "conversation tense podcast exam accent", "DELE B2 Anki"),
    ("chess", "Chess", "opening endgame tactic puzzle rating tournament clock "
     "gambit blunder variation study", "FEN Elo PGN"),
    ("woodworking", "Workshop", "plank chisel saw joint glue clamp sander finish "
     "router bench dovetail", "CNC PVA kreg_jig"),
    ("printing", "Printer", "filament nozzle bed layer slicer support model "
     "extruder calibration enclosure spool", "PLA PETG G-code"),
    ("homenet", "Wifi", "router access point mesh switch password guest channel "
     "firmware ethernet printer coverage", "VLAN WPA3 DHCP"),
    ("smarthome", "Automation", "sensor light switch scene hub thermostat motion "
     "routine dashboard battery integration", "MQTT Zigbee automation_id"),
    ("meetings", "Meeting", "agenda action minutes decision stakeholder followup "
     "priority deadline owner review retro", "OKR ADR one_on_one"),
    ("hiring", "Hiring", "candidate interview offer role rubric recruiter "
     "feedback salary onboarding reference panel", "ATS take_home"),
    ("roadmap", "Roadmap", "feature milestone release customer backlog estimate "
     "launch experiment metric priority scope", "MVP Q3 RICE"),
    ("writing", "Blog", "draft post outline editor headline newsletter audience "
     "paragraph publish feedback archive", "SEO RSS Markdown"),
    ("wedding", "Wedding", "venue guest caterer invitation dress photographer "
     "florist seating speech music budget", "RSVP DJ seating_plan"),
    ("moving", "Moving", "box van landlord deposit inventory utility address "
     "packing removal lease keys", "council_tax EPC"),
]
assert len(TOPICS) == 50

VERBS = [
    ("check", "checks", "checked"), ("update", "updates", "updated"),
    ("replace", "replaces", "replaced"), ("move", "moves", "moved"), ("fix", "fixes", "fixed"),
    ("compare", "compares", "compared"), ("review", "reviews", "reviewed"),
    ("clean", "cleans", "cleaned"), ("schedule", "schedules", "scheduled"),
    ("measure", "measures", "measured"), ("plan", "plans", "planned"),
    ("order", "orders", "ordered"), ("test", "tests", "tested"),
    ("configure", "configures", "configured"), ("document", "documents", "documented"),
    ("renew", "renews", "renewed"), ("cancel", "cancels", "cancelled"),
    ("split", "splits", "split"), ("label", "labels", "labelled"),
    ("track", "tracks", "tracked"), ("simplify", "simplifies", "simplified"),
]
ADJECTIVES = [
    "new", "old", "cheap", "slow", "fast", "quiet", "small", "spare", "shared", "weekly",
    "broken", "reliable", "manual", "automatic", "expensive", "temporary", "second", "main",
    "larger", "smaller", "default", "noisy",
]
STATES = [
    "ready", "full", "stale", "missing", "expired", "empty", "late", "noisy", "wrong", "fine",
    "unclear",
]
WHEN = [
    "next week", "on Friday", "before the holidays", "this month", "tomorrow", "after lunch",
    "at the weekend", "by the end of the quarter", "in spring", "tonight",
]
PEOPLE = ["Anna", "Ben", "Chloe", "Dan", "Emma", "Farid", "Grace", "Hugo", "Iris", "Jonas"]
HEADINGS = [
    "Next steps", "Open questions", "Decisions", "Notes", "Links", "Costs", "Timeline",
    "Problems", "Ideas", "Summary", "Checklist", "Background",
]
KINDS = [
    "notes", "checklist", "plan", "log", "ideas", "review", "summary", "how-to", "questions",
    "decisions", "research", "comparison", "draft", "retro",
]
EXTRA_TAGS = ["todo", "idea", "reference", "done", "waiting", "household", "work", "2024"]
SENTENCE_TEMPLATES = [
    "We should {v} the {n1} before the {n2} {when}.",
    "The {a} {n1} {v3} the {n2} when the {n3} is {state}.",
    "I noticed that the {n1} needs a {a} {n2}.",
    "Remember to {v} {lit} after the {n1} is {vp}.",
    "Next time, {v} the {n1} with a {a} {n2}.",
    "The {a} {n1} worked better than the old {n2}.",
    "The {n1} cost about {num} pounds, which is more than the {n2}.",
    "Ask {person} about the {n1} and the {n2} {when}.",
    "If the {n1} fails, check `{lit}` and the {n2}.",
    "Decision: keep the {n1} and drop the {n2} until {when2}.",
    "{Person} {vp} the {n1} and says the {n2} is {state}.",
    "Open question: do we {v} the {n1} or the {n2} first?",
    "The {n1} and {lit} are linked, so {v} them together.",
    "It took {num} minutes to {v} the {n1}, mostly because of the {n2}.",
    "Try a {a} {n1} instead of the {n2} and compare the {n3}.",
    "Note to self: the {n1} is {state} again, {v} it {when}.",
]
QUESTION_TEMPLATES = [
    "how do I {v} the {n1} for the {n2}",
    "what did we decide about the {n1} and the {n2}",
    "when should I {v} the {a} {n1}",
    "why is the {n1} {state}",
    "notes on the {a} {n1} and {n2}",
    "what does {person} think about the {n1}",
    "cost of the {n1} compared to the {n2}",
    "steps to {v} the {n1} {when}",
]
LITERAL_TEMPLATES = [
    "{lit} {n1} {n2}",
    "why does {lit} break the {n1}",
    "how to {v} {lit} for the {n1}",
    "`{lit}` {n1} settings",
    "{lit} and {lit2}",
]
OFF_TOPIC = [
    "quantum entanglement lecture", "medieval castle architecture", "volcano eruption risk",
    "opera tickets for the premiere", "deep sea submarine documentary",
    "origami crane instructions", "astronomy telescope eyepiece", "knitting a wool scarf",
    "jazz improvisation theory", "beekeeping hive inspection",
]
# fmt: on


@dataclass(frozen=True)
class Topic:
    tag: str
    noun: str
    nouns: list[str]
    literals: list[str]


def topics() -> list[Topic]:
    return [Topic(t, n, ns.split(), ls.split()) for t, n, ns, ls in TOPICS]


def _fill(template: str, rng: random.Random, topic: Topic, other: Topic) -> str:
    nouns = rng.sample(topic.nouns, 3)
    if rng.random() < 0.15:
        nouns[rng.randrange(3)] = rng.choice(other.nouns)
    verb = rng.choice(VERBS)
    person = rng.choice(PEOPLE)
    lits = rng.sample(topic.literals, 2) if len(topic.literals) > 1 else topic.literals * 2
    return template.format(
        v=verb[0],
        v3=verb[1],
        vp=verb[2],
        n1=nouns[0],
        n2=nouns[1],
        n3=nouns[2],
        a=rng.choice(ADJECTIVES),
        state=rng.choice(STATES),
        when=rng.choice(WHEN),
        when2=rng.choice(WHEN).removeprefix("on ").removeprefix("at ").removeprefix("in "),
        lit=lits[0],
        lit2=lits[1],
        num=rng.randrange(2, 400),
        person=person,
        Person=person,
    )


@dataclass
class Pools:
    """The finite pools every note is drawn from (so the piece cache can cover them)."""

    topics: list[Topic]
    sentences: list[list[str]]  # per topic
    titles: list[list[str]]  # per topic

    def pieces(self) -> list[str]:
        out = [s for group in self.sentences for s in group]
        out += [t for group in self.titles for t in group]
        return sorted(set(out + HEADINGS))


def make_pools(seed: int) -> Pools:
    rng = random.Random(f"pools-{seed}")
    tops = topics()
    sentences: list[list[str]] = []
    titles: list[list[str]] = []
    for topic in tops:
        seen: set[str] = set()
        group: list[str] = []
        while len(group) < SENTENCES_PER_TOPIC:
            sentence = _fill(rng.choice(SENTENCE_TEMPLATES), rng, topic, rng.choice(tops))
            if sentence not in seen:
                seen.add(sentence)
                group.append(sentence)
        sentences.append(group)
        names: set[str] = set()
        while len(names) < TITLES_PER_TOPIC:
            noun = rng.choice(topic.nouns)
            names.add(f"{topic.noun} {noun} {rng.choice(KINDS)}")
        titles.append(sorted(names))
    return Pools(tops, sentences, titles)


def note_words(rng: random.Random) -> int:
    """30–400 words, log-normal (median ~90): most notes short, some long ones chunked."""
    return int(min(400, max(30, rng.lognormvariate(math.log(90), 0.6))))


def make_note(rng: random.Random, pools: Pools, topic_index: int) -> tuple[str, list[str], str]:
    """(title, tags, body) of one synthetic note about `topic_index`."""
    topic = pools.topics[topic_index]
    second = rng.randrange(len(pools.topics))
    title = rng.choice(pools.titles[topic_index])
    target = note_words(rng)

    def sentence() -> str:
        r = rng.random()
        index = topic_index if r < 0.82 else second if r < 0.95 else rng.randrange(50)
        return rng.choice(pools.sentences[index])

    blocks: list[str] = []
    if rng.random() < 0.3:
        blocks.append(f"# {title}")
    words = 0
    while words < target:
        kind = rng.random()
        if blocks and kind < 0.12:
            blocks.append(f"## {rng.choice(HEADINGS)}")
            continue
        if kind < 0.3:
            items = [f"- {sentence()}" for _ in range(rng.randint(2, 5))]
            blocks.append("\n".join(items))
            words += sum(len(item.split()) for item in items)
        else:
            text = " ".join(sentence() for _ in range(rng.randint(1, 4)))
            blocks.append(text)
            words += len(text.split())
    tags = [topic.tag, *rng.sample(EXTRA_TAGS, rng.randint(0, 2))]
    if rng.random() < 0.2:
        tags.append(pools.topics[second].tag)
    return title, list(dict.fromkeys(tags)), "\n\n".join(blocks)


def make_queries(pools: Pools, count: int, seed: int) -> list[tuple[str, str]]:
    """(kind, text) queries: questions, literal-carrying, two-word and off-topic ones."""
    rng = random.Random(f"queries-{seed}")
    out: list[tuple[str, str]] = []
    for i in range(count):
        topic = pools.topics[rng.randrange(len(pools.topics))]
        r = (i * 0.6180339887) % 1.0  # an even spread of kinds, in a mixed order
        if r < 0.55:
            kind, template = "question", rng.choice(QUESTION_TEMPLATES)
        elif r < 0.80:
            kind, template = "literal", rng.choice(LITERAL_TEMPLATES)
        elif r < 0.92:
            kind, template = "two-word", "{n1} {n2}"
        else:
            out.append(("off-topic", rng.choice(OFF_TOPIC)))
            continue
        text = _fill(template, rng, topic, topic)
        out.append((kind, text.replace("`", "") if rng.random() < 0.5 else text))
    return out


# ----------------------------------------------------------------------------- embedders


class TimedEmbedder:
    """Wraps an embedder; counts texts and the seconds spent inside `embed`."""

    def __init__(self, inner: Any, *, cpu: bool = False) -> None:
        self.inner = inner
        self.track_cpu = cpu  # getrusage() can take milliseconds with busy threads: build only
        self.seconds = 0.0
        self.cpu = 0.0  # process CPU seconds (all threads) spent inside embed
        self.texts = 0
        self.calls = 0
        self.last = 0.0

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def load(self) -> None:
        self.inner.load()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        cpu = cpu_seconds() if self.track_cpu else 0.0
        start = time.perf_counter()
        out: npt.NDArray[np.float32] = self.inner.embed(texts)
        self.last = time.perf_counter() - start
        self.seconds += self.last
        if self.track_cpu:
            self.cpu += cpu_seconds() - cpu
        self.texts += len(texts)
        self.calls += 1
        return out


_PIECE_SPLIT = re.compile(r"\n+|(?<=[.!?])\s+")
_MARKUP = re.compile(r"^(?:#+\s*|-\s+)")


class PieceCacheEmbedder:
    """The local model, with a cache of the pieces the synthetic notes are made of.

    Every distinct piece (title, heading, sentence) is embedded once by the real model;
    a text's vector is the normalised mean of its pieces' vectors. Used only to build large
    indexes whose real embedding would not fit in the run; its name is the real model's,
    so the index it builds is one the real model can query.
    """

    def __init__(self, inner: Any, cache: dict[str, npt.NDArray[np.float32]]) -> None:
        self.inner = inner
        self.cache = cache
        self.misses = 0

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            pieces = [_MARKUP.sub("", p).strip() for p in _PIECE_SPLIT.split(text)]
            pieces = [p for p in pieces if p]
            missing = [p for p in dict.fromkeys(pieces) if p not in self.cache]
            if missing:
                self.misses += len(missing)
                for piece, vector in zip(missing, self.inner.embed(missing), strict=True):
                    self.cache[piece] = vector
            if pieces:
                total = np.sum([self.cache[p] for p in pieces], axis=0)
                out[row] = total / max(float(np.linalg.norm(total)), 1e-12)
        return out


def piece_cache(pools: Pools, embedder: Any, path: Path) -> tuple[dict[str, Any], float]:
    """Vectors of every pool piece, from `path` when it has them; (cache, seconds spent)."""
    pieces = pools.pieces()
    digest = hashlib.sha256("\n".join([embedder.name, *pieces]).encode()).hexdigest()[:16]
    if path.exists():
        with np.load(path, allow_pickle=False) as data:
            if str(data["digest"]) == digest:
                return dict(zip(pieces, data["vectors"], strict=True)), 0.0
    start = time.perf_counter()
    vectors = embedder.embed(pieces)
    seconds = time.perf_counter() - start
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, digest=np.array(digest), vectors=vectors)
    return dict(zip(pieces, vectors, strict=True)), seconds


# ----------------------------------------------------------------------------- helpers


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def cpu_seconds() -> float:
    """CPU time of this process, every thread, user + system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def stats_ms(samples: Sequence[float]) -> dict[str, float]:
    """p50 / p90 / p99 / mean / max of `samples` (seconds), in milliseconds."""
    array = np.asarray(samples, dtype=np.float64) * 1000.0
    if not len(array):
        return {}
    p50, p90, p99 = np.percentile(array, [50, 90, 99])
    return {
        "n": len(array),
        "p50": round(float(p50), 3),
        "p90": round(float(p90), 3),
        "p99": round(float(p99), 3),
        "mean": round(float(array.mean()), 3),
        "max": round(float(array.max()), 3),
    }


def open_home(home_dir: Path) -> Any:
    os.environ["CHARLIE_HOME"] = str(home_dir)
    from charlie.config import load_settings
    from charlie.home import Home

    return Home.open(load_settings(home=home_dir))


def timed_call(fn: Callable[..., Any], bucket: dict[str, float], key: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            bucket[key] = bucket.get(key, 0.0) + time.perf_counter() - start

    return wrapper


# ----------------------------------------------------------------------------- build phase


def generate(home: Any, size: int, pools: Pools, seed: int) -> dict[str, Any]:
    """Write `size` notes over `PROJECTS` projects, as `charlie.notes.files.render` would."""
    from charlie.notes.files import NOTES_DIR, render
    from charlie.projects import create_project

    rng = random.Random(f"notes-{seed}")
    projects = []
    for p in range(PROJECTS):
        focus = [(3 * p + k) % len(pools.topics) for k in range(3)] + [(p * 7 + 40) % 50]
        projects.append((create_project(home, f"Project {p:02d}"), focus))
    base = datetime(2024, 1, 1, tzinfo=UTC)
    words = 0
    folders = ["", "", "", "", "archive", "meetings", "2023", "drafts/old"]
    start = time.perf_counter()
    for i in range(size):
        project, focus = projects[i % PROJECTS]
        topic = rng.choice(focus) if rng.random() < 0.8 else rng.randrange(len(pools.topics))
        title, tags, body = make_note(rng, pools, topic)
        created = base + timedelta(minutes=rng.randrange(60 * 24 * 700))
        updated = created + timedelta(minutes=rng.randrange(60 * 24 * 60))
        meta = {
            "title": title,
            "tags": tags,
            "created": created.isoformat(),
            "updated": updated.isoformat(),
        }
        folder = rng.choice(folders)
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        path = project.path / NOTES_DIR / folder / f"{slug}-{i:06d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(meta, body), encoding="utf-8")
        words += len(body.split())
    return {
        "notes": size,
        "projects": PROJECTS,
        "words_total": words,
        "words_mean": round(words / size, 1),
        "seconds": round(time.perf_counter() - start, 2),
    }


def record_usage(home: Any, size: int, seed: int) -> int:
    """A person's history: views, citations and tag uses over the last 90 days."""
    from charlie.retrieval import usage
    from charlie.users import ensure_user

    rng = random.Random(f"usage-{seed}")
    alice = ensure_user(home.db, "alice")
    # Only notes at the top of a notes folder: `usage.record` refuses the key of a note in
    # a sub-folder ("project/sub/name"), see docs/benchmarks/search-speed.md.
    keys = [
        f"{r['project']}/{r['name']}"
        for r in home.index_db.execute("SELECT project, name FROM notes ORDER BY id")
        if "/" not in r["name"]
    ]
    hot = rng.sample(keys, min(len(keys), 300))
    now = datetime.now(UTC)
    home.db.execute("BEGIN")
    for _ in range(USAGE_EVENTS):
        at = now - timedelta(days=rng.random() * 90)
        r = rng.random()
        if r < 0.7:
            usage.record(home.db, alice.id, "view", note=rng.choice(hot), at=at)
        elif r < 0.85:
            usage.record(home.db, alice.id, "cited", note=rng.choice(hot), at=at)
        else:
            tag = rng.choice([t[0] for t in TOPICS])
            usage.record(home.db, alice.id, "tag", tag=tag, at=at)
    home.db.execute("COMMIT")
    ensure_user(home.db, "bob")
    return USAGE_EVENTS


def index_size(db: sqlite3.Connection, db_path: Path, chunks: int, dim: int) -> dict[str, Any]:
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    files = {
        p.name: p.stat().st_size for p in db_path.parent.glob(db_path.name + "*") if p.is_file()
    }
    tables: dict[str, int] = {}
    for name, size in db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
        tables[str(name)] = int(size)
    fts = sum(v for k, v in tables.items() if k.startswith("chunks_fts"))
    chunk_table = tables.get("chunks", 0)
    vectors = chunks * dim * 4  # the float32 blobs, stored in the chunks table's rows
    total = sum(files.values())
    return {
        "files": files,
        "total_bytes": total,
        "tables": dict(sorted(tables.items(), key=lambda kv: -kv[1])),
        "chunks_table_bytes": chunk_table,
        "vector_payload_bytes": vectors,
        "fts_bytes": fts,
        "vector_share": round(vectors / total, 3) if total else 0.0,
        "fts_share": round(fts / total, 3) if total else 0.0,
    }


def build_phase(args: argparse.Namespace) -> dict[str, Any]:
    import charlie.retrieval.index as index_module
    from charlie.retrieval.embeddings import LocalEmbedder
    from charlie.retrieval.index import Index

    size, home_dir = args.size, Path(args.home)
    out: dict[str, Any] = {"size": size, "loadavg_start": loadavg(), "code": code_fingerprint()}
    pools = make_pools(args.seed)
    home = open_home(home_dir)
    out["generate"] = generate(home, size, pools, args.seed)
    print(f"  [{size}] generated notes in {out['generate']['seconds']} s", file=sys.stderr)

    local = LocalEmbedder()
    local.load()
    real = size <= args.real_embed_max
    if real:
        inner: Any = local
        out["embedder"] = "real"
    else:
        cache_path = Path(args.out).parent / f"search-speed-pieces-{args.seed}.npz"
        cache, seconds = piece_cache(pools, local, cache_path)
        inner = PieceCacheEmbedder(local, cache)
        out["embedder"] = "piece-cache"
        out["piece_cache"] = {"pieces": len(cache), "embed_seconds": round(seconds, 1)}
        print(f"  [{size}] piece cache: {len(cache)} pieces ({seconds:.0f} s)", file=sys.stderr)
    embedder = TimedEmbedder(inner, cpu=True)

    # Time the parts of refresh() that are not the embedder (wrapped where index.py looks
    # them up; nothing in charlie/ is changed).
    parts: dict[str, float] = {}
    names = index_module.__dict__
    names["read_note"] = timed_call(names["read_note"], parts, "read_note")
    names["chunk_text"] = timed_call(names["chunk_text"], parts, "chunk_text")
    names["find"] = timed_call(names["find"], parts, "list_files")
    names["hashlib"] = _TimedHashlib(parts)

    index = Index(home, embedder)
    cpu = cpu_seconds()
    start = time.perf_counter()
    report = index.refresh()
    total = time.perf_counter() - start
    cpu = cpu_seconds() - cpu
    out["loadavg_after_refresh"] = loadavg()
    stats = index.stats()
    chunks = int(stats["chunks"] or 0)
    rest = total - embedder.seconds
    sqlite_etc = rest - sum(parts.values())
    out["refresh"] = {
        "seconds": round(total, 2),
        "added": len(report.added),
        "problems": len(report.problems),
        "notes": stats["notes"],
        "chunks": chunks,
        "chunks_per_note": round(chunks / size, 3),
        "embed_seconds": round(embedder.seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "embed_cpu_seconds": round(embedder.cpu, 2),
        "embed_texts": embedder.texts,
        "rest_seconds": round(rest, 2),
        "rest_parts_seconds": {k: round(v, 2) for k, v in parts.items()}
        | {"sqlite_and_other": round(sqlite_etc, 2)},
        "notes_per_s": round(size / total, 1),
        "chunks_per_s": round(chunks / total, 1),
        "rest_notes_per_s": round(size / rest, 1),
        "rest_chunks_per_s": round(chunks / rest, 1),
        "embed_chunks_per_s": round(embedder.texts / embedder.seconds, 1)
        if embedder.seconds
        else None,
    }
    if not real:
        out["refresh"]["piece_cache_misses"] = inner.misses
    print(
        f"  [{size}] refresh: {total:.1f} s ({chunks} chunks; embed {embedder.seconds:.1f} s)",
        file=sys.stderr,
    )
    out["peak_rss_mib_build"] = round(peak_rss_mib(), 1)

    # A no-change refresh: the stat/mtime scan of every note file.
    noop = []
    for _ in range(3):
        start = time.perf_counter()
        again = index.refresh()
        noop.append(time.perf_counter() - start)
        assert not again.changed, "a no-change refresh changed the index"
    out["noop_refresh_ms"] = stats_ms(noop)

    out["usage_events"] = record_usage(home, size, args.seed)
    out["index_size"] = index_size(home.index_db, home.index_path, chunks, embedder.dim)
    vocab = home.index_db.execute(
        "SELECT term, doc FROM chunks_vocab ORDER BY doc DESC LIMIT 12"
    ).fetchall()
    out["commonest_terms"] = [[str(t), int(d)] for t, d in vocab]
    out["fts_terms"] = home.index_db.execute("SELECT count(*) FROM chunks_vocab").fetchone()[0]
    if real:
        stride = max(1, chunks // args.ab_texts)
        texts = [
            f"{title}\n{text}"
            for title, text in home.index_db.execute(
                "SELECT notes.title, chunks.text FROM chunks JOIN notes ON notes.id = "
                "chunks.note_id WHERE chunks.id % ? = 0 ORDER BY chunks.id LIMIT ?",
                (stride, args.ab_texts),
            )
        ]
        out["embed_spinning_ab"] = spinning_ab(texts)
    out["loadavg_end"] = loadavg()
    home.close()
    return out


def spinning_ab(texts: list[str], rounds: int = 2) -> dict[str, Any]:
    """Indexing-style embedding throughput (texts/s) of the shipped onnxruntime session
    against one that does not spin, alternated on the same chunk texts."""
    from charlie.retrieval.embeddings import LocalEmbedder

    shipped = LocalEmbedder()
    shipped.load()
    no_spinning_sessions()
    quiet = LocalEmbedder()
    quiet.load()
    seconds: dict[str, list[float]] = {"shipped": [], "no spinning": []}
    cpu: dict[str, float] = {"shipped": 0.0, "no spinning": 0.0}
    for _ in range(rounds):
        for name, embedder in (("shipped", shipped), ("no spinning", quiet)):
            before = cpu_seconds()
            start = time.perf_counter()
            embedder.embed(texts)
            seconds[name].append(time.perf_counter() - start)
            cpu[name] += cpu_seconds() - before
    out: dict[str, Any] = {"texts": len(texts), "rounds": rounds, "loadavg": loadavg()}
    for name, v in seconds.items():
        out[f"{name} texts/s"] = round(len(texts) * len(v) / sum(v), 1)
        out[f"{name} cpu ms/text"] = round(cpu[name] / (len(texts) * len(v)) * 1000, 1)
    return out


class _TimedHashlib:
    """Stands in for the `hashlib` module inside `charlie.retrieval.index`: times sha256."""

    def __init__(self, bucket: dict[str, float]) -> None:
        self.bucket = bucket

    def sha256(self, data: bytes) -> Any:
        start = time.perf_counter()
        digest = hashlib.sha256(data)
        self.bucket["sha256"] = self.bucket.get("sha256", 0.0) + time.perf_counter() - start
        return digest


# ----------------------------------------------------------------------------- query phase


def run_queries(
    searcher: Any,
    queries: Sequence[str],
    user: Any,
    *,
    mode: str,
    explain: bool,
    projects: Sequence[Any] = (),
) -> tuple[list[float], list[Any]]:
    times: list[float] = []
    results: list[Any] = []
    for text in queries:
        start = time.perf_counter()
        result = searcher.search(text, user, projects, limit=10, mode=mode, explain=explain)
        times.append(time.perf_counter() - start)
        results.append(result)
    return times, results


def breakdown(
    searcher: Any, embedder: TimedEmbedder, queries: Sequence[str], user: Any, explain: bool
) -> dict[str, float]:
    """Median ms per stage of a fusion query, by wrapping the searcher's own steps. Stages
    that the shipped code overlaps (the keyword side runs beside the vector side) are run
    one after the other here, so that they add up to the total."""
    stages: dict[str, list[float]] = {}
    bucket: dict[str, float] = {}
    shipped_config = searcher.config
    if hasattr(shipped_config, "parallel"):
        searcher.config = dataclasses.replace(shipped_config, parallel=False)
    original = {
        name: getattr(searcher, name) for name in ("_vector_side", "_keyword_side", "_rank")
    }
    original["_explain"] = searcher._explain
    original["idf"] = searcher.idf
    for name, fn in original.items():
        setattr(searcher, name, timed_call(fn, bucket, name))
    usage = searcher.usage
    object.__setattr__(
        usage, "boosts", timed_call(type(usage).boosts.__get__(usage), bucket, "boosts")
    )
    try:
        for text in queries:
            bucket.clear()
            embedder.last = 0.0
            start = time.perf_counter()
            searcher.search(text, user, (), limit=10, mode="fusion", explain=explain)
            total = time.perf_counter() - start
            parts = {
                "query embedding": embedder.last,
                "vector side (matrix, top-k)": bucket.get("_vector_side", 0.0) - embedder.last,
                "keyword side (FTS5 BM25)": bucket.get("_keyword_side", 0.0),
                "term IDF": bucket.get("idf", 0.0),
                "usage boosts": bucket.get("boosts", 0.0),
                "explain (terms, snippets)": bucket.get("_explain", 0.0),
            }
            parts["rank (note rows, sort)"] = (
                bucket.get("_rank", 0.0)
                - parts["usage boosts"]
                - parts["explain (terms, snippets)"]
            )
            parts["other"] = total - sum(parts.values())
            parts["total"] = total
            for key, value in parts.items():
                stages.setdefault(key, []).append(value)
    finally:
        for name in original:
            delattr(searcher, name)
        object.__delattr__(usage, "boosts")
        searcher.config = shipped_config
    return {key: round(float(np.median(v)) * 1000, 3) for key, v in stages.items()}


def micro(index: Any, embedder: TimedEmbedder, queries: Sequence[str]) -> dict[str, Any]:
    """The vector side's numpy steps alone, on the real matrix."""
    vectors = index.vectors()
    matrix = vectors.matrix
    qs = embedder.embed(list(queries[:50]))
    out: dict[str, Any] = {"matrix_shape": list(matrix.shape), "matrix_mib": matrix.nbytes / 2**20}

    def clock(fn: Callable[[], Any], reps: int = 50) -> float:
        samples = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return round(float(np.median(samples)) * 1000, 3)

    q = qs[0]
    sims = matrix @ q
    depth = min(len(sims), 400)
    one_project = int(vectors.project_ids[0])
    mask = vectors.project_ids == one_project
    sub = np.ascontiguousarray(matrix[mask])
    half = matrix.astype(np.float16)
    out["matmul_ms"] = clock(lambda: matrix @ q)
    out["argpartition_ms"] = clock(lambda: np.argpartition(-sims, depth - 1)[:depth])
    out["isin_where_ms"] = clock(
        lambda: np.where(np.isin(vectors.project_ids, [one_project]), sims, -np.inf)
    )
    out["matmul_one_project_slice_ms"] = clock(lambda: sub @ q)
    out["matmul_float16_ms"] = clock(lambda: half @ q.astype(np.float16), reps=5)
    out["query_embedding_ms"] = clock(lambda: embedder.embed([queries[0]]))
    out["two_stage"] = two_stage(vectors, qs, clock)
    out["vector_table"] = vector_table(vectors, qs, clock)
    return out


def diagnostics(
    home: Any, index: Any, searcher: Any, queries: Sequence[str], project_id: int
) -> dict[str, Any]:
    """Costs behind the profile, each measured alone on this index."""
    from charlie.retrieval.keywords import match_expression

    db = index.db
    out: dict[str, Any] = {}

    def median_ms(samples: list[float]) -> float:
        return round(float(np.median(samples)) * 1000, 3)

    # The keyword side with and without a project filter (the project's `scope` token in the
    # MATCH).
    terms = [searcher.search(q, *_bob(home), limit=1, mode="keyword").terms for q in queries]
    everywhere, one_project = [], []
    for t in terms:
        start = time.perf_counter()
        searcher._keyword_side(t, [])
        everywhere.append(time.perf_counter() - start)
        start = time.perf_counter()
        searcher._keyword_side(t, [project_id])
        one_project.append(time.perf_counter() - start)
    out["keyword_side_all_projects_ms"] = median_ms(everywhere)
    out["keyword_side_one_project_ms"] = median_ms(one_project)

    # How many chunks the OR'ed terms match (BM25 is computed for each), and the keyword
    # side with the terms found in more than 5% of the chunks left out (the rarest kept).
    def count(items: list[str]) -> int:
        expression = match_expression(items)
        if expression is None:
            return 0
        return int(
            db.execute(
                "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (expression,)
            ).fetchone()[0]
        )

    total = len(index.vectors().chunk_ids)
    share = {x: count([x]) / total for t in terms for x in t} if total else {}

    def rare(items: list[str]) -> list[str]:
        kept = [x for x in items if share[x] <= 0.05]
        return kept or sorted(items, key=lambda x: share[x])[:1]

    floored = []
    for t in terms:
        start = time.perf_counter()
        searcher._keyword_side(rare(t), [])
        floored.append(time.perf_counter() - start)
    out["keyword_terms_per_query_median"] = float(np.median([len(t) for t in terms]))
    out["keyword_matching_chunks_median"] = float(np.median([count(t) for t in terms]))
    out["keyword_side_df_floor_5pct_ms"] = median_ms(floored)
    out["keyword_matching_chunks_df_floor_5pct_median"] = float(
        np.median([count(rare(t)) for t in terms])
    )

    # The IDF count of a term, as `Searcher.idf` runs it, for the queries' terms.
    counts = []
    for term in sorted({x for t in terms for x in t})[:60]:
        start = time.perf_counter()
        db.execute(
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (match_expression([term]),)
        ).fetchone()
        counts.append(time.perf_counter() - start)
    out["idf_count_query_ms"] = {"terms": len(counts), "p50": median_ms(counts)}
    out["idf_count_query_ms"]["max"] = round(max(counts) * 1000, 3) if counts else None

    out["bm25_cost"] = bm25_cost(db)

    # Loading the vectors: the shipped row-by-row copy against one frombuffer of the blobs.
    start = time.perf_counter()
    rows = db.execute(
        "SELECT chunks.id, chunks.note_id, notes.project_id, chunks.vector FROM chunks "
        "JOIN notes ON notes.id = chunks.note_id ORDER BY chunks.id"
    ).fetchall()
    fetched = time.perf_counter()
    matrix = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    joined = time.perf_counter()
    out["vectors_load_alternative_ms"] = {
        "fetch_rows": round((fetched - start) * 1000, 1),
        "frombuffer_join": round((joined - fetched) * 1000, 1),
        "shape": list(matrix.shape),
    }
    del rows, matrix, ids

    # The no-change refresh, profiled: where the stat scan's time goes.
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    index.refresh()
    profiler.disable()
    out["noop_refresh_ms"] = round((time.perf_counter() - start) * 1000, 1)
    raw: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    out["noop_refresh_profile"] = [
        {
            "function": f"{Path(file).name}:{line}({func})",
            "calls": calls,
            "tottime_ms": round(tottime * 1000, 1),
            "cumtime_ms": round(cumtime * 1000, 1),
        }
        for (file, line, func), (_cc, calls, tottime, cumtime, _) in sorted(
            raw.items(), key=lambda kv: -kv[1][2]
        )[:12]
    ]
    # The floor: one os.scandir walk with a stat per note file, nothing else.
    start = time.perf_counter()
    files = _scan(home.settings.projects_dir)
    out["scandir_walk_ms"] = {"files": files, "ms": round((time.perf_counter() - start) * 1000, 1)}
    return out


def bm25_cost(db: Any, points: int = 12) -> dict[str, Any]:
    """What FTS5's `bm25()` costs a matched row: single terms of a spread of frequencies
    (from the vocabulary's 30th percentile to its commonest), each counted and ranked (best
    of 5 runs), and the least-squares cost per row of ranking over counting."""
    vocab = db.execute("SELECT term, doc FROM chunks_vocab ORDER BY doc").fetchall()
    if len(vocab) < points:
        return {"skipped": "too few terms"}
    picks = [vocab[int(i)] for i in np.linspace(len(vocab) * 0.3, len(vocab) - 1, points)]

    def best_ms(sql: str, term: str) -> tuple[float, list[Any]]:
        runs, found = [], []
        for _ in range(5):
            start = time.perf_counter()
            found = db.execute(sql, (f'"{term}"',)).fetchall()
            runs.append(time.perf_counter() - start)
        return round(min(runs) * 1000, 3), found

    terms = []
    for term, _docs in picks:
        counted, found = best_ms("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", term)
        ranked, _ = best_ms(
            "SELECT rowid, bm25(chunks_fts, 2.0, 1.0, 0.0, 0.0) AS rank FROM chunks_fts "
            "WHERE chunks_fts MATCH ? ORDER BY rank LIMIT 1",
            term,
        )
        matched = int(found[0][0])  # the term as a query matches (its stem stemmed again)
        terms.append({"term": term, "chunks": matched, "count_ms": counted, "bm25_ms": ranked})
    terms = [t for t in terms if t["chunks"]]
    if not terms:
        return {"skipped": "no term matched"}
    rows = np.array([t["chunks"] for t in terms], dtype=np.float64)
    extra = np.array([t["bm25_ms"] - t["count_ms"] for t in terms])
    slope = float(rows @ extra / (rows @ rows))
    return {"terms": terms, "us_per_row": round(slope * 1000, 3)}


def _bob(home: Any) -> tuple[Any]:
    from charlie.users import get_user

    return (get_user(home.db, "bob"),)


def _scan(folder: Path) -> int:
    count = 0
    stack = [str(folder)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.name.endswith(".md"):
                    entry.stat()
                    count += 1
    return count


def _top_notes(sims: Any, note_ids: Any, rows: Any, depth: int = 400, k: int = 100) -> list[int]:
    """The vector side's rule: best `depth` chunks, first `k` distinct notes."""
    depth = min(len(sims), depth)
    top = np.argpartition(-sims, depth - 1)[:depth]
    top = top[np.argsort(-sims[top])]
    return list(dict.fromkeys(int(note_ids[rows[i]]) for i in top))[:k]


def two_stage(
    vectors: Any, qs: Any, clock: Callable[..., float], dims: int = 128, shortlist: int = 4000
) -> dict[str, Any]:
    """A possible fix, measured: scan a 128-d projection, re-score a shortlist exactly.

    The projection is onto the top right-singular vectors of a sample of the stored
    vectors (uncentred, so dot products are preserved as well as 128 dimensions can).
    Reports its time per query and the recall of the exact vector side's 100 notes.
    """
    matrix, note_ids = vectors.matrix, vectors.note_ids
    n = len(matrix)
    if n < 2 * shortlist:
        return {"skipped": f"only {n} chunks"}
    rng = np.random.default_rng(0)
    sample = matrix[rng.choice(n, min(n, 20_000), replace=False)]
    _, _, vt = np.linalg.svd(sample, full_matrices=False)
    proj = np.ascontiguousarray(vt[:dims].T, dtype=np.float32)
    reduced = np.ascontiguousarray(matrix @ proj)
    everything = np.arange(n)

    def search(q: Any) -> list[int]:
        coarse = reduced @ (q @ proj)
        short = np.argpartition(-coarse, shortlist - 1)[:shortlist]
        exact = matrix[short] @ q
        return _top_notes(exact, note_ids, short)

    recalls, top10 = [], []
    for q in qs:
        truth = _top_notes(matrix @ q, note_ids, everything)
        got = search(q)
        recalls.append(len(set(truth) & set(got)) / len(truth))
        top10.append(len(set(truth[:10]) & set(got[:10])) / 10)
    return {
        "dims": dims,
        "shortlist_chunks": shortlist,
        "reduced_mib": round(reduced.nbytes / 2**20, 1),
        "exact_vector_side_ms": clock(lambda: _top_notes(matrix @ qs[0], note_ids, everything)),
        "two_stage_ms": clock(lambda: search(qs[0])),
        "recall_at_100_notes": round(float(np.mean(recalls)), 4),
        "top10_overlap": round(float(np.mean(top10)), 4),
    }


def vector_table(vectors: Any, qs: Any, clock: Callable[..., float]) -> dict[str, Any]:
    """The shipped vector search (`Vectors.table`, `charlie.retrieval.vectors`) against the exact
    product: ms per query over the sample's queries, and whether it finds the same 100
    notes (best 400 chunks, first 100 distinct notes) and the same 400 chunks."""
    table = getattr(vectors, "table", None)
    if table is None:
        return {"skipped": "no charlie.retrieval.vectors table"}
    matrix, note_ids = vectors.matrix, vectors.note_ids
    everything = np.arange(len(matrix))
    same_notes = same_chunks = 0
    best = min(400, len(matrix))  # fewer chunks than that in a small (smoke) sample
    for q in qs:
        rows, _ = table.top(q, best)
        got = list(dict.fromkeys(int(note_ids[r]) for r in rows))[:100]
        same_notes += got == _top_notes(matrix @ q, note_ids, everything)
        exact = np.argpartition(-(matrix @ q), best - 1)[:best]
        same_chunks += set(rows.tolist()) == set(exact.tolist())
    return {
        "two_stage": table.reduced is not None,
        "queries": len(qs),
        "top400_ms": round(clock(lambda: [table.top(q, best) for q in qs], reps=5) / len(qs), 3),
        "exact_top400_ms": round(
            clock(lambda: [np.argpartition(-(matrix @ q), best - 1)[:best] for q in qs], reps=5)
            / len(qs),
            3,
        ),
        "same_100_notes_in_order": same_notes,
        "same_400_chunks": same_chunks,
        "reduced_mib": round(table.reduced.codes.nbytes / 2**20, 1) if table.reduced else 0,
    }


def profile_fusion(
    searcher: Any, queries: Sequence[str], user: Any, explain: bool, path: Path
) -> list[dict[str, Any]]:
    profiler = cProfile.Profile()
    profiler.enable()
    for text in queries:
        searcher.search(text, user, (), limit=10, mode="fusion", explain=explain)
    profiler.disable()
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    top: list[dict[str, Any]] = []
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (file, line, func), (_cc, calls, tottime, cumtime, _) in sorted(
        raw.items(), key=lambda kv: -kv[1][2]
    )[:15]:
        top.append(
            {
                "function": f"{Path(file).name}:{line}({func})",
                "calls_per_query": round(calls / len(queries), 2),
                "tottime_ms_per_query": round(tottime / len(queries) * 1000, 3),
                "cumtime_ms_per_query": round(cumtime / len(queries) * 1000, 3),
            }
        )
    return top


def _upkeep() -> Any:
    """The module that keeps the index fresh (older code: `charlie.retrieval.search`)."""
    try:
        return importlib.import_module("charlie.retrieval.upkeep")
    except ImportError:
        return importlib.import_module("charlie.retrieval.search")


def _age_last_check(home: Any, seconds: float) -> None:
    import charlie.retrieval.search as search

    kept = _upkeep()
    if hasattr(kept, "Freshness"):
        home.shared.of(kept.Freshness).checked_at -= seconds
    else:
        home.shared[search.CHECKED] -= seconds  # type: ignore[attr-defined]  # older code


def api_path(home: Any, embedder: Any, queries: Sequence[str], user: Any) -> dict[str, Any]:
    """A search as the web API makes it: `searcher_for(home)` (a new Index and Searcher, an
    empty IDF cache; the model and the vectors stay cached in `home.shared`), then `search`
    with the default mode and explanations. First with the files checked in every request
    (`max_age=0`: the no-change refresh), then as shipped: a due check runs in the
    background while the request searches."""
    factory = getattr(_upkeep(), "searcher_for", None)
    if factory is None or not hasattr(home, "shared"):
        return {"skipped": "this code has no searcher_for"}
    index_module = importlib.import_module("charlie.retrieval.index")
    if hasattr(index_module, "NoteIndex"):  # a typed home.shared (older code: a dict)
        home.shared.of(index_module.NoteIndex).embedder = embedder
    else:
        home.shared["embedder"] = embedder  # loaded once per server process
    made, searched, total = [], [], []
    for text in queries:
        start = time.perf_counter()
        searcher = factory(home, max_age=0.0)
        middle = time.perf_counter()
        searcher.search(text, user, (), limit=10)
        end = time.perf_counter()
        made.append(middle - start)
        searched.append(end - middle)
        total.append(end - start)
    out = {
        "total": stats_ms(total),
        "searcher_for (refresh check)": stats_ms(made),
        "search (cold IDF cache)": stats_ms(searched),
    }
    waiter = getattr(_upkeep(), "wait_for_index_check", None)
    if waiter is None:
        return out
    # As shipped (the check due every 10 s runs in a thread of its own): a request that
    # finds the check due starts it and searches at once, alongside it; one that finds
    # the last check recent just searches.
    due, idle = [], []
    for text in queries:
        waiter(home)
        _age_last_check(home, 3600)  # the last check is an hour old
        start = time.perf_counter()
        factory(home).search(text, user, (), limit=10)
        due.append(time.perf_counter() - start)
        waiter(home)
        start = time.perf_counter()
        factory(home).search(text, user, (), limit=10)
        idle.append(time.perf_counter() - start)
    out["check due: runs in the background, total"] = stats_ms(due)
    out["no check due, total"] = stats_ms(idle)
    return out


def no_spinning_sessions() -> None:
    """Make every onnxruntime session built from now on idle its threads instead of
    spinning (`session.intra_op.allow_spinning = 0`): what the "tuned" variant measures."""
    import onnxruntime

    shipped = onnxruntime.SessionOptions

    class NoSpin(shipped):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.add_session_config_entry("session.intra_op.allow_spinning", "0")

    onnxruntime.SessionOptions = NoSpin


def query_phase(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "size": args.size,
        "loadavg_start": loadavg(),
        "code": code_fingerprint(),
    }
    start = time.perf_counter()
    from charlie.projects import list_projects
    from charlie.retrieval.embeddings import LocalEmbedder
    from charlie.retrieval.index import Index
    from charlie.retrieval.search import SearchConfig, Searcher
    from charlie.users import get_user

    out["import_seconds"] = round(time.perf_counter() - start, 3)
    out["variant"] = args.variant
    if args.variant in ("nospin", "tuned"):
        no_spinning_sessions()
    light = args.variant in ("blas1", "nospin")  # attribution runs: latency table only
    cold: dict[str, float] = {}
    start = time.perf_counter()
    home = open_home(Path(args.home))
    embedder = TimedEmbedder(LocalEmbedder())
    index = Index(home, embedder)
    cold["open_home_and_index_ms"] = (time.perf_counter() - start) * 1000
    start = time.perf_counter()  # a home kept from older code gets its chunks' words kept
    index.refresh()
    out["query_phase_refresh_s"] = round(time.perf_counter() - start, 1)
    start = time.perf_counter()
    embedder.load()
    cold["model_load_ms"] = (time.perf_counter() - start) * 1000
    out["rss_mib_after_model_load"] = round(rss_mib(), 1)

    pools = make_pools(args.seed)
    kinds_and_queries = make_queries(pools, args.queries, args.seed)
    queries = [q for _, q in kinds_and_queries]
    alice = get_user(home.db, "alice")

    # The first query of a fresh process: loads every vector into memory, counts the IDF
    # of its terms, embeds the query.
    searcher = Searcher(home, index, SearchConfig())
    vectors_bucket: dict[str, float] = {}
    index.vectors = timed_call(index.vectors, vectors_bucket, "vectors")  # type: ignore[method-assign]
    start = time.perf_counter()
    searcher.search(queries[0], alice, (), limit=10, mode="fusion", explain=False)
    cold["first_query_ms"] = (time.perf_counter() - start) * 1000
    cold["of_which_vectors_load_ms"] = vectors_bucket.get("vectors", 0.0) * 1000
    del index.vectors
    out["cold"] = {k: round(v, 2) for k, v in cold.items()}
    out["rss_mib_after_vectors_load"] = round(rss_mib(), 1)
    print(f"  [{args.size}] cold first query {cold['first_query_ms']:.0f} ms", file=sys.stderr)

    # First-time terms: a fresh searcher has no IDF cached (the vectors stay loaded).
    # (A light run only fills the cache.)
    searcher = Searcher(home, index, SearchConfig())
    times, _ = run_queries(searcher, queries, alice, mode="fusion", explain=False)
    if not light:
        out["fusion_first_time_terms_ms"] = stats_ms(times)

    # Warm-up, then every mode with and without explanations.
    run_queries(
        searcher, queries[: max(20, len(queries) // 10)], alice, mode="fusion", explain=True
    )
    # Interleaved: each query runs in all eight (mode, explain) settings in a row, in an
    # order rotated per query, so a burst of load from elsewhere hits every setting alike.
    combos = [(mode, explain) for mode in MODES for explain in (False, True)]
    times_by: dict[tuple[Mode, bool], list[float]] = {c: [] for c in combos}
    fallback_keyword = 0
    best_cosines: list[float] = []
    for i, text in enumerate(queries):
        shift = i % len(combos)
        for mode, explain in combos[shift:] + combos[:shift]:
            start = time.perf_counter()
            result = searcher.search(text, alice, (), limit=10, mode=mode, explain=explain)
            times_by[(mode, explain)].append(time.perf_counter() - start)
            if mode == "fallback" and not explain:
                fallback_keyword += result.keyword_used
                best_cosines.append(result.best_cosine or 0.0)
    latency: dict[str, Any] = {}
    for (mode, explain), times in times_by.items():
        latency[f"{mode}/{'explain' if explain else 'plain'}"] = stats_ms(times)
        print(
            f"  [{args.size}] {mode:8} explain={explain!s:5} p50 {np.median(times) * 1000:7.1f} ms",
            file=sys.stderr,
        )
    out["latency_ms"] = latency
    out["fallback_keyword_used"] = fallback_keyword
    out["best_cosine_median"] = round(float(np.median(best_cosines)), 3)

    out["breakdown_fusion_plain_ms"] = breakdown(searcher, embedder, queries, alice, False)
    if light:
        out["loadavg_end"] = loadavg()
        home.close()
        return out

    by_kind: dict[str, list[float]] = {}
    times, _ = run_queries(searcher, queries, alice, mode="fusion", explain=False)
    for (kind, _), t in zip(kinds_and_queries, times, strict=True):
        by_kind.setdefault(kind, []).append(t)
    out["fusion_plain_by_query_kind_ms"] = {k: stats_ms(v) for k, v in by_kind.items()}

    projects = list_projects(home)
    times, _ = run_queries(
        searcher, queries, alice, mode="fusion", explain=False, projects=projects[:1]
    )
    out["fusion_one_project_ms"] = stats_ms(times)
    bob = get_user(home.db, "bob")
    times, _ = run_queries(searcher, queries, bob, mode="fusion", explain=False)
    out["fusion_user_without_usage_ms"] = stats_ms(times)

    out["breakdown_fusion_explain_ms"] = breakdown(searcher, embedder, queries, alice, True)
    out["api_path_ms"] = api_path(home, embedder, queries[:50], alice)
    out["micro"] = micro(index, embedder, queries)
    out["diagnostics"] = diagnostics(home, index, searcher, queries[:50], projects[0].id)
    prof_dir = Path(args.out).parent
    sample = queries[: min(100, len(queries))]
    out["profile_fusion_plain"] = profile_fusion(
        searcher,
        sample,
        alice,
        False,
        prof_dir / f"search-speed-{args.size}-{args.variant}-plain.prof.txt",
    )
    out["profile_fusion_explain"] = profile_fusion(
        searcher,
        sample,
        alice,
        True,
        prof_dir / f"search-speed-{args.size}-{args.variant}-explain.prof.txt",
    )
    out["peak_rss_mib_query"] = round(peak_rss_mib(), 1)
    out["loadavg_end"] = loadavg()
    home.close()
    return out


# ----------------------------------------------------------------------------- driver


def child(
    phase: str, size: int, home: Path, args: argparse.Namespace, variant: str = "shipped"
) -> Any:
    result = Path(args.out).parent / f"search-speed-{size}-{phase}-{variant}.json"
    env = dict(os.environ)
    if variant in ("blas1", "tuned"):
        env["OPENBLAS_NUM_THREADS"] = "1"  # one BLAS thread for the query's matrix product
    command = [
        sys.executable,
        __file__,
        "--phase",
        phase,
        "--size",
        str(size),
        "--home",
        str(home),
        "--queries",
        str(args.queries),
        "--seed",
        str(args.seed),
        "--out",
        str(args.out),
        "--real-embed-max",
        str(args.real_embed_max),
        "--result",
        str(result),
        "--variant",
        variant,
        "--ab-texts",
        str(args.ab_texts),
    ]
    subprocess.run(command, check=True, timeout=args.timeout, env=env)
    return json.loads(result.read_text(encoding="utf-8"))


def scaling(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Growth from the smallest to the largest size: ratio and exponent (cost ∝ n^k)."""
    if len(results) < 2:
        return {}
    a, b = results[0], results[-1]
    n = b["size"] / a["size"]

    def grow(x: float, y: float) -> dict[str, float]:
        ratio = y / x if x else float("nan")
        return {"ratio": round(ratio, 2), "exponent": round(math.log(ratio) / math.log(n), 2)}

    out: dict[str, Any] = {"sizes": [a["size"], b["size"]]}
    for key in a["query"]["latency_ms"]:
        out[f"{key} p50"] = grow(
            a["query"]["latency_ms"][key]["p50"], b["query"]["latency_ms"][key]["p50"]
        )
    if "query_tuned" in a and "query_tuned" in b:
        for key in a["query_tuned"]["latency_ms"]:
            out[f"tuned {key} p50"] = grow(
                a["query_tuned"]["latency_ms"][key]["p50"],
                b["query_tuned"]["latency_ms"][key]["p50"],
            )
    out["noop_refresh"] = grow(
        a["build"]["noop_refresh_ms"]["p50"], b["build"]["noop_refresh_ms"]["p50"]
    )
    out["index_bytes"] = grow(
        a["build"]["index_size"]["total_bytes"], b["build"]["index_size"]["total_bytes"]
    )
    out["refresh_rest_seconds"] = grow(
        a["build"]["refresh"]["rest_seconds"], b["build"]["refresh"]["rest_seconds"]
    )
    out["vectors_load_ms"] = grow(
        a["query"]["cold"]["of_which_vectors_load_ms"],
        b["query"]["cold"]["of_which_vectors_load_ms"],
    )
    out["peak_rss_query"] = grow(a["query"]["peak_rss_mib_query"], b["query"]["peak_rss_mib_query"])
    for key in a["query"]["breakdown_fusion_plain_ms"]:
        out[f"fusion stage {key}"] = grow(
            max(a["query"]["breakdown_fusion_plain_ms"][key], 1e-6),
            max(b["query"]["breakdown_fusion_plain_ms"][key], 1e-6),
        )
    return out


def project_real_indexing(results: list[dict[str, Any]]) -> None:
    """For piece-cache sizes: the indexing time with the real model, from its measured rate."""
    real = [r for r in results if r["build"]["embedder"] == "real"]
    if not real:
        return
    words_per_s = (
        real[-1]["build"]["generate"]["words_total"] / real[-1]["build"]["refresh"]["embed_seconds"]
    )
    for r in results:
        if r["build"]["embedder"] == "real":
            continue
        refresh = r["build"]["refresh"]
        embed = r["build"]["generate"]["words_total"] / words_per_s
        total = embed + refresh["rest_seconds"]
        refresh["projected_real"] = {
            "embed_seconds": round(embed),
            "total_seconds": round(total),
            "notes_per_s": round(r["size"] / total, 1),
            "chunks_per_s": round(refresh["chunks"] / total, 1),
            "basis": f"the model's {words_per_s:.0f} note words/s at {real[-1]['size']} notes",
        }


def report(data: dict[str, Any]) -> None:
    for r in data["results"]:
        b, q = r["build"], r["query"]
        ref = b["refresh"]
        print(f"\n== {r['size']:,} notes ({b['embedder']} embeddings) ==")
        print(
            f"refresh: {ref['seconds']} s, {ref['notes_per_s']} notes/s, {ref['chunks_per_s']} "
            f"chunks/s; embed {ref['embed_seconds']} s, rest {ref['rest_seconds']} s "
            f"({ref['rest_notes_per_s']} notes/s); no-change refresh "
            f"{b['noop_refresh_ms']['p50']} ms"
        )
        size = b["index_size"]
        print(
            f"index: {size['total_bytes'] / 2**20:.1f} MiB (vectors {size['vector_share']:.0%}, "
            f"FTS {size['fts_share']:.0%}); peak RSS build {b['peak_rss_mib_build']} MiB, "
            f"query {q['peak_rss_mib_query']} MiB"
        )
        print(f"cold: {q['cold']}")
        for key, s in q["latency_ms"].items():
            print(f"  {key:20} p50 {s['p50']:8.2f}  p99 {s['p99']:8.2f}  ms")
        print(f"  breakdown fusion/plain: {q['breakdown_fusion_plain_ms']}")
        for run in [k for k in r if k.startswith("query_")]:
            t = r[run]
            print(f"{t['variant']} (1 BLAS thread and/or no onnxruntime spinning):")
            for key, s in t["latency_ms"].items():
                print(f"  {key:20} p50 {s['p50']:8.2f}  p99 {s['p99']:8.2f}  ms")
            print(f"  breakdown fusion/plain: {t['breakdown_fusion_plain_ms']}")


def plot(data: dict[str, Any], folder: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return []
    results = data["results"]
    sizes = [r["size"] for r in results]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), dpi=120, sharey=True)
    for ax, flavour in zip(axes, ("plain", "explain"), strict=True):
        for mode in MODES:
            key = f"{mode}/{flavour}"
            p50 = [r["query"]["latency_ms"][key]["p50"] for r in results]
            p99 = [r["query"]["latency_ms"][key]["p99"] for r in results]
            (line,) = ax.plot(sizes, p50, marker="o", label=f"{mode} p50")
            ax.plot(sizes, p99, marker="x", ls="--", color=line.get_color(), label=f"{mode} p99")
        if all("query_tuned" in r for r in results):
            for mode in ("vector", "fusion"):
                key = f"{mode}/{flavour}"
                p50 = [r["query_tuned"]["latency_ms"][key]["p50"] for r in results]
                ax.plot(
                    sizes,
                    p50,
                    marker="^",
                    ls=":",
                    color="black" if mode == "fusion" else "grey",
                    label=f"{mode} p50, tuned",
                )
        ax.axhline(20, color="red", lw=0.8, ls=":", label="target p50 20 ms")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("notes")
        ax.set_title(f"explain={'True' if flavour == 'explain' else 'False'}")
        ax.grid(True, which="both", lw=0.3)
    axes[0].set_ylabel("query latency, ms (log)")
    axes[1].legend(fontsize=7, ncol=2)
    fig.suptitle("Charlie search latency vs number of notes (2 cores, query embedding included)")
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    latency_path = folder / "search-speed-latency.png"
    fig.savefig(latency_path)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=120)
    labels: list[str] = []
    stacks: dict[str, list[float]] = {}
    for r in results:
        runs = [("query", "plain"), ("query", "explain"), ("query_tuned", "plain")]
        for run, flavour in runs:
            if run not in r:
                continue
            tuned = ", tuned" if run == "query_tuned" else ""
            labels.append(f"{r['size']:,}\n{flavour}{tuned}")
            parts = r[run][f"breakdown_fusion_{flavour}_ms"]
            for key, value in parts.items():
                if key != "total":
                    stacks.setdefault(key, []).append(max(value, 0.0))
    bottom = np.zeros(len(labels))
    for key, values in stacks.items():
        ax.bar(labels, values, bottom=bottom, label=key)
        bottom += np.asarray(values)
    ax.axhline(20, color="red", lw=0.8, ls=":", label="target 20 ms")
    ax.set_ylabel("median ms per fusion query")
    ax.set_title("Where a fusion query's time goes (medians of each stage)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    breakdown_path = folder / "search-speed-breakdown.png"
    fig.savefig(breakdown_path)
    plt.close(fig)
    return [latency_path, breakdown_path, *plot_bm25_cost(results, folder)]


def plot_bm25_cost(results: list[dict[str, Any]], folder: Path) -> list[Path]:
    """The keyword side's cost per matched chunk, from the largest size's diagnostics."""
    import matplotlib.pyplot as plt

    found = [r for r in results if "terms" in r["query"]["diagnostics"].get("bm25_cost", {})]
    if not found:
        return []
    largest = max(found, key=lambda r: r["size"])
    cost = largest["query"]["diagnostics"]["bm25_cost"]
    chunks = [t["chunks"] for t in cost["terms"]]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    ax.plot(chunks, [t["bm25_ms"] for t in cost["terms"]], marker="o", label="ranked: bm25()")
    ax.plot(chunks, [t["count_ms"] for t in cost["terms"]], marker="x", label="only counted")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks matching the term")
    ax.set_ylabel("ms, best of 5")
    ax.set_title(
        f"FTS5 over {largest['size']:,} notes: {cost['us_per_row']:g} µs a ranked row (2 cores)"
    )
    ax.grid(True, which="both", lw=0.3)
    ax.legend()
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "search-speed-bm25-cost.png"
    fig.savefig(path)
    plt.close(fig)
    return [path]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--real-embed-max",
        type=int,
        default=10_000,
        help="largest size indexed with the real model (above: piece-cache embeddings)",
    )
    parser.add_argument(
        "--ab-texts",
        type=int,
        default=256,
        help="chunk texts for the spinning A/B of indexing-style embedding (real sizes only)",
    )
    parser.add_argument("--workdir", type=Path, help="where data homes go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the data homes")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --workdir: query a data home kept (--keep) by an earlier run, with that "
        "run's build results, instead of building it again",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the other sizes' results already in --out (run one size at a time)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--plots", type=Path, default=DEFAULT_PLOTS)
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--timeout", type=float, default=1500, help="seconds per child phase")
    parser.add_argument(
        "--variants",
        nargs="*",
        default=["tuned"],
        choices=["tuned", "blas1", "nospin"],
        help="query runs besides the shipped one: tuned = one BLAS thread and no onnxruntime "
        "spinning; blas1 / nospin = only one of the two (a shorter run)",
    )
    parser.add_argument("--phase", choices=["build", "query"], help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="shipped", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.queries < 10:
        parser.error("--queries must be at least 10")

    if args.phase:
        phase = build_phase if args.phase == "build" else query_phase
        data = phase(args)
        args.result.parent.mkdir(parents=True, exist_ok=True)
        args.result.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        return

    args.out.parent.mkdir(parents=True, exist_ok=True)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="charlie-speed-"))
    results = []
    started = time.perf_counter()
    try:
        for size in sorted(args.sizes):
            home = workdir / f"home-{size}"
            built = args.out.parent / f"search-speed-{size}-build-shipped.json"
            print(f"{size:,} notes in {home}", file=sys.stderr)
            reused = args.reuse and home.exists() and built.exists()
            if reused:
                build = json.loads(built.read_text(encoding="utf-8"))  # queries only
            else:
                if home.exists():
                    shutil.rmtree(home)
                build = child("build", size, home, args)
            query = child("query", size, home, args)
            result = {"size": size, "build": build, "query": query}
            for variant in args.variants:
                result[f"query_{variant}"] = child("query", size, home, args, variant)
            results.append(result)
            if not args.keep and not reused:  # a home kept for reuse stays, --keep or not
                shutil.rmtree(home)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    config = {
        "queries": args.queries,
        "seed": args.seed,
        "real_embed_max": args.real_embed_max,
        "generator_version": GENERATOR_VERSION,
    }
    run = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "sizes": sorted(args.sizes),
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    runs = [run]
    if args.merge and args.out.exists():
        old = json.loads(args.out.read_text(encoding="utf-8"))
        if old.get("config") != config:
            sys.exit(f"--merge: {args.out} was made with another configuration; not merged")
        ours = set(args.sizes)
        results += [r for r in old["results"] if r["size"] not in ours]
        # A run whose sizes are all redone goes, unless --reuse kept its builds.
        runs = [r for r in old["runs"] if set(r["sizes"]) - ours or args.reuse] + runs
        results.sort(key=lambda r: r["size"])
    project_real_indexing(results)
    data = {
        "machine": machine(),
        "config": config,
        "runs": runs,
        "results": results,
        "scaling": scaling(results),
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    report(data)
    print(f"\nwrote {args.out}")
    if not args.no_plot:
        for path in plot(data, args.plots):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
