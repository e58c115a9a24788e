"""Charlie against a real llama.cpp server: the figures of docs/real-servers.md.

Run it through the script that builds and starts the server (a 4096-token window):

    ./scripts/real-llm bench [--turns 300] [--max-tokens 48] [--ttft-samples 30]

1. A long conversation: `--turns` turns in one project through `charlie.chat.turn`, every
   answer capped (CHARLIE_LLM_MAX_TOKENS). Per turn: answered or stuck (the turn raised),
   the prompt tokens of each request as the server counted them (`usage.prompt_tokens`),
   and whether prompt + answer stayed within the window. The server's own log is read
   too: every request it refused (HTTP 400, "exceeds the available context size") counts
   as one over the window, even where Charlie then retried and answered.
2. Time to first token: Charlie's (from calling `turn` to its first `Token`) against a
   direct streamed request to the same server with the very body Charlie sent, measured in
   the same run. Both ask the server not to reuse its prompt cache (`cache_prompt: false`),
   so both make it read the whole prompt; samples whose first token came after a tool
   round are left out (the direct request makes one round only).
3. The contract suite's last result and duration, and the one-time build's duration, from
   what scripts/real-llm recorded in its cache.

Writes benchmarks/out/real_server.json and the plot docs/benchmarks/real-server-tokens.svg
(SVG written by hand: no plotting library needed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from support import machine, percentile

from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.errors import CharlieError
from charlie.home import Home
from charlie.users import ensure_user

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from real_llm.real_llm_support import RecordingLLM, long_text, project_channel  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "out" / "real_server.json"
DEFAULT_PLOT = ROOT / "docs" / "benchmarks" / "real-server-tokens.svg"
REFUSED = re.compile(r"exceeds the available context size|exceed_context_size", re.IGNORECASE)
REQUEST_LINE = re.compile(r"request: POST /v1/chat/completions \S+ (\d{3})")


@dataclass
class Turn:
    number: int
    answered: bool
    error: str
    seconds: float
    reply_prompt_tokens: list[int] = field(default_factory=list)  # each streamed request
    distill_prompt_tokens: list[int] = field(default_factory=list)
    max_total_tokens: int = 0  # prompt + answer, the largest request of the turn
    distilled: bool = False


def _usage(call: Any) -> tuple[int, int]:
    usage = call.completion.usage if call.completion else {}
    return int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))


def conversation(home: Home, turns: int, distill_every: int, seconds: float) -> list[Turn]:
    """Up to `turns` turns, stopping early once `seconds` have passed."""
    deadline = time.perf_counter() + seconds
    channel = project_channel(home, "Long talk", distill_every=distill_every)
    alice = ensure_user(home.db, "alice")
    records: list[Turn] = []
    with RecordingLLM.from_settings(home.settings) as client:
        for number in range(1, turns + 1):
            if time.perf_counter() > deadline:
                print(f"stopped after {number - 1} turns: out of time", file=sys.stderr)
                break
            text = f"Note {number}: {long_text(number, 90)} What do you think?"
            streams, chats = len(client.streams), len(client.chats)
            started = time.perf_counter()
            record = Turn(number, True, "", 0.0)
            try:
                for event in chat.turn(home, client, channel, alice, text):
                    record.distilled |= isinstance(event, chat.Distilled)
            except CharlieError as exc:
                record.answered, record.error = False, str(exc)
            record.seconds = time.perf_counter() - started
            totals = []
            for call in client.streams[streams:]:
                prompt, answer = _usage(call)
                record.reply_prompt_tokens.append(prompt)
                totals.append(prompt + answer)
            for call in client.chats[chats:]:
                prompt, answer = _usage(call)
                record.distill_prompt_tokens.append(prompt)
                totals.append(prompt + answer)
            record.max_total_tokens = max(totals, default=0)
            records.append(record)
            if number % 25 == 0 or not record.answered:
                print(
                    f"turn {number}: {'ok' if record.answered else 'STUCK ' + record.error}"
                    f" prompt {record.reply_prompt_tokens} {record.seconds:.1f}s",
                    file=sys.stderr,
                )
    return records


def server_log_counts(log: Path | None, offset: int) -> dict[str, int]:
    """Chat requests the server logged after `offset` bytes, by status, and its refusals."""
    if log is None or not log.is_file():
        return {}
    text = log.read_bytes()[offset:].decode("utf-8", "replace")
    counts: dict[str, int] = {"refused_over_window": len(REFUSED.findall(text))}
    for status in REQUEST_LINE.findall(text):
        counts[f"status_{status}"] = counts.get(f"status_{status}", 0) + 1
    return counts


def first_token_direct(url: str, body: dict[str, Any]) -> float:
    """Seconds from sending `body` to the first streamed reply text, straight to the server."""
    started = time.perf_counter()
    with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                continue
            for choice in json.loads(line[5:]).get("choices") or []:
                if (choice.get("delta") or {}).get("content"):
                    return time.perf_counter() - started
    raise RuntimeError("the direct request streamed no text")


def first_tokens(home: Home, url: str, samples: int) -> dict[str, Any]:
    channel = project_channel(home, "Latency", distill_every=1000)
    alice = ensure_user(home.db, "alice")
    charlie_s: list[float] = []
    direct_s: list[float] = []
    left_out = failed = 0
    with RecordingLLM.from_settings(home.settings) as client:
        client.extra["cache_prompt"] = False
        for number in range(samples + 1):  # the first warms up: not counted
            text = f"Question {number}: {long_text(1000 + number, 60)} Answer briefly."
            streams = len(client.streams)
            started = time.perf_counter()
            first: float | None = None
            try:
                for event in chat.turn(home, client, channel, alice, text):
                    if first is None and isinstance(event, chat.Token):
                        first = time.perf_counter() - started
            except CharlieError:
                failed += 1  # the first token (if any) was still shown: counted below
            calls = client.streams[streams:]
            if number == 0:
                continue
            if first is None or len(calls) != 1:
                left_out += 1
                continue
            direct = first_token_direct(url, calls[0].request)
            charlie_s.append(first)
            direct_s.append(direct)

    def stats(values: list[float]) -> dict[str, float]:
        return {
            "p50_ms": round(percentile(values, 50) * 1000, 1),
            "p99_ms": round(percentile(values, 99) * 1000, 1),
        }

    if not charlie_s:
        return {"samples": 0, "left_out": left_out, "turns_failed": failed}
    added = [c - d for c, d in zip(charlie_s, direct_s, strict=True)]
    charlie_stats, direct_stats = stats(charlie_s), stats(direct_s)
    return {
        "samples": len(charlie_s),
        "left_out_tool_rounds": left_out,
        "turns_failed_after_first_token": failed,
        "charlie": charlie_stats,
        "direct": direct_stats,
        "added": stats(added),
        "ratio_p50": round(charlie_stats["p50_ms"] / direct_stats["p50_ms"], 3),
        "ratio_p99": round(charlie_stats["p99_ms"] / direct_stats["p99_ms"], 3),
    }


def contract_and_build(cache: Path) -> dict[str, Any]:
    """What scripts/real-llm recorded: the build's duration, the contract suite's last run."""
    out: dict[str, Any] = {}
    build = cache / "build-times.json"
    if build.is_file():
        out["build"] = json.loads(build.read_text())
    run = cache / "contract-run.json"
    if run.is_file():
        out["contract_run"] = json.loads(run.read_text())
    junit = cache / "contract-junit.xml"
    if junit.is_file():
        suite = ET.parse(junit).getroot()
        suite = suite if suite.tag == "testsuite" else suite[0]
        out["contract_tests"] = {
            key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")
        } | {"seconds": float(suite.get("time", 0))}
        outcomes = {}
        for case in suite.iter("testcase"):
            verdict = "passed"
            for child in case:
                if child.tag in {"failure", "error", "skipped"}:
                    verdict = child.tag
                    if child.tag == "skipped" and "xfail" in (child.get("type") or ""):
                        verdict = "xfailed"
            outcomes[case.get("name", "?")] = verdict
        out["contract_outcomes"] = outcomes
    return out


def svg_plot(records: list[Turn], window: int, path: Path) -> None:
    """Prompt tokens per turn (each reply request, and each distillation), against the window."""
    width, height, left, bottom, top, right = 860, 420, 64, 48, 40, 16
    plot_w, plot_h = width - left - right, height - top - bottom
    y_max = max(window * 1.1, *(t.max_total_tokens for t in records), 1)
    x_max = max(len(records), 1)

    def x(turn: float) -> float:
        return left + plot_w * (turn - 1) / max(x_max - 1, 1)

    def y(tokens: float) -> float:
        return top + plot_h * (1 - tokens / y_max)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">Prompt tokens per '
        f"turn, {len(records)} turns against llama.cpp (window {window})</text>",
    ]
    for tick in range(0, int(y_max) + 1, 1024):
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            'stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick}</text>'
        )
    step = 50 if x_max > 100 else 10
    for tick in range(step, x_max + 1, step):
        parts.append(
            f'<text x="{x(tick):.1f}" y="{height - bottom + 16}" text-anchor="middle">{tick}</text>'
        )
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{y(window):.1f}" y2="{y(window):.1f}" '
        f'stroke="#c00" stroke-dasharray="6 4"/><text x="{width - right - 4}" '
        f'y="{y(window) - 6:.1f}" text-anchor="end" fill="#c00">context window {window}</text>'
    )
    line = " ".join(
        f"{x(t.number):.1f},{y(t.reply_prompt_tokens[-1]):.1f}"
        for t in records
        if t.reply_prompt_tokens
    )
    parts.append(f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="1.2"/>')
    for t in records:
        for tokens in t.distill_prompt_tokens:
            parts.append(f'<circle cx="{x(t.number):.1f}" cy="{y(tokens):.1f}" r="2" fill="#f80"/>')
        if not t.answered:
            parts.append(f'<circle cx="{x(t.number):.1f}" cy="{y(0):.1f}" r="4" fill="#c00"/>')
    parts += [
        f'<text x="{width / 2}" y="{height - 8}" text-anchor="middle">turn</text>',
        f'<text x="16" y="{top + plot_h / 2}" transform="rotate(-90 16 {top + plot_h / 2})" '
        'text-anchor="middle">prompt tokens (usage.prompt_tokens)</text>',
        f'<line x1="{left + 10}" x2="{left + 30}" y1="{top + 10}" y2="{top + 10}" '
        f'stroke="#1f77b4"/><text x="{left + 36}" y="{top + 14}">reply request</text>',
        f'<circle cx="{left + 20}" cy="{top + 28}" r="3" fill="#f80"/>'
        f'<text x="{left + 36}" y="{top + 32}">distillation request</text>',
        "</svg>",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--max-tokens", type=int, default=48, help="CHARLIE_LLM_MAX_TOKENS")
    parser.add_argument("--distill-every", type=int, default=10, help="the project's cadence")
    parser.add_argument("--ttft-samples", type=int, default=30)
    parser.add_argument(
        "--minutes", type=float, default=14, help="stop the conversation after this long"
    )
    parser.add_argument("--home", type=Path, help="a new data home (default: a temp folder)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT)
    args = parser.parse_args()
    url = os.environ.get("CHARLIE_REAL_LLM_URL", "").rstrip("/")
    if not url:
        parser.error("no CHARLIE_REAL_LLM_URL: run this through ./scripts/real-llm bench")
    log_name = os.environ.get("CHARLIE_REAL_LLM_LOG", "")
    log = Path(log_name) if log_name else None
    cache = Path(os.environ.get("CHARLIE_LLAMA_CACHE", "")) if log else None
    props = httpx.get(f"{url.removesuffix('/v1')}/props", timeout=30).json()
    window = int(props["default_generation_settings"]["n_ctx"])

    with tempfile.TemporaryDirectory(prefix="charlie-real-") as tmp:
        home_dir = args.home or Path(tmp) / "home"
        os.environ.update(
            CHARLIE_HOME=str(home_dir),
            CHARLIE_LLM_BASE_URL=url,
            CHARLIE_LLM_MAX_TOKENS=str(args.max_tokens),
            CHARLIE_LLM_TIMEOUT="600",
            CHARLIE_USER="alice",
        )
        with Home.open(load_settings()) as home:
            offset = log.stat().st_size if log and log.is_file() else 0
            started = time.perf_counter()
            records = conversation(home, args.turns, args.distill_every, args.minutes * 60)
            talk_seconds = time.perf_counter() - started
            logged = server_log_counts(log, offset)
            ttft = first_tokens(home, url, args.ttft_samples)
    over = [t.number for t in records if t.max_total_tokens > window]
    replies = [float(p) for t in records for p in t.reply_prompt_tokens]
    data = {
        "machine": machine(),
        "server": {"url": url, "window": window, "model": props.get("model_path", "")},
        "config": {
            "turns": args.turns,
            "minutes": args.minutes,
            "max_tokens": args.max_tokens,
            "distill_every": args.distill_every,
        },
        "conversation": {
            "seconds": round(talk_seconds, 1),
            "answered": sum(t.answered for t in records),
            "stuck": [{"turn": t.number, "error": t.error} for t in records if not t.answered],
            "requests_over_window_by_usage": over,
            "server_log": logged,
            "distillations": sum(t.distilled for t in records),
            "reply_prompt_tokens": {
                "max": max(replies, default=0),
                "p50": percentile(replies, 50) if replies else 0,
                "last": records[-1].reply_prompt_tokens[-1:] if records else [],
            },
        },
        "first_token": ttft,
        "contract": contract_and_build(cache) if cache else {},
        "turns": [asdict(t) for t in records],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    svg_plot(records, window, args.plot)
    summary = {k: v for k, v in data.items() if k not in {"turns", "machine"}}
    print(json.dumps(summary, indent=1))
    print(f"wrote {args.out} and {args.plot}", file=sys.stderr)


if __name__ == "__main__":
    main()
