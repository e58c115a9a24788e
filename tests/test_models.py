"""The built-in model's files: the GGUF header read and checked (magic, version, a whole
header, a chat template, the memory it needs), and which file the built-in runtime loads."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.model_files import QWENISH, gguf_bytes, write_gguf

from charlie.config import load_settings
from charlie.errors import ModelMissing, ModelRefused
from charlie.files import write_atomic
from charlie.llm import models, starter
from charlie.llm.gguf import Skipped, read_header
from charlie.llm.models import Memory

PLENTY = Memory(total=16 * 10**9, available=12 * 10**9)


def test_the_header_is_read_and_long_arrays_are_only_counted(tmp_path: Path) -> None:
    header = read_header(write_gguf(tmp_path / "m.gguf"))
    assert header.version == 3
    assert header.tensors == 2
    assert header.architecture == "qwen2"
    assert header.of_architecture("block_count") == 2
    assert header.chat_template is not None and "im_start" in header.chat_template
    assert header.metadata["tokenizer.ggml.tokens"] == Skipped(100)


def test_a_model_that_passes_is_described(tmp_path: Path) -> None:
    checked = models.check(write_gguf(tmp_path / "m.gguf"), PLENTY)
    assert checked.name == "Tiny Test Instruct"
    assert checked.tools  # its template speaks of tools
    assert checked.warning is None
    # 2 (keys, values) × 2 layers × 2 KV heads × 16 (64 wide / 4 heads) × 4,096 tokens (the
    # model's own window, under the 8,192 planned) × 2 bytes
    assert checked.need.context == 1_048_576
    assert checked.need.measured


def _without(key: str) -> dict[str, object]:
    return {k: v for k, v in QWENISH.items() if k != key}


CASES = {
    "text": (b"just some notes\n" * 4, "is not a GGUF model file: it starts with b'just'"),
    "safetensors": (
        struct.pack("<Q", 20) + b'{"a": {"dtype": "F"}}' + b"\0" * 40,
        "Charlie's built-in runtime (llama.cpp) reads GGUF files only",
    ),
    "tiny": (b"GGUF\x03\0\0\0", "is not a GGUF model file: it holds only 8 bytes."),
    "version 1": (gguf_bytes(version=1), "is GGUF version 1: versions 2 and 3 are read."),
    "big-endian": (
        b"GGUF" + struct.pack(">I", 3) + gguf_bytes()[8:],
        "is GGUF version 50331648: a big-endian file",
    ),
    "cut in the header": (gguf_bytes()[:300], "is damaged or cut short:"),
    "cut in the weights": (gguf_bytes(weights=40_000)[:-30_000], "is cut short: its weights"),
    "no template": (
        gguf_bytes(_without("tokenizer.chat_template")),
        "has no chat template in its metadata (tokenizer.chat_template)",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_file_that_is_no_usable_model_is_refused_with_what_is_wrong(
    tmp_path: Path, case: str
) -> None:
    data, said = CASES[case]
    path = tmp_path / "model.gguf"
    path.write_bytes(data)
    with pytest.raises(ModelRefused) as refused:
        models.use(load_settings(), path, PLENTY)
    assert said in str(refused.value)
    assert str(path) in str(refused.value)
    assert models.chosen(load_settings()) is None  # nothing was recorded


def test_a_folder_or_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelRefused, match="is a folder, not a GGUF model file"):
        models.check(tmp_path, PLENTY)
    with pytest.raises(ModelRefused, match="There is no file"):
        models.check(tmp_path / "nothing.gguf", PLENTY)


def test_a_model_larger_than_the_memory_is_refused_and_a_tight_one_warned(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", weights=400_000)
    need = models.check(path, PLENTY).need.total
    with pytest.raises(ModelRefused) as refused:
        models.check(path, Memory(total=need - 1, available=need - 1))
    assert "Tiny Test Instruct needs about" in str(refused.value)
    assert "in all: it cannot run here. Choose a smaller model" in str(refused.value)
    busy = models.check(path, Memory(total=need * 4, available=need // 2))
    assert busy.warning is not None and "is free now: close other programs" in busy.warning
    tight = models.check(path, Memory(total=need + 1, available=None))
    assert tight.warning is not None and "little is left for anything else" in tight.warning
    assert models.check(path, Memory(total=None, available=None)).warning is None


def test_the_memory_of_this_machine_is_read() -> None:
    memory = models.machine_memory()
    assert memory.total is not None and memory.total > 100 * 10**6
    assert memory.available is None or 0 <= memory.available <= memory.total


def test_which_file_is_loaded_setting_then_choice_then_starter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings()
    assert models.chosen(settings) is None
    # The starter model, once installed (its file and the stamp of its check).
    offered = starter.STARTER
    settings.model_dir.mkdir(parents=True)
    installed = starter.target(settings, offered)
    with installed.open("wb") as out:
        out.truncate(offered.size)  # sparse: the size is what is looked at, not re-hashed
    assert models.chosen(settings) is None  # not checked: never loaded
    write_atomic(starter.stamp(settings, offered), offered.sha256 + "\n")
    assert models.choice(settings) == models.Chosen(installed, "starter")
    # A file chosen with `charlie model use` comes before it …
    own = write_gguf(tmp_path / "own.gguf")
    models.use(settings, own, PLENTY)
    assert models.choice(settings) == models.Chosen(own.resolve(), "chosen")
    assert json.loads((settings.model_dir / "chosen.json").read_text())["path"] == str(
        own.resolve()
    )
    # … and CHARLIE_LLM_MODEL_FILE before both.
    other = write_gguf(tmp_path / "other.gguf")
    monkeypatch.setenv("CHARLIE_LLM_MODEL_FILE", str(other))
    assert models.choice(load_settings()) == models.Chosen(other, "setting")
    monkeypatch.setenv("CHARLIE_LLM_MODEL_FILE", "")
    assert models.choice(load_settings()) == models.Chosen(own.resolve(), "chosen")
    # Back to the starter model.
    assert models.use_starter(settings)
    assert models.chosen(settings) == installed


def test_a_chosen_file_that_is_gone_is_said_never_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings()
    own = write_gguf(tmp_path / "own.gguf")
    models.use(settings, own, PLENTY)
    own.unlink()
    with pytest.raises(ModelMissing) as missing:
        models.chosen(settings)
    assert str(missing.value) == (
        f"The model file chosen with `charlie model use` is not there: {own.resolve()}. Choose "
        "one with `charlie model use PATH`, or `charlie model use --starter` for the starter "
        "model."
    )
    monkeypatch.setenv("CHARLIE_LLM_MODEL_FILE", str(tmp_path / "gone.gguf"))
    with pytest.raises(ModelMissing, match="chosen with CHARLIE_LLM_MODEL_FILE is not there"):
        models.chosen(load_settings())


def test_a_measured_speed_is_recorded_and_read_back(tmp_path: Path) -> None:
    settings = load_settings()
    path = write_gguf(tmp_path / "m.gguf")
    assert models.measured_speed(settings, path) is None
    recorded = models.record_speed(settings, path, generated=5.25, prompt=31.0)
    assert models.measured_speed(settings, path) == recorded
    assert recorded.words().startswith("5.2 tokens/s generated, 31 tokens/s of prompt read")
    path.write_bytes(gguf_bytes(weights=8192))  # another file under that name
    assert models.measured_speed(settings, path) is None


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cut=st.integers(0, 2000),
    flips=st.lists(st.tuples(st.integers(0, 1999), st.integers(0, 255)), max_size=4),
)
def test_a_damaged_header_is_refused_never_read_past_its_end(
    tmp_path: Path, cut: int, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(gguf_bytes(weights=1024))
    for at, value in flips:
        if at < len(data):
            data[at] = value
    path = tmp_path / "damaged.gguf"
    path.write_bytes(bytes(data[: len(data) - cut]))
    try:
        header = read_header(path)
    except ModelRefused as refused:
        assert str(path) in str(refused)
    else:
        assert header.data_end < path.stat().st_size
