"""Conversations exported from other assistants (ChatGPT, Claude), read into one shape.

Either service's export is a zip holding `conversations.json`, a JSON list with one object
per conversation; the zip or that file alone is accepted. Which service wrote it is told
from the content, never from the file name:

- ChatGPT: each conversation has a `mapping` of nodes (a tree: edited questions and
  regenerated answers are branches) and a `current_node`, the last message shown.
- Claude: each conversation has a `name` and a list of `chat_messages`, each from the
  "human" or the "assistant", with its `text` or `content` blocks.

The file is read whole with `json.load`: fine for exports up to ~100 MB, which holds years
of conversations. A conversation that cannot be read is reported and skipped; the rest are
kept. Importing stores each conversation's messages through `importing.import_jsonl`, the
one path by which history enters the database, so an import run again adds nothing.
"""

from __future__ import annotations

import fnmatch
import json
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import IO, Any

from charlie import importing
from charlie.conversations import Channel
from charlie.errors import CharlieError, NotFound
from charlie.home import Home

CHATGPT = "chatgpt"
CLAUDE = "claude"
NAMES = {CHATGPT: "ChatGPT", CLAUDE: "Claude"}  # also the assistant's speaker name
MARKS = {CHATGPT: '"mapping" and "current_node"', CLAUDE: '"chat_messages" and "name"'}
INNER = "conversations.json"  # the file inside the service's zip
SHOWN_TEXT = ("text", "multimodal_text")  # ChatGPT content types a person reads as a message
IMAGE_KEYS = ("asset_pointer", "image_asset_pointer")


@dataclass(frozen=True)
class Msg:
    id: str
    role: str  # "user" or "assistant"
    speaker: str | None  # None for the person who exported: who that is is known at import
    text: str
    time: str  # ISO-8601


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    created: str | None  # ISO-8601, None when the export does not say
    messages: list[Msg]


@dataclass
class Export:
    service: str  # CHATGPT or CLAUDE
    conversations: list[Conversation] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (id or title, why)


@dataclass
class ConversationReport:
    conversation: Conversation
    report: importing.ImportReport


class Broken(ValueError):
    """Why one conversation of the export cannot be read."""


def read_export(path: Path, expected: str | None = None) -> Export:
    """The conversations of the export at `path` (a zip or its conversations.json). With
    `expected`, an export of the other service is refused, naming what it is."""
    data = _load(path)
    if not isinstance(data, list):
        raise CharlieError(
            f"{path} is not a ChatGPT or Claude export: its conversations.json should be a "
            "list of conversations. Nothing was imported."
        )
    service = _detect(data) or (expected if not data else None)  # an empty list is either
    if service is None:
        raise CharlieError(
            f"{path} is not a ChatGPT or Claude export: a ChatGPT conversation has "
            f"{MARKS[CHATGPT]}, a Claude one {MARKS[CLAUDE]}. Nothing was imported."
        )
    if expected is not None and service != expected:
        raise CharlieError(
            f"{path} is a {NAMES[service]} export (its conversations have {MARKS[service]}), "
            f"not a {NAMES[expected]} one: import it with `charlie import {service}`."
        )
    export = Export(service)
    parse = _chatgpt if service == CHATGPT else _claude
    for number, item in enumerate(data, 1):
        try:
            conversation = parse(item)
        except Broken as exc:
            export.skipped.append((_name(item, number), str(exc)))
            continue
        if not conversation.messages:
            export.skipped.append((_name(item, number), "no messages"))
        else:
            export.conversations.append(conversation)
    return export


def _load(path: Path) -> Any:
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                inner = _inner(archive, path)
                with archive.open(inner) as handle:
                    return _parse(handle, f"{path}:{inner}")
        with path.open("rb") as handle:
            return _parse(handle, str(path))
    except FileNotFoundError as exc:
        raise NotFound(f"There is no file {path}. Nothing was imported.") from exc
    except (OSError, zipfile.BadZipFile) as exc:
        raise CharlieError(f"{path} cannot be read ({exc}). Nothing was imported.") from exc


def _inner(archive: zipfile.ZipFile, path: Path) -> str:
    found = [n for n in archive.namelist() if PurePosixPath(n).name == INNER]
    if not found:
        raise CharlieError(
            f"{path} is a zip without {INNER}: give the zip the service sent, or the "
            f"{INNER} inside it. Nothing was imported."
        )
    return min(found, key=lambda n: n.count("/"))


def _parse(handle: IO[bytes], shown: str) -> Any:
    try:
        return json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise CharlieError(f"{shown} is not valid JSON ({exc}). Nothing was imported.") from exc


def _detect(data: list[Any]) -> str | None:
    """The service whose marks the first recognisable conversation bears."""
    for item in data:
        if isinstance(item, dict):
            if "mapping" in item and "current_node" in item:
                return CHATGPT
            if "chat_messages" in item:
                return CLAUDE
    return None


def _name(item: object, number: int) -> str:
    if isinstance(item, dict):
        for key in ("title", "name", "id", "conversation_id", "uuid"):
            if isinstance(item.get(key), str) and item[key].strip():
                return str(item[key])
    return f"conversation {number}"


def _chatgpt(item: object) -> Conversation:
    """The conversation as the person last saw it: from `current_node` back to the root;
    branches left behind by edits and regenerations are dropped."""
    if not isinstance(item, dict):
        raise Broken("not a JSON object")
    mapping = item.get("mapping")
    if not isinstance(mapping, dict):
        raise Broken('"mapping" is missing')
    conversation_id = _id(item.get("conversation_id") or item.get("id"))
    created = _unix(item.get("create_time")) or _unix(item.get("update_time"))
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    node_id = item.get("current_node")
    while node_id is not None:
        if node_id in seen:
            raise Broken(f"its messages loop back on themselves at {node_id}")
        node = mapping.get(node_id) if isinstance(node_id, str) else None
        if not isinstance(node, dict):
            raise Broken(f"message {node_id} is not in its mapping")
        seen.add(node_id)
        path.append({"id": node_id, **node})
        node_id = node.get("parent")
    messages: list[Msg] = []
    for node in reversed(path):  # a message without a time takes the one before it
        if message := _chatgpt_message(node, messages[-1].time if messages else created):
            messages.append(message)
    return Conversation(conversation_id, _title(item.get("title")), created, messages)


def _chatgpt_message(node: dict[str, Any], fallback: str | None) -> Msg | None:
    message = node.get("message")
    if not isinstance(message, dict):
        return None
    role = (message.get("author") or {}).get("role")
    metadata = message.get("metadata") or {}
    content = message.get("content") or {}
    if role not in ("user", "assistant") or metadata.get("is_visually_hidden_from_conversation"):
        return None
    if content.get("content_type") not in SHOWN_TEXT or message.get("recipient", "all") != "all":
        return None  # a tool call, code run, browsing or reasoning: not said to the person
    text = "\n\n".join(p for part in content.get("parts") or [] if (p := _part(part)))
    time = _unix(message.get("create_time")) or fallback
    if not text.strip() or time is None:
        return None
    speaker = NAMES[CHATGPT] if role == "assistant" else None
    return Msg(_id(node["id"]), role, speaker, text, time)


def _part(part: object) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        if (
            any(part.get(k) for k in IMAGE_KEYS)
            or part.get("content_type") == "image_asset_pointer"
        ):
            return "[image]"
        text = part.get("text")
        return text if isinstance(text, str) else ""
    return ""


def _claude(item: object) -> Conversation:
    if not isinstance(item, dict):
        raise Broken("not a JSON object")
    messages = item.get("chat_messages")
    if not isinstance(messages, list):
        raise Broken('"chat_messages" is missing')
    conversation_id = _id(item.get("uuid"))
    created = _iso(item.get("created_at"))
    found = [m for message in messages if (m := _claude_message(message, created))]
    return Conversation(conversation_id, _title(item.get("name")), created, found)


def _claude_message(message: object, fallback: str | None) -> Msg | None:
    if not isinstance(message, dict):
        return None
    role = {"human": "user", "assistant": "assistant"}.get(message.get("sender") or "")
    if role is None or not isinstance(message.get("uuid"), str):
        return None
    blocks = message.get("content")
    if isinstance(blocks, list) and blocks:
        texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        text = "\n\n".join(t for t in texts if isinstance(t, str) and t.strip())
    else:
        plain = message.get("text")
        text = plain if isinstance(plain, str) else ""
    time = _iso(message.get("created_at")) or fallback
    if not text.strip() or time is None:
        return None
    speaker = NAMES[CLAUDE] if role == "assistant" else None
    return Msg(message["uuid"], role, speaker, text, time)


def _id(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Broken("it has no id")
    return value


def _title(value: object) -> str:
    return value.strip() if isinstance(value, str) and value.strip() else "(untitled)"


def _unix(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return datetime.fromtimestamp(value, UTC).isoformat(timespec="milliseconds")
    except (ValueError, OverflowError, OSError):
        return None


def _iso(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return value.strip()


def matching(conversations: Iterable[Conversation], pattern: str | None) -> list[Conversation]:
    """Those whose title holds `pattern`, ignoring case; a pattern with * or ? is a glob
    matched against the whole title."""
    if not pattern:
        return list(conversations)
    wanted = pattern.casefold()
    if any(c in pattern for c in "*?["):
        return [c for c in conversations if fnmatch.fnmatchcase(c.title.casefold(), wanted)]
    return [c for c in conversations if wanted in c.title.casefold()]


def import_conversations(
    home: Home,
    channel: Channel,
    service: str,
    conversations: Iterable[Conversation],
    person: str,
) -> list[ConversationReport]:
    """Store each conversation's messages in `channel`, the person's spoken by `person`,
    with source ids "<service>:<conversation id>:<message id>" so nothing is added twice."""
    reports = []
    with tempfile.TemporaryDirectory(prefix="charlie-import-") as folder:
        path = Path(folder) / "messages.jsonl"
        for conversation in conversations:
            with path.open("w", encoding="utf-8") as handle:
                for message in conversation.messages:
                    line = {
                        "id": f"{service}:{conversation.id}:{message.id}",
                        "speaker": message.speaker or person,
                        "role": message.role,
                        "text": message.text,
                        "time": message.time,
                    }
                    handle.write(json.dumps(line, ensure_ascii=False) + "\n")
            report = importing.import_jsonl(home, channel, path)
            report.problems = [
                (n, f"message {conversation.messages[n - 1].id}: {why}")
                for n, why in report.problems
            ]
            reports.append(ConversationReport(conversation, report))
    return reports
