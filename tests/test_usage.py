"""The usage model on a real SQLite data home: events in, per-person boosts out."""

from __future__ import annotations

import math
import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest

from charlie.errors import NotFound, SettingsError
from charlie.home import Home
from charlie.retrieval import usage
from charlie.retrieval.search import use_in_words
from charlie.retrieval.usage import NO_BOOST, InvalidUsageEvent, UsageModel, Use
from charlie.users import ensure_user

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
MODEL = UsageModel()


def days(n: float) -> datetime:
    return T0 + timedelta(days=n)


def views(db: sqlite3.Connection, user_id: int, note: str, count: int, at: datetime = T0) -> None:
    for _ in range(count):
        usage.record(db, user_id, "view", note=note, at=at)


def test_unused_notes_get_no_boost_and_every_candidate_gets_an_answer(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    views(home.db, alice, "kitchen/oak", 1)
    boosts = MODEL.boosts(home.db, alice, {"kitchen/marble": ["stone"], "kitchen/tiles": []})
    assert boosts == {"kitchen/marble": NO_BOOST, "kitchen/tiles": NO_BOOST}
    assert boosts["kitchen/marble"].value == 0.0
    assert boosts["kitchen/marble"].causes == []
    assert boosts["kitchen/marble"].describe() == "boost 0: not used lately"
    assert MODEL.boosts(home.db, alice, {}) == {}


def test_boost_grows_with_views_and_saturates_below_one(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    for note, count in [("p/one", 1), ("p/three", 3), ("p/five", 5), ("p/fifty", 50)]:
        views(home.db, alice, note, count)
    b = MODEL.boosts(
        home.db, alice, dict.fromkeys(["p/one", "p/three", "p/five", "p/fifty"], ()), now=T0
    )
    assert 0 < b["p/one"].value < b["p/three"].value < b["p/five"].value < b["p/fifty"].value <= 1
    assert b["p/five"].value == pytest.approx(0.6, abs=0.01)  # the documented calibration
    assert b["p/one"].score == pytest.approx(1.0)
    assert b["p/one"].value == pytest.approx(1 - math.exp(-1 / 5.5))


def test_citing_and_accepting_weigh_more_than_viewing(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    usage.record(home.db, alice, "view", note="p/viewed", at=T0)
    usage.record(home.db, alice, "cited", note="p/cited", at=T0)
    usage.record(home.db, alice, "accepted", note="p/accepted", at=T0)
    usage.record(home.db, alice, "shown", note="p/shown", at=T0)
    b = MODEL.boosts(
        home.db, alice, dict.fromkeys(["p/viewed", "p/cited", "p/accepted", "p/shown"], ()), now=T0
    )
    assert b["p/shown"].value == 0.0  # showing is not using
    assert 0 < b["p/viewed"].value < b["p/cited"].value < b["p/accepted"].value
    assert [b[n].score for n in ("p/viewed", "p/cited", "p/accepted")] == pytest.approx(
        [1.0, 2.0, 3.0]
    )


def test_use_fades_with_the_half_life(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    views(home.db, alice, "p/old", 4, at=T0)
    notes: dict[str, list[str]] = {"p/old": []}
    fresh = MODEL.boosts(home.db, alice, notes, now=days(2))["p/old"]
    later = MODEL.boosts(home.db, alice, notes, now=days(2 + 30))["p/old"]
    much_later = MODEL.boosts(home.db, alice, notes, now=days(2 + 365))["p/old"]
    assert later.score == pytest.approx(fresh.score / 2)
    assert fresh.value > later.value > much_later.value > 0
    assert much_later.value < 0.01
    weekly = UsageModel(half_life_days=7)
    week_fresh = weekly.boosts(home.db, alice, notes, now=days(2))["p/old"].score
    week_later = weekly.boosts(home.db, alice, notes, now=days(9))["p/old"].score
    assert week_later == pytest.approx(week_fresh / 2)
    assert week_fresh < fresh.score  # a shorter half-life forgets faster
    # An event stamped after `now` (a clock a little ahead) counts as fresh, never more.
    assert MODEL.boosts(home.db, alice, notes, now=days(-1))["p/old"].score == pytest.approx(4)


def test_dismissals_pull_a_note_down_but_never_below_zero(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    views(home.db, alice, "p/liked", 2)
    views(home.db, alice, "p/mixed", 2)
    usage.record(home.db, alice, "dismissed", note="p/mixed", at=T0)
    usage.record(home.db, alice, "dismissed", note="p/unwanted", at=T0)
    b = MODEL.boosts(
        home.db, alice, dict.fromkeys(["p/liked", "p/mixed", "p/unwanted"], ()), now=T0
    )
    assert b["p/mixed"].value < b["p/liked"].value
    assert b["p/mixed"].score == pytest.approx(2 - 1.5)
    assert b["p/unwanted"].value == 0.0
    assert b["p/unwanted"].score == 0.0
    assert b["p/unwanted"].causes == ["suggestion dismissed once (last today)"]


def test_tag_engagement_lifts_notes_with_that_tag_only(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    for _ in range(3):
        usage.record(home.db, alice, "tag", tag="#JWT", note="auth/login", at=T0)
    notes = {"auth/tokens": ["jwt", "security"], "auth/cookies": ["security"], "auth/x": ["#Jwt"]}
    b = MODEL.boosts(home.db, alice, notes, now=T0)
    assert b["auth/cookies"] == NO_BOOST
    assert b["auth/tokens"].value > 0
    assert b["auth/x"].value == b["auth/tokens"].value  # tags match without case or '#'
    assert b["auth/tokens"].score == pytest.approx(3 * 0.5)
    assert b["auth/tokens"].causes == ["tag #jwt used 3× (last today)"]
    # The note the tag was clicked from gets nothing for it unless it carries the tag.
    assert MODEL.boosts(home.db, alice, {"auth/login": []}, now=T0)["auth/login"] == NO_BOOST


def test_a_popular_tag_cannot_dominate(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    for tag in ("python", "notes"):
        for _ in range(100):
            usage.record(home.db, alice, "tag", tag=tag, at=T0)
    views(home.db, alice, "p/read", 3)
    b = MODEL.boosts(
        home.db,
        alice,
        {"p/tagged": ["python", "notes"], "p/read": [], "p/both": ["python"]},
        now=T0,
    )
    ceiling = 1 - math.exp(-MODEL.tag_cap / MODEL.saturation)
    assert b["p/tagged"].score == pytest.approx(MODEL.tag_cap)
    assert b["p/tagged"].value == pytest.approx(ceiling)
    assert b["p/read"].value > b["p/tagged"].value  # three real views beat any amount of tags
    assert b["p/both"].score == pytest.approx(MODEL.tag_cap)


def test_boost_stays_in_range_and_the_ceiling_is_times_one_point_three(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    home.db.execute("BEGIN")
    for _ in range(60):
        usage.record(home.db, alice, "accepted", note="p/favourite", at=T0)
        usage.record(home.db, alice, "cited", note="p/favourite", at=T0)
        usage.record(home.db, alice, "tag", tag="fav", at=T0)
    home.db.execute("COMMIT")
    b = MODEL.boosts(home.db, alice, {"p/favourite": ["fav"], "p/plain": []}, now=T0)
    top = b["p/favourite"].value
    assert 0.99 < top <= 1.0
    assert b["p/plain"].value == 0.0
    for boost in (top, 1.0):
        assert usage.apply(0.5, boost) <= 0.65 + 1e-12
        assert usage.apply(0.5, boost) < usage.apply(0.66, 0.0)
    assert usage.apply(0.66, 0.0) == 0.66
    assert MODEL.apply(0.5, 1.0) == pytest.approx(0.65)
    assert UsageModel(weight=0.5).apply(0.5, 1.0) == pytest.approx(0.75)
    assert UsageModel(weight=0).apply(0.5, 1.0) == 0.5


def test_apply_never_lowers_a_score_and_rejects_nonsense() -> None:
    assert usage.apply(-0.2, 1.0) == -0.2
    assert usage.apply(0.0, 1.0) == 0.0
    with pytest.raises(ValueError, match="boost must be within"):
        usage.apply(0.5, 1.5)
    with pytest.raises(ValueError, match="weight must be"):
        usage.apply(0.5, 0.5, weight=-1)


def test_one_persons_use_never_moves_anothers_ranking(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    bob = ensure_user(home.db, "bob").id
    views(home.db, alice, "house/boiler", 5)
    usage.record(home.db, alice, "tag", tag="heating", at=T0)
    usage.record(home.db, alice, "accepted", note="house/secret", private=True, at=T0)
    usage.record(home.db, alice, "tag", tag="gifts", private=True, at=T0)
    usage.record(home.db, bob, "dismissed", note="house/boiler", private=True, at=T0)
    notes = {"house/boiler": ["heating"], "house/secret": ["gifts"], "house/garden": ["heating"]}

    mine = MODEL.boosts(home.db, alice, notes, now=T0)
    theirs = MODEL.boosts(home.db, bob, notes, now=T0)
    assert all(boost.value > 0 for boost in mine.values())
    assert mine["house/secret"].causes == [
        "suggestion accepted once (last today)",
        "tag #gifts used once (last today)",
    ]
    # Bob's own dismissal is all he sees; Alice's private and shared use reach him not at all.
    assert {key: boost.value for key, boost in theirs.items()} == dict.fromkeys(notes, 0.0)
    assert theirs["house/boiler"].causes == ["suggestion dismissed once (last today)"]
    assert theirs["house/secret"] == theirs["house/garden"] == NO_BOOST
    # And Bob's dismissal does not lower Alice's boost.
    assert mine["house/boiler"].score == pytest.approx(5 + 0.5)


@pytest.mark.parametrize(
    ("age", "words"),
    [
        (-0.5, "today"),  # a clock a little behind
        (0.0, "today"),
        (0.9999999, "yesterday"),  # julianday arithmetic is not exact
        (1.5, "yesterday"),
        (2.0, "2 days ago"),
        (13.9, "13 days ago"),
        (14.0, "2 weeks ago"),
        (59.9, "8 weeks ago"),
        (60.0, "2 months ago"),
        (400.0, "13 months ago"),
    ],
)
def test_an_age_in_days_is_said_one_way_everywhere(age: float, words: str) -> None:
    assert usage.days_ago(age) == words
    assert Use("view", 1, age, 1.0).describe() == f"viewed once (last {words})"
    assert use_in_words(Use("view", 1, age, 1.0)) == f"you opened it {words}"


def test_causes_are_readable_and_ordered_by_weight(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    views(home.db, alice, "p/n", 4, at=days(-2))
    usage.record(home.db, alice, "cited", note="p/n", at=days(-1))
    usage.record(home.db, alice, "cited", note="p/n", at=days(-10))
    usage.record(home.db, alice, "shown", note="p/n", at=T0)
    usage.record(home.db, alice, "dismissed", note="p/n", at=days(-40))
    usage.record(home.db, alice, "tag", tag="jwt", at=T0)
    boost = MODEL.boosts(home.db, alice, {"p/n": ["jwt"]}, now=T0)["p/n"]
    assert boost.causes == [
        "viewed 4× (last 2 days ago)",
        "cited in 2 answers (last yesterday)",
        "suggestion dismissed once (last 5 weeks ago)",
        "tag #jwt used once (last today)",
    ]
    assert boost.describe() == f"boost {boost.value:.2f}: " + "; ".join(boost.causes)
    kinds = {use.kind: use for use in boost.uses}
    assert set(kinds) == {"view", "cited", "dismissed", "tag"}
    assert kinds["view"].events == 4
    assert kinds["view"].last_age_days == pytest.approx(2)
    assert kinds["dismissed"].amount < 0


@pytest.mark.sqlite_only
def test_ranking_without_explanations_gives_the_same_values_in_two_queries(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    views(home.db, alice, "p/a", 2)
    usage.record(home.db, alice, "tag", tag="x", at=T0)
    notes = {f"p/{name}": ["x"] if name in "ac" else [] for name in "abcdefgh"}
    statements: list[str] = []
    home.db.set_trace_callback(statements.append)
    try:
        quick = MODEL.boosts(home.db, alice, notes, now=T0, explain=False)
        full = MODEL.boosts(home.db, alice, notes, now=T0)
    finally:
        home.db.set_trace_callback(None)
    assert len(statements) == 4  # two GROUP BY queries a call, however many notes
    assert {k: b.value for k, b in quick.items()} == {k: b.value for k, b in full.items()}
    assert quick["p/a"].causes == []
    assert quick["p/a"].describe() == f"boost {quick['p/a'].value:.2f}"
    assert full["p/a"].causes[0] == "viewed 2× (last today)"


@pytest.mark.parametrize(
    ("kind", "fields", "message"),
    [
        ("liked", {"note": "p/n"}, "'liked' is not a usage event: use one of view, tag"),
        ("view", {}, "A 'view' event needs the note it is about"),
        ("cited", {"note": "p/n", "tag": "x"}, "is about a note, not a tag"),
        ("tag", {}, "A 'tag' event needs the tag that was used"),
        ("tag", {"tag": " # "}, "is not a tag"),
        ("view", {"note": "no-slash"}, "'no-slash' is not a note key"),
        ("view", {"note": "p/"}, "is not a note key"),
        ("view", {"note": "p/a//b"}, "is not a note key"),
        ("view", {"note": "p/n", "at": datetime(2025, 1, 1)}, "has no time zone"),
    ],
)
def test_invalid_events_are_refused_with_a_clear_message(
    home: Home, kind: str, fields: dict[str, object], message: str
) -> None:
    alice = ensure_user(home.db, "alice").id
    with pytest.raises(InvalidUsageEvent, match=message.replace("(", r"\(")):
        usage.record(home.db, alice, kind, **fields)  # type: ignore[arg-type]
    assert home.db.execute("SELECT COUNT(*) FROM usage_events").fetchone()[0] == 0


def test_events_of_an_unknown_person_are_refused(home: Home) -> None:
    with pytest.raises(NotFound, match="no user with id 999"):
        usage.record(home.db, 999, "view", note="p/n")


def test_recorded_events_are_stored_as_given(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    local = datetime(2025, 3, 1, 15, 30, tzinfo=timezone(timedelta(hours=2)))
    event = usage.record(home.db, alice, "tag", tag=" #Rust ", note="p/n", private=True, at=local)
    row = home.db.execute("SELECT * FROM usage_events WHERE id = ?", (event,)).fetchone()
    assert dict(row) == {
        "id": event,
        "user_id": alice,
        "kind": "tag",
        "note": "p/n",
        "tag": "rust",
        "private": 1,
        "at": "2025-03-01T13:30:00.000+00:00",
    }
    usage.record(home.db, alice, "view", note="p/n")  # default time: now
    latest = MODEL.boosts(home.db, alice, {"p/n": []})["p/n"]
    assert latest.causes == ["viewed once (last today)"]


def test_forget_and_rename_follow_the_note(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    bob = ensure_user(home.db, "bob").id
    views(home.db, alice, "p/draft", 2)
    views(home.db, bob, "p/draft", 1)
    usage.record(home.db, alice, "tag", tag="ideas", note="p/draft", at=T0)

    assert usage.rename(home.db, "p/draft", "p/final") == 4
    b = MODEL.boosts(home.db, alice, {"p/draft": [], "p/final": ["ideas"]}, now=T0)
    assert b["p/draft"] == NO_BOOST
    assert b["p/final"].score == pytest.approx(2 + 0.5)

    assert usage.forget(home.db, "p/final") == 3
    assert MODEL.boosts(home.db, bob, {"p/final": []}, now=T0)["p/final"] == NO_BOOST
    # The tag engagement stays with the tag.
    assert MODEL.boosts(home.db, alice, {"p/other": ["ideas"]}, now=T0)["p/other"].score == (
        pytest.approx(0.5)
    )
    with pytest.raises(InvalidUsageEvent):
        usage.forget(home.db, "nonsense")


def test_note_keys_and_tags_have_one_spelling() -> None:
    assert usage.note_key("kitchen", "oak-worktops") == "kitchen/oak-worktops"
    assert usage.normalise_tag("  #JWT ") == "jwt"
    with pytest.raises(InvalidUsageEvent):
        usage.note_key("", "x")


def test_bad_settings_name_the_setting() -> None:
    with pytest.raises(SettingsError, match="CHARLIE_USAGE_HALF_LIFE_DAYS"):
        UsageModel(half_life_days=0)
    with pytest.raises(SettingsError, match="CHARLIE_USAGE_WEIGHT"):
        UsageModel(weight=-0.1)


def test_a_naive_now_is_refused(home: Home) -> None:
    alice = ensure_user(home.db, "alice").id
    with pytest.raises(InvalidUsageEvent, match="no time zone"):
        MODEL.boosts(home.db, alice, {"p/n": []}, now=datetime(2025, 1, 1))


def test_notes_in_sub_folders_can_be_used(home: Home) -> None:
    user = ensure_user(home.db, "alice")
    usage.record(home.db, user.id, "view", note="kitchen/recipes/pasta")
    boost = usage.UsageModel().boosts(home.db, user.id, {"kitchen/recipes/pasta": []})
    assert boost["kitchen/recipes/pasta"].value > 0
    with pytest.raises(usage.InvalidUsageEvent):
        usage.record(home.db, user.id, "view", note="kitchen//pasta")
