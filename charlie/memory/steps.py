"""Distillation in small steps, for a small model (`distill_mode = steps`).

One request that returns the whole memory as JSON asks a lot of a 1–3B model: with
Qwen2.5-Coder-1.5B it kept 3 of 9 planted decisions, applied none of 3 revisions and kept
remarks ("Dinner is pasta, as usual.") as decisions (docs/memory.md). Here each request
asks one small thing, held to a small schema:

1. each person's message on its own, with the two people's messages before it and what
   Charlie said among them (`context`; a question is none and is not asked about, nor one
   that opens with one: "Date? I can do the 6th." offers, but a short answer before a
   question of its own is asked about as that answer: `decisions.reply_before_asking`): what
   kind of message it is — a question, an idea nobody settled, small talk, only news, or
   else it settles something. One that settles something is held as a decision in the
   person's own words, unless it leans on the messages before it ("Yes, let's do that."):
   then in the model's sentence, checked (`_worded`) — or, when that sentence says nothing
   the message before it did not, that one is a decision, and the model keeps it unchanged
   beside the reply, the reply agrees with it: one decision with both messages behind it,
   not two lines (`_agrees`);
2. the summary, rewritten from the old one and the people's new messages (what Charlie
   said is left out), with the decisions that hold;
3. which of the people's statements are worth quoting, by number: a quote is then the
   message's own words, verbatim by construction (a question is never offered).

Whether a person's statement changes a held decision is asked afterwards, for both forms
alike, with the old decision beside the message (`judge`, used by
`charlie.memory.decisions.changes`): the model writes the decision as it stands after the
message, and that rewrite is the new decision when the message was not taken for one.

The answers are put together in the whole form's shape (`charlie.memory.distill`), so the
same checks and the same merge follow. A step whose answer is unusable is asked once more
with the reason; a second failure fails the distillation, and the memory stays as it was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple, TypeVar

from pydantic import BaseModel, Field, ValidationError

from charlie.conversations import ASSISTANT, Message
from charlie.errors import DistillationError, LLMRejected
from charlie.jsonvalue import JSONObject
from charlie.llm.client import LLMClient, json_object
from charlie.llm.messages import ChatMessage
from charlie.memory import decisions
from charlie.memory.layers import Memory, normalise

CONTEXT_MESSAGES = 2  # people's messages shown before the one judged ("yes, let's" needs them)
MOST_QUOTES = 1
QUOTE_WORDS = 5  # a shorter message is not offered as a quote
QUOTE_CHARS = 300  # a longer message is quoted up to here, at a sentence or a word
ORDINALS = frozenset(
    decisions.words("first second third fourth fifth sixth seventh eighth ninth tenth")
)  # values in words: "first Sundays mine, third Sundays yours" (`_lost`)
DECISION_CHARS = 200  # a decision is its message, cut here at a sentence or a word
# The longest answer of each step, in tokens: a small model held to a schema can run on
# (a string that repeats, or whitespace) until the answer cap; a step needs a few words.
STEP_TOKENS = {"_Decision": 120, "_Change": 96, "_Summary": 200, "_Quotes": 48}

DECISION_PROMPT = """\
A message from a household's conversation about their plans. Which is it?
question: it asks something.
idea not settled: a suggestion with "maybe", "could we", "how about", nobody settled it.
reminder or errand: "don't forget…", "remember to…", a chore someone will do anyway.
small talk or feeling: thanks, jokes, opinions, how someone feels.
only news: something that already happened, with nothing about what comes next.
settles something: anything else — it says how something will be: a choice, a time, a
place, a price, a rule, who does what, a plan told as a fact, a change to the plan, or an
answer to what was asked.
Examples: "The party starts at 4, at Gran's." settles something. "Let's go with the red one."
settles something. "Fine, Friday then." settles something. "Maybe a barbecue?" idea not
settled. "Remember to bring the chairs in." reminder or errand. "We saw the new flat
yesterday." only news. "Ha, typical!" small talk or feeling.
what: for "settles something", what it settles in one short sentence with its names,
numbers and dates; else empty.
Answer with a JSON object only: {"kind": "...", "what": "..."}"""
# Asked "does this record a decision?" (yes or no), Qwen2.5-Coder-1.5B said yes to 51 of 84
# decisions and to 17 of 62 errands, remarks and ideas (the tune part of
# benchmarks/memory_fidelity.py, each message with the two before it). Made to pick what
# else a message is, with settling as the rest: 55 and 13. With a plan told as a fact
# ("Setup is at 9am"), a kind for reminders and errands, and short examples: 78 and 34.
# It keeps more errands ("I'll clear the shed") than before: a decision missed cannot be
# revised or kept, an errand held is one line a person deletes.
SETTLES = "settles something"
QUESTION = "question"
IDEA = "idea not settled"

CHANGE_PROMPT = """\
You compare an earlier decision of a household with a new message. Write the earlier
decision as it stands after the new message: copy it word for word when the message does
not change it (a message about something else, a detail, a task, a reminder or a remark
beside it changes nothing); rewrite it with the new value only when the message gives the
very same thing another value or calls it off.
Answer with a JSON object only: {"now": "..."}"""

# Two more ways to ask the judge, each worded its own way: a change holds only when all
# three looks make it (`LOOKS`). Qwen2.5-Coder-1.5B, on the tune part's planted
# revisions and the traps said after a decision (benchmarks/judge_step.py, 22 and 46): the
# judge alone rewrote 19 revisions and 5 trap pairs; all three looks, 19 and 1; two of the
# three would make all 22 and 9 — but end to end (memory_fidelity.py), a revision message
# is asked about every held decision it shares a word with, and two looks of three let it
# change the wrong one first ("School just emailed, the field gates don't open till 10…"
# retired "…the school fair is three weeks on Saturday…", and "Setup is at 9am" stayed);
# on four tune conversations, 2 of 5 revisions applied and 2 traps retired a decision.
# Asked "is it still the plan, yes or no?", the model said yes to every one.
PLAN_NOW_PROMPT = """\
Someone in a household has just sent a message. Below it is a decision the household made
earlier. Write what the household's plan for that very thing is now, in one short sentence
in the decision's own words: the same sentence when the message does not change it.
Answer with a JSON object only: {"now": "..."}"""

PLAN_INSTEAD_PROMPT = """\
A household made a decision earlier; then someone sent a new message. Write what the
household's plan for that very thing is now, in one short sentence in the decision's own
words. When the message says the plan cannot go ahead as it was (someone rang, a place is
shut or full, a slot is gone) and what happens instead, or settles another value for the
very same thing, write the new plan; otherwise the same sentence as the decision.
Answer with a JSON object only: {"now": "..."}"""
RECHECKS = (PLAN_NOW_PROMPT, PLAN_INSTEAD_PROMPT)
LOOKS = (CHANGE_PROMPT, *RECHECKS)

SUMMARY_PROMPT = """\
You keep the summary of a household's conversation: what it is about and where it stands,
for someone arriving fresh. Rewrite it from the current summary and the new messages in at
most 3 short sentences. Keep what still holds and bring in what is new: plans, decisions,
open questions. Say only what the people said: "agreed" or "decided" only for the
decisions listed. Leave out small talk and the assistant; never repeat a sentence, never
just add to the end of the old summary.
Answer with a JSON object only: {"summary": "..."}"""

QUOTE_PROMPT = """\
From a household's conversation, pick the one message most worth remembering in the
speaker's own words, if any: a saying, a strong feeling, a vivid way of putting something.
Not decisions, plans, reminders, news or small talk. Most messages are not worth quoting:
an empty list is a good answer.
Answer with a JSON object only: {"quotes": [message numbers]}"""


class _Decision(BaseModel):
    kind: Literal[
        "question",
        "idea not settled",
        "reminder or errand",
        "small talk or feeling",
        "only news",
        "settles something",
    ]
    what: str = ""

    @property
    def decision(self) -> bool:
        return self.kind == SETTLES


class _Change(BaseModel):
    now: str  # the earlier decision as it stands after the message, in the model's words


class _Summary(BaseModel):
    summary: str = Field(min_length=1)


class _Quotes(BaseModel):
    quotes: list[int] = Field(default_factory=list)


def _schema(model: type[BaseModel]) -> dict[str, object]:
    schema = model.model_json_schema()
    schema["required"] = list(schema["properties"])  # strict: every key written
    schema["additionalProperties"] = False
    schema.pop("title", None)
    for value in schema["properties"].values():
        value.pop("title", None)
        value.pop("default", None)
    if "quotes" in schema["properties"]:
        schema["properties"]["quotes"]["maxItems"] = MOST_QUOTES
    return schema


Answer = TypeVar("Answer", bound=BaseModel)


@dataclass
class Asker:
    """Asks the steps' questions: as constrained JSON while the server takes
    `response_format`, else plainly; how many tries the hardest step took."""

    llm: LLMClient
    structured: bool = True
    attempts: int = 1

    def ask(
        self,
        model: type[Answer],
        system: str,
        user: str,
        check: Callable[[Answer], None] | None = None,
    ) -> Answer:
        prompt: list[ChatMessage] = [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]
        content = self._chat(prompt, model)
        try:
            return self._read(model, content, check)
        except DistillationError as first:
            repair: list[ChatMessage] = [
                *prompt,
                {"role": "assistant", "content": content},
                {
                    "role": "user",
                    "content": f"That answer was not usable: {first}. Reply again with only "
                    "the corrected JSON object.",
                },
            ]
            self.attempts = 2
            try:
                return self._read(model, self._chat(repair, model), check)
            except DistillationError as second:
                step = model.__name__.strip("_").lower()
                raise DistillationError(
                    f"The model's answer to the {step} step was not valid twice ({first}; "
                    f"then {second}). The memory was left as it was; it will be tried again "
                    "after the next message."
                ) from second

    def _chat(self, prompt: list[ChatMessage], model: type[BaseModel]) -> str:
        llm = self.llm.with_max_tokens(min(self.llm.max_tokens, STEP_TOKENS[model.__name__]))
        if self.structured:
            name = model.__name__.strip("_").lower()
            form = {
                "type": "json_schema",
                "json_schema": {"name": name, "strict": True, "schema": _schema(model)},
            }
            try:
                return llm.chat(prompt, response_format=form, temperature=0).content
            except LLMRejected:
                self.structured = False  # the server does not take response_format
        return llm.chat(prompt, temperature=0).content

    @staticmethod
    def _read(model: type[Answer], content: str, check: Callable[[Answer], None] | None) -> Answer:
        found = json_object(content)
        if found is None and model is _Summary:
            found = _cut_summary(content)
        if found is None:
            raise DistillationError(f"no JSON object in the answer ({content[:120]!r})")
        try:
            answer = model.model_validate(found)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "the answer"
            raise DistillationError(f"field '{where}': {err['msg']}") from exc
        if check is not None:
            check(answer)
        return answer


CUT_SUMMARY = re.compile(r'^\s*\{\s*"summary"\s*:\s*"((?:[^"\\]|\\.)*)')


def _cut_summary(content: str) -> JSONObject | None:
    """A summary the answer cap cut off mid-string (a small model writes on and on): its
    whole sentences so far — or, when it is one run-on sentence, its clauses so far."""
    started = CUT_SUMMARY.match(content)
    if started is None:
        return None
    text = started.group(1)
    try:
        text = json.loads(f'"{text.rstrip(chr(92))}"')
    except json.JSONDecodeError:
        return None
    sentences = re.findall(r".*?[.!?](?=\s|$)", text, re.S)
    if sentences:
        return {"summary": "".join(sentences).strip()}
    clause = text[: max(text.rfind(","), text.rfind(";"))].strip()  # one run-on sentence
    return {"summary": clause + "…"} if re.search(r"\w", clause) else None


def line(message: Message) -> str:
    """A message as the model is shown it: `[number] speaker: text`."""
    return f"[{message.id}] {message.speaker}: {message.content}"


class Taken(NamedTuple):
    """A decision the decision step took: the message that states it, the decision in a
    sentence, and the replies that agreed to it adding nothing (`_agrees`)."""

    message: Message
    text: str
    agreed: tuple[Message, ...] = ()


def _decided(
    asker: Asker,
    messages: list[Message],
    earlier: list[Message] | None = None,
    settled: frozenset[int] = frozenset(),
) -> list[Taken]:
    """The decisions the people's messages state. `earlier`: the messages just before
    these, already distilled — shown as context only (the question a first message answers
    may have been asked before the batch began). `settled`: the messages the decisions held
    came from (an agreement with one of them settles nothing new: `_opens`)."""
    found: list[Taken] = []
    earlier = earlier or []
    shown = [*earlier, *messages]
    kinds: dict[int, str] = {}
    for at, said in enumerate(shown):
        if at < len(earlier) or said.role != "user":
            continue
        message, replying = said, _asks(said)
        if replying:  # judged by the answer it opens with, if any: "Works for me! Can I …?"
            message = replace(said, content=decisions.reply_before_asking(said))
            if not message.content:
                continue
        before = context(shown, at)
        answer = _kind(asker, message, before)
        kinds[message.id] = answer.kind
        if not answer.decision:
            continue
        taken = {t.message.id: n for n, t in enumerate(found)}
        answered = decisions.answered(message, shown[:at]) if _leans(message) else None
        agrees = before and _leans(message) and not _own(answer.what or message.content, message)
        agrees = agrees or replying  # an answer before a question must answer something
        if agrees and not (answered and _opens(asker, answered, shown, kinds, {*settled, *taken})):
            continue
        worded = _worded(answer.what, message, before)
        proposed = taken.get(answered.id) if answered is not None else None
        if proposed is not None and _agrees(asker, found[proposed], message, worded):
            # "Trevarrow is lovely, let's go there." after the proposal: one decision
            found[proposed] = found[proposed]._replace(agreed=(*found[proposed].agreed, message))
            continue
        found.append(Taken(message, worded))
    return found


def context(shown: list[Message], at: int) -> list[Message]:
    """The messages shown before `shown[at]` when it is judged: back to the
    `CONTEXT_MESSAGES`-th person's message, with what Charlie said among them. Charlie
    answers every message, so two messages back would show one person's."""
    start, people = at, 0
    while start > 0 and people < CONTEXT_MESSAGES:
        start -= 1
        people += shown[start].role == "user"
    return shown[start:at]


def _agrees(asker: Asker, proposed: Taken, reply: Message, worded: str) -> bool:
    """Whether a reply that leans on the decision just taken from the message before it only
    agrees with it: the decision it states says nothing that message did not (every word of
    what it is about and every value is in it), and the model, shown the decision beside the
    reply, copies it unchanged (the judge of a change: "No, not Saturday." would say the
    same words and call it off). Then it is one decision with both messages behind it, not a
    second line a later change would have to find too. A reply with a value or a word of
    its own ("Sunday it is.", "Fine, but we bring the gazebo.") states its own."""
    before = proposed.message
    numbers, named = _values(worded)
    said_numbers, said_named = _values(before.content)
    speakers = frozenset(decisions.words(before.speaker))
    if not (numbers <= said_numbers and named <= said_named):
        return False
    if not decisions.about(worded, speakers) <= decisions.words(before.content):
        return False
    try:
        now = _rewrite(asker, proposed.text, reply)
    except DistillationError:
        return False  # unsure: the reply keeps its own line, as any decision does
    names = speakers | frozenset(decisions.words(reply.speaker))
    return not decisions.rewritten(proposed.text, now, reply.content, names)


def _kind(asker: Asker, message: Message, before: list[Message]) -> _Decision:
    context = "\n".join(f"{m.speaker}: {m.content}" for m in before)
    user = (f"Just before (context only):\n{context}\n\n" if context else "") + (
        f"The message:\n{message.speaker}: {message.content}"
    )
    return asker.ask(_Decision, DECISION_PROMPT, user)


def _leans(message: Message) -> bool:
    """Whether a message leans on the ones before it for what it settles (`decisions.leans`)."""
    return decisions.leans(message.content, message.speaker)


def _own(worded: str, message: Message) -> bool:
    """Whether a decision's sentence takes something from its message itself: a word of
    what it is about, not a word of agreeing ("agreed", "yes") — or the message tells a
    value (a day, a number) of its own. Not so for a message that only agrees with the one
    before ("seconded" → "nothing over 400 pages")."""
    said = message.content
    return bool(decisions.words(worded) & decisions.words(said) - decisions.TELLING) or any(
        _values(said)
    )


def _opens(
    asker: Asker,
    answered: Message,
    shown: list[Message],
    kinds: dict[int, str],
    settled: frozenset[int] | set[int],
) -> bool:
    """Whether agreeing with `answered` settles something: it asked or put forward an idea a
    person had ("How about Sunday?" → "yes, let's"). Agreeing with a decision already
    stated adds none ("We're capping it at 90 guests." → "Mom will survive."), and accepting
    the assistant's offer is no decision of the household ("Shall I add a reminder?" → "yes
    pls"); nor is agreeing with a remark or news."""
    if answered.role != "user" or answered.id in settled:
        return False
    if _asks(answered):
        return True
    if answered.id not in kinds:  # from before the batch: asked now
        at = shown.index(answered)
        kinds[answered.id] = _kind(asker, answered, context(shown, at)).kind
    return kinds[answered.id] in (QUESTION, IDEA)


def _asks(message: Message) -> bool:
    """A message that asks, at its end or first: what follows an opening question is a
    proposal or an offer ("Where's he sleeping? I vote crate.", "Date? I can do the 6th."),
    not what was settled — an answer, another message, settles it."""
    first = re.split(r"(?<=[.!?])\s+", message.content.strip(), maxsplit=1)[0]
    return decisions.is_question(message) or first.endswith("?")


def _worded(what: str, message: Message, before: list[Message]) -> str:
    """A decision in the person's own words, the message cut short — unless it leans on the
    messages before it for what it settles ("Yes, let's do that.", "Oak, no question."): then
    the model's sentence, when that one kept the message's values (`_lost`) and says nothing
    nobody said (`_invented`: "Charlie settled on plot 23" for "First earlies in the top
    bed, Charlotte potatoes. Settled."). The small model's own sentences for the others lost
    what was decided ("Isla will love it" for "Oak it is, Isla will love it.")."""
    said = message.content
    if not _leans(message):
        return _cut(said)
    worded = normalise(what)
    if not re.search(r"\w", worded) or _lost(worded, said) or _invented(worded, message, before):
        return _cut(said)
    return worded


def _invented(worded: str, message: Message, before: list[Message]) -> bool:
    """Whether a decision's sentence holds a word of what it is about that neither the
    message nor the messages just before it said, or names the assistant, who decides
    nothing, when the message does not."""
    said = decisions.words(" ".join([message.content, *(m.content for m in before)]))
    speakers = decisions.words(" ".join(m.speaker for m in [message, *before] if m.role == "user"))
    mine = decisions.words(worded)
    if decisions.words(ASSISTANT) & mine - decisions.words(message.content):
        return True
    return bool(decisions.about(worded, frozenset(speakers)) - said)


def _values(text: str) -> tuple[set[str], set[str]]:
    """The numbers in a text ("2pm" holds 2), and its days and months."""
    named = {w for w in decisions.words(text) if decisions.VALUE.match(w) and w.isalpha()}
    return set(re.findall(r"\d+", text)), named


def _ordinals(text: str) -> set[str]:
    """The ordinals a text says in words ("first Sundays"): values, as "the 16th" is."""
    return decisions.words(text) & ORDINALS


def _lost(worded: str, said: str) -> bool:
    """Whether a decision's sentence left out all the numbers of its message, all its days
    and months, or all its ordinals ("the car repair schedule" for "the car goes in on
    Friday 5 March", "Thursday instead of Tuesday" for "Thursday 11 December, not Tuesday 9
    December", "the Sunday lunch rota" for "first Sundays mine, third Sundays yours")."""
    kept = (*_values(worded), _ordinals(worded))
    told = (*_values(said), _ordinals(said))
    return any(saying and not saying & have for saying, have in zip(told, kept, strict=True))


def _cut(text: str, size: int = DECISION_CHARS) -> str:
    text = normalise(text)
    if len(text) <= size:
        return text
    sentences = re.split(r"(?<=[.!?])\s+", text)
    if len(sentences[0]) <= size:
        kept = sentences[0]
        for sentence in sentences[1:]:
            if len(kept) + 1 + len(sentence) > size:
                break
            kept += " " + sentence
        return kept
    cut = text[:size]
    return cut[: cut.rfind(" ")] if cut.rfind(" ") > size // 2 else cut


def judge(asker: Asker) -> decisions.Judge:
    """The model as the judge of a change (`charlie.memory.decisions.changes`): shown the
    earlier decision beside the message (and the message it answers), it writes the
    decision as it stands after the message, and Charlie compares that with the decision
    (`decisions.rewritten`). A small model asked "does this change it?" says yes to nearly
    anything, and picks the first of any choices offered; asked to write the decision out,
    it copies it when nothing changed and puts the new value in when something did. It is
    asked three ways (`LOOKS`), each only while every look before made the change, and a
    change holds when every look makes it: one wording's slip retires nothing."""

    def changes(change: decisions.Change) -> str | None:
        old, message, said = change.old.text, change.message, change.message.content
        made: list[str] = []  # the rewrites that change it, in the looks' order
        for prompt in LOOKS:  # each asked only while every look before made the change
            try:
                now = _rewrite(asker, old, message, change.asked, prompt)
            except DistillationError as exc:
                kept_as = f"an answer about it that was unusable ({exc})"
                break
            if not decisions.rewritten(old, now, said, change.names):
                if not made:
                    return None  # the model's answer: no change
                kept_as = repr(now)
                break
            made.append(now)
        else:
            return made[0]
        raise decisions.Kept(
            f"kept: {len(made)} of the model's {len(made) + 1} looks changed it"
            + (f" (as {made[0]!r})" if made else "")
            + f"; look {len(made) + 1} answered {kept_as}"
        )

    return changes


def _rewrite(
    asker: Asker,
    old: str,
    message: Message,
    asked: Message | None = None,
    prompt: str = CHANGE_PROMPT,
) -> str:
    """The model's rewrite of the decision `old` as it stands after `message` (and the
    question it answers, `asked`): a copy when the message does not change it. `prompt`:
    the judge's own question, or one of its second looks (`RECHECKS`)."""
    lines = [f"Earlier decision: {old}"]
    if asked is not None:
        how = "asked" if decisions.is_question(asked) else "said"
        lines.append(f"Just before, {asked.speaker} {how}: {asked.content}")
    lines.append(f"New message from {message.speaker}: {message.content}")
    return asker.ask(_Change, prompt, "\n".join(lines)).now


def _quotes(asker: Asker, messages: list[Message]) -> list[dict[str, str]]:
    people = {
        m.id: m
        for m in messages
        if m.role == "user" and "?" not in m.content and len(m.content.split()) >= QUOTE_WORDS
    }
    if not people:
        return []
    user = "Messages, each as [number] speaker: text:\n" + "\n".join(
        line(m) for m in people.values()
    )
    chosen = asker.ask(_Quotes, QUOTE_PROMPT, user).quotes
    picked = [people[n] for n in dict.fromkeys(chosen) if n in people][:MOST_QUOTES]
    return [{"speaker": m.speaker, "text": _cut(m.content, QUOTE_CHARS)} for m in picked]


def ask(
    llm: LLMClient,
    current: Memory,
    messages: list[Message],
    check_summary: Callable[[str], None],
    earlier: list[Message] | None = None,
) -> tuple[dict[str, object], Asker]:
    """The distillation of `messages` into `current`, asked step by step, in the whole
    form's shape: {"summary", "decisions", "superseded", "quotes"}. `earlier`: the messages
    just before, shown as context only. Which held decisions the new ones change is judged
    afterwards, for both forms alike (`judge`)."""
    asker = Asker(llm)
    settled = frozenset(s for d in current.decisions for s in d.sources)
    found = _decided(asker, messages, earlier or [], settled)
    layers = {
        "summary": current.summary,
        "decisions that hold": [*current.texts, *(t.text for t in found)],
    }
    people = [m for m in messages if m.role == "user"]  # what Charlie said is not summed up
    user = (
        "Current memory:\n"
        + json.dumps(layers, ensure_ascii=False, indent=1)
        + "\n\nNew messages, each as [number] speaker: text:\n"
        + ("\n".join(line(m) for m in people) or "(none from the people)")
    )
    summary = asker.ask(_Summary, SUMMARY_PROMPT, user, lambda s: check_summary(s.summary))
    decided = {m.id for t in found for m in (t.message, *t.agreed)}  # in memory already
    answer: dict[str, object] = {
        "summary": summary.summary,
        "decisions": [
            {"text": t.text, "messages": [t.message.id, *(m.id for m in t.agreed)]} for t in found
        ],
        "superseded": [],
        "quotes": _quotes(asker, [m for m in messages if m.id not in decided]),
    }
    return answer, asker
