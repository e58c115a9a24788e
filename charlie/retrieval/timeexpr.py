"""Time expressions in recall questions: "last spring", "three weeks ago", "the first time".

`parse_when(text, now)` finds the time expression in a question such as "what did I say about
the boiler last spring?" and returns it as a `When` (the days it names, as half-open UTC spans,
and whether the first or the most recent time is asked for) with the question minus the
expression, whose words are then searched. Recall prefers messages inside the spans and keeps
the others, so a loose reading costs little. Understood, in English, any case, in UTC days:
- days: today, tonight, this morning, yesterday, last night, the day before yesterday, the
  other day (the week before today), on Monday, last Tuesday (the latest before today),
  2023-05-08, on 8 May, May 8th, the 8th of May 2023, the first of May;
- this/last week, the week before last, last weekend, over the weekend, this/last month,
  this/last year, earlier this week/month/year, in May, last May, May 2023, 2023-05, in 2022;
- counts: three weeks ago, 3 days ago, a couple of months ago, a few (3) years ago, the past
  week, the last 3 months, the past few days (these last three up to and including today);
- seasons, northern: spring Mar–May, summer Jun–Aug, autumn/fall Sep–Nov, winter Dec–Feb named
  by its January ("winter 2022" is Dec 2021–Feb 2022; "winter 2022/23" Dec 2022–Feb 2023);
- Christmas (20 Dec–2 Jan), New Year (28 Dec–4 Jan), Easter (Good Friday to Easter Monday);
- early/mid/late X (a third) and the beginning/end of X (a quarter): early May, mid-2022;
- order: the first time, first, at first, originally, initially, the earliest; the last time,
  most recently, the most recent, recently, lately, the latest.
"last X" is the latest X that has ended; "this X" the current one, or the latest to begin; a
plain "in May", "in the spring", "at Christmas" is every one from `earliest` (or five years
back) to now, newest first. "N weeks/months/years ago" is the calendar week (from Monday),
month or year holding that day. No span begins after `now`, and an expression wholly in the
future is no match. A month, season or holiday needs a word making it a time ("in", "last",
"early", a day, a year): "may I ask", "April said" and "the spring broke" are not times.
Not understood: hours and clock times, "since May", ranges ("from May to June"), numeric dates
other than ISO, "next ...", time zones other than UTC.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

Span = tuple[datetime, datetime]
Order = Literal["first", "last"]
_Days = tuple[date, date]  # half-open: [first day, the day after the last)

_CALENDAR = "January February March April May June July August September October November December"
_MONTH_NAMES = _CALENDAR.split()
MONTHS = {name.lower()[:n]: i for i, name in enumerate(_MONTH_NAMES, 1) for n in (3, None)}
MONTHS["sept"] = 9
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_COUNTING = "one two three four five six seven eight nine ten eleven twelve"
_NUMBERS = {w: i for i, w in enumerate(_COUNTING.split(), 1)}
_NUMBERS |= {"a": 1, "an": 1, "a couple": 2, "a couple of": 2, "couple of": 2, "a few": 3, "few": 3}
_FIRST_TO_NINTH = "first second third fourth fifth sixth seventh eighth ninth"
_TENTH_TO_TWENTIETH = (
    "tenth eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth "
    "nineteenth twentieth"
)
_ORDINALS = {w: i for i, w in enumerate(_FIRST_TO_NINTH.split(), 1)}
_ORDINALS |= {w: i for i, w in enumerate(_TENTH_TO_TWENTIETH.split(), 10)}
_ORDINALS |= {f"twenty-{w}": 20 + i for i, w in enumerate(_FIRST_TO_NINTH.split(), 1)}
_ORDINALS |= {"thirtieth": 30, "thirty-first": 31}


def _alternatives(words: Iterable[str]) -> str:
    """A regex alternation of `words`, longest first, spaces or a hyphen between their parts."""
    return "|".join(re.sub(r"[ -]", r"[\\s-]+", w) for w in sorted(words, key=len, reverse=True))


_MONTH = rf"(?P<month>{_alternatives(MONTHS)})"
_YEAR = r"(?P<year>(?:19|20)\d\d)(?!\d)"
_NUM = rf"(?P<n>\d{{1,3}}|{_alternatives(_NUMBERS)})"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?(?![\d:])"
_UNIT = r"(?P<unit>day|week|month|year)"
_PRE = r"(?P<pre>(?:back\s+)?(?:in|on|during|over|around|at)\s+)?"
_MOD = (
    r"(?:(?P<mod>early|middle|mid|late|(?:the\s+)?(?:beginning|start|middle|end)\s+of)(?:\s+|-))?"
)
_NOT_A_TIME_AFTER = re.compile(r"\b(?:the|a|an|every|each|next)\s+$", re.I)
_OF_SOMETHING = re.compile(r"\s+of\b", re.I)


@dataclass(frozen=True)
class When:
    """A time expression found in a question, resolved against the moment it was asked."""

    phrase: str
    spans: tuple[Span, ...]
    order: Order | None = None

    def contains(self, t: datetime) -> bool:
        """Whether `t` lies in any span (a naive `t` is UTC, as Charlie stores times)."""
        t = _utc(t)
        return any(start <= t < end for start, end in self.spans)

    def describe(self) -> str:
        """The reading in words, to show the person what Charlie understood."""
        parts = []
        if self.order:
            parts.append("the first time" if self.order == "first" else "the most recent time")
        names = [_describe_span(*span) for span in self.spans[:2]]
        if len(self.spans) > 2:
            parts.append(f"{names[0]}, {names[1]} or earlier")
        elif names:
            parts.append(" or ".join(names))
        return " in ".join(parts)


@dataclass(frozen=True)
class _Context:
    today: date  # the UTC day of `now`
    lower: date  # how far back a plain "in May" reaches


_Resolver = Callable[[re.Match[str], _Context], list[_Days] | None]


def parse_when(
    text: str, now: datetime, *, earliest: datetime | None = None
) -> tuple[When | None, str]:
    """The time expression in `text` (relative to `now`), and `text` with that expression removed
    (so the remaining words can be searched). `earliest` = the time of the oldest message that
    could match; used for expressions without a year. Naive datetimes are taken as UTC."""
    now = _utc(now)
    today = now.date()
    lower = _utc(earliest).date() if earliest else _shift_months(today, -60)
    found = _best_span(text, _Context(today, lower))
    masked = text  # the order word is looked for outside the span's words ("the first of May")
    if found is not None:
        masked = text[: found[0]] + " " * (found[1] - found[0]) + text[found[1] :]
    order_match = _ORDER.search(masked)
    pieces = [] if found is None else [found[:2]]
    order: Order | None = None
    if order_match is not None:
        order = "first" if order_match["first"] else "last"
        pieces = sorted([*pieces, order_match.span()])
    if not pieces:
        return None, text
    spans = () if found is None else tuple((_midnight(a), _midnight(b)) for a, b in found[2])
    return When(_phrase(text, pieces), spans, order), _without(text, pieces)


def _best_span(text: str, ctx: _Context) -> tuple[int, int, list[_Days]] | None:
    """The longest expression that resolves to past days; of equals, the earlier rule's."""
    best: tuple[int, int, list[_Days]] | None = None
    for pattern, resolve in _RULES:
        for match in pattern.finditer(text):
            longer = best is None or match.end() - match.start() > best[1] - best[0]
            if longer and (days := _resolve(match, resolve, ctx)):
                best = (match.start(), match.end(), days)
    return best


def _resolve(match: re.Match[str], resolve: _Resolver, ctx: _Context) -> list[_Days]:
    """The past days `match` names; none when it turns out not to be a time."""
    g = match.groupdict()
    dated = any(g.get(key) for key in ("year", "day", "dayword", "y"))
    if not dated and _NOT_A_TIME_AFTER.search(
        match.string, max(0, match.start() - 40), match.start()
    ):
        return []  # "the May report", "every Monday", "next summer"; not "the May 2023 trip"
    try:
        days = resolve(match, ctx) or []
    except (ValueError, OverflowError):  # beyond the calendar: "2023-02-30", "999 years ago"
        return []
    return [d for d in (_modify(d, g.get("mod")) for d in days) if d[0] <= ctx.today]


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _midnight(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def _shift_months(d: date, n: int) -> date:
    """`d` moved by `n` calendar months, the day clamped to the month's end (31 Mar → 28 Feb)."""
    year, month0 = divmod(d.year * 12 + d.month - 1 + n, 12)
    next_month = date(year + (month0 + 1) // 12, (month0 + 1) % 12 + 1, 1)
    return date(year, month0 + 1, min(d.day, (next_month - timedelta(days=1)).day))


def _day(d: date) -> _Days:
    return (d, d + timedelta(days=1))


def _month(year: int, month: int) -> _Days:
    start = date(year, month, 1)
    return (start, _shift_months(start, 1))


def _back(today: date, unit: str, n: int) -> _Days:
    """The calendar day, week (Monday first), month or year `n` of them before today's."""
    if unit == "day":
        return _day(today - timedelta(days=n))
    if unit == "week":
        monday = today - timedelta(days=today.weekday(), weeks=n)
        return (monday, monday + timedelta(weeks=1))
    if unit == "month":
        then = _shift_months(today, -n)
        return _month(then.year, then.month)
    return (date(today.year - n, 1, 1), date(today.year - n + 1, 1, 1))


def _whole_months(days: _Days) -> int:
    """How many calendar months `days` are, when they are whole months; else 0."""
    start, end = days
    whole = start.day == 1 and end.day == 1
    return (end.year - start.year) * 12 + end.month - start.month if whole else 0


def _modify(days: _Days, mod: str | None) -> _Days:
    """Early/mid/late take a third; the beginning/end, a quarter (whole months where they can)."""
    start, end = days
    months = _whole_months(days)
    n = months if months % 3 == 0 and months else (end - start).days
    if not mod or n < 3:
        return days
    word = re.search(r"early|mid|late|beginning|start|end", mod.lower())
    third, quarter = n // 3, max(1, n // 4)
    cuts = {"early": (0, third), "mid": (third, 2 * n // 3), "late": (2 * n // 3, n)}
    cuts |= {"beginning": (0, quarter), "start": (0, quarter), "end": (n - quarter, n)}
    first, after = cuts[word.group() if word else "mid"]
    if n == months:
        return (_shift_months(start, first), _shift_months(start, after))
    return (start + timedelta(days=first), start + timedelta(days=after))


def _has_context(g: dict[str, str | None]) -> bool:
    """Whether a month, season or holiday name comes with a word that makes it a time."""
    return any(g.get(key) for key in ("pre", "q", "mod", "year"))


def _pick(
    instance: Callable[[int], _Days | None], g: dict[str, str | None], ctx: _Context
) -> list[_Days]:
    """Which of a yearly recurring span is meant: the year's own, "last", "this", or all."""
    if year := g.get("year"):
        named = instance(int(year))
        return [named] if named else []
    oldest = max(min(ctx.lower.year, ctx.today.year - 10) - 1, 2)
    years = range(ctx.today.year + 1, oldest - 1, -1)
    begun = [s for s in map(instance, years) if s and s[0] <= ctx.today]
    which = (g.get("q") or "").lower()
    if which == "last":
        return [s for s in begun if s[1] <= ctx.today][:1]
    if which.startswith("this"):
        return begun[:1]
    return [s for s in begun if s[1] > ctx.lower] or begun[:1]


def _fixed(unit: str, n: int) -> _Resolver:
    return lambda m, ctx: [_back(ctx.today, unit, n)]


def _counted(m: re.Match[str], ctx: _Context) -> list[_Days]:
    """A calendar unit some of them back: "3 weeks ago", "this month", "the year before last"."""
    g = m.groupdict()
    n = _number(g["n"]) if g.get("n") else 0 if g.get("this") else 2 if g.get("before") else 1
    return [_back(ctx.today, m["unit"].lower(), n)]


def _rolling(m: re.Match[str], ctx: _Context) -> list[_Days]:
    """From as many days, weeks, months or years back up to and including today."""
    n, unit = _number(m["n"]) if m["n"] else 1, m["unit"].lower()
    if unit in ("day", "week"):
        start = ctx.today - timedelta(days=n * (7 if unit == "week" else 1))
    else:
        start = _shift_months(ctx.today, -n * (12 if unit == "year" else 1))
    return [(start, ctx.today + timedelta(days=1))]


def _number(word: str) -> int:
    word = " ".join(word.lower().split())
    return int(word) if word.isdigit() else _NUMBERS[word]


def _weekday(m: re.Match[str], ctx: _Context) -> list[_Days]:
    back = (ctx.today.weekday() - _WEEKDAYS.index(m["wd"].lower()) - 1) % 7 + 1
    return [_day(ctx.today - timedelta(days=back))]


def _weekend(m: re.Match[str], ctx: _Context) -> list[_Days]:
    monday = ctx.today - timedelta(days=ctx.today.weekday())
    if ctx.today.weekday() >= 5 and (m["q"] or "").lower() != "last":
        return [(monday + timedelta(days=5), monday + timedelta(days=7))]
    return [(monday - timedelta(days=2), monday)]


def _iso(m: re.Match[str], ctx: _Context) -> list[_Days]:
    year, month = int(m["y"]), int(m["mo"])
    return [_day(date(year, month, int(m["d"])))] if m["d"] else [_month(year, month)]


def _on_day(m: re.Match[str], ctx: _Context) -> list[_Days]:
    month = MONTHS[m["month"].lower()]
    g = m.groupdict()
    dayword = re.sub(r"[\s-]+", "-", (g.get("dayword") or "").lower())
    day = _ORDINALS[dayword] if dayword else int(g["day"] or 0)

    def instance(year: int) -> _Days | None:
        try:
            return _day(date(year, month, day))
        except ValueError:  # 29 February in a common year, 31 April
            return None

    return _pick(instance, g, ctx)


def _in_month(m: re.Match[str], ctx: _Context) -> list[_Days] | None:
    if not _has_context(m.groupdict()):
        return None  # "may I ask", "April said"
    month = MONTHS[m["month"].lower()]
    return _pick(lambda year: _month(year, month), m.groupdict(), ctx)


def _in_season(m: re.Match[str], ctx: _Context) -> list[_Days] | None:
    g = m.groupdict()
    if not _has_context(g) or (not g["year"] and _OF_SOMETHING.match(m.string, m.end())):
        return None  # "the spring broke", "the fall of Rome"
    first = _SEASONS[m["season"].lower()]
    year, year2 = g["year"], g["year2"]
    if year and year2:
        if first != 12 or year2 not in (str(int(year) + 1), str(int(year) + 1)[2:]):
            return None
        g["year"] = str(int(year) + 1)  # winter 2022/23 is named by its January

    def instance(year: int) -> _Days:
        if first == 12:
            return (date(year - 1, 12, 1), date(year, 3, 1))
        return (date(year, first, 1), date(year, first + 3, 1))

    return _pick(instance, g, ctx)


def _easter(year: int) -> date:
    """Easter Sunday in the Gregorian calendar (the anonymous Gregorian algorithm)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    ell = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * ell) // 451
    month, day = divmod(h + ell - 7 * m + 114, 31)
    return date(year, month, day + 1)


_HOLIDAYS: dict[str, Callable[[int], _Days]] = {
    "christmas": lambda y: (date(y, 12, 20), date(y + 1, 1, 3)),
    "new": lambda y: (date(y - 1, 12, 28), date(y, 1, 5)),  # New Year, named by its January
    "easter": lambda y: (_easter(y) - timedelta(days=2), _easter(y) + timedelta(days=2)),
}
_HOLIDAYS["xmas"] = _HOLIDAYS["christmas"]


def _at_holiday(m: re.Match[str], ctx: _Context) -> list[_Days] | None:
    if not _has_context(m.groupdict()):
        return None  # "a present for Christmas" is not a time
    return _pick(_HOLIDAYS[m["holiday"].lower().split()[0]], m.groupdict(), ctx)


def _in_year(m: re.Match[str], ctx: _Context) -> list[_Days] | None:
    if not (m["pre"] or m["mod"]):
        return None  # "the 2022 budget" names no time
    year = int(m["year"])
    return [(date(year, 1, 1), date(year + 1, 1, 1))]


def _rule(
    core: str, resolve: _Resolver, *, modifiable: bool = False
) -> tuple[re.Pattern[str], _Resolver]:
    mod = _MOD if modifiable else ""
    return re.compile(rf"\b{_PRE}{mod}(?:{core})(?:['’]s)?(?!\w)", re.I), resolve


_RULES = [
    _rule(r"today|tonight|this\s+(?:morning|afternoon|evening)|earlier\s+today", _fixed("day", 0)),
    _rule(r"yesterday|last\s+night", _fixed("day", 1)),
    _rule(r"(?:the\s+)?day\s+before\s+yesterday", _fixed("day", 2)),
    _rule(r"the\s+other\s+day", lambda m, c: [(c.today - timedelta(days=7), c.today)]),
    _rule(rf"{_NUM}\s+{_UNIT}s?\s+ago", _counted),
    _rule(
        rf"(?:(?P<this>(?:earlier\s+)?this)|last|previous)\s+{_UNIT}",
        _counted,
        modifiable=True,
    ),
    _rule(rf"the\s+{_UNIT}\s+(?P<before>before)\s+last", _counted),
    _rule(  # rolling: "the past week", "the last 3 months", "past few days"
        rf"(?:(?:the\s+)?(?:past|last|previous)\s+{_NUM}|the\s+(?:past|last|previous)|past)"
        rf"\s+{_UNIT}s?",
        _rolling,
    ),
    _rule(r"(?:the|(?P<q>last|this))\s+weekend", _weekend),
    _rule(rf"(?:(?P<q>last|this(?:\s+past)?|past)\s+)?(?P<wd>{'|'.join(_WEEKDAYS)})", _weekday),
    _rule(r"(?P<y>\d{4})-(?P<mo>\d\d)(?:-(?P<d>\d\d))?", _iso),
    _rule(rf"(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?", _on_day),
    _rule(
        rf"the\s+(?P<dayword>{_alternatives(_ORDINALS)})\s+of\s+{_MONTH}(?:,?\s+{_YEAR})?", _on_day
    ),
    _rule(rf"{_MONTH}\s+(?:the\s+)?{_DAY}(?:,?\s+{_YEAR})?", _on_day),
    _rule(
        rf"(?:(?P<q>last|this)\s+)?{_MONTH}(?:,?\s+(?:of\s+)?{_YEAR})?", _in_month, modifiable=True
    ),
    _rule(
        rf"(?:the\s+)?(?:(?P<q>last|this)\s+)?(?P<season>{'|'.join(_SEASONS)})"
        rf"(?:\s+(?:of\s+)?{_YEAR}(?:\s*[/–-]\s*(?P<year2>\d\d(?:\d\d)?))?)?",
        _in_season,
        modifiable=True,
    ),
    _rule(
        r"(?:(?P<q>last|this)\s+)?(?P<holiday>christmas|xmas|easter|new\s+year(?:['’]s)?"
        rf"(?:\s+(?:eve|day))?)(?:\s+{_YEAR})?",
        _at_holiday,
    ),
    _rule(_YEAR, _in_year, modifiable=True),
]

_FIRST = r"(?:for\s+)?the\s+(?:very\s+)?first\s+time|at\s+first|first|originally|initially"
_LAST = r"(?:the\s+)?last\s+time|(?:the\s+)?most\s+recent(?:ly)?|recently|lately"
_ORDER = re.compile(
    rf"\b(?:(?P<first>{_FIRST}|(?:the\s+)?earliest)|(?P<last>{_LAST}|(?:the\s+)?latest))\b", re.I
)


def _phrase(text: str, pieces: list[tuple[int, int]]) -> str:
    if len(pieces) == 2 and not text[pieces[0][1] : pieces[1][0]].strip():
        pieces = [(pieces[0][0], pieces[1][1])]
    return " … ".join(text[a:b].strip() for a, b in pieces)


def _without(text: str, pieces: list[tuple[int, int]]) -> str:
    """`text` without `pieces`, its spaces and punctuation tidied."""
    for start, end in reversed(pieces):
        text = text[:start] + " " + text[end:]
    text = re.sub(r",\s*,", "", re.sub(r"\s+", " ", text))  # "say, in May, about" -> "say about"
    text = re.sub(r"\s+([?.!,;:])", r"\1", text)
    text = re.sub(r"(?:[,;:]\s*)+([,;:])", r"\1", text)  # "Ana, : why" -> "Ana: why"
    text = re.sub(r"[,;:]+(?=[?.!]|$)", "", text)
    return text.strip(" ,;:")


def _describe_span(start: datetime, end: datetime) -> str:
    first, last = start.date(), end.date() - timedelta(days=1)
    months = _whole_months((first, end.date()))
    if months == 12 and first.month == 1:
        return str(first.year)
    if months == 1:
        return f"{_MONTH_NAMES[first.month - 1]} {first.year}"
    if months == 3 and first.month % 3 == 0:
        season = {3: "spring", 6: "summer", 9: "autumn", 12: "winter"}[first.month]
        year = f"{first.year}/{last.year % 100:02}" if first.month == 12 else str(first.year)
        span = f"{_MONTH_NAMES[first.month - 1][:3]}–{_MONTH_NAMES[last.month - 1][:3]}"
        return f"{season} {year} ({span})"
    if months:
        year = "" if first.year == last.year else f" {first.year} "
        return f"{_MONTH_NAMES[first.month - 1]}{year}–{_MONTH_NAMES[last.month - 1]} {last.year}"
    if first == last:
        return f"{_WEEKDAYS[first.weekday()].title()} {_day_name(first)}"
    if (first.year, first.month) == (last.year, last.month):
        return f"{first.day}–{_day_name(last)}"
    if first.year == last.year:
        return f"{first.day} {_MONTH_NAMES[first.month - 1]} – {_day_name(last)}"
    return f"{_day_name(first)} – {_day_name(last)}"


def _day_name(d: date) -> str:
    return f"{d.day} {_MONTH_NAMES[d.month - 1]} {d.year}"
