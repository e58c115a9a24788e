"""`charlie export` / `charlie restore`: a round trip through a zip, real files and SQLite."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from charlie import conversations
from charlie.config import load_settings
from charlie.conversations import Channel, add_message, private_channel, shared_channel
from charlie.home import Home
from charlie.memory import layers as memory
from charlie.memory.layers import Memory, Quote
from charlie.projects import create_project, get_project
from charlie.retrieval import suggestions, usage
from charlie.trace import Called, Preloaded
from charlie.transfer import jsonl as importing
from charlie.users import User, ensure_user, get_user

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
    originals = notes.parent / "attachments"  # a document brought in as a note keeps it here
    originals.mkdir()
    (originals / "quote.pdf").write_bytes(b"%PDF-1.4 the fitter's quote\n")
    outside = home.settings.home.parent / "outside.md"
    outside.write_text(f"Not a note: {SECRET}\n", "utf-8")
    (notes / "link.md").symlink_to(outside)  # never followed
    channel = shared_channel(home, kitchen)
    memory.save(home, channel, Memory(summary="A new kitchen.", decisions=["Blue tiles"]), "tool")
    text = kitchen.memory_path.read_text(encoding="utf-8")
    kitchen.memory_path.write_text(text.replace("Blue tiles", "Blue tiles, matte"), "utf-8")
    assert memory.sync_hand_edits(home, channel) is not None
    _fill_kitchen_threads(home, channel, alice, bob)
    mine = private_channel(home, alice)
    add_message(home, mine, "user", "Remind me of the dentist.", user=alice, images=["x.png"])
    add_message(home, mine, "assistant", "Tuesday at nine.", trace=TRACE)
    memory.save(home, mine, Memory(quotes=[Quote("alice", "dentist Tuesday")]), "tool")
    _pin(home, mine, alice, "garden/roses")
    theirs = private_channel(home, bob)
    add_message(home, theirs, "user", f"My password hint is {SECRET}.", user=bob)
    memory.save(home, theirs, Memory(summary=f"Bob's hint: {SECRET}"), "tool")
    usage.record(home.db, alice.id, "view", note="kitchen/tiles")
    usage.record(home.db, alice.id, "tag", tag="reno")
    usage.record(home.db, alice.id, "cited", note="garden/roses", private=True)
    usage.record(home.db, bob.id, "view", note="kitchen/budget")
    usage.record(home.db, bob.id, "view", note=f"kitchen/{SECRET}", private=True)


TRACE = [
    Preloaded(("notes",)),
    Called("search_notes", {"query": "dentist"}, True, "1 note", ms=3.5, count=1),
]


def _fill_kitchen_threads(home: Home, first: Channel, alice: User, bob: User) -> None:
    """Everything a thread can hold: a regenerated reply (the first set aside), a tool trace,
    a reply cut off, images, imported history, pins and suggestions, how far it was
    distilled; and threads beside it, archived, in the trash, imported."""
    question = add_message(home, first, "user", "Which tiles then?", user=alice, images=["a.jpg"])
    old = add_message(home, first, "assistant", "Blue ones.", trace=TRACE)
    conversations.set_aside(home, first, old)
    add_message(home, first, "assistant", "Matte blue ones.", parent_id=question.id, trace=TRACE)
    add_message(home, first, "assistant", "And the grout", incomplete=True)
    conversations.mark_distilled(home, first, question.id)
    _pin(home, first, bob, "kitchen/tiles", status="accepted")
    _suggest(home, first, alice, "kitchen/budget", "dismissed")
    second = conversations.new_thread(home, first, title="Lighting")
    add_message(home, second, "user", "Pendant lights over the island?", user=bob)
    conversations.archive_thread(home, second)
    gone = conversations.new_thread(home, first, title="Old idea")
    add_message(home, gone, "user", "A red kitchen?", user=alice)
    conversations.trash_thread(home, gone)
    home.db.execute(  # made in the same millisecond as the one before: still two threads
        "UPDATE conversations SET created_at = (SELECT created_at FROM conversations "
        "WHERE id = ?) WHERE id = ?",
        (second.conversation_id, gone.conversation_id),
    )
    imported = conversations.new_thread(
        home, first, title="From ChatGPT", source_id="chatgpt:c1", created_at="2023-05-01T10:00Z"
    )
    history = home.settings.home.parent / "history.jsonl"
    history.write_text(
        '{"id": "u1", "speaker": "alice", "text": "Oak or marble?", "time": "2023-05-01T10:00Z"}\n'
        '{"id": "a1", "role": "assistant", "speaker": "ChatGPT", "text": "Oak.", '
        '"time": "2023-05-01T10:01Z"}\n',
        "utf-8",
    )
    importing.import_jsonl(home, imported, history)


def _suggest(home: Home, channel: Channel, user: User, note: str, status: str) -> int:
    message = conversations.newest_id(home, channel)
    cursor = home.db.execute(
        "INSERT INTO suggestions (message_id, conversation_id, user_id, note, title, why, "
        "status, created_at, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            message,
            channel.conversation_id,
            user.id,
            note,
            note.title(),
            "close in meaning",
            "shown",
            "2024-01-02T03:04:05.000+00:00",
            None,
        ),
    )
    assert cursor.lastrowid is not None
    if status == "dismissed":
        suggestions.dismiss(home, user, cursor.lastrowid)
    return cursor.lastrowid


def _pin(home: Home, channel: Channel, user: User, note: str, status: str = "accepted") -> None:
    suggestions.accept(home, user, _suggest(home, channel, user, note, "shown"))


def _holder(home: Home, project_id: int | None, owner_id: int | None) -> dict[str, Any]:
    """Everything of a project's (or a private channel's) threads, with the ids of this
    home replaced by positions and names, so two homes can be compared."""
    column, value = ("owner_id", owner_id) if owner_id else ("project_id", project_id)
    threads = home.db.execute(
        f"SELECT * FROM conversations WHERE {column} = ? AND private = ? ORDER BY id",
        (value, int(owner_id is not None)),
    ).fetchall()
    out = []
    for thread in threads:
        rows = home.db.execute(
            "SELECT m.*, u.name AS user_name FROM messages m LEFT JOIN users u ON u.id = m.user_id "
            "WHERE conversation_id = ? ORDER BY m.id",
            (thread["id"],),
        ).fetchall()
        place = {r["id"]: n for n, r in enumerate(rows, 1)}
        messages = [
            (
                r["role"],
                r["speaker"],
                r["user_name"],
                r["content"],
                r["created_at"],
                r["source_id"],
                r["images"],
                r["trace"],
                r["incomplete"],
                r["distill"],
                r["hidden"],
                r["parent_id"] if r["parent_id"] in (0, None) else place[r["parent_id"]],
            )
            for r in rows
        ]
        pins = home.db.execute(
            "SELECT p.note, u.name, p.pinned_at FROM pins p JOIN users u ON u.id = p.user_id "
            "WHERE conversation_id = ? ORDER BY note",
            (thread["id"],),
        ).fetchall()
        offered = home.db.execute(
            "SELECT s.message_id, u.name, s.note, s.title, s.why, s.status, s.created_at, "
            "s.decided_at FROM suggestions s JOIN users u ON u.id = s.user_id "
            "WHERE conversation_id = ? ORDER BY s.id",
            (thread["id"],),
        ).fetchall()
        out.append(
            {
                "fields": [
                    thread[c]
                    for c in (
                        "title",
                        "title_set",
                        "created_at",
                        "updated_at",
                        "archived_at",
                        "deleted_at",
                        "source_id",
                    )
                ],
                "distilled": sum(1 for r in rows if r["id"] <= thread["distilled_upto"]),
                "messages": messages,
                "pins": [tuple(p) for p in pins],
                "suggestions": [(place[s[0]], *s[1:]) for s in offered],
            }
        )
    return {"threads": out}


def _revisions(home: Home, channel: Channel) -> list[tuple[str, str, Any, str]]:
    return [
        (r.source, r.memory.to_json(), r.file_sha256, r.created_at)
        for r in memory.revisions(home, channel)
    ]


def _usage(home: Home) -> list[tuple[Any, ...]]:
    rows = home.db.execute(
        "SELECT u.name, e.kind, e.note, e.tag, e.private, e.at FROM usage_events e "
        "JOIN users u ON u.id = e.user_id ORDER BY u.name, e.at, e.kind"
    )
    return [tuple(r) for r in rows]


def _snapshot(home: Home) -> dict[str, Any]:
    alice = get_user(home.db, "alice")
    out: dict[str, Any] = {"private": _holder(home, None, alice.id)}
    out["private_revisions"] = _revisions(home, private_channel(home, alice))
    for slug in ("kitchen", "garden"):
        project = get_project(home, slug)
        out[slug] = _holder(home, project.id, None)
        out[f"{slug}_revisions"] = _revisions(home, shared_channel(home, project))
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
    assert "New accounts: alice, bob. Passwords are never in an archive" in result.output
    with _at(monkeypatch, tmp_path / "fresh") as home:
        after = _snapshot(home)
        after["usage"] = _usage(home)
        bob = get_user(home.db, "bob")
        bob_private = home.db.execute(
            "SELECT count(*) FROM messages WHERE private = 1 AND user_id = ?", (bob.id,)
        ).fetchone()[0]
        hashes = home.db.execute("SELECT count(*) FROM users WHERE password_hash IS NOT NULL")
        assert hashes.fetchone()[0] == 0
    assert after == before
    kitchen = after["kitchen"]["threads"]
    assert len(kitchen) == 4 and len(after["kitchen_revisions"]) == 2
    assert [m[3] for m in kitchen[0]["messages"] if m[10]] == ["Blue ones."]  # set aside
    assert kitchen[0]["distilled"] == 4 and kitchen[0]["pins"][0][:2] == ("kitchen/tiles", "bob")
    assert [s[5] for s in kitchen[0]["suggestions"]] == ["accepted", "dismissed"]
    assert kitchen[3]["fields"][-1] == "chatgpt:c1" and kitchen[3]["messages"][0][5] == "u1"
    assert len(after["private_revisions"]) == 1 and len(after["private"]["threads"]) == 1
    assert "notes/plans/budget.md" in after["kitchen_files"]
    assert after["kitchen_files"]["attachments/quote.pdf"].startswith(b"%PDF")
    assert bob_private == 0


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
                for t in (
                    "messages",
                    "conversations",
                    "memory_revisions",
                    "usage_events",
                    "users",
                    "projects",
                    "pins",
                    "suggestions",
                )
            )

    first = counts()
    again = charlie("restore", str(zip_path), "--merge", "--private-owner", "alice")
    assert again.exit_code == 0, again.output
    assert "Wrote 0 messages into alice's private channel" in again.output
    assert counts() == first, again.output
    assert memory_md.read_bytes() == edited
    assert "0 threads, 0 messages (16 already there)" in again.output
    assert "0 pins, 0 suggestions." in again.output and "New accounts" not in again.output
    assert "projects/kitchen/memory.md (already there" in again.output


def test_people_already_in_the_home_keep_their_account(
    exported: tuple[Path, dict[str, Any]],
    charlie: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zip_path, _ = exported
    with _at(monkeypatch, tmp_path / "fresh") as home:
        ensure_user(home.db, "zoe", is_admin=True)
        alice = ensure_user(home.db, "Alice")  # names match whatever their case
        home.db.execute("UPDATE users SET password_hash = 'kept' WHERE id = ?", (alice.id,))
    result = charlie("restore", str(zip_path), "--private-owner", "alice")
    assert result.exit_code == 0, result.output
    assert "Wrote 2 messages into alice's private channel (no one else's)." in result.output
    assert "New accounts: bob. Passwords are never in an archive" in result.output
    assert "No one is an administrator" not in result.output
    with _at(monkeypatch, tmp_path / "fresh") as home:
        said = home.db.execute(
            "SELECT DISTINCT user_id FROM messages WHERE speaker = 'alice' AND source_id IS NULL"
        ).fetchall()
        assert [r[0] for r in said] == [alice.id]
        row = home.db.execute("SELECT name, password_hash FROM users WHERE id = ?", (alice.id,))
        assert tuple(row.fetchone()) == ("Alice", "kept")
        assert private_channel(home, alice).conversation_id  # her private channel came back
        mine = home.db.execute(
            "SELECT content FROM messages WHERE private = 1 AND user_id = ? ORDER BY id",
            (alice.id,),
        ).fetchall()
        assert [r[0] for r in mine] == ["Remind me of the dentist."]


def _write_archive(path: Path, members: dict[str, bytes], **manifest: Any) -> Path:
    """An archive as `charlie export` would write it, with these members."""
    entries = [
        {"path": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in members.items()
    ]
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr("manifest.json", json.dumps(manifest | {"files": entries}))
    return path


def test_an_archive_from_before_threads_restores(
    charlie: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [
        {
            "id": "m1",
            "speaker": "alice",
            "role": "user",
            "text": "Hi",
            "time": "2024-01-01T10:00:00.000+00:00",
        },
        {
            "id": "m2",
            "speaker": "Charlie",
            "role": "assistant",
            "text": "Hello",
            "time": "2024-01-01T10:00:01.000+00:00",
        },
        {"id": "m3", "speaker": "alice", "role": "user", "text": "Bye", "time": "yesterday"},
    ]
    old = _write_archive(
        tmp_path / "old.zip",
        {
            "projects/den/project.toml": b'name = "Den"\n',
            "conversations/den.jsonl": "".join(json.dumps(x) + "\n" for x in lines).encode(),
            "private/alice.jsonl": json.dumps(lines[0]).encode() + b"\n",
        },
        format=1,
        projects=["den"],
        private="alice",
        exported_by="alice",
        users=["alice"],
    )
    monkeypatch.setenv("CHARLIE_HOME", str(tmp_path / "fresh"))
    result = charlie("restore", str(old))
    assert result.exit_code == 0, result.output
    assert "2 threads, 3 messages (0 already there)" in result.output
    assert (
        'Skipped conversations/den.jsonl line 3 ("time" is not an ISO-8601 time)' in result.output
    )
    with _at(monkeypatch, tmp_path / "fresh") as home:
        alice = get_user(home.db, "alice")
        rows = home.db.execute(
            "SELECT private, user_id, speaker, content, source_id, distill FROM messages "
            "ORDER BY id"
        ).fetchall()
    assert [tuple(r) for r in rows] == [
        (0, None, "alice", "Hi", "m1", 0),
        (0, None, "Charlie", "Hello", "m2", 0),
        (1, alice.id, "alice", "Hi", "m1", 0),
    ]
    again = charlie("restore", str(old), "--merge", "--private-owner", "alice")
    assert "0 threads, 0 messages (3 already there)" in again.output


def test_a_line_that_cannot_be_restored_is_named_and_the_rest_come_back(
    exported: tuple[Path, dict[str, Any]],
    charlie: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zip_path, _ = exported
    with zipfile.ZipFile(zip_path) as made:
        members = {n: made.read(n) for n in made.namelist() if n != "manifest.json"}
        manifest = json.loads(made.read("manifest.json"))
    lines = members["conversations/garden.jsonl"].decode().splitlines()
    broken = json.loads(lines[1]) | {"trace": [{"type": "telepathy"}]}
    members["conversations/garden.jsonl"] = (
        "\n".join([lines[0], json.dumps(broken), *lines[2:], "{oops"]) + "\n"
    ).encode()
    changed = _write_archive(tmp_path / "changed.zip", members, **manifest)
    monkeypatch.setenv("CHARLIE_HOME", str(tmp_path / "fresh"))
    result = charlie("restore", str(changed))
    assert result.exit_code == 0, result.output
    assert (
        "Skipped conversations/garden.jsonl line 2 (its tool trace cannot be read "
        "(unknown trace step type 'telepathy'"
    ) in result.output
    assert "Skipped conversations/garden.jsonl line 4 (not valid JSON)" in result.output
    with _at(monkeypatch, tmp_path / "fresh") as home:
        garden = get_project(home, "garden")
        said = home.db.execute(
            "SELECT content FROM messages WHERE project_id = ? ORDER BY id", (garden.id,)
        ).fetchall()
    assert [r[0] for r in said] == ["What about the garden?", "Agreed, next week."]


def test_a_restore_into_a_home_with_no_one_says_how_to_make_the_first_account(
    charlie: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Home.open(load_settings()) as home:
        create_project(home, "notes-only")
    zip_path = tmp_path / "notes.zip"
    assert charlie("export", "-o", str(zip_path), "-p", "notes-only").exit_code == 0
    monkeypatch.setenv("CHARLIE_HOME", str(tmp_path / "fresh"))
    result = charlie("restore", str(zip_path))
    assert result.exit_code == 0, result.output
    assert "`charlie users add NAME --admin` makes the first" in result.output


def _rewritten(zip_path: Path, out: Path, owner: str, **manifest: Any) -> Path:
    """The archive at `zip_path` with its private channel renamed to `owner`'s and the
    manifest's fields replaced by `manifest`, its hashes made to match again."""
    with zipfile.ZipFile(zip_path) as made:
        members = {n: made.read(n) for n in made.namelist() if n != "manifest.json"}
        original = json.loads(made.read("manifest.json"))
    moved = {
        (f"private/{owner}" + n.removeprefix("private/alice") if n.startswith("private/") else n): d
        for n, d in members.items()
    }
    original.pop("files")
    return _write_archive(out, moved, **(original | {"private": owner} | manifest))


def test_a_rewritten_manifest_cannot_plant_words_in_someone_elses_private_channel(
    exported: tuple[Path, dict[str, Any]],
    charlie: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zip_path, _ = exported
    forged = _rewritten(zip_path, tmp_path / "forged.zip", "bob")  # exported_by stays alice
    monkeypatch.setenv("CHARLIE_HOME", str(tmp_path / "fresh"))
    refused = charlie("restore", str(forged))
    assert refused.exit_code != 0
    assert "holds bob's private channel, but its manifest says 'alice' exported it" in (
        refused.output
    )
    assert "Nothing was written" in refused.output and "--private-owner bob" in refused.output
    with _at(monkeypatch, tmp_path / "fresh") as home:
        assert home.db.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    wrong = charlie("restore", str(forged), "--private-owner", "alice")
    assert wrong.exit_code != 0 and "not alice's" in wrong.output
    # Leaving it out restores the rest, and says what was left out.
    rest = charlie("restore", str(forged), "--without-private")
    assert rest.exit_code == 0, rest.output
    assert "Left out bob's private channel." in rest.output
    with _at(monkeypatch, tmp_path / "fresh") as home:
        private = home.db.execute("SELECT count(*) FROM messages WHERE private = 1")
        assert private.fetchone()[0] == 0
        assert home.db.execute("SELECT count(*) FROM messages").fetchone()[0] > 0


def test_a_private_channel_for_someone_this_home_has_needs_their_name_given(
    exported: tuple[Path, dict[str, Any]],
    charlie: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zip_path, _ = exported
    # Both fields rewritten: the manifest claims alice exported her own channel.
    forged = _rewritten(zip_path, tmp_path / "forged.zip", "carol", exported_by="carol")
    with _at(monkeypatch, tmp_path / "other") as home:
        carol = ensure_user(home.db, "Carol")
    refused = charlie("restore", str(forged), "--merge")
    assert refused.exit_code != 0
    assert "would write into carol's private channel, and carol has an account" in (refused.output)
    with _at(monkeypatch, tmp_path / "other") as home:
        assert home.db.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    confirmed = charlie("restore", str(forged), "--merge", "--private-owner", "carol")
    assert confirmed.exit_code == 0, confirmed.output
    assert "This archive holds carol's private channel (exported by carol)." in confirmed.output
    assert "Wrote 2 messages into carol's private channel (no one else's)." in confirmed.output
    with _at(monkeypatch, tmp_path / "other") as home:
        rows = home.db.execute(
            "SELECT DISTINCT user_id FROM messages WHERE private = 1 AND role = 'user'"
        ).fetchall()
    assert [r[0] for r in rows] == [carol.id]
