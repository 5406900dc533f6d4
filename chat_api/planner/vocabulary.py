"""The words the planner recognises: a fixed lexicon plus values read from the warehouse.

Two kinds of phrases are recognised in a question:

- the fixed lexicon (``LEXICON``): measures' subjects ("arrival delay"), aggregation words
  ("average", "highest"), nouns that can be counted or grouped by ("flights", "carrier"),
  breakdown markers ("by", "monthly"), comparators, units, role prepositions ("from", "to") and
  subjects the data model cannot answer ("revenue");
- values in the data (:class:`Vocabulary`): carriers by code and name (and short forms such as
  "JetBlue"), airports by code, name and city ("Newark", "Chicago O'Hare"), plane manufacturers
  ("Airbus" covers ``AIRBUS`` and ``AIRBUS INDUSTRIE``), month names and the years in the data.

:func:`scan` splits a question into :class:`Mention` s, longest phrase first. Everything here is
pure except :func:`load_vocabulary`, which runs four small queries through a callable.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

ValueKind = Literal[
    "carrier", "airport", "manufacturer", "month", "year", "weekday", "quarter", "holiday"
]
Role = Literal[
    "metric", "noun", "agg", "superlative", "count", "distinct", "breakdown", "which", "top",
    "comparator", "unit", "place_role", "temporal", "negation", "built", "delay", "direction",
    "overall", "followup", "unsupported", "filler", "compare", "share", "cancelled", "ontime",
]  # fmt: skip

MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
)  # fmt: skip


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split(" "))


@dataclass(frozen=True)
class Word:
    """A phrase of the fixed lexicon: its role in a question and a key within the role.

    Attributes:
        role: What the phrase does, e.g. ``"metric"`` (key ``"arr_delay"``), ``"agg"`` (key
            ``"avg"``), ``"superlative"`` (key ``"max"``/``"min"``), ``"noun"`` (key
            ``"flights"``), ``"comparator"`` (key ``"gt"``), ``"place_role"`` (key ``"origin"``).
        key: The meaning within the role.
        hint: An implied metric for superlatives ("longest" -> ``"distance"``), else ``""``.
    """

    role: Role
    key: str
    hint: str = ""


@dataclass(frozen=True)
class Value:
    """A value in the data named by a phrase.

    Attributes:
        kind: Which set the value belongs to.
        values: Stored values: carrier codes (``("B6",)``), airport codes (``("ORD", "MDW")`` for
            "Chicago"), raw manufacturer names, month numbers 1-12, years.
        label: How to name it in text: ``"JetBlue Airways (B6)"``, ``"March"``.
        ambiguous: True when the phrase names different places ("Portland": PDX or PWM).
    """

    kind: ValueKind
    values: tuple[str | int, ...]
    label: str
    ambiguous: bool = False


@dataclass(frozen=True)
class Number:
    """A number in the question: ``30``, ``1,000``, ``1.5``, ``3rd``, ``five``."""

    value: float
    ordinal: bool = False


@dataclass(frozen=True)
class Mention:
    """One recognised phrase (or one unrecognised token) of a question, in question order.

    Attributes:
        text: The phrase as written (apostrophes removed).
        meaning: What it means, or None for a word outside the lexicon and the vocabulary.
    """

    text: str
    meaning: Word | Value | Number | None

    @property
    def word(self) -> str:
        """Returns: the phrase in lower case."""
        return self.text.lower()


@dataclass(frozen=True)
class Vocabulary:
    """Values the planner recognises, built by :func:`build_vocabulary`.

    Attributes:
        carriers: Carrier code -> airline name (``"B6" -> "JetBlue Airways"``).
        airports: Airport code -> name (``""`` when the airports table lacks it) for every airport
            used as an origin or destination.
        origins: Codes of the departure airports (EWR, JFK, LGA).
        years: Years present in flights and weather.
        phrases: Lower-case word tuple -> value (names, short forms, cities, months).
        codes: Code as written in upper case -> value (``"UA"``, ``"ATL"``).
    """

    carriers: Mapping[str, str]
    airports: Mapping[str, str]
    origins: frozenset[str]
    years: frozenset[int]
    phrases: Mapping[tuple[str, ...], Value]
    codes: Mapping[str, Value]

    def airport_label(self, code: str) -> str:
        """Returns: ``"ORD (Chicago Ohare Intl)"``, or the bare code when the name is unknown."""
        name = self.airports.get(code, "")
        return f"{code} ({name})" if name else code

    def carrier_label(self, code: str) -> str:
        """Returns: ``"JetBlue Airways (B6)"``, or the bare code when the name is unknown."""
        name = self.carriers.get(code, "")
        return f"{name} ({code})" if name else code


def _lexicon(table: Mapping[tuple[Role, str], str]) -> dict[tuple[str, ...], Word]:
    """Inverts ``(role, key[:hint]) -> "phrase, phrase"`` into ``phrase words -> Word``."""
    out: dict[tuple[str, ...], Word] = {}
    for (role, key_hint), phrases in table.items():
        key, _, hint = key_hint.partition(":")
        for phrase in phrases.split(","):
            out[tuple(phrase.split())] = Word(role, key, hint)
    return out


LEXICON: Mapping[tuple[str, ...], Word] = _lexicon({
    ("metric", "arr_delay"): "arrival delay, arrival delays, arr delay, arrival delay time",
    ("metric", "dep_delay"): "departure delay, departure delays, dep delay, departure delay time",
    ("metric", "delay"): "delay, delays, how late, how delayed, lateness",
    ("metric", "distance"): "distance, distances, mileage, miles flown, flight distance, how far, "
    "far",
    ("metric", "air_time"): "air time, airtime, flight time, time in the air, flight duration, "
    "in the air, airborne",
    ("metric", "temp"): "temperature, temperatures, temp",
    ("metric", "humid"): "humidity, relative humidity",
    ("metric", "wind_speed"): "wind speed, wind speeds, wind",
    ("metric", "wind_gust"): "wind gust, wind gusts, gust, gusts, gust speed",
    ("metric", "precip"): "precipitation, rain, rainfall",
    ("metric", "visib"): "visibility",
    ("metric", "pressure"): "pressure, air pressure, barometric pressure",
    ("metric", "seats"): "seats, seat count, seating capacity, capacity, seat",
    ("metric", "alt"): "altitude, elevation",
    ("metric", "plane_year"): "year built, build year, manufacturing year, year of manufacture",
    ("noun", "flights"): "flight, flights, departures",
    ("noun", "planes"): "plane, planes, aircraft, airplane, airplanes, tail number, tail numbers",
    ("noun", "airlines"): "airline, airlines, carrier, carriers",
    ("noun", "airports"): "airport, airports",
    ("noun", "destinations"): "destination, destinations, destination airport, "
    "destination airports, arrival airport, arrival airports",
    ("noun", "origins"): "origin, origins, origin airport, origin airports, departure airport, "
    "departure airports",
    ("noun", "manufacturers"): "manufacturer, manufacturers, maker, makers, plane manufacturer, "
    "manufacturer planes, manufacturers planes, manufacturer aircraft, "
    "plane manufacturers",
    ("noun", "models"): "model, models, plane model, plane models, aircraft model",
    ("noun", "observations"): "weather observations, observations, weather records, readings, "
    "weather readings, weather observation",
    ("noun", "months"): "month, months",
    ("noun", "hours"): "hour of day, hour of the day, departure hour, hour of departure, "
    "scheduled hour, time of day, departure time, departure times",
    ("noun", "weekdays"): "day of week, day of the week, days of the week, weekday, week day",
    ("noun", "quarters"): "quarter, quarters",
    ("noun", "routes"): "route, routes, city pair, city pairs, origin destination pair, "
    "origin destination pairs, airport pair, airport pairs",
    ("noun", "days"): "day of month, day of the month",
    ("noun", "years"): "year, years",
    ("noun", "engines"): "engine type, engine types",
    ("noun", "plane_types"): "aircraft type, aircraft types, plane type, plane types",
    ("noun", "timezones"): "time zone, time zones, timezone, timezones",
    ("agg", "avg"): "average, avg, mean, typical, on average",
    ("agg", "sum"): "total, sum, sum of, combined, cumulative",
    ("agg", "max"): "maximum, max, peak",
    ("agg", "min"): "minimum, min",
    ("superlative", "max"): "highest, largest, biggest, greatest, most, worst",
    ("superlative", "min"): "lowest, smallest, least, fewest",
    ("superlative", "max:distance"): "longest, farthest, furthest",
    ("superlative", "min:distance"): "shortest",
    ("superlative", "min:plane_year"): "oldest",
    ("superlative", "max:plane_year"): "newest, youngest",
    ("superlative", "max:temp"): "hottest, warmest",
    ("superlative", "min:temp"): "coldest",
    ("superlative", "max:wind_speed"): "windiest",
    ("superlative", "max:flights"): "busiest, most busy",
    ("superlative", "min:flights"): "least busy, quietest",
    ("count", "count"): "how many, number of, count of, count, counts, total number of, volume, "
    "volumes, traffic, flight volume",
    ("count", "much"): "how much",
    ("distinct", "distinct"): "distinct, different, unique, separate",
    ("breakdown", ""): "by, per, for each, for every, each, every, across, broken down by, "
    "grouped by, split by, in each, for all",
    ("breakdown", "months"): "monthly, month by month, each month, every month",
    ("breakdown", "hours"): "hourly, each hour, every hour, by hour, per hour",
    ("breakdown", "years"): "yearly, annual, annually",
    ("breakdown", "quarters"): "quarterly, by quarter, per quarter, each quarter",
    ("breakdown", "weekdays"): "by day of week, by day of the week, per day of week, "
    "per day of the week, by weekday, per weekday, each day of the week",
    ("which", "which"): "which, what, names of, names of the, list of, list of the",
    ("top", "desc"): "top, rank, ranked, ranking, rank the, sort, sorted, order",
    ("top", "asc"): "bottom",
    ("comparator", "gt"): "more than, over, above, greater than, higher than, longer than, "
    "later than, exceeding, bigger than, larger than, warmer than, hotter than, exceeded, exceeds, "
    "exceed, topped, topping",
    ("comparator", "gte"): "at least, no less than, or more",
    ("comparator", "lt"): "less than, under, below, fewer than, shorter than, lower than, "
    "smaller than, colder than",
    ("comparator", "lte"): "at most, no more than, or less, within",
    ("unit", "minutes"): "minute, minutes, mins",
    ("unit", "hours"): "hour, hours, hr, hrs",
    ("unit", "miles"): "mile, miles, mi",
    ("unit", "degrees"): "degrees, degree, degrees fahrenheit, f",
    ("unit", "mph"): "mph, miles per hour",
    ("unit", "feet"): "feet, ft",
    ("unit", "inches"): "inch, inches",
    ("place_role", "origin"): "from, out of, departing, departing from, leaving, leaving from, "
    "originating, originating from, originating at, departed from, flying out of, departs from",
    ("place_role", "dest"): "to, into, arriving, arriving at, arriving in, bound for, "
    "headed to, heading to, destined for, landing at, landing in, arrived at, going to",
    ("place_role", "at"): "at, in, on, for, of, with, via",
    ("place_role", "between"): "between",
    ("temporal", "lt"): "before, prior to, earlier than",
    ("temporal", "gt"): "after",
    ("temporal", "gte"): "since, starting",
    ("temporal", "lte"): "until, through, till, up to",
    ("negation", "not"): "not, except, excluding, other than, besides, apart from, except for",
    ("built", "built"): "built, made, manufactured, produced, built by, made by, "
    "manufactured by, produced by",
    ("delay", "late"): "delayed, late, delayed by, behind schedule, behind",
    ("delay", "early"): "early, ahead of schedule",
    ("direction", "dep"): "depart, departs, departed, departure, left, took off",
    ("direction", "arr"): "arrive, arrives, arrived, arrival, landed",
    ("overall", "overall"): "overall, in total, altogether, all together, without breakdown, "
    "in all, no breakdown, across the whole dataset, across the dataset, in the whole dataset, "
    "across all flights, in the whole data",
    ("compare", "compare"): "vs, versus, v, compare, compared, comparing, compared with, "
    "compared to, against, comparison, comparison of",
    ("compare", "desc"): "higher, greater, larger, bigger, longer, more, worse",
    ("compare", "asc"): "lower, smaller, shorter, fewer, less, better",
    ("compare", "desc:flights"): "busier, more flights",
    ("compare", "desc:temp"): "warmer, hotter",
    ("compare", "asc:temp"): "colder, cooler",
    ("compare", "desc:wind_speed"): "windier",
    ("share", "share"): "percentage, percent, share, proportion, fraction, rate, ratio, pct, "
    "percentage of, share of, proportion of, fraction of, percent of, what percent, how often, "
    "as a percentage, as a percent, in percent, "
    "what percentage, what share, what fraction",
    ("cancelled", "cancelled"): "cancelled, canceled, cancellation, cancellations, cancel, "
    "got cancelled, were cancelled, was cancelled, cancellation rate",
    ("ontime", "ontime"): "on time, on-time, ontime, punctual, punctuality, on time rate",
    ("followup", "followup"): "and, what about, how about, now, only, just, same, but, "
    "instead, also, then, ok, okay, what if, and now, same for, same but, same thing for, "
    "same thing",
    ("unsupported", "money"): "revenue, revenues, price, prices, fare, fares, ticket, tickets, "
    "ticket price, cost, costs, profit, profits, sales, income, money, dollars",
    ("unsupported", "people"): "passenger, passengers, people, customers, customer, crew, "
    "pilot, pilots, travellers, travelers",
    ("unsupported", "status"): "diverted, diversion, diversions",
    ("unsupported", "derived"): "median, percentile, percentiles, standard deviation, variance, "
    "correlation, correlate, correlated, speed, speeds, growth, predict, forecast, why, fuel, "
    "emissions, load factor",
    ("unsupported", "time"): "today, yesterday, tomorrow, last week, last month, last year, "
    "this week, this month, this year, next week, next month, next year, recent, recently, "
    "week, weeks",
    ("unsupported", "cause"): "delayed by weather, due to weather, because of weather, "
    "weather delay, weather delays, delay cause, delay causes, reason, reasons, cause, causes",
    ("unsupported", "daily"): "daily, per day, each day, by day, every day, day by day, by date, "
    "per date",
    ("filler", ""): "the, a, an, is, are, was, were, be, been, do, does, did, there, that, this, "
    "these, those, it, its, they, their, who, how, many, much, me, my, i, we, our, you, your, "
    "please, show, give, list, tell, find, get, compute, calculate, display, return, see, want, "
    "like, would, could, can, should, will, all, any, have, has, had, as, than, so, about, "
    "out, up, during, whole, entire, value, values, amount, level, levels, recorded, "
    "measured, observed, fly, flies, flew, flown, flying, operate, operates, operated, "
    "operating, serve, serves, served, run, runs, ran, go, goes, went, travel, travelled, "
    "traveled, time, times, total of, number, kind, sort, data, dataset, trend, us, half, "
    "whats, whos, hows, theres, lets, let, know, did any, some, ones, one of, more, less, "
    "fewer, where, when, happened, take, took, have been, record, records, scheduled, "
    "altogether there, planes that, flights that, were there, in the data, "
    "hold, holds, carry, carries, using, used, use, or, while, weather, international, intl, "
    "airport named, table, tables, planes table, them, thing, things, full, name, "
    "names, spent, busy, "
    "in hours with, during hours with, hours with, in hours when, hours when, in rain, "
    "in the rain, rainy, morning, evening, afternoon, single, covered, counting, counted, "
    "in the hour, that hour, in that hour, vary, varied, change, changed, evolve, evolved, "
    "cover, covers, sends, send, sent, at departure, which is, with their, along with, "
    "together with, is it, leave",
})  # fmt: skip
"""Phrase (lower-case words) -> meaning. Longer phrases win over shorter ones when scanning."""

_CARRIER_SHORT = {
    "jetblue": "B6", "jet blue": "B6", "united": "UA", "delta": "DL", "american": "AA",
    "southwest": "WN", "expressjet": "EV", "express jet": "EV", "envoy": "MQ",
    "virgin america": "VX", "virgin": "VX", "alaska": "AS", "hawaiian": "HA", "frontier": "F9",
    "airtran": "FL", "air tran": "FL", "mesa": "YV", "skywest": "OO", "sky west": "OO",
    "us airways": "US", "usair": "US", "endeavor": "9E", "american eagle": "MQ",
}  # fmt: skip
_CITIES = {
    "newark": "EWR", "newark liberty": "EWR", "kennedy": "JFK", "john f kennedy": "JFK",
    "laguardia": "LGA", "new york": "EWR JFK LGA", "nyc": "EWR JFK LGA", "atlanta": "ATL",
    "chicago ohare": "ORD", "ohare": "ORD", "chicago midway": "MDW", "midway": "MDW",
    "chicago": "ORD MDW", "boston": "BOS", "logan": "BOS", "charlotte": "CLT",
    "fort lauderdale": "FLL", "washington": "DCA IAD", "washington national": "DCA",
    "reagan": "DCA", "dulles": "IAD", "washington dulles": "IAD", "detroit": "DTW",
    "dallas": "DFW", "dallas fort worth": "DFW", "raleigh": "RDU", "houston": "IAH HOU",
    "houston hobby": "HOU", "hobby": "HOU", "houston intercontinental": "IAH",
    "bush intercontinental": "IAH", "houston bush": "IAH", "seatac": "SEA", "sea tac": "SEA",
    "la guardia": "LGA", "o hare": "ORD", "chicago o hare": "ORD", "idlewild": "JFK",
    "minneapolis": "MSP", "west palm beach": "PBI",
    "las vegas": "LAS", "vegas": "LAS", "san juan": "SJU", "buffalo": "BUF", "phoenix": "PHX",
    "cleveland": "CLE", "st louis": "STL", "saint louis": "STL", "cincinnati": "CVG",
    "seattle": "SEA", "new orleans": "MSY", "columbus": "CMH", "charleston": "CHS",
    "milwaukee": "MKE", "austin": "AUS", "rochester": "ROC", "baltimore": "BWI",
    "syracuse": "SYR", "dayton": "DAY", "louisville": "SDF", "st thomas": "STT",
    "aguadilla": "BQN", "ponce": "PSE", "anchorage": "ANC", "oakland": "OAK", "san jose": "SJC",
    "nantucket": "ACK", "omaha": "OMA", "savannah": "SAV", "greenville": "GSP",
    "albuquerque": "ABQ", "madison": "MSN", "knoxville": "TYS", "hartford": "BDL",
    "providence": "PVD", "burbank": "BUR", "oklahoma city": "OKC", "grand rapids": "GRR",
    "akron": "CAK", "orange county": "SNA", "fort myers": "RSW", "bozeman": "BZN",
    "lexington": "LEX", "greensboro": "GSO", "marthas vineyard": "MVY", "portland": "PDX PWM",
}  # fmt: skip
_AMBIGUOUS_CITIES = frozenset({"portland"})
_LOWER_CASE_CODE_STOP = _word_set(
    "us as ha fl oo day den sea san sat oak mem bur ack jac las lex ind pit ric mia aus sav"
)
_NAME_SUFFIXES = _word_set(
    "inc co corp corporation ltd spa intl international airport arpt regional rgnl"
)
_MANUFACTURER_SUFFIXES = _NAME_SUFFIXES | {"aircraft", "industrie", "aerospace", "design"}
_TOKEN = re.compile(r"\d+(?:,\d{3})+(?:\.\d+)?(?![A-Za-z])|\d+\.\d+|[A-Za-z0-9]+")
_POSSESSIVE = re.compile(r"(\w)['’]s\b")
_NUMBER = re.compile(r"(\d+(?:,\d{3})*(?:\.\d+)?)(st|nd|rd|th)?", re.IGNORECASE)


def tokenize(text: str) -> list[str]:
    """Splits text into words and numbers; apostrophes vanish ("O'Hare" -> ``"OHare"``).

    Returns:
        Tokens as written: ``"1,000 miles from JFK"`` -> ``["1,000", "miles", "from", "JFK"]``.
    """
    text = _POSSESSIVE.sub(r"\1", text)
    return _TOKEN.findall(re.sub(r"['’`]", "", text))


def _words(text: str) -> tuple[str, ...]:
    return tuple(token.lower() for token in tokenize(text))


def _strip_suffixes(words: tuple[str, ...], suffixes: frozenset[str]) -> tuple[str, ...]:
    while words and words[-1] in suffixes:
        words = words[:-1]
    return words


def build_vocabulary(
    *,
    carriers: Iterable[tuple[str, str]],
    airports: Iterable[tuple[str, str | None]],
    origins: Iterable[str],
    manufacturers: Iterable[str],
    years: Iterable[int],
) -> Vocabulary:
    """Builds the vocabulary from rows read from the warehouse (or written by hand in tests).

    Args:
        carriers: ``(code, name)`` rows of the airlines table: ``("B6", "JetBlue Airways")``.
        airports: ``(code, name or None)`` for every airport used by a flight.
        origins: Codes of the departure airports.
        manufacturers: Raw manufacturer names of the planes table (``"AIRBUS INDUSTRIE"``).
        years: Years present in flights and weather.

    Returns:
        The vocabulary. Phrase priority, lowest first: lower-case codes, manufacturer names,
        airport names, carrier names, carrier short forms and city names, month names.
    """
    carrier_names = {code: name for code, name in carriers}
    airport_names = {code: (name or "").replace("\\", "") for code, name in airports}
    phrases: dict[tuple[str, ...], Value] = {}
    codes: dict[str, Value] = {}
    for code, name in carrier_names.items():
        codes[code] = Value("carrier", (code,), f"{name} ({code})")
    for code, name in airport_names.items():
        codes[code] = Value("airport", (code,), f"{code} ({name})" if name else code)
    for code, value in codes.items():
        if code.lower() not in _LOWER_CASE_CODE_STOP:
            phrases[(code.lower(),)] = value
    phrases.update(_manufacturer_phrases(manufacturers))
    for code, name in airport_names.items():
        for words in _name_forms(name, _NAME_SUFFIXES):
            phrases[words] = codes[code]
    for code, name in carrier_names.items():
        for words in _name_forms(name, _NAME_SUFFIXES):
            phrases[words] = codes[code]
    for phrase, code in _CARRIER_SHORT.items():
        if code in codes:
            phrases[_words(phrase)] = codes[code]
    phrases.update(_city_phrases(airport_names))
    phrases.update(_month_phrases())
    from chat_api.planner.calendar import calendar_phrases  # calendar imports this module

    phrases.update(calendar_phrases(int(year) for year in years))
    return Vocabulary(
        carriers=carrier_names,
        airports=airport_names,
        origins=frozenset(origins),
        years=frozenset(int(year) for year in years),
        phrases=phrases,
        codes=codes,
    )


def load_vocabulary(query: Callable[[str], Sequence[tuple[Any, ...]]]) -> Vocabulary:
    """Reads the vocabulary from the nycflights13 warehouse.

    Args:
        query: Runs raw DuckDB SQL over the warehouse tables and returns the rows, such as
            ``Warehouse.query_raw`` or ``lambda sql: connection.execute(sql).fetchall()``.

    Returns:
        The vocabulary of :func:`build_vocabulary`. Errors of ``query`` propagate unchanged.
    """
    return build_vocabulary(
        carriers=[(str(c), str(n)) for c, n in query("SELECT carrier, name FROM airlines")],
        airports=[
            (str(code), None if name is None else str(name))
            for code, name in query(
                "SELECT used.code, airports.name FROM (SELECT origin AS code FROM flights "
                "UNION SELECT dest FROM flights) AS used "
                "LEFT JOIN airports ON airports.faa = used.code ORDER BY 1"
            )
        ],
        origins=[str(row[0]) for row in query("SELECT DISTINCT origin FROM flights")],
        manufacturers=[
            str(row[0])
            for row in query("SELECT DISTINCT manufacturer FROM planes WHERE manufacturer <> ''")
        ],
        years=[
            int(row[0])
            for row in query("SELECT DISTINCT year FROM flights UNION SELECT year FROM weather")
        ],
    )


def _name_forms(name: str, suffixes: frozenset[str]) -> list[tuple[str, ...]]:
    words = _words(name)
    stripped = _strip_suffixes(words, suffixes)
    return [form for form in {words, stripped} if form]


def _manufacturer_phrases(names: Iterable[str]) -> dict[tuple[str, ...], Value]:
    groups: dict[tuple[str, ...], list[str]] = {}
    for name in sorted(set(names)):
        for words in _name_forms(name, _MANUFACTURER_SUFFIXES):
            groups.setdefault(words, []).append(name)
    return {
        words: Value("manufacturer", tuple(raws), " / ".join(raws))
        for words, raws in groups.items()
    }


def _city_phrases(airport_names: Mapping[str, str]) -> dict[tuple[str, ...], Value]:
    out: dict[tuple[str, ...], Value] = {}
    for city, code_text in _CITIES.items():
        known = tuple(code for code in code_text.split() if code in airport_names)
        if not known:
            continue
        label = " or ".join(
            f"{code} ({airport_names[code]})" if airport_names[code] else code for code in known
        )
        out[_words(city)] = Value("airport", known, label, ambiguous=city in _AMBIGUOUS_CITIES)
    return out


def _month_phrases() -> dict[tuple[str, ...], Value]:
    out: dict[tuple[str, ...], Value] = {}
    for number, name in enumerate(MONTH_NAMES, start=1):
        value = Value("month", (number,), name)
        out[(name.lower(),)] = value
        out[(name[:3].lower(),)] = value
    out[("sept",)] = out[("september",)]
    return out


_MAX_PHRASE_WORDS = 5
_MAY_CONTEXT = _word_set("in during of for since through until and or to from before after")


def scan(question: str, vocabulary: Vocabulary) -> tuple[Mention, ...]:
    """Splits a question into mentions, preferring the longest phrase at each position.

    Numbers (``30``, ``1,000``, ``3rd``, ``five``) become :class:`Number`; upper-case codes known
    to the vocabulary (``UA``, ``ATL``) become values; the word "may" is the month only after a
    preposition ("in May") or when capitalised mid-sentence. The lexicon wins a tie with a value.

    Args:
        question: The question as asked.
        vocabulary: Values to recognise.

    Returns:
        Mentions covering every token in order; unrecognised tokens have ``meaning`` None.
    """
    tokens = tokenize(question)
    words = [token.lower() for token in tokens]
    mentions: list[Mention] = []
    i = 0
    while i < len(tokens):
        mention, size = _mention_at(tokens, words, i, vocabulary)
        mentions.append(mention)
        i += size
    return tuple(mentions)


def _mention_at(
    tokens: Sequence[str], words: Sequence[str], i: int, vocabulary: Vocabulary
) -> tuple[Mention, int]:
    token = tokens[i]
    number = _NUMBER.fullmatch(token)
    if number:
        value = float(number.group(1).replace(",", ""))
        return Mention(token, Number(value, ordinal=number.group(2) is not None)), 1
    longer = _phrase_at(tokens, words, i, vocabulary, smallest=2)
    if longer is not None:
        return longer
    if token in vocabulary.codes and token.isupper():
        return Mention(token, vocabulary.codes[token]), 1
    found = _phrase_at(tokens, words, i, vocabulary, smallest=1)
    if found is not None:
        return found
    if words[i] in _NUMBER_WORDS:
        return Mention(token, Number(float(_NUMBER_WORDS.index(words[i])))), 1
    return _fallback(token, words[i], vocabulary), 1


def _phrase_at(
    tokens: Sequence[str], words: Sequence[str], i: int, vocabulary: Vocabulary, *, smallest: int
) -> tuple[Mention, int] | None:
    for size in range(min(_MAX_PHRASE_WORDS, len(tokens) - i), smallest - 1, -1):
        key = tuple(words[i : i + size])
        text = " ".join(tokens[i : i + size])
        meaning: Word | Value | None = LEXICON.get(key) or vocabulary.phrases.get(key)
        if key == ("may",) and not (i > 0 and (words[i - 1] in _MAY_CONTEXT or tokens[i] == "May")):
            meaning = None
        if meaning is not None:
            return Mention(text, meaning), size
    return None


_FUZZY_MIN_SCORE = 88.0
_FUZZY_MIN_LENGTH = 5


def _fallback(token: str, word: str, vocabulary: Vocabulary) -> Mention:
    """An unknown token: its singular ("Mondays" -> "monday", via ``inflect``), a number word
    ("thirty" via ``word2number``), or a close spelling of a one-word phrase ("Laguadia", via
    ``rapidfuzz``, score at least 88 of 100 and five letters or more); else unrecognised."""
    singular = _singular(word)
    if singular:
        meaning = LEXICON.get((singular,)) or vocabulary.phrases.get((singular,))
        if meaning is not None:
            return Mention(token, meaning)
    number = _number_word(word)
    if number is not None:
        return Mention(token, Number(number))
    if len(word) >= _FUZZY_MIN_LENGTH and word.isalpha():
        match = _fuzzy(word, vocabulary)
        if match is not None:
            return Mention(token, match)
    return Mention(token, None)


@functools.cache
def _inflect_engine() -> Any:
    import inflect

    return inflect.engine()


def _singular(word: str) -> str:
    found = _inflect_engine().singular_noun(word) if word.isalpha() else False
    return found if isinstance(found, str) else ""


def _number_word(word: str) -> float | None:
    from word2number import w2n  # type: ignore[import-untyped]

    if not word.isalpha() or word in ("point",):
        return None
    try:
        return float(w2n.word_to_num(word))
    except ValueError:
        return None


def _fuzzy(word: str, vocabulary: Vocabulary) -> Word | Value | None:
    from rapidfuzz import fuzz, process, utils

    choices = _single_words(vocabulary)
    best = process.extractOne(
        word, choices, scorer=fuzz.ratio, processor=utils.default_process,
        score_cutoff=_FUZZY_MIN_SCORE,
    )  # fmt: skip
    if best is None:
        return None
    key = (best[0],)
    return LEXICON.get(key) or vocabulary.phrases.get(key)


_SINGLE_WORDS: dict[int, list[str]] = {}


def _single_words(vocabulary: Vocabulary) -> list[str]:
    found = _SINGLE_WORDS.get(id(vocabulary.phrases))
    if found is None:
        words = {k[0] for k in LEXICON if len(k) == 1 and len(k[0]) >= _FUZZY_MIN_LENGTH}
        words |= {
            k[0] for k in vocabulary.phrases if len(k) == 1 and len(k[0]) >= _FUZZY_MIN_LENGTH
        }
        found = _SINGLE_WORDS[id(vocabulary.phrases)] = sorted(words)
    return found
