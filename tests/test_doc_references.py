"""The map cannot drift: every `charlie.…` name and every `….py` path written between
backticks in the docs, the README and the package's own docstrings and comments names
something that exists, so a move that forgets them fails here, saying where each one is.

The CHANGELOG is left out: it is history, and names what was there then."""

import importlib
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "charlie"

DOTTED = re.compile(r"`(charlie(?:\.\w+)+)(?:\([^`]*\))?`")  # `charlie.x.y` or `charlie.x.f()`
PATH = re.compile(r"`((?:[\w.-]+/)+\w+\.py)[:`]")  # `llm/textcalls.py`, `chat/turn.py:12`
# Where a relative path may start: the repository (`tests/…`, `benchmarks/…`), the package
# (`llm/textcalls.py`), or its adapters (`web/schemas.py`).
PATH_ROOTS = (ROOT, PACKAGE, PACKAGE / "adapters")


def not_python() -> set[str]:
    """Dotted names that are not Python: the database and settings files, the host name of
    an example, and the entry-point groups pyproject.toml declares."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {"charlie.db", "charlie.toml", "charlie.home.arpa", *project["entry-points"]}


def sources() -> list[Path]:
    docs = sorted((ROOT / "docs").rglob("*.md"))
    code = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")])
    return [ROOT / "README.md", *docs, *code]


def resolves(dotted: str) -> bool:
    """Import the longest prefix that is a module, then look up the rest attribute by
    attribute (a dataclass field without a default is found among its fields)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            fields = getattr(found, "__dataclass_fields__", {})
            if not hasattr(found, name) and name not in fields:
                return False
            found = getattr(found, name, None)
        return True
    return False


def exists(path: str) -> bool:
    return any((root / path).is_file() for root in PATH_ROOTS)


def unresolved() -> list[str]:
    skipped = not_python()
    misses = []
    for source in sources():
        where = source.relative_to(ROOT)
        for number, line in enumerate(source.read_text().splitlines(), start=1):
            for dotted in DOTTED.findall(line):
                if dotted not in skipped and not resolves(dotted):
                    misses.append(f"{where}:{number}: `{dotted}`")
            for path in PATH.findall(line):
                if not exists(path):
                    misses.append(f"{where}:{number}: `{path}`")
    return misses


def test_every_name_and_path_in_the_docs_and_docstrings_exists() -> None:
    misses = unresolved()
    if misses:
        pytest.fail("Names or paths that do not exist:\n" + "\n".join(misses), pytrace=False)


def test_a_name_or_path_that_does_not_exist_is_caught() -> None:
    assert resolves("charlie.memory.steps")
    assert resolves("charlie.memory.decisions.changes")
    assert resolves("charlie.llm.textcalls.MarkupFilter")
    assert resolves("charlie.retrieval.search.Hit.why")  # a dataclass field
    assert not resolves("charlie.textcalls")
    assert not resolves("charlie.llm.textcalls.ToolMarkupFilter")
    assert not resolves("charlie.retrieval.search.Hit.whom")
    assert exists("llm/textcalls.py") and exists("charlie/chat/turn.py")
    assert exists("web/schemas.py") and exists("tests/test_migrate.py")
    assert not exists("vecsearch.py") and not exists("charlie/toolmode.py")
    assert DOTTED.findall("`charlie.x.f()` and `charlie.db-wal`") == ["charlie.x.f"]
    assert PATH.findall("`chat/turn.py:7-8` and `adapters/web/<resource>.py`") == ["chat/turn.py"]
