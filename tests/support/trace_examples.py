"""One trace step of every kind, and every guard: the contract test checks their JSON, the
browser test renders these same steps."""

from __future__ import annotations

from charlie.trace import GUARDS, Called, Hit, Loaded, Moded, Preloaded, Step, Stopped

HITS = (
    Hit("kitchen/worktops", "Worktop decision", 0.8234, "We decided on oak…"),
    Hit("kitchen/oiling", "Oiling schedule", 0.41, "Every spring…"),
)
# One step of every kind, and every guard (the browser test renders these same steps).
EXAMPLES: list[Step] = [
    Preloaded(("memory",)),
    Preloaded(()),
    Loaded("time", ok=True, tools=("now", "date_add"), ms=0.4),
    Loaded("nope", ok=False, ms=0.1),
    Called("search_notes", {"query": "worktops"}, True, "2 notes", 12.5, hits=HITS, count=2),
    Called("search_notes", {"query": "zebras"}, True, "no notes", 3.0, hits=(), count=0),
    Called("read_note", {"note": "kitchen/worktops"}, True, "read Worktop decision", 1.0),
    Called("create_note", {"title": "x"}, True, "created kitchen/x", 2.0, writes=True),
    Called(
        "search_notes", {"query": "oak?"}, True, "1 note", 4.0, hits=HITS[:1], count=1, by="charlie"
    ),
    Moded("constrained", "auto: the model's tool use failed in 2 answers in a row"),
    Moded("text", "tool_mode = text (set)"),
    *(Called("now", "{oops", False, "refused", 0.1, guard=guard) for guard in GUARDS),
    *(Stopped(guard, f"because of {guard}") for guard in GUARDS),
]
