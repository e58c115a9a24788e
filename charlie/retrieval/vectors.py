"""Top-k cosine search over a matrix of unit vectors, fast at a few hundred thousand rows.

A brute-force search multiplies the query with every row: at 157,000 chunks of 384 float32
that reads 230 MiB per query, which is memory-bound (8–16 ms on 2 cores) and grows with
every note. `VectorTable` keeps, beside the exact matrix, a reduced copy of it: every row
projected onto the top right-singular vectors of a sample of the rows (128 of 384
dimensions, a third of the bytes). A query is multiplied with the reduced copy first, and
only the best few thousand rows (the shortlist) get their exact cosine, from which the
top k are taken. The projection keeps most of what tells sentence embeddings apart, so the
true best rows land in the shortlist: on real MiniLM embeddings the two-stage top k is the
brute-force top k for nearly every query (tests/test_vecsearch.py measures it), and what is
returned is always an exact cosine.

Small tables (under `exact_below` rows, or a restriction to so few rows) skip the first
stage: there the exact product is already cheaper than the detour.

Nothing here knows about notes or messages: rows are positions in the matrix, and the
caller keeps whatever they stand for.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
Rows = npt.NDArray[np.int64]
Codes = npt.NDArray[np.uint8]

EXACT_BELOW = 20_000  # rows: below this, the exact product alone is as fast
REDUCED_DIMS = 128
SAMPLE_ROWS = 8_192  # rows whose singular vectors give the projection
MIN_SHORTLIST = 2_000
SHORTLIST_PER_RESULT = 10
RESIDUAL_WEIGHT = 0.4

FirstStage = tuple[Matrix, Codes, Matrix, Matrix]  # basis, codes, scales, lost
T = TypeVar("T")


class VectorTable:
    """A float32 matrix of unit rows, searched by cosine with a reduced first stage.

    `matrix` is kept as given (not copied when already float32 and C-ordered); the reduced
    copy costs `dims / dim` of its memory and is built only when the table has at least
    `exact_below` rows."""

    def __init__(
        self,
        matrix: npt.ArrayLike,
        *,
        dims: int = REDUCED_DIMS,
        exact_below: int = EXACT_BELOW,
        min_shortlist: int = MIN_SHORTLIST,
        shortlist_per_result: int = SHORTLIST_PER_RESULT,
        seed: int = 0,
        first_stage: FirstStage | None = None,
    ) -> None:
        self.matrix: Matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        if self.matrix.ndim != 2:
            raise ValueError(f"a vector table needs a 2-d matrix, not shape {self.matrix.shape}")
        if dims < 1 or min_shortlist < 1 or shortlist_per_result < 1:
            raise ValueError("dims, min_shortlist and shortlist_per_result must be at least 1")
        self.exact_below = exact_below
        self.min_shortlist = min_shortlist
        self.shortlist_per_result = shortlist_per_result
        rows, dim = self.matrix.shape
        if first_stage is not None:  # built before from this matrix (`first_stage()`), kept
            self.reduced: Reduced | None = Reduced.restored(*first_stage)
            self.reduced.check(rows, dim)
        elif rows >= exact_below and dims < dim:
            self.reduced = Reduced(self.matrix, dims, seed)
        else:
            self.reduced = None

    def first_stage(self) -> FirstStage | None:
        """What the first stage was built from this matrix (basis, codes, scales, lost), to
        keep."""
        if self.reduced is None:
            return None
        reduced = self.reduced
        return reduced.basis, reduced.codes, reduced.scales, reduced.lost

    def __len__(self) -> int:
        return len(self.matrix)

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def top(
        self,
        query: npt.ArrayLike,
        k: int,
        rows: Sequence[tuple[int, int]] | None = None,
    ) -> tuple[Rows, npt.NDArray[np.float32]]:
        """The `k` rows most similar to `query` (a unit vector), best first, with their exact
        cosines. `rows` limits the search to these [start, end) ranges of the matrix (all
        rows when None); the row numbers returned are always the matrix's own."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"the query has {q.shape[0]} dimensions, the table {self.dim}")
        spans = [(0, len(self))] if rows is None else _clip(rows, len(self))
        total = sum(end - start for start, end in spans)
        k = min(k, total)
        if k < 1:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        shortlist = max(self.min_shortlist, self.shortlist_per_result * k)
        if self.reduced is None or total < max(self.exact_below, shortlist):
            sims = _product(self.matrix, spans, q)
            return _best(sims, k, lambda at: _rows_at(spans, at))
        short = _rows_at(spans, self.reduced.shortlist(q, spans, shortlist))
        short.sort()  # rows in order read the matrix in order
        return _best(_cosines(self.matrix, short, q), k, lambda at: short[at])


class Reduced:
    """The first stage: every row projected onto the top `dims` right-singular vectors of a
    sample of the rows (not centred: dot products, not distances to the mean, are what must
    survive), and the length of what each row lost in the projection.

    The projected rows are kept as 8-bit codes (one scale per dimension), a quarter of the
    bytes of float32: the first stage reads every row, and at 157,000 rows the float copy
    (77 MiB) no longer fits in the cache, so its product waits on memory. The codes'
    product is onnxruntime's integer matrix product (`integer_product`), 2.6× faster than
    the float one on this machine's 2 cores; it only ranks the shortlist, whose cosines
    are exact."""

    def __init__(self, matrix: Matrix, dims: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        rows = len(matrix)
        sample = matrix[np.sort(rng.choice(rows, min(rows, SAMPLE_ROWS), replace=False))]
        sample64 = sample[np.isfinite(sample).all(axis=1)].astype(np.float64)  # NaN: not one
        # The right-singular vectors are the eigenvectors of the (dim × dim) Gram matrix:
        # 60 ms where the SVD of the sample takes ten times as long.
        values, vectors = np.linalg.eigh(sample64.T @ sample64)
        top = vectors[:, np.argsort(values)[::-1][:dims]]
        self.basis: Matrix = np.ascontiguousarray(top, dtype=np.float32)  # (dim, dims)
        projected = matrix @ self.basis  # (rows, dims)
        kept = np.einsum("ij,ij->i", projected, projected)
        self.lost: Matrix = np.sqrt(np.clip(1.0 - kept, 0.0, None)).astype(np.float32)
        self.codes, self.scales = _encoded(projected)

    @classmethod
    def restored(cls, basis: Matrix, codes: Codes, scales: Matrix, lost: Matrix) -> Reduced:
        reduced = cls.__new__(cls)
        reduced.basis, reduced.codes, reduced.scales, reduced.lost = basis, codes, scales, lost
        return reduced

    def check(self, rows: int, dim: int) -> None:
        """Raise ValueError unless this first stage fits a matrix of `rows` × `dim`."""
        dims = self.basis.shape[-1] if self.basis.ndim == 2 else 0
        if not (
            1 <= dims <= dim
            and self.basis.shape == (dim, dims)
            and self.codes.shape == (rows, dims)
            and self.scales.shape == (dims,)
            and self.lost.shape == (rows,)
        ):
            raise ValueError(f"this first stage does not fit a {rows} × {dim} matrix")

    def shortlist(self, q: Matrix, spans: list[tuple[int, int]], size: int) -> Rows:
        """Positions (in `spans`' concatenation) of the `size` rows most promising for `q`.

        The projected product misses the dot product of the parts the projection lost, at
        most the product of their lengths; each row gets `RESIDUAL_WEIGHT` × that bound as
        a bonus, so a row the projection describes poorly is not hidden by it. On real
        MiniLM vectors this keeps the exact top k in the shortlist for ~99% of the queries
        instead of ~97% (measured with tests/test_vecsearch.py's texts)."""
        projected = q @ self.basis
        lost = float(np.sqrt(max(0.0, float(q @ q) - float(projected @ projected))))
        coarse = _coded_product(self.codes, spans, projected * self.scales)
        coarse += RESIDUAL_WEIGHT * lost * _slices(self.lost, spans)
        return _largest(coarse, size)


CODE_ZERO = 128  # a code is round(value / scale) + 128: 1..255
QUERY_LEVELS = 63
"""The query's codes are 7-bit (−63..63): a CPU without VNNI sums pairs of 8-bit products in
16 bits, which saturates for two 255 × 127 but never for two 255 × 63."""


def _encoded(projected: Matrix) -> tuple[Codes, Matrix]:
    """`projected`'s rows as 8-bit codes with one scale per column (its largest |value| is
    code 255 or 1), and the scales."""
    finite = np.nan_to_num(projected, nan=0.0, posinf=0.0, neginf=0.0)  # a broken row: 0s
    top = np.abs(finite).max(axis=0) if len(finite) else np.ones(finite.shape[1])
    scales = (np.where(top > 0, top, 1.0) / 127).astype(np.float32)
    codes = np.rint(finite / scales) + CODE_ZERO
    return np.ascontiguousarray(codes, dtype=np.uint8), scales


def _coded_product(codes: Codes, spans: list[tuple[int, int]], q: Matrix) -> Matrix:
    """About `decoded codes[spans] @ q`: `q` (already scaled per column) in 7-bit codes of
    one step, and the integer product of the two, times the step."""
    top = float(np.abs(q).max())
    step = top / QUERY_LEVELS if top > 0 else 1.0
    q7 = np.rint(q / step).astype(np.int8).reshape(-1, 1)
    first, second = _halves(spans)
    later = _beside(partial(_integer_parts, codes, second, q7)) if second else None
    parts = _integer_parts(codes, first, q7)
    if later is not None:
        parts += later()
    summed = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return cast(Matrix, summed.astype(np.float32) * np.float32(step))


SPLIT_ROWS = 40_000
"""Rows from which the first stage's product runs in two halves, one in a helper thread:
by the time it runs the keyword side beside it is mostly done, and the second core is
free (1.9 → 1.1 ms at 157,205 rows on 2 cores). On a busy machine the halves only take
turns, as the whole product would."""


def _halves(spans: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """`spans` cut in two runs of about as many rows each, in order; all in the first when
    there are under `SPLIT_ROWS`."""
    total = sum(b - a for a, b in spans)
    if total < SPLIT_ROWS:
        return spans, []
    first: list[tuple[int, int]] = []
    left = total // 2
    for at, (a, b) in enumerate(spans):
        if b - a >= left:  # the cut falls in this span
            first.append((a, a + left))
            rest = [(a + left, b)] if a + left < b else []
            return first, rest + spans[at + 1 :]
        first.append((a, b))
        left -= b - a
    return first, []


SPLIT_SHORTLIST = 2_000  # shortlisted rows from which their cosines are taken in two halves


def _cosines(matrix: Matrix, rows: Rows, q: Matrix) -> Matrix:
    """`matrix[rows] @ q`: the rows copied out with `take` (0.74 ms for 4,000 rows where
    `[]` takes 0.96), in two halves, one in the helper thread, from `SPLIT_SHORTLIST`
    rows."""
    if len(rows) < SPLIT_SHORTLIST:
        return _dot(matrix.take(rows, axis=0), q)
    half = len(rows) // 2
    later = _beside(lambda: _dot(matrix.take(rows[half:], axis=0), q))
    first = _dot(matrix.take(rows[:half], axis=0), q)
    return np.concatenate([first, later()])


def _integer_parts(
    codes: Codes, spans: list[tuple[int, int]], q7: npt.NDArray[np.int8]
) -> list[npt.NDArray[np.int32]]:
    return [integer_product(codes[a:b], q7) for a, b in spans]


def _beside(call: Callable[[], T]) -> Callable[[], T]:
    """`call` started in the helper thread; what it returns (or raises) once asked for. While
    the interpreter shuts down, when a thread can take no more work, it runs when asked."""
    try:
        future = _helper().submit(call)
    except RuntimeError:  # "cannot schedule new futures after (interpreter) shutdown"
        return call
    return future.result


_HELPER: dict[int, ThreadPoolExecutor] = {}  # by process id: a forked child makes its own


def _helper() -> ThreadPoolExecutor:
    """The one helper thread of the process that runs half of a first-stage product or of
    the shortlist's cosines."""
    pid = os.getpid()
    helper = _HELPER.get(pid)
    if helper is not None:
        return helper
    with _SESSION_LOCK:
        if pid not in _HELPER:
            _HELPER[pid] = ThreadPoolExecutor(1, thread_name_prefix="charlie-vectors")
        return _HELPER[pid]


def integer_product(codes: Codes, q7: npt.NDArray[np.int8]) -> npt.NDArray[np.int32]:
    """`(codes − 128) @ q7` in int32, exactly, for a C-ordered (rows, dims) uint8 `codes`
    and a (dims, 1) int8 `q7`: onnxruntime's `MatMulInteger` in the calling thread. numpy
    has no integer BLAS (its own int8 loop is 4× slower than float32 BLAS); this is 2.6×
    faster than it, on a quarter of the bytes."""
    out = _integer_session().run(None, {"codes": codes, "query": q7})[0]
    return cast(npt.NDArray[np.int32], out.reshape(-1))


_SESSION: list[object] = []  # the one integer-product session of the process, made on first use
_SESSION_LOCK = threading.Lock()


def _integer_session() -> Any:
    if _SESSION:  # made: no lock taken for it on every search
        return _SESSION[0]
    with _SESSION_LOCK:
        if not _SESSION:
            import onnxruntime
            from onnx import TensorProto, helper

            graph = helper.make_graph(
                [helper.make_node("MatMulInteger", ["codes", "query", "zero"], ["product"])],
                "coded_product",
                [
                    helper.make_tensor_value_info("codes", TensorProto.UINT8, ["rows", "dims"]),
                    helper.make_tensor_value_info("query", TensorProto.INT8, ["dims", 1]),
                ],
                [helper.make_tensor_value_info("product", TensorProto.INT32, ["rows", 1])],
                [helper.make_tensor("zero", TensorProto.UINT8, [], [CODE_ZERO])],
            )
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
            model.ir_version = 8
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = 1  # each call one core: the halves are two calls
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            _SESSION.append(
                onnxruntime.InferenceSession(
                    model.SerializeToString(), options, providers=["CPUExecutionProvider"]
                )
            )
        return _SESSION[0]


def _clip(rows: Sequence[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    spans = [(max(0, int(a)), min(length, int(b))) for a, b in rows]
    return [(a, b) for a, b in spans if b > a]


def _product(matrix: Matrix, spans: list[tuple[int, int]], q: Matrix) -> Matrix:
    """`matrix[spans] @ q`, in this thread only. A BLAS product of the whole matrix spreads
    over every core, and on a busy machine waits for all its threads to get a turn: 12 ms
    instead of 3 for the reduced product at 100k notes with other work running, and it
    would fight the keyword side's thread for the second core."""
    if len(spans) == 1 and spans[0] == (0, len(matrix)):
        return _dot(matrix, q)
    return np.concatenate([_dot(matrix[a:b], q) for a, b in spans])


BLOCK_VALUES = 1 << 18
"""Floats a product block: OpenBLAS runs a product this small in the calling thread."""


def _dot(matrix: Matrix, q: Matrix) -> Matrix:
    """`matrix @ q` in blocks that BLAS runs in this thread: at 157,205 × 128 that is 6.0
    ms a search where numpy's own loop (`einsum`) took 6.8 (the fusion p50 at 100k notes
    14.6 → 13.5 ms, docs/benchmarks/search-speed.md)."""
    q = q.astype(matrix.dtype, copy=False)  # np.dot writes into `out` only with one dtype
    rows = max(1, BLOCK_VALUES // max(1, matrix.shape[1]))
    if len(matrix) <= rows:
        return cast(Matrix, matrix @ q)
    out = np.empty(len(matrix), dtype=matrix.dtype)
    for start in range(0, len(matrix), rows):
        np.dot(matrix[start : start + rows], q, out=out[start : start + rows])
    return out


def _largest(values: Matrix, size: int) -> Rows:
    """Positions of the `size` largest `values`, in no order. A full `argpartition` of 157k
    values takes 1.5 ms; a threshold guessed from a sample of them first leaves a few
    thousand to partition, and when the guess keeps too few the full one runs."""
    if len(values) > 16 * size:
        sample = np.sort(values[:: max(1, len(values) // 4096)])
        guess = sample[max(0, len(sample) - 1 - int(2 * size * len(sample) / len(values)))]
        kept = np.flatnonzero(values >= guess)
        if len(kept) >= size:
            return kept[np.argpartition(-values[kept], size - 1)[:size]]
    return np.argpartition(-values, size - 1)[:size]


def _slices(values: Matrix, spans: list[tuple[int, int]]) -> Matrix:
    if len(spans) == 1 and spans[0] == (0, len(values)):
        return values
    return np.concatenate([values[a:b] for a, b in spans])


def _rows_at(spans: list[tuple[int, int]], at: Rows) -> Rows:
    """The matrix rows at positions `at` of the concatenated product of `spans`."""
    if len(spans) == 1:
        return at.astype(np.int64) + spans[0][0]
    return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in spans])[at]


def _best(sims: Matrix, k: int, rows_at: Callable[[Rows], Rows]) -> tuple[Rows, Matrix]:
    """The `k` best of `sims`, best first, as matrix rows; equal scores in the order of their
    rows (which of several rows tied at the k-th score are kept is not defined)."""
    at = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
    rows, best = rows_at(at), sims[at]
    order = np.lexsort((rows, -best))
    return rows[order], best[order].astype(np.float32)
