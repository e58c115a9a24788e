"""Day arithmetic Charlie does itself from the dates a message names (`charlie.chat.dates`),
and puts before the model: a small model counting days guesses."""

from __future__ import annotations

from datetime import date

import pytest
from llm_double import ScriptedLLMServer

from charlie.chat import dates
from charlie.chat import turn as chat
from charlie.conversations import shared_channel
from charlie.home import Home
from charlie.llm.client import LLMClient
from charlie.projects import create_project, update_project
from charlie.trace import Called
from charlie.users import ensure_user

TODAY = date(2026, 12, 5)  # a Saturday


def told(text: str) -> list[str]:
    return [fact.text for fact in dates.facts(text, TODAY)]


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        ("What date is 10 days after 2026-12-25?", [
            "10 days after Friday 2026-12-25 is Monday 2027-01-04.",
            "From Saturday 2026-12-05 (today) to Friday 2026-12-25 is 20 days.",
            "2026-12-25 is a Friday.",
        ]),
        ("How many days are there from 2026-12-01 to 2026-12-24?", [
            "From Tuesday 2026-12-01 to Thursday 2026-12-24 is 23 days.",
            "2026-12-01 is a Tuesday.",
            "2026-12-24 is a Thursday.",
        ]),
        ("We fly on 20 December and come back three weeks later.", [
            "21 days after Sunday 2026-12-20 is Sunday 2027-01-10.",
            "From Saturday 2026-12-05 (today) to Sunday 2026-12-20 is 15 days.",
            "2026-12-20 is a Sunday.",
        ]),
        ("The invoice is due a week before March 3rd 2027.", [
            "7 days before Wednesday 2027-03-03 is Wednesday 2027-02-24.",
            "From Saturday 2026-12-05 (today) to Wednesday 2027-03-03 is 88 days.",
            "2027-03-03 is a Wednesday.",
        ]),
        ("What weekday is the 14th?", [  # the next 14th
            "From Saturday 2026-12-05 (today) to Monday 2026-12-14 is 9 days.",
            "2026-12-14 is a Monday.",
        ]),
        ("What's the date 10 days from today?", [  # today itself: the prompt says it
            "10 days after Saturday 2026-12-05 is Tuesday 2026-12-15.",
        ]),
        ("How many days until the 2nd of January?", [  # no year: the next one
            "From Saturday 2026-12-05 (today) to Saturday 2027-01-02 is 28 days.",
            "2027-01-02 is a Saturday.",
        ]),
    ],
)  # fmt: skip
def test_the_dates_a_message_names_are_worked_out(text: str, facts: list[str]) -> None:
    assert told(text) == facts


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        ("Booked for Sunday 14 June.", [  # no year: the next one, a Monday
            "2027-06-14 is a Monday, not a Sunday as the message says.",
            "From Saturday 2026-12-05 (today) to Monday 2027-06-14 is 191 days.",
        ]),
        ("Sunday, the 14th works for us", [
            "2026-12-14 is a Monday, not a Sunday as the message says.",
            "From Saturday 2026-12-05 (today) to Monday 2026-12-14 is 9 days.",
        ]),
        ("Tues 9 December, not Thursday 11 December", [
            "2026-12-09 is a Wednesday, not a Tuesday as the message says.",
            "2026-12-11 is a Friday, not a Thursday as the message says.",
            "From Wednesday 2026-12-09 to Friday 2026-12-11 is 2 days.",
        ]),
        ("Fri 25 Dec 2026 is fine, and Sat. 26 December too", [  # both right: nothing wrong
            "From Friday 2026-12-25 to Saturday 2026-12-26 is 1 day.",
            "2026-12-25 is a Friday.",
            "2026-12-26 is a Saturday.",
        ]),
    ],
)  # fmt: skip
def test_a_date_given_the_wrong_weekday_is_told_first_and_not_repeated(
    text: str, facts: list[str]
) -> None:
    assert told(text) == facts


@pytest.mark.parametrize(
    "text",
    [
        "You may 2 go ahead with the tiles.",  # "may" the verb
        "Book it for 31 February.",  # no such day
        "Three weeks of rain, honestly.",  # a count, no date
        "Which one do we want?",
        "What is the date today?",  # the prompt says it
    ],
)
def test_no_date_no_arithmetic(text: str) -> None:
    assert told(text) == []


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        ("What is 999 weeks after 9999-12-30?", ["9999-12-30 is a Thursday."]),
        ("And 5 days before 0001-01-02?", ["0001-01-02 is a Tuesday."]),
    ],
)
def test_a_date_past_the_calendar_is_no_fact_and_no_crash(text: str, facts: list[str]) -> None:
    assert [f for f in told(text) if "days" not in f] == facts


def test_the_model_is_given_the_worked_out_date_and_the_trace_shows_charlie_did_it(
    home: Home, llm: ScriptedLLMServer, client: LLMClient
) -> None:
    project = update_project(home, create_project(home, "Trip").slug, tool_mode="native")
    llm.reply("It is Monday 4 January 2027.")
    events = list(
        chat.turn(
            home,
            client,
            shared_channel(home, project),
            ensure_user(home.db, "alice"),
            "What date is 10 days after 2026-12-25?",
        )
    )
    system = str(llm.requests[0]["messages"][0]["content"])
    assert '<dates by="Charlie">' in system
    assert "10 days after Friday 2026-12-25 is Monday 2027-01-04." in system
    own = [e.step for e in events if isinstance(e, chat.TraceEvent) and isinstance(e.step, Called)]
    assert [(s.name, s.by) for s in own] == [
        ("date_add", "charlie"),
        ("days_between", "charlie"),
        ("weekday", "charlie"),
    ]
    assert own[0].summary == "Monday 2027-01-04"
