"""Conversation recall: what was said, found again — by meaning, by words, and by when.

Every stored message is in the search index (`charlie.retrieval.message_index`). A recall ranks the
messages of some conversations against a question:

- **vector**: cosine of the question to the message's own words ("Speaker: text");
- **keyword**: FTS5 BM25 over the question's most meaningful terms, matched against the
  message, its speaker and the messages just around it (its `context`), divided by the
  question's best BM25;
- **fusion**: `alpha × cosine + (1 − alpha) × BM25 / best BM25` for every candidate either
  side found — both signals are computed for all of them, so a message found by one side
  is not scored 0 on the other;
- **when**: a time expression in the question ("last spring", "in May", "three weeks ago",
  `charlie.retrieval.timeexpr`) is taken out of the words searched; messages from then are searched
  on their own too, and score `× (1 + time_weight)`. "The first time" / "most recently"
  reorders the messages that score close to the best by time. Recency is a tie-breaker,
  never a rank;
- **usage**: a recalled message the person's answers drew on gets the notes' boost rule,
  `score × (1 + boost × 0.3)`, fading when unused (`charlie.retrieval.usage`).

Which conversations are searched is decided here and nowhere else (`conversations_for`):
the channel asked from, and, when asked, every shared project; a private channel only ever
by its owner, and never from a shared channel. Every hit is checked against that list again
when its message is read.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from charlie import conversations, projects
from charlie.conversations import Channel, Message
from charlie.errors import CharlieError, Forbidden
from charlie.home import Home
from charlie.retrieval.deferred import Deferred
from charlie.retrieval.index import Index, embedder_of
from charlie.retrieval.keywords import literals, match_expression, top_terms, with_parts
from charlie.retrieval.message_index import MessageIndex, catch_up, conversation_token
from charlie.retrieval.message_vectors import ConversationVectors
from charlie.retrieval.timeexpr import When, parse_when
from charlie.retrieval.usage import UsageModel, message_key
from charlie.users import User

MAX_QUERY_CHARS = 2000


class RecallError(CharlieError):
    """A question that cannot be recalled (empty, say)."""


@dataclass(frozen=True)
class RecallConfig:
    alpha: float = 0.5  # weight of the cosine against the scaled BM25 (LoCoMo dev: flat 0.4-0.6)
    candidates: int = 100  # per signal, before fusion
    keyword_terms: int = 12
    speaker_weight: float = 1.0  # BM25 column weights: speaker, own text, neighbours' text
    text_weight: float = 1.0
    context_weight: float = 0.5  # LoCoMo dev: 0.5 lifts recall@5 by 1.5 points over 1.0
    time_weight: float = 1.0  # a message from the time asked about scores × (1 + this)
    order_band: float = 0.6  # "the first time": reorder hits within this share of the best
    common_share: float = 0.2  # terms in more of the messages searched are left out (keyword side)
    max_matches: int = 1500  # the keyword side matches at most about this many messages


@dataclass
class RecallHit:
    message: Message
    conversation_id: int
    channel: str  # where it was said, as the person sees it: "project kitchen", "private"
    project: str | None
    score: float
    similarity: float
    vector: float = 0.0
    bm25: float = 0.0
    boost: float = 0.0
    in_time: bool | None = None  # inside the time asked about (None: none asked)
    around: list[Message] = field(default_factory=list)  # neighbours, oldest first, with it

    def why(self) -> str:
        """One line saying why this message ranked where it did."""
        parts = [f"score {self.score:.3f} = similarity {self.similarity:.3f}"]
        parts.append(f"cosine {self.vector:.3f}")
        parts.append(f"BM25 {self.bm25:.2f}")
        if self.in_time is not None:
            parts.append("in the time asked about" if self.in_time else "outside that time")
        if self.boost:
            parts.append(f"used before (boost {self.boost:.2f})")
        return " · ".join(parts)


@dataclass
class RecallResult:
    query: str
    hits: list[RecallHit]
    terms: list[str]
    when: When | None = None
    searched: list[str] = field(default_factory=list)  # the channels looked in
    truncated: bool = False
    incomplete: str | None = None  # why messages may be missing: some are not indexed yet


def conversations_for(
    home: Home, user: User, channel: Channel, *, everywhere: bool = False
) -> list[Channel]:
    """The threads a recall by `user` from `channel` may read: every thread of that channel
    (not those in the trash), plus every shared project's when `everywhere`. A private
    channel is readable by its owner alone, and a recall from a shared channel never reads
    any private one."""
    if channel.owner is not None and channel.owner.id != user.id:
        raise Forbidden("That private channel is not yours: only its owner can search it.")
    found = conversations.thread_channels(home, channel)
    if everywhere:
        for project in projects.list_projects(home):
            if channel.project is not None and project.id == channel.project.id:
                continue
            found += conversations.thread_channels(
                home, conversations.shared_channel(home, project)
            )
    return found


def recaller_for(home: Home) -> Recaller:
    """A recaller over `home`'s messages, with the embedding model loaded once per process
    (shared with note search, in `home.shared`)."""
    return Recaller(home, MessageIndex(Index(home, embedder_of(home))))


@dataclass
class TermCounts:
    """How many messages each term occurs in, per scope: kept by the process until the
    message index grows by a thousand or is rebuilt (`key`)."""

    key: tuple[str, int] = ("", -1)
    counts: dict[tuple[str, tuple[int, ...]], tuple[float, float, int]] = field(
        default_factory=dict
    )


class Recaller:
    """Runs recalls over one message index with one configuration."""

    def __init__(
        self,
        home: Home,
        index: MessageIndex,
        config: RecallConfig | None = None,
        usage: UsageModel | None = None,
    ) -> None:
        self.home = home
        self.index = index
        self.config = config or RecallConfig()
        self.usage = usage or UsageModel(
            half_life_days=home.settings.usage_half_life_days, weight=home.settings.usage_weight
        )

    def idf(self, term: str, scope: Sequence[int]) -> float:
        """BM25's IDF of `term` among the messages of the conversations `scope`; 0 when it
        never occurs there."""
        return self._counts(term, tuple(scope))[0]

    def searched_terms(self, terms: list[str], scope: Sequence[int]) -> list[str]:
        """The terms the keyword side matches, rarest first: not those in more than
        `common_share` of the messages (a speaker's name is in half a conversation: it
        widens the search and barely scores), and only while their messages add up to at
        most `max_matches` — FTS5 scores every message a term matches, so this bounds the
        work of a recall however long the conversation. The rarest term is kept whatever
        its share if it matches at most four times that; a question with no rarer term is
        left to the vector side.

        Everything is counted in the conversations searched (`scope`) only: what is said
        elsewhere — in someone's private channel — must not decide which terms are kept,
        as the terms are shown."""
        key = tuple(scope)
        known = sorted(
            (t for t in terms if self._counts(t, key)[2]), key=lambda t: self._counts(t, key)[2]
        )
        kept: list[str] = []
        matches = 0
        budget = self.config.max_matches
        for term in known:
            _, share, count = self._counts(term, key)
            if kept:
                if share > self.config.common_share or matches + count > budget:
                    continue
            elif count > 4 * budget:  # the rarest, however common, within four budgets
                break
            kept.append(term)
            matches += count
        return kept

    def _counts(self, term: str, scope: tuple[int, ...]) -> tuple[float, float, int]:
        """(IDF, share of the messages holding it, how many) in the conversations `scope`,
        counted once per process until the index has changed noticeably (FTS5 counts every
        match: a common term costs milliseconds)."""
        db = self.index.db
        state = db.execute(
            "SELECT group_concat(value) FROM index_state WHERE key IN (?, ?)",
            ("messages_generation", "messages_words_upto"),
        ).fetchone()[0]
        generation, _, upto = (state or "").rpartition(",")
        key = (generation, int(upto or 0) // 1000)
        kept = self.home.shared.of(TermCounts)
        if kept.key != key:
            kept.key, kept.counts = key, {}
        counts = kept.counts
        if ("", scope) not in counts:
            everything = conversations.count_in(self.home, scope)  # words indexed ahead count
            counts["", scope] = (0.0, 0.0, everything)
        if (term, scope) not in counts:
            expression = match_expression([term])
            total = counts["", scope][2]
            count = 0
            if expression is not None and total:
                count = self.index.count_matches(  # past four budgets a term is never searched
                    _in_scope(_in_words(expression), scope), 4 * self.config.max_matches + 1
                )
            idf = float(np.log(1 + (total - count + 0.5) / (count + 0.5))) if count else 0.0
            counts[term, scope] = (idf, count / total if total else 0.0, int(count))
        return counts[term, scope]

    def recall(
        self,
        user: User,
        channels: Sequence[Channel],
        query: str,
        *,
        limit: int = 10,
        around: int = 1,
        now: datetime | None = None,
    ) -> RecallResult:
        """The `limit` messages of `channels` that best answer `query`, each with `around`
        messages before and after it. `channels` come from `conversations_for`.

        A damaged index is rebuilt from the stored messages and the recall run again."""
        text = " ".join(query.split())
        if not text:
            raise RecallError("The question is empty: give some words to look for.")
        if limit < 1:
            raise RecallError("The number of results must be at least 1.")
        for channel in channels:
            if channel.owner is not None and channel.owner.id != user.id:
                raise Forbidden("That private channel is not yours: only its owner can search it.")
        try:
            catch_up(self.index)
            return self._said(self._recall(user, channels, text, limit, around, now), channels)
        except sqlite3.DatabaseError as exc:
            self.index.index.recover(exc)
        try:
            catch_up(self.index)
            return self._said(self._recall(user, channels, text, limit, around, now), channels)
        except sqlite3.DatabaseError as exc:
            raise self.index.index.unusable(exc) from exc

    def _said(self, result: RecallResult, channels: Sequence[Channel]) -> RecallResult:
        """`result`, saying so when some stored messages are not indexed yet (an index
        being rebuilt, a large import): they are being indexed in the background."""
        ids = sorted({c.conversation_id for c in channels})
        if not ids or not self.index.behind(ids):
            return result
        progress = self.index.progress(ids)
        if not progress.done:
            result.incomplete = (
                f"Charlie is still catching up ({progress.in_words()}): "
                f"{progress.total - progress.indexed:,} of {progress.total:,} messages are "
                + (
                    "found by their words only for now, not yet by their meaning."
                    if not progress.unworded
                    else "not fully indexed yet and may be missing from these results."
                )
                + " No message is lost."
            )
        return result

    def _recall(
        self,
        user: User,
        channels: Sequence[Channel],
        text: str,
        limit: int,
        around: int,
        now: datetime | None,
    ) -> RecallResult:
        truncated = len(text) > MAX_QUERY_CHARS
        text = text[:MAX_QUERY_CHARS]
        by_id = {c.conversation_id: c for c in channels}
        scope = sorted(by_id)
        when, rest = parse_when(text, now or datetime.now(UTC), earliest=self._earliest(by_id))
        words = rest if any(ch.isalnum() for ch in rest) else text
        terms = with_parts(
            [
                *(lit.text for lit in literals(words)),
                *top_terms(words, lambda t: self.idf(t, scope), self.config.keyword_terms),
            ]
        )
        terms = self.searched_terms(terms, scope)
        result = RecallResult(
            text, [], terms, when, list(dict.fromkeys(c.label for c in channels)), truncated
        )

        loaded = self.index.vectors()  # before the keyword side starts reading the file too
        tables = [loaded.conversations[i] for i in by_id if i in loaded.conversations]
        spans = when.spans if when is not None else ()
        # The keyword side runs beside the embedding and the vector side: SQLite, onnxruntime
        # and numpy all let go of the GIL, and the budget keeps the matches few.
        with Deferred(lambda: self._matches(terms, list(by_id)), True) as keyword:
            query = self.index.embedder.embed([words])[0]
            cosine: dict[int, float] = {}
            for table in tables:  # the best per conversation; the time asked about too
                cosine |= table.top(query, self.config.candidates)
                if spans:
                    inside = _inside(table.view()[1], spans)
                    cosine |= table.top(query, self.config.candidates, inside)
            matches = keyword.result()
        bm25 = _top(matches, self.config.candidates)
        if spans and matches:  # the best matches from the time asked about, on their own too
            ids = np.fromiter(matches, np.int64, len(matches))
            inside = ids[_inside(_times_of(tables, ids), spans)]
            bm25 |= _top({int(i): matches[int(i)] for i in inside}, self.config.candidates)
        for message_id in bm25.keys() - cosine.keys():  # both signals for every candidate
            cosine[message_id] = _cosine_of(tables, message_id, query)
        bm25 = {i: matches[i] for i in cosine if i in matches}

        top = max(bm25.values(), default=0.0) or 1.0
        alpha = self.config.alpha
        similarity = {
            i: alpha * max(cos, 0.0) + (1 - alpha) * bm25.get(i, 0.0) / top
            for i, cos in cosine.items()
        }
        return self._rank(user, by_id, similarity, cosine, bm25, when, limit, around, result)

    def _rank(
        self,
        user: User,
        by_id: dict[int, Channel],
        similarity: dict[int, float],
        cosine: dict[int, float],
        bm25: dict[int, float],
        when: When | None,
        limit: int,
        around: int,
        result: RecallResult,
    ) -> RecallResult:
        rows = conversations.shown_places(self.home, list(similarity))
        boosts = self.usage.boosts(
            self.home.db, user.id, {message_key(i): [] for i in rows}, explain=False
        )
        scored: list[tuple[float, float, int, bool | None]] = []
        for message_id, (conversation_id, created_at) in rows.items():
            if conversation_id not in by_id:  # never outside the channels asked for
                continue
            moment = datetime.fromisoformat(created_at)
            in_time = when.contains(moment) if when is not None and when.spans else None
            score = similarity[message_id] * (1 + self.config.time_weight * bool(in_time))
            score = self.usage.apply(score, boosts[message_key(message_id)].value)
            scored.append((score, moment.timestamp(), message_id, in_time))
        scored.sort(key=lambda s: (-round(s[0], 6), -s[1]))  # recency only breaks ties
        if when is not None and when.order is not None and scored:
            band = [s for s in scored if s[0] >= self.config.order_band * scored[0][0]]
            band.sort(key=lambda s: s[1], reverse=when.order == "last")
            scored = band + scored[len(band) :]
        for score, _, message_id, in_time in scored[:limit]:
            channel = by_id[rows[message_id][0]]
            shown = conversations.around(self.home, channel, message_id, around, around)
            message = next(m for m in shown if m.id == message_id)
            boost = boosts[message_key(message_id)].value
            result.hits.append(
                RecallHit(
                    message,
                    channel.conversation_id,
                    "private" if channel.private else channel.label,
                    channel.project.slug if channel.project else None,
                    score,
                    similarity[message_id],
                    cosine.get(message_id, 0.0),
                    bm25.get(message_id, 0.0),
                    boost,
                    in_time,
                    shown,
                )
            )
        return result

    def _matches(self, terms: list[str], conversation_ids: list[int]) -> dict[int, float]:
        """BM25 (higher is better) of every message of these conversations that matches any
        of `terms` (`searched_terms` keeps them within the budget)."""
        expression = match_expression(terms)
        if expression is None or not conversation_ids:
            return {}
        match = _in_scope(_in_words(expression), conversation_ids)
        c = self.config
        return self.index.bm25(match, (c.speaker_weight, c.text_weight, c.context_weight))

    def _earliest(self, by_id: dict[int, Channel]) -> datetime | None:
        found = [conversations.first_time(self.home, i) for i in by_id]
        times = [datetime.fromisoformat(t) for t in found if t]
        return min(times) if times else None


def _in_scope(match: str, conversation_ids: Sequence[int]) -> str:
    """`match` limited to these conversations (their scope tokens, in the MATCH itself)."""
    return f"{match} AND scope : ({' OR '.join(conversation_token(c) for c in conversation_ids)})"


def _in_words(expression: str) -> str:
    """A MATCH expression limited to a message's words, never its scope token."""
    return f"{{speaker text context}} : ({expression})"


def _top(scores: dict[int, float], k: int) -> dict[int, float]:
    if len(scores) <= k:
        return dict(scores)
    return dict(heapq.nlargest(k, scores.items(), key=lambda item: item[1]))


def _times_of(tables: Sequence[ConversationVectors], ids: np.ndarray) -> np.ndarray:
    """The time (seconds) of each message in `ids`, from the loaded tables (NaN if absent)."""
    out = np.full(len(ids), np.nan)
    for table in tables:
        known, at = table.view()
        rows = np.searchsorted(known, ids).clip(0, max(len(known) - 1, 0))
        if len(known):
            found = known[rows] == ids
            out[found] = at[rows[found]]
    return out


def _inside(at: np.ndarray, spans: Sequence[tuple[datetime, datetime]]) -> np.ndarray:
    mask = np.zeros(len(at), bool)
    for start, end in spans:
        mask |= (at >= start.timestamp()) & (at < end.timestamp())
    return mask


def _cosine_of(tables: Sequence[ConversationVectors], message_id: int, query: np.ndarray) -> float:
    """The cosine of one message (a table's ids are sorted: messages are indexed in id order)."""
    for table in tables:
        ids, _ = table.view()
        row = int(np.searchsorted(ids, message_id))
        if row < len(ids) and ids[row] == message_id:
            return float(table.matrix[row] @ query)
    return 0.0
