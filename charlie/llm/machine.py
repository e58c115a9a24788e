"""The machine the built-in model runs on: its usable cores and free memory, and the threads
and context window a model of a given size gets there (`fit`)."""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from charlie.text import plural

# The context window chosen by memory left once the model is loaded: a 1.5B model's cache
# for 8192 tokens takes about 230 MB (28 layers × 2 KV heads × 128 × 2 bytes × 2, f16),
# an 8B model's about 1 GB; below these the window shrinks rather than the machine swap.
CONTEXTS = ((2048, 8192), (1024, 4096), (0, 2048))  # (MiB free beyond the model, window)
PROMPT_CACHE_MIB = 2048  # llama.cpp keeps earlier prompts in RAM up to this (default 8192)


@dataclass(frozen=True)
class Fit:
    """Threads and context window for a model on this machine, and why."""

    threads: int
    context: int
    cache_mib: int
    why: str


def usable_cores() -> int:
    """CPUs this process may run on: its affinity, within a container's CPU quota."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cores = cores or os.cpu_count() or 1
    with contextlib.suppress(OSError, ValueError):  # cgroup v2: "max 100000" or "200000 100000"
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    return cores


def physical_cores() -> int | None:
    """Distinct physical cores (hyper-threads share one core's arithmetic units), or None
    when the system does not say."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    if text:
        pairs, physical = set(), "0"
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "physical id":
                physical = value.strip()
            elif key.strip() == "core id":
                pairs.add((physical, value.strip()))
        return len(pairs) or None
    for name in ("hw.perflevel0.physicalcpu", "hw.physicalcpu"):  # macOS: performance cores
        try:
            found = subprocess.run(
                ["sysctl", "-n", name], capture_output=True, text=True, timeout=5, check=True
            )
            return int(found.stdout.strip())
        except (OSError, ValueError, subprocess.SubprocessError):
            continue
    return None


def available_memory() -> int | None:
    """Bytes of memory free for a new program (Linux's MemAvailable within a container's
    limit; elsewhere half the machine's memory), or None when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
                with contextlib.suppress(OSError, ValueError):
                    limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
                    used = Path("/sys/fs/cgroup/memory.current").read_text().strip()
                    if limit != "max":
                        free = min(free, int(limit) - int(used))
                return free
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (OSError, ValueError, AttributeError):
        return None


def fit(model_bytes: int, *, threads: int = 0, context: int = 0) -> Fit:
    """Threads and window for a model of `model_bytes` here; `threads`/`context` when given
    (CHARLIE_LLM_THREADS, CHARLIE_LLM_CONTEXT) win.

    Threads: one per physical core but one, at least one. llama.cpp's threads wait for each
    other at every step, so one thread that loses its core to Charlie itself (embedding a
    question, the web server) stalls all of them: on 2 shared cores, 2 threads made 0.8
    tokens/s where 1 made 84 (Gemma 270M) and 1 where 1 made 9 (Qwen 1.5B) (scripts/real-llm);
    the built-in runtime on SmolLM2-135M, 2 busy cores, 2 threads: 2.8 tokens/s generated and
    77 prompt tokens/s, 1 thread: 28 and 121 (benchmarks/builtin_runtime.py).
    """
    cores = usable_cores()
    physical = min(physical_cores() or cores, cores)
    why = []
    if threads:
        why.append(f"{threads} threads (CHARLIE_LLM_THREADS)")
    else:
        threads = max(1, min(physical, cores - 1))
        why.append(f"{threads} {plural(threads, 'thread')} ({physical} cores, one left free)")
    free = available_memory()
    spare_mib = (free - model_bytes) // 2**20 if free is not None else None
    if context:
        why.append(f"context {context} (CHARLIE_LLM_CONTEXT)")
    else:
        spare = max(spare_mib or 0, 0)  # unknown, or none: the smallest window
        context = next(window for least, window in CONTEXTS if spare >= least)
        said = f"{spare_mib} MiB free beside the model" if spare_mib is not None else "unknown"
        why.append(f"context {context} ({said})")
    cache = max(0, min(PROMPT_CACHE_MIB, (spare_mib or 0) // 4))
    return Fit(threads, context, cache, ", ".join(why))
