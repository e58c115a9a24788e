"""The summary layer after a distillation: rewritten, never appended, and the person's own.

The model rewrites the summary from the old one and the new messages. What it answers is
not taken as it is:

- a sentence a person wrote stays as they wrote it, whatever the model did with it: the
  person's sentences are those of the summary that Charlie did not write itself (each
  revision Charlie writes records its own sentences, `Memory.charlie_sentences`);
- Charlie's part is at most `MOST_SENTENCES` sentences (fewer beside the person's, one at
  least) and `MOST_WORDS` words (one sentence longer than that is left out too: a list run
  together with commas), and no sentence of the summary says the same as another;
- a person's message copied as the model was shown it ("Ruth: Can we …?"), under anyone's
  name, is taken out, and a sentence that opens with a speaker's name and a colon or
  speaks in the first person ("we'll ask for a £1 donation") is left out: a line of the
  conversation is no summary;
- a sentence about the assistant itself (its tools, its notices, "Charlie found that…") or
  naming a tool is left out;
- a sentence the conversation does not back is left out: a number or a name that appears
  in neither the old memory nor the messages, an agreement ("agreed", "decided") that the
  held decisions do not record — most of what it says is about is in none of them ("Clara
  agrees to bring her reading glasses" beside "I'll bring the snacks this time": a word
  or two in common is not the same thing) — or one it credits to someone who said none of
  that decision's messages ("Joe agreed to the picnic" when Joe asked and Ruth settled it);
- a sentence that still says a value this distillation's changes replaced ("… on Sunday the
  13th" once the swap moved to Saturday the 12th) is left out, unless it says the new value
  too: the model wrote it beside the decisions as they were before the changes were judged.

When nothing of the model's sentences is left, Charlie's sentences of the old summary stay,
but for those saying a replaced value or that are a line of the conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from charlie.conversations import ASSISTANT
from charlie.memory import decisions
from charlie.memory.layers import Memory, normalise

MOST_SENTENCES = 3
MOST_WORDS = 80
SAME = 0.8  # content words in common: two sentences that say the same
# A sentence is left out when most of the words of what it is about, and at least this
# many, were never said: invented ("…asks if they can add a food truck"), where a word or
# two of the summary's own ("planning", "weighing up") is how a summary is written.
LEAST_UNSAID = 2
LINE = "a line of the conversation, not a summary of it"
COPIED_CHARS = 20  # "Name: " and this much of their message, word for word: a copied line
FIRST_PERSON = re.compile(  # as written: "US" is no "us"
    r"\b(I|I'm|I'll|I've|I'd|[Mm]e|[Mm]y|[Ww]e|[Ww]e're|[Ww]e'll|[Ww]e've|[Ww]e'd|[Uu]s|[Oo]ur"
    r"|[Ll]et's)\b(?!')"
)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“‘(]?[A-Z0-9])")
CLAIM = re.compile(
    r"\b(agree[sd]?|agreeing|decided?|decides|confirmed|settled|committed|chose|chosen)\b", re.I
)
TOOLISH = re.compile(r"\b[a-z]+_[a-z_]+\b")  # list_projects, search_notes: a tool's name
NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]{2,}\b")


def sentences(text: str) -> list[str]:
    """The sentences of a summary, each one line."""
    flat = normalise(text)
    return [s.strip() for s in SENTENCE_END.split(flat) if s.strip()] if flat else []


def _same(one: str, other: str) -> bool:
    if normalise(one).lower() == normalise(other).lower():
        return True
    return decisions.overlap(one, other) >= SAME


def charlies(written: Memory | None) -> list[str]:
    """The sentences Charlie wrote in its last revision: recorded there, or (a revision
    from before they were recorded) all of its summary."""
    if written is None:
        return []
    if written.charlie_sentences is not None:
        return list(written.charlie_sentences)
    return sentences(written.summary)


def persons(current: str, written: Memory | None) -> list[str]:
    """The sentences of `current` that a person wrote: every one Charlie did not."""
    own = {normalise(s).lower() for s in charlies(written)}
    return [s for s in sentences(current) if normalise(s).lower() not in own]


@dataclass(frozen=True)
class Backing:
    """What the summary may say: the text it may draw names, numbers and words from (the
    project's name, the memory, what the people said), and the decisions that hold (an
    agreement must be one of them, and a person said to agree must have said one of its
    messages)."""

    said: str
    decided: tuple[str, ...]
    deciders: tuple[frozenset[str], ...] = ()  # who said each decision's messages (lower case)
    speakers: frozenset[str] = frozenset()  # everyone who spoke (lower case)
    lines: tuple[tuple[str, str], ...] = ()  # the people's messages: (speaker, text)
    moved: tuple[decisions.Moved, ...] = ()  # the values this run's changes replaced

    def stale(self, sentence: str) -> str:
        """Why `sentence` no longer holds, or "": it says a value that a change of a decision
        replaced, and not what replaced it."""
        for change in self.moved:
            if value := change.stale(sentence):
                return f"says {value}, which a change to a decision replaced"
        return ""

    @cached_property
    def words(self) -> set[str]:
        """The words of what `said` is about, read once for every sentence checked."""
        return decisions.about(self.said)


def why_left_out(sentence: str, backing: Backing) -> str:
    """Why a sentence of the model's summary is not kept, or "" when it is."""
    if _a_line(sentence, backing):
        return LINE
    if stale := backing.stale(sentence):
        return stale
    if re.search(rf"\b{re.escape(ASSISTANT)}\b", sentence, re.I) or TOOLISH.search(sentence):
        return "about the assistant or its tools"
    said = backing.said.lower()
    numbers = set(re.findall(r"\d+", sentence)) - set(re.findall(r"\d+", said))
    if numbers:
        return f"the number {sorted(numbers)[0]} was never said"
    for name in NAME.findall(sentence):
        if name.lower() not in said:
            return f"the name {name} was never said"
    unsaid = _unsaid(sentence, backing.words)
    if len(unsaid) >= LEAST_UNSAID and 2 * len(unsaid) > len(decisions.about(sentence)):
        return f"mostly what nobody said ({', '.join(unsaid)})"
    if CLAIM.search(sentence):
        names = frozenset(decisions.words(" ".join(backing.speakers)))
        told = decisions.about(CLAIM.sub(" ", sentence), names)
        recorded = set().union(*(decisions.about(d) for d in backing.decided))
        if 2 * len(told & recorded) <= len(told):  # mostly what the decisions say, not a word
            return "an agreement no decision records"
        deciders = backing.deciders or tuple(frozenset() for _ in backing.decided)
        for name, clause in _claims(sentence, backing.speakers):
            told = decisions.about(CLAIM.sub(" ", clause))
            held = zip(backing.decided, deciders, strict=True)
            by = [b for d, b in held if told & decisions.about(d)]
            if by and all(b and name not in b for b in by):
                return f"{name.title()} said none of the messages behind that decision"
    return ""


def _claims(sentence: str, speakers: frozenset[str]) -> list[tuple[str, str]]:
    """Who a sentence says agreed or decided, each with what: "Maya agreed to the litter
    pick and Joe agreed to the picnic." → ("maya", "agreed to the litter pick"), ("joe",
    "agreed to the picnic"). A claim with nobody named before it in its clause is the last
    one named's ("Joe asked, then agreed to …")."""
    found: list[tuple[str, str]] = []
    named: list[str] = []
    for part in re.split(r"[,;]\s*|\s+(?:and|but|while|then|so)\s+", sentence):
        claim = CLAIM.search(part)
        before = re.findall(r"[\w'’-]+", part[: claim.start() if claim else None])
        here = [w.lower() for w in before if w[:1].isupper()]  # a name: "Will", not "will"
        named = [w for w in here if w in speakers] or named
        if claim is not None:
            found += [(name, part[claim.start() :]) for name in named]
    return found


def _unsaid(sentence: str, known: set[str]) -> list[str]:
    """The words of what a sentence is about that nothing it may draw on says (`known`):
    "Alice asks if they can add a food truck." when nobody spoke of food or a truck. As
    written."""
    found: list[str] = []
    for word in re.findall(r"[\w'’-]+", CLAIM.sub(" ", sentence)):  # "agrees": CLAIM's
        if decisions.about(word) - known and word.lower() not in found:
            found.append(word.lower())
    return found


def _a_line(sentence: str, backing: Backing) -> bool:
    """Whether a sentence is a line of the conversation rather than a summary of it: it
    opens with a speaker's name and a colon, as the model was shown the messages ("Nadia:
    I need to clear out the spare room anyway" — said by Owen), or it speaks in the first
    person, as a person does and a summary of the household never does ("Entry is free but
    we'll ask for a £1 donation for the food bank.": who is "we"?; "I need to clear out the
    spare room anyway", from a message of an earlier batch), or it asks ("Everyone okay with
    that?": a summary tells what is open, it does not ask it). Told in the third person, a
    sentence said word for word may sum up well ("The stall opens at 10.")."""
    opening = re.match(r"\s*([\w'’ -]{1,40}?)\s*:", sentence)
    if opening and opening.group(1).lower() in backing.speakers:
        return True
    if decisions.ends_asking(sentence):  # "Everyone okay with that?": asked, not summed up
        return True
    return bool(FIRST_PERSON.search(sentence.replace("’", "'")))


def _without_copies(answer: str, lines: tuple[tuple[str, str], ...]) -> tuple[str, list[str]]:
    """`answer` without the people's messages it copies as the model was shown them
    ("Ruth: Can we remove the old bench sign while we're there? It's been hanging off for
    months."): a line of the conversation is not a summary of it. Returns what was taken
    out too."""
    copied: list[str] = []
    speakers = "|".join(sorted({re.escape(speaker) for speaker, _ in lines}))
    for _, text in lines:  # under anyone's name: "Nadia: …" for what Owen said
        said = normalise(text)
        for found in reversed(list(re.finditer(rf"\b(?:{speakers}):\s*", answer, re.I))):
            rest = answer[found.end() :]
            same = next(
                (n for n, (a, b) in enumerate(zip(rest, said, strict=False)) if a != b),
                min(len(rest), len(said)),
            )
            if same < min(len(said), COPIED_CHARS):
                continue
            copied.insert(0, answer[found.start() : found.end() + same].strip())
            answer = answer[: found.start()] + answer[found.end() + same :]
    return normalise(answer), copied


def rewritten(
    answer: str, current: str, written: Memory | None, backing: Backing
) -> tuple[str, list[str], list[dict[str, str]]]:
    """The summary to keep: the person's sentences of `current`, then the model's `answer`
    checked as the module says. Returns the text, Charlie's sentences in it, and what was
    left out (with why), to log with the run."""
    own = persons(current, written)
    room = max(1, MOST_SENTENCES - len(own))
    old = charlies(written)
    answer, copied = _without_copies(answer, backing.lines)
    offered = sentences(answer)
    # What is new first: a model that added to the end of the old summary keeps its news.
    ranked = sorted(offered, key=lambda s: any(_same(s, o) for o in old))
    kept: list[str] = []
    left = [{"summary": line, "why": "a message copied as it was shown"} for line in copied]
    for sentence in ranked:
        why = why_left_out(sentence, backing)
        if not why and any(_same(sentence, other) for other in [*own, *kept]):
            why = "said already"
        if not why and len(kept) >= room:
            why = f"past {MOST_SENTENCES} sentences"
        if not why and len(" ".join([*kept, sentence]).split()) > MOST_WORDS:
            why = f"past {MOST_WORDS} words"  # one sentence that long is a list run together
        if why:
            if {"summary": sentence, "why": why} not in left:  # a model may say it six times
                left.append({"summary": sentence, "why": why})
            continue
        kept.append(sentence)
    kept.sort(key=offered.index)  # in the model's order
    if not kept:  # nothing usable: Charlie's old sentences stay, those still true
        known = {normalise(s).lower() for s in old}
        for sentence in sentences(current):
            if normalise(sentence).lower() not in known:
                continue
            why = LINE if _a_line(sentence, backing) else backing.stale(sentence)
            if why:  # a line an older Charlie let through, or a value just replaced
                left.append({"summary": sentence, "why": why})
            else:
                kept.append(sentence)
    return " ".join([*own, *kept]), kept, left
