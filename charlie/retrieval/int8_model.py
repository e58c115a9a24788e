"""The packaged MiniLM with its matrix products in int8: derived once, kept in the cache.

The shipped model file (`embeddings.MINILM_MODEL`) stores its weights as int8 but runs every
MatMul in float32: onnxruntime folds the weights back to floats when it loads the file. From
that file Charlie derives, once per machine, a model whose 36 weight MatMuls run as integer
products (onnxruntime's dynamic quantization): each weight matrix per output channel as
signed 7-bit integers, each batch's activations as unsigned 8-bit. Seven bits, not eight,
because the AVX2 and AVX-512 instructions older x86 CPUs use for int8 products saturate on
full-range weights; with seven no sum can saturate, so every CPU computes the same integers
and the same vectors. On 2 cores (Intel Xeon) that indexed SciFact's notes 1.6× as fast,
with SciFact nDCG@10 0.29 and LoCoMo recall@10 0.4 points lower (docs/retrieval.md).

The derived file lies in the model cache (`CHARLIE_MODEL_CACHE`, default the user's cache
folder) under a name that ends with the start of its own sha256: a file that does not hash
to its name is deleted and derived again. When the cache cannot be written, the model is
derived in memory at each start (about 4 s) and the log says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from charlie.files import sha256_of

log = logging.getLogger(__name__)

RECIPE = "matmul-int8-r1"
"""What the derivation does; a different recipe is a different model (and vector) name."""

DIGEST_CHARS = 16  # of the derived file's sha256, in its name
LEFTOVER_AGE = 3600.0  # seconds: a derivation's work folder older than this was killed


class DerivationError(Exception):
    """onnxruntime or onnx could not derive the int8 model from the packaged file."""


def int8_model(source: Path, source_sha256: str, cache: Path) -> Path | bytes:
    """The int8 model derived from `source` (already verified to hash to `source_sha256`):
    a path in `cache`, derived there the first time, or the model's bytes when `cache`
    cannot be written."""
    prefix = f"all-MiniLM-L6-v2-{source_sha256[:12]}-{RECIPE}-"
    found = _intact(cache, prefix)
    if found is not None:
        return found
    try:
        cache.mkdir(parents=True, exist_ok=True)
        _drop_leftovers(cache)
        with tempfile.TemporaryDirectory(dir=cache, prefix=".deriving-") as work:
            return _keep(_derive(source, Path(work)), cache, prefix)
    except OSError as exc:
        log.warning(
            "Cannot keep the int8 embedding model in %s (%s): it is derived again at each "
            "start; set CHARLIE_MODEL_CACHE to a folder Charlie can write",
            cache,
            exc.strerror or exc,
        )
    try:
        with tempfile.TemporaryDirectory(prefix="charlie-model-") as work:
            return _derive(source, Path(work)).read_bytes()
    except OSError as exc:  # not even the temp folder has room
        raise DerivationError(f"no room to derive it: {exc.strerror or exc}") from exc


def _intact(cache: Path, prefix: str) -> Path | None:
    """The first file in `cache` named `prefix<digest>.onnx` whose content hashes to its
    name; a file that does not is deleted (it is damaged, or was cut short)."""
    try:
        candidates = sorted(cache.glob(f"{prefix}*.onnx"))
    except OSError:
        return None
    for path in candidates:
        digest = path.name[len(prefix) : -len(".onnx")]
        try:
            if path.is_file() and sha256_of(path)[:DIGEST_CHARS] == digest:
                return path
            log.warning("The cached int8 model %s is damaged: deriving it again", path)
            path.unlink()
        except OSError as exc:
            log.warning("Cannot read the cached int8 model %s (%s)", path, exc.strerror or exc)
    return None


def _drop_leftovers(cache: Path) -> None:
    """Work folders of derivations that were killed (about 150 MB each)."""
    for folder in cache.glob(".deriving-*"):
        with contextlib.suppress(OSError):
            if time.time() - folder.stat().st_mtime > LEFTOVER_AGE:
                shutil.rmtree(folder)


def _keep(derived: Path, cache: Path, prefix: str) -> Path:
    """`derived` moved into `cache` under its content's name (atomic: a reader sees the whole
    file or none; two processes deriving at once each rename a whole file)."""
    target = cache / f"{prefix}{sha256_of(derived)[:DIGEST_CHARS]}.onnx"
    with derived.open("rb") as handle:
        os.fsync(handle.fileno())
    os.chmod(derived, 0o644)  # a model, no person's data: readable like the packaged one
    os.replace(derived, target)
    log.info("Derived the int8 embedding model once: %s", target)
    return target


def _derive(source: Path, work: Path) -> Path:
    """Run the recipe on `source` inside the folder `work`; the derived model's path."""
    import onnxruntime

    folded = work / "folded.onnx"
    options = onnxruntime.SessionOptions()
    # Basic optimisations only (portable, no CPU-specific fused operators): constant folding
    # turns each int8 weight and its Cast into the float32 matrix the quantizer reads.
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    options.log_severity_level = 3
    try:
        onnxruntime.InferenceSession(
            str(source), sess_options=options, providers=["CPUExecutionProvider"]
        )
        from onnxruntime.quantization import QuantType, quantize_dynamic

        derived = work / "int8.onnx"
        with _quiet_root_warnings():
            quantize_dynamic(
                str(folded),
                str(derived),
                op_types_to_quantize=["MatMul"],
                per_channel=True,
                reduce_range=True,
                weight_type=QuantType.QInt8,
            )
    except OSError:
        raise
    except Exception as exc:  # onnx / onnxruntime raise many kinds
        raise DerivationError(f"{type(exc).__name__}: {exc}") from exc
    return derived


@contextlib.contextmanager
def _quiet_root_warnings() -> Iterator[None]:
    """The quantizer advises "pre-processing" on the root logger; that is not the person's
    concern (the graph is folded above), so it stays out of Charlie's log."""

    def keep(record: logging.LogRecord) -> bool:
        return record.name != "root" or record.levelno > logging.WARNING

    root = logging.getLogger()
    root.addFilter(keep)
    try:
        yield
    finally:
        root.removeFilter(keep)
