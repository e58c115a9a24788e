"""Which GGUF model file the built-in runtime loads.

A stand-in holding only `chosen`: the model files module (`charlie model …`, the starter
model) replaces it and keeps CHARLIE_LLM_MODEL_FILE as the first choice.
"""

from __future__ import annotations

from pathlib import Path

from charlie.config import Settings


def chosen(settings: Settings) -> Path | None:
    """The model file to load, or None when none is chosen."""
    return settings.llm_model_file
