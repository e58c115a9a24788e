"""The benchmarks run: each script's --quick smoke run, against the scripted double."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from charlie.retrieval.search import SearchConfig

ROOT = Path(__file__).resolve().parent.parent


def test_memory_fidelity_holds_every_check_against_a_careless_model(tmp_path: Path) -> None:
    out = tmp_path / "fidelity.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/memory_fidelity.py", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"points": "8/8"' in done.stdout and out.is_file()


def test_weak_hits_tells_answering_notes_from_small_talk(tmp_path: Path) -> None:
    """The floor search ships with (`SearchConfig.min_vector`) keeps every note that answers a
    household question and drops what small talk finds, on the benchmark's own numbers."""
    out = tmp_path / "weak.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/weak_hits.py", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    floor = f"{SearchConfig().min_vector:.2f}"
    assert result["household"]["answering_under_floor"][floor] == 0.0
    assert result["small_talk"]["still_listing_a_note"][floor] <= 0.1
