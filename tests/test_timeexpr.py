"""Time expressions in recall questions: exact spans for a fixed now, order words, the words
left to search, false friends ("may I ask"), leap days, month ends and time zones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charlie.retrieval.timeexpr import Order, When, parse_when

NOW = datetime(2026, 4, 15, 10, 0, tzinfo=UTC)  # a Wednesday in spring
WINTER = datetime(2026, 1, 20, 8, 0, tzinfo=UTC)  # a Tuesday in winter


def utc(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=UTC)


def spans(text: str) -> tuple[tuple[datetime, datetime], ...]:
    """'2026-04-14..2026-04-15 2025-05-01..2025-06-01' as half-open UTC spans."""
    return tuple((utc(a), utc(b)) for a, b in (pair.split("..") for pair in text.split()))


def parsed(text: str, now: datetime = NOW, earliest: str | None = None) -> When:
    when, _ = parse_when(text, now, earliest=utc(earliest) if earliest else None)
    assert when is not None, f"{text!r} was not understood"
    return when


SPRING_2026 = [
    # days
    ("what did I say yesterday?", "2026-04-14..2026-04-15"),
    ("today", "2026-04-15..2026-04-16"),
    ("this morning", "2026-04-15..2026-04-16"),
    ("tonight", "2026-04-15..2026-04-16"),
    ("earlier today", "2026-04-15..2026-04-16"),
    ("last night", "2026-04-14..2026-04-15"),
    ("the day before yesterday", "2026-04-13..2026-04-14"),
    ("day before yesterday", "2026-04-13..2026-04-14"),
    ("the other day", "2026-04-08..2026-04-15"),
    ("3 days ago", "2026-04-12..2026-04-13"),
    ("three days ago", "2026-04-12..2026-04-13"),
    ("a few days ago", "2026-04-12..2026-04-13"),
    ("a day ago", "2026-04-14..2026-04-15"),
    ("on Monday", "2026-04-13..2026-04-14"),
    ("Monday", "2026-04-13..2026-04-14"),
    ("last Tuesday", "2026-04-14..2026-04-15"),
    ("last Wednesday", "2026-04-08..2026-04-09"),  # today is a Wednesday: a week ago
    ("on Wednesday", "2026-04-08..2026-04-09"),
    ("this past Sunday", "2026-04-12..2026-04-13"),
    ("on Thursday", "2026-04-09..2026-04-10"),
    # weeks
    ("a week ago", "2026-04-06..2026-04-13"),
    ("3 weeks ago", "2026-03-23..2026-03-30"),
    ("three weeks ago", "2026-03-23..2026-03-30"),
    ("a couple of weeks ago", "2026-03-30..2026-04-06"),
    ("last week", "2026-04-06..2026-04-13"),
    ("this week", "2026-04-13..2026-04-20"),
    ("earlier this week", "2026-04-13..2026-04-20"),
    ("the week before last", "2026-03-30..2026-04-06"),
    ("early last week", "2026-04-06..2026-04-08"),
    ("last weekend", "2026-04-11..2026-04-13"),
    ("over the weekend", "2026-04-11..2026-04-13"),
    ("the past week", "2026-04-08..2026-04-16"),
    ("in the last 3 days", "2026-04-12..2026-04-16"),
    ("the past few days", "2026-04-12..2026-04-16"),
    # months
    ("last month", "2026-03-01..2026-04-01"),
    ("this month", "2026-04-01..2026-05-01"),
    ("earlier this month", "2026-04-01..2026-05-01"),
    ("the beginning of last month", "2026-03-01..2026-03-08"),
    ("a month ago", "2026-03-01..2026-04-01"),
    ("a couple of months ago", "2026-02-01..2026-03-01"),
    ("twelve months ago", "2025-04-01..2025-05-01"),
    ("over the past 2 months", "2026-02-15..2026-04-16"),
    ("in May 2023", "2023-05-01..2023-06-01"),
    ("May 2023", "2023-05-01..2023-06-01"),
    ("May of 2023", "2023-05-01..2023-06-01"),
    ("in Sept 2024", "2024-09-01..2024-10-01"),
    ("2023-05", "2023-05-01..2023-06-01"),
    ("last May", "2025-05-01..2025-06-01"),  # May 2026 has not come yet
    ("last March", "2026-03-01..2026-04-01"),
    ("this April", "2026-04-01..2026-05-01"),
    ("early May 2023", "2023-05-01..2023-05-11"),
    ("mid-May 2023", "2023-05-11..2023-05-21"),
    ("in mid May 2023", "2023-05-11..2023-05-21"),
    ("late May 2023", "2023-05-21..2023-06-01"),
    ("at the end of May 2023", "2023-05-25..2023-06-01"),
    ("the start of June 2023", "2023-06-01..2023-06-08"),
    # a day of a month
    ("on 8 May 2023", "2023-05-08..2023-05-09"),
    ("May 8th, 2023", "2023-05-08..2023-05-09"),
    ("May 8 2023", "2023-05-08..2023-05-09"),
    ("8th of May 2023", "2023-05-08..2023-05-09"),
    ("on the 8th of May 2023", "2023-05-08..2023-05-09"),
    ("on the first of May 2023", "2023-05-01..2023-05-02"),
    ("the twenty-third of March 2024", "2024-03-23..2024-03-24"),
    ("2023-05-08", "2023-05-08..2023-05-09"),
    # years
    ("in 2022", "2022-01-01..2023-01-01"),
    ("back in 2022", "2022-01-01..2023-01-01"),
    ("during 2019", "2019-01-01..2020-01-01"),
    ("last year", "2025-01-01..2026-01-01"),
    ("this year", "2026-01-01..2027-01-01"),
    ("earlier this year", "2026-01-01..2027-01-01"),
    ("two years ago", "2024-01-01..2025-01-01"),
    ("early last year", "2025-01-01..2025-05-01"),
    ("mid-2022", "2022-05-01..2022-09-01"),
    ("the end of 2022", "2022-10-01..2023-01-01"),
    ("the past year", "2025-04-15..2026-04-16"),
    # seasons
    ("last spring", "2025-03-01..2025-06-01"),  # spring 2026 has not ended
    ("this spring", "2026-03-01..2026-06-01"),
    ("last winter", "2025-12-01..2026-03-01"),
    ("this winter", "2025-12-01..2026-03-01"),
    ("last summer", "2025-06-01..2025-09-01"),
    ("this summer", "2025-06-01..2025-09-01"),  # the latest summer to have begun
    ("last autumn", "2025-09-01..2025-12-01"),
    ("last fall", "2025-09-01..2025-12-01"),
    ("summer 2023", "2023-06-01..2023-09-01"),
    ("in the spring of 2024", "2024-03-01..2024-06-01"),
    ("winter 2022", "2021-12-01..2022-03-01"),
    ("winter 2022/23", "2022-12-01..2023-03-01"),
    ("winter 2022-2023", "2022-12-01..2023-03-01"),
    ("late summer 2024", "2024-08-01..2024-09-01"),
    ("the end of last summer", "2025-08-01..2025-09-01"),
    # holidays
    ("last Christmas", "2025-12-20..2026-01-03"),
    ("at Christmas 2023", "2023-12-20..2024-01-03"),
    ("over New Year 2024", "2023-12-28..2024-01-05"),
    ("last Easter", "2026-04-03..2026-04-07"),  # Easter Sunday 2026 was 5 April
    ("at Easter 2024", "2024-03-29..2024-04-02"),  # 31 March 2024
]


@pytest.mark.parametrize(("text", "expected"), SPRING_2026)
def test_spans_in_spring(text: str, expected: str) -> None:
    assert parsed(text).spans == spans(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("this winter", "2025-12-01..2026-03-01"),
        ("in the winter", "2025-12-01..2026-03-01 2024-12-01..2025-03-01"),
        ("last winter", "2024-12-01..2025-03-01"),
        ("winter 2025", "2024-12-01..2025-03-01"),
        ("winter 2025/26", "2025-12-01..2026-03-01"),
        ("last autumn", "2025-09-01..2025-12-01"),
        ("last December", "2025-12-01..2026-01-01"),
        ("last January", "2025-01-01..2025-02-01"),  # this January has not ended
        ("this January", "2026-01-01..2026-02-01"),
        ("in January", "2026-01-01..2026-02-01 2025-01-01..2025-02-01"),
        ("last Christmas", "2025-12-20..2026-01-03"),
        ("a month ago", "2025-12-01..2026-01-01"),
        ("last year", "2025-01-01..2026-01-01"),
        ("last week", "2026-01-12..2026-01-19"),
        ("a couple of weeks ago", "2026-01-05..2026-01-12"),
        ("the end of last year", "2025-10-01..2026-01-01"),
    ],
)
def test_spans_in_winter_cross_the_year(text: str, expected: str) -> None:
    assert parsed(text, WINTER, earliest="2024-06-01").spans == spans(expected)


@pytest.mark.parametrize(
    ("text", "earliest", "expected"),
    [
        (
            "what did Ana recommend in May?",
            None,  # five years back from now
            "2025-05-01..2025-06-01 2024-05-01..2024-06-01 2023-05-01..2023-06-01 "
            "2022-05-01..2022-06-01 2021-05-01..2021-06-01",
        ),
        ("in May", "2024-02-10", "2025-05-01..2025-06-01 2024-05-01..2024-06-01"),
        ("in May", "2025-07-01", "2025-05-01..2025-06-01"),  # always the latest one
        ("in April", "2025-01-01", "2026-04-01..2026-05-01 2025-04-01..2025-05-01"),
        ("late April", "2024-06-01", "2025-04-21..2025-05-01"),  # 21 April 2026 is to come
        (
            "in the spring",
            "2024-01-01",
            "2026-03-01..2026-06-01 2025-03-01..2025-06-01 2024-03-01..2024-06-01",
        ),
        ("over the summer", "2024-09-15", "2025-06-01..2025-09-01"),
        ("in the fall", "2024-01-01", "2025-09-01..2025-12-01 2024-09-01..2024-12-01"),
        ("on 8 May", "2024-01-01", "2025-05-08..2025-05-09 2024-05-08..2024-05-09"),
        ("May 8th", "2024-01-01", "2025-05-08..2025-05-09 2024-05-08..2024-05-09"),
        ("on the 8th of May", "2024-01-01", "2025-05-08..2025-05-09 2024-05-08..2024-05-09"),
        ("on the 15th of April", "2025-01-01", "2026-04-15..2026-04-16 2025-04-15..2025-04-16"),
        ("around Christmas", "2024-06-01", "2025-12-20..2026-01-03 2024-12-20..2025-01-03"),
        ("on 29 Feb", "2019-01-01", "2024-02-29..2024-03-01 2020-02-29..2020-03-01"),
    ],
)
def test_plain_dates_are_every_past_one_newest_first(
    text: str, earliest: str | None, expected: str
) -> None:
    assert parsed(text, NOW, earliest).spans == spans(expected)


@pytest.mark.parametrize(
    ("now", "text", "expected"),
    [
        ("2024-03-01T00:30", "yesterday", "2024-02-29..2024-03-01"),  # leap day
        ("2023-03-01T12:00", "yesterday", "2023-02-28..2023-03-01"),
        ("2024-03-31T09:00", "a month ago", "2024-02-01..2024-03-01"),  # 31 Feb does not exist
        ("2026-03-31T09:00", "the past month", "2026-02-28..2026-04-01"),
        ("2026-03-31T09:00", "a couple of months ago", "2026-01-01..2026-02-01"),
        ("2026-04-15T10:00", "29 February 2024", "2024-02-29..2024-03-01"),
        ("2026-04-15T10:00", "the end of February 2024", "2024-02-23..2024-03-01"),
        ("2026-04-15T10:00", "late February 2023", "2023-02-19..2023-03-01"),
        ("2026-04-15T10:00", "31 December 2025", "2025-12-31..2026-01-01"),
        ("2025-12-31T23:59", "this week", "2025-12-29..2026-01-05"),
        ("2026-01-01T00:00", "last week", "2025-12-22..2025-12-29"),
        ("2026-01-01T00:00", "today", "2026-01-01..2026-01-02"),
        ("2026-04-18T12:00", "this weekend", "2026-04-18..2026-04-20"),  # a Saturday
        ("2026-04-18T12:00", "last weekend", "2026-04-11..2026-04-13"),
        ("2026-03-01T00:00", "this spring", "2026-03-01..2026-06-01"),  # begins at now exactly
    ],
)
def test_leap_years_and_month_ends(now: str, text: str, expected: str) -> None:
    assert parsed(text, utc(now)).spans == spans(expected)


def test_a_day_no_year_has_is_no_date() -> None:
    assert parse_when("on 31 April", NOW) == (None, "on 31 April")
    assert parse_when("on 29 February", NOW, earliest=utc("2024-06-01"))[0] == When(
        "on 29 February", spans("2024-02-29..2024-03-01")
    )


@pytest.mark.parametrize(
    "text",
    [
        "may I ask you something?",
        "I may go to Lisbon",
        "you may want to check the boiler",
        "they will march on",
        "May I march on?",
        "the fall of Rome",
        "what did I say about the fall of Rome",
        "wait one second",
        "give me a second",
        "secondly, the boiler",
        "what did April say?",
        "what does August Wilson write about",
        "the mayor said maybe",
        "the marching band",
        "the 2022 budget",
        "the Monday standup",
        "every Monday",
        "the spring in the mattress",
        "a present for Christmas",
        "next summer",
        "in 2030",  # all of it to come
        "a few days",
        "mayday",
        "todays",
        "summertime",
        "springfield",
        "",
    ],
)
def test_words_that_are_not_times(text: str) -> None:
    assert parse_when(text, NOW) == (None, text)


@pytest.mark.parametrize(
    ("text", "order", "phrase", "rest"),
    [
        (
            "when did we first talk about Lisbon?",
            "first",
            "first",
            "when did we talk about Lisbon?",
        ),
        ("the first time I mentioned the car", "first", "the first time", "I mentioned the car"),
        ("originally, what was the plan?", "first", "originally", "what was the plan?"),
        ("what did we initially decide", "first", "initially", "what did we decide"),
        ("the earliest note about taxes", "first", "the earliest", "note about taxes"),
        ("the last time we spoke about the car", "last", "the last time", "we spoke about the car"),
        (
            "what did Ana recommend most recently?",
            "last",
            "most recently",
            "what did Ana recommend?",
        ),
        (
            "what have I said lately about the roof",
            "last",
            "lately",
            "what have I said about the roof",
        ),
        ("recently, what did Sam say", "last", "recently", "what did Sam say"),
        ("the latest on the boiler", "last", "the latest", "on the boiler"),
    ],
)
def test_order_words(text: str, order: Order, phrase: str, rest: str) -> None:
    when, remaining = parse_when(text, NOW)
    assert when == When(phrase, (), order)
    assert remaining == rest


def test_order_and_span_together() -> None:
    when, rest = parse_when("the first time in May 2023", NOW)
    assert when == When("the first time in May 2023", spans("2023-05-01..2023-06-01"), "first")
    assert rest == ""
    when, rest = parse_when("what did I first say about Lisbon last spring?", NOW)
    assert when == When("first … last spring", spans("2025-03-01..2025-06-01"), "first")
    assert rest == "what did I say about Lisbon?"


def test_the_first_of_a_month_is_a_day_not_an_order() -> None:
    when = parsed("on the first of May 2023")
    assert (when.order, when.spans) == (None, spans("2023-05-01..2023-05-02"))


@pytest.mark.parametrize(
    ("text", "phrase", "rest"),
    [
        (
            "what did I say about the boiler last spring?",
            "last spring",
            "what did I say about the boiler?",
        ),
        (
            "Last spring, what did I say about the boiler?",
            "Last spring",
            "what did I say about the boiler?",
        ),
        ("what did Ana recommend in May?", "in May", "what did Ana recommend?"),
        (
            "what did we decide, back in 2022, about the roof?",
            "back in 2022",
            "what did we decide about the roof?",
        ),
        ("yesterday's notes about the car", "yesterday's", "notes about the car"),
        ("last summer’s trip to Porto", "last summer’s", "trip to Porto"),
        ("what did I say about the car 3 weeks ago", "3 weeks ago", "what did I say about the car"),
        ("WHAT DID I SAY ON MONDAY", "ON MONDAY", "WHAT DID I SAY"),
        ("may I ask what we said in May?", "in May", "may I ask what we said?"),
        ("the photos from the May 2023 trip", "May 2023", "the photos from the trip"),
        (
            "the doctor, on 8 May 2023: what did she say",
            "on 8 May 2023",
            "the doctor: what did she say",
        ),
    ],
)
def test_rest_is_the_question_without_the_time(text: str, phrase: str, rest: str) -> None:
    when, remaining = parse_when(text, NOW)
    assert when is not None and when.phrase == phrase
    assert remaining == rest


@pytest.mark.parametrize(
    ("text", "description"),
    [
        ("in May 2023", "May 2023"),
        ("last spring", "spring 2025 (Mar–May)"),
        ("this spring", "spring 2026 (Mar–May)"),
        ("last winter", "winter 2025/26 (Dec–Feb)"),
        ("yesterday", "Tuesday 14 April 2026"),
        ("last week", "6–12 April 2026"),
        ("the past week", "8–15 April 2026"),
        ("in 2022", "2022"),
        ("early last year", "January–April 2025"),
        ("the last 3 months", "15 January – 15 April 2026"),
        ("last Christmas", "20 December 2025 – 2 January 2026"),
        ("in May", "May 2025, May 2024 or earlier"),
        ("the first time", "the first time"),
        ("most recently", "the most recent time"),
        ("the first time in May 2023", "the first time in May 2023"),
    ],
)
def test_describe(text: str, description: str) -> None:
    assert parsed(text).describe() == description


def test_describe_two_spans() -> None:
    assert parsed("in May", NOW, "2024-01-01").describe() == "May 2025 or May 2024"


def test_contains_is_half_open_and_zone_aware() -> None:
    when = parsed("in May 2023")
    assert when.contains(utc("2023-05-01T00:00"))
    assert when.contains(utc("2023-05-31T23:59:59"))
    assert not when.contains(utc("2023-06-01T00:00"))
    assert not when.contains(utc("2023-04-30T23:59:59"))
    # 01:00 on 1 June in Paris summer time is still 31 May in UTC
    assert when.contains(datetime(2023, 6, 1, 1, 0, tzinfo=timezone(timedelta(hours=2))))
    assert when.contains(datetime(2023, 5, 10, 12, 0))  # naive: UTC, as Charlie stores times
    assert not parsed("recently").contains(utc("2026-04-15T00:00"))  # no span, nothing inside


def test_days_are_utc_days_whatever_the_zone_of_now() -> None:
    # 01:00 on the 15th in UTC+02:00 is 23:00 on the 14th in UTC
    now = datetime(2026, 4, 15, 1, 0, tzinfo=timezone(timedelta(hours=2)))
    when = parsed("today", now)
    assert when.spans == spans("2026-04-14..2026-04-15")
    assert all(t.tzinfo is UTC for span in when.spans for t in span)
    naive = parsed("yesterday", datetime(2026, 4, 15, 10, 0))
    assert naive.spans == spans("2026-04-14..2026-04-15")
    assert all(t.tzinfo is UTC for span in naive.spans for t in span)


WORDS = """in on at the of a an last this past early mid late end beginning back over around
May march August spring summer fall autumn winter Christmas Easter New Year's Monday Sunday
weekend week month year day days weeks months years ago yesterday today first time recently
8th 29 31 2022 2023 2099 1999 2022/23 999 twelve few couple 2023-02-29 2024-02-29 2023-13-01
0 00 before other most ,"""
VOCABULARY = WORDS.split()


@settings(max_examples=400, database=None, deadline=None)
@given(
    words=st.lists(st.sampled_from(VOCABULARY) | st.text(max_size=8), max_size=12),
    now=st.datetimes(datetime(1950, 1, 1), datetime(2100, 1, 1), timezones=st.just(UTC)),
    earliest=st.none() | st.datetimes(datetime(1900, 1, 1), datetime(2100, 1, 1)),
)
def test_never_raises_and_spans_are_sound(
    words: list[str], now: datetime, earliest: datetime | None
) -> None:
    text = " ".join(words)
    when, rest = parse_when(text, now, earliest=earliest)
    if when is None:
        assert rest == text
        return
    assert when.spans or when.order
    for start, end in when.spans:
        assert start < end
        assert start <= now
        assert start.tzinfo is UTC and end.tzinfo is UTC
    for piece in when.phrase.split(" … "):
        assert piece in text
    assert when.describe()
