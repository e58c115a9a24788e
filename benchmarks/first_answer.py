"""From nothing to Charlie's first answer, timed as a newcomer meets it: a fresh clone, the
README's first command (a virtual environment and every dependency, with an empty pip cache),
an account, the first message with no model anywhere (what it says), the built-in model's
download with the person's yes (22 parts, joined, sha256 checked), and the first message
again — the built-in runtime loaded, the model's answer printed.

    python3 benchmarks/first_answer.py [--source REPO] [--ref HEAD] [--work DIR] [--out F.json]

Only the standard library: it runs with the bare Python a fresh machine has. Everything it
makes lives under one work folder (kept afterwards, printed at the end): the clone, its
.venv, the data home (CHARLIE_HOME), and the caches (XDG_CACHE_HOME: pip's and Charlie's
model cache), so nothing already downloaded on this machine is reused. How this machine
reaches PyPI (pip's own configuration) is left as it is. It refuses to run while a model
server answers on one of the usual local ports, since Charlie would use that instead.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import support  # standard library only, like this script

ROOT = Path(__file__).resolve().parent.parent
USUAL_PORTS = {1234: "LM Studio", 11434: "Ollama", 8080: "llama.cpp"}
FIRST_MESSAGE = "Hello! We've decided the kitchen worktop will be oak. What should we do next?"


def answering(port: int) -> bool:
    """Whether something listens on 127.0.0.1:port."""
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def step(
    name: str, command: list[str], cwd: Path, env: dict[str, str], stdin: str = ""
) -> dict[str, Any]:
    """Run one newcomer's command, timed; its output kept (the tail is printed)."""
    print(f"· {name}: {' '.join(command)}", flush=True)
    began = time.monotonic()
    done = subprocess.run(
        command, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - began
    print(f"  {seconds:.1f} s, exit {done.returncode}", flush=True)
    for line in (done.stdout + done.stderr).strip().splitlines()[-4:]:
        print(f"    {line[:160]}", flush=True)
    return {
        "step": name,
        "command": command,
        "seconds": round(seconds, 2),
        "exit": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=ROOT, help="the repository to clone")
    parser.add_argument("--ref", default="HEAD", help="what to check out (default HEAD)")
    parser.add_argument("--work", type=Path, help="where the work folder goes (default: temp)")
    parser.add_argument("--out", type=Path, help="the steps and timings, as JSON")
    args = parser.parse_args(argv)

    busy = [f"{name} (:{port})" for port, name in USUAL_PORTS.items() if answering(port)]
    if busy:
        print(
            f"Error: {', '.join(busy)} answers here, and a newcomer's Charlie would use it "
            "instead of its built-in model. Stop it and run this again.",
            file=sys.stderr,
        )
        return 2
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="charlie-first-answer-", dir=args.work))
    clone = work / "charlie"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CHARLIE_", "VIRTUAL_ENV")) and key != "PYTHONPATH"
    }
    env |= {
        "CHARLIE_HOME": str(work / "home"),
        "XDG_CACHE_HOME": str(work / "cache"),  # pip's cache and Charlie's model cache
        "CHARLIE_USER": "alice",
        "PATH": ":".join(p for p in env.get("PATH", "").split(":") if "/.venv/" not in p),
    }
    run = ["./scripts/run"]
    steps = []
    began = time.monotonic()
    steps.append(
        step("clone", ["git", "clone", "--quiet", str(args.source), str(clone)], work, env)
    )
    if args.ref != "HEAD":
        steps.append(step("checkout", ["git", "checkout", "--quiet", args.ref], clone, env))
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.strip()
    steps.append(step("set up (the README's first command)", [*run, "--version"], clone, env))
    steps.append(
        step(
            "an account",
            [*run, "users", "add", "alice", "--admin", "--password-stdin"],
            clone,
            env,
            stdin="correct horse battery\n",
        )
    )
    steps.append(
        step("first message, no model yet", [*run, "chat", "-m", FIRST_MESSAGE], clone, env)
    )
    steps.append(
        step("the built-in model, with a yes", [*run, "model", "install", "--yes"], clone, env)
    )
    steps.append(step("first answer", [*run, "chat", "-m", FIRST_MESSAGE], clone, env))
    steps.append(
        step("second answer", [*run, "chat", "-m", "And which finish do you suggest?"], clone, env)
    )
    total = time.monotonic() - began
    answered = steps[-2]["exit"] == 0 and bool(steps[-2]["stdout"].strip())
    result = {
        "commit": commit,
        "machine": support.host(),
        "work": str(work),
        "total_seconds": round(total, 1),
        "answered": answered,
        "steps": steps,
    }
    print(f"\n{'step':40} {'seconds':>8}  exit")
    for s in steps:
        print(f"{s['step']:40} {s['seconds']:8.1f}  {s['exit']}")
    print(f"{'from the clone to the first answer':40} {total - steps[-1]['seconds']:8.1f}")
    print(f"first answer: {steps[-2]['stdout'].strip()[:300]!r}")
    print(f"work folder (kept): {work}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if answered else 1


if __name__ == "__main__":
    sys.exit(main())
