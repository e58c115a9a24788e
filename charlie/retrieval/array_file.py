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
import logging
import mmap
import os
import stat
import struct
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from charlie.files import fsync_folder

log = logging.getLogger(__name__)

MAGIC = b"CHARLIE-ARRAYS 1\n"
ALIGN = 64
_LENGTH = struct.Struct("<Q")

Arrays = dict[str, npt.NDArray[np.generic]]


def write(
    path: Path, meta: dict[str, object], arrays: Iterable[tuple[str, npt.NDArray[np.generic]]]
) -> None:
    """Write `arrays` (name, array: kept in this order) and `meta` to `path`, atomically."""
    listed = [(name, np.ascontiguousarray(array)) for name, array in arrays]
    offsets, offset = [], 0
    for _, array in listed:
        offsets.append(offset)
        offset = _aligned(offset + array.nbytes)
    places = [
        {"name": name, "dtype": array.dtype.str, "shape": array.shape, "at": at}
        for (name, array), at in zip(listed, offsets, strict=True)
    ]
    header = json.dumps({"meta": meta, "arrays": places}).encode("utf-8")
    start = _aligned(len(MAGIC) + _LENGTH.size + len(header))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(MAGIC + _LENGTH.pack(len(header)) + header)
            for (_, array), at in zip(listed, offsets, strict=True):
                out.seek(start + at)
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
    is missing, is not a regular file, is not such a file, or does not hold what its header
    says (arrays of numbers only, inside the file, none overlapping another or the header).

    The file is mapped, not read: replace it (as `write` does), never change it in place —
    a process that has it mapped dies of SIGBUS when it is cut short under it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # no FIFO hangs here
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("%s cannot be read (%s): it is not used", path, exc)
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size < len(MAGIC) + _LENGTH.size:
            return None
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        log.warning("%s cannot be mapped (%s): it is not used", path, exc)
        return None
    finally:
        os.close(fd)
    try:
        return _parse(mapped, info.st_size)
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError):
        return None


def _parse(mapped: mmap.mmap, size: int) -> tuple[dict[str, object], Arrays] | None:
    if mapped[: len(MAGIC)] != MAGIC:
        return None
    (length,) = _LENGTH.unpack_from(mapped, len(MAGIC))
    begin = len(MAGIC) + _LENGTH.size
    if length > size - begin:
        return None
    header = json.loads(bytes(mapped[begin : begin + length]))
    if not isinstance(header, dict) or not isinstance(header.get("meta"), dict):
        return None
    start, end = _aligned(begin + length), 0
    places = sorted(header["arrays"], key=lambda place: int(place["at"]))
    arrays: Arrays = {}
    for place in places:
        dtype, shape, at = np.dtype(place["dtype"]), place["shape"], place["at"]
        if dtype.kind not in "iuf" or not isinstance(at, int) or at < end:
            return None  # objects, or an array overlapping the one before
        if not all(isinstance(n, int) and n >= 0 for n in shape):
            return None
        count = int(np.prod(shape, dtype=object))
        end = at + count * dtype.itemsize
        if start + end > size or str(place["name"]) in arrays:
            return None
        array = (
            np.frombuffer(mapped, dtype=dtype, count=count, offset=start + at)
            if count
            else np.empty(0, dtype)
        )
        arrays[str(place["name"])] = array.reshape(tuple(shape))
    return header["meta"], arrays


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN
