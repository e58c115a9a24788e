"""Day arithmetic done by Charlie, never guessed by the model: the dates a person's message
names, each with its weekday, the days between two of them, and a date so many days or
weeks after or before one ("What date is 10 days after 2026-12-25?"). The tool loop puts
these facts into the request before the model answers (`charlie.chat.toolloop`), and the
trace shows each as a call of the time tool it stands for, made by Charlie.

Understood, in English: 2026-12-25; 25 December 2026, 25th of December, December 25th,
Dec 25 2026 (without a year: the next such day from today on); the 14th (the next 14th);
today, tomorrow, yesterday; "N days/weeks after/before/from DATE", "N days/weeks later"
after a date; numbers in figures or words up to thirty; a weekday said just before a date
("Sunday 14 June") that is not its own is told as wrong. Not understood: "next Friday",
months as a count ("three months after"), clock times.
"""

from __future__ import annotations

import calendar
import itertools
import re
from dataclasses import dataclass, replace
from datetime import date, timedelta

from charlie import trace
from charlie.jsonvalue import JSONObject
from charlie.retrieval.timeexpr import MONTHS  # names and short forms: "dec", "sept"
from charlie.tools.builtin import next_day_of_month

COUNTS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)
NUMBERS = {word: n for n, word in enumerate(COUNTS.split(" "))} | {"a": 1, "an": 1, "thirty": 30}
MOST_FACTS = 6
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
DATE = re.compile(
    r"\b(?P<iso>\d{4}-\d{2}-\d{2})\b"
    rf"|\b(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<m1>{_MONTH})\.?"
    r"(?:,?\s+(?P<y1>\d{4}))?\b"
    rf"|\b(?P<m2>{_MONTH})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<y2>\d{{4}}))?\b"
    rf"|\bthe\s+(?P<nth>\d{{1,2}})(?:st|nd|rd|th)\b(?!\s+of\s+(?:{_MONTH})\b)"
    r"|\b(?P<rel>today|tomorrow|yesterday)\b",
    re.IGNORECASE,
)
_COUNT = r"(\d{1,3}|" + "|".join(NUMBERS) + r")"
# a weekday said just before a date: "Sunday 14 June", "Sunday, the 14th"
SAID_WEEKDAY = re.compile(
    r"\b(?P<name>mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?\.?,?\s+(?:the\s+)?$",
    re.IGNORECASE,
)
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
SHIFT = re.compile(
    rf"\b{_COUNT}\s+(days?|weeks?)\s+(after|before|from|past|later|earlier|on from)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Found:
    """A date the message names: where, and which day."""

    start: int
    end: int
    day: date
    said: int | None = None  # the weekday the text gives it (Monday is 0), if any


@dataclass(frozen=True)
class Fact:
    """One thing worked out, as the model is told it and as the trace shows it."""

    text: str
    step: trace.Called
    # A mistake in the message the person must hear of: said after the answer unless the
    # answer names `unless` (the right weekday) itself.
    note: str = ""
    unless: str = ""


def _dates(text: str, today: date) -> list[Found]:
    found = []
    for match in DATE.finditer(text):
        if (match["m2"] or match["m1"] or "") == "may":  # "you may 2 …": a verb, no month
            continue
        try:
            day = _day_of(match, today)
        except ValueError:
            continue  # 31 February: no date
        if day is not None:
            said = SAID_WEEKDAY.search(text, 0, match.start())
            weekday = WEEKDAYS.index(said["name"][:3].lower()) if said else None
            found.append(Found(match.start(), match.end(), day, weekday))
    return found


def _day_of(match: re.Match[str], today: date) -> date | None:
    if match["iso"]:
        return date.fromisoformat(match["iso"])
    if match["nth"]:
        nth = int(match["nth"])
        return next_day_of_month(nth, today) if 1 <= nth <= 31 else None
    if match["rel"]:
        shift = {"today": 0, "tomorrow": 1, "yesterday": -1}[match["rel"].lower()]
        return today + timedelta(days=shift)
    day, month, year = (
        (match["d1"], match["m1"], match["y1"])
        if match["d1"]
        else (match["d2"], match["m2"], match["y2"])
    )
    number = MONTHS[month.lower()]
    if year:
        return date(int(year), number, int(day))
    this_year = date(today.year, number, int(day))  # no year: the next one from today on
    return this_year if this_year >= today else date(today.year + 1, number, int(day))


def _count(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS[word.lower()]


def facts(text: str, today: date) -> list[Fact]:
    """What can be worked out from the dates `text` names (at most `MOST_FACTS`): a date so
    many days or weeks from one, the days between two (and from today to each), the
    weekday of each — first where the text gives a date the wrong weekday."""
    found = _dates(text, today)
    wrong = {f.day: f.said for f in found if f.said is not None and f.said != f.day.weekday()}
    worked = [_mistaken(day, said) for day, said in wrong.items()]
    worked += [fact for shift in SHIFT.finditer(text) if (fact := _shifted(shift, found))]
    named = list(dict.fromkeys(f.day for f in found if f.day != today))  # the prompt has today
    pairs = list(itertools.combinations(named, 2))
    pairs += [(today, day) for day in named if len(named) == 1]
    for first, last in pairs:
        between = (last - first).days
        unit = "day" if abs(between) == 1 else "days"
        arguments: JSONObject = {"start": first.isoformat(), "end": last.isoformat()}
        since = " (today)" if first == today else ""
        told = f"From {_said(first)}{since} to {_said(last)} is {between} {unit}."
        worked.append(_fact(told, "days_between", arguments, f"{between} {unit}"))
    for day in (d for d in named if d not in wrong):  # a wrong one is told first
        told = f"{day.isoformat()} is a {day:%A}."
        worked.append(_fact(told, "weekday", {"day": day.isoformat()}, f"{day:%A}"))
    return worked[:MOST_FACTS]


def _mistaken(day: date, said: int) -> Fact:
    """A date the text gives the wrong weekday ("Sunday 14 June" when the 14th of June is a
    Monday): told first, so the answer can say so rather than go along with either."""
    wrong = calendar.day_name[said]
    told = f"{day.isoformat()} is a {day:%A}, not a {wrong} as the message says."
    fact = _fact(told, "weekday", {"day": day.isoformat()}, f"{day:%A}, not {wrong}")
    note = f"By my reckoning, {day.day} {day:%B %Y} is a {day:%A}, not a {wrong}."
    return replace(fact, note=note, unless=f"{day:%A}")


def _shifted(shift: re.Match[str], found: list[Found]) -> Fact | None:
    """The date a phrase such as "10 days after DATE" gives (the date named after the
    phrase), or "DATE … 10 days later" (the one named before it)."""
    n = _count(shift[1]) * (7 if shift[2].lower().startswith("week") else 1)
    way = shift[3].lower()
    back, later = way in ("before", "earlier"), way in ("later", "earlier")
    after = [f for f in found if f.start >= shift.end()]
    before = [f for f in found if f.end <= shift.start()]
    base = before[-1:] if later else after[:1] or before[-1:]
    if not base:
        return None
    start, days = base[0].day, -n if back else n
    try:
        result = start + timedelta(days=days)
    except OverflowError:  # past the year 9999 or before the year 1: no date
        return None
    unit = "day" if n == 1 else "days"
    told = f"{n} {unit} {'before' if back else 'after'} {_said(start)} is {_said(result)}."
    arguments: JSONObject = {"start": start.isoformat(), "days": days}
    return _fact(told, "date_add", arguments, _said(result))


def _said(day: date) -> str:
    """The day as "Monday 2027-01-04" (the year in four digits, whatever it is)."""
    return f"{day:%A} {day.isoformat()}"


def _fact(text: str, tool: str, arguments: JSONObject, summary: str) -> Fact:
    return Fact(text, trace.Called(tool, arguments, True, summary, by="charlie"))
