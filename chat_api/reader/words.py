"""The question language as tables: English grammar words, never a dataset's words.

Every word that names data comes from the model (names, titles, ``meta.synonyms``) or from the
warehouse (string values). What is here is the English around those words: aggregations,
orderings, comparisons, negation, time grains, units, spellings analysts type, and the function
words a reader passes over. Each table row that carries meaning has an example question; the
parametrised test runs every example against the shipped models and checks the reading.

To add a phrasing: add a row to the table of its class (a new word for "average" goes in
``AGGREGATIONS``), with its example. No code changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Word:
    """A grammar phrase: what it means and a question that shows it."""

    kind: str
    value: str
    example: str = ""


def _table(kind: str, rows: Mapping[str, tuple[str, str]]) -> dict[str, Word]:
    return {phrase: Word(kind, value, example) for phrase, (value, example) in rows.items()}


SPELLINGS: Mapping[str, str] = MappingProxyType({
    "avg": "average", "avg.": "average", "ave": "average", "mean": "average",
    "tot": "total", "num": "number", "no.": "number", "nbr": "number", "cnt": "count",
    "#": "number", "qty": "quantity", "amt": "amount", "pct": "percent", "%": "percent",
    "hrs": "hours", "hr": "hour", "h": "hours", "mins": "minutes", "min.": "minutes",
    "secs": "seconds", "yr": "year", "yrs": "years", "mo": "month", "mos": "months",
    "wk": "week", "wks": "weeks", "qtr": "quarter", "q": "quarter",
    "w/": "with", "w/o": "without", "thru": "through", "tho": "though", "b/c": "because",
    "vs": "versus", "vs.": "versus", "v.": "versus", "v": "versus", "versus": "versus",
    "btwn": "between", "approx": "about", "incl": "including", "excl": "excluding",
    "&": "and", "+": "and", "yoy": "by year", "mom": "by month", "ytd": "year",
    "max": "maximum", "min": "minimum", "med": "median", "pctl": "percentile",
    "sched": "scheduled", "dist": "distance", "info": "information",
})  # fmt: skip
"""Analysts' short forms and symbols, read as the word they stand for."""

CONTRACTIONS: Mapping[str, str] = MappingProxyType({
    "n't": " not", "'re": " are", "'ve": " have", "'ll": " will", "'d": " would", "'m": " am",
    "won't": "will not", "can't": "can not", "cannot": "can not", "what's": "what is",
    "who's": "who is", "where's": "where is", "how's": "how is", "that's": "that is",
    "there's": "there is", "it's": "it is", "let's": "let us",
})  # fmt: skip

AGGREGATIONS = _table("agg", {
    "average": ("avg", "average delay for United"),
    "typical": ("median", "typical order size"),
    "median": ("median", "median arrival delay"),
    "total": ("sum", "total distance flown in March"),
    "sum": ("sum", "sum of seats"),
    "combined": ("sum", "combined distance of all flights"),
    "overall": ("sum", "overall revenue"),
    "maximum": ("max", "maximum wind speed"),
    "highest": ("max", "highest temperature at JFK"),
    "largest": ("max", "largest order"),
    "biggest": ("max", "biggest delay"),
    "longest": ("max", "longest distance"),
    "greatest": ("max", "greatest delay"),
    "peak": ("max", "peak wind speed"),
    "worst": ("max", "worst delay"),
    "minimum": ("min", "minimum temperature"),
    "lowest": ("min", "lowest temperature"),
    "smallest": ("min", "smallest order"),
    "shortest": ("min", "shortest distance"),
    "least": ("min", "least seats"),
    "count": ("count", "count of flights"),
    "number": ("count", "number of flights"),
    "how many": ("count", "how many flights"),
    "how much": ("sum", "how much distance"),
    "percentile": ("percentile", "90th percentile of arrival delay"),
    "distinct": ("countDistinct", "distinct destinations"),
    "unique": ("countDistinct", "unique tail numbers"),
    "different": ("countDistinct", "different destinations"),
})  # fmt: skip
"""Aggregation words; a superlative (``highest``) also orders a breakdown."""

ORDERINGS = _table("order", {
    "top": ("desc", "top 5 destinations"),
    "most": ("desc", "which carrier has the most flights"),
    "busiest": ("desc", "busiest airport"),
    "popular": ("desc", "most popular destination"),
    "best": ("desc", "best month"),
    "highest": ("desc", "which carrier has the highest average delay"),
    "largest": ("desc", "largest carriers"),
    "biggest": ("desc", "biggest destinations"),
    "greatest": ("desc", "greatest delay by carrier"),
    "longest": ("desc", "longest routes"),
    "worst": ("desc", "worst carrier for delays"),
    "maximum": ("desc", "carrier with the maximum delay"),
    "more": ("desc", "who flies more"),
    "bottom": ("asc", "bottom 3 carriers"),
    "least": ("asc", "least busy day"),
    "fewest": ("asc", "fewest flights"),
    "lowest": ("asc", "lowest average delay"),
    "smallest": ("asc", "smallest carriers"),
    "shortest": ("asc", "shortest routes"),
    "quietest": ("asc", "quietest month"),
    "slowest": ("asc", "slowest month"),
    "minimum": ("asc", "carrier with the minimum delay"),
    "less": ("asc", "who flies less"),
    "rank": ("desc", "rank carriers by flights"),
    "ranked": ("desc", "carriers ranked by delay"),
    "sorted": ("desc", "destinations sorted by flights"),
})  # fmt: skip
"""Words that order a breakdown; with a number (``top 5``) they also limit it."""

COMPARATORS = _table("cmp", {
    "more than": ("gt", "flights more than 2000 miles"),
    "over": ("gt", "delayed over 2 hours"),
    "above": ("gt", "temperature above 90"),
    "greater than": ("gt", "distance greater than 1000"),
    "higher than": ("gt", "higher than 50"),
    "larger than": ("gt", "larger than 100"),
    "longer than": ("gt", "longer than 300 minutes"),
    "exceeding": ("gt", "delay exceeding 60"),
    "beyond": ("gt", "beyond 1000 miles"),
    "at least": ("gte", "carriers with at least 1000 flights"),
    "or more": ("gte", "5 or more orders"),
    "and up": ("gte", "100 and up"),
    "no less than": ("gte", "no less than 10"),
    "minimum of": ("gte", "a minimum of 3 engines"),
    ">": ("gt", "> 100"), ">=": ("gte", ">= 100"), "<": ("lt", "< 100"), "<=": ("lte", "<= 100"),
    "less than": ("lt", "less than 500 miles"),
    "fewer than": ("lt", "fewer than 100 flights"),
    "under": ("lt", "under 30 minutes"),
    "below": ("lt", "below freezing 32"),
    "lower than": ("lt", "lower than 10"),
    "shorter than": ("lt", "shorter than 200 miles"),
    "at most": ("lte", "at most 2 engines"),
    "or less": ("lte", "10 or less"),
    "or fewer": ("lte", "10 or fewer"),
    "no more than": ("lte", "no more than 5"),
    "up to": ("lte", "up to 100"),
    "exactly": ("equals", "exactly 2 engines"),
    "equal to": ("equals", "equal to 4"),
    "between": ("between", "between 100 and 200 miles"),
    "before": ("lt", "flights before 6am"),
    "earlier than": ("lt", "earlier than 7am"),
    "after": ("gte", "flights after 9pm"),
    "later than": ("gte", "later than 9pm"),
    "or later": ("gte", "9pm or later"),
    "or earlier": ("lte", "6am or earlier"),
    "since": ("gte", "orders since 2017"),
    "until": ("lte", "orders until March"),
})  # fmt: skip
"""Comparisons of a number with a member (a row filter) or with a measure (a filter on groups)."""

NEGATIONS = _table("not", {
    "not": ("not", "flights not on United"),
    "no": ("not", "no weekend flights"),
    "non": ("not", "non cancelled flights"),
    "excluding": ("not", "excluding cancelled flights"),
    "exclude": ("not", "exclude JFK"),
    "except": ("not", "every carrier except Delta"),
    "other than": ("not", "carriers other than United"),
    "without": ("not", "flights without a delay"),
    "besides": ("not", "airports besides JFK"),
    "ignoring": ("not", "ignoring cancelled flights"),
    "apart from": ("not", "apart from United"),
    "aside from": ("not", "aside from Delta"),
    "outside": ("not", "outside of January"),
})  # fmt: skip
"""Words that turn the next condition around."""

GROUPINGS = _table("by", {
    "by": ("by", "flights by carrier"),
    "per": ("by", "flights per month"),
    "for each": ("each", "busiest destination for each origin"),
    "for every": ("each", "average delay for every carrier"),
    "in each": ("each", "top product in each store"),
    "each": ("each", "each carrier's flights"),
    "every": ("each", "every month"),
    "across": ("by", "delays across carriers"),
    "broken down by": ("by", "flights broken down by carrier"),
    "breakdown by": ("by", "breakdown by month"),
    "break down by": ("by", "break down by month"),
    "split by": ("by", "split by origin"),
    "grouped by": ("by", "grouped by carrier"),
    "group by": ("by", "group by carrier"),
    "for all": ("by", "for all carriers"),
    "among": ("by", "among carriers"),
    "which": ("which", "which carrier has the most flights"),
    "what": ("which", "what airline"),
    "whose": ("which", "whose delay is highest"),
    "who": ("which", "who flies the most"),
    "breakdown": ("by", "carrier breakdown"),
    "distribution": ("by", "distribution by hour"),
    "trend": ("trend", "trend of flights over the year"),
    "over time": ("trend", "flights over time"),
    "timeline": ("trend", "timeline of orders"),
})  # fmt: skip
"""Words that ask for one row per value of the member that follows (or precedes)."""

GRAINS = _table("grain", {
    "hourly": ("hour", "hourly flights"), "hour": ("hour", "flights by hour"),
    "daily": ("day", "daily orders"), "day": ("day", "busiest day"),
    "date": ("day", "flights by date"),
    "weekly": ("week", "weekly orders"), "week": ("week", "orders per week"),
    "monthly": ("month", "monthly flights"), "month": ("month", "flights per month"),
    "quarterly": ("quarter", "quarterly revenue"), "quarter": ("quarter", "flights by quarter"),
    "yearly": ("year", "yearly sales"), "annual": ("year", "annual sales"),
    "annually": ("year", "sales annually"), "year": ("year", "sales by year"),
})  # fmt: skip
"""Time grains of a time dimension (Cube's granularities)."""

SHARES = _table("share", {
    "percentage": ("share", "percentage of flights cancelled"),
    "percent": ("share", "what percent of orders"),
    "share": ("share", "share of flights by United"),
    "proportion": ("share", "proportion of late flights"),
    "fraction": ("share", "fraction of orders"),
    "rate": ("share", "cancellation rate"),
    "ratio": ("ratio", "ratio of distance to air time"),
})  # fmt: skip

ARITHMETIC = _table("arith", {
    "divided by": ("ratio", "distance divided by air time"),
    "over": ("ratio", "distance over air time"),
    "/": ("ratio", "distance / air time"),
    "to": ("ratio", "ratio of distance to air time"),
})  # fmt: skip
"""Words between two measures that divide them (used only when both sides are measures)."""

COMPARISONS = _table("versus", {
    "versus": ("versus", "JFK versus LGA"),
    "compared to": ("versus", "Delta compared to United"),
    "compared with": ("versus", "Delta compared with United"),
    "compare": ("versus", "compare JFK and LGA"),
    "against": ("versus", "JFK against LGA"),
    "or": ("versus", "JFK or LGA"),
    "and": ("and", "JFK and LGA"),
    "difference": ("versus", "difference between JFK and LGA"),
})  # fmt: skip

FOLLOW_UPS = _table("followup", {
    "what about": ("followup", "what about Delta?"),
    "how about": ("followup", "how about in July?"),
    "and": ("followup", "and for LGA?"),
    "now": ("followup", "now by month"),
    "same": ("followup", "same for Delta"),
    "instead": ("followup", "use LGA instead"),
    "only": ("followup", "only Delta"),
    "just": ("followup", "just the top 3"),
    "also": ("followup", "also by month"),
    "there": ("there", "how many flights went there?"),
    "those": ("there", "how many of those were cancelled?"),
    "them": ("there", "how many of them"),
    "that": ("there", "break that down by month"),
    "it": ("there", "what was it in July?"),
    "drop": ("drop", "drop that filter"),
    "remove": ("drop", "remove the month filter"),
    "ignore": ("drop", "ignore the carrier"),
    "without": ("drop", "without the filter"),
    "overall": ("overall", "overall instead"),
    "all": ("overall", "for all of them"),
})  # fmt: skip
"""Words that make a question a change of the thread's previous query."""

UNITS: Mapping[str, tuple[str, float]] = MappingProxyType({
    "minute": ("minute", 1.0), "hour": ("minute", 60.0), "second": ("minute", 1 / 60),
    "day": ("day", 1.0), "week": ("day", 7.0),
    "mile": ("mile", 1.0), "kilometer": ("mile", 0.621371), "km": ("mile", 0.621371),
    "foot": ("foot", 1.0), "feet": ("foot", 1.0), "meter": ("foot", 3.28084),
    "percent": ("percent", 1.0), "dollar": ("dollar", 1.0), "cent": ("dollar", 0.01),
    "k": ("", 1000.0), "thousand": ("", 1000.0), "million": ("", 1_000_000.0), "m": ("", 1e6),
    "bn": ("", 1e9), "billion": ("", 1e9),
})  # fmt: skip
"""Unit words: the unit they measure in and the factor to it (2 hours is 120 minutes)."""

UNIT_OF_TITLE: Mapping[str, str] = MappingProxyType({
    "minutes": "minute", "minute": "minute", "mins": "minute", "hours": "minute",
    "miles": "mile", "mph": "mile", "feet": "foot", "ft": "foot", "%": "percent",
    "percent": "percent", "usd": "dollar", "$": "dollar", "dollars": "dollar", "days": "day",
})  # fmt: skip
"""A unit written in a member's title, "Delay (minutes)", or its ``meta.unit``."""

DIRECTIONS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "from": ("origin", "source", "from", "departure", "departing", "sender", "start", "home"),
    "out of": ("origin", "source", "from", "departure", "departing"),
    "leaving": ("origin", "departure", "departing"),
    "departing": ("origin", "departure", "departing"),
    "to": ("destination", "dest", "to", "arrival", "target", "recipient", "end"),
    "into": ("destination", "dest", "arrival"),
    "arriving": ("destination", "dest", "arrival"),
    "bound for": ("destination", "dest"),
    "heading to": ("destination", "dest"),
})  # fmt: skip
"""Prepositions that pick between two members holding the same values (origin or destination),
by words of the members' names and titles."""

TRUE_WORDS = frozenset({"true", "yes"})
FALSE_WORDS = frozenset({"false"})

CALENDAR_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
MONTH_SHORT = {name[:3]: i + 1 for i, name in enumerate(CALENDAR_MONTHS)} | {"sept": 9}
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAY_SHORT = {name[:3]: i for i, name in enumerate(WEEKDAYS)} | {"tues": 1, "thurs": 3}
WEEKEND = (6, 7)
WORKDAYS = (1, 2, 3, 4, 5)
"""ISO weekday numbers (Monday 1, Sunday 7), as ``EXTRACT(ISODOW ...)`` gives them."""
HALVES = {"first half": (1, 6), "second half": (7, 12), "h1": (1, 6), "h2": (7, 12)}

NUMBER_WORDS: Mapping[str, int] = MappingProxyType({
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "hundred": 100, "a dozen": 12, "dozen": 12,
    "a hundred": 100, "a thousand": 1000, "half an": 0.5, "half": 0.5, "an": 1,  # type: ignore[dict-item]
})  # fmt: skip

FUNCTION_WORDS = frozenset(
    """
a an the of in on at for to from with by as is are was were be been being am do does did done
doing have has had having will would shall should can could may might must it its this that
these those there here their them they we our us you your i me my he she his her what which who
whom whose when where why how than then so such very too also just only all any some each every
either neither both few many much more most other another same own not no nor and or but if
while about into onto upon over under up down out off again further once all per via within
during before after between through across along around among please thanks thank kindly tell
show give list get got gets getting find see look let lets need want like know display report
return pull provide calculate compute break me quick quickly roughly approximately about around
overall actually really basically exactly just still ever yet already even okay ok hey hi hello
so well now then total whole entire altogether combined respectively one ones thing things kind
kinds type lot lots bunch data dataset table numbers figure figures value values stats
statistics info information summary answer question anything something everything stuff happen
happened happening occur occurred made make makes making take took taken come came go went going
gone end ended ending up did does doing use used using
""".split()  # noqa: SIM905
)
"""Function words, auxiliaries and light verbs: passed over unless they belong to a phrase."""
