"""The guarded tool loop of one answer: an explicit `while` with a hard limit, in three modes.

- native / text: the model is offered the tools (in the request, or described in the
  prompt) and calls them as it likes; calls written as text are read by `charlie.llm.textcalls`
  and never shown. A call Charlie cannot read, or one naming a tool that does not exist,
  gets one retry that tells the model what went wrong and the real names.
- constrained: each step is asked as JSON held to a schema (`charlie.chat.constrained`) —
  which tool and its arguments, or `answer`, and in the first step whether the message
  asks or only tells — the tool runs, and the answer is then asked in plain text; a
  message that only tells is acknowledged, without what was looked up for it.

Before the model speaks, where the mode calls for it (`Choice.looks_up`) and the message
asks about what the household knows, Charlie looks things up itself (`charlie.chat.lookup`):
the best notes and earlier messages for the message go into the request, fenced as data,
within the budget, and the trace shows them as Charlie's own look-up. The model can still
ask for more.

Whatever the mode, what the person sees is the answer only: no tool-call markup and no
stray HTML tag on any path; nothing that is not an answer — a tool's own note, Charlie's
own prompt, an earlier reply said again (`charlie.chat.parrots`) — which is asked for again
once; and after a write tool did its work, never an error but what was done. How the tools
went is recorded for `auto` (`charlie.llm.toolmode`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Generator, Iterator
from datetime import UTC, datetime

from charlie import conversations, trace
from charlie.chat import constrained, dates, lookup, parrots
from charlie.chat.events import Event, Notice, Token, TraceEvent
from charlie.chat.prompt import (
    ACKNOWLEDGE,
    AGAIN,
    ASKS_OR_TELLS,
    FINAL_ANSWER,
    FOUND,
    STEP_INSTRUCTION,
    TOOL_FIRST,
    UNREADABLE,
    own_words,
)
from charlie.conversations import Channel
from charlie.errors import (
    LLMBadResponse,
    LLMContextExceeded,
    LLMError,
    LLMRejected,
    LLMStreamError,
)
from charlie.home import Home
from charlie.jsonvalue import JSONObject
from charlie.llm import budget, toolmode
from charlie.llm.budget import Budget
from charlie.llm.client import Completion, Delta, LLMClient, ThinkFilter, ToolCall
from charlie.llm.fence import escape, fence
from charlie.llm.htmltags import TagFilter
from charlie.llm.loops import LoopGuard
from charlie.llm.messages import ChatMessage, ToolSchema
from charlie.llm.textcalls import MarkupFilter, Reading
from charlie.memory.decisions import ends_asking
from charlie.tools import builtin as toolkit
from charlie.tools.registry import META_TOOL, Registry, Tool, ToolContext, run_tool
from charlie.users import User

MAX_ITERATIONS = 6
DAY_TOOLS = frozenset({"days_between", "weekday", "date_add"})  # Charlie's day arithmetic
LOOKUP_TOOLS = frozenset({"search_notes", "search_conversation"})  # … and its look-up
TOOLS_SHARE = 4  # the tool schemas may take at most a quarter of the prompt budget
LOOKUP_SHARE = 6  # Charlie's own look-up: at most a sixth of the prompt budget
QUESTION = re.compile(
    r"\?|^\s*(what|when|where|who|whom|which|why|how|did|do|does|is|are|was|were|have|has|"
    r"can|could|should|remind|tell|list|show|find|remember)\b",
    re.IGNORECASE,
)


class ToolLoop:
    """One answer's tool use, in the mode `choice` gives."""

    def __init__(
        self,
        home: Home,
        llm: LLMClient,
        channel: Channel,
        user: User,
        registry: Registry,
        max_iterations: int,
        within: Budget | None = None,
        choice: toolmode.Choice | None = None,
    ) -> None:
        self.home = home
        self.llm = llm
        self.within = within or Budget.of(budget.DEFAULT_WINDOW, llm.max_tokens)
        self.choice = choice or toolmode.Choice("native", "set by the caller")
        self.looped = False  # the reply started repeating itself and was stopped
        self.capped = False  # the reply reached max_tokens (finish_reason "length")
        self.registry = registry
        self.max_iterations = max_iterations
        self.context = ToolContext(home, channel, user)
        self.allowed_writes = toolkit.allowed_write_tools(channel)
        self.trace: list[trace.Step] = []
        self.reply = ""
        self.prompt_tokens: int | None = None
        self.llm_seconds = 0.0
        # How the model's own tool use went, for `auto` (`toolmode.record_answer`).
        self.outcome: toolmode.Outcome = "none"
        self.miss = ""
        self.done: list[str] = []  # what the write tools did, in their own words
        self.tells = False  # the first step said the message tells and asks nothing
        self._known = {name: list(t.parameters["properties"]) for name, t in registry.tools.items()}
        self._known[META_TOOL] = ["category"]
        # What the answer must not be (`charlie.chat.parrots`), and what was taken out of it.
        self._echoes = parrots.Known()
        self._taken_out: list[parrots.Kind] = []
        self._repeated = ""  # the earlier reply an answer of this turn was, word for word
        self._lookup = ""  # Charlie's own look-up, among the findings
        self._ran: set[str] = set()  # the tools Charlie ran itself for this message

    def _event(self, step: trace.Step) -> TraceEvent:
        self.trace.append(step)
        if isinstance(step, trace.Called) and step.by == "charlie" and step.ok and step.count != 0:
            self._ran.add(step.name)  # (a search that found nothing the model may try again)
        return TraceEvent(step)

    # ------------------------------------------------------------ which tools

    def _offered(self, category: str) -> list[Tool]:
        return [
            tool
            for tool in self.registry.in_category(category)
            if not tool.writes or tool.name in self.allowed_writes
        ]

    def _tools(self, active: list[str]) -> list[ToolSchema]:
        """The schemas offered: `load_tools` and the active categories' tools, trimmed to
        what fits a share of the prompt (the first categories, the suggested ones, win)."""
        tools = [self.registry.meta_tool()]
        room = self.within.prompt // TOOLS_SHARE
        for category in active:
            more = [tool.schema() for tool in self._offered(category)]
            if tools[1:] and budget.tools_tokens(tools + more) > room:
                break
            tools += more
        return tools

    # ------------------------------------------------------------ the answer

    def _with_findings(
        self, messages: list[ChatMessage], current: int, instruction: str = ""
    ) -> list[ChatMessage]:
        """The request with what was found for this message at the end of the system prompt
        (where a small model takes it as given, and the prompt's cached start stays the
        same), and any instruction after the person's words. Nothing of it is stored."""
        sent = list(messages)
        findings = [f for f in self._findings if not (self.tells and f == self._lookup)]
        if findings:
            found = "\n\n".join(findings)
            sent[0] = {
                **self._system,
                "content": f"{self._system['content']}\n\n{FOUND.format(found)}",
            }
        if instruction:
            content = self._asked.get("content")
            if isinstance(content, list):  # with images: the instruction as a text part
                sent[current] = {
                    **self._asked,
                    "content": [*content, {"type": "text", "text": instruction}],
                }
            else:
                sent[current] = {**self._asked, "content": f"{content or ''}\n\n{instruction}"}
        return sent

    def run(self, messages: list[ChatMessage], text: str) -> Iterator[Event]:
        current = len(messages) - 1  # the person's message: this turn starts there
        self._system, self._asked = messages[0], messages[current]
        self._findings: list[str] = []
        self._mistakes: list[dates.Fact] = []
        self._repeated = ""
        self._echoes = parrots.Known(
            notes=tuple(self._loaded_line(c) for c in self.registry.categories),
            own=parrots.sentences(own_words()),
            earlier=parrots.earlier_replies(_replies_to_others(messages, current)),
        )
        # Tools were offered in this answer (natively, or described in the prompt as text
        # and constrained modes do): a call-shaped JSON is a call attempt, even in the
        # answer the model is made to give without tools.
        self._tools_offered = self.choice.mode != "native"
        active = self.registry.suggest(text)
        yield self._event(trace.Preloaded(tuple(active)))
        if self.choice.mode != "native":  # the usual way needs no word in the trace
            yield self._event(trace.Moded(self.choice.mode, self.choice.reason))
        if self.choice.looks_up and _asks(text, active):
            yield from self._look_up(messages, current, text)
        yield from self._reckon(text)  # last: nearest the question, after what was looked up
        if self.choice.mode == "constrained":
            yield from self._constrained(messages, current, active)
        else:
            messages[:] = self._with_findings(messages, current)  # the day arithmetic done
            yield from self._free(messages, current, active)
        yield from self._settle(messages, current)

    # ------------------------------------------------------------ an answer, or not

    def _settle(self, messages: list[ChatMessage], current: int) -> Iterator[Event]:
        """The reply once complete: what is not an answer taken out of it (a tool's note,
        Charlie's own prompt: `charlie.chat.parrots`). A reply that was nothing else, or
        only an earlier reply said again, is asked for once more, with a word of why — an
        earlier reply said again, with that reply out of the conversation shown, so there is
        nothing to copy; a second such reply ends the turn saying the model could not
        answer. A reply that ends empty after a write tool did its work is what was done
        ("Recorded the decision: …"): the person is never told it failed when it worked."""
        for asked_again in (False, True):
            if self.looped:
                return
            verdict = self._verdict()
            if verdict is None:
                break
            kind, why = verdict
            repeated = (self.reply or self._repeated) if kind == "repeat" else ""
            self.reply = ""
            yield self._event(trace.Stopped("not_an_answer", why))
            if asked_again:
                if self.done:
                    break
                raise LLMBadResponse(
                    f"The model could not answer: {why}, twice. Rephrase your message, or "
                    "try another model."
                )
            self._taken_out = []
            again, at = self._with_findings(messages, current, AGAIN[kind]), current
            if repeated:  # asked without the reply it copied: a small model copies what it sees
                kept = [m for m in again[:current] if not _says(m, repeated)]
                again, at = [*kept, *again[current:]], len(kept)
            completion, reading = yield from self._stream(again, at, None)
            if completion is None:
                return  # stopped: the reply looped
            yield from self._show(reading.text)
            if reading.markup:
                yield self._event(trace.Stopped("ignored_calls", "a tool call in the answer"))
        if not self.reply.strip() and self.done:
            yield from self._show(" ".join(_sentence(done) for done in self.done))
        # A mistake Charlie found in the message (a date given the wrong weekday) is said,
        # when the answer went along with it: a small model ignores what it was told.
        for fact in self._mistakes if self.reply.strip() else ():
            if not re.search(rf"\b{re.escape(fact.unless)}\b", self.reply, re.IGNORECASE):
                yield from self._show(fact.note)

    def _verdict(self) -> tuple[parrots.Kind, str] | None:
        """Takes out of the reply any tool's note and any sentence of Charlie's own prompt
        it gives back; says what it was if nothing else is left, or if it only repeats an
        earlier reply. (What streamed before was shown: the stored reply is the truth, and
        the front ends show that.)"""
        reply = self.reply
        kept = parrots.without_notes(reply, self._echoes.notes)
        if parrots.normal(kept) != parrots.normal(reply):
            self._taken_out.append("bookkeeping")
        cleaned = parrots.without_own(kept, self._echoes.own)
        if parrots.normal(cleaned) != parrots.normal(kept):
            self._taken_out.append("prompt")
        if cleaned.strip() != reply.strip():
            self.reply = cleaned
        return parrots.judged(self.reply, self._taken_out, self._echoes)

    def _free(
        self, messages: list[ChatMessage], current: int, active: list[str]
    ) -> Iterator[Event]:
        """The model calls tools as it likes, natively or in text, within the limits."""
        seen: set[tuple[str, str]] = set()
        iteration = 0
        forced: str | None = None
        without_tools = False  # the server failed on the model's tool call: text only
        retried = False  # one retry for a call Charlie could not read, or an unknown tool
        # A question about the household's own things (memory hinted): one answered without
        # a look-up is a miss for auto.
        asked_about_memory = "memory" in active and bool(QUESTION.search(_text_of(self._asked)))
        if self.choice.mode == "text":
            messages[0] = {**messages[0], "content": self._with_text_tools(messages[0], active)}
        while True:
            iteration += 1
            offer = not (forced or without_tools)
            tools = self._tools(active) if offer and self.choice.mode == "native" else None
            if forced:
                messages.append({"role": "system", "content": FINAL_ANSWER.format(forced)})
            try:
                completion, reading = yield from self._stream(messages, current, tools)
            except LLMStreamError:
                if tools is None:
                    raise
                # llama.cpp could not read the model's tool call after text was shown: what
                # was shown is dropped (the stored reply replaces it) and asked again in text.
                without_tools = True
                yield Notice(
                    "The model server could not read the model's tool call; answering again "
                    "without tools."
                )
                continue
            if completion is None:
                return  # stopped: the reply looped
            calls = list(completion.tool_calls) or reading.calls
            in_text = not completion.tool_calls and bool(reading.calls)
            yield from self._show(reading.text)
            if not calls and reading.unreadable:
                self._missed("a tool call Charlie could not read")
                yield self._event(trace.Stopped("unreadable_call", _preview(reading.unreadable[0])))
                if not retried and not forced:
                    retried = True
                    messages.append({"role": "assistant", "content": completion.content})
                    messages.append({"role": "user", "content": self._unreadable(active)})
                    continue
                if not forced:
                    forced = "the model's tool calls could not be read"
                    continue
            if not calls or forced:
                if calls:
                    yield self._event(
                        trace.Stopped("ignored_calls", "tool calls after the final-answer request")
                    )
                if offer and not calls:
                    self._narrated(completion.content, active)  # held back or not
                    self._unlooked(asked_about_memory)
                return
            messages.append(_assistant_message(completion, calls, in_text))
            results = []
            unknown = False
            repeated = False
            for call in calls:
                outcome, event = self._call(call, seen, active)
                unknown |= _guarded(event, "unknown_tool")
                repeated |= _guarded(event, "duplicate_call")
                yield event
                results.append((call, budget.shorten(outcome, self._result_cap())))
            messages.extend(_result_messages(results, in_text))
            if repeated and not forced:
                self._missed("it called the same tool again and again")
                forced = "the same tool call was repeated"
                yield self._event(trace.Stopped("duplicate_call", forced))
            if unknown:
                self._missed("a tool that does not exist")
                if retried:
                    forced = "the model asked again for tools that do not exist"
                retried = True
            if iteration >= self.max_iterations and not forced:
                forced = f"the limit of {self.max_iterations} tool rounds was reached"
                yield self._event(trace.Stopped("max_iterations", forced))

    def _show(self, text: str) -> Iterator[Event]:
        """Text read out of held markup (or said for the model), shown after what streamed."""
        tags = TagFilter()
        text = tags.feed(text) + tags.flush()
        if not text.strip():
            return
        if self.reply and not self.reply[-1].isspace():
            text = " " + text
        self.reply += text
        yield Token(text)

    def _stream(
        self, messages: list[ChatMessage], current: int, tools: list[ToolSchema] | None
    ) -> Generator[Event, None, tuple[Completion | None, Reading]]:
        """One streamed request: text shown as it comes (no markup, no thinking), then the
        completion and what its held text held. (None, …) when the reply looped."""
        completion: Completion | None = None
        shown = ThinkFilter()
        # A model offered tools, or shown what they found, writes their fields as tags
        # (`<id>1</id> <title>…`, even before a tool ran): those are not shown either.
        self._tools_offered = self._tools_offered or bool(tools)
        shown_data = bool(self._tools_offered or self._findings) or any(
            m.get("role") == "tool" or "<tool_result" in str(m.get("content"))
            for m in messages[current + 1 :]
        )
        markup = MarkupFilter(self._known, speaker=conversations.ASSISTANT, echoes=shown_data)
        tags, hold = TagFilter(), parrots.Hold(self._echoes)
        guard, before = LoopGuard(), len(self.reply)
        stream, first = self._open(messages, current, tools)
        try:
            for item in _chain(first, stream):
                if isinstance(item, Delta):
                    visible = hold.feed(tags.feed(markup.feed(shown.feed(item.text))))
                    if visible:
                        self.reply += visible
                        yield Token(visible)
                        if guard.feed(visible):
                            stream.close()  # stop reading: the server stops generating
                            self.reply = self.reply[:before] + guard.useful
                            self.looped = True
                            return None, Reading()
                else:
                    completion = item
        except LLMStreamError:
            self.reply = self.reply[:before]
            raise
        except LLMError:
            # Cut off mid-stream: what was held back is the model's text all the same (the
            # part shown is kept, marked incomplete) — unless it was not an answer.
            held = hold.feed(tags.flush()) + hold.finish()
            if held:
                self.reply += held
                yield Token(held)
            raise
        assert completion is not None
        self.capped = completion.finish_reason == "length"
        self.llm_seconds += completion.seconds
        self.prompt_tokens = completion.usage.get("prompt_tokens", self.prompt_tokens)
        rest = hold.feed(tags.feed(markup.feed(shown.flush())) + tags.flush()) + hold.finish()
        if rest:
            self.reply += rest
            yield Token(rest)
        self._taken_out += hold.dropped
        if hold.repeated:
            self._taken_out.append("repeat")
            self._repeated = hold.repeated
        reading = markup.finish()
        if completion.tool_calls:  # native calls: any text markup beside them is not shown
            reading = Reading(text=reading.text)
        return completion, reading

    def _open(
        self, messages: list[ChatMessage], current: int, tools: list[ToolSchema] | None
    ) -> tuple[Generator[Delta | Completion], Delta | Completion]:
        """The request fitted to the budget, streaming, and its first item; a server that
        finds it too long anyway gets one retry at half the budget."""
        limit = self.within.prompt
        while True:
            request = budget.fit(messages, limit, current=current, tools=tools)
            stream = self.llm.stream(request, tools=tools)
            try:
                return stream, next(stream)
            except LLMContextExceeded as exc:
                limit = self._halved(exc, limit)

    def _halved(self, exc: LLMContextExceeded, limit: int) -> int:
        if limit < self.within.prompt:
            raise LLMContextExceeded(
                f"{exc} Trimmed to about {limit:,} tokens, it was refused again. Set "
                "CHARLIE_LLM_CONTEXT to the window the server really has (Charlie took "
                f"it to be {self.within.window:,} tokens), or start the model with a "
                "larger one (llama.cpp: -c; Ollama: num_ctx; LM Studio: Context Length).",
                exc.window,
            ) from exc
        limit = max(limit // 2, budget.MIN_PROMPT)
        if exc.window:  # the server named its window: fit that too
            limit = min(limit, Budget.of(exc.window, self.within.answer).prompt)
        return limit

    def _result_cap(self) -> int:
        return self.within.prompt // budget.SHARE_OF_ONE_MESSAGE

    def _unreadable(self, active: list[str]) -> str:
        names = ", ".join(t["function"]["name"] for t in self._tools(active))
        return UNREADABLE.format("it was not in a form that can be read", names)

    def _with_text_tools(self, system: ChatMessage, active: list[str]) -> str:
        lines = [toolmode.tool_line(t["function"]) for t in self._tools(active)]
        return f"{system['content']}\n\n{toolmode.TEXT_TOOLS.format(chr(10).join(lines))}"

    def _missed(self, why: str) -> None:
        self.outcome, self.miss = "missed", why

    def _unlooked(self, asked_about_memory: bool) -> None:
        if self.outcome == "none" and asked_about_memory:
            self._missed("it answered a question about the household without looking it up")

    def _narrated(self, reply: str, active: list[str]) -> None:
        """An answer that talks about a tool by name instead of calling it is a miss."""
        if self.outcome != "none":
            return
        named = [
            name
            for name in self._known
            if name != META_TOOL and re.search(rf"\b{re.escape(name)}\b", reply)
        ]
        if named:
            self._missed(f"it wrote about {named[0]} instead of calling it")

    # ------------------------------------------------------------ constrained

    def _constrained(
        self, messages: list[ChatMessage], current: int, active: list[str]
    ) -> Iterator[Event]:
        """Each step as JSON held to a schema, then the answer in plain text."""
        seen: set[tuple[str, str]] = set()
        stop = ""
        # The hint's categories beyond what Charlie did itself (its look-up covers memory,
        # its day arithmetic the dates the message names): the first step uses one of their
        # tools, since a small model offered "answer" takes it. Nor is a step offered a tool
        # Charlie has run for this message and found with: asked again, it finds what is
        # above (a step, and a result to read, for nothing — half the time of a question).
        covered = {"memory", *(["time"] if self._ran & DAY_TOOLS else [])}
        hinted = [c for c in active if c not in covered and self._offered(c)]
        # A question Charlie's own look-up found something for, hinting at nothing more, is
        # answered from it at once: offered a step, a small model reads a note it was shown.
        # (A message not ending in a question still takes the step that says if it tells.)
        asked = ends_asking(_text_of(self._asked))
        found = asked and bool(self._ran & LOOKUP_TOOLS) and not hinted
        for step_number in range(0 if found else self.max_iterations):
            first = step_number == 0 and bool(hinted)
            tools = [t for c in hinted for t in self._offered(c)] if first else None
            offered = tools or self._step_tools(active)
            tools = [t for t in offered if t.name not in self._ran] or offered
            tools = constrained.ranked(tools, _text_of(self._asked))
            try:
                step = self._step(
                    messages, current, tools, answer=not first, classify=step_number == 0
                )
            except LLMRejected as exc:
                # The server takes no json_schema: the model is left to call tools itself.
                self.choice = toolmode.Choice("native", f"the server refused json_schema ({exc})")
                yield self._event(trace.Moded(self.choice.mode, self.choice.reason))
                messages[:] = self._with_findings(messages, current)
                yield from self._free(messages, current, active)
                return
            if step is None:
                stop = "the model's step was not valid JSON"
                yield self._event(trace.Stopped("unreadable_call", stop))
                break
            name, arguments, said = step
            if step_number == 0:  # a small model says "tells" of a question too readily: a
                # message that ends asking, or one it went to look something up for, asks
                self.tells = said == constrained.TELLS and name == constrained.ANSWER
                self.tells = self.tells and not asked
            if name == constrained.ANSWER:
                break
            call = ToolCall(f"step_{len(self.trace)}", name, json.dumps(arguments))
            outcome, event = self._call(call, seen, active)
            yield event
            if _guarded(event, "duplicate_call"):
                break  # it would ask the same again: answer with what there is
            # The call above its result: a small model reads "date_add(…)" then "Monday …"
            # right, and a bare "Monday …" not always.
            result = budget.shorten(outcome, self._result_cap())
            self._findings.append(
                fence("tool_result", f"{escape(constrained.call_text(name, arguments))}\n{result}")
            )
        else:
            if not found:
                stop = f"the limit of {self.max_iterations} tool rounds was reached"
                yield self._event(trace.Stopped("max_iterations", stop))
        # A message that only tells: acknowledged, without what Charlie looked up for it.
        answering = self._with_findings(messages, current, ACKNOWLEDGE if self.tells else "")
        completion, reading = yield from self._stream(answering, current, None)
        if completion is None:
            return  # stopped: the reply looped
        yield from self._show(reading.text)
        if reading.markup:
            yield self._event(trace.Stopped("ignored_calls", "a tool call in the answer"))

    def _step_tools(self, active: list[str]) -> list[Tool]:
        """The tools a constrained step may choose: the suggested categories' and the
        memory tools, or, where there are other categories, `load_tools` for them."""
        categories = list(dict.fromkeys([*active, "memory"]))
        tools = [t for c in categories if c in self.registry.categories for t in self._offered(c)]
        if set(self.registry.categories) - set(categories):
            tools.append(constrained.meta_tool(self.registry))
        return tools

    def _step(
        self,
        messages: list[ChatMessage],
        current: int,
        tools: list[Tool],
        *,
        answer: bool,
        classify: bool = False,
    ) -> tuple[str, JSONObject, str] | None:
        """The model's next step — one of `tools`, or (if `answer`) to answer — and, if
        `classify`, whether the message asks or only tells; None when its answer was not a
        valid step."""
        lines = "\n".join(toolmode.tool_line(t.schema()["function"]) for t in tools)
        said = f" {ASKS_OR_TELLS}" if classify else ""
        instruction = (STEP_INSTRUCTION if answer else TOOL_FIRST).format(
            said, lines, constrained.step_shape(answer=answer, classify=classify)
        )
        asking = self._with_findings(messages, current, instruction)
        asker = self.llm.with_max_tokens(max(constrained.STEP_TOKENS, self.within.answer))
        schema = constrained.step_format(tools, answer=answer, classify=classify)
        limit = self.within.prompt
        while True:
            request = budget.fit(asking, limit, current=current)
            try:
                completion = asker.chat(request, response_format=schema, temperature=0)
                break
            except LLMContextExceeded as exc:
                limit = self._halved(exc, limit)
        self.llm_seconds += completion.seconds
        return constrained.read_step(completion.content, {t.name for t in tools})

    # ------------------------------------------------------------ Charlie's own look-up

    def _reckon(self, text: str) -> Iterator[Event]:
        """The day arithmetic `text` asks for, done by Charlie (`charlie.chat.dates`) and put
        into the request: a small model counting days guesses."""
        worked = dates.facts(text, datetime.now(UTC).date())
        if not worked:
            return
        self._mistakes = [fact for fact in worked if fact.note]
        for fact in worked:
            yield self._event(fact.step)
        self._findings.append(fence("dates", "\n".join(f.text for f in worked), by="Charlie"))

    def _look_up(self, messages: list[ChatMessage], current: int, text: str) -> Iterator[Event]:
        """The best notes and earlier messages for `text`, put into the request."""
        room = self.within.prompt // LOOKUP_SHARE
        blocks: list[str] = []
        notes_block, step = lookup.notes_for(self.context, text)
        if step is not None:
            yield self._event(step)
        messages_block, step = lookup.messages_for(self.context, text, messages)
        if step is not None:
            yield self._event(step)
        blocks = [b for b in (notes_block, messages_block) if b]
        if not blocks:
            return
        found = budget.shorten("\n".join(blocks), room)
        self._lookup = fence("lookup", found, by="Charlie")
        self._findings.append(self._lookup)

    # ------------------------------------------------------------ running a call

    def _call(
        self, call: ToolCall, seen: set[tuple[str, str]], active: list[str]
    ) -> tuple[str, TraceEvent]:
        """Run one call behind the guards. What a guard or a failing tool says back is a
        note for the model, never an answer (`charlie.chat.parrots`)."""
        content, event = self._guarded_call(call, seen, active)
        step = event.step
        if isinstance(step, trace.Called | trace.Loaded) and not step.ok:
            self._echoes = self._echoes.with_notes([content])
        return content, event

    def _guarded_call(
        self, call: ToolCall, seen: set[tuple[str, str]], active: list[str]
    ) -> tuple[str, TraceEvent]:
        started = time.perf_counter()
        try:
            arguments = json.loads(call.arguments or "{}")
            if not isinstance(arguments, dict):
                raise ValueError("the arguments must be a JSON object")
        except ValueError as exc:
            message = f"Error: the arguments of {call.name} are not valid JSON ({exc})."
            return message, self._refused(
                call, call.arguments, "bad arguments", started, "bad_arguments"
            )
        key = (call.name, json.dumps(arguments, sort_keys=True))
        if key in seen:
            return (
                f"Refused: {call.name} was already called with these arguments in this "
                "answer; use that result.",
                self._refused(call, arguments, "refused: repeated call", started, "duplicate_call"),
            )
        seen.add(key)
        if call.name == META_TOOL:
            return self._load(str(arguments.get("category", "")), active, started)
        tool = self.registry.tools.get(call.name)
        if tool is not None and tool.category not in active:
            active.append(tool.category)  # a real tool it knew of without loading: small models do
        if tool is None:
            available = ", ".join(t["function"]["name"] for t in self._tools(active))
            return (
                f"Error: there is no tool {call.name!r}. The tools are: {available}.",
                self._refused(call, arguments, "unknown tool", started, "unknown_tool"),
            )
        if tool.writes and tool.name not in self.allowed_writes:
            return (
                f"Error: {tool.name} is not allowed in this project.",
                self._refused(
                    call, arguments, "not allowed here", started, "write_not_allowed", writes=True
                ),
            )
        outcome = run_tool(tool, self.context, arguments)
        if not outcome.error and self.outcome == "none":
            self.outcome = "used"
        if tool.writes and not outcome.error:
            self.done.append(outcome.content)
        event = self._event(
            trace.Called(
                name=call.name,
                arguments=arguments,
                ok=not outcome.error,
                summary=outcome.summary,
                ms=_ms(started),
                writes=tool.writes,
                guard=trace.as_guard(outcome.guard) if outcome.guard else None,
                hits=outcome.hits,
                count=outcome.count,
            )
        )
        return outcome.content, event

    def _load(self, category: str, active: list[str], started: float) -> tuple[str, TraceEvent]:
        if category not in self.registry.categories:
            names = ", ".join(sorted(self.registry.categories))
            return f"Error: no category {category!r}; the categories are {names}.", self._event(
                trace.Loaded(category, ok=False, ms=_ms(started))
            )
        if category not in active:
            active.append(category)
        loaded = tuple(t.name for t in self._offered(category))
        return self._loaded_line(category), self._event(
            trace.Loaded(category, ok=True, tools=loaded, ms=_ms(started))
        )

    def _loaded_line(self, category: str) -> str:
        """What `load_tools` tells the model: a note for it, never an answer."""
        loaded = ", ".join(t.name for t in self._offered(category))
        return f"Loaded the {category} tools: {loaded}."

    def _refused(
        self,
        call: ToolCall,
        arguments: JSONObject | str,
        summary: str,
        started: float,
        guard: trace.Guard,
        *,
        writes: bool = False,
    ) -> TraceEvent:
        """The trace of a call a guard stopped before it ran."""
        return self._event(
            trace.Called(
                call.name, arguments, False, summary, _ms(started), writes=writes, guard=guard
            )
        )


# ---------------------------------------------------------------- helpers


def _sentence(text: str) -> str:
    """`text` ending as a sentence does."""
    text = text.strip()
    return text if text[-1:] in ".!?" else f"{text}."


def _asks(text: str, active: list[str]) -> bool:
    """Whether the message asks about what the household knows (worth a look-up)."""
    return "memory" in active or bool(QUESTION.search(text))


def _replies_to_others(messages: list[ChatMessage], current: int) -> list[str]:
    """The thread's earlier replies, but those to the same words as the message being
    answered: asked the same again, the same answer is an answer."""
    asked = parrots.normal(_text_of(messages[current]))
    replies, before = [], ""
    for message in messages[1:current]:
        if message.get("role") == "user":
            before = parrots.normal(_text_of(message))
        elif message.get("role") == "assistant" and before != asked:
            replies.append(_text_of(message))
    return replies


def _says(message: ChatMessage, reply: str) -> bool:
    """Whether `message` is an earlier reply of Charlie's saying `reply`, word for word."""
    said = parrots.normal(_text_of(message))
    return message.get("role") == "assistant" and said == parrots.normal(reply)


def _text_of(message: ChatMessage) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def _guarded(event: TraceEvent, guard: trace.Guard) -> bool:
    return isinstance(event.step, trace.Called) and event.step.guard == guard


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 120 else flat[:119] + "…"


def _chain(
    first: Delta | Completion, rest: Iterator[Delta | Completion]
) -> Iterator[Delta | Completion]:
    yield first
    yield from rest


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _assistant_message(completion: Completion, calls: list[ToolCall], in_text: bool) -> ChatMessage:
    if in_text:
        return {"role": "assistant", "content": completion.content}
    return {
        "role": "assistant",
        "content": completion.content or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ],
    }


def _result_messages(results: list[tuple[ToolCall, str]], in_text: bool) -> list[ChatMessage]:
    wrapped = [(call, fence("tool_result", content, name=call.name)) for call, content in results]
    if in_text:  # the model wrote its calls as text: answer the way its template expects
        body = "\n".join(fence("tool_response", c) for _, c in wrapped)
        return [{"role": "user", "content": body}]
    return [{"role": "tool", "tool_call_id": call.id, "content": c} for call, c in wrapped]


__all__ = ["FINAL_ANSWER", "MAX_ITERATIONS", "LLMError", "ToolLoop"]
