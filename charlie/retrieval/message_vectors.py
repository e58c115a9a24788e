"""The message vectors a process holds, by conversation, and the file that keeps them.

Every recall searches the vectors of the conversations it may read (`ConversationVectors`:
exact cosines, in two stages for a large conversation). A process loads them once and tops
them up with what is indexed since (`MessageIndex.vectors`). Read from the index file,
200,000 of them take seconds (every blob copied out of SQLite, then the first stage built),
so the indexer also keeps them in a file beside it (`index.db-vectors`, `array_file`), with
each large conversation's first stage: a new process maps that file and searches at once,
then reads from the index only what came after it.

The file is derived data, written again when it lacks more than `FILE_LAG` of the vectors,
and trusted only while it matches the index: the same generation (which changes whenever
messages are dropped: forgotten, deleted, the index emptied), model and dimension, and as
many vectors up to its last id as the index holds. Dropping messages deletes it before and
after, so a forgotten message's vector is never read back from it.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from charlie.retrieval import array_file
from charlie.retrieval.vectors import EXACT_BELOW, VectorTable

log = logging.getLogger(__name__)

FILE_MIN = 20_000  # vectors: fewer are read from the index in well under a second
FILE_LAG = 0.05  # the file is written again once it lacks this share of the vectors
KEEP_FREE = 256 << 20  # bytes: never leave the disk with less free room than this (or the file)
LEFTOVER_AGE = 3600.0  # seconds: a temp file older than this is a killed writer's


MAX_RUNS = 64  # a time asked about in more runs of rows than this is searched exactly


def _runs(mask: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    """The [start, end) runs of rows where `mask` is true."""
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return list(
        zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist(), strict=True)
    )


@dataclass
class ConversationVectors:
    """One conversation's message vectors, in the order they were indexed (which is not
    time order: imported history comes after). Grows in place as messages arrive."""

    dim: int
    ids: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))
    at: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0, np.float64))
    store: npt.NDArray[np.float32] = field(default_factory=lambda: np.empty((0, 0), np.float32))
    count: int = 0
    table: VectorTable | None = None  # the two-stage search over the first `tabled` rows
    tabled: int = 0

    def __post_init__(self) -> None:
        self.store = np.empty((0, self.dim), np.float32)

    @property
    def matrix(self) -> npt.NDArray[np.float32]:
        return self.store[: self.count]

    def append(
        self, ids: Sequence[int], at: Sequence[float], vectors: npt.NDArray[np.float32]
    ) -> None:
        n = self.count + len(ids)
        # grow by doubling: appending one message never copies them all; mapped: copy once
        if n > len(self.ids) or not self.store.flags.writeable:
            capacity = max(n, 2 * len(self.ids), 64)
            grown = np.empty((capacity, self.dim), np.float32)
            grown[: self.count] = self.matrix
            self.store = grown
            self.ids = np.resize(self.ids, capacity)
            self.at = np.resize(self.at, capacity)
        self.store[self.count : n] = vectors
        self.ids[self.count : n] = ids
        self.at[self.count : n] = at
        self.count = n

    def tabulate(self) -> None:
        """Build the two-stage table when the conversation is large enough and the rows
        added since the last one have grown past a tenth of it."""
        count = self.count  # read once: another thread may append while the table is built
        tail = count - self.tabled
        if count >= EXACT_BELOW and (self.table is None or tail > self.tabled // 10):
            self.table, self.tabled = VectorTable(self.store[:count]), count

    def view(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        return self.ids[: self.count], self.at[: self.count]

    def top(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        inside: npt.NDArray[np.bool_] | None = None,
    ) -> dict[int, float]:
        """The `k` messages most similar to `query` (only those where `inside` is true, when
        given): message id → exact cosine.

        A large conversation is searched in two stages (`charlie.retrieval.vectors`) over the rows
        it had when its table was built, and exactly over the few added since; the table is
        built again once those grow past a tenth of it. A time asked about is searched as
        the runs of rows it covers (messages are mostly indexed in time order)."""
        self.tabulate()
        found: dict[int, float] = {}
        start = self.tabled if self.table is not None else 0
        if self.table is not None:
            head = None if inside is None else _runs(inside[: self.tabled])
            if head is None or len(head) <= MAX_RUNS:
                rows, sims = self.table.top(query, k, head)
            else:  # scattered: the exact product of just those rows
                rows = np.flatnonzero(inside[: self.tabled])  # type: ignore[index]
                sims = self.store[rows] @ query
                best = np.argpartition(-sims, min(k, len(sims)) - 1)[:k] if len(sims) else rows
                rows, sims = rows[best], sims[best]
            found = {int(self.ids[r]): float(s) for r, s in zip(rows, sims, strict=True)}
        rest = np.arange(start, self.count)
        if inside is not None:
            rest = rest[inside[start : self.count]]
        sims = self.store[rest] @ query
        depth = min(len(sims), k)
        if depth:
            best = np.argpartition(-sims, depth - 1)[:depth]
            found |= {int(self.ids[rest[i]]): float(sims[i]) for i in best}
        return found


@dataclass
class LoadedVectors:
    """Every indexed message vector this process has loaded, by conversation."""

    generation: str
    upto: int = 0  # the highest message id loaded
    conversations: dict[int, ConversationVectors] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(c.count for c in self.conversations.values())


def file_path(index_path: Path) -> Path:
    """The file that keeps the message vectors of the index file at `index_path`."""
    return Path(f"{index_path}-vectors")


@dataclass(frozen=True)
class KeptFile:
    """What the file beside the index holds: which index it was written from, and how far."""

    generation: str
    model: str
    dim: int
    upto: int  # the highest message id in it
    count: int  # how many vectors


def read_file(path: Path) -> tuple[KeptFile, LoadedVectors] | None:
    """The vectors kept at `path` (mapped, not copied), or None when there is no such file
    or it does not hold, for each conversation listed once, exactly the arrays `picture`
    writes: their kinds and shapes, `count` rows, a first stage of at most `count` rows."""
    found = array_file.read(path)
    if found is None:
        return None
    meta, arrays = found
    try:
        kept = KeptFile(
            str(meta["generation"]),
            str(meta["model"]),
            _whole(meta["dim"]),
            _whole(meta["upto"]),
            _whole(meta["count"]),
        )
        loaded = LoadedVectors(kept.generation, kept.upto)
        for listed in meta["conversations"]:  # type: ignore[attr-defined]
            conversation_id, count, tabled = (_whole(n) for n in listed)
            if conversation_id in loaded.conversations or not 0 <= tabled <= count or not count:
                return None
            table = _table(arrays, conversation_id, count, tabled, kept.dim)
            if table is None:
                return None
            loaded.conversations[conversation_id] = table
    except (KeyError, TypeError, ValueError, OverflowError):  # not written by this version
        return None
    if loaded.count != kept.count:
        return None
    return kept, loaded


def _whole(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


def _table(
    arrays: array_file.Arrays, conversation_id: int, count: int, tabled: int, dim: int
) -> ConversationVectors | None:
    """One conversation's vectors from the file's arrays, or None when any is not what
    `picture` writes."""
    expected = {
        "ids": (np.int64, (count,)),
        "at": (np.float64, (count,)),
        "vectors": (np.float32, (count, dim)),
    }
    if tabled:
        basis = arrays[f"{conversation_id}.basis"]
        dims = basis.shape[-1] if basis.ndim == 2 else 0  # a size `VectorTable` refuses
        expected |= {
            "basis": (np.float32, (dim, dims)),
            "codes": (np.uint8, (tabled, dims)),
            "scales": (np.float32, (dims,)),
            "lost": (np.float32, (tabled,)),
        }
    parts = {name: arrays[f"{conversation_id}.{name}"] for name in expected}
    for name, (dtype, shape) in expected.items():
        if parts[name].dtype != dtype or parts[name].shape != shape:
            return None
    table = ConversationVectors(dim)
    table.ids, table.at = parts["ids"], parts["at"]  # type: ignore[assignment]
    table.store, table.count = parts["vectors"], count  # type: ignore[assignment]
    if tabled:
        stage = tuple(parts[name] for name in FIRST_STAGE)
        table.table = VectorTable(table.store[:tabled], first_stage=stage)  # type: ignore[arg-type]
        table.tabled = tabled
    return table


FIRST_STAGE = ("basis", "codes", "scales", "lost")


Picture = tuple[dict[str, object], list[tuple[str, npt.NDArray[np.generic]]]]


def picture(loaded: LoadedVectors, model: str, dim: int) -> Picture:
    """What `write_file` writes of `loaded` as it is now: views, nothing copied (taken while
    nothing appends to it; the rows it covers never change afterwards)."""
    listed: list[tuple[int, int, int]] = []
    arrays: list[tuple[str, npt.NDArray[np.generic]]] = []
    for conversation_id, table in loaded.conversations.items():
        count, first = table.count, table.table
        if not count:
            continue
        ids, at = table.view()
        arrays += [
            (f"{conversation_id}.ids", ids),
            (f"{conversation_id}.at", at),
            (f"{conversation_id}.vectors", table.store[:count]),
        ]
        stage = None if first is None else first.first_stage()
        if stage is not None:
            kept: tuple[npt.NDArray[np.generic], ...] = stage
            arrays += [
                (f"{conversation_id}.{p}", a) for p, a in zip(FIRST_STAGE, kept, strict=True)
            ]
        listed.append((conversation_id, count, 0 if stage is None else len(stage[1])))
    meta: dict[str, object] = {
        "generation": loaded.generation,
        "model": model,
        "dim": dim,
        "upto": loaded.upto,
        "count": sum(count for _, count, _ in listed),
        "conversations": listed,
    }
    return meta, arrays


def write_file(path: Path, taken: Picture) -> bool:
    """Keep what `picture` took at `path`; whether it was written. A disk that refuses it
    costs only the next start's speed: it is logged, and the vectors are read from the
    index as before. So is a disk that would be left with less free room than the file
    takes (messages and notes need it more), and a temp file a killed writer left is
    removed first."""
    _remove_leftovers(path)
    size = sum(array.nbytes for _, array in taken[1])
    free = shutil.disk_usage(path.parent).free
    if free - size < max(size, KEEP_FREE):
        log.warning(
            "The message vectors were not kept in %s: it would take %d MiB of the %d MiB "
            "free. They are read from the index instead.",
            path,
            size >> 20,
            free >> 20,
        )
        return False
    try:
        array_file.write(path, *taken)
    except OSError as exc:
        log.warning(
            "The message vectors could not be kept in %s (%s): read from the index instead",
            path,
            exc,
        )
        return False
    return True


def _remove_leftovers(path: Path) -> None:
    """Temp files of this file older than `LEFTOVER_AGE`: a writer killed part-way."""
    now = time.time()
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            if now - leftover.stat().st_mtime > LEFTOVER_AGE:
                leftover.unlink()
        except FileNotFoundError:  # its writer finished, or another removed it
            continue


def drop_file(path: Path) -> None:
    """Delete the kept vectors (messages were dropped from the index), and any temp file of
    a writer killed part-way, whatever its age: they may hold a dropped message's vector.
    What cannot be deleted (a folder planted in its place) is logged: it was never read."""
    for kept in (path, *path.parent.glob(f".{path.name}.*.tmp")):
        try:
            kept.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("%s could not be deleted (%s)", kept, exc)
