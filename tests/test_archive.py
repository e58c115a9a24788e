"""`charlie export` / `charlie restore`: a round trip through a zip, real files and SQLite."""

from __future__ import annotations

import json
import sqlite3
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from charlie import memory, usage
from charlie.config import load_settings
from charlie.conversations import Channel, add_message, private_channel, shared_channel
from charlie.home import Home
from charlie.memory import Memory, Quote
from charlie.projects import create_project, get_project
from charlie.users import ensure_user, get_user

SECRET = "zebracrossing42"


def _at(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Home:
    monkeypatch.setenv("CHARLIE_HOME", str(folder))
    return Home.open(load_settings())


def _fill(home: Home) -> None:
    alice, bob = ensure_user(home.db, "alice"), ensure_user(home.db, "bob")
    for slug, name in (("kitchen", "Kitchen reno"), ("garden", "Garden")):
        project = create_project(home, name, slug=slug)
        channel = shared_channel(home, project)
        add_message(home, channel, "user", f"What about the {slug}?", user=alice)
        add_message(home, channel, "assistant", f"The {slug} needs work.")
        add_message(home, channel, "user", "Agreed, next week.", user=bob)
    kitchen = get_project(home, "kitchen")
    notes = kitchen.path / "notes"
    (notes / "plans").mkdir(parents=True)
    (notes / "tiles.md").write_bytes(b"---\ntitle: Tiles\n---\nBlue tiles, \xc3\xa9t\xc3\xa9.\n")
    (notes / "plans" / "budget.md").write_bytes(b"# Budget\n\n2,000 for the sink.\n")
    outside = home.settings.home.parent / "outside.md"
    outside.write_text(f"Not a note: {SECRET}\n", "utf-8")
    (notes / "link.md").symlink_to(outside)  # never followed
    channel = shared_channel(home, kitchen)
    memory.save(home, channel, Memory(summary="A new kitchen.", decisions=["Blue tiles"]), "tool")
    text = kitchen.memory_path.read_text(encoding="utf-8")
    kitchen.memory_path.write_text(text.replace("Blue tiles", "Blue tiles, matte"), "utf-8")
    assert memory.sync_hand_edits(home, channel) is not None
    mine = private_channel(home, alice)
    add_message(home, mine, "user", "Remind me of the dentist.", user=alice)
    add_message(home, mine, "assistant", "Tuesday at nine.")
    memory.save(home, mine, Memory(quotes=[Quote("alice", "dentist Tuesday")]), "tool")
    theirs = private_channel(home, bob)
    add_message(home, theirs, "user", f"My password hint is {SECRET}.", user=bob)
    memory.save(home, theirs, Memory(summary=f"Bob's hint: {SECRET}"), "tool")
    usage.record(home.db, alice.id, "view", note="kitchen/tiles")
    usage.record(home.db, alice.id, "tag", tag="reno")
    usage.record(home.db, alice.id, "cited", note="garden/roses", private=True)
    usage.record(home.db, bob.id, "view", note="kitchen/budget")
    usage.record(home.db, bob.id, "view", note=f"kitchen/{SECRET}", private=True)


def _messages(home: Home, channel: Channel) -> list[tuple[str, str, str, str]]:
    rows = home.db.execute(
        "SELECT speaker, role, content, created_at FROM messages WHERE conversation_id = ? "
        "ORDER BY created_at, id",
        (channel.conversation_id,),
    )
    return [tuple(r) for r in rows]  # type: ignore[misc]


def _revisions(home: Home, channel: Channel) -> list[tuple[str, str, Any]]:
    return [(r.source, r.memory.to_json(), r.file_sha256) for r in memory.revisions(home, channel)]


def _usage(home: Home) -> list[tuple[Any, ...]]:
    rows = home.db.execute(
        "SELECT u.name, e.kind, e.note, e.tag, e.private, e.at FROM usage_events e "
        "JOIN users u ON u.id = e.user_id ORDER BY u.name, e.at, e.kind"
    )
    return [tuple(r) for r in rows]


def _snapshot(home: Home) -> dict[str, Any]:
    alice = get_user(home.db, "alice")
    out: dict[str, Any] = {"private": _messages(home, private_channel(home, alice))}
    out["private_revisions"] = _revisions(home, private_channel(home, alice))
    for slug in ("kitchen", "garden"):
        project = get_project(home, slug)
        channel = shared_channel(home, project)
        out[slug] = _messages(home, channel)
        out[f"{slug}_revisions"] = _revisions(home, channel)
        out[f"{slug}_files"] = {
            p.relative_to(project.path).as_posix(): p.read_bytes()
            for p in sorted(project.path.rglob("*"))
            if p.is_file() and not p.is_symlink()
        }
    return out


@pytest.fixture
def exported(charlie_home: Path, charlie: Cli, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    with Home.open(load_settings()) as home:
        _fill(home)
        before = _snapshot(home)
        before["usage"] = [u for u in _usage(home) if not (u[0] == "bob" and u[4])]
    zip_path = tmp_path / "out" / "home.zip"
    zip_path.parent.mkdir()
    result = charlie("export", "-o", str(zip_path), "--private", "--user", "alice")
    assert result.exit_code == 0, result.output
    assert "kitchen" in result.output and "alice's private channel" in result.output
    assert "projects/kitchen/notes/link.md (a symbolic link, not followed)" in result.output
    return zip_path, before


def test_a_restored_home_holds_what_was_exported(
    exported: tuple[Path, dict[str, Any]],
    charlie: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zip_path, before = exported
    monkeypatch.setenv("CHARLIE_HOME", str(tmp_path / "fresh"))
    result = charlie("restore", str(zip_path))
    assert result.exit_code == 0, result.output
    assert "charlie reindex" in result.output
    with _at(monkeypatch, tmp_path / "fresh") as home:
        after = _snapshot(home)
        after["usage"] = _usage(home)
        bob_private = _messages(home, private_channel(home, get_user(home.db, "bob")))
    assert after == before
    assert len(after["kitchen_revisions"]) == 2 and len(after["private_revisions"]) == 1
    assert "notes/plans/budget.md" in after["kitchen_files"]
    assert len(after["kitchen"]) == 3 and len(after["private"]) == 2
    assert bob_private == []


def test_no_one_elses_private_data_is_in_the_archive(exported: tuple[Path, dict[str, Any]]) -> None:
    zip_path, _ = exported
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        contents = b"".join(archive.read(n) for n in names)
        manifest = json.loads(archive.read("manifest.json"))
    assert SECRET.encode() not in contents
    assert not any("bob" in n for n in names if n.startswith("private/"))
    assert "private/alice.jsonl" in names and "private/alice.md" in names
    assert "conversations/kitchen.md" in names and "usage/alice.jsonl" in names
    assert manifest["exported_by"] == "alice" and manifest["database_user_version"] > 0
    assert manifest["users"] == ["alice", "bob"]
    listed = {e["path"] for e in manifest["files"]}
    assert listed == set(names) - {"manifest.json"}
    first = json.loads(archive_line(zip_path, "conversations/kitchen.jsonl"))
    assert first["speaker"] == "alice" and first["role"] == "user" and first["id"].startswith("m")


def archive_line(zip_path: Path, name: str) -> bytes:
    with zipfile.ZipFile(zip_path) as archive:
        return archive.read(name).split(b"\n")[0]


def test_without_private_no_private_channel_is_exported(
    charlie_home: Path, charlie: Cli, tmp_path: Path
) -> None:
    with Home.open(load_settings()) as home:
        _fill(home)
    zip_path = tmp_path / "shared.zip"
    assert charlie("export", "-o", str(zip_path), "-p", "garden").exit_code == 0
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        contents = b"".join(archive.read(n) for n in names)
    assert not any(n.startswith("private/") for n in names)
    assert b"dentist" not in contents and SECRET.encode() not in contents
    assert not any("kitchen" in n for n in names)


def test_a_tampered_archive_restores_nothing(
    exported: tuple[Path, dict[str, Any]],
    charlie: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zip_path, _ = exported
    tampered = tmp_path / "tampered.zip"
    with zipfile.ZipFile(zip_path) as src, zipfile.ZipFile(tampered, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "conversations/garden.jsonl":
                data = data.replace(b"next week", b"never")
            dst.writestr(info, data)
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("CHARLIE_HOME", str(fresh))
    result = charlie("restore", str(tampered))
    assert result.exit_code == 1
    assert "conversations/garden.jsonl" in result.output
    assert not fresh.exists() or not any((fresh / "projects").glob("*"))


def test_a_home_in_use_is_refused_without_merge_and_merging_twice_adds_nothing(
    exported: tuple[Path, dict[str, Any]],
    charlie: Cli,
    charlie_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zip_path, _ = exported
    result = charlie("restore", str(zip_path))  # into the home it came from
    assert result.exit_code == 1
    assert "--merge" in result.output and "empty" in result.output
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("CHARLIE_HOME", str(fresh))
    assert charlie("restore", str(zip_path)).exit_code == 0
    memory_md = fresh / "projects" / "kitchen" / "memory.md"
    memory_md.write_text(memory_md.read_text("utf-8") + "\n", "utf-8")  # edited since
    edited = memory_md.read_bytes()

    def counts() -> tuple[int, ...]:
        with sqlite3.connect(fresh / "charlie.db") as db:
            return tuple(
                db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("messages", "memory_revisions", "usage_events", "users", "projects")
            )

    first = counts()
    again = charlie("restore", str(zip_path), "--merge")
    assert again.exit_code == 0, again.output
    assert counts() == first
    assert memory_md.read_bytes() == edited
    assert "0 messages (8 already there)" in again.output
    assert "projects/kitchen/memory.md (already there" in again.output
