"""Forgetting a message for good, everywhere Charlie keeps something derived from it.

A person's message goes with Charlie's answers to it (they usually repeat it), unless only
that one message is asked for. With it go: the quotes of the memory said in it (in the
current memory and in every stored revision), its place in the decisions' provenance (a
decision whose only source it was is flagged for the person to keep or drop — unless it
only restated the message, "The alarm code is 4471": then it goes too, as a quote would), the search
index of messages and so recall (its own entry, and its neighbours' context, which held
its words), the suggestions offered under it and the usage it left, what other replies'
traces kept of it (a search hit of it, a query echoing it), and what distillations recorded
of it (the quotes and decisions they refused or left out, the error of a failed one, which
may quote the model's answer). Deleted rows are zeroed (`secure_delete`) and the
write-ahead logs emptied, so the files keep no copy. Exports made afterwards cannot hold
it. What was forgotten is never logged: the forget log says when, by whom, where and how
many messages; `forgotten_messages` keeps their ids, never their text.

The search index is another file (`index.db`), which another process may hold busy: the
deletion in charlie.db records, in the same transaction, what the index must still be
scrubbed of, and the forget then scrubs it. When the index cannot be written now, the
forget is done everywhere else and says so, naming index.db; whoever uses the index next
(a search, the background indexer, the next forget — after a crash too) scrubs it before
anything else, so no search finds the forgotten words meanwhile. Forgetting the message
again says it is already forgotten, and finishes the index.

Who may forget: in a private channel, only its owner; in a shared project, the person who
wrote the message (for one of Charlie's answers, the person it answered), or an
administrator; an imported message, only an administrator. A distillation of the channel
holds its claim while it runs, so forgetting waits for it (and one that starts meanwhile
checks that its messages are still there before it writes).
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass, field, replace

from charlie import conversations
from charlie import db as database
from charlie.conversations import Channel, Message
from charlie.db import now, transaction
from charlie.errors import (
    AlreadyForgotten,
    CharlieError,
    Forbidden,
    ForgetUnfinished,
    NotFound,
)
from charlie.home import Home
from charlie.household import discord_places
from charlie.jsonvalue import JSON, JSONObject
from charlie.memory import decisions as decided
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.memory import summary as summary_layer
from charlie.memory.layers import Decision, Earlier, Memory, normalise
from charlie.retrieval import message_index, suggestions, usage
from charlie.retrieval.recall import recaller_for
from charlie.store import Connection
from charlie.users import User

CLAIM_WAIT = 10.0  # seconds to wait for a running distillation of the channel


@dataclass
class Forgotten:
    """What forgetting did (counts and the decisions flagged, never the forgotten text)."""

    messages: int = 0
    quotes: int = 0
    revisions: int = 0
    flagged: list[str] = field(default_factory=list)
    restated: int = 0  # decisions that only restated a forgotten message: gone with it


def planned(
    home: Home, channel: Channel, user: User, message_id: int, *, only: bool = False
) -> list[Message]:
    """The messages `forget` would take (the message, then its answers), or a refusal that
    says why not. The message may be in any thread of `channel`'s project or channel."""
    thread = conversations.thread_holding(home, channel, message_id)
    if thread is None:
        threads = [t.conversation_id for t in conversations.thread_channels(home, channel)]
        if message_index.was_forgotten(home, message_id, threads):  # a forget tried again
            lead = f"Message {message_id} is already forgotten"
            _scrub_index(home, lead)  # what a busy index left undone, done now
            raise AlreadyForgotten(f"{lead}, and the search index is scrubbed of it.")
        raise NotFound(f"There is no message {message_id} in {channel.label}.")
    message = conversations.get_message(home, thread, message_id)
    _may_forget(home, thread, user, message)
    taken = [message]
    if message.role == "user" and not only:
        taken += _answers(home, thread, message)
    return taken


def _answers(home: Home, thread: Channel, message: Message) -> list[Message]:
    """Charlie's answers to `message`: its replies, the ones set aside included."""
    return [
        conversations.get_message(home, thread, i)
        for i in conversations.answer_ids(home, message.id)
    ]


def _message(home: Home, thread: Channel, message_id: int) -> Message | None:
    try:
        return conversations.get_message(home, thread, message_id)
    except NotFound:
        return None


def _may_forget(home: Home, channel: Channel, user: User, message: Message) -> None:
    """Refuse, saying why, unless `user` may forget `message` (see the module docstring)."""
    if channel.private:
        if channel.owner is None or channel.owner.id != user.id:
            raise Forbidden("Only the owner of a private channel can forget its messages.")
        return
    if user.is_admin:
        return
    author = message.user_id
    if message.role == "assistant" and message.parent_id:
        asked = _message(home, channel, message.parent_id)
        author = asked.user_id if asked is not None and asked.role == "user" else None
    if author is None:
        raise Forbidden(
            "That message belongs to no account (imported history): only an administrator "
            "can forget it."
        )
    if author != user.id:
        raise Forbidden("You can only forget your own messages (or ask an administrator).")


def forget(
    home: Home, channel: Channel, user: User, message_id: int, *, only: bool = False
) -> Forgotten:
    """Forget message `message_id` (and, unless `only`, Charlie's answers to it)."""
    return forget_messages_of(
        home, channel, user, planned(home, channel, user, message_id, only=only), answers=not only
    )


def forget_thread(home: Home, thread: Channel, user: User) -> Forgotten:
    """Forget every message of `thread` (alternatives set aside included); refused whole if
    it holds a message `user` may not forget (someone else's, in a shared project)."""
    messages = [
        conversations.get_message(home, thread, i)
        for i in conversations.thread_message_ids(home, thread)
    ]
    for message in messages:
        _may_forget(home, thread, user, message)
    return forget_messages_of(home, thread, user, messages)


def forget_messages_of(
    home: Home, channel: Channel, user: User, messages: list[Message], *, answers: bool = True
) -> Forgotten:
    """Forget `messages` (already checked) everywhere; see the module docstring. With
    `answers`, Charlie's answers to the person's messages among them that were stored since
    they were planned (a reply that finished while forgetting waited) go too."""
    done = Forgotten()
    if not messages:  # a thread forgotten again: what a busy index left is finished
        _scrub_index(home, "There was nothing left to forget")
        return done
    token = _claim(home, channel)
    try:
        with transaction(home.db):
            if answers:
                messages = [*messages, *_answered_meanwhile(home, channel, messages)]
            ids = sorted({m.id for m in messages})
            gone = _gone(home, messages)
            done.quotes, done.flagged, done.restated = _from_memory(home, channel, ids, gone)
            done.revisions = _from_revisions(home, channel, ids, gone)
            _from_the_rest(home, channel, ids, gone)
            message_index.record_forgotten(home, ids)  # the index's to-do, in this transaction
            conversations.delete_messages(home, ids)
            _log(home, user, channel, len(ids))
        done.messages = len(ids)
    finally:
        distill.release(home, channel, token)
    database.checkpoint(home.db)  # nor charlie.db's write-ahead log
    _scrub_index(home, f"Forgot {len(ids)} message{'s' if len(ids) != 1 else ''}")
    return done


def _answered_meanwhile(home: Home, channel: Channel, messages: list[Message]) -> list[Message]:
    """Charlie's answers to the person's messages among `messages` not among them: stored
    after they were planned, while the model was still writing."""
    asked = [m.id for m in messages if m.role == "user"]
    if not asked:
        return []
    taken = {m.id for m in messages}
    return [
        conversations.get_message(home, replace(channel, conversation_id=thread), answer)
        for answer, thread in conversations.answers_to(home, asked)
        if answer not in taken
    ]


def _scrub_index(home: Home, lead: str) -> None:
    """Scrub the search index — derived data in a file of its own, `index.db` — of what was
    forgotten (this forget's messages, and any a busy index kept before). When it cannot be
    now (another process holds it, a full disk), say so after `lead` (what was done), naming
    the file at fault: whoever uses the index next finishes it (what is left to scrub is
    recorded: `charlie.retrieval.message_index.record_forgotten`)."""
    try:
        recaller_for(home).index.scrub()
    except (CharlieError, sqlite3.Error) as exc:  # a raw SQLite error is index.db's
        why = database.explain(exc, home.index_path) if isinstance(exc, sqlite3.Error) else exc
        raise ForgetUnfinished(
            f"{lead}, but the search index is not scrubbed yet. {why or exc} Nothing needs "
            "redoing: the index is scrubbed by itself as soon as it can be (by the next "
            "search, the indexer or the next forget), and no search finds what was forgotten "
            "meanwhile."
        ) from exc


def _log(home: Home, user: User, channel: Channel, messages: int) -> None:
    """Write in the forget log when, by whom, where and how many: never what."""
    home.db.execute(
        "INSERT INTO forget_log (at, by_user_id, place, messages) VALUES (?, ?, ?, ?)",
        (now(), user.id, _place(channel), messages),
    )


def detach_log(db: Connection, user: User) -> None:
    """Leave the forgets `user` did logged by no one (they are being removed)."""
    db.execute("UPDATE forget_log SET by_user_id = NULL WHERE by_user_id = ?", (user.id,))


def _place(channel: Channel) -> str:
    return f"project {channel.project.slug}" if channel.project else "a private channel"


def _claim(home: Home, channel: Channel) -> str:
    deadline = time.monotonic() + CLAIM_WAIT
    while True:
        token = distill.claim(home, channel)
        if token is not None:
            return token
        if time.monotonic() > deadline:
            raise CharlieError(
                f"A distillation of {channel.label} is running; nothing was forgotten yet. "
                "Try again in a moment."
            )
        time.sleep(0.2)


# ---------------------------------------------------------------- memory


DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Gone:
    """What is forgotten, as the scrubbing needs it: the messages' texts, and the tokens with
    a digit only they hold — a code, a PIN, a password no other stored message says."""

    said: list[str]
    only: frozenset[str] = frozenset()

    def holds_theirs(self, text: str) -> bool:
        """Whether `text` holds a word only the forgotten messages hold."""
        return bool(self.only) and not self.only.isdisjoint(_tokens(text))

    def echoed_in(self, text: str) -> bool:
        """Whether `text`, kept beside the messages (a log of a distillation, a trace),
        holds something of the forgotten ones: a word only they held, or two or more content
        words nearly all of them said in one ("gate code" from "Should the gate code be
        QUAIL9182?"); one common word alone is not."""
        if self.holds_theirs(text):
            return True
        mine = decided.words(text)
        return len(mine) >= 2 and any(
            len(mine & decided.words(message)) >= decided.SAME * len(mine) for message in self.said
        )


def _tokens(text: str) -> set[str]:
    return {w.strip("'-.") for w in re.findall(r"[\w'.-]+", text.lower())} - {""}


def _gone(home: Home, messages: list[Message]) -> Gone:
    """The forgotten `messages` as `Gone`: each token of theirs with a digit ("4471",
    "orchid-lantern-42") is looked for in every other stored message (a rare action: a scan
    a token). Plain words are not: "oak" said once is no secret, and a decision or summary
    about oak stays."""
    ids = [m.id for m in messages]
    candidates = {
        w for m in messages for w in _tokens(m.content) if len(w) >= 3 and DIGIT.search(w)
    }
    only = {word for word in candidates if not conversations.said_elsewhere(home, word, ids)}
    said = [normalise(m.content) for m in messages if normalise(m.content)]
    return Gone(said, frozenset(only))


def _said_in(text: str, said: list[str]) -> bool:
    quoted = normalise(text)
    return bool(quoted) and any(quoted in message for message in said)


def restates(decision: str, said: list[str]) -> bool:
    """Whether a decision is one of the forgotten messages said again: nearly all of its
    words and of the message's in common ("The alarm code is 4471" from "The alarm code
    is 4471."), so keeping it would keep the forgotten text."""
    mine = decided.words(decision)
    for message in said:
        theirs = decided.words(message)
        shared = len(mine & theirs)
        if mine and theirs and shared >= decided.SAME * max(len(mine), len(theirs)):
            return True
    return False


def _scrubbed(
    layers: Memory, ids: set[int], gone: Gone, *, flag: bool = True, charlies: list[str]
) -> tuple[Memory, int, list[str], int]:
    """`layers` without the quotes said in the forgotten messages and without their ids in
    the provenance; a decision left with no source is flagged (when `flag`: the current
    memory, not its history) — or, when it only restated a forgotten message, taken out
    with them as a quote of them is. A decision Charlie drew (one with sources) that holds a
    word only they held goes whichever message it credits: a distillation can carry a code
    into a sentence it credits to a later message. The summary's sentences
    Charlie wrote (`charlies`; a person's are theirs) lose those holding such a word. Also
    returns the quotes taken, the decisions flagged and the decisions taken."""
    said = gone.said
    quotes = [q for q in layers.quotes if not _said_in(q.text, said)]
    flagged: list[str] = []
    decisions: list[Decision] = []
    for decision in layers.decisions:
        if decision.sources and gone.holds_theirs(decision.text):
            continue  # Charlie carried the code into it, whichever message it credits
        left = tuple(i for i in decision.sources if i not in ids)
        if len(left) < len(decision.sources):
            if not left and restates(decision.text, said):
                continue
            decision = replace(decision, sources=left)
            if not left and flag:
                decision = replace(decision, flag=memory.SOURCE_FORGOTTEN)
                flagged.append(decision.text)
        decisions.append(decision)
    earlier: list[Earlier] = [
        replace(
            e,
            sources=tuple(i for i in e.sources if i not in ids),
            changed_by=None if e.changed_by in ids else e.changed_by,
        )
        for e in layers.earlier
        if not (
            e.sources
            and (gone.holds_theirs(e.text) or (set(e.sources) <= ids and restates(e.text, said)))
        )
    ]
    taken = len(layers.decisions) - len(decisions)
    own = {normalise(c).lower() for c in charlies}
    summary = " ".join(
        sentence
        for sentence in summary_layer.sentences(layers.summary)
        if normalise(sentence).lower() not in own or not gone.holds_theirs(sentence)
    )
    summary = summary if summary != normalise(layers.summary) else layers.summary
    recorded = layers.charlie_sentences
    if recorded is not None:
        recorded = [c for c in recorded if not gone.holds_theirs(c)]
    scrubbed = replace(
        layers,
        summary=summary,
        quotes=quotes,
        decisions=decisions,
        earlier=earlier,
        charlie_sentences=recorded,
    )
    return scrubbed, len(layers.quotes) - len(quotes), flagged, taken


def _changed(scrubbed: Memory, layers: Memory) -> bool:
    return scrubbed != layers or scrubbed.charlie_sentences != layers.charlie_sentences


def _from_memory(
    home: Home, channel: Channel, ids: list[int], gone: Gone
) -> tuple[int, list[str], int]:
    if not channel.private:
        memory.sync_hand_edits(home, channel)  # a hand edit is kept, and scrubbed too
    current = memory.load(home, channel)
    written = memory.last_charlie_revision(home, channel)
    charlies = summary_layer.charlies(written.memory if written else None)
    scrubbed, quotes, flagged, taken = _scrubbed(current, set(ids), gone, charlies=charlies)
    if _changed(scrubbed, current):
        memory.save(home, channel, scrubbed, "forget")
    return quotes, flagged, taken


def _from_revisions(home: Home, channel: Channel, ids: list[int], gone: Gone) -> int:
    """Every stored revision of the channel's memory, scrubbed the same way (the summaries
    of those Charlie wrote, too: a person's own summary is theirs)."""
    changed = 0
    for revision in memory.revisions(home, channel):
        theirs = revision.source in memory.PERSON_SOURCES  # or an undo to one of theirs
        theirs = theirs or revision.source.startswith("undo:")
        recorded = revision.memory.charlie_sentences
        charlies = (recorded or []) if theirs else summary_layer.charlies(revision.memory)
        scrubbed, *_ = _scrubbed(revision.memory, set(ids), gone, flag=False, charlies=charlies)
        if _changed(scrubbed, revision.memory):
            memory.rewrite_revision(home, revision.id, scrubbed)
            changed += 1
    return changed


# ---------------------------------------------------------------- the rest


FORGOTTEN = "(forgotten)"  # what stands in a trace for words of a forgotten message
UNKEPT_ERROR = "(not kept: it may have quoted a message since forgotten)"


def _from_the_rest(home: Home, channel: Channel, ids: list[int], gone: Gone) -> None:
    """Suggestions and usage left by the messages, and what else kept their words: other
    replies' traces (search hits of them, a query or result echoing them) and the records of
    distillations (quotes and decisions refused or left out, and why; the error of a failed
    one, which may quote the model's answer about them)."""
    offered = suggestions.offered_under(home.db, ids)
    discord_places.forget_offers(home.db, offered)
    suggestions.delete(home.db, offered)
    usage.forget_messages(home.db, ids)
    threads = conversations.every_thread(home, channel)  # all that saw them, or quote them
    _from_traces(home, threads, {usage.message_key(i) for i in ids}, gone)
    _from_distillations(home, threads, ids, gone)


def _from_traces(home: Home, threads: list[int], keys: set[str], gone: Gone) -> None:
    """Other replies' traces: a search hit of a forgotten message goes from any (someone may
    have searched every project); in the channel's own threads, what echoes them too."""
    for trace in conversations.traces_naming(home, threads):
        echoes = gone if trace.conversation_id in threads else None
        kept = [_scrubbed_step(step, keys, echoes) for step in trace.steps]
        if kept != trace.steps:
            conversations.rewrite_trace(home, trace.message_id, kept)


def _scrubbed_step(step: JSONObject, keys: set[str], gone: Gone | None) -> JSONObject:
    """A trace step without the hits of forgotten messages, and its free text (the tool's
    arguments, its summary, a hit's snippet, a guard's detail) standing as `FORGOTTEN` where
    it echoes them (`gone`). The step's kind and names stay: it is read back as before."""
    step = _without_hits(step, keys)
    if gone is None:
        return step
    out = dict(step)
    for name in ("summary", "detail", "reason"):
        if isinstance(text := out.get(name), str) and gone.echoed_in(text):
            out[name] = FORGOTTEN
    if "arguments" in out:
        out["arguments"] = _redacted(out["arguments"], gone)
    if isinstance(hits := out.get("hits"), list):
        out["hits"] = [
            {k: _redacted(v, gone) if k in ("title", "snippet") else v for k, v in hit.items()}
            if isinstance(hit, dict)
            else hit
            for hit in hits
        ]
    return out if out != step else step


def _without_hits(step: JSONObject, keys: set[str]) -> JSONObject:
    hits = step.get("hits")
    if not isinstance(hits, list):
        return step
    kept = [h for h in hits if not (isinstance(h, dict) and h.get("key") in keys)]
    if len(kept) == len(hits):
        return step
    count = step.get("count")
    return {
        **step,
        "hits": kept,
        "count": count - (len(hits) - len(kept)) if isinstance(count, int) else count,
    }


def _redacted(value: JSON, gone: Gone) -> JSON:
    if isinstance(value, str):
        return FORGOTTEN if gone.echoed_in(value) else value
    if isinstance(value, list):
        return [_redacted(v, gone) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v, gone) for k, v in value.items()}
    return value


def _from_distillations(home: Home, threads: list[int], ids: list[int], gone: Gone) -> None:
    """What the channel's distillations recorded of the messages: the quotes and decisions
    they refused or left out (an entry naming a forgotten message, or holding its words,
    goes), and the error of a failed one, which may quote the model's answer — dropped where
    its messages included a forgotten one, or where it echoes one."""
    said, named = gone.said, {str(i) for i in ids}

    def theirs(entry: object) -> bool:
        if not isinstance(entry, dict):
            return False
        values = [v for v in entry.values() if isinstance(v, str)]
        return entry.get("message") in named or any(
            _said_in(v, said) or gone.echoed_in(v) for v in values
        )

    for refusals in distill.refusals_in(home, threads):
        kept = replace(
            refusals,
            quotes=[e for e in refusals.quotes if not theirs(e)],
            decisions=[e for e in refusals.decisions if not theirs(e)],
        )
        if kept != refusals:
            distill.rewrite_refusals(home, kept)
    covered = conversations.failed_distillations_over(home, ids)
    for distillation, error in distill.errors_in(home, threads):
        if error != UNKEPT_ERROR and (distillation in covered or gone.echoed_in(error)):
            distill.replace_error(home, distillation, UNKEPT_ERROR)
