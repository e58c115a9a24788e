"""A Charlie process that uses the model server CHARLIE_LLM chooses, as a front end does,
for the tests of the built-in runtime shared across processes (tests/test_builtin_runtime.py).

    python tests/support/runtime_user.py

It builds `LLMClient.from_settings` (which finds or starts the data home's runtime), prints
one JSON line ({"pid", "runtime", "base_url"}), then waits: a line on its standard input
(or its end) closes the client, giving its lease back, and it exits.
"""

from __future__ import annotations

import json
import os
import sys

from charlie.config import load_settings
from charlie.llm.client import LLMClient


def main() -> None:
    client = LLMClient.from_settings(load_settings())
    lease = client.server.lease if client.server is not None else None
    news = {
        "pid": os.getpid(),
        "runtime": lease.runtime.pid if lease is not None else None,
        "base_url": client.base_url,
    }
    sys.stdout.write(json.dumps(news) + "\n")
    sys.stdout.flush()
    sys.stdin.readline()
    client.close()


if __name__ == "__main__":
    main()
