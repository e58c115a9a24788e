"""Tiny synthetic data sets in the formats of the shared ones, for the benchmarks' smoke runs:
BEIR SciFact (../shared/data/scifact) and the LoCoMo dev split (../shared/data/locomo-dev).
A fresh machine has no shared data; these hold a dozen abstracts and one short talk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ABSTRACTS = {  # id → (title, text)
    "101": (
        "Vitamin D supplementation and bone mineral density in older adults",
        "In a randomised trial of 400 adults over 65, daily vitamin D supplements raised "
        "bone mineral density of the hip and lowered the rate of fractures over two years.",
    ),
    "102": (
        "Statin therapy lowers LDL cholesterol",
        "Patients given statins saw LDL cholesterol fall by a third, and major coronary "
        "events were fewer than in the placebo group after five years.",
    ),
    "103": (
        "Aspirin and the risk of colorectal cancer",
        "Long-term daily aspirin use was associated with a lower incidence of colorectal "
        "cancer and of adenomas in a cohort followed for twenty years.",
    ),
    "104": (
        "Sleep deprivation impairs memory consolidation",
        "Volunteers kept awake for a night recalled fewer learned word pairs; sleep after "
        "learning strengthened hippocampal memory consolidation.",
    ),
    "105": (
        "Aerobic exercise improves insulin sensitivity",
        "Twelve weeks of aerobic exercise training improved insulin sensitivity and glucose "
        "uptake in skeletal muscle of sedentary adults.",
    ),
    "106": (
        "Cigarette smoking and lung cancer",
        "Smokers had a twentyfold higher risk of lung cancer than people who never smoked; "
        "the risk fell steadily in the years after quitting.",
    ),
    "107": (
        "Coffee consumption and chronic liver disease",
        "Drinking two or more cups of coffee a day was linked to lower rates of liver "
        "fibrosis and cirrhosis in patients with chronic liver disease.",
    ),
    "108": (
        "Antibiotics disrupt the gut microbiota",
        "A short course of broad-spectrum antibiotics reduced the diversity of the gut "
        "microbiota, which had not fully recovered six months later.",
    ),
    "109": (
        "Air pollution and childhood asthma",
        "Children living near busy roads, exposed to more nitrogen dioxide, developed "
        "asthma more often than children in cleaner neighbourhoods.",
    ),
    "110": (
        "Obesity as a risk factor for type 2 diabetes",
        "Each unit of body mass index above 25 raised the risk of type 2 diabetes; weight "
        "loss of five percent delayed its onset.",
    ),
    "111": (
        "Dietary salt intake and blood pressure",
        "Cutting dietary salt by half lowered systolic blood pressure in adults with "
        "hypertension within four weeks.",
    ),
    "112": (
        "The Mediterranean diet and cardiovascular events",
        "A Mediterranean diet rich in olive oil and nuts reduced strokes and heart attacks "
        "among people at high cardiovascular risk.",
    ),
}
CLAIMS = {  # id → (claim, split, the abstracts that support it)
    "1": ("Vitamin D supplements reduce fractures in the elderly.", "test", ["101"]),
    "3": ("Statins reduce coronary events.", "test", ["102"]),
    "5": ("Aspirin lowers colorectal cancer incidence.", "test", ["103"]),
    "7": ("Lack of sleep harms memory.", "test", ["104"]),
    "9": ("Exercise training improves insulin sensitivity.", "test", ["105"]),
    "11": ("Quitting smoking lowers the risk of lung cancer.", "test", ["106"]),
    "0": ("Vitamin D raises bone mineral density.", "train", ["101"]),
    "2": ("Statin therapy lowers LDL cholesterol.", "train", ["102"]),
    "4": ("Daily aspirin prevents adenomas.", "train", ["103"]),
    "6": ("Coffee protects the liver.", "train", ["107"]),
    "8": ("Antibiotics reduce the diversity of gut bacteria.", "train", ["108"]),
    "10": ("Salt raises blood pressure.", "train", ["111"]),
}


def write_scifact(folder: Path) -> Path:
    """A BEIR SciFact folder: corpus.jsonl, queries.jsonl, qrels/train.tsv and test.tsv."""
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for doc_id, (title, text) in ABSTRACTS.items():
            out.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as out:
        for claim_id, (claim, _, _) in CLAIMS.items():
            out.write(json.dumps({"_id": claim_id, "text": claim, "metadata": {}}) + "\n")
    for split in ("train", "test"):
        rows = ["query-id\tcorpus-id\tscore"] + [
            f"{claim_id}\t{doc}\t1"
            for claim_id, (_, where, docs) in CLAIMS.items()
            if where == split
            for doc in docs
        ]
        (folder / "qrels" / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


SESSIONS = [
    (
        "1:56 pm on 8 May, 2023",
        [
            ("Ann", "Hi Ben! I finally booked the pottery class for Saturday mornings."),
            ("Ben", "Nice! I have been training for the Lisbon half marathon in October."),
            ("Ann", "My sister Clara is moving to Berlin next month for a new job."),
            ("Ben", "I adopted a grey rescue cat called Pixel last week.", "a grey cat on a sofa"),
            ("Ann", "I am reading a novel about lighthouse keepers in Norway."),
            ("Ben", "My favourite dish is mushroom risotto, I cook it every Friday."),
        ],
    ),
    (
        "10:15 am on 20 June, 2023",
        [
            ("Ann", "The pottery teacher says my first bowl is ready to be glazed."),
            ("Ben", "I ran twenty kilometres on Sunday, the longest run so far."),
            ("Ann", "Clara loves Berlin, she found a flat near the river."),
            ("Ben", "Pixel knocked my coffee off the desk this morning."),
            ("Ann", "We should plan a picnic in the park in July."),
            ("Ben", "Sounds great, I will bring the lemon cake my mother taught me."),
        ],
    ),
]
QUESTIONS: list[dict[str, Any]] = [
    {"question": "What class did Ann book?", "answer": "Pottery", "evidence": ["D1:1"]},
    {"question": "Where is Clara moving?", "answer": "Berlin", "evidence": ["D1:3; D2:3"]},
    {"question": "What is the name of Ben's cat?", "answer": "Pixel", "evidence": ["D:1:4"]},
    {"question": "Which race is Ben training for?", "answer": "Lisbon", "evidence": ["D1:2"]},
    {"question": "What does Ben cook on Fridays?", "answer": "Risotto", "evidence": ["D1:6"]},
    {"question": "What will Ben bring to the picnic?", "answer": "Cake", "evidence": ["D2:6"]},
    {"question": "Where did Ann and Ben meet?", "answer": "At school", "evidence": ["D3:2"]},
]


def locomo_sample(sample_id: str = "conv-1") -> dict[str, Any]:
    """One LoCoMo-shaped conversation: two sessions of six turns, seven questions
    (evidence as the source writes it: "D1:3; D2:3", "D:1:4", and one naming no turn)."""
    conversation: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Ben"}
    for number, (when, turns) in enumerate(SESSIONS, start=1):
        conversation[f"session_{number}_date_time"] = when
        conversation[f"session_{number}"] = [
            {"speaker": turn[0], "dia_id": f"D{number}:{index}", "text": turn[1]}
            | ({"blip_caption": turn[2]} if len(turn) > 2 else {})
            for index, turn in enumerate(turns, start=1)
        ]
    qa = [item | {"category": 1 + n % 5} for n, item in enumerate(QUESTIONS)]
    return {
        "qa": qa,
        "conversation": conversation,
        "event_summary": {},
        "observation": {},
        "session_summary": {},
        "sample_id": sample_id,
    }


def write_locomo(path: Path) -> Path:
    """A locomo-dev.json holding one short conversation."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([locomo_sample()]), encoding="utf-8")
    return path
