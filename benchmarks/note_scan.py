"""How long the index's freshness check takes to list and stat every note file.

`Index.refresh()` runs this scan on every search after 10 s of quiet, before anything is
searched, so at 100,000 notes it is paid by real requests. This makes a data home of
`--notes` small note files in 20 projects (a third of them in sub-folders) and times
`charlie.notes.files.scan` against the pathlib walk it replaced (`rglob` + `is_file` +
`relative_to` + `stat`, sorted Paths), checking both find the same files.

    .venv/bin/python benchmarks/note_scan.py [--notes 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from charlie import projects
from charlie.config import load_settings
from charlie.home import Home
from charlie.notes import files as notes
from charlie.projects import Project

PROJECTS = 20


def pathlib_walk(project: Project) -> list[tuple[str, int, int]]:
    """The listing as it was done before `notes.scan`."""
    root = notes.notes_dir(project)
    found = []
    for path in sorted(
        p
        for p in root.rglob("*.md")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    ):
        stat = path.stat()
        found.append(
            (path.relative_to(root).with_suffix("").as_posix(), stat.st_mtime_ns, stat.st_size)
        )
    return found


def scanned(project: Project) -> list[tuple[str, int, int]]:
    return [(f.name, f.mtime_ns, f.size) for f in notes.scan(project)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as folder,
        Home.open(load_settings(home=Path(folder))) as home,
    ):
        per_project = args.notes // PROJECTS
        for number in range(PROJECTS):
            project = projects.create_project(home, f"Project {number}")
            root = notes.notes_dir(project)
            for index in range(per_project):
                where = root / (f"year-{index % 7}" if index % 3 == 0 else "")
                where.mkdir(parents=True, exist_ok=True)
                (where / f"note-{index}.md").write_text(f"---\ntitle: Note {index}\n---\nText.\n")
        chosen = projects.list_projects(home)
        assert [pathlib_walk(p) for p in chosen] == [scanned(p) for p in chosen]
        for label, walk in (("pathlib walk (before)", pathlib_walk), ("notes.scan", scanned)):
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                total = sum(len(walk(p)) for p in chosen)
                times.append(time.perf_counter() - started)
            print(f"{label:22s} {total} files: median {statistics.median(times) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
