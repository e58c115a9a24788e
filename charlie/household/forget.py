"""Forgetting a message for good, everywhere Charlie keeps something derived from it.

A person's message goes with Charlie's answers to it (they usually repeat it), unless only
that one message is asked for. With it go: the quotes of the memory said in it (in the
current memory and in every stored revision), its place in the decisions' provenance (a
decision whose only source it was is flagged for the person to keep or drop — unless it
only restated the message, "The alarm code is 4471": then it goes too, as a quote would), the search
index of messages and so recall, the suggestions offered under it and the usage it left,
the search hits of other replies' traces that showed it, and the quotes a distillation
refused from it. Exports made afterwards cannot hold it. What was forgotten is never
logged: the forget log says when, by whom, where and how many messages.

Who may forget: in a private channel, only its owner; in a shared project, the person who
wrote the message (for one of Charlie's answers, the person it answered), or an
administrator; an imported message, only an administrator. A distillation of the channel
holds its claim while it runs, so forgetting waits for it (and one that starts meanwhile
checks that its messages are still there before it writes).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from charlie import conversations
from charlie.conversations import Channel, Message
from charlie.db import now, transaction
from charlie.errors import CharlieError, Forbidden, NotFound
from charlie.home import Home
from charlie.household.removal import forget_messages
from charlie.memory import decisions as decided
from charlie.memory import distill
from charlie.memory import layers as memory
from charlie.memory import summary as summary_layer
from charlie.memory.layers import Decision, Earlier, Memory, normalise
from charlie.retrieval.recall import recaller_for
from charlie.retrieval.usage import message_key
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
        raise NotFound(f"There is no message {message_id} in {channel.label}.")
    message = conversations.get_message(home, thread, message_id)
    _may_forget(home, thread, user, message)
    taken = [message]
    if message.role == "user" and not only:
        taken += _answers(home, thread, message)
    return taken


def _answers(home: Home, thread: Channel, message: Message) -> list[Message]:
    """Charlie's answers to `message`: its replies, the ones set aside included."""
    rows = home.db.execute(
        "SELECT id FROM messages WHERE parent_id = ? AND role = 'assistant' ORDER BY id",
        (message.id,),
    ).fetchall()
    return [conversations.get_message(home, thread, int(r[0])) for r in rows]


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
    rows = home.db.execute(
        "SELECT id FROM messages WHERE conversation_id = ? ORDER BY id", (thread.conversation_id,)
    ).fetchall()
    messages = [conversations.get_message(home, thread, int(r[0])) for r in rows]
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
    if not messages:
        return done
    token = _claim(home, channel)
    try:
        with transaction(home.db):
            if answers:
                messages = [*messages, *_answered_meanwhile(home, channel, messages)]
            ids = sorted({m.id for m in messages})
            spans = _spans(home, ids)
            gone = _gone(home, messages)
            done.quotes, done.flagged, done.restated = _from_memory(home, channel, ids, gone)
            done.revisions = _from_revisions(home, channel, ids, gone)
            _from_the_rest(home, ids, gone)
            _delete(home, ids)
            home.db.execute(
                "INSERT INTO forget_log (at, by_user_id, place, messages) VALUES (?, ?, ?, ?)",
                (now(), user.id, _place(channel), len(ids)),
            )
        done.messages = len(ids)
    finally:
        distill.release(home, channel, token)
    forget_messages(home, ids)  # the search index: derived data in its own file
    recaller_for(home).index.mend(spans)  # the words beside them, and no segment keeps them
    home.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # nor the write-ahead log
    return done


def _answered_meanwhile(home: Home, channel: Channel, messages: list[Message]) -> list[Message]:
    """Charlie's answers to the person's messages among `messages` not among them: stored
    after they were planned, while the model was still writing."""
    asked = [m.id for m in messages if m.role == "user"]
    if not asked:
        return []
    taken = {m.id for m in messages}
    rows = home.db.execute(
        f"SELECT id, conversation_id FROM messages WHERE role = 'assistant' "
        f"AND parent_id IN ({_marks(asked)})",
        asked,
    ).fetchall()
    return [
        conversations.get_message(home, replace(channel, conversation_id=int(r[1])), int(r[0]))
        for r in rows
        if int(r[0]) not in taken
    ]


def _spans(home: Home, ids: list[int]) -> dict[int, tuple[str, str]]:
    """Each conversation's first and last time among the messages `ids`."""
    rows = home.db.execute(
        f"SELECT conversation_id, min(created_at), max(created_at) FROM messages "
        f"WHERE id IN ({_marks(ids)}) GROUP BY conversation_id",
        ids,
    ).fetchall()
    return {int(r[0]): (str(r[1]), str(r[2])) for r in rows}


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
    marks = _marks(ids)
    only = {
        word
        for word in candidates
        if home.db.execute(
            f"SELECT 1 FROM messages WHERE id NOT IN ({marks}) AND instr(lower(content), ?) > 0 "
            "LIMIT 1",
            [*ids, word],
        ).fetchone()
        is None
    }
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
    memory, not its history) — or, when it only restated a forgotten message or holds a
    word only they held, taken out with them as a quote of them is. The summary's sentences
    Charlie wrote (`charlies`; a person's are theirs) lose those holding such a word. Also
    returns the quotes taken, the decisions flagged and the decisions taken."""
    said = gone.said
    quotes = [q for q in layers.quotes if not _said_in(q.text, said)]
    flagged: list[str] = []
    decisions: list[Decision] = []
    for decision in layers.decisions:
        left = tuple(i for i in decision.sources if i not in ids)
        if len(left) < len(decision.sources):
            if not left and (restates(decision.text, said) or gone.holds_theirs(decision.text)):
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
            and set(e.sources) <= ids
            and (restates(e.text, said) or gone.holds_theirs(e.text))
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
            home.db.execute(
                "UPDATE memory_revisions SET layers = ? WHERE id = ?",
                (scrubbed.to_json(), revision.id),
            )
            changed += 1
    return changed


# ---------------------------------------------------------------- the rest


def _marks(values: Iterable[object]) -> str:
    return ", ".join("?" for _ in values)


def _from_the_rest(home: Home, ids: list[int], gone: Gone) -> None:
    """Suggestions and usage left by the messages, search hits of them in other replies'
    traces, and what distillation records refused or left out of them."""
    said = gone.said
    marks = _marks(ids)
    home.db.execute(
        "DELETE FROM discord_suggestion_messages WHERE suggestion_id IN "
        f"(SELECT id FROM suggestions WHERE message_id IN ({marks}))",
        ids,
    )
    home.db.execute(f"DELETE FROM suggestions WHERE message_id IN ({marks})", ids)
    keys = [message_key(i) for i in ids]
    home.db.execute(f"DELETE FROM usage_events WHERE note IN ({_marks(keys)})", keys)
    for row in home.db.execute(
        "SELECT id, trace FROM messages WHERE trace IS NOT NULL AND trace LIKE '%message:%'"
    ).fetchall():
        steps = json.loads(row["trace"])
        kept = [_without_hits(step, set(keys)) for step in steps]
        if kept != steps:
            home.db.execute(
                "UPDATE messages SET trace = ? WHERE id = ?",
                (json.dumps(kept, ensure_ascii=False), row["id"]),
            )
    for row in home.db.execute(
        "SELECT id, rejected_quotes FROM distillations WHERE rejected_quotes <> '[]'"
    ).fetchall():
        rejected = json.loads(row["rejected_quotes"])
        kept_quotes = [q for q in rejected if not _said_in(str(q.get("text", "")), said)]
        if kept_quotes != rejected:
            home.db.execute(
                "UPDATE distillations SET rejected_quotes = ? WHERE id = ?",
                (json.dumps(kept_quotes, ensure_ascii=False), row["id"]),
            )
    for row in home.db.execute(  # what a distillation refused or left out, and why
        "SELECT id, refused_decisions FROM distillations WHERE refused_decisions <> '[]'"
    ).fetchall():
        refused = json.loads(row["refused_decisions"])
        kept = [
            r
            for r in refused
            if not any(
                isinstance(v, str) and (_said_in(v, said) or gone.holds_theirs(v))
                for v in r.values()
            )
        ]
        if kept != refused:
            home.db.execute(
                "UPDATE distillations SET refused_decisions = ? WHERE id = ?",
                (json.dumps(kept, ensure_ascii=False), row["id"]),
            )


def _without_hits(step: dict[str, object], keys: set[str]) -> dict[str, object]:
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


def _delete(home: Home, ids: list[int]) -> None:
    """The rows themselves; a message that followed one of them follows its parent now."""
    marks = _marks(ids)
    for message_id in ids:
        row = home.db.execute(
            "SELECT parent_id FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        if row is None:
            continue
        home.db.execute(
            "UPDATE messages SET parent_id = ? WHERE parent_id = ?", (row["parent_id"], message_id)
        )
    threads = [
        int(r[0])
        for r in home.db.execute(
            f"SELECT DISTINCT conversation_id FROM messages WHERE id IN ({marks})", ids
        )
    ]
    home.db.execute(f"DELETE FROM messages WHERE id IN ({marks})", ids)
    for thread in threads:
        conversations.retitle(home, thread)  # an untitled thread was named by its words
