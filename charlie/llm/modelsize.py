"""How big a model is — its parameter count — read from what is already said about it.

`auto` starts a small model (under `SMALL_BELOW` parameters) in constrained steps from its
first answer (`charlie.llm.toolmode`), instead of spending its first answers finding out. The
count comes, in this order, from:

- the model's name, as servers and model files spell it: `qwen2.5-coder-1.5b-instruct`,
  `SmolLM2-135M-Instruct.Q4_1.gguf`, `llama3.2:3b`, `Qwen2.5-0.5B`, `mixtral-8x7b` (no
  request at all);
- llama.cpp's `/v1/models`, whose entry carries `meta.n_params` (the built-in runtime's
  too), and its `/props`, whose `model_path` names the file when an alias hides it;
- Ollama's `/api/show`: `model_info["general.parameter_count"]`, or `details.parameter_size`
  ("1.5B").

LM Studio and vLLM say nothing of it beyond the name. A model nothing is said of has no
size: `auto` then looks at what the model does (`charlie.llm.doctor.first_look`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

from charlie.jsonvalue import JSON, JSONObject
from charlie.llm.client import LLMClient

SMALL_BELOW = 4_000_000_000  # under ~4B parameters a model narrates tools more than it calls them
FEWEST = 50_000_000  # below this a number in a name is not a chat model's size
UNITS = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}
# "1.5b", "135M", "8x7b" — not glued to a letter or digit before ("a3b": active experts,
# "e4b": effective size) nor followed by one ("4k" context, "q4_k_m" quantisation).
COUNT = re.compile(r"(?<![a-z0-9.])(?:(\d+)x)?(\d+(?:\.\d+)?)([mbt])(?![a-z0-9])", re.IGNORECASE)


@dataclass(frozen=True)
class Size:
    """A model's parameter count (None: nothing says) and where it was read."""

    params: int | None = None
    source: str = ""

    @property
    def small(self) -> bool:
        return self.params is not None and self.params < SMALL_BELOW

    @property
    def label(self) -> str:
        """`1.5B`, `135M`."""
        return label(self.params) if self.params is not None else "unknown"


def label(params: int) -> str:
    if params >= 1e9:
        return f"{params / 1e9:.1f}".removesuffix(".0") + "B"
    return f"{params / 1e6:.0f}M"


def from_name(name: str) -> int | None:
    """The parameter count a model's name spells (the file name, where it is a path)."""
    stem = PurePath(name.strip()).name or name
    found = COUNT.search(stem)
    if found is None:
        return None
    experts, number, unit = found.groups()
    count = float(number) * UNITS[unit.lower()] * (int(experts) if experts else 1)
    return int(count) if count >= FEWEST else None  # "12m": not a language model's size


def from_count(text: JSON) -> int | None:
    """A count as servers write it: 1543714304, "1.5B", "494.03M"."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return int(text) if text > 0 else None
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmbt])\s*", str(text or ""), re.IGNORECASE)
    return int(float(found[1]) * UNITS[found[2].lower()]) if found else None


def discover(llm: LLMClient, model: str) -> Size:
    """How big `model` is, from its name or else what `llm`'s server says (quick looks,
    each a hint: a server that says nothing leaves it unknown; one that does not answer
    its model list, not looked for — `source` empty — so it is looked for again)."""
    named = from_name(model)
    if named is not None:
        return Size(named, "its name")
    listed = llm.about("/models")
    if listed is None:
        return Size()
    for entry in _entries(listed):
        aliases, meta = entry.get("aliases") or [], entry.get("meta")
        if model == entry.get("id") or (isinstance(aliases, list) and model in aliases):
            count = from_count(meta.get("n_params") if isinstance(meta, dict) else None)
            if count:
                return Size(count, "the server's /v1/models")
    props = llm.about("/props")
    if isinstance(props, dict):
        count = from_name(str(props.get("model_path") or ""))
        if count:
            return Size(count, "the model file the server names (/props)")
    shown = llm.about("/api/show", {"model": model})
    if isinstance(shown, dict):
        info, details = shown.get("model_info"), shown.get("details")
        count = from_count(
            info.get("general.parameter_count") if isinstance(info, dict) else None
        ) or from_count(details.get("parameter_size") if isinstance(details, dict) else None)
        if count:
            return Size(count, "Ollama's /api/show")
    return Size(None, "nothing said of it")


def _entries(listed: JSON) -> list[JSONObject]:
    data = listed.get("data") if isinstance(listed, dict) else None
    return [entry for entry in data if isinstance(entry, dict)] if isinstance(data, list) else []
