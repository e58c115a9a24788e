import json
import sqlite3
from pathlib import Path

from conftest import Cli

from charlie.config import load_settings
from charlie.home import Home


def seed(charlie: Cli) -> None:
    assert (
        charlie(
            "notes",
            "add",
            "JWT refresh tokens",
            "-p",
            "auth",
            "-t",
            "auth",
            "-b",
            "We rotate the refresh_token on every use.",
        ).exit_code
        == 0
    )
    assert (
        charlie(
            "notes", "add", "Kitchen plan", "-p", "home", "-b", "Oak worktops and a tiled floor."
        ).exit_code
        == 0
    )


def test_add_list_show_tag_rm(charlie: Cli, charlie_home: Path) -> None:
    seed(charlie)
    assert charlie("notes", "list", "-p", "auth").stdout == (
        "jwt-refresh-tokens\tJWT refresh tokens\t#auth\n"
    )
    shown = charlie("notes", "show", "jwt-refresh-tokens", "-p", "auth").stdout
    assert shown.startswith("---\ntitle: JWT refresh tokens\n")
    assert "We rotate the refresh_token on every use." in shown
    tagged = charlie("notes", "tag", "jwt-refresh-tokens", "security", "-p", "auth")
    assert tagged.stdout == "auth/jwt-refresh-tokens: #auth #security\n"
    removed = charlie("notes", "rm", "jwt-refresh-tokens", "-p", "auth")
    assert removed.stdout.startswith(f"Moved to {charlie_home}/trash/auth/jwt-refresh-tokens.")
    assert charlie("notes", "list", "-p", "auth").stdout.startswith("No notes yet.")
    with Home.open(load_settings()) as home:
        kinds = [r[0] for r in home.db.execute("SELECT kind FROM usage_events ORDER BY id")]
    assert kinds == ["view", "tag"]


def test_body_from_stdin(charlie: Cli) -> None:
    assert charlie("notes", "add", "Piped", input="from a pipe\n").exit_code == 0
    assert "from a pipe" in charlie("notes", "show", "piped").stdout


def test_search_explains_and_speaks_json(charlie: Cli) -> None:
    seed(charlie)
    plain = charlie("search", "refresh_token")
    assert plain.stdout.splitlines()[0].startswith(
        "1. JWT refresh tokens  [auth/jwt-refresh-tokens]  "
    )
    explained = charlie("search", "refresh_token", "--explain", "--mode", "fallback").stdout
    assert explained.startswith("keyword search joined: the query has literals: refresh_token\n")
    assert "BM25" in explained and "on refresh_token" in explained
    data = json.loads(charlie("search", "oak worktops", "--json", "-p", "home").stdout)
    assert data["mode"] == "fusion"
    assert [r["id"] for r in data["results"]] == ["home/kitchen-plan"]


def test_batch_search(charlie: Cli, tmp_path: Path) -> None:
    seed(charlie)
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "query": "tiled floor"}\n\n{"id": 7, "query": "tokens"}\n')
    lines = charlie("search", "--queries", str(queries), "--json").stdout.splitlines()
    answers = [json.loads(line) for line in lines]
    assert [a["id"] for a in answers] == ["a", 7]
    assert answers[0]["results"][0]["id"] == "home/kitchen-plan"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    result = charlie("search", "--queries", str(bad), "--json")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: Line 1 of the queries file is not a JSON object")


def test_search_errors(charlie: Cli) -> None:
    seed(charlie)
    assert charlie("search", " ").stderr == (
        "Error: The search query is empty: give some words to look for.\n"
    )
    assert charlie("search").stderr == "Error: Give either a QUERY or --queries FILE.jsonl.\n"
    assert charlie("search", "x", "-p", "nope").exit_code == 1


def test_reindex_and_broken_files(charlie: Cli, charlie_home: Path) -> None:
    seed(charlie)
    broken = charlie_home / "projects" / "auth" / "notes" / "broken.md"
    broken.write_bytes(b"\xff\xfe not utf-8")
    result = charlie("reindex")
    assert result.exit_code == 0
    assert (
        result.stderr == f"Skipped {broken}: not UTF-8 text (invalid start byte at byte 0); "
        "save it as UTF-8.\n"
    )
    assert result.stdout.startswith(
        "Indexed 2 notes (2 chunks) and 0 messages with all-MiniLM-L6-v2-fused-int8-r2@"
    )
    assert result.stdout.endswith("; 1 skipped.\n")


def test_import_folder(charlie: Cli, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "one.md").write_text("# One\nfirst")
    (vault / "two.md").write_text("---\ntitle: Two\n---\nsecond")
    result = charlie("notes", "import", str(vault), "-p", "vault")
    assert result.stdout == "Imported 2 notes, skipped 0.\n"
    assert charlie("notes", "list", "-p", "vault").stdout == "one\tOne\ntwo\tTwo\n"


def test_a_search_after_a_model_change_says_it_embeds_the_notes_again(charlie: Cli) -> None:
    seed(charlie)
    assert charlie("search", "oak worktops").stderr == ""
    with Home.open(load_settings()) as home, sqlite3.connect(home.index_path) as index:
        index.execute("UPDATE index_state SET value = 'an-older-model' WHERE key = 'embedder'")
    after = charlie("search", "oak worktops")
    assert after.stderr.startswith("Embedding 2 passages of your notes again for the model ")
    assert "Stopping is safe" in after.stderr
    assert after.stdout.splitlines()[0].startswith("1. Kitchen plan  [home/kitchen-plan]")
    assert charlie("search", "oak worktops").stderr == ""  # once
