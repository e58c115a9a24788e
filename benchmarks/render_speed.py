"""How long `adapters/web/render.py` takes to draw a reply, the web API's cost per message.

The reply measured is about 4 KB: prose with bold, a link and a bare address, a task list, a
quote, a 12-row table and a highlighted Python code block — the kind of answer that shows
all of the renderer's parts. Also measured: a 20 KB code block (the longest that is still
coloured) and about 19 KB of prose. The first call builds the parser and loads Pygments'
lexer; the figures after it are the steady state. The machine's load average is recorded
before and after: on a busy machine every figure grows.

    .venv/bin/python benchmarks/render_speed.py [--runs 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from support import machine, percentile  # noqa: E402

from charlie.adapters.web.render import MAX_HIGHLIGHT_CHARS, draw  # noqa: E402

CODE = '''```python
def fit(samples: list[float], rate: float = 0.01) -> dict[str, float]:
    """Fit a line to the samples by gradient descent."""
    slope, intercept = 0.0, 0.0
    for step in range(1000):
        error = [slope * x + intercept - y for x, y in enumerate(samples)]
        slope -= rate * sum(e * x for x, e in enumerate(error)) / len(samples)
        intercept -= rate * sum(error) / len(samples)
    return {"slope": slope, "intercept": intercept}
```
'''
PROSE = (
    "We compared **oak**, walnut and ash worktops. See https://example.org/oak for the "
    "supplier's guide, and [the care sheet](https://example.org/care):\n\n"
    "- [x] measure the run\n- [ ] order samples\n\n> Oil little and often.\n\n"
)


HOSTILE = {
    "task list, 125,000 items (1 MB)": "- [ ] x\n" * 125_000,
    "one 19,000-character line of `desktop` code": "```desktop\n" + "a" * 19_000 + "\n```",
    "50 such code blocks (950 kB)": ("```desktop\n" + "a" * 19_000 + "\n```\n\n") * 50,
    "1,000,000 × `[`": "[" * 1_000_000,
    "500,000 × `![`": "![" * 500_000,
    "table of 100,000 rows (600 kB)": "|x|y|\n|-|-|\n" + "|x|y|\n" * 100_000,
}


def reply_4kb() -> str:
    table = "| Wood | Oil | Every | Notes |\n|:--|:--|--:|---|\n" + "".join(
        f"| oak {i} | hardwax | {i} months | wipe with a *damp* cloth, `never` soak |\n"
        for i in range(12)
    )
    text = PROSE + table + "\n" + CODE + "\n" + PROSE * 2
    while len(text.encode()) < 4096:
        text += "More words about oiling oak worktops and keeping them dry. "
    return text


def timed(text: str, runs: int) -> dict[str, float]:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        draw(text)  # not the cache: each run draws
        times.append((time.perf_counter() - began) * 1000)
    return {
        "bytes": len(text.encode()),
        "median_ms": round(statistics.median(times), 2),
        "p95_ms": round(percentile(times, 95), 2),
    }


def first_call(make: Callable[[], str]) -> float:
    began = time.perf_counter()
    draw(make())
    return round((time.perf_counter() - began) * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    long_code = (
        "```python\n"
        + (ROOT / "charlie" / "retrieval" / "search.py").read_text()[:MAX_HIGHLIGHT_CHARS]
    )
    prose = (PROSE * 3 + "Some **words** with `code` and a [link](https://e.org). " * 30) * 8
    load_before = os.getloadavg()[0]
    result: dict[str, Any] = {
        "first_call_ms": first_call(reply_4kb),
        "reply_4kb": timed(reply_4kb(), args.runs),
        "code_20kb": timed(long_code + "\n```\n", min(args.runs, max(20, args.runs // 10))),
        "prose_22kb": timed(prose, min(args.runs, max(20, args.runs // 10))),
        # What a household member could write into a note (up to 1 MB) to make every view
        # of it slow: each of these took from 8 s to minutes before the bounds on drawing.
        "hostile": {name: timed(text, min(args.runs, 2)) for name, text in HOSTILE.items()},
        "machine": machine(),
    }
    result["load_average"] = {"before": load_before, "after": os.getloadavg()[0]}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
