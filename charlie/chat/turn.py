"""One chat turn, end to end: log, assemble context, stream the reply, distill when due.

Context is bounded: persona + the project's response style + the three memory layers +
the messages since the last distillation (with the last exchange always included) —
never the whole transcript, so a long conversation costs no more per turn than a short one.
Every request is fitted to the model's context window with room kept for the answer
(`charlie.llm.budget`); a server that still finds it too long gets one retry at half the
budget; a reply that loops is stopped (`charlie.llm.loops`); and the conversation is distilled
early when what is undistilled nears the window, so a project never outgrows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from charlie import conversations, projects
from charlie.chat.events import (
    Distilled,
    Event,
    Notice,
    Reply,
    Saved,
    Suggested,
    Token,
    TraceEvent,
)
from charlie.chat.prompt import BASE_PERSONA, DATA_NOTICE, FINAL_ANSWER, FOLLOWING, SPEAKING
from charlie.chat.toolloop import MAX_ITERATIONS, ToolLoop
from charlie.conversations import Channel, Message
from charlie.errors import (
    AlreadyDistilled,
    CharlieError,
    Conflict,
    DistillationError,
    Forbidden,
    LLMBadResponse,
    LLMError,
    MemoryFormatError,
    MessageGone,
)
from charlie.home import Home
from charlie.llm import budget, doctor, toolmode
from charlie.llm.budget import Budget
from charlie.llm.client import DEFAULT_MAX_TOKENS, LLMClient, image_part
from charlie.llm.fence import escape, fence
from charlie.llm.messages import ChatMessage, ContentPart
from charlie.memory import batches, distill
from charlie.memory import layers as memory
from charlie.notes import files as notes
from charlie.retrieval import message_index, recall, suggestions
from charlie.tools import builtin as toolkit
from charlie.tools.registry import Registry, ToolContext
from charlie.users import User

# The events of a turn and the tool loop, as the front ends know them from this module.
__all__ = [
    "FINAL_ANSWER",
    "MAX_ITERATIONS",
    "Distilled",
    "Event",
    "Notice",
    "Reply",
    "Saved",
    "Suggested",
    "Token",
    "ToolLoop",
    "TraceEvent",
    "accept",
    "choose",
    "reply_to",
    "store_edit",
    "turn",
]

MIN_RECENT = 4  # the last exchange stays verbatim even right after a distillation
MAX_CONTEXT_MESSAGES = 60  # a ceiling if distillation keeps failing
LOOPED = (
    "The model started repeating itself; I stopped it. The part before the repetition is "
    "kept, marked cut off. Ask again, perhaps more narrowly, or try another model."
)
CAPPED = (
    "The reply reached the cap of {} tokens and was cut there. Ask Charlie to go on, or "
    "raise the cap (CHARLIE_LLM_MAX_TOKENS, or max_tokens in the project's project.toml)."
)


def cadence(channel: Channel) -> int:
    return channel.project.config.distill_every if channel.project else 5


def answer_cap(channel: Channel, llm: LLMClient) -> int:
    """The longest answer, in tokens: the project's `max_tokens`, else the client's."""
    configured = channel.project.config.max_tokens if channel.project else None
    return configured or llm.max_tokens


def choose_mode(home: Home, channel: Channel, llm: LLMClient) -> toolmode.Choice:
    """The tool mode of this answer. In `auto`, the model's size is looked for first
    (its name, or what the server says: `toolmode.sized`): a small one starts in
    constrained steps with no question asked of it. Any other model nothing was seen of is
    first asked the doctor's tool question once (`doctor.first_look`), so its first answer
    is already in the mode that suits it; a server that fails it is left to the turn."""
    setting = toolmode.setting_for(home, channel)
    if setting != "auto":
        return toolmode.decide(setting, toolmode.Habits())
    seen = toolmode.sized(home, llm)
    if seen.native_calls is None and not seen.size.small:
        try:
            looked = doctor.first_look(llm)
        except LLMError:
            return toolmode.decide(setting, seen)
        toolmode.record_probe(
            home,
            llm.base_url,
            llm.model,
            native_calls=looked.native_calls,
            text_calls=None,
            json_schema=None,
        )
        seen = toolmode.habits(home, llm.base_url, llm.model)
    return toolmode.decide(setting, seen)


def model_for(channel: Channel, llm: LLMClient) -> LLMClient:
    """The client for this channel: asking for the project's own model when its
    project.toml names one (`model`), else the configured one."""
    chosen = channel.project.config.model if channel.project else None
    return llm.with_model(chosen) if chosen else llm


def plan(channel: Channel, llm: LLMClient) -> Budget:
    """How the model's window is shared in this channel: the prompt, then the answer."""
    return Budget.of(llm.context_window(), answer_cap(channel, llm))


def system_prompt(
    home: Home, channel: Channel, user: User, layers: str, pinned: str | None = None
) -> str:
    parts = [BASE_PERSONA]
    if channel.project is not None:
        config = channel.project.config
        parts.append(f'This is the project "{config.name}".')
        if config.persona.strip():
            parts.append(config.persona.strip())
        if config.style.strip():
            parts.append(f"Response style for this project: {config.style.strip()}")
    else:
        parts.append(f"This is {user.name}'s private channel: nobody else sees it.")
    parts.append(SPEAKING)
    parts.append(f"You are talking with {user.name}. Today is {datetime.now(UTC):%A %Y-%m-%d}.")
    parts.append(fence("memory", escape(layers.strip())))
    if pinned is None:
        pinned = suggestions.pinned_text(home, channel)
    if pinned:
        parts.append(f"Notes the person pinned into this conversation:\n{pinned}")
    parts.append(DATA_NOTICE)
    parts.append(FOLLOWING)
    return "\n\n".join(parts)


def _memory_text(home: Home, channel: Channel) -> tuple[str, str | None]:
    """The memory as the model should see it, and a warning when memory.md is unreadable."""
    try:
        current = memory.load(home, channel)
    except MemoryFormatError as exc:
        assert channel.project is not None
        raw = channel.project.memory_path.read_text(encoding="utf-8", errors="replace")
        return raw, f"{exc} Until then distillation is paused; the file is used as written."
    return memory.as_prompt(current), None


def context(
    home: Home,
    channel: Channel,
    user: User,
    images: list[Path] | None = None,
    *,
    within: Budget | None = None,
    instruction: str = "",
    upto: Message | None = None,
) -> tuple[list[ChatMessage], str | None]:
    """The messages to send for the next reply (the newest one shown, or `upto`, is the person's),
    fitted to `within` (default: a 4,096-token window). Memory and pins take at most half
    the prompt; `instruction` ends the system prompt."""
    within = within or Budget.of(budget.DEFAULT_WINDOW, DEFAULT_MAX_TOKENS)
    layers, warning = _memory_text(home, channel)
    pinned = suggestions.pinned_text(home, channel)
    room = within.prompt // 2
    pinned = budget.shorten(pinned, max(room - budget.estimate(layers), room // 2))
    layers = budget.shorten(layers, room - budget.estimate(pinned))
    pending = conversations.undistilled(home, channel)
    count = min(max(len(pending), MIN_RECENT), MAX_CONTEXT_MESSAGES)
    history = conversations.recent(home, channel, count, upto=upto)
    speakers = {m.speaker for m in history if m.role == "user"}
    system = system_prompt(home, channel, user, layers, pinned)
    if instruction.strip():
        system += f"\n\n{instruction.strip()}"
    messages: list[ChatMessage] = [{"role": "system", "content": system}]
    for position, message in enumerate(history):
        text = message.content
        if message.role == "user" and len(speakers) > 1:
            text = f"{message.speaker}: {text}"
        is_current = position == len(history) - 1 and message.role == "user"
        if message.images and is_current and images:
            parts: list[ContentPart] = [{"type": "text", "text": text}]
            parts += [image_part(path) for path in images]
            messages.append({"role": message.role, "content": parts})
        else:
            if message.images:
                text += f"\n[{len(message.images)} image(s) were attached]"
            if message.incomplete:
                text += "\n[this reply was cut off before it finished]"
            messages.append({"role": message.role, "content": text})
    return budget.fit(messages, within.prompt, current=len(messages) - 1), warning


def turn(
    home: Home,
    llm: LLMClient,
    channel: Channel,
    user: User,
    text: str,
    images: list[Path] | None = None,
    *,
    registry: Registry | None = None,
    max_iterations: int = MAX_ITERATIONS,
    instruction: str = "",
    distill_after: bool = True,
) -> Iterator[Event]:
    """Take the person's message and yield `Saved` once it is stored, then the reply as it
    streams, the tool trace as it happens, suggested notes, then any distillation (unless
    `distill_after` is False: the caller runs `distill_due` itself, as `charlie chat -m` does
    in a process of its own). It is `accept` then `reply_to`: a front end that must store the
    message before it answers anything (the web app, before its 200) calls the two itself.

    `instruction` is guidance for this one answer (voice mode asks for a short spoken one);
    it goes to the model, never into the stored conversation.
    """
    asked = accept(home, channel, user, text, images)
    yield from reply_to(
        home,
        llm,
        channel,
        user,
        asked,
        images,
        registry=registry,
        max_iterations=max_iterations,
        instruction=instruction,
        distill_after=distill_after,
    )


def accept(
    home: Home, channel: Channel, user: User, text: str, images: list[Path] | None = None
) -> Message:
    """Check the person's message (their channel, not empty, readable images) and store it,
    committed, before anything is asked of the model: whatever happens to the answer (the
    model down, the process killed), the message is kept."""
    _may_use(channel, user)
    if not text.strip() and not images:
        raise CharlieError("The message is empty: type something to send.")
    images = images or []
    image_parts = [image_part(path) for path in images]  # fail on a bad image before storing
    del image_parts
    memory.ensure_file(home, channel)
    return conversations.add_message(
        home, channel, "user", text, user=user, images=[str(p) for p in images]
    )


def reply_to(
    home: Home,
    llm: LLMClient,
    channel: Channel,
    user: User,
    asked: Message,
    images: list[Path] | None = None,
    *,
    registry: Registry | None = None,
    max_iterations: int = MAX_ITERATIONS,
    instruction: str = "",
    distill_after: bool = True,
) -> Iterator[Event]:
    """The turn for `asked`, the person's message already stored (`accept`, or an edit):
    `Saved` first, then what `turn` yields. If the model fails, the `LLMError` propagates and
    the message is kept for the next turn. A reply the server cut off mid-stream is stored as
    far as it came, marked incomplete (never distilled), and the `LLMError` says so. A
    distillation that cannot be written (a full disk) raises its `DatabaseError` after the
    reply is stored; one the model fails is a `Notice`."""
    yield Saved(asked)
    yield from _answer(
        home,
        llm,
        channel,
        user,
        asked,
        images or [],
        registry,
        max_iterations,
        instruction,
        distill_after=distill_after,
    )


def _may_use(channel: Channel, user: User) -> None:
    if channel.private and (channel.owner is None or channel.owner.id != user.id):
        raise CharlieError("A private channel can only be used by its owner.")


def answerable(home: Home, channel: Channel, user: User, message_id: int) -> Message:
    """The message `answer_again(message_id)` answers (a refusal that says why otherwise)."""
    _may_use(channel, user)
    message = conversations.get_message(home, channel, message_id)
    if message.hidden:
        raise CharlieError("That message is an alternative set aside: choose it first.")
    if message.role == "assistant":
        if not message.parent_id:
            raise CharlieError("That reply answers no message of this thread: nothing to redo.")
        asked = conversations.get_message(home, channel, message.parent_id)
        if asked.role != "user":
            raise CharlieError("That reply does not follow a message: nothing to regenerate.")
        _alone_after(home, message, user, "regenerate that reply")
    elif conversations.newest_id(home, channel) != message.id:
        raise CharlieError(
            "That message already has an answer: regenerate the reply, or edit the message."
        )
    else:
        asked = message
    return asked


def answer_again(
    home: Home,
    llm: LLMClient,
    channel: Channel,
    user: User,
    message_id: int,
    *,
    registry: Registry | None = None,
    max_iterations: int = MAX_ITERATIONS,
) -> Iterator[Event]:
    """Regenerate reply `message_id` — the old reply (and whatever followed it) is kept as an
    alternative the person can page back to — or, given the person's own last message whose
    turn failed, answer it now (retry)."""
    asked = answerable(home, channel, user, message_id)
    replacing = None
    if asked.id != message_id:  # set aside only once the new reply is stored
        replacing = conversations.get_message(home, channel, message_id)
    memory.ensure_file(home, channel)
    yield from _answer(
        home, llm, channel, user, asked, [], registry, max_iterations, "", replacing=replacing
    )


def editable(home: Home, channel: Channel, user: User, message_id: int, text: str) -> Message:
    """The message `edit_and_resend` replaces (a refusal that says why otherwise)."""
    _may_use(channel, user)
    if not text.strip():
        raise CharlieError("The message is empty: type something to send.")
    message = conversations.get_message(home, channel, message_id)
    if message.role == "user" and message.user_id is None:
        raise Forbidden(
            "That message belongs to no account (imported or restored history), so it can't "
            "be edited here; send a new message instead."
        )
    if message.role != "user" or message.user_id != user.id:
        raise Forbidden("You can only edit your own messages.")
    if message.hidden:
        raise CharlieError("That message is an alternative set aside: choose it first.")
    if message.parent_id is None:
        raise CharlieError("An imported message can't be edited here.")
    _alone_after(home, message, user, "edit that message")
    return message


def choose(home: Home, channel: Channel, user: User, message_id: int) -> None:
    """Keep the branch through alternative `message_id` — refused (409) when that would set
    aside another person's later turn, as regenerating and editing are."""
    _may_use(channel, user)
    chosen = conversations.get_message(home, channel, message_id)
    for shown in conversations.shown_siblings(home, channel, chosen):
        if shown.role == "user" and shown.user_id not in (None, user.id):
            raise Conflict(
                f"That would set aside {shown.speaker}'s message. Start a new thread, or ask them."
            )
        _alone_after(home, shown, user, "switch to that version")
    conversations.choose(home, channel, message_id)


def _alone_after(home: Home, message: Message, user: User, doing: str) -> None:
    """Refuse to set aside other people's messages: in a shared thread, what followed a
    message may be someone else's turn."""
    others = conversations.others_after(home, message, user)
    if others:
        raise Conflict(
            f"{', '.join(others)} wrote after it: to {doing} would set their messages aside "
            "too. Start a new thread, or ask them."
        )


def edit_and_resend(
    home: Home,
    llm: LLMClient,
    channel: Channel,
    user: User,
    message_id: int,
    text: str,
    *,
    registry: Registry | None = None,
    max_iterations: int = MAX_ITERATIONS,
) -> Iterator[Event]:
    """Replace the person's message `message_id` with `text` and answer it. The old version
    and every turn after it stay, as an alternative branch the person can page back to."""
    asked = store_edit(home, channel, user, message_id, text)
    yield from reply_to(
        home, llm, channel, user, asked, registry=registry, max_iterations=max_iterations
    )


def store_edit(home: Home, channel: Channel, user: User, message_id: int, text: str) -> Message:
    """Store `text` as the new version of the person's message `message_id` (the old one and
    what followed it set aside, kept as an alternative), committed before any answer."""
    message = editable(home, channel, user, message_id, text)
    memory.ensure_file(home, channel)
    return conversations.add_message(
        home, channel, "user", text, user=user, parent_id=message.parent_id, replacing=message
    )


def _answer(
    home: Home,
    llm: LLMClient,
    channel: Channel,
    user: User,
    asked: Message,
    images: list[Path],
    registry: Registry | None,
    max_iterations: int,
    instruction: str,
    *,
    replacing: Message | None = None,
    distill_after: bool = True,
) -> Iterator[Event]:
    """The reply to `asked`, streamed; with `replacing`, a new reply in its place (the old
    one is set aside once the new one is stored — a failed answer changes nothing)."""
    text = asked.content
    llm = model_for(channel, llm)
    within = plan(channel, llm)
    messages, warning = context(
        home, channel, user, images, within=within, instruction=instruction, upto=asked
    )
    if warning:
        yield Notice(warning)
    choice = choose_mode(home, channel, llm)
    loop = ToolLoop(
        home,
        llm.with_max_tokens(within.answer),
        channel,
        user,
        registry or toolkit.registry(),
        max_iterations,
        within,
        choice,
    )
    loop.context.asked = asked.id
    try:
        yield from loop.run(messages, text)
    except LLMError as exc:
        kept = ""
        if loop.reply.strip():  # cut off mid-stream: keep what was shown, marked incomplete
            with _unless_forgotten():
                conversations.add_message(
                    home,
                    channel,
                    "assistant",
                    loop.reply.strip(),
                    trace=loop.trace,
                    incomplete=True,
                    parent_id=asked.id,
                    hidden=replacing is not None,  # the reply it was to replace stays shown
                )
            kept = (
                "The reply was cut off: the part shown is kept, marked incomplete, and is not "
                "folded into memory. Send your message again for a whole answer. "
            )
        exc.args = (  # the same error, whatever else it carries (a window the server named)
            f"{exc} {kept}Your message is saved and will be part of the conversation when you "
            "send the next one.",
        )
        raise
    if loop.choice.mode != "constrained":  # how the model's own tool use went, for auto
        toolmode.record_answer(home, llm.base_url, llm.model, loop.outcome, loop.miss)
    reply_text = loop.reply.strip()
    if not reply_text:
        raise LLMBadResponse(
            "The model returned an empty reply. Your message is saved: retry it, rephrase it, "
            "or try another model."
        )
    with _unless_forgotten():
        stored = conversations.add_message(
            home,
            channel,
            "assistant",
            reply_text,
            trace=loop.trace,
            incomplete=loop.looped,
            parent_id=asked.id,
            replacing=replacing,
        )
    toolkit.record_citations(loop.context)
    yield Reply(stored, loop.prompt_tokens, loop.llm_seconds)
    if loop.looped:
        yield Notice(LOOPED)
    elif loop.capped:
        yield Notice(CAPPED.format(within.answer))
    yield from _suggest(home, loop.context, channel, user, text, stored.id)
    yield from index_messages(home)
    if distill_after:
        yield from distill_due(home, llm, channel)


FORGOTTEN_MEANWHILE = (
    "The message Charlie was answering was forgotten meanwhile, so the reply was dropped: "
    "nothing of it is kept."
)


@contextmanager
def _unless_forgotten() -> Iterator[None]:
    """Storing a reply: the message it answers may have been forgotten while the model
    wrote it. Then nothing is stored, and the turn ends saying so."""
    try:
        yield
    except MessageGone as exc:
        raise MessageGone(FORGOTTEN_MEANWHILE) from exc


def index_messages(home: Home) -> Iterator[Event]:
    """Put the new messages in the search index, once the reply has been shown (so it adds
    nothing to the time to the first token). A failure loses nothing: the messages are
    stored, and the next turn or recall indexes them."""
    try:
        message_index.catch_up(recall.recaller_for(home).index)
    except CharlieError as exc:
        yield Notice(
            f"This exchange is saved but not yet searchable ({exc}); it is indexed with "
            "the next message."
        )


def _suggest(
    home: Home, ctx: ToolContext, channel: Channel, user: User, text: str, message_id: int
) -> Iterator[Event]:
    """Offer related notes the answer did not use — only where there are notes at all."""
    scope = [channel.project] if channel.project else projects.list_projects(home)
    if not any(notes.note_files(project) for project in scope):
        return
    offered = suggestions.offer(
        home,
        ctx.searcher(),
        channel,
        user,
        text,
        message_id,
        exclude=set(ctx.cited) | set(ctx.found),  # what the answer read or already saw
    )
    if offered:
        yield Suggested(offered)


def outgrowing(home: Home, llm: LLMClient, channel: Channel) -> bool:
    """The undistilled messages take more than half the prompt budget: distill them now,
    before the oldest must be left out of the requests unremembered."""
    pending = conversations.undistilled(home, channel)
    tokens = sum(budget.message_tokens({"role": m.role, "content": m.content}) for m in pending)
    return tokens > budget.EARLY_DISTILL * plan(channel, llm).prompt


def _failed_recently(home: Home, channel: Channel, every: int) -> bool:
    """Whether the model failed this thread's last distillation and fewer than `every`
    messages came since: a model that cannot distill a batch is not asked again on every
    turn, only once the conversation has moved on by a cadence, twice as long after each
    failure in a row, at most 8 cadences (`/distill` tries at once). Kept in the database,
    so every process honours it (`charlie chat -m` is a new process each time). A storage
    failure (a full disk) is not remembered here: the next turn tries again."""
    failed = conversations.distill_failures(home, channel)
    if failed is None:
        return False
    since = conversations.count_since(home, channel, failed.after_id)
    times = max(failed.times, 1)
    return since < every * min(1 << (times - 1), 8)  # waits longer after each failure


def due(home: Home, llm: LLMClient, channel: Channel) -> bool:
    """Whether a distillation of `channel` is due: a full batch of `cadence` undistilled
    messages, or fewer that near the window (`outgrowing`), unless the model failed the last
    one too recently (`_failed_recently`)."""
    every = cadence(channel)
    if len(conversations.undistilled(home, channel, limit=every)) < every and not outgrowing(
        home, llm, channel
    ):
        return False
    return not _failed_recently(home, channel, every)


def distill_due(home: Home, llm: LLMClient, channel: Channel) -> Iterator[Event]:
    """Distill every full batch of `cadence` undistilled messages, oldest first — and a
    short batch too when the undistilled messages near the window (`outgrowing`).

    Only one turn distills a channel at a time: if another holds the claim, it will fold
    these messages in (or the next turn will).
    """
    every = cadence(channel)
    if not due(home, llm, channel):
        return
    token = distill.claim(home, channel)
    if token is None:
        return
    try:
        while True:
            batch = conversations.undistilled(home, channel, limit=every)
            if not batch or (len(batch) < every and not outgrowing(home, llm, channel)):
                return
            while batch:  # the batch that is due, in as many requests as fit the model
                try:
                    distiller, part = batches.fitted(home, channel, llm, batch)
                    result = distill.distill(home, channel, distiller, part)
                except AlreadyDistilled:
                    break  # folded in meanwhile: what still awaits is read again
                except (DistillationError, LLMError, MemoryFormatError) as exc:
                    conversations.note_distill_failure(home, channel)
                    yield Notice(f"Memory was not updated: {exc}")
                    return
                conversations.clear_distill_failures(home, channel)
                yield Distilled(result)
                batch = batch[len(part) :]
    finally:
        distill.release(home, channel, token)
