"""`charlie voice` (a spoken turn from a recording) and `charlie say` (text to speech)."""

from __future__ import annotations

from pathlib import Path

import click

from charlie.adapters.cli.chat import Printer
from charlie.adapters.cli.common import channel_options, opened_home, opened_llm, resolve_channel
from charlie.errors import CharlieError
from charlie.voice import audio as audio_io
from charlie.voice import tts
from charlie.voice import turn as voice_turn
from charlie.voice.audio import Audio


def _read(path: Path) -> Audio:
    try:
        return audio_io.read(path.read_bytes())
    except OSError as exc:
        raise CharlieError(f"Cannot read {path}: {exc.strerror}.") from exc


def _write(path: Path, audio: Audio) -> None:
    try:
        path.write_bytes(audio.wav())
    except OSError as exc:
        raise CharlieError(f"Cannot write {path}: {exc.strerror}.") from exc


@click.command("voice")
@click.argument("recording", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@channel_options
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the spoken reply here as WAV.",
)
def voice_command(
    recording: Path,
    project: str | None,
    private: bool,
    user_name: str | None,
    output: Path | None,
) -> None:
    """Send a recorded question (WAV, MP3, Ogg, WebM, M4A) and hear the answer.

    Prints what was heard and the full reply; the short spoken version goes to -o as WAV.
    """
    sound = _read(recording)
    with opened_home() as home, opened_llm(home) as llm:
        channel, user = resolve_channel(home, project, private, user_name, create=False)
        voice = voice_turn.Voice(home.settings)
        printer = Printer()
        spoken: list[Audio] = []
        engine = ""
        for event in voice_turn.turn(home, llm, channel, user, sound, voice):
            if isinstance(event, voice_turn.Heard):
                t = event.transcript
                click.echo(f"Heard: {t.text}", err=True)
                click.echo(
                    f"· {t.audio_seconds:.1f} s of speech transcribed in {t.seconds:.2f} s",
                    err=True,
                )
            elif isinstance(event, voice_turn.SpokenText):
                click.echo(f"Spoken: {event.text}", err=True)
            elif isinstance(event, voice_turn.SpeechChunk):
                spoken.append(event.speech.audio)
                engine = event.speech.engine
                for skipped in event.speech.skipped if event.index == 0 else []:
                    click.echo(f"· skipped {skipped}", err=True)
            else:
                printer.show(event)
        if spoken:
            click.echo(f"· spoken by {engine}", err=True)
        if output is not None and spoken:
            _write(output, Audio.joined(spoken, spoken[0].rate))
            click.echo(f"Wrote the spoken reply to {output}.", err=True)


@click.command("say")
@click.argument("text")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the speech (WAV).",
)
@click.option("--spoken", is_flag=True, help="Shorten markdown to a few speakable sentences first.")
def say_command(text: str, output: Path, spoken: bool) -> None:
    """Speak TEXT with the first speech engine that works, into a WAV file.

    Says which engine spoke; when none can, says exactly what to install.
    """
    with opened_home() as home:
        voice = voice_turn.Voice(home.settings)
        said = voice.say(text, spoken=spoken)
        _write(output, said.audio)
        spoke = " and ".join(f"{name} ({tts.ABOUT[name]})" for name in said.engine.split(","))
        click.echo(f"Wrote {said.audio.seconds:.1f} s of speech to {output}, spoken by {spoke}.")
        for skipped in said.skipped:
            click.echo(f"· skipped {skipped}", err=True)
        if "espeak" in said.engine.split(","):  # robotic: say how to get a natural voice
            click.echo(f"· {voice.speaker.survey().advice}", err=True)
