"""Loopback addresses for the tests of how Charlie finds its model server
(tests/test_model_servers.py): one where nothing listens, and a real HTTP server that is
not a model server (a web app on llama.cpp's usual port, say)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_url() -> str:
    """An OpenAI-style base URL on loopback where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html><body>My photo gallery</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet


@contextmanager
def web_page() -> Iterator[str]:
    """A real HTTP server answering every GET with an HTML page; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
