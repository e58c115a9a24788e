"""The int8 embedding model: derived once from the packaged file, kept under its own digest,
derived again when damaged, in memory when the cache cannot be written."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from charlie.retrieval import int8_model
from charlie.retrieval.embeddings import EmbeddingError, LocalEmbedder

TEXTS = [
    "The boiler was serviced in March and the plumber left the invoice in the drawer.",
    "We chose the blue tiles for the bathroom because they hide limescale.",
    "Grandma's birthday dinner is at the Italian place on Friday at seven.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
]
QUERIES = ["when is the birthday dinner", "which tiles did we pick", "how do plants make sugar"]


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding the derived model, made once for this module."""
    cache = tmp_path_factory.mktemp("model-cache")
    LocalEmbedder(cache=cache).load()
    return cache


def cached(cache: Path) -> list[Path]:
    return sorted(cache.glob("all-MiniLM-L6-v2-*.onnx"))


def copy_of(cache: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    return copy


def test_the_model_is_derived_once_and_named_by_its_own_digest(
    derived: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (model,) = cached(derived)
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    assert model.name.endswith(f"-{int8_model.RECIPE}-{digest[:16]}.onnx")
    assert not list(derived.glob(".deriving-*"))  # the work folder went

    def never(source: Path, work: Path) -> Path:
        raise AssertionError("derived again although the cache holds the model")

    monkeypatch.setattr(int8_model, "_derive", never)
    vectors = LocalEmbedder(cache=derived).embed(TEXTS)  # a new process's embedder
    assert vectors.shape == (4, 384)
    assert cached(derived) == [model]


def test_int8_vectors_find_what_the_packaged_model_finds(derived: Path) -> None:
    int8 = LocalEmbedder(cache=derived)
    packaged = LocalEmbedder(int8=False)
    assert int8.name != packaged.name  # other vectors: an index built before re-embeds
    a, b = int8.embed(TEXTS), packaged.embed(TEXTS)
    assert np.einsum("ij,ij->i", a, b).min() > 0.97
    qa, qb = int8.embed(QUERIES), packaged.embed(QUERIES)
    assert list((qa @ a.T).argmax(axis=1)) == list((qb @ b.T).argmax(axis=1)) == [2, 1, 3]


def test_a_damaged_cached_model_is_derived_again_and_the_log_says_so(
    derived: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = copy_of(derived, tmp_path)
    (model,) = cached(cache)
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the middle of a weight
    model.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="charlie"):
        vectors = LocalEmbedder(cache=cache).embed(TEXTS)
    assert any("is damaged" in r.getMessage() for r in caplog.records)
    (again,) = cached(cache)
    assert again.name == model.name  # the same content, derived again
    assert hashlib.sha256(again.read_bytes()).hexdigest()[:16] in again.name
    expected = LocalEmbedder(cache=derived).embed(TEXTS)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)


def test_a_cache_that_cannot_be_written_derives_in_memory_and_says_what_to_set(
    derived: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache's parent should be")
    with caplog.at_level(logging.WARNING, logger="charlie"):
        vectors = LocalEmbedder(cache=blocker / "models").embed(TEXTS)
    (warning,) = [r for r in caplog.records if "Cannot keep" in r.getMessage()]
    assert "CHARLIE_MODEL_CACHE" in warning.getMessage()
    assert blocker.read_text().startswith("a file")  # nothing clobbered
    expected = LocalEmbedder(cache=derived).embed(TEXTS)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)


def test_a_derivation_that_fails_is_an_embedding_error_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(source: Path, work: Path) -> Path:
        raise int8_model.DerivationError("ValueError: no MatMul found")

    monkeypatch.setattr(int8_model, "_derive", broken)
    with pytest.raises(EmbeddingError, match="pip install") as raised:
        LocalEmbedder(cache=tmp_path / "cache").embed(TEXTS)
    assert "no MatMul found" in str(raised.value)
    assert not cached(tmp_path / "cache")


def test_a_killed_derivations_work_folder_is_removed_after_an_hour(
    derived: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    old, recent = cache / ".deriving-old", cache / ".deriving-recent"
    for folder in (old, recent):
        folder.mkdir(parents=True)
        (folder / "folded.onnx").write_bytes(b"\0" * 1024)
    hours_ago = time.time() - 2 * int8_model.LEFTOVER_AGE
    os.utime(old, (hours_ago, hours_ago))
    for model in cached(derived):  # derive by copying: the module's model, as _derive would
        monkeypatch.setattr(
            int8_model, "_derive", lambda source, work, model=model: Path(shutil.copy(model, work))
        )
    LocalEmbedder(cache=cache).load()
    assert not old.exists()
    assert recent.exists()  # perhaps another process deriving right now
    assert len(cached(cache)) == 1


def test_the_quantizers_advice_stays_out_of_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        LocalEmbedder(cache=tmp_path / "cache").load()
    assert [r.getMessage() for r in caplog.records if r.name == "root"] == []
    assert any("Derived the int8 embedding model" in r.getMessage() for r in caplog.records)


def test_the_derived_graph_is_compact_and_pads_on_the_right_like_the_embedder(
    derived: Path,
) -> None:
    import onnx

    (model,) = cached(derived)
    ops = [node.op_type for node in onnx.load(str(model)).graph.node]
    assert ops.count("QAttention") == 6 and "Softmax" not in ops  # attention fused per layer
    assert len(ops) < 150  # the exported graph has over 400 nodes, each a thread wake-up
    embedder = LocalEmbedder(cache=derived)
    short = "We chose the blue tiles."
    alone = embedder.embed([short])[0]
    beside_a_longer_text = embedder.embed([short, TEXTS[3] * 3])[0]  # padded to the longer
    assert float(alone @ beside_a_longer_text) > 0.98


def test_a_rebuilt_graph_that_does_not_compute_the_packaged_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(int8_model, "HEADS", 6)  # a wrong rebuild: 6 heads of 64, not 12 of 32
    with pytest.raises(EmbeddingError, match="differs from the packaged one"):
        LocalEmbedder(cache=tmp_path / "cache").load()
    assert not cached(tmp_path / "cache")


def test_a_new_derivation_removes_the_models_of_earlier_recipes(
    derived: Path, tmp_path: Path
) -> None:
    cache = copy_of(derived, tmp_path)
    (current,) = cached(cache)
    earlier = cache / "all-MiniLM-L6-v2-8199be6f699a-matmul-int8-r1-46aada35da05e330.onnx"
    earlier.write_bytes(b"an earlier version's model")
    unrelated = cache / "notes.txt"
    unrelated.write_text("not a model")
    theirs = cache / "all-MiniLM-L6-v2-quantized.onnx"  # a person's own file, not Charlie's
    theirs.write_bytes(b"their model")
    current.unlink()  # so this start derives
    LocalEmbedder(cache=cache).load()
    assert sorted(path.name for path in cached(cache)) == sorted([current.name, theirs.name])
    assert unrelated.read_text() == "not a model"
    assert theirs.read_bytes() == b"their model"


def test_two_processes_deriving_at_once_both_embed_and_leave_one_whole_model(
    derived: Path, tmp_path: Path
) -> None:
    import subprocess
    import sys

    cache = tmp_path / "cache"
    script = (
        "import sys; from pathlib import Path; from charlie.retrieval.embeddings import "
        "LocalEmbedder; import numpy as np; "
        "v = LocalEmbedder(cache=Path(sys.argv[1])).embed(['the boiler was serviced']); "
        "np.save(sys.argv[2], v)"
    )
    runs = [
        subprocess.Popen([sys.executable, "-c", script, str(cache), str(tmp_path / f"{i}.npy")])
        for i in range(2)
    ]
    assert [run.wait(timeout=120) for run in runs] == [0, 0]
    (model,) = cached(cache)  # the same recipe gives the same bytes, hence the same name
    assert model.name == cached(derived)[0].name
    assert not list(cache.glob(".deriving-*"))
    first, second = (np.load(tmp_path / f"{i}.npy") for i in range(2))
    np.testing.assert_array_equal(first, second)


def test_a_cache_too_full_for_the_derivation_derives_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = int8_model._derive
    cache = tmp_path / "cache"

    def full_disk_in_the_cache(source: Path, work: Path) -> Path:
        if work.parent == cache:  # onnx fails this way when the disk fills mid-write
            raise int8_model.DerivationError("InvalidProtobuf: Protobuf serialization failed")
        return real(source, work)

    monkeypatch.setattr(int8_model, "_derive", full_disk_in_the_cache)
    with caplog.at_level(logging.WARNING, logger="charlie.retrieval.int8_model"):
        vectors = LocalEmbedder(cache=cache).embed(TEXTS)
    assert vectors.shape == (4, 384)
    assert not cached(cache)
    assert "300 MB free" in caplog.text and "CHARLIE_MODEL_CACHE" in caplog.text
