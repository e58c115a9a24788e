"""Importing a large ChatGPT export: throughput and peak memory of `charlie import chatgpt`.

It writes a ChatGPT-format export of about `--megabytes` (default 200) of conversations.json,
shaped like the real thing: each conversation a `mapping` tree with a hidden system message
at its root, edited questions and regenerated answers left behind as branches, tool calls
(code and its output, never shown), images in questions, and the metadata every node
carries. Then, each in a child process whose peak resident memory (`ru_maxrss`) is read when
it ends:

- **json.load**: the whole conversations.json read at once, as Charlie did before it parsed
  exports streaming — for comparison only;
- **list**: `charlie import chatgpt export.zip --list --json` — streaming parse alone;
- **import**: `charlie import chatgpt export.zip -p bench --json` into an empty data home:
  the check pass, parse, storing every message and writing its words into the keyword
  index (the command returns then: the vectors follow in a detached `charlie reindex
  --catch-up`, which `benchmarks/history_indexing.py` times; a small export, under the
  import's foreground share, is embedded before it returns);
- **again**: the same import once more, which must add nothing.

    .venv/bin/python benchmarks/import_speed.py [--megabytes 200] [--out FILE]

The figures depend on the machine's load: the load average is recorded before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from support import machine, work_folder  # noqa: E402

VOCABULARY = (
    "the a and of to in is for on with as it that be this are or by from at an was can "
    "plan kitchen garden budget recipe travel code python error function data model train "
    "invoice tax letter draft email meeting schedule week month year price cost quote tile "
    "oak marble paint wall floor window door roof boiler heat insulation loan bank rate "
    "holiday flight hotel museum beach mountain walk run bike swim sleep diet protein bread "
    "sourdough starter flour water salt yeast oven bake loaf crust crumb proof knead fold "
    "database index query table column migration backup restore export import stream parse "
    "memory speed test result figure chart graph report review summary decision reason idea"
)
WORDS = VOCABULARY.split()
BASE_TIME = 1_600_000_000.0  # September 2020
YEARS = 4 * 365 * 86400.0


class Maker:
    """Conversations in ChatGPT's export format, from a seeded random generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.nodes = 0
        self.shown = 0  # messages Charlie keeps: the branch last seen, text said to the person

    def uuid(self) -> str:
        h = self.rng.getrandbits(128)
        s = f"{h:032x}"
        return f"{s[:8]}-{s[8:12]}-4{s[13:16]}-8{s[17:20]}-{s[20:]}"

    def text(self, low: int, high: int) -> str:
        count = self.rng.randint(low, high)
        words = self.rng.choices(WORDS, k=count)
        sentences, start = [], 0
        while start < count:
            n = self.rng.randint(6, 18)
            part = " ".join(words[start : start + n])
            sentences.append(part[:1].upper() + part[1:] + ".")
            start += n
        return " ".join(sentences)

    def message(
        self,
        node_id: str,
        role: str,
        parts: list[Any],
        at: float | None,
        *,
        content_type: str = "text",
        recipient: str = "all",
        hidden: bool = False,
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"request_id": f"{self.rng.getrandbits(64):016x}-LHR"}
        if role == "assistant":
            metadata |= {
                "finish_details": {"type": "stop", "stop_tokens": [200002]},
                "citations": [],
                "content_references": [],
                "gizmo_id": None,
                "is_complete": True,
                "message_type": None,
                "model_slug": "gpt-4o",
                "default_model_slug": "gpt-4o",
                "parent_id": self.uuid(),
                "timestamp_": "absolute",
            }
        elif role == "user":
            metadata |= {"message_source": None, "timestamp_": "absolute", "message_type": None}
        if hidden:
            metadata["is_visually_hidden_from_conversation"] = True
        content: dict[str, Any] = {"content_type": content_type}
        if content_type == "code":
            content |= {"language": "unknown", "response_format_name": None, "text": parts[0]}
        elif content_type == "execution_output":
            content["text"] = parts[0]
        else:
            content["parts"] = parts
        return {
            "id": node_id,
            "author": {"role": role, "name": "python" if role == "tool" else None, "metadata": {}},
            "create_time": at,
            "update_time": None,
            "content": content,
            "status": "finished_successfully",
            "end_turn": role == "assistant" and recipient == "all",
            "weight": 1.0,
            "metadata": metadata,
            "recipient": recipient,
            "channel": None,
        }

    def conversation(self) -> dict[str, Any]:
        mapping: dict[str, dict[str, Any]] = {}
        at = BASE_TIME + self.rng.random() * YEARS
        created = at

        def add(message: dict[str, Any] | None, parent: str | None) -> str:
            node_id = message["id"] if message else self.uuid()
            mapping[node_id] = {
                "id": node_id,
                "message": message,
                "parent": parent,
                "children": [],
            }
            if parent is not None:
                mapping[parent]["children"].append(node_id)
            self.nodes += 1
            return node_id

        tip = add(None, None)
        tip = add(self.message(self.uuid(), "system", [""], None, hidden=True), tip)
        turns = max(1, min(60, int(self.rng.lognormvariate(1.6, 0.8))))
        for _ in range(turns):
            at += self.rng.uniform(20, 600)
            if self.rng.random() < 0.12:  # a question edited later: its branch is left behind
                old = add(self.message(self.uuid(), "user", [self.text(8, 60)], at), tip)
                add(self.message(self.uuid(), "assistant", [self.text(60, 300)], at + 9), old)
                at += 60
            parts: list[Any] = [self.text(8, 80)]
            if self.rng.random() < 0.05:
                pointer = {
                    "content_type": "image_asset_pointer",
                    "asset_pointer": f"file-service://file-{self.rng.getrandbits(64):x}",
                    "size_bytes": self.rng.randint(50_000, 900_000),
                    "width": 1024,
                    "height": 768,
                    "fovea": None,
                    "metadata": None,
                }
                parts.insert(0, pointer)
                kind = "multimodal_text"
            else:
                kind = "text"
            tip = add(self.message(self.uuid(), "user", parts, at, content_type=kind), tip)
            self.shown += 1
            if self.rng.random() < 0.08:  # the model ran code first: not said to the person
                code = "print(" + " + ".join(str(self.rng.randint(1, 99)) for _ in range(4)) + ")"
                tip = add(
                    self.message(
                        self.uuid(),
                        "assistant",
                        [code],
                        at + 2,
                        content_type="code",
                        recipient="python",
                    ),
                    tip,
                )
                tip = add(
                    self.message(
                        self.uuid(),
                        "tool",
                        [str(self.rng.randint(4, 400))],
                        at + 3,
                        content_type="execution_output",
                    ),
                    tip,
                )
            if self.rng.random() < 0.1:  # an answer regenerated: the first one is left behind
                add(self.message(self.uuid(), "assistant", [self.text(60, 300)], at + 8), tip)
            tip = add(self.message(self.uuid(), "assistant", [self.text(60, 300)], at + 10), tip)
            self.shown += 1
        conversation_id = self.uuid()
        return {
            "title": self.text(2, 6).rstrip(".")[:60],
            "create_time": created,
            "update_time": at + 10,
            "mapping": mapping,
            "moderation_results": [],
            "current_node": tip,
            "plugin_ids": None,
            "conversation_id": conversation_id,
            "conversation_template_id": None,
            "gizmo_id": None,
            "is_archived": False,
            "safe_urls": [],
            "default_model_slug": "gpt-4o",
            "id": conversation_id,
        }


def write_export(path: Path, megabytes: float, seed: int = 7) -> dict[str, int]:
    """Write conversations.json of about `megabytes` MB at `path`; what it holds."""
    maker = Maker(seed)
    limit = int(megabytes * 1_000_000)
    count = 0
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        written = 1
        while written < limit:
            text = json.dumps(maker.conversation(), ensure_ascii=False)
            out.write((", " if count else "") + text)
            written += len(text.encode("utf-8")) + (2 if count else 0)
            count += 1
        out.write("]")
    return {
        "conversations": count,
        "nodes": maker.nodes,
        "shown_messages": maker.shown,
        "bytes": path.stat().st_size,
    }


SETUP = """
from charlie.config import load_settings
from charlie.home import Home
from charlie.projects import create_project
from charlie.users import ensure_user
with Home.open(load_settings()) as home:
    ensure_user(home.db, "bench", is_admin=True)
    create_project(home, "bench")
"""
STORE_ONLY = """
import sys
from pathlib import Path
from charlie.transfer import chat_exports as exports
from charlie.config import load_settings
from charlie.conversations import shared_channel
from charlie.home import Home
from charlie.projects import get_project
with Home.open(load_settings()) as home:
    channel = shared_channel(home, get_project(home, "bench"))
    export = exports.open_export(Path(sys.argv[1]), exports.CHATGPT)
    export.check()
    done = exports.import_conversations(home, channel, "chatgpt", export.conversations(), "bench")
    print(sum(d.report.added for d in done))
"""


def write_zip(export: Path, plain: Path, megabytes: float) -> dict[str, int]:
    """The export as ChatGPT hands it over: `plain` (conversations.json) written, then zipped
    into `export` with a user.json; what `write_export` made."""
    made = write_export(plain, megabytes)
    with zipfile.ZipFile(export, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("user.json", '{"id": "user-bench"}')
        archive.write(plain, "conversations.json")
    return made


def run(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run `command` as a child process: its wall time, its CPU time and its own peak RSS
    (`wait4`, so no other child's high-water mark is mixed in), and its standard output."""
    before = os.getloadavg()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        began = time.perf_counter()
        child = subprocess.Popen(command, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - began
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{stderr[-3000:]}")
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),  # less affected by load
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "load_before": [round(x, 2) for x in before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "stdout": stdout,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=200.0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/import-speed.json")
    parser.add_argument("--work", type=Path, help="folder for the export and the data homes")
    args = parser.parse_args()
    work = work_folder(args.work, "charlie-import-speed-")
    charlie = [sys.executable, "-m", "charlie"]
    base = {k: v for k, v in os.environ.items() if not k.startswith("CHARLIE_")}
    base |= {"CHARLIE_USER": "bench", "PYTHONPATH": str(ROOT)}

    began = time.perf_counter()
    plain, export = work / "conversations.json", work / "chatgpt-export.zip"
    made = write_zip(export, plain, args.megabytes)
    result: dict[str, Any] = {
        "machine": machine(),
        "commit": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "export": made | {"zip_bytes": export.stat().st_size},
        "generated_s": round(time.perf_counter() - began, 1),
    }
    print(json.dumps(result["export"]), flush=True)

    def step(name: str, command: list[str], home: str | None = None) -> dict[str, Any]:
        env = base | ({"CHARLIE_HOME": str(work / home)} if home else {})
        done = run(command, env)
        result[name] = done
        shown = {k: v for k, v in done.items() if k != "stdout"}
        print(name, json.dumps(shown), flush=True)
        return done

    step("json_load", [sys.executable, "-c", LOAD, str(plain)])
    listed = step("list", [*charlie, "import", "chatgpt", str(export), "--list", "--json"])
    conversations = len(json.loads(listed.pop("stdout"))["conversations"])
    for home in ("store-only", "full"):
        run([sys.executable, "-c", SETUP], base | {"CHARLIE_HOME": str(work / home)})
    stored = step("store_only", [sys.executable, "-c", STORE_ONLY, str(export)], "store-only")
    added = int(stored.pop("stdout"))
    command = [*charlie, "import", "chatgpt", str(export), "-p", "bench", "--json"]
    full = step("import", command, "full")
    report = json.loads(full.pop("stdout"))
    again = step("again", command, "full")
    second = json.loads(again.pop("stdout"))
    assert report["added"] == added and second["added"] == 0, (report["added"], second["added"])
    result["conversations_imported"] = conversations
    result["messages_imported"] = added
    for name in ("list", "store_only", "import", "again"):
        seconds = result[name]["seconds"]
        result[name]["conversations_per_s"] = round(conversations / seconds, 1)
        result[name]["messages_per_s"] = round(added / seconds, 1)
        result[name]["megabytes_per_s"] = round(made["bytes"] / 1e6 / seconds, 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))


LOAD = """
import json, sys
with open(sys.argv[1], "rb") as handle:
    print(len(json.load(handle)))
"""


if __name__ == "__main__":
    main()
