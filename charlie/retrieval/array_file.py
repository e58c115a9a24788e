"""Named numpy arrays in one file, read back without copying them (memory-mapped).

A derived file, never a source of truth: what it holds can always be built again from the
index. The layout is a magic line, the length of a JSON header, the header (the caller's
`meta` and where each array lies), then the arrays' bytes, each at a 64-byte boundary.
`write` goes through a temp file in the same folder (mode 0600, fsync, rename), so a
reader sees the old file or the new one, never half of one; `read` maps the file and
returns read-only arrays that share its pages (they stay valid after the file is replaced
or deleted). A file that is missing, not one of these or shorter than its header says is
`None`: the caller builds what it held another way.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from charlie.files import fsync_folder

MAGIC = b"CHARLIE-ARRAYS 1\n"
ALIGN = 64
_LENGTH = struct.Struct("<Q")

Arrays = dict[str, npt.NDArray[np.generic]]


def write(
    path: Path, meta: dict[str, object], arrays: Iterable[tuple[str, npt.NDArray[np.generic]]]
) -> None:
    """Write `arrays` (name, array: kept in this order) and `meta` to `path`, atomically."""
    listed = [(name, np.ascontiguousarray(array)) for name, array in arrays]
    places, offset = [], 0
    for name, array in listed:
        places.append({"name": name, "dtype": array.dtype.str, "shape": array.shape, "at": offset})
        offset = _aligned(offset + array.nbytes)
    header = json.dumps({"meta": meta, "arrays": places}).encode("utf-8")
    start = _aligned(len(MAGIC) + _LENGTH.size + len(header))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(MAGIC + _LENGTH.pack(len(header)) + header)
            for (_, array), place in zip(listed, places, strict=True):
                out.seek(start + int(place["at"]))  # type: ignore[call-overload]
                out.write(array.data)
            out.truncate(start + offset)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    fsync_folder(path.parent)


def read(path: Path) -> tuple[dict[str, object], Arrays] | None:
    """The `meta` and the arrays written to `path` (read-only, mapped), or None when the file
    is missing, is not such a file, or is cut short."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < len(MAGIC) + _LENGTH.size:
                return None
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (FileNotFoundError, ValueError):  # ValueError: an empty file cannot be mapped
        return None
    if mapped[: len(MAGIC)] != MAGIC:
        return None
    (length,) = _LENGTH.unpack_from(mapped, len(MAGIC))
    begin = len(MAGIC) + _LENGTH.size
    try:
        header = json.loads(bytes(mapped[begin : begin + length]))
        start = _aligned(begin + length)
        arrays: Arrays = {}
        for place in header["arrays"]:
            dtype, shape = np.dtype(place["dtype"]), tuple(place["shape"])
            count = int(np.prod(shape, dtype=np.int64))
            at = start + int(place["at"])
            if at + count * dtype.itemsize > size:
                return None
            array = (
                np.frombuffer(mapped, dtype=dtype, count=count, offset=at)
                if count
                else np.empty(0, dtype)
            )
            arrays[str(place["name"])] = array.reshape(shape)
        meta = header["meta"]
    except (ValueError, KeyError, TypeError):
        return None
    return (meta, arrays) if isinstance(meta, dict) else None


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN
