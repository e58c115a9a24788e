"""A real Charlie web server on loopback — `charlie serve`'s own uvicorn configuration, run in
a thread — and clients signed in to it: for tests where concurrency, what is on disk between
two runs, or how the server is configured (proxy headers, timeouts) matters."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from web_support import PASSWORD

from charlie.adapters.web.cli import server_config
from charlie.config import load_settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def live_server() -> Iterator[str]:
    """Serve the data home in CHARLIE_HOME exactly as `charlie serve` would; yield its URL."""
    config = server_config(load_settings(), "127.0.0.1", free_port())
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def signed_in_client(base_url: str, name: str, timeout: float = 120.0) -> httpx.Client:
    """A client of the live server, signed in as `name` (password PASSWORD), with CSRF."""
    client = httpx.Client(base_url=base_url, timeout=timeout)
    response = client.post("/api/login", json={"name": name, "password": PASSWORD})
    assert response.status_code == 200, response.text
    client.headers["X-CSRF-Token"] = client.cookies["charlie_csrf"]
    return client


def together(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run `work(i)` for i in range(count) on `count` threads released at the same moment."""
    start = threading.Barrier(count)

    def run(i: int) -> Any:
        start.wait()
        return work(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))
