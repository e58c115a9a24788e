import re
import threading
from pathlib import Path
from pydoc_data.topics import topics

import numpy as np
import pytest

from charlie.retrieval.embeddings import LocalEmbedder
from charlie.retrieval.vectors import VectorTable, integer_product

DOCS = Path(__file__).resolve().parent.parent / "docs"


def unit_rows(rows: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def brute_force(matrix: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    sims = matrix @ q
    return sorted(range(len(sims)), key=lambda i: (-sims[i], i))[:k]


def test_a_small_table_is_searched_exactly_best_first() -> None:
    matrix = unit_rows(500)
    table = VectorTable(matrix)
    assert table.reduced is None  # under exact_below: no first stage
    q = matrix[7]
    rows, sims = table.top(q, 10)
    assert rows.tolist() == brute_force(matrix, q, 10)
    assert rows[0] == 7 and sims[0] == pytest.approx(1.0)
    assert np.all(np.diff(sims) <= 0)
    np.testing.assert_allclose(sims, matrix[rows] @ q, rtol=1e-6)


def test_rows_limit_the_search_to_those_ranges_and_keep_the_matrix_row_numbers() -> None:
    matrix = unit_rows(1000)
    q = matrix[950]
    spans = [(100, 200), (900, 1000)]
    for table in (VectorTable(matrix), VectorTable(matrix, exact_below=0, min_shortlist=50)):
        rows, _ = table.top(q, 20, rows=spans)
        allowed = [*range(100, 200), *range(900, 1000)]
        assert all(100 <= r < 200 or 900 <= r < 1000 for r in rows)
        truth = [allowed[i] for i in brute_force(matrix[allowed], q, 20)]
        assert rows[0] == 950 and set(rows.tolist()) <= set(allowed)
        if table.reduced is None:
            assert rows.tolist() == truth


def test_edge_cases_return_what_there_is() -> None:
    matrix = unit_rows(50)
    table = VectorTable(matrix)
    rows, sims = table.top(matrix[0], 500)
    assert sorted(rows.tolist()) == list(range(50)) and len(sims) == 50
    assert table.top(matrix[0], 0)[0].size == 0
    assert table.top(matrix[0], 5, rows=[])[0].size == 0
    assert table.top(matrix[0], 5, rows=[(10, 10), (60, 80)])[0].size == 0  # empty, past end
    with pytest.raises(ValueError, match="dimensions"):
        table.top(np.ones(8, dtype=np.float32), 5)
    empty = VectorTable(np.empty((0, 32), dtype=np.float32))
    assert empty.top(matrix[0], 5)[0].size == 0


def test_the_two_stage_search_returns_exact_cosines_of_its_rows() -> None:
    matrix = unit_rows(3000, dim=64)
    table = VectorTable(matrix, dims=16, exact_below=0, min_shortlist=100)
    assert table.reduced is not None and table.reduced.codes.shape == (3000, 16)
    q = matrix[42]
    rows, sims = table.top(q, 10)
    assert rows[0] == 42
    np.testing.assert_allclose(sims, matrix[rows] @ q, rtol=1e-6)
    assert np.all(np.diff(sims) <= 0)


def varied_texts() -> list[str]:
    """About 3,000 real sentences: the Python reference (pydoc topics) and Charlie's docs."""
    text = " ".join(topics.values()) + " ".join(p.read_text() for p in sorted(DOCS.glob("*.md")))
    sentences = (" ".join(s.split()) for s in re.split(r"(?<=[.!?])\s+|\n\n+", text))
    return list(dict.fromkeys(s for s in sentences if 40 < len(s) < 300))


@pytest.fixture(scope="module")
def embedded() -> np.ndarray:
    texts = varied_texts()
    assert len(texts) > 2500
    return LocalEmbedder().embed(texts[:3200])


def test_two_stage_finds_the_brute_force_top_k_on_real_embeddings(embedded: np.ndarray) -> None:
    """Real MiniLM vectors; the shortlist as small a share of the rows as at 100k notes."""
    matrix, queries = embedded[:-200], embedded[-200:]  # queries are not in the table
    table = VectorTable(matrix, exact_below=0, min_shortlist=1, shortlist_per_result=10)
    for k in (5, 10, 20):
        identical, recall = 0, 0.0
        for q in queries:
            truth = brute_force(matrix, q, k)
            rows, _sims = table.top(q, k)
            identical += rows.tolist() == truth
            recall += len(set(truth) & set(rows.tolist())) / k
        assert recall / len(queries) >= 0.995, k
        assert identical >= 0.95 * len(queries), k


def test_the_first_stage_multiplies_8_bit_codes_exactly_in_integers() -> None:
    matrix = unit_rows(3000, dim=64)
    table = VectorTable(matrix, dims=16, exact_below=0, min_shortlist=100)
    reduced = table.reduced
    assert reduced is not None and reduced.codes.dtype == np.uint8
    assert reduced.codes.min() >= 1 and reduced.codes.max() == 255  # ±127 around 128
    # The extremes, where 8-bit pair sums in 16 bits would saturate: exact in int32.
    extreme = np.full((40, 16), 255, dtype=np.uint8)
    extreme[::2] = 1
    for q7 in (np.full((16, 1), 63, dtype=np.int8), np.full((16, 1), -63, dtype=np.int8)):
        expected = (extreme.astype(np.int32) - 128) @ q7.astype(np.int32)
        np.testing.assert_array_equal(integer_product(extreme, q7), expected[:, 0])
    q7 = np.random.default_rng(3).integers(-63, 64, size=(16, 1)).astype(np.int8)
    expected = (reduced.codes.astype(np.int32) - 128) @ q7.astype(np.int32)
    np.testing.assert_array_equal(integer_product(reduced.codes, q7), expected[:, 0])
    # Decoded, the codes are the projected rows to half a step of their column's scale.
    decoded = (reduced.codes.astype(np.float32) - 128) * reduced.scales
    assert np.all(np.abs(decoded - matrix @ reduced.basis) <= reduced.scales / 2 + 1e-6)


def test_a_broken_row_spoils_neither_the_projection_nor_the_codes_of_the_others() -> None:
    matrix = unit_rows(3000, dim=64)
    broken = matrix.copy()
    broken[::500] = np.nan  # a model that answered garbage for a few texts
    table = VectorTable(broken, dims=16, exact_below=0, min_shortlist=100)
    assert table.reduced is not None and np.isfinite(table.reduced.basis).all()
    assert np.isfinite(table.reduced.scales).all()
    q = matrix[42]
    rows, _ = table.top(q, 10)
    assert rows[0] == 42 and not set(range(0, 3000, 500)) & set(rows.tolist())


def test_halves_cut_the_spans_into_two_ordered_runs_of_about_as_many_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from charlie.retrieval import vectors

    rng = np.random.default_rng(5)
    monkeypatch.setattr(vectors, "SPLIT_ROWS", 10)
    for _ in range(300):
        cuts = np.sort(rng.choice(400, size=2 * int(rng.integers(1, 6)), replace=False))
        spans = [(int(a), int(b)) for a, b in zip(cuts[::2], cuts[1::2], strict=True)]
        total = sum(b - a for a, b in spans)
        first, second = vectors._halves(spans)
        rows = [r for a, b in spans for r in range(a, b)]
        assert [r for a, b in first + second for r in range(a, b)] == rows
        assert all(a < b for a, b in first + second)  # no empty span handed on
        if total < 10:
            assert (first, second) == (spans, [])
        else:
            assert sum(b - a for a, b in first) == total // 2


def test_the_product_in_two_threads_ranks_exactly_as_in_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from charlie.retrieval import vectors

    matrix = unit_rows(6000, dim=64, seed=9)
    table = VectorTable(matrix, dims=16, exact_below=0, min_shortlist=300)
    spans = [(0, 1700), (2100, 4999), (5200, 6000)]  # as if three projects were asked
    queries = unit_rows(20, dim=64, seed=10)
    monkeypatch.setattr(vectors, "SPLIT_ROWS", 10**9)
    monkeypatch.setattr(vectors, "SPLIT_SHORTLIST", 10**9)
    alone = [table.top(q, 30, spans) for q in queries]
    threads: set[str] = set()
    product = vectors.integer_product

    def noted(codes: np.ndarray, q7: np.ndarray) -> np.ndarray:
        threads.add(threading.current_thread().name)
        return product(codes, q7)

    monkeypatch.setattr(vectors, "integer_product", noted)
    monkeypatch.setattr(vectors, "SPLIT_ROWS", 100)
    monkeypatch.setattr(vectors, "SPLIT_SHORTLIST", 100)
    for q, (rows, sims) in zip(queries, alone, strict=True):
        split_rows, split_sims = table.top(q, 30, spans)
        np.testing.assert_array_equal(split_rows, rows)
        np.testing.assert_allclose(split_sims, sims, rtol=1e-6)  # BLAS sums in blocks
    assert any(name.startswith("charlie-vectors") for name in threads) and len(threads) == 2


def test_a_failure_in_the_helper_thread_reaches_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from charlie.retrieval import vectors

    table = VectorTable(unit_rows(3000, dim=64), dims=16, exact_below=0, min_shortlist=100)
    product = vectors.integer_product

    def failing(codes: np.ndarray, q7: np.ndarray) -> np.ndarray:
        if threading.current_thread().name.startswith("charlie-vectors"):
            raise MemoryError("no room for the second half")
        return product(codes, q7)

    monkeypatch.setattr(vectors, "integer_product", failing)
    monkeypatch.setattr(vectors, "SPLIT_ROWS", 100)
    with pytest.raises(MemoryError, match="second half"):
        table.top(unit_rows(1, dim=64, seed=2)[0], 10)


def test_a_process_shutting_down_still_gets_the_whole_product(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from charlie.retrieval import vectors

    table = VectorTable(unit_rows(3000, dim=64), dims=16, exact_below=0, min_shortlist=100)
    q = unit_rows(1, dim=64, seed=4)[0]
    whole = table.top(q, 10)
    closed = ThreadPoolExecutor(1)
    closed.shutdown()  # as at interpreter exit: submit raises RuntimeError
    monkeypatch.setattr(vectors, "_helper", lambda: closed)
    monkeypatch.setattr(vectors, "SPLIT_ROWS", 100)
    monkeypatch.setattr(vectors, "SPLIT_SHORTLIST", 100)
    rows, sims = table.top(q, 10)
    np.testing.assert_array_equal(rows, whole[0])
    np.testing.assert_allclose(sims, whole[1], rtol=1e-6)
