"""Calendar and clock words: weekdays, quarters, named holidays, times of day, day ranges.

Two parts (issue 11, point 4):

- :func:`calendar_phrases`: vocabulary phrases for values analysts name: weekdays ("Monday",
  "Mondays"), quarters ("Q2", "second quarter"), US federal holidays of the data's years from the
  ``holidays`` package ("Christmas", "Thanksgiving", "Independence Day", "New Year's Day");
- :func:`read_clock`: a pass over the question text, before it is scanned, for phrases whose
  meaning lies in their shape: times of day on the *scheduled* hour ("before 6 in the morning",
  "6pm or later", "evening departures", "before noon"), day ranges ("the first week of March",
  "between June 10 and June 16", "June 10-16"), dates written with a slash ("3/15", "12/24/2013",
  month first as in the US), halves of the year, seasons, and rain ("while it was raining",
  "in the rain", "rainy": precipitation above 0 in the hour). The matched text is removed and
  returned as conditions.

Rules: morning is a scheduled hour before 12, afternoon 12 to 16, evening 17 or later; "after
H" and "H or later" mean a scheduled hour of at least H; a week of a month is days 1-7, 8-14,
15-21, 22-28 (the last week: the last seven days); summer is June to August, winter December to
February (of the same year: the data holds one year), spring March to May, autumn September to
November; a weekend is Saturday and Sunday, "on weekdays" Monday to Friday ("by weekday" is
the day-of-week breakdown); "3/15" is March 15 (a slash date with another year
than the data's is left unread, so the question is refused).
"""

from __future__ import annotations

import calendar as std_calendar
import datetime as dt
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import holidays

from chat_api.planner.vocabulary import MONTH_NAMES, Value

WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4,
             "4th": 4, "last": 4}  # fmt: skip
_MONTH = (
    "|".join(m.lower() for m in MONTH_NAMES) + "|" + "|".join(m[:3].lower() for m in MONTH_NAMES)
)


@dataclass(frozen=True)
class ClockCondition:
    """A condition read from the text.

    ``slot`` (``hour``, ``day``, ``month``), operator, value, and the words.
    """

    slot: str
    operator: str
    value: int | tuple[int, ...]
    phrase: str

    @property
    def values(self) -> tuple[int, ...]:
        """Returns: the value as a tuple (winter: ``(12, 1, 2)``, one of them)."""
        return self.value if isinstance(self.value, tuple) else (self.value,)


def calendar_phrases(years: Iterable[int]) -> dict[tuple[str, ...], Value]:
    """Returns the calendar phrases: lower-case word tuples to their values.

    Weekday, quarter and holiday values (module docstring); a holiday's values are ``(month, day)``.
    """
    out: dict[tuple[str, ...], Value] = {}
    for name in WEEKDAY_NAMES:
        value = Value("weekday", (name,), name)
        for form in (name.lower(), name.lower() + "s", name[:3].lower()):
            out[(form,)] = value
    for season, months in SEASON_MONTHS.items():
        out[(season,)] = Value("month", months, season)
    weekend = Value("weekday", ("Saturday", "Sunday"), "weekends")
    workdays = Value("weekday", WEEKDAY_NAMES[:5], "weekdays (Monday to Friday)")
    for words in (("on", "weekdays"), ("on", "weekday"), ("on", "a", "weekday"),
                  ("weekdays", "only"), ("during", "the", "week"), ("midweek",)):  # fmt: skip
        out[words] = workdays  # "by weekday" stays the day-of-week breakdown
    for words in (("weekend",), ("weekends",), ("the", "weekend"), ("the", "weekends")):
        out[words] = weekend
    for number, word in ((1, "first"), (2, "second"), (3, "third"), (4, "fourth")):
        value = Value("quarter", (number,), f"Q{number}")
        out[(f"q{number}",)] = value
        for ordinal in (word, f"{number}{['st', 'nd', 'rd', 'th'][number - 1]}"):
            out[(ordinal, "quarter")] = value
    out[("last", "quarter")] = out[("fourth", "quarter")]
    out.update(_holiday_phrases(tuple(sorted(set(years)))))
    return out


@functools.cache
def _holiday_phrases(years: tuple[int, ...]) -> dict[tuple[str, ...], Value]:
    out: dict[tuple[str, ...], Value] = {}
    for year in years:
        for day, name in sorted(holidays.country_holidays("US", years=year).items()):
            value = Value("holiday", (day.month, day.day), f"{name} ({_date_text(day)})")
            words = tuple(re.sub(r"['’]s\b|[.']", "", name.lower()).split())
            out[words] = value
            if words[-1] in ("day", "birthday") and len(words) > 1:
                out[words[:-1]] = value
    for alias, target in (
        (("christmas",), ("christmas", "day")),
        (("thanksgiving",), ("thanksgiving", "day")),
    ):
        if target in out:
            out[alias] = out[target]
    if ("independence", "day") in out:
        out[("fourth", "of", "july")] = out[("independence", "day")]
    return out


def _date_text(day: dt.date) -> str:
    return f"{MONTH_NAMES[day.month - 1]} {day.day}, {day.year}"


_HOUR = r"(\d{1,2})(?::00)?\s*(am|pm|a\.m\.|p\.m\.|in the morning|in the evening|at night|o ?clock)"
_NAMED_HOURS = {"noon": 12, "midday": 12, "midnight": 0}
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"\b(?:before|earlier than|prior to) (?:{_HOUR}|(noon|midday|midnight))"), "lt"),
    (re.compile(rf"\b(?:after|later than|from|since) (?:{_HOUR}|(noon|midday|midnight))"), "gte"),
    (re.compile(rf"\b(?:{_HOUR}|(noon|midday|midnight)) or (?:later|after)"), "gte"),
    (re.compile(rf"\b(?:{_HOUR}|(noon|midday|midnight)) or (?:earlier|before)"), "lte"),
]
_BETWEEN_HOURS = re.compile(rf"\bbetween {_HOUR} and {_HOUR}")
_PARTS = [
    (re.compile(r"\b(?:in the )?(?:early )?morning\b"), [("lt", 12)]),
    (re.compile(r"\b(?:in the )?afternoon\b"), [("gte", 12), ("lt", 17)]),
    (re.compile(r"\b(?:in the )?(?:evening|night)\b"), [("gte", 17)]),
]
_WEEK = re.compile(
    rf"\b(?:the )?(first|1st|second|2nd|third|3rd|fourth|4th|last) week of ({_MONTH})\b"
)
_DAY_RANGE = re.compile(
    rf"\b(?:between |from )?({_MONTH}) (\d{{1,2}})(?:st|nd|rd|th)?"
    rf"\s*(?:-|–|to|through|until|and)\s*(?:({_MONTH}) )?(\d{{1,2}})(?:st|nd|rd|th)?\b"
)
_HALF = re.compile(r"\b(?:in )?(?:the )?(first|second) half(?: of (?:the )?year| of 2013)?\b")
SEASON_MONTHS = {
    "summer": (6, 7, 8), "spring": (3, 4, 5), "autumn": (9, 10, 11), "fall": (9, 10, 11),
    "winter": (12, 1, 2),
}  # fmt: skip
_SEASON = re.compile(
    r"\b(?:in |during |over )?(?:the )?(summer|spring|autumn|fall|winter)(?: months)?\b"
)
_RAIN = re.compile(
    r"\b(?:(?:while|when) it (?:was )?(?:raining|rained|rains)|in (?:the )?rain|rainy|raining)\b"
)
_SLASH = r"(\d{1,2})/(\d{1,2})(?:/(\d{4}|\d{2}))?"
_SLASH_DATE = re.compile(rf"(?<![\w/]){_SLASH}(?![\w/])")
_SLASH_RANGE = re.compile(
    rf"(?<![\w/])(?:(from|between) )?{_SLASH}\s*(-|–|to|through|thru|until|and)\s*{_SLASH}(?![\w/])"
)
Take = Callable[[re.Match[str], list[tuple[str, str, int | tuple[int, ...]]]], None]


def _hour(number: str | None, marker: str | None, named: str | None) -> int:
    if named:
        return _NAMED_HOURS[named]
    hour = int(number or 0) % 12
    evening = marker is not None and (
        marker.startswith("p") or marker in ("in the evening", "at night")
    )
    return hour + 12 if evening else hour


def read_clock(question: str) -> tuple[str, list[ClockCondition]]:
    """Reads times of day, day ranges, halves and seasons out of a question (module docstring).

    Args:
        question: The question as asked.

    Returns:
        The question with the phrases read replaced by spaces (the rest keeps its place and
        case), and the conditions: ``("hour", "lt", 6, "before 6 in the morning")``.
    """
    lower = question.lower()
    found: list[ClockCondition] = []
    spans: list[tuple[int, int]] = []

    def take(match: re.Match[str], conds: list[tuple[str, str, int | tuple[int, ...]]]) -> None:
        if any(match.start() < end and start < match.end() for start, end in spans):
            return
        spans.append(match.span())
        found.extend(ClockCondition(s, o, v, match.group(0).strip()) for s, o, v in conds)

    _read_weeks(lower, take)
    _read_day_ranges(lower, take)
    _read_hours(lower, take)
    _read_halves_seasons_rain(lower, take)
    _read_slash_dates(lower, take)
    if not any(c.slot == "hour" for c in found):
        for pattern, conds in _PARTS:
            for match in pattern.finditer(lower):
                take(match, [("hour", o, v) for o, v in conds])
    text = question
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + " " * (end - start) + text[end:]
    return text, found


def _read_weeks(lower: str, take: Take) -> None:
    """Reads "the first week of March" and "the last week of May" (days 1-7, the last 7 days)."""
    for match in _WEEK.finditer(lower):
        month = _month_number(match.group(2))
        week = _ORDINALS[match.group(1)]
        last = std_calendar.monthrange(2013, month)[1]
        first_day, last_day = (
            (last - 6, last) if match.group(1) == "last" else (7 * week - 6, 7 * week)
        )
        take(
            match, [("month", "equals", month), ("day", "gte", first_day), ("day", "lte", last_day)]
        )


def _read_day_ranges(lower: str, take: Take) -> None:
    """Reads "March 3 to 9" and "March 3 to March 9" (a range of days within one month)."""
    for match in _DAY_RANGE.finditer(lower):
        start_month = _month_number(match.group(1))
        end_month = _month_number(match.group(3)) if match.group(3) else start_month
        low, high = int(match.group(2)), int(match.group(4))
        if end_month == start_month and 1 <= low < high <= 31:
            take(
                match, [("month", "equals", start_month), ("day", "gte", low), ("day", "lte", high)]
            )


def _read_hours(lower: str, take: Take) -> None:
    """Reads "between 6 and 9 am", "before 6 in the morning", "after 8 pm" (scheduled hour)."""
    for match in _BETWEEN_HOURS.finditer(lower):
        low = _hour(match.group(1), match.group(2), None)
        high = _hour(match.group(3), match.group(4), None)
        take(match, [("hour", "gte", low), ("hour", "lt", high)])
    for pattern, operator in _PATTERNS:
        for match in pattern.finditer(lower):
            take(match, [("hour", operator, _hour(match.group(1), match.group(2), match.group(3)))])


def _read_halves_seasons_rain(lower: str, take: Take) -> None:
    """Reads "the first/second half", one season, and rain (precipitation above 0).

    "summer" is June-August; winter wraps the year: one of December, January, February.

    Two seasons in one question are sides of a comparison, read as values elsewhere.
    """
    for match in _HALF.finditer(lower):
        take(match, [("month", "lte", 6)] if match.group(1) == "first" else [("month", "gte", 7)])
    seasons = list(_SEASON.finditer(lower))
    for match in seasons if len(seasons) == 1 else ():
        months = SEASON_MONTHS[match.group(1)]
        if months[0] < months[-1]:  # a range within the year; winter wraps: one of its months
            take(match, [("month", "gte", months[0]), ("month", "lte", months[-1])])
        else:
            take(match, [("month", "equals", months)])
    for match in _RAIN.finditer(lower):
        take(match, [("precip", "gt", 0)])


def _read_slash_dates(lower: str, take: Take) -> None:
    """Reads slash dates: "3/1 to 3/15", "2/8 and 2/9" and "3/15".

    "3/1 to 3/15" is a range within one month (days 1-15 of March). Left unread, so that the
    question is refused: a range across months, and dates differing in both month and day
    ("1/31 and 2/1": months and days would pair crosswise).
    """
    blocked: list[tuple[int, int]] = []
    for match in _SLASH_RANGE.finditer(lower):
        if match.group(5) == "and" and match.group(1) != "between":
            continue  # "on 2/8 and 2/9": two days, not a range
        first, last = _slash_date(*match.group(2, 3, 4)), _slash_date(*match.group(6, 7, 8))
        if first is None or last is None or first.month != last.month or first >= last:
            blocked.append(match.span())
            continue
        month = first.month
        take(
            match, [("month", "equals", month), ("day", "gte", first.day), ("day", "lte", last.day)]
        )
    singles = [
        (m, _slash_date(*m.group(1, 2, 3))) for m in _SLASH_DATE.finditer(lower)
        if not any(start <= m.start() < end for start, end in blocked)
    ]  # fmt: skip
    dates = [d for _, d in singles if d is not None]
    if len({d.month for d in dates}) > 1 and len({d.day for d in dates}) > 1:
        return
    for match, date in singles:
        if date is not None:
            take(match, [("month", "equals", date.month), ("day", "equals", date.day)])


def _slash_date(month: str, day: str, year: str | None) -> dt.date | None:
    """Returns the date of "3/15" or "3/15/13" (month first) in 2013.

    None when it is no date of 2013 (the data's year).
    """
    if year is not None and int(year) not in (13, 2013):
        return None
    try:
        return dt.date(2013, int(month), int(day))
    except ValueError:
        return None


def _month_number(name: str) -> int:
    short = name[:3]
    return next(i for i, m in enumerate(MONTH_NAMES, start=1) if m[:3].lower() == short)
