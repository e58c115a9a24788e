"""The benchmarks run: each script's --quick smoke run, against the scripted double."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
