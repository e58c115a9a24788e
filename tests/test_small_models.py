"""`auto` starts a small model right from its first answer (issue 40): its size read from
its name or what the server says of it (llama.cpp's `/v1/models`, Ollama's `/api/show`),
constrained steps and distillation in steps until it has shown that it calls tools cleanly,
and the doctor naming the same mode."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Cli
from llm_double import ScriptedLLMServer, ToolCallsReply
from support.distilling import is_step

from charlie.chat import turn as chat
from charlie.config import load_settings
from charlie.conversations import Channel, shared_channel
from charlie.home import Home
from charlie.llm import doctor, modelsize, toolmode
from charlie.llm.client import LLMClient
from charlie.memory import distill
from charlie.notes import files as notes
from charlie.projects import Project, create_project, update_project
from charlie.trace import Moded
from charlie.users import User, ensure_user

QWEN = "qwen2.5-coder-1.5b-instruct"
CONSTRAINED_QWEN = (
    "auto: a small model (1.5B parameters, from its name) starts with constrained steps "
    "until it has called tools cleanly in 3 answers in a row (0 so far)"
)


@pytest.fixture
def alice(home: Home) -> User:
    return ensure_user(home.db, "alice")


@pytest.fixture
def kitchen(home: Home) -> Project:
    made = create_project(home, "Kitchen")
    notes.create_note(made, "Plumber", "Dave Rossi comes on Thursday 11 December at 8am.")
    return update_project(home, made.slug, distill_every=1000)  # no distillation to script


def serving(llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch, model: str) -> LLMClient:
    """The double serving `model` only, Charlie pointed at it, in `auto`."""
    llm.model, llm.models = model, [model]
    monkeypatch.setenv("CHARLIE_LLM_MODEL", model)
    monkeypatch.setenv("CHARLIE_TOOL_MODE", "auto")
    return LLMClient(llm.base_url, model, retries=0)


@pytest.fixture
def auto_home(home: Home) -> Iterator[Home]:
    home.settings.tool_mode = "auto"
    yield home


def first_look(request: dict[str, Any]) -> bool:
    return request["messages"][0]["content"] == doctor.LOOKUP_SYSTEM


def answers(request: dict[str, Any]) -> Any:
    """A model that calls tools when it may (and when first looked at), steps to answer,
    and answers each question in its own words (the thread's length says which)."""
    if first_look(request):
        return ToolCallsReply([("search_notes", {"query": "worktops"})])
    if is_step(request):
        return '{"message": "asks", "tool": "answer"}'
    earlier = sum(m["role"] == "assistant" for m in request["messages"])
    return "Dave comes on Thursday at 8am." + " Yes." * earlier


def modes(events: list[Any]) -> list[tuple[str, str]]:
    return [
        (e.step.mode, e.step.reason)
        for e in events
        if isinstance(e, chat.TraceEvent) and isinstance(e.step, Moded)
    ]


def ask(home: Home, client: LLMClient, channel: Channel, user: User, text: str) -> list[Any]:
    return list(chat.turn(home, client, channel, user, text))


# ---------------------------------------------------------------- what the size is read from


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("qwen2.5-coder-1.5b-instruct", 1_500_000_000),
        ("/models/SmolLM2-135M-Instruct.Q4_1.gguf", 135_000_000),
        ("qwen2.5:0.5b", 500_000_000),
        ("llama3.2:3b", 3_000_000_000),
        ("Meta-Llama-3.1-8B-Instruct", 8_000_000_000),
        ("mixtral-8x7b", 56_000_000_000),
        ("qwen3-30b-a3b", 30_000_000_000),  # the total, not the active experts
        ("phi-3-mini-4k-instruct", None),  # a context length, not a size
        ("gemma-3n-E4B", None),
        ("test-model", None),
    ],
)
def test_a_models_size_is_read_from_its_name(name: str, count: int | None) -> None:
    assert modelsize.from_name(name) == count


def test_the_size_is_under_4b_to_be_small() -> None:
    assert modelsize.Size(3_800_000_000, "its name").small
    assert not modelsize.Size(4_000_000_000, "its name").small
    assert not modelsize.Size(None, "nothing said of it").small
    assert modelsize.Size(494_032_768, "x").label == "494M"
    assert modelsize.Size(1_543_714_304, "x").label == "1.5B"


# ---------------------------------------------------------------- the first answer


def test_a_small_model_by_its_name_starts_constrained_with_no_question_asked_of_it(
    auto_home: Home,
    llm: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    alice: User,
    kitchen: Project,
) -> None:
    """Qwen2.5-1.5B passed the first look (it called the tool when told to look it up) and
    then narrated its first two real answers before `auto` moved to constrained."""
    client = serving(llm, monkeypatch, QWEN)
    llm.default = answers
    channel = shared_channel(auto_home, kitchen)
    events = ask(auto_home, client, channel, alice, "Remind me when the plumber is coming.")
    assert modes(events) == [("constrained", CONSTRAINED_QWEN)]
    assert not any(first_look(r) for r in llm.requests)
    assert is_step(llm.requests[0])
    assert "".join(e.text for e in events if isinstance(e, chat.Token)) == (
        "Dave comes on Thursday at 8am."
    )
    # Distillation follows: in steps, for the same reason.
    assert distill.method(auto_home, channel, client) == (
        "steps",
        f"auto: tools are constrained for this model ({CONSTRAINED_QWEN})",
    )


def test_a_small_model_by_what_llamacpp_says_of_it_starts_constrained(
    auto_home: Home,
    llm: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    alice: User,
    kitchen: Project,
) -> None:
    """An alias hides the size from the name; llama.cpp's /v1/models says it (`meta`)."""
    client = serving(llm, monkeypatch, "household")
    llm.meta["household"] = {"n_params": 494_032_768, "n_ctx_train": 32768}
    llm.default = answers
    events = ask(auto_home, client, shared_channel(auto_home, kitchen), alice, "Who is Dave?")
    assert modes(events) == [
        (
            "constrained",
            "auto: a small model (494M parameters, from the server's /v1/models) starts "
            "with constrained steps until it has called tools cleanly in 3 answers in a row "
            "(0 so far)",
        )
    ]
    seen = toolmode.habits(auto_home, client.base_url, "household")
    assert (seen.params, seen.params_source) == (494_032_768, "the server's /v1/models")


def test_a_small_model_by_what_ollama_says_of_it_starts_constrained(
    auto_home: Home,
    llm: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    alice: User,
    kitchen: Project,
) -> None:
    client = serving(llm, monkeypatch, "helper:latest")
    llm.shown["helper:latest"] = {"details": {"family": "llama", "parameter_size": "3.2B"}}
    llm.default = answers
    events = ask(auto_home, client, shared_channel(auto_home, kitchen), alice, "Who is Dave?")
    assert [m for m, _ in modes(events)] == ["constrained"]
    assert "(3.2B parameters, from Ollama's /api/show)" in modes(events)[0][1]


def test_a_bigger_model_or_one_nothing_is_said_of_is_looked_at_first_as_before(
    auto_home: Home,
    llm: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    alice: User,
    kitchen: Project,
) -> None:
    client = serving(llm, monkeypatch, "qwen2.5-7b-instruct")
    llm.default = answers
    events = ask(auto_home, client, shared_channel(auto_home, kitchen), alice, "Who is Dave?")
    assert modes(events) == []  # native: the usual way needs no word
    assert sum(first_look(r) for r in llm.requests) == 1
    assert llm.requests[-1].get("tools")


def test_the_size_is_looked_for_once_and_kept_for_every_process(
    auto_home: Home,
    llm: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    alice: User,
    kitchen: Project,
) -> None:
    client = serving(llm, monkeypatch, "household")
    llm.meta["household"] = {"n_params": 1_543_714_304}
    llm.default = answers
    channel = shared_channel(auto_home, kitchen)
    ask(auto_home, client, channel, alice, "Who is Dave?")
    llm.meta.clear()  # the server says nothing now: what was read is kept
    with Home.open(auto_home.settings) as elsewhere:
        events = ask(elsewhere, client, channel, alice, "And when does he come?")
    assert "(1.5B parameters, from the server's /v1/models)" in modes(events)[0][1]


# ---------------------------------------------------------------- moving to native


def clean_answer(request: dict[str, Any]) -> Any:
    """A model that calls the tool it is given, then answers from its result."""
    if request.get("tools") and not any(m.get("role") == "tool" for m in request["messages"]):
        return ToolCallsReply([("search_notes", {"query": "plumber"})])
    return answers(request)


def test_a_small_model_is_given_native_calls_once_it_has_called_tools_cleanly_three_times(
    auto_home: Home,
    llm: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    alice: User,
    kitchen: Project,
) -> None:
    """What "shown" means: three answers in a row, each given the tools itself (here in a
    project set to native), in which its calls were read, known and not repeated; a miss
    ends the run."""
    client = serving(llm, monkeypatch, QWEN)
    llm.default = clean_answer
    create_project(auto_home, "Garden")
    garden_project = update_project(auto_home, "garden", tool_mode="native", distill_every=1000)
    garden = shared_channel(auto_home, garden_project)
    channel = shared_channel(auto_home, kitchen)
    for number in range(2):
        ask(auto_home, client, garden, alice, f"When is the plumber coming ({number})?")
    events = ask(auto_home, client, channel, alice, "When is the plumber coming?")
    assert modes(events) == [("constrained", CONSTRAINED_QWEN.replace("(0 so far)", "(2 so far)"))]
    ask(auto_home, client, garden, alice, "When is the plumber coming (2)?")
    assert toolmode.habits(auto_home, client.base_url, QWEN).clean == 3
    events = ask(auto_home, client, channel, alice, "When does the plumber come?")
    assert modes(events) == []  # native now
    assert llm.requests[-2].get("tools") and not is_step(llm.requests[-2])
    assert toolmode.decide("auto", toolmode.habits(auto_home, client.base_url, QWEN)) == (
        toolmode.Choice(
            "native", "auto: a small model (1.5B) that called tools cleanly in 4 answers in a row"
        )
    )
    # A miss ends the run: constrained again from the next answer.
    llm.default = lambda request: (
        "To answer that, I can use the search_notes function."
        if request.get("tools")
        else answers(request)
    )
    ask(auto_home, client, channel, alice, "Where did we say the spare key is?")
    events = ask(auto_home, client, channel, alice, "When is the plumber coming?")
    assert modes(events) == [("constrained", CONSTRAINED_QWEN)]


# ---------------------------------------------------------------- the doctor


def test_the_doctor_names_the_mode_a_small_model_starts_in_and_keeps_its_size(
    charlie: Cli, llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's one tool call is not enough for a small model: it narrated in answers."""
    serving(llm, monkeypatch, QWEN)

    def capable(request: dict[str, Any]) -> Any:
        if request.get("tools"):
            name = request["tools"][0]["function"]["name"]
            return ToolCallsReply([(name, {"a": 2, "b": 3} if name == "add" else {"query": "x"})])
        if request.get("response_format"):
            return '{"answer": 5}'
        return "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"

    llm.default = capable
    result = charlie("doctor")
    tool_mode = [line for line in result.output.splitlines() if line.startswith("tool mode")]
    assert tool_mode == [f"tool mode       ok: constrained ({CONSTRAINED_QWEN})"]
    with Home.open(load_settings()) as home:
        seen = toolmode.habits(home, llm.base_url, QWEN)
    assert (seen.native_calls, seen.params, seen.params_source) == (
        True,
        1_500_000_000,
        "its name",
    )
