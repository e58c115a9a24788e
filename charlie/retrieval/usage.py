"""The usage model: what a person did with notes, turned into a ranking boost.

Events (a note viewed, a tag used, a suggestion shown / accepted / dismissed, a note cited
in an answer) are rows in `usage_events`, one person's each. From them `UsageModel.boosts`
computes a per-note boost in [0, 1]: each event weighs by its kind (`WEIGHTS`) and fades
with a half-life; engagement with a note's tags lifts it, capped; the sum is squashed into
[0, 1) by `1 - exp(-score / saturation)`. Retrieval then ranks by
`similarity × (1 + boost × weight)` (`apply`). docs/usage-model.md has the numbers and a
worked example.

Boosts are per person: every query filters on the user, so one person's events — their
private channel's above all — never change another person's ranking. A note is named by its
stable key "project-slug/note-name" (see `note_key`), never by a search-index row id: the
index is derived data and gets rebuilt.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, cast, get_args

from charlie.db import now as db_now
from charlie.db import placeholders
from charlie.errors import CharlieError, NotFound, SettingsError
from charlie.store import Connection
from charlie.text import plural
from charlie.users import User

EventKind = Literal["view", "tag", "shown", "accepted", "dismissed", "cited"]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)

# How much one fresh event adds to a note's score. Showing a suggestion is recorded but is
# not using it; a dismissal pulls the note down (the total never goes below 0). A tag event
# adds its weight to every note carrying that tag, up to `UsageModel.tag_cap` per note.
WEIGHTS: Mapping[EventKind, float] = MappingProxyType(
    {
        "view": 1.0,
        "cited": 2.0,
        "accepted": 3.0,
        "shown": 0.0,
        "dismissed": -1.5,
        "tag": 0.5,
    }
)

DEFAULT_HALF_LIFE_DAYS = 30.0
DEFAULT_WEIGHT = 0.3
DEFAULT_SATURATION = 5.5  # five fresh views give a boost of about 0.6
DEFAULT_TAG_CAP = 2.0  # tags alone lift a note at most as much as two fresh views

_NOTE_KINDS = tuple(kind for kind in EVENT_KINDS if kind != "tag" and WEIGHTS[kind] != 0)
_CASES = " ".join(f"WHEN '{kind}' THEN {WEIGHTS[kind]}" for kind in _NOTE_KINDS)
# `at` is always written as UTC ISO-8601 of one width, so MAX(at) is the latest event.
_DECAY = "exp(:rate * CASE WHEN julianday(at) < :now THEN julianday(at) - :now ELSE 0.0 END)"
_NOTE_QUERY = f"""
    SELECT note, kind, COUNT(*) AS n, :now - julianday(MAX(at)) AS last_age,
           SUM({_DECAY}) * (CASE kind {_CASES} END) AS amount
    FROM usage_events
    WHERE user_id = :user
      AND note IN (SELECT value FROM json_each(:keys))
      AND kind IN ({", ".join(f"'{kind}'" for kind in _NOTE_KINDS)})
    GROUP BY note, kind
"""
_TOTAL_QUERY = f"""
    SELECT note, SUM({_DECAY} * (CASE kind {_CASES} END)) AS amount
    FROM usage_events
    WHERE user_id = :user
      AND note IN (SELECT value FROM json_each(:keys))
      AND kind IN ({", ".join(f"'{kind}'" for kind in _NOTE_KINDS)})
    GROUP BY note
"""
_TAG_QUERY = f"""
    SELECT tag, COUNT(*) AS n, :now - julianday(MAX(at)) AS last_age,
           SUM({_DECAY}) * {WEIGHTS["tag"]} AS amount
    FROM usage_events
    WHERE user_id = :user AND tag IN (SELECT value FROM json_each(:keys))
    GROUP BY tag
"""


class InvalidUsageEvent(CharlieError):
    """A usage event that cannot be recorded as given."""


def note_key(project_slug: str, note_name: str) -> str:
    """The stable key of a note: "project-slug/note-name", the name being the file stem."""
    return check_note_key(f"{project_slug}/{note_name}")


MESSAGE_KEY = "message:"


def message_key(message_id: int) -> str:
    """The key under which a recalled message's use is recorded: "message:<id>"."""
    return f"{MESSAGE_KEY}{int(message_id)}"


def check_note_key(key: str) -> str:
    """`key` itself if it has the shape "project-slug/note-name" (or is a message's key,
    "message:<id>"); else `InvalidUsageEvent`.

    The name may hold folders ("kitchen/recipes/pasta"): notes can live in sub-folders.
    """
    if key.startswith(MESSAGE_KEY) and key[len(MESSAGE_KEY) :].isdigit():
        return key
    slug, sep, name = key.partition("/")
    parts = name.split("/")
    if not sep or not slug.strip() or not all(part.strip() for part in parts):
        raise InvalidUsageEvent(
            f"{key!r} is not a note key: write it as 'project-slug/note-name' "
            "(the note's file name without .md)."
        )
    return key


def normalise_tag(tag: str) -> str:
    """A tag as usage events store it: lower-case, without the leading '#'."""
    cleaned = _clean_tag(tag)
    if not cleaned:
        raise InvalidUsageEvent(f"{tag!r} is not a tag: give its name, e.g. 'jwt' or '#jwt'.")
    return cleaned


def _clean_tag(tag: str) -> str:
    return tag.strip().lstrip("#").strip().lower()


def _kind(kind: str) -> EventKind:
    if kind not in EVENT_KINDS:
        raise InvalidUsageEvent(
            f"{kind!r} is not a usage event: use one of {', '.join(EVENT_KINDS)}."
        )
    return kind


def _aware(moment: datetime, what: str) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidUsageEvent(f"{what} {moment.isoformat()} has no time zone: give one.")
    return moment.astimezone(UTC)


def _julian_day(moment: datetime) -> float:
    """The moment as SQLite's `julianday()` counts it."""
    return moment.timestamp() / 86400.0 + 2440587.5


def record(
    db: Connection,
    user_id: int,
    kind: str,
    *,
    note: str | None = None,
    tag: str | None = None,
    private: bool = False,
    at: datetime | None = None,
) -> int:
    """Record that `user_id` did `kind` (an `EventKind`) with a note or a tag; the event's id.

    Note events ('view', 'shown', 'accepted', 'dismissed', 'cited') need `note`, its key
    "project-slug/note-name". A 'tag' event needs `tag`; `note`, where the tag was used, is
    optional and kept for inspection only. `private` marks an event from the person's private
    channel; like every event it only ever shapes that person's own ranking.
    """
    checked = _kind(kind)
    if checked == "tag":
        if tag is None:
            raise InvalidUsageEvent("A 'tag' event needs the tag that was used.")
        tag = normalise_tag(tag)
    else:
        if note is None:
            raise InvalidUsageEvent(
                f"A {checked!r} event needs the note it is about ('project-slug/note-name')."
            )
        if tag is not None:
            raise InvalidUsageEvent(
                f"A {checked!r} event is about a note, not a tag: record the tag "
                "with its own 'tag' event."
            )
    if note is not None:
        check_note_key(note)
    stamp = (
        db_now() if at is None else _aware(at, "The event time").isoformat(timespec="milliseconds")
    )
    try:
        cursor = db.execute(
            "INSERT INTO usage_events (user_id, kind, note, tag, private, at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (user_id, checked, note, tag, int(private), stamp),
        )
    except sqlite3.IntegrityError as exc:
        if "FOREIGN KEY" in str(exc).upper():
            raise NotFound(f"There is no user with id {user_id}.") from exc
        raise
    return cast(int, cursor.lastrowid)


def forget(db: Connection, note: str) -> int:
    """Drop every person's events about a deleted note; how many were dropped.

    Tag events made from that note stay (their engagement is with the tag), without the note.
    """
    check_note_key(note)
    db.execute("SAVEPOINT usage_forget")
    try:
        dropped = db.execute(
            "DELETE FROM usage_events WHERE note = ? AND kind <> 'tag'", (note,)
        ).rowcount
        db.execute("UPDATE usage_events SET note = NULL WHERE note = ? AND kind = 'tag'", (note,))
    except BaseException:
        db.execute("ROLLBACK TO usage_forget")
        db.execute("RELEASE usage_forget")
        raise
    db.execute("RELEASE usage_forget")
    return dropped


def rename(db: Connection, old: str, new: str) -> int:
    """Move every person's events from note key `old` to `new`; how many moved."""
    check_note_key(old)
    check_note_key(new)
    return db.execute("UPDATE usage_events SET note = ? WHERE note = ?", (new, old)).rowcount


def forget_messages(db: Connection, message_ids: Sequence[int]) -> int:
    """Drop every person's events about the messages `message_ids` (search hits of them,
    opened or cited), which are being forgotten; how many were dropped."""
    keys = [message_key(i) for i in message_ids]
    return db.execute(
        f"DELETE FROM usage_events WHERE note IN ({placeholders(keys)})", keys
    ).rowcount


@dataclass(frozen=True)
class Event:
    """One usage event as an archive carries it (whose it is goes beside it)."""

    kind: str
    note: str | None
    tag: str | None
    private: int
    at: str


def events_of(db: Connection, user: User, *, private: bool) -> list[Event]:
    """`user`'s events, oldest first: those from their private channel only with `private`."""
    rows = db.execute(
        "SELECT kind, note, tag, private, at FROM usage_events WHERE user_id = ? "
        "AND (private = 0 OR ? <> 0) ORDER BY at, id",
        (user.id, int(private)),
    )
    return [Event(*row) for row in rows]


def add_once(db: Connection, user_id: int, event: Event) -> bool:
    """Keep an event an archive brought, unless the person has one just like it; whether it
    was added."""
    cursor = db.execute(
        "INSERT INTO usage_events (user_id, kind, note, tag, private, at) "
        "SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE NOT EXISTS (SELECT 1 FROM usage_events WHERE "
        "user_id = ?1 AND kind = ?2 AND note IS ?3 AND tag IS ?4 AND private = ?5 "
        "AND at = ?6)",
        (user_id, event.kind, event.note, event.tag, event.private, event.at),
    )
    return cursor.rowcount == 1


def any_events(db: Connection) -> bool:
    """Whether anyone has a usage event yet."""
    return db.execute("SELECT 1 FROM usage_events LIMIT 1").fetchone() is not None


def count_for(db: Connection, user: User) -> int:
    """How many events `user` has (what removing them deletes)."""
    (count,) = db.execute(
        "SELECT count(*) FROM usage_events WHERE user_id = ?", (user.id,)
    ).fetchone()
    return int(count)


def forget_person(db: Connection, user: User) -> None:
    """Delete every event of `user` (they are being removed)."""
    db.execute("DELETE FROM usage_events WHERE user_id = ?", (user.id,))


def apply(similarity: float, boost: float, weight: float = DEFAULT_WEIGHT) -> float:
    """The ranking score: `similarity × (1 + boost × weight)`.

    The boost never lowers a score: a similarity at or below 0 is returned as it is.
    """
    if not 0.0 <= boost <= 1.0:
        raise ValueError(f"boost must be within [0, 1], not {boost}")
    if weight < 0:
        raise ValueError(f"weight must be 0 or more, not {weight}")
    if similarity <= 0:
        return similarity
    return similarity * (1.0 + boost * weight)


class Use(NamedTuple):
    """One kind of use behind a boost: what, how often, how lately, how much it adds."""

    kind: EventKind
    events: int
    last_age_days: float  # since the latest such event
    amount: float  # its decayed contribution to the score (negative for dismissals)
    tag: str | None = None  # for kind 'tag'

    def describe(self) -> str:
        """E.g. "viewed 4× (last 2 days ago)" or "tag #jwt used 3× (last today)"."""
        count = self.events
        times = "once" if count == 1 else f"{count}×"
        when = f"(last {days_ago(self.last_age_days)})"
        if self.kind == "view":
            return f"viewed {times} {when}"
        if self.kind == "cited":
            return f"cited in {count} {plural(count, 'answer')} {when}"
        if self.kind == "tag":
            return f"tag #{self.tag} used {times} {when}"
        return f"suggestion {self.kind} {times} {when}"


def days_ago(days: float) -> str:
    """An age in days as a person says it: "today", "yesterday", "5 days ago" (under two
    weeks), "3 weeks ago" (under 60 days), then "4 months ago" (a month is 30 days)."""
    whole = max(0, math.floor(days + 1e-6))  # julianday arithmetic is not exact
    if whole < 2:
        return ("today", "yesterday")[whole]
    if whole < 14:
        return f"{whole} days ago"
    if whole < 60:
        return f"{whole // 7} weeks ago"
    return f"{whole // 30} months ago"


class Boost(NamedTuple):
    """One note's boost for one person, and why.

    `value` is in [0, 1]. `score` is the decayed sum it was squashed from. `uses` are what
    it came from; tag uses count scaled by `tag_scale` (below 1 where the tag cap applied).
    `causes` says it in words, most important first.
    """

    value: float = 0.0
    score: float = 0.0
    uses: tuple[Use, ...] = ()
    tag_scale: float = 1.0

    @property
    def causes(self) -> list[str]:
        """What made the boost, most important first: a dismissal ranks by what it removed."""
        weighed = [
            (abs(use.amount * (self.tag_scale if use.kind == "tag" else 1.0)), use)
            for use in self.uses
        ]
        weighed.sort(key=lambda pair: -pair[0])
        return [use.describe() for amount, use in weighed if amount > 0]

    def describe(self) -> str:
        """One line, e.g. "boost 0.42: viewed 4× (last 2 days ago); tag #jwt used 3× (…)"."""
        if causes := self.causes:
            return f"boost {self.value:.2f}: {'; '.join(causes)}"
        return f"boost {self.value:.2f}" if self.value else "boost 0: not used lately"


NO_BOOST = Boost()


@dataclass(frozen=True)
class UsageModel:
    """The boost's settings: how fast use fades, how much it counts, where it saturates.

    `half_life_days`: after this long untouched, an event counts half
    (`CHARLIE_USAGE_HALF_LIFE_DAYS`). `weight`: how far a full boost lifts a score
    (`CHARLIE_USAGE_WEIGHT`; 0.3 means at most ×1.3). `saturation`: the score at which the
    boost reaches 1 - 1/e ≈ 0.63. `tag_cap`: the most that tag engagement adds to one note.
    """

    half_life_days: float = DEFAULT_HALF_LIFE_DAYS
    weight: float = DEFAULT_WEIGHT
    saturation: float = DEFAULT_SATURATION
    tag_cap: float = DEFAULT_TAG_CAP

    def __post_init__(self) -> None:
        if not self.half_life_days > 0:
            raise SettingsError(
                f"The usage half-life must be more than 0 days, not {self.half_life_days}: "
                "set CHARLIE_USAGE_HALF_LIFE_DAYS to e.g. 30."
            )
        if not self.weight >= 0:
            raise SettingsError(
                f"The usage weight must be 0 or more, not {self.weight}: "
                "set CHARLIE_USAGE_WEIGHT to e.g. 0.3 (0 turns the boost off)."
            )
        if not self.saturation > 0:
            raise ValueError(f"saturation must be more than 0, not {self.saturation}")
        if not self.tag_cap >= 0:
            raise ValueError(f"tag_cap must be 0 or more, not {self.tag_cap}")

    def apply(self, similarity: float, boost: float) -> float:
        """`similarity × (1 + boost × weight)` with this model's weight."""
        return apply(similarity, boost, self.weight)

    def boosts(
        self,
        db: Connection,
        user_id: int,
        notes: Mapping[str, Sequence[str]],
        *,
        now: datetime | None = None,
        explain: bool = True,
    ) -> dict[str, Boost]:
        """Each candidate note's boost for `user_id`, as of `now` (default: the present).

        `notes` maps each note key to its tags. Every key gets a `Boost`, `NO_BOOST` when
        unused. Two GROUP BY queries whatever the number of notes; only this user's events
        count. `explain=False` leaves out the uses (so the causes) and is about a third
        faster: rank every candidate with it, then explain the few results shown.
        """
        if not notes:
            return {}
        at = _aware(now, "The time") if now is not None else datetime.now(UTC)
        params: dict[str, object] = {
            "user": user_id,
            "now": _julian_day(at),
            "rate": math.log(2) / self.half_life_days,
            "keys": json.dumps(list(notes)),
        }
        direct: dict[str, float] = {}
        uses: dict[str, list[Use]] = {}
        if explain:
            for key, kind, count, last_age, amount in _query(db, _NOTE_QUERY, params):
                direct[key] = direct.get(key, 0.0) + amount
                uses.setdefault(key, []).append(Use(kind, count, last_age, amount))
        else:
            direct = dict(_query(db, _TOTAL_QUERY, params))

        clean = {raw: _clean_tag(raw) for raw in {t for tags in notes.values() for t in tags}}
        wanted = sorted(set(clean.values()) - {""})
        tag_uses: dict[str, Use] = {}
        if wanted:
            params["keys"] = json.dumps(wanted)
            for tag, count, last_age, amount in _query(db, _TAG_QUERY, params):
                tag_uses[tag] = Use("tag", count, last_age, amount, tag)

        result: dict[str, Boost] = {}
        cap, saturation, exp = self.tag_cap, self.saturation, math.exp
        for key, tags in notes.items():
            tagged = (
                [tag_uses[t] for t in {clean[t] for t in tags} if t in tag_uses]
                if tag_uses and tags
                else None
            )
            if tagged:
                lifted = sum(use.amount for use in tagged)
                capped = lifted if lifted <= cap else cap
                score = direct.get(key, 0.0) + capped
                found = (*uses.get(key, ()), *tagged) if explain else ()
                scale = capped / lifted
            elif key in direct:
                score, found, scale = direct[key], tuple(uses.get(key, ())), 1.0
            else:
                result[key] = NO_BOOST
                continue
            score = score if score > 0.0 else 0.0
            result[key] = Boost(1.0 - exp(-score / saturation), score, found, scale)
        return result


def _query(db: Connection, sql: str, params: Mapping[str, object]) -> list[Any]:
    """Run a model query, giving SQLite `exp()` where it was built without math functions."""
    try:
        return db.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such function: exp" not in str(exc) or not isinstance(db, sqlite3.Connection):
            raise
    db.create_function("exp", 1, math.exp, deterministic=True)
    return db.execute(sql, params).fetchall()
