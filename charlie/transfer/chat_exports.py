"""Conversations exported from other assistants (ChatGPT, Claude), read into one shape.

Either service's export is a zip holding `conversations.json`, a JSON list with one object
per conversation; the zip or that file alone is accepted. Which service wrote it is told
from the content (the first conversations), never from the file name:

- ChatGPT: each conversation has a `mapping` of nodes (a tree: edited questions and
  regenerated answers are branches) and a `current_node`, the last message shown.
- Claude: each conversation has a `name` and a list of `chat_messages`, each from the
  "human" or the "assistant", with its `text` or `content` blocks.

The file is parsed streaming (ijson), one conversation at a time, straight from the zip
member or the plain file: years of history (hundreds of megabytes) are read in the memory
one conversation takes, and a conversation nested deeper than `MAX_DEPTH` levels or holding
more than `MAX_VALUES` values is read past without being built (`json_items`), so no file
can take more. Before anything is stored, `ExportFile.check` reads the file once to the
end, so a file that is not valid JSON is refused whole rather than imported up to the bad
byte, and the number of conversations is known for the progress shown meanwhile. A
conversation that cannot be read (too deep, too large, a field Charlie reads of the wrong
type, a message missing) is reported by name with why, and skipped; the rest are kept.
Importing stores each conversation's messages through `importing.import_jsonl`, the one
path by which history enters the database, so an import run again adds nothing.
"""

from __future__ import annotations

import fnmatch
import json
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import IO, Any, Protocol, TypeVar

import ijson

from charlie.conversations import Channel, new_thread
from charlie.errors import CharlieError, NotFound
from charlie.home import Home
from charlie.jsonvalue import JSON, JSONObject
from charlie.transfer import jsonl as importing
from charlie.transfer.jsonl import kind

CHATGPT = "chatgpt"
CLAUDE = "claude"
NAMES = {CHATGPT: "ChatGPT", CLAUDE: "Claude"}  # also the assistant's speaker name
MARKS = {CHATGPT: '"mapping" and "current_node"', CLAUDE: '"chat_messages" and "name"'}
INNER = "conversations.json"  # the file inside the service's zip
SHOWN_TEXT = ("text", "multimodal_text")  # ChatGPT content types a person reads as a message
IMAGE_KEYS = ("asset_pointer", "image_asset_pointer")
PEEK = 100  # conversations read to tell the service, at most, before giving up
CHUNK = 1 << 16  # bytes handed to the parser at a time
BOM = b"\xef\xbb\xbf"
WHITESPACE = b" \t\r\n"


@dataclass(frozen=True)
class Msg:
    id: str
    role: str  # "user" or "assistant"
    speaker: str | None  # None for the person who exported: who that is is known at import
    text: str
    time: str  # ISO-8601


@dataclass(frozen=True)
class Summary:
    """What is shown of a conversation once its messages are gone from memory."""

    id: str
    title: str
    created: str | None  # ISO-8601, None when the export does not say
    messages: int


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    created: str | None  # ISO-8601, None when the export does not say
    messages: list[Msg]

    def summary(self) -> Summary:
        return Summary(self.id, self.title, self.created, len(self.messages))


@dataclass
class Export:
    service: str  # CHATGPT or CLAUDE
    conversations: list[Conversation] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (id or title, why)


@dataclass
class ConversationReport:
    conversation: Summary
    report: importing.ImportReport
    thread: Channel | None = None  # the thread it went into


@dataclass(frozen=True)
class Progress:
    """How far a pass over the export has come, for a progress bar."""

    phase: str  # "checking" (the pass before anything is stored) or "reading"
    read: int  # bytes of conversations.json read so far
    total: int  # bytes of conversations.json in all
    conversations: int  # conversations read so far
    of: int | None  # conversations in all, once a check has counted them


OnProgress = Callable[[Progress], None]


class Broken(ValueError):
    """Why one conversation of the export cannot be read."""


def read_export(path: Path, expected: str | None = None) -> Export:
    """The conversations of the export at `path` (a zip or its conversations.json), all held
    in memory: for small exports and tests; imports use `open_export`. With `expected`, an
    export of the other service is refused, naming what it is."""
    export = open_export(path, expected)
    conversations = list(export.conversations())
    return Export(export.service, conversations, export.skipped)


def open_export(path: Path, expected: str | None = None) -> ExportFile:
    """The export at `path`, its service told from its first conversations. With `expected`,
    an export of the other service is refused, naming what it is."""
    export = ExportFile(path, _find(path))
    first = export.peek()
    service = _detect(first) or (expected if not first else None)  # an empty list is either
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
    export.service = service
    return export


class ExportFile:
    """A service's export on disk, read again from the start by each pass over it."""

    def __init__(self, path: Path, inner: str | None) -> None:
        self.path = path
        self.inner = inner  # the member of the zip holding the conversations, or None
        self.service = ""
        self.skipped: list[tuple[str, str]] = []  # (id or title, why), by `conversations`
        self.count: int | None = None  # conversations in the file, once checked

    @property
    def shown(self) -> str:
        return f"{self.path}:{self.inner}" if self.inner else str(self.path)

    def peek(self) -> list[JSON]:
        """The first conversations, up to the first that a service's marks tell (at most
        `PEEK` of them)."""
        found: list[JSON] = []
        with self._stream() as stream:
            for item in json_items(stream):
                found.append(item.fields if isinstance(item, Refused) else item)
                if _detect(found[-1:]) or len(found) >= PEEK:
                    break
        return found

    def check(self, on_progress: OnProgress | None = None) -> int:
        """Read the file once to the end without keeping anything: one that is not valid
        JSON is refused here, before anything is stored. How many conversations it holds."""
        count = 0
        with self._stream() as stream:
            for _ in skim_items(stream):
                count += 1
                if on_progress is not None:
                    on_progress(Progress("checking", stream.read_bytes, stream.total, count, None))
        self.count = count
        return count

    def conversations(self, on_progress: OnProgress | None = None) -> Iterator[Conversation]:
        """Each readable conversation with messages, one at a time; the others are added to
        `skipped` with the reason."""
        with self._stream() as stream:
            for number, item in enumerate(json_items(stream), 1):
                conversation = self._read(item, number)
                if on_progress is not None:
                    done = Progress("reading", stream.read_bytes, stream.total, number, self.count)
                    on_progress(done)
                if conversation is not None:
                    yield conversation

    def _read(self, item: object, number: int) -> Conversation | None:
        """The conversation `item` holds, or None when it is added to `skipped` with why."""
        if isinstance(item, Refused):  # too deep or too large: read past, not built
            self.skipped.append((_name(item.fields, number), item.why))
            return None
        try:
            conversation = (_chatgpt if self.service == CHATGPT else _claude)(item)
        except Broken as exc:
            self.skipped.append((_name(item, number), str(exc)))
            return None
        if not conversation.messages:
            self.skipped.append((_name(item, number), "no messages"))
            return None
        return conversation

    @contextmanager
    def _stream(self) -> Iterator[_Counted]:
        """The conversations' list, its first byte checked, to be parsed (`json_items`); any
        failure to read or parse it is told as a `CharlieError`."""
        stream: _Counted | None = None
        try:
            with self._open() as (handle, total):
                stream = _Counted(handle, total)
                first = stream.first_byte()
                if not first:
                    raise CharlieError(f"{self.shown} is empty. Nothing was imported.")
                if first != b"[":
                    raise CharlieError(
                        f"{self.path} is not a ChatGPT or Claude export: its {INNER} should "
                        "be a list of conversations. Nothing was imported."
                    )
                yield stream
        except ijson.JSONError as exc:
            where = f" near byte {stream.read_bytes:,}" if stream is not None else ""
            raise CharlieError(
                f"{self.shown} is not valid JSON ({_reason(exc)}{where}). Nothing was imported."
            ) from exc
        except (OSError, zipfile.BadZipFile, EOFError) as exc:
            raise CharlieError(
                f"{self.path} cannot be read ({exc}). Nothing was imported."
            ) from exc

    @contextmanager
    def _open(self) -> Iterator[tuple[IO[bytes], int]]:
        if self.inner is None:
            with self.path.open("rb") as handle:
                yield handle, self.path.stat().st_size
            return
        with zipfile.ZipFile(self.path) as archive, archive.open(self.inner) as handle:
            yield handle, archive.getinfo(self.inner).file_size


class _Counted:
    """A binary stream read through: counts the bytes read (for progress), skips a UTF-8
    byte-order mark, and can show the first byte of the JSON before the parser reads it."""

    def __init__(self, raw: IO[bytes], total: int) -> None:
        self.raw = raw
        self.total = total
        self.read_bytes = 0
        self.pending = b""

    def first_byte(self) -> bytes:
        """The first byte of the JSON text, a byte-order mark and white space skipped (b""
        for a file that holds nothing else); what was read stays for the parser."""
        self.pending = self._raw(CHUNK)
        if self.pending.startswith(BOM):
            self.pending = self.pending[len(BOM) :]
        while not self.pending.lstrip(WHITESPACE):
            self.pending = self._raw(CHUNK)  # white space only: the parser needs none of it
            if not self.pending:
                return b""
        return self.pending.lstrip(WHITESPACE)[:1]

    def _raw(self, size: int) -> bytes:
        data = self.raw.read(size)
        self.read_bytes += len(data)
        return data

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # the parser asks, to learn whether the stream gives bytes or text
            return b""
        size = size if size > 0 else CHUNK
        if self.pending:
            data, self.pending = self.pending[:size], self.pending[size:]
            return data
        return self._raw(size)


def _reason(exc: Exception) -> str:
    """The parser's first line of explanation ("parse error: premature EOF")."""
    raw = exc.args[0] if exc.args else exc
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return text.strip().splitlines()[0].strip() if text.strip() else type(exc).__name__


def _find(path: Path) -> str | None:
    """The zip member holding the conversations, or None when `path` is the file itself."""
    try:
        if not zipfile.is_zipfile(path):
            if not path.exists():
                raise FileNotFoundError(path)
            return None
        with zipfile.ZipFile(path) as archive:
            return _inner(archive, path)
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


def _detect(data: list[JSON]) -> str | None:
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
    mapping = _typed(item, "mapping", dict)
    if mapping is None:
        raise Broken('"mapping" is missing')
    conversation_id = _id(item.get("conversation_id") or item.get("id"))
    created = _unix(item.get("create_time")) or _unix(item.get("update_time"))
    path: list[dict[str, object]] = []
    seen: set[str] = set()
    node_id = _typed(item, "current_node", str)
    while node_id is not None:
        if node_id in seen:
            raise Broken(f"its messages loop back on themselves at {node_id}")
        if node_id not in mapping:
            raise Broken(f"message {node_id} is not in its mapping")
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise Broken(f"message {node_id} is {kind(node)}, not an object")
        seen.add(node_id)
        path.append({"id": node_id, **node})
        node_id = _typed(node, "parent", str, f"message {node_id}")
    messages: list[Msg] = []
    for node in reversed(path):  # a message without a time takes the one before it
        if message := _chatgpt_message(node, messages[-1].time if messages else created):
            messages.append(message)
    return Conversation(conversation_id, _title(item.get("title")), created, messages)


def _chatgpt_message(node: dict[str, object], fallback: str | None) -> Msg | None:
    """The message of `node` when it was shown to the person as text; `Broken` when a field
    read to tell is not of the type the export gives it."""
    where = f"message {node['id']}"
    message = _typed(node, "message", dict, where)
    if message is None:
        return None
    role = _typed(_typed(message, "author", dict, where) or {}, "role", str, where, "author.role")
    metadata = _typed(message, "metadata", dict, where) or {}
    content = _typed(message, "content", dict, where) or {}
    shown = _typed(content, "content_type", str, where, "content.content_type")
    if role not in ("user", "assistant") or metadata.get("is_visually_hidden_from_conversation"):
        return None
    if shown not in SHOWN_TEXT or message.get("recipient", "all") != "all":
        return None  # a tool call, code run, browsing or reasoning: not said to the person
    parts = _typed(content, "parts", list, where, "content.parts") or []
    text = "\n\n".join(p for part in parts if (p := _part(part)))
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
    messages = _typed(item, "chat_messages", list)
    if messages is None:
        raise Broken('"chat_messages" is missing')
    conversation_id = _id(item.get("uuid"))
    created = _iso(item.get("created_at"))
    found = [
        m
        for number, message in enumerate(messages, 1)
        if (m := _claude_message(message, number, created))
    ]
    return Conversation(conversation_id, _title(item.get("name")), created, found)


def _claude_message(message: object, number: int, fallback: str | None) -> Msg | None:
    """The message when it is text from the person or the assistant; `Broken` when a field
    read to tell is not of the type the export gives it."""
    if not isinstance(message, dict):
        raise Broken(f"message {number} is {kind(message)}, not an object")
    uuid = _typed(message, "uuid", str, f"message {number}")
    if uuid is None or not uuid.strip():
        raise Broken(f'message {number} has no "uuid"')
    where = f"message {uuid}"
    role = {"human": "user", "assistant": "assistant"}.get(
        _typed(message, "sender", str, where) or ""
    )
    if role is None:
        return None
    blocks = _typed(message, "content", list, where)
    if blocks:
        texts = [_claude_block(block, where) for block in blocks]
        text = "\n\n".join(t for t in texts if t.strip())
    else:
        text = _typed(message, "text", str, where) or ""
    time = _iso(message.get("created_at")) or fallback
    if not text.strip() or time is None:
        return None
    speaker = NAMES[CLAUDE] if role == "assistant" else None
    return Msg(uuid, role, speaker, text, time)


def _claude_block(block: object, where: str) -> str:
    """The text of a block of a Claude message's content ("" for a tool call, a file…)."""
    if not isinstance(block, dict):
        raise Broken(f'{where}: "content" holds {kind(block)}, not an object')
    if block.get("type") != "text":
        return ""
    return _typed(block, "text", str, where, "content.text") or ""


EXPECTED: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


Expected = TypeVar("Expected")


def _typed(
    holder: Mapping[str, object],
    key: str,
    expected: type[Expected],
    where: str = "",
    name: str = "",
) -> Expected | None:
    """`holder[key]` when it is of the `expected` type, None when it is missing or null;
    `Broken` saying what it is otherwise (`where` in the export, by the `name` shown)."""
    value = holder.get(key)
    if value is None or isinstance(value, expected):
        return value
    said = f'"{name or key}" is {kind(value)}, not {EXPECTED[expected]}'
    raise Broken(f"{where}: {said}" if where else said)


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


def matching(conversations: Iterable[Conversation], pattern: str | None) -> Iterator[Conversation]:
    """Those whose title holds `pattern`, ignoring case, one at a time as they come; a pattern
    with * or ? is a glob matched against the whole title."""
    if not pattern:
        yield from conversations
        return
    wanted = pattern.casefold()
    glob = any(c in pattern for c in "*?[")
    for c in conversations:
        title = c.title.casefold()
        if fnmatch.fnmatchcase(title, wanted) if glob else wanted in title:
            yield c


def import_conversations(
    home: Home,
    channel: Channel,
    service: str,
    conversations: Iterable[Conversation],
    person: str,
    on_stored: Callable[[ConversationReport], None] | None = None,
    *,
    to_memory: bool = False,
) -> list[ConversationReport]:
    """Store each conversation's messages in a thread of its own beside `channel` (titled and
    dated as in the export), the person's spoken by `person`,
    with source ids "<service>:<conversation id>:<message id>" so nothing is added twice.
    Each conversation is stored before the next is read, and only its summary is kept, so
    memory holds one conversation at a time; `on_stored` hears of each once it is stored.
    `to_memory` marks the messages (those already there too) to be folded into memory."""
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
            thread = new_thread(  # its own thread, found again on re-import
                home,
                channel,
                title=conversation.title,
                source_id=f"{service}:{conversation.id}",
                created_at=conversation.created,
            )
            report = importing.import_jsonl(home, thread, path, to_memory=to_memory)
            report.problems = [
                (n, f"message {conversation.messages[n - 1].id}: {why}")
                for n, why in report.problems
            ]
            report.message_ids = []  # not needed afterwards: memory stays bounded
            done = ConversationReport(conversation.summary(), report, thread)
            reports.append(done)
            if on_stored is not None:
                on_stored(done)
    return reports


# -- the list of conversations, read one at a time, each bounded in depth and size ------------
#
# ijson's `items` keeps, for each array or object open around the parser, its path from the
# top as a string ("item.mapping.n1.message.metadata.junk.item.item…"), so an item nested d
# levels deep costs time and memory in d²: a 600 KB export holding a 300,000-deep array in one
# conversation grew to 21 GB. Here items are built from ijson's `basic_parse` events, which
# carry no path, with a stack of open containers instead of recursion. An item nested deeper
# than `MAX_DEPTH` or holding more than `MAX_VALUES` values is not built past that point: the
# rest of it is read past, counting only how deep the parser is, and it comes back as a
# `Refused` that keeps its top-level fields (a title, an id) so that it can be named. The
# memory taken is that of the largest item allowed, whatever the file holds.

MAX_DEPTH = 256  # levels of nesting inside one item; real exports use about a dozen
MAX_VALUES = 2_000_000  # values in one item: ~300 MB held at worst; ~40 per ChatGPT message
SHOWN_KEYS = 6  # keys of the path shown to say where an item is too deep
STARTS = ("start_map", "start_array")
ENDS = ("end_map", "end_array")

Events = Iterator[tuple[str, Any]]


class Readable(Protocol):
    """A binary stream, as the parser reads it."""

    def read(self, size: int = -1) -> bytes: ...


@dataclass(frozen=True)
class Refused:
    """An item that was not built, and why (a sentence). `fields` holds its top-level keys:
    with their values where they are strings, numbers, true/false or null, with None where
    they are objects or lists."""

    fields: JSONObject
    why: str


def json_items(stream: Readable) -> Iterator[JSON | Refused]:
    """Each item of the JSON list in `stream` (its first byte "["), built, or `Refused`.
    The stream is read to its end, so what follows the list is checked too; ijson's
    `JSONError` says where the text is not valid JSON."""
    events: Events = ijson.basic_parse(stream, use_float=True)
    next(events)  # the list's start_array: the caller checked the first byte
    for event, value in events:
        if event == "end_array":
            break
        yield _item(event, value, events)
    for _ in events:  # nothing may follow the list: the parser raises on anything
        pass


def skim_items(stream: Readable) -> Iterator[None]:
    """None at the end of each item of the JSON list in `stream`, nothing built: a pass that
    checks the JSON and counts the items in the memory of the parser alone."""
    depth = 0
    for event, _ in ijson.basic_parse(stream, use_float=True):
        if event in STARTS:
            depth += 1
        elif event in ENDS:
            depth -= 1
            if depth == 1:
                yield None
        elif depth == 1 and event != "map_key":
            yield None  # an item that is a string, a number…


def _item(event: str, value: JSON, events: Events) -> JSON | Refused:
    """The item whose first event is (`event`, `value`), built from the events that follow
    up to its end; `Refused` once it is too deep or too large."""
    built = _build(event, value, events)
    if isinstance(built, _Cut):  # what was built is let go by now: read past the rest
        return _read_past(built, events)
    return built


@dataclass(frozen=True)
class _Cut:
    """Where building an item stopped: its top-level fields, how deep the parser is, why."""

    fields: JSONObject
    keyed: bool  # the item is an object (its fields are read on); False for a list
    depth: int
    why: str


def _build(event: str, value: JSON, events: Events) -> JSON | _Cut:
    """The item, built; or, once it is too deep or too large, where building stopped."""
    if event not in STARTS:
        return value
    root: JSONObject | list[JSON] = {} if event == "start_map" else []
    stack: list[JSONObject | list[JSON]] = [root]  # the containers open, innermost last
    keys: list[str | None] = []  # the key each open container has in its parent (None: a list's)
    top = root
    key = ""
    values = 1
    for event, value in events:
        if event == "map_key":
            key = str(value)  # a key is always a string
            continue
        if event in ENDS:
            stack.pop()
            if not stack:
                return root
            keys.pop()
            top = stack[-1]
            continue
        values += 1
        keyed = isinstance(top, dict)
        opened: JSONObject | list[JSON] | None = None
        if event in STARTS:
            opened = {} if event == "start_map" else []
        opens = opened is not None
        # in place before any check, so that a cut keeps the key among the fields
        if isinstance(top, dict):
            top[key] = value if opened is None else opened
        else:
            top.append(value if opened is None else opened)
        if values > MAX_VALUES:
            why = (
                f"it holds more than {MAX_VALUES:,} JSON values, more than Charlie holds in "
                "memory for one conversation: it was read past, not imported. Split it, or "
                "remove from the file what it does not need, and import again to add it"
            )
            return _cut(root, len(stack) + opens, why)
        if opened is None:
            continue
        if len(stack) >= MAX_DEPTH:
            where = [k for k in [*keys, key if keyed else None] if k is not None]
            why = (
                f"its JSON nests deeper than {MAX_DEPTH} levels{_at(where)}, deeper than "
                "any export needs: it was read past, not imported. Remove that part of "
                "the file and import again to add it"
            )
            return _cut(root, len(stack) + 1, why)
        keys.append(key if keyed else None)
        stack.append(opened)
        top = opened
    raise ijson.IncompleteJSONError("premature EOF")  # the parser raises first; for mypy


def _cut(root: JSONObject | list[JSON], depth: int, why: str) -> _Cut:
    if isinstance(root, list):
        return _Cut({}, False, depth, why)
    fields: JSONObject = {k: None if isinstance(v, dict | list) else v for k, v in root.items()}
    return _Cut(fields, True, depth, why)


def _read_past(cut: _Cut, events: Events) -> Refused:
    """Read past the rest of a cut item, keeping only its top-level fields."""
    fields = dict(cut.fields)
    depth = cut.depth
    key = ""
    for event, value in events:
        if event in STARTS:
            if depth == 1 and cut.keyed:
                fields[key] = None
            depth += 1
        elif event in ENDS:
            depth -= 1
            if depth == 0:
                return Refused(fields, cut.why)
        elif depth == 1 and cut.keyed:
            if event == "map_key":
                key = value
            else:
                fields[key] = value
    raise ijson.IncompleteJSONError("premature EOF")  # the parser raises first; for mypy


def _at(keys: list[str]) -> str:
    """ " (at mapping.n1.message.metadata)": where in the item, by its first keys."""
    if not keys:
        return ""
    shown = [json.dumps(k, ensure_ascii=False)[1:-1][:40] for k in keys[:SHOWN_KEYS]]
    return f" (at {'.'.join(shown)}{'…' if len(keys) > SHOWN_KEYS else ''})"
