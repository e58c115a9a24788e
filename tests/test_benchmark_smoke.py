"""The benchmarks run: each script at a tiny size, against the scripted double, so that a
change to the code they drive is found here, not on the next measuring day. The ones that
need a real model server, shared data (SciFact, LoCoMo), Whisper models or minutes of
embedding (search_speed, import_speed, recall_speed, scifact, scifact_product, locomo,
locomo_jsonl, usage_boost, voice, real_server, household_tasks) are type-checked with the
code (`mypy` covers benchmarks/) and run by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from charlie.retrieval.search import SearchConfig

ROOT = Path(__file__).resolve().parent.parent


def run(script: str, *arguments: str) -> str:
    """Run benchmarks/SCRIPT.py with `arguments`; what it printed, once it succeeded."""
    done = subprocess.run(
        [sys.executable, f"benchmarks/{script}.py", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout


def test_memory_fidelity_holds_every_check_against_a_careless_model(tmp_path: Path) -> None:
    out = tmp_path / "fidelity.json"
    printed = run("memory_fidelity", "--quick", "--out", str(out))
    assert '"points": "8/8"' in printed and out.is_file()


def test_weak_hits_tells_answering_notes_from_small_talk(tmp_path: Path) -> None:
    """The floor search ships with (`SearchConfig.min_vector`) keeps every note that answers a
    household question and drops what small talk finds, on the benchmark's own numbers."""
    out = tmp_path / "weak.json"
    run("weak_hits", "--quick", "--out", str(out))
    result = json.loads(out.read_text())
    floor = f"{SearchConfig().min_vector:.2f}"
    assert result["household"]["answering_under_floor"][floor] == 0.0
    assert result["small_talk"]["still_listing_a_note"][floor] <= 0.1


SMALL = {  # script → arguments that make it a few seconds' run ({tmp}: a fresh folder)
    "archive_speed": ["--notes", "20", "--messages", "50", "--work", "{tmp}"],
    "note_scan": ["--notes", "50", "--repeat", "1"],
    "render_speed": ["--runs", "2"],
    "regenerate_ttft": ["--rounds", "2", "--model-delay", "0.01"],
    "load": ["--users", "2", "--seconds", "3"],
    "tool_loop": ["--turns", "4", "--warmup", "1", "--repeats", "1", "--no-plot"],
    "turns": ["--turns", "12", "--no-plot"],
    "mcp_latency": ["--size", "5", "--queries", "2", "--workdir", "{tmp}"],
    "faults": ["--only", "privacy", "--rounds", "1", "--load-seconds", "1"],
}


@pytest.mark.parametrize("script", sorted(SMALL))
def test_a_benchmark_runs_at_a_tiny_size(script: str, tmp_path: Path) -> None:
    arguments = [a.replace("{tmp}", str(tmp_path / "work")) for a in SMALL[script]]
    if script not in ("note_scan", "render_speed", "regenerate_ttft"):  # these write no file
        arguments += ["--out", str(tmp_path / "out.json")]
    run(script, *arguments)
