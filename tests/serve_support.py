"""`charlie serve`'s own uvicorn configuration, run in a thread on loopback: for tests of what
depends on how the server is configured (proxy headers, timeouts, concurrency)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from charlie.adapters.web.cli import server_config
from charlie.config import load_settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def served() -> Iterator[str]:
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
