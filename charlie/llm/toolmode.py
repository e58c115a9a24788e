"""How an answer offers tools to the model — and, in `auto`, which way suits this model.

- `native`: the tools go in the request's `tools`; the model answers with `tool_calls`
  (or writes them as text, which `charlie.llm.textcalls` reads all the same).
- `text`: the tools are described in the prompt and the model writes its calls as text —
  for servers that drop `tools` (llama.cpp without `--jinja`).
- `constrained`: Charlie asks for the next step as JSON held to a schema (`json_schema`:
  which tool and its arguments, or `answer`), runs the tool, then asks for the answer in
  plain text — for models that narrate tools instead of calling them, or write calls
  nobody can read. Charlie also looks things up itself first (`charlie.chat.lookup`).
- `auto` (the default) picks from what is known of this model, kept in the database so
  every process (the server, `charlie chat -m`, the Discord bot) picks the same: its size
  (`charlie.llm.modelsize`: a model under ~4B parameters starts constrained, from its
  first answer), what `charlie doctor` observed, and how its own tool use went — failing
  in answers in a row moves it to constrained; a small model moves to native only once it
  has shown, in `PROVEN` answers in a row where it was given the tools itself (a project
  set to `native` or `text`), that it calls them cleanly.

The choice comes with its reason, shown in the answer's trace and by `charlie doctor`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from charlie.conversations import Channel
from charlie.db import now
from charlie.home import Home
from charlie.llm import modelsize
from charlie.llm.client import LLMClient
from charlie.llm.messages import FunctionSchema
from charlie.trace import ToolMode

Setting = Literal["auto", "native", "text", "constrained"]
Outcome = Literal["used", "missed", "none"]
MISSES_FOR_CONSTRAINED = 2  # answers in a row whose tool use failed before auto constrains
PROVEN = 3  # answers in a row with clean tool calls before a small model is given native
TEXT_TOOLS = (
    "You can use these tools. To use one, write only "
    '<tool_call>{{"name": "TOOL", "arguments": {{...}}}}</tool_call> and wait for its result; '
    "otherwise answer in plain words.\n{}"
)


@dataclass(frozen=True)
class Choice:
    """The mode of one answer, why, and whether Charlie looks things up itself first."""

    mode: ToolMode
    reason: str

    @property
    def looks_up(self) -> bool:
        return self.mode == "constrained"


@dataclass(frozen=True)
class Habits:
    """What was seen of one model on one server (None: not probed)."""

    native_calls: bool | None = None
    text_calls: bool | None = None
    json_schema: bool | None = None
    misses: int = 0
    last_miss: str = ""
    params: int | None = None  # its parameter count (`charlie.llm.modelsize`)
    params_source: str = ""  # where the count was read; empty: not looked for yet
    clean: int = 0  # answers in a row in which it called the tools it was given cleanly

    @property
    def size(self) -> modelsize.Size:
        return modelsize.Size(self.params, self.params_source)


def key(base_url: str, model: str) -> str:
    return f"{base_url.rstrip('/')} {model}"


def habits(home: Home, base_url: str, model: str) -> Habits:
    row = home.db.execute(
        "SELECT * FROM model_habits WHERE key = ?", (key(base_url, model),)
    ).fetchone()
    if row is None:
        return Habits()

    def flag(value: int | None) -> bool | None:
        return None if value is None else bool(value)

    return Habits(
        flag(row["native_calls"]),
        flag(row["text_calls"]),
        flag(row["json_schema"]),
        int(row["misses"]),
        str(row["last_miss"]),
        row["params"],
        str(row["params_source"]),
        int(row["clean"]),
    )


def decide(setting: Setting, seen: Habits) -> Choice:
    """The mode for `setting`, given what is known of the model."""
    if setting != "auto":
        return Choice(setting, f"tool_mode = {setting} (set)")
    schema_ok = seen.json_schema is not False
    if seen.misses >= MISSES_FOR_CONSTRAINED and schema_ok:
        return Choice(
            "constrained",
            f"auto: the model's tool use failed in {seen.misses} answers in a row "
            f"({seen.last_miss})",
        )
    if seen.native_calls is False and not seen.text_calls and schema_ok:
        return Choice("constrained", "auto: no tool call when tried")
    if seen.native_calls is False and seen.text_calls:
        return Choice("text", "auto: calls only as text when tried")
    size = seen.size
    if size.small and schema_ok:
        if seen.clean < PROVEN:
            return Choice(
                "constrained",
                f"auto: a small model ({size.label} parameters, from {size.source}) starts "
                f"with constrained steps until it has called tools cleanly in {PROVEN} "
                f"answers in a row ({seen.clean} so far)",
            )
        return Choice(
            "native",
            f"auto: a small model ({size.label}) that called tools cleanly in "
            f"{seen.clean} answers in a row",
        )
    if seen.native_calls:
        return Choice("native", "auto: a tool call when tried")
    return Choice("native", "auto: nothing seen of the model yet")


def setting_for(home: Home, channel: Channel) -> Setting:
    """How tools are offered in this channel: the project's `tool_mode`, else the setting."""
    configured = channel.project.config.tool_mode if channel.project else None
    return configured or home.settings.tool_mode


def sized(home: Home, llm: LLMClient) -> Habits:
    """What is known of `llm`'s model, its size looked for first if it never was (its name,
    else what the server says: `charlie.llm.modelsize`). Kept, so the next answer and every
    other process ask nothing; `charlie doctor` looks again."""
    seen = habits(home, llm.base_url, llm.model)
    if seen.params_source:
        return seen
    size = modelsize.discover(llm, llm.model)
    if not size.source:  # the server did not answer: look again next time
        return seen
    record_size(home, llm.base_url, llm.model, size)
    return habits(home, llm.base_url, llm.model)


def record_size(home: Home, base_url: str, model: str, size: modelsize.Size) -> None:
    home.db.execute(
        "INSERT INTO model_habits (key, params, params_source, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(key) DO UPDATE SET params = excluded.params, "
        "params_source = excluded.params_source, updated_at = excluded.updated_at",
        (key(base_url, model), size.params, size.source, now()),
    )


def record_answer(home: Home, base_url: str, model: str, outcome: Outcome, why: str = "") -> None:
    """After an answer that offered the model the tools itself: a failure counts towards
    constrained mode and ends a run of clean answers; a tool used well starts the count of
    failures again and adds to the run (`PROVEN` of them give a small model native calls);
    an answer that needed no tool changes nothing."""
    if outcome == "none":
        return
    missed = outcome == "missed"
    misses, clean = ("model_habits.misses + 1", "0") if missed else ("0", "model_habits.clean + 1")
    home.db.execute(
        "INSERT INTO model_habits (key, misses, last_miss, clean, updated_at) "
        "VALUES (?, ?, ?, ?, ?) "
        f"ON CONFLICT(key) DO UPDATE SET misses = {misses}, clean = {clean}, "
        "last_miss = CASE WHEN excluded.misses > 0 THEN excluded.last_miss "
        "ELSE model_habits.last_miss END, "
        "updated_at = excluded.updated_at",
        (key(base_url, model), int(missed), why, int(not missed), now()),
    )


def record_probe(
    home: Home,
    base_url: str,
    model: str,
    *,
    native_calls: bool | None,
    text_calls: bool | None,
    json_schema: bool | None,
) -> None:
    """What `charlie doctor` observed; the count of failed answers starts again."""
    home.db.execute(
        "INSERT INTO model_habits (key, native_calls, text_calls, json_schema, misses, "
        "updated_at) VALUES (?, ?, ?, ?, 0, ?) ON CONFLICT(key) DO UPDATE SET "
        "native_calls = excluded.native_calls, text_calls = excluded.text_calls, "
        "json_schema = excluded.json_schema, misses = 0, last_miss = '', "
        "updated_at = excluded.updated_at",
        (key(base_url, model), _int(native_calls), _int(text_calls), _int(json_schema), now()),
    )


def tool_line(function: FunctionSchema) -> str:
    """`name(a, b): what it does` — one line a small model can read."""
    schema = function.get("parameters")
    parameters = ", ".join(schema.get("properties") or {}) if schema else ""
    description = str(function.get("description") or "").split(". ")[0].rstrip(".")
    return f"- {function['name']}({parameters}): {description}"


def _int(flag: bool | None) -> int | None:
    return None if flag is None else int(flag)
