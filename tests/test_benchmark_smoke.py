"""The benchmarks run: every script at a tiny size, so that a change to the code they drive
is found here, not on the next measuring day. Those that need a model server talk to the
scripted double; those that read shared data (SciFact, LoCoMo) read a dozen synthetic
abstracts or one short talk in the same format (`tests/support/benchmark_data.py`), never
../shared; everything they write goes under the test's tmp_path."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from llm_double import ScriptedLLMServer, ToolCallsReply
from support.benchmark_data import write_locomo, write_scifact
from support.builtin_model import smollm2_or_skip
from support.distilling import (
    distill_answer,
    earlier,
    is_distillation,
    is_step,
    step_answer,
    step_of,
)

from charlie.retrieval.search import MODES, SearchConfig

ROOT = Path(__file__).resolve().parent.parent


def run(script: str, *arguments: str) -> str:
    """Run benchmarks/SCRIPT.py with `arguments`; what it printed, once it succeeded."""
    done = subprocess.run(
        [sys.executable, f"benchmarks/{script}.py", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout


def test_memory_fidelity_holds_every_check_against_a_careless_model(tmp_path: Path) -> None:
    """The run exits 0 only when every check Charlie holds whatever the model says held."""
    out, homes = tmp_path / "fidelity.json", tmp_path / "homes"
    run("memory_fidelity", "--quick", "--out", str(out), "--keep", str(homes))
    kept = [home.name for home in homes.iterdir() if (home / "charlie.db").is_file()]
    assert len(kept) == 1  # the home stays, to replay a distillation from
    tune = json.loads(out.read_text())["summary"]["tune"]
    assert tune["conversations"] == 1 and tune["traps"] >= 3
    assert (tune["traps_retiring"], tune["summary_repeats"], tune["quote_questions"]) == (0, 0, 0)
    held, planted = tune["decisions_held"].split("/")
    assert held == planted and tune["hand_summary_kept"].split("/")[0] != "0"


def test_weak_hits_tells_answering_notes_from_small_talk(tmp_path: Path) -> None:
    """The floor search ships with (`SearchConfig.min_vector`) keeps every note that answers a
    household question and drops what small talk finds, on the benchmark's own numbers."""
    out = tmp_path / "weak.json"
    run("weak_hits", "--quick", "--out", str(out))
    result = json.loads(out.read_text())
    floor = f"{SearchConfig().min_vector:.2f}"
    assert result["household"]["answering_under_floor"][floor] == 0.0
    assert result["small_talk"]["still_listing_a_note"][floor] <= 0.1


SMALL = {  # script → arguments that make it a few seconds' run ({tmp}: a fresh folder)
    "archive_speed": ["--notes", "20", "--messages", "50", "--work", "{tmp}"],
    "note_scan": ["--notes", "50", "--repeat", "1"],
    "render_speed": ["--runs", "1"],
    "regenerate_ttft": ["--rounds", "2", "--model-delay", "0.01"],
    "load": ["--users", "2", "--seconds", "3"],
    "tool_loop": ["--turns", "4", "--warmup", "1", "--repeats", "1", "--no-plot"],
    "turns": ["--turns", "12", "--no-plot"],
    "mcp_latency": ["--size", "5", "--queries", "2", "--workdir", "{tmp}"],
    "faults": ["--only", "privacy", "--rounds", "1", "--load-seconds", "1"],
    "store_speed": ["--messages", "20", "--rounds", "8", "--work", "{tmp}"],
}


@pytest.mark.parametrize("script", sorted(SMALL))
def test_a_benchmark_runs_at_a_tiny_size(script: str, tmp_path: Path) -> None:
    arguments = [a.replace("{tmp}", str(tmp_path / "work")) for a in SMALL[script]]
    if script not in ("note_scan", "render_speed", "regenerate_ttft"):  # these write no file
        arguments += ["--out", str(tmp_path / "out.json")]
    run(script, *arguments)


# ---------------------------------------------------------------- shared data, made up


@pytest.fixture
def scifact(tmp_path: Path) -> Path:
    """A BEIR SciFact folder of twelve abstracts and twelve claims."""
    return write_scifact(tmp_path / "scifact")


@pytest.fixture
def locomo(tmp_path: Path) -> Path:
    """A locomo-dev.json of one short conversation (twelve turns, seven questions)."""
    return write_locomo(tmp_path / "locomo" / "locomo-dev.json")


def test_scifact_study_tunes_every_method_on_train(scifact: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("scifact", "--data", str(scifact), "--out", str(out))
    report = json.loads((out / "scifact.json").read_text())
    assert set(report["chosen_on_train"]) == {"keyword", "vector", "fallback", "default"}
    methods = {r["method"] for r in report["results"]}
    assert {"fusion: RRF", "vector (best on train)", "keyword FTS5 (best on train)"} <= methods
    (default,) = [
        r
        for r in report["results"]
        if f"{r['method']} {r['params']}" == report["chosen_on_train"]["default"]
    ]
    assert default["test"]["ndcg@10"] >= 0.9  # each claim names its abstract's subject
    assert (out / "scifact-docs.npz").is_file()  # the vectors' cache is kept beside the report


def test_scifact_through_the_product_finds_each_claims_abstract(
    scifact: Path, tmp_path: Path
) -> None:
    out, work = tmp_path / "product.json", tmp_path / "work"
    run("scifact_product", "--data", str(scifact), "--out", str(out), "--work", str(work))
    result = json.loads(out.read_text())
    assert (result["notes"], result["queries"]) == (12, 6)
    assert set(result["results"]) == set(MODES)
    assert all(row["ndcg@10"] >= 0.9 for row in result["results"].values())
    assert list(work.iterdir()) == []  # the data home is gone without --keep


def test_usage_boost_lifts_modestly_fades_and_leaves_others_alone(
    scifact: Path, tmp_path: Path
) -> None:
    out = tmp_path / "usage.json"
    run("usage_boost", "--data", str(scifact), "--notes", "12", "--no-plot", "--out", str(out))
    result = json.loads(out.read_text())
    assert result["scenario"]["history_claims"] >= 1 and result["corpus"]["distractors"] >= 1
    for same in result["d_isolation"]["bob_before_vs_after"].values():
        assert same["identical_order"] == same["queries"] and same["max_abs_score_diff"] == 0
    boosts = [row["boost_used_related_mean"] for row in result["c_fade"]]
    assert boosts == sorted(boosts, reverse=True) and boosts[0] > 0 and boosts[-1] < 0.01
    assert all(row["boost_vs_now_shift_max_diff"] < 1e-9 for row in result["c_fade"])
    assert result["b_ceiling"]["dave"]["overtaken_clearly_higher"] == 0


def test_locomo_jsonl_writes_import_files_with_evidence_mended(
    locomo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "files"
    printed = run("locomo_jsonl", "--data", str(locomo), "--out", str(out))
    assert "conv-1: 12 messages, 7 questions (1 evidence ids name no turn)" in printed
    turns = [json.loads(line) for line in (out / "conv-1.jsonl").read_text().splitlines()]
    assert [t["id"] for t in turns[:2]] == ["D1:1", "D1:2"] and turns[6]["id"] == "D2:1"
    assert turns[0]["time"] == "2023-05-08T13:56:00Z" and turns[1]["time"] == "2023-05-08T13:56:30Z"
    assert turns[3]["text"].endswith(" [shares a photo: a grey cat on a sofa]")
    asked = [json.loads(line) for line in (out / "conv-1.queries.jsonl").read_text().splitlines()]
    assert [q["evidence"] for q in asked[1:3]] == [["D1:3", "D2:3"], ["D1:4"]]


def test_locomo_recall_end_to_end_through_the_cli(locomo: Path, tmp_path: Path) -> None:
    out = tmp_path / "locomo.json"
    work = tmp_path / "work"
    run("locomo", "--quick", "--data", str(locomo), "--work", str(work), "--out", str(out))
    result = json.loads(out.read_text())
    assert result["questions"] == 7
    assert set(result["table"]) == {"charlie (shipped defaults, CLI)", "vector"}
    # Six of the seven questions have their evidence in the talk: 85.7 at most.
    assert 70 <= result["table"]["charlie (shipped defaults, CLI)"]["recall@10"] <= 85.8
    assert result["import_messages_per_second"] > 0


def test_recall_speed_imports_indexes_and_recalls(locomo: Path, tmp_path: Path) -> None:
    out = tmp_path / "speed.json"
    run(
        "recall_speed", "--quick", "--data", str(locomo), "--work", str(tmp_path), "--out", str(out)
    )
    result = json.loads(out.read_text())
    assert result["messages"] == 300 and result["recall_ms"]["questions"] == 7
    assert result["import_with_embeddings_per_s"] > 0 and result["storage_only_per_s"] > 0
    assert result["index_one_message_ms"]["p50"] > 0 and result["recall_ms"]["p50"] > 0
    firsts = result["first_recall_of_a_process"]
    assert set(firsts) == {"from the index", "from the file"}
    assert all(f["first_recall_s"] >= f["vectors_s"] > 0 for f in firsts.values())


def test_message_tokens_measures_each_cap(locomo: Path, tmp_path: Path) -> None:
    out = tmp_path / "tokens.json"
    arguments = ["--caps", "64", "32", "--messages", "16", "--rounds", "1"]
    run("message_tokens", "--data", str(locomo), *arguments, "--out", str(out))
    caps = json.loads(out.read_text())["caps"]
    assert list(caps) == ["64", "32"]
    for row in caps.values():
        assert 70 <= row["recall@10"] <= 85.8  # six of seven questions can be answered
        assert row["locomo_messages_per_second"] > 0 and row["chatgpt_messages_per_second"] > 0


# ---------------------------------------------------------------- made at a tiny size


def test_search_speed_builds_and_queries_a_small_home(tmp_path: Path) -> None:
    out = tmp_path / "out" / "search.json"
    run(
        "search_speed",
        *["--sizes", "30", "--queries", "10", "--variants", "--ab-texts", "8", "--no-plot"],
        *["--workdir", str(tmp_path / "work"), "--out", str(out), "--keep"],
    )
    (result,) = json.loads(out.read_text())["results"]
    refresh = result["build"]["refresh"]
    assert (refresh["added"], refresh["notes"], refresh["problems"]) == (30, 30, 0)
    assert refresh["chunks"] >= 30 and result["build"]["embedder"] == "real"
    latency = result["query"]["latency_ms"]
    assert set(latency) == {f"{m}/{k}" for m in MODES for k in ("plain", "explain")}
    assert all(row["n"] == 10 and row["p50"] > 0 for row in latency.values())
    cost = result["query"]["diagnostics"]["bm25_cost"]  # what a ranked chunk costs FTS5
    assert cost["us_per_row"] > 0 and all(t["chunks"] > 0 for t in cost["terms"])
    # Queried again with --reuse alone: the kept home is not built again, nor thrown away.
    again = tmp_path / "out" / "again.json"
    run(
        "search_speed",
        *["--sizes", "30", "--queries", "10", "--variants", "--no-plot", "--reuse"],
        *["--workdir", str(tmp_path / "work"), "--out", str(again)],
    )
    (reused,) = json.loads(again.read_text())["results"]
    assert reused["build"] == result["build"] and (tmp_path / "work" / "home-30").is_dir()


def test_import_speed_keeps_every_shown_message_once(tmp_path: Path) -> None:
    out = tmp_path / "import.json"
    run("import_speed", "--megabytes", "0.05", "--work", str(tmp_path / "work"), "--out", str(out))
    result = json.loads(out.read_text())
    assert result["conversations_imported"] == result["export"]["conversations"] >= 1
    assert result["messages_imported"] == result["export"]["shown_messages"] > 0
    assert all(result[step]["peak_rss_mib"] > 0 for step in ("list", "import", "again"))


def test_history_indexing_times_the_import_and_the_vectors_of_both_checkouts(
    tmp_path: Path,
) -> None:
    """This checkout compared with itself: a tiny export is indexed in the import (under
    FOREGROUND messages), so both runs end with every message indexed."""
    out = tmp_path / "history.json"
    work = str(tmp_path / "work")
    run(
        "history_indexing",
        "--megabytes",
        "0.05",
        "--before",
        str(ROOT),
        "--work",
        work,
        "--before-seconds",
        "60",
        "--limit",
        "60",
        "--out",
        str(out),
    )
    result = json.loads(out.read_text())
    now, before = result["now"], result["before"]
    assert now["added"] == result["export"]["shown_messages"] > 0
    assert now["status_at_end"]["done"] and now["fully_indexed_s"] >= now["command_returned_s"]
    assert before["finished"] and before["messages_indexed"] == now["added"]


def test_voice_hears_speaks_and_streams_a_spoken_turn(tmp_path: Path) -> None:
    """Whisper tiny.en and the Piper voice are packaged (the voice extra); espeak-ng may be
    missing (reported unavailable), Edge-TTS is not tried."""
    out = tmp_path / "voice.json"
    run("voice", "--quick", "--out", str(out))
    result = json.loads(out.read_text())
    assert result["stt"]["tiny.en"]["piper, clean"]["wer"] <= 0.5
    assert result["tts"]["piper"]["rtf"] > 0 and "edge" not in result["tts"]
    latency = result["latency"]["tiny.en + piper"]
    assert 0 < latency["silence_wait_p50"] < latency["total_p50"]
    streaming = result["streaming"]
    assert 0 < streaming["heard_p50"] < min(streaming["audio_p50"], streaming["reply_p50"])


# ---------------------------------------------------------------- against the double


def plain_model(request: dict[str, Any]) -> str:
    """A model that answers briefly, distils as asked, and picks no tool in a step."""
    if step_of(request):
        return step_answer(request)
    if is_step(request):
        return '{"tool": "answer"}'
    if is_distillation(request):
        return distill_answer()
    said = str(request["messages"][-1].get("content") or "")[:60]
    return f"Noted ({said}). That sounds like a sensible plan for the house."  # never a repeat


def looking_up_model(request: dict[str, Any]) -> str | ToolCallsReply:
    """A model that looks a household question up (a note or the talk) and answers with
    what it found; the capital of France it knows."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        return f"From what I found: {last['content']}"
    question = str(last["content"])
    if "capital of France" in question:
        return "Paris."
    tool = "search_notes" if "plumber" in question else "search_conversation"
    return ToolCallsReply([(tool, {"query": question})])


def test_real_server_benchmark_against_the_double(
    llm: ScriptedLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.n_ctx = 4096  # its /props, as llama.cpp's
    llm.default = plain_model
    monkeypatch.setenv("CHARLIE_REAL_LLM_URL", llm.base_url)
    out, plot = tmp_path / "real.json", tmp_path / "tokens.svg"
    arguments = ["--turns", "4", "--distill-every", "2", "--ttft-samples", "2"]
    run(
        "real_server",
        *arguments,
        "--home",
        str(tmp_path / "h"),
        "--out",
        str(out),
        "--plot",
        str(plot),
    )
    result = json.loads(out.read_text())
    talk = result["conversation"]
    assert result["server"]["window"] == 4096 and len(result["turns"]) == 4
    assert talk["answered"] == 4 and talk["stuck"] == [] and talk["distillations"] >= 1
    assert 0 < talk["reply_prompt_tokens"]["max"] < 4096
    assert result["first_token"]["samples"] == 2 and result["first_token"]["charlie"]["p50_ms"] > 0
    assert ET.parse(plot).getroot().tag == "{http://www.w3.org/2000/svg}svg"


def test_household_tasks_scores_a_model_that_looks_things_up(
    llm: ScriptedLLMServer, tmp_path: Path
) -> None:
    llm.default = looking_up_model
    out = tmp_path / "tasks.json"
    run("household_tasks", "--quick", "--out", str(out))
    result = json.loads(out.read_text())
    assert [o["calls"] for o in result["outcomes"]] == [
        ["search_notes"],
        ["search_conversation"],
        [],
    ]
    row = result["summary"]["native"]
    assert (row["tasks"], row["right"], row["lookup_found_and_right"]) == (3, 3, 2)
    assert (row["right_tool"], row["markup"], row["errors"]) == (3, 0, 0)
    assert row["prompt_tokens"] > 0
    # a look-up is two requests (the call, then the answer), plain chat one
    assert [o["requests"] for o in result["outcomes"]] == [2, 2, 1]
    assert row["requests_per_task"] == round(5 / 3, 2)
    assert row["prompt_tokens_reused"] == 0  # the double keeps no cache, and says none


def test_builtin_runtime_measures_the_packaged_small_model(tmp_path: Path) -> None:
    """The built-in runtime's figures: a start, a request, its memory; the runtime gone after."""
    smollm2_or_skip()
    out = tmp_path / "builtin.json"
    printed = run(
        "builtin_runtime",
        "--repeats",
        "1",
        "--requests",
        "1",
        "--max-tokens",
        "4",
        "--context",
        "1024",
        "--out",
        str(out),
    )
    assert printed.startswith("SmolLM2-135M-Instruct.Q4_1.gguf (98 MB), medians of 1 starts:")
    (sample,) = json.loads(out.read_text())["samples"]
    assert sample["server"] == "built-in" and sample["load_s"] > sample["llama_load_s"] > 0
    assert sample["generated_tokens"] == 4 and sample["prompt_tokens"] > 300
    assert sample["first_token_s"] > 0 and sample["generation_tps"] > 0
    assert sample["rss_mib"] > 90  # the model's 98 MB, mapped and read


def _settling_everything(request: dict[str, Any]) -> str:
    """A model that takes every message for a decision, and any message for the end of every
    decision it is asked about (rewritten as a plan that is off)."""
    if step_of(request) == "decision":
        return json.dumps({"kind": "settles something", "what": ""})
    if step_of(request) == "change":
        return json.dumps({"now": "The plan is off."})
    return step_answer(request)


def _copying(request: dict[str, Any]) -> str:
    """A model that takes nothing for a decision and changes no decision (copies it)."""
    if step_of(request) == "decision":
        return json.dumps({"kind": "small talk or feeling", "what": ""})
    if step_of(request) == "change":
        return json.dumps({"now": earlier(request)})
    return step_answer(request)


def test_the_steps_alone_count_what_the_model_took_and_changed(
    llm: ScriptedLLMServer, tmp_path: Path
) -> None:
    """`decision_step` and `judge_step` score one step of the distillation on the fidelity
    benchmark's conversations: a model that takes everything is charged with every trap it
    took; one that takes nothing finds no decision and changes none."""
    plan = json.loads((ROOT / "benchmarks/data/memory_fidelity/tune.json").read_text())
    first = plan["conversations"][0]
    planted = {d["at"] for d in first["decisions"]} | {r["decided_at"] for r in first["revisions"]}
    for model, taking in ((_settling_everything, True), (_copying, False)):
        llm.default = model
        steps_out, judge_out = tmp_path / f"d{taking}.json", tmp_path / f"j{taking}.json"
        run("decision_step", "--ids", first["id"], "--out", str(steps_out))
        run("judge_step", "--ids", first["id"], "--out", str(judge_out))
        found = json.loads(steps_out.read_text())["total"]
        judged = json.loads(judge_out.read_text())["total"]
        assert found["decisions"][1] == len(planted) and found["traps"][1] == len(first["traps"])
        revisions, pairs = judged["revisions"], judged["traps"]
        assert revisions[1] == len(first["revisions"]) and pairs[1] > 0
        if taking:
            assert found["traps"][0] > 0 and found["other"][0] > 0
            assert revisions[0] == revisions[1] and pairs[0] == pairs[1]
        else:
            assert found == {k: [0, v[1]] for k, v in found.items()}
            assert revisions[0] == 0 and pairs[0] == 0
