"""`charlie serve` for real: a child process listening on loopback, over HTTPS when given a
certificate (phones only allow the microphone on a secure origin)."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from live_server import free_port


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl program")
def test_serve_over_https_with_a_certificate(tmp_path: Path, charlie_home: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    command = [sys.executable, "-m", "charlie", "serve", "--port", str(port)]
    command += ["--certfile", str(cert), "--keyfile", str(key)]
    trusted = ssl.create_default_context(cafile=str(cert))
    server = subprocess.Popen(command, env=dict(os.environ), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                page = httpx.get(f"https://127.0.0.1:{port}/", verify=trusted, timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        assert page.status_code == 200
        assert "<title>Charlie</title>" in page.text
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/", timeout=2)  # plain HTTP is not served
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=10)
    assert f"Charlie is at https://127.0.0.1:{port}" in stderr


def test_https_needs_both_files(charlie: object, tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("not really")
    result = charlie("serve", "--certfile", str(cert))  # type: ignore[operator]
    assert result.exit_code == 1
    assert result.stderr == "Error: HTTPS needs both --certfile and --keyfile.\n"
