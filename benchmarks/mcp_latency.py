"""What MCP adds to a search: tool-call latency of `search_notes` over stdio and over
streamable HTTP, against the same search in-process, and the size of the tool list.

The data home: `--size` synthetic notes (default 10,000) from search_speed.py's generator
(20 projects, ~50 household / work topics), indexed with its `PieceCacheEmbedder` (each
distinct sentence embedded once by the real model, a chunk's vector the mean of its
sentences': real 384-d vectors, so a search costs what it would; queries are embedded by the
real model; up to `REAL_EMBED_MAX` notes, a smoke run's, are embedded by the model itself).
The home is kept in `--workdir` and reused by later runs.

Each query set is run once to warm up, then timed, one call at a time (p50 / p99 / mean):
- in-process: `Searcher.search` as the tools call it (`searcher_for`, all projects, limit 5);
- in-process via the MCP tool (`catalog.call_tool`): the adapter's own work, no transport;
- stdio: the SDK's client driving a real `charlie mcp --user alice` process;
- HTTP: the SDK's client driving a real `charlie serve` (its /mcp), with a bearer token.
The clients run in this process, the servers in their own.

The tool list's size: the JSON of `tools/list`'s tools as the client receives them, counted
as characters / 4 (no tokenizer is installed here; tiktoken's cl100k is used when it is).

    .venv/bin/python benchmarks/mcp_latency.py [--size 10000] [--queries 200]

Writes benchmarks/out/mcp-latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
from search_speed import (
    PieceCacheEmbedder,
    generate,
    make_pools,
    make_queries,
    piece_cache,
    stats_ms,
)
from support import code_fingerprint, machine

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
REAL_EMBED_MAX = 200  # notes: up to this many are embedded by the model, more from the pieces
CHARLIE = str(Path(sys.executable).with_name("charlie"))


def build(home_dir: Path, size: int, seed: int) -> dict[str, Any]:
    """A data home of `size` indexed notes and a person, alice (reused when built before)."""
    from charlie.config import load_settings
    from charlie.home import Home
    from charlie.retrieval.embeddings import LocalEmbedder
    from charlie.retrieval.index import Index
    from charlie.users import ensure_user

    marker = home_dir / "built.json"
    if marker.exists():
        return dict(json.loads(marker.read_text()), reused=True)
    home_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with Home.open(load_settings(home=home_dir)) as home:
        ensure_user(home.db, "alice")
        pools = make_pools(seed)
        generated = generate(home, size, pools, seed)
        local = LocalEmbedder()
        local.load()
        if size <= REAL_EMBED_MAX:  # a few notes: the model itself is quicker than the cache
            report = Index(home, local).refresh()
        else:
            cache, _ = piece_cache(pools, local, OUT / f"search-speed-pieces-{seed}.npz")
            report = Index(home, PieceCacheEmbedder(local, cache)).refresh()
    built = {
        "notes": generated["notes"],
        "projects": generated["projects"],
        "indexed": len(report.added),
        "build_seconds": round(time.perf_counter() - start, 1),
    }
    marker.write_text(json.dumps(built))
    return built


def timed(calls: list[Callable[[], Any]]) -> dict[str, float]:
    for call in calls:  # warm-up: the model, the vectors, the terms' counts
        call()
    samples = []
    for call in calls:
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return stats_ms(samples)


async def timed_async(calls: list[Callable[[], Awaitable[Any]]]) -> dict[str, float]:
    for call in calls:
        await call()
    samples = []
    for call in calls:
        start = time.perf_counter()
        result = await call()
        samples.append(time.perf_counter() - start)
        assert not result.is_error, result
    return stats_ms(samples)


def in_process(home_dir: Path, queries: list[str]) -> dict[str, Any]:
    from charlie import projects
    from charlie.adapters.mcp.catalog import Caller, call_tool
    from charlie.config import load_settings
    from charlie.home import Home, Shared
    from charlie.retrieval.upkeep import searcher_for
    from charlie.users import get_user

    settings = load_settings(home=home_dir)
    shared = Shared()
    with Home.open(settings, shared=shared) as home:
        user = get_user(home.db, "alice")

        def search(query: str) -> Callable[[], Any]:
            return lambda: searcher_for(home).search(
                query, user, projects.list_projects(home), limit=5
            )

        direct = timed([search(q) for q in queries])

    def tool(query: str) -> Callable[[], Any]:
        def call() -> Any:
            with Home.open(settings, shared=shared) as home:  # as the server does per call
                reply = call_tool(home, Caller(user), "search_notes", {"query": query})
            assert not reply.error, reply.text
            return reply

        return call

    return {"search": direct, "tool_in_process": timed([tool(q) for q in queries])}


async def over_stdio(home_dir: Path, queries: list[str]) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=CHARLIE, args=["mcp", "--user", "alice"], env={"CHARLIE_HOME": str(home_dir)}
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        calls = [_search(session, q) for q in queries]
        return {"stdio": await timed_async(calls), "tools": listed.tools}


def _search(session: Any, query: str) -> Callable[[], Awaitable[Any]]:
    return lambda: session.call_tool("search_notes", {"query": query})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def over_http(home_dir: Path, queries: list[str]) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from charlie.config import load_settings
    from charlie.home import Home
    from charlie.household import tokens
    from charlie.users import get_user

    with Home.open(load_settings(home=home_dir)) as home:
        _, secret = tokens.create(home.db, get_user(home.db, "alice"), label="benchmark")
    port = free_port()
    env = dict(os.environ, CHARLIE_HOME=str(home_dir))
    server = subprocess.Popen([CHARLIE, "serve", "--port", str(port)], env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}) as http:
            for _ in range(300):
                try:
                    await http.get(f"http://127.0.0.1:{port}/api/health", timeout=1)
                    break
                except httpx2.TransportError:
                    await anyio.sleep(0.1)
            async with (
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return {"http": await timed_async([_search(session, q) for q in queries])}
    finally:
        server.terminate()
        server.wait(timeout=30)


def tool_list_size(tools: list[Any]) -> dict[str, Any]:
    text = json.dumps([t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools])
    out: dict[str, Any] = {"tools": len(tools), "json_chars": len(text)}
    out["tokens_chars_over_4"] = round(len(text) / 4)
    try:
        import tiktoken
    except ImportError:
        out["tokens_cl100k"] = None
    else:
        out["tokens_cl100k"] = len(tiktoken.get_encoding("cl100k_base").encode(text))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=OUT / "mcp-latency")
    parser.add_argument("--out", type=Path, default=OUT / "mcp-latency.json")
    args = parser.parse_args()

    home_dir = args.workdir / f"home-{args.size}"
    out: dict[str, Any] = {"machine": machine(), "code": code_fingerprint(), "size": args.size}
    out["home"] = build(home_dir, args.size, args.seed)
    print(f"home: {out['home']}", file=sys.stderr)
    queries = [text for _, text in make_queries(make_pools(args.seed), args.queries, args.seed)]
    out["latency_ms"] = in_process(home_dir, queries)
    stdio = anyio.run(over_stdio, home_dir, queries)
    out["latency_ms"]["stdio"] = stdio["stdio"]
    out["latency_ms"] |= anyio.run(over_http, home_dir, queries)
    base = out["latency_ms"]["search"]["p50"]
    out["added_p50_ms"] = {
        kind: round(out["latency_ms"][kind]["p50"] - base, 2)
        for kind in ("tool_in_process", "stdio", "http")
    }
    out["tool_list"] = tool_list_size(stdio["tools"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(json.dumps({k: out[k] for k in ("latency_ms", "added_p50_ms", "tool_list")}, indent=2))


if __name__ == "__main__":
    main()
