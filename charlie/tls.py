"""One TLS context for every HTTP client Charlie makes: the model server, the embeddings
server, the probes that look for a server, the status page's check.

httpx builds a context for each client it makes, reading the certificate authorities'
bundle each time — about 50 ms of CPU, also for a client that only ever speaks plain HTTP
on loopback. `charlie chat -m` paid it four times before its first token (three probes and
the client), and the OpenAI-compatible embeddings once per search. A context is safe to
share between clients and threads; it is built on first use, with httpx's own defaults
(its bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR` when set).
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def context() -> ssl.SSLContext:
    """The process's TLS context, as httpx would make it for each client."""
    return httpx.create_ssl_context()
