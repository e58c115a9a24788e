"""LoCoMo conversations as files `charlie import jsonl` reads, with their questions beside them.

For each conversation of the LoCoMo file (`sample_id` such as conv-26) it writes, into the
output folder:

- `<sample_id>.jsonl`: one message per turn, in the import format — `id` the turn's `dia_id`
  ("D1:3"), `speaker` the turn's speaker, `role` "user" for both people, `text` the turn's
  text (plus " [shares a photo: <caption>]" when the turn shares one), and `time` the
  session's date and time ("1:56 pm on 8 May, 2023", taken as UTC) plus 30 seconds for each
  turn before it in the session, so the turns keep their order in time;
- `<sample_id>.queries.jsonl`: one line per question — {"id": "<sample_id>/<n>", "query",
  "evidence": the dia_ids that hold the answer, "category": 1-5}. The source writes a few
  evidence lists as one string ("D8:6; D9:17") or with a stray colon ("D:11:26"); they are
  split and mended, and any that names no turn of the conversation is counted.

The data is licensed for measuring only (CC BY-NC 4.0, see ../shared/data/README.md): the
output belongs outside the repository or in the git-ignored benchmarks/out/.

    .venv/bin/python benchmarks/locomo_jsonl.py [--data FILE] [--out DIR]
    .venv/bin/charlie projects create conv-26
    .venv/bin/charlie import jsonl benchmarks/out/locomo/conv-26.jsonl -p conv-26
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev" / "locomo-dev.json"
DEFAULT_OUT = ROOT / "benchmarks" / "out" / "locomo"
TURN_SPACING = timedelta(seconds=30)
SESSION = re.compile(r"session_(\d+)")
DIA_ID = re.compile(r"D:?(\d+):(\d+)")


def session_time(text: str) -> datetime:
    """ "1:56 pm on 8 May, 2023" as a UTC time."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> str:
    text = str(turn["text"])
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def messages(conversation: dict[str, Any]) -> list[dict[str, str]]:
    """Every turn of every session, sessions in order, in the import format."""
    sessions = sorted(
        (int(match[1]), turns)
        for key, turns in conversation.items()
        if (match := SESSION.fullmatch(key)) and isinstance(turns, list)
    )
    out = []
    for number, turns in sessions:
        start = session_time(conversation[f"session_{number}_date_time"])
        for index, turn in enumerate(turns):
            time = start + index * TURN_SPACING
            out.append(
                {
                    "id": turn["dia_id"],
                    "speaker": turn["speaker"],
                    "role": "user",
                    "text": turn_text(turn),
                    "time": time.isoformat().replace("+00:00", "Z"),
                }
            )
    return out


def evidence_ids(evidence: list[str]) -> list[str]:
    """The dia_ids a question's evidence names, split and mended ("D:11:26" is D11:26)."""
    return [f"D{m[1]}:{m[2]}" for item in evidence for m in DIA_ID.finditer(str(item))]


def queries(sample_id: str, qa: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{sample_id}/{n}",
            "query": item["question"],
            "evidence": evidence_ids(item.get("evidence", [])),
            "category": int(item["category"]),
        }
        for n, item in enumerate(qa, start=1)
    ]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo-dev.json")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    args.out.mkdir(parents=True, exist_ok=True)
    for sample in samples:
        sample_id = sample["sample_id"]
        turns = messages(sample["conversation"])
        asked = queries(sample_id, sample["qa"])
        write_jsonl(args.out / f"{sample_id}.jsonl", turns)
        write_jsonl(args.out / f"{sample_id}.queries.jsonl", asked)
        known = {turn["id"] for turn in turns}
        unknown = sum(e not in known for q in asked for e in q["evidence"])
        print(
            f"{sample_id}: {len(turns)} messages, {len(asked)} questions "
            f"({unknown} evidence ids name no turn)"
        )
    print(f"Wrote {2 * len(samples)} files to {args.out}")


if __name__ == "__main__":
    main()
