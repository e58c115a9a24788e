"""The packaged MiniLM, rebuilt compact with its matrix products in int8: derived once, cached.

The shipped model file (`embeddings.MINILM_MODEL`) stores its weights as int8 but runs every
MatMul in float32: onnxruntime folds the weights back to floats when it loads the file. Its
graph, exported from PyTorch, has over 400 nodes, and onnxruntime wakes its thread pool for
each one. From that file Charlie derives, once per machine, the same network rebuilt from its
weights with onnxruntime's fused operators (one `Attention` per layer, `SkipLayerNormalization`,
`BiasGelu`: about 50 nodes, checked to compute what the packaged graph computes), then its
weight products made integer products (onnxruntime's dynamic quantization): each weight
matrix per output channel as signed 7-bit integers, each batch's activations as unsigned
8-bit. Seven bits, not eight, because the AVX2 and AVX-512 instructions older x86 CPUs use
for int8 products saturate on full-range weights; with seven no sum can saturate, so every
CPU computes the same integers and the same vectors. On 2 cores (Intel Xeon) that indexes
synthetic notes 2.6× as fast as the packaged file and embeds a query in 2 ms instead of 5,
with SciFact nDCG@10 (the shipped fusion search) 0.18 and LoCoMo recall@10 0.2 points lower
(docs/retrieval.md).

The derived file lies in the model cache (`CHARLIE_MODEL_CACHE`, default the user's cache
folder) under a name that ends with the start of its own sha256: a file that does not hash
to its name is deleted and derived again. When the cache cannot be written, the model is
derived in memory at each start (about 4 s) and the log says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from charlie.files import sha256_of

if TYPE_CHECKING:  # loaded only where a model is derived
    import numpy as np
    from onnx import ModelProto, NodeProto, TensorProto

log = logging.getLogger(__name__)

RECIPE = "fused-int8-r2"
"""What the derivation does; a different recipe is a different model (and vector) name."""

DIGEST_CHARS = 16  # of the derived file's sha256, in its name
DERIVED_NAME = re.compile(r"all-MiniLM-L6-v2-[0-9a-f]{12}-[a-z0-9-]+-r[0-9]+-[0-9a-f]{16}\.onnx")
"""What Charlie names a derived model (any recipe); nothing else in the cache is removed."""
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
    except (OSError, DerivationError) as exc:  # a full disk fails inside onnx, not as OSError
        log.warning(
            "Cannot keep the int8 embedding model in %s (%s): it is derived again at each "
            "start; set CHARLIE_MODEL_CACHE to a folder Charlie can write, with 300 MB free",
            cache,
            getattr(exc, "strerror", None) or exc,
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
    """Work folders of derivations that were killed (about 240 MB each: the folded, rebuilt
    and derived models)."""
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
    _drop_other_recipes(cache, prefix)
    return target


def _drop_other_recipes(cache: Path, prefix: str) -> None:
    """Models an earlier version of Charlie derived by another recipe (58 MB each): this
    version never reads them, and an older one that still runs derives its own again."""
    for path in cache.glob("all-MiniLM-L6-v2-*.onnx"):
        if DERIVED_NAME.fullmatch(path.name) and not path.name.startswith(prefix):
            with contextlib.suppress(OSError):
                path.unlink()
                log.info("Removed the embedding model of an earlier recipe: %s", path)


def _derive(source: Path, work: Path) -> Path:
    """Run the recipe on `source` inside the folder `work`; the derived model's path."""
    import onnxruntime

    folded = work / "folded.onnx"
    options = onnxruntime.SessionOptions()
    # Basic optimisations only (portable, no CPU-specific fused operators): constant folding
    # turns each int8 weight and its Cast into the float32 matrix the compact graph takes.
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    options.log_severity_level = 3
    try:
        onnxruntime.InferenceSession(
            str(source), sess_options=options, providers=["CPUExecutionProvider"]
        )
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        compact = work / "compact.onnx"
        onnx.save(_compact_graph(onnx.load(str(folded))), str(compact))
        _check_same_outputs(folded, compact)
        derived = work / "int8.onnx"
        with _quiet_root_warnings():
            quantize_dynamic(
                str(compact),
                str(derived),
                op_types_to_quantize=["MatMul", "Attention"],
                per_channel=True,
                reduce_range=True,
                weight_type=QuantType.QInt8,
                # the fused operators' outputs have no type for onnx's shape inference
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
    except (OSError, DerivationError):
        raise
    except Exception as exc:  # onnx / onnxruntime raise many kinds
        raise DerivationError(f"{type(exc).__name__}: {exc}") from exc
    return derived


LAYERS = 6
HEADS = 12
EPSILON = 1e-12  # every LayerNorm of the packaged graph


def _compact_graph(folded: ModelProto) -> ModelProto:
    """The packaged BERT rebuilt from its folded weights with onnxruntime's fused operators:
    per layer one `Attention` (the three projections in one product, the mask, softmax),
    two `SkipLayerNormalization`, one `BiasGelu`, three MatMuls; about 50 nodes where the
    exported graph has over 400, each of which wakes onnxruntime's threads. The attention
    mask is read as each row's length: the texts must be padded on the right, as
    `LocalEmbedder` pads them."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = folded.graph
    weights = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    made_by = {out: node for node in graph.node for out in node.output}

    def product_with(bias: str) -> np.ndarray:
        """The weight matrix of the MatMul whose output is added to the initializer `bias`."""
        for node in graph.node:
            if node.op_type == "Add" and bias in node.input:
                (other,) = (name for name in node.input if name != bias)
                product = made_by.get(other)
                if product is not None and product.op_type == "MatMul":
                    return weights[product.input[1]]
        raise DerivationError(f"the packaged graph has no product with the bias {bias}")

    def weight(name: str) -> np.ndarray:
        if name not in weights:
            raise DerivationError(f"the packaged graph has no weight {name}")
        return weights[name]

    kept: list[TensorProto] = []

    def initializer(name: str, array: np.ndarray) -> str:
        kept.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def fused(op: str, inputs: list[str], output: list[str], **attributes: Any) -> NodeProto:
        return helper.make_node(op, inputs, output, domain="com.microsoft", **attributes)

    positions = weight("inner.embeddings.position_ids")
    if not (positions.reshape(-1) == np.arange(positions.size)).all():
        raise DerivationError("the packaged graph's positions are not 0, 1, 2…")
    e = "inner.embeddings."
    nodes = [
        helper.make_node("Cast", [name], [f"{name}_32"], to=TensorProto.INT32)
        for name in ("input_ids", "token_type_ids", "attention_mask")
    ]
    nodes.append(
        fused(
            "EmbedLayerNormalization",
            [
                "input_ids_32",
                "token_type_ids_32",
                initializer("words", weight(e + "word_embeddings.weight")),
                initializer("positions", weight(e + "position_embeddings.weight")),
                initializer("token_types", weight(e + "token_type_embeddings.weight")),
                initializer("embeddings_gamma", weight(e + "LayerNorm.weight")),
                initializer("embeddings_beta", weight(e + "LayerNorm.bias")),
                "attention_mask_32",
            ],
            ["hidden_0", "lengths"],
            epsilon=EPSILON,
        )
    )

    def product(source: str, bias: str, output: str) -> NodeProto:
        """`source` times the packaged weight whose product is added to `bias`."""
        return helper.make_node(
            "MatMul", [source, initializer(f"{bias}.matrix", product_with(bias))], [output]
        )

    def skip_norm(source: str, skip: str, norm: str, bias: str, output: str) -> NodeProto:
        """LayerNorm(`source` + `bias` + `skip`) with the packaged norm `norm`'s weights."""
        names = (f"{norm}.weight", f"{norm}.bias", bias)
        inputs = [initializer(name, weight(name)) for name in names]
        return fused("SkipLayerNormalization", [source, skip, *inputs], [output], epsilon=EPSILON)

    hidden = "hidden_0"
    for layer in range(LAYERS):
        p = f"inner.encoder.layer.{layer}."
        parts = [f"{p}attention.self.{part}.bias" for part in ("query", "key", "value")]
        qkv = np.concatenate([product_with(bias) for bias in parts], axis=1)
        qkv_bias = np.concatenate([weight(bias) for bias in parts])
        out = "last_hidden_state" if layer == LAYERS - 1 else f"hidden_{layer + 1}"
        n = str(layer)
        nodes += [
            fused(
                "Attention",
                [
                    hidden,
                    initializer(f"qkv_{n}", qkv),
                    initializer(f"qkv_b_{n}", qkv_bias),
                    "lengths",
                ],
                [f"attention_{n}"],
                num_heads=HEADS,
            ),
            product(f"attention_{n}", f"{p}attention.output.dense.bias", f"dense_{n}"),
            skip_norm(
                f"dense_{n}",
                hidden,
                f"{p}attention.output.LayerNorm",
                f"{p}attention.output.dense.bias",
                f"attended_{n}",
            ),
            product(f"attended_{n}", f"{p}intermediate.dense.bias", f"up_{n}"),
            fused(
                "BiasGelu",
                [f"up_{n}", initializer(f"{p}up.bias", weight(f"{p}intermediate.dense.bias"))],
                [f"gelu_{n}"],
            ),
            product(f"gelu_{n}", f"{p}output.dense.bias", f"down_{n}"),
            skip_norm(
                f"down_{n}", f"attended_{n}", f"{p}output.LayerNorm", f"{p}output.dense.bias", out
            ),
        ]
        hidden = out
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info(
        "last_hidden_state",
        TensorProto.FLOAT,
        ["batch", "sequence", weight(e + "LayerNorm.weight").size],
    )
    model = helper.make_model(
        helper.make_graph(nodes, "all-MiniLM-L6-v2", inputs, [output], kept),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    model.ir_version = folded.ir_version
    return model


def _check_same_outputs(folded: Path, compact: Path) -> None:
    """The compact graph computes what the packaged one does (in float32, before quantizing),
    on a batch with a padded row; otherwise the packaged graph is not the one expected."""
    import numpy as np
    import onnxruntime

    ids = np.array([[101, 7592, 2088, 2003, 1037, 3231, 102], [101, 4248, 102, 0, 0, 0, 0]])
    mask = (ids != 0).astype(np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    outputs = []
    for path in (folded, compact):
        session = onnxruntime.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        (hidden,) = session.run(["last_hidden_state"], feeds)
        outputs.append(hidden[mask.astype(bool)])  # the padded positions are not used
    difference = float(np.abs(outputs[0] - outputs[1]).max())
    if not difference < 1e-3:
        raise DerivationError(
            f"the rebuilt graph differs from the packaged one by {difference:.3g}"
        )


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
