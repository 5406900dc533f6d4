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
    "diff": "different", "tot": "total", "num": "number", "no.": "number", "nbr": "number",
    "cnt": "count",
    "#": "number", "qty": "quantity", "amt": "amount", "pct": "percent", "%": "percent",
    "hrs": "hours", "hr": "hour", "h": "hours", "mins": "minutes", "min.": "minutes",
    "secs": "seconds", "yr": "year", "yrs": "years", "mo": "month", "mos": "months",
    "wk": "week", "wks": "weeks", "qtr": "quarter", "q": "quarter",
    "w/": "with", "w/o": "without", "thru": "through", "tho": "though", "b/c": "because",
    "vs": "versus", "vs.": "versus", "v.": "versus", "v": "versus", "versus": "versus",
    "btwn": "between", "approx": "about", "incl": "including", "excl": "excluding",
    "&": "and", "+": "and", "yoy": "by year", "mom": "by month", "ytd": "year",
    "max": "maximum", "min": "minimum", "med": "median", "pctl": "percentile",
    "info": "information",
})  # fmt: skip
"""Analysts' short forms and symbols, read as the word they stand for."""

CONTRACTIONS: Mapping[str, str] = MappingProxyType({
    "n't": " not", "'re": " are", "'ve": " have", "'ll": " will", "'d": " would", "'m": " am",
    "won't": "will not", "can't": "can not", "cannot": "can not", "what's": "what is",
    "who's": "who is", "where's": "where is", "how's": "how is", "that's": "that is",
    "there's": "there is", "it's": "it is", "let's": "let us",
})  # fmt: skip

AGGREGATIONS = _table("agg", {
    "average": ("avg", "average wait for Acme"),
    "typical": ("median", "typical order size"),
    "median": ("median", "median arrival wait"),
    "total": ("sum", "total weight flown in March"),
    "sum": ("sum", "sum of units"),
    "combined": ("sum", "combined weight of all orders"),
    "overall": ("sum", "overall revenue"),
    "maximum": ("max", "maximum basket size"),
    "highest": ("max", "highest price at North"),
    "largest": ("max", "largest basket size"),
    "biggest": ("max", "biggest wait"),
    "longest": ("max", "longest weight"),
    "greatest": ("max", "greatest wait"),
    "peak": ("max", "peak basket size"),
    "worst": ("max", "worst wait"),
    "minimum": ("min", "minimum price"),
    "lowest": ("min", "lowest price"),
    "smallest": ("min", "smallest basket size"),
    "shortest": ("min", "shortest weight"),
    "least": ("min", "least units"),
    "count": ("count", "count of orders"),
    "number": ("count", "number of orders"),
    "how many": ("count", "how many orders"),
    "how much": ("sum", "how much weight"),
    "percentile": ("percentile", "90th percentile of arrival wait"),
    "distinct": ("countDistinct", "how many distinct products"),
    "unique": ("countDistinct", "number of unique serial numbers"),
    "different": ("countDistinct", "how many different products"),
})  # fmt: skip
"""Aggregation words; a superlative (``highest``) also orders a breakdown."""

ORDERINGS = _table("order", {
    "top": ("desc", "top 5 products"),
    "most": ("desc", "which supplier has the most orders"),
    "busiest": ("desc", "busiest warehouse"),
    "popular": ("desc", "most popular product"),
    "common": ("desc", "most common supplier"),
    "frequent": ("desc", "most frequent product"),
    "best": ("desc", "best month"),
    "highest": ("desc", "which supplier has the highest average wait"),
    "largest": ("desc", "largest suppliers"),
    "biggest": ("desc", "biggest products"),
    "greatest": ("desc", "greatest wait by supplier"),
    "longest": ("desc", "longest lanes"),
    "worst": ("desc", "worst supplier for waits"),
    "maximum": ("desc", "supplier with the maximum wait"),
    "more": ("desc", "which supplier has more orders"),
    "bottom": ("asc", "bottom 3 suppliers"),
    "least": ("asc", "least popular product"),
    "fewest": ("asc", "suppliers with the fewest orders"),
    "lowest": ("asc", "supplier with the lowest average wait"),
    "smallest": ("asc", "smallest suppliers"),
    "shortest": ("asc", "shortest lanes"),
    "strongest": ("desc", "strongest month for orders"),
    "weakest": ("asc", "weakest month for orders"),
    "quietest": ("asc", "quietest month"),
    "least busy": ("asc", "least busy day"),
    "slowest": ("asc", "slowest month"),
    "minimum": ("asc", "supplier with the minimum wait"),
    "less": ("asc", "which supplier has less revenue"),
    "rank": ("desc", "rank suppliers by orders"),
    "ranked": ("desc", "suppliers ranked by wait"),
    "sorted": ("desc", "products sorted by orders"),
    "highest first": ("desc", "rank suppliers by orders, highest first"),
    "worst first": ("desc", "rank suppliers by average wait, worst first"),
    "best first": ("desc", "rank suppliers by revenue, best first"),
    "biggest first": ("desc", "suppliers by wait, biggest first"),
    "largest first": ("desc", "suppliers by units, largest first"),
    "descending": ("desc", "suppliers by units descending"),
    "lowest first": ("asc", "suppliers by wait, lowest first"),
    "smallest first": ("asc", "suppliers by units, smallest first"),
    "ascending": ("asc", "suppliers by wait ascending"),
})  # fmt: skip
"""Words that order a breakdown; with a number (``top 5``) they also limit it."""

COMPARATORS = _table("cmp", {
    "more than": ("gt", "orders more than 2000 kilograms"),
    "over": ("gt", "waited over 2 hours"),
    "above": ("gt", "price above 90"),
    "greater than": ("gt", "weight greater than 1000"),
    "higher than": ("gt", "orders with a price higher than 50"),
    "larger than": ("gt", "orders with a basket size larger than 100"),
    "longer than": ("gt", "orders with a duration longer than 300 minutes"),
    "exceeding": ("gt", "wait exceeding 60"),
    "beyond": ("gt", "beyond 1000 kilograms"),
    "at least": ("gte", "suppliers with at least 1000 orders"),
    "or more": ("gte", "suppliers with 5 or more orders"),
    "and up": ("gte", "orders priced 100 and up"),
    "or longer": ("gte", "orders with a wait of 30 minutes or longer"),
    "or higher": ("gte", "orders priced 50 or higher"),
    "or above": ("gte", "orders priced 50 or above"),
    "or over": ("gte", "orders with 5 items or over"),
    "or greater": ("gte", "orders with weight 100 or greater"),
    "and above": ("gte", "orders priced 50 and above"),
    "and over": ("gte", "orders with 5 items and over"),
    "or shorter": ("lte", "orders with a wait of 10 minutes or shorter"),
    "or lower": ("lte", "orders priced 20 or lower"),
    "or below": ("lte", "orders priced 20 or below"),
    "or under": ("lte", "orders with 2 items or under"),
    "and below": ("lte", "orders priced 20 and below"),
    "no less than": ("gte", "orders with a wait of no less than 10"),
    "minimum of": ("gte", "a minimum of 3 items"),
    ">": ("gt", "orders with weight > 100"),
    ">=": ("gte", "orders with weight >= 100"),
    "<": ("lt", "orders with weight < 100"),
    "<=": ("lte", "orders with weight <= 100"),
    "less than": ("lt", "less than 500 kilograms"),
    "fewer than": ("lt", "fewer than 100 orders"),
    "under": ("lt", "orders with a wait under 30 minutes"),
    "below": ("lt", "orders with a price below 32"),
    "lower than": ("lt", "orders with a cost lower than 10"),
    "shorter than": ("lt", "shorter than 200 kilograms"),
    "at most": ("lte", "at most 2 items"),
    "or less": ("lte", "orders with a wait of 10 or less"),
    "or fewer": ("lte", "orders with 10 or fewer items"),
    "no more than": ("lte", "orders with no more than 5 items"),
    "up to": ("lte", "orders with a price up to 100"),
    "exactly": ("equals", "exactly 2 items"),
    "equal to": ("equals", "orders with units equal to 4"),
    "between": ("between", "orders with weight between 100 and 200 kilograms"),
    "before": ("lt", "orders before 6am"),
    "earlier than": ("lt", "orders earlier than 7am"),
    "after": ("gte", "orders after 9pm"),
    "later than": ("gte", "orders later than 9pm"),
    "or later": ("gte", "orders at 9pm or later"),
    "or earlier": ("lte", "orders at 6am or earlier"),
    "since": ("gte", "orders since 2017"),
    "until": ("lte", "orders until March"),
})  # fmt: skip
"""Comparisons of a number with a member (a row filter) or with a measure (a filter on groups)."""

NEGATIONS = _table("not", {
    "not": ("not", "orders not on Acme"),
    "no": ("not", "no weekend orders"),
    "non": ("not", "non cancelled orders"),
    "excluding": ("not", "excluding cancelled orders"),
    "exclude": ("not", "exclude North"),
    "except": ("not", "every supplier except Globex"),
    "other than": ("not", "suppliers other than Acme"),
    "without": ("not", "orders without a wait"),
    "besides": ("not", "warehouses besides North"),
    "ignoring": ("not", "ignoring cancelled orders"),
    "apart from": ("not", "apart from Acme"),
    "aside from": ("not", "aside from Globex"),
    "outside": ("not", "orders outside of January"),
    "leave out": ("not", "orders by supplier, leave out Acme"),
    "leaving out": ("not", "orders leaving out Globex"),
})  # fmt: skip
"""Words that turn the next condition around."""

GROUPINGS = _table("by", {
    "by": ("by", "orders by supplier"),
    "per": ("by", "orders per month"),
    "for each": ("each", "busiest product for each region"),
    "for every": ("each", "average wait for every supplier"),
    "in each": ("each", "top product in each store"),
    "each": ("each", "each supplier's orders"),
    "every": ("each", "every month"),
    "across": ("by", "waits across suppliers"),
    "broken down by": ("by", "orders broken down by supplier"),
    "breakdown by": ("by", "breakdown by month"),
    "break down by": ("by", "break down by month"),
    "split by": ("by", "split by region"),
    "grouped by": ("by", "grouped by supplier"),
    "group by": ("by", "group by supplier"),
    "among": ("by", "among suppliers"),
    "which": ("which", "which supplier has the most orders"),
    "what": ("which", "what supplier"),
    "whose": ("which", "whose wait is highest"),
    "who": ("which", "who is the supplier with the most orders"),
    "breakdown": ("by", "supplier breakdown"),
    "distribution": ("by", "distribution by hour"),
    "trend": ("trend", "trend of orders over the year"),
    "over time": ("trend", "orders over time"),
    "timeline": ("trend", "timeline of orders"),
})  # fmt: skip
"""Words that ask for one row per value of the member that follows (or precedes)."""

GRAINS = _table("grain", {
    "hourly": ("hour", "hourly orders"), "hour": ("hour", "orders by hour"),
    "daily": ("day", "daily orders"), "day": ("day", "busiest day"),
    "date": ("day", "orders by date"),
    "weekly": ("week", "weekly orders"), "week": ("week", "orders per week"),
    "monthly": ("month", "monthly orders"), "month": ("month", "orders per month"),
    "quarterly": ("quarter", "quarterly revenue"), "quarter": ("quarter", "orders by quarter"),
    "yearly": ("year", "yearly sales"), "annual": ("year", "annual sales"),
    "annually": ("year", "sales annually"), "year": ("year", "sales by year"),
})  # fmt: skip
"""Time grains of a time dimension (Cube's granularities)."""

SHARES = _table("share", {
    "percentage": ("share", "percentage of orders cancelled"),
    "percent": ("share", "what percent of orders were cancelled"),
    "share": ("share", "share of orders by Acme"),
    "proportion": ("share", "proportion of late orders"),
    "fraction": ("share", "fraction of orders that were late"),
    "rate": ("share", "return rate"),
    "ratio": ("ratio", "ratio of weight to duration"),
    "as a fraction of": ("ratio", "North revenue as a fraction of South revenue"),
    "as a proportion of": ("ratio", "orders at North as a proportion of orders at South"),
    "as a percentage of": ("ratio", "North revenue as a percentage of South revenue"),
    "as a share of": ("ratio", "Acme units as a share of Globex units"),
    "relative to": ("ratio", "revenue of North relative to South"),
})  # fmt: skip
"""Words that ask for a part's percentage of its whole, or (``ratio``) one number divided by
another: "North revenue as a fraction of South revenue" is North's divided by South's."""

ARITHMETIC = _table("arith", {
    "divided by": ("ratio", "weight divided by duration"),
    "over": ("ratio", "weight over duration"),
    "/": ("ratio", "weight / duration"),
    "to": ("ratio", "ratio of weight to duration"),
    "minus": ("difference", "average price minus average cost"),
    "less": ("difference", "revenue less cost"),
})  # fmt: skip
"""Words between two measures that divide or subtract them (only when both sides are
measures)."""

CHANGES = _table("change", {
    "change": ("change", "percent change in orders from 2016 to 2017"),
    "grow": ("change", "how much did revenue grow from 2016 to 2017"),
    "growth": ("change", "growth in orders from 2016 to 2017"),
    "increase": ("change", "increase in revenue from 2016 to 2017"),
    "rise": ("change", "how much did revenue rise between 2016 and 2017"),
    "decline": ("change", "decline in orders from 2016 to 2017"),
    "decrease": ("change", "decrease in orders from 2016 to 2017"),
})  # fmt: skip
"""Words that ask how a number moved from one year to another: the later year's minus the
earlier's, or with a percent word ("% change") the percent change."""

WHOLES = _table("whole", {
    "across all": ("whole", "average wait across all suppliers"),
    "for all": ("whole", "average wait for all suppliers"),
    "over all": ("whole", "units over all regions"),
    "of all": ("whole", "the average wait of all suppliers"),
    "all of the": ("whole", "units of all of the suppliers"),
    "in all": ("whole", "orders in all regions"),
})  # fmt: skip
"""Words that ask for one number over everything that follows, not a breakdown of it."""

COMPARISONS = _table("versus", {
    "versus": ("versus", "North versus South"),
    "compared to": ("versus", "Globex compared to Acme"),
    "compared with": ("versus", "Globex compared with Acme"),
    "compare": ("versus", "compare North and South"),
    "against": ("versus", "North against South"),
    "or": ("versus", "North or South"),
    "and": ("and", "North and South"),
    "difference": ("versus", "difference between North and South"),
    "times more": ("versus", "how many times more orders does North have than South"),
    "times as many": ("versus", "North has how many times as many orders as South"),
    "worse": ("versus", "was the average wait worse in March or in April"),
    "better": ("versus", "did North do better than South on orders"),
})  # fmt: skip

FOLLOW_UPS = _table("followup", {
    "what about": ("followup", "what about Globex?"),
    "how about": ("followup", "how about in July?"),
    "and": ("followup", "and for South?"),
    "now": ("followup", "now by month"),
    "same": ("followup", "same for Globex"),
    "instead": ("followup", "use South instead"),
    "only": ("followup", "only Globex"),
    "just": ("followup", "just the top 3"),
    "also": ("followup", "also by month"),
    "there": ("there", "how many orders went there?"),
    "those": ("there", "how many of those were cancelled?"),
    "them": ("there", "how many of them"),
    "that": ("there", "break that down by month"),
    "it": ("there", "what was it in July?"),
    "drop": ("drop", "drop that filter"),
    "remove": ("drop", "remove the month filter"),
    "ignore": ("drop", "ignore the supplier"),
    "without": ("drop", "without the filter"),
    "overall": ("overall", "overall instead"),
    "the year before": ("earlier", "and the year before?"),
    "year before": ("earlier", "what about the year before"),
    "previous year": ("earlier", "same for the previous year"),
    "prior year": ("earlier", "and the prior year?"),
    "a year earlier": ("earlier", "how about a year earlier"),
    "the year after": ("later", "and the year after?"),
    "following year": ("later", "what about the following year"),
    "all": ("overall", "for all of them"),
})  # fmt: skip
"""Words that make a question a change of the thread's previous query."""

UNITS: Mapping[str, tuple[str, float]] = MappingProxyType({
    "minute": ("minute", 1.0), "hour": ("minute", 60.0), "second": ("minute", 1 / 60),
    "day": ("day", 1.0), "week": ("day", 7.0), "month": ("month", 1.0), "year": ("year", 1.0),
    "mile": ("mile", 1.0), "kilometer": ("mile", 0.621371), "km": ("mile", 0.621371),
    "foot": ("foot", 1.0), "feet": ("foot", 1.0), "meter": ("foot", 3.28084),
    "percent": ("percent", 1.0), "dollar": ("money", 1.0), "cent": ("money", 0.01),
    "euro": ("money", 1.0), "eur": ("money", 1.0), "pound": ("money", 1.0), "usd": ("money", 1.0),
    "gbp": ("money", 1.0),
    "k": ("", 1000.0), "thousand": ("", 1000.0), "million": ("", 1_000_000.0), "m": ("", 1e6),
    "bn": ("", 1e9), "billion": ("", 1e9),
})  # fmt: skip
"""Unit words: the unit they measure in and the factor to it (2 hours is 120 minutes)."""

UNIT_OF_TITLE: Mapping[str, str] = MappingProxyType({
    "minutes": "minute", "minute": "minute", "mins": "minute", "hours": "minute",
    "miles": "mile", "mph": "mile", "feet": "foot", "ft": "foot", "%": "percent",
    "percent": "percent", "usd": "money", "$": "money", "dollars": "money", "days": "day",
    "dollar": "money", "eur": "money", "euro": "money", "euros": "money", "€": "money",
    "£": "money", "gbp": "money", "pounds": "money",
    "months": "month", "month": "month", "years": "year", "year": "year",
})  # fmt: skip
"""A unit written in a member's title, "Delay (minutes)", or its ``meta.unit``."""

DIRECTIONS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "from": ("origin", "source", "from", "departure", "departing", "sender", "start", "home"),
    "out of": ("origin", "source", "from", "departure", "departing"),
    "leaving": ("origin", "departure", "departing"),
    "departing": ("origin", "departure", "departing"),
    "to": ("destination", "to", "arrival", "target", "recipient", "end"),
    "into": ("destination", "arrival"),
    "arriving": ("destination", "dest", "arrival"),
    "bound for": ("product", "dest"),
    "heading to": ("product", "dest"),
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
WEEK_YEAR = 2001
"""A year without a 29 February, to count six days on from a date written without its year."""
WEEKDAY_MARKERS = frozenset(
    {"on", "every", "each", "per", "by", "and", "or", "to", "versus", "through"}
)
"""Words before a short weekday that is also an English word ("on sat") that make it the day."""
WEEKEND = (6, 7)
WORKDAYS = (1, 2, 3, 4, 5)
"""ISO weekday numbers (Monday 1, Sunday 7), as ``EXTRACT(ISODOW ...)`` gives them."""
HALVES = {"first half": (1, 6), "second half": (7, 12), "h1": (1, 6), "h2": (7, 12)}

NUMBER_WORDS: Mapping[str, int] = MappingProxyType({
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8,
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
gone end ended ending up did does doing use used using everyone everybody anyone anybody filter
filters condition comes plus pls plz thx ty btw fyi asap ur
""".split()  # noqa: SIM905
)
"""Function words, auxiliaries and light verbs: passed over unless they belong to a phrase."""

AUXILIARIES = frozenset(
    {"do", "does", "did", "have", "has", "had", "will", "would", "can", "could", "should", "shall"}
)
NOUN_MARKERS = frozenset(
    {"the", "a", "an", "of", "my", "our", "your", "their", "its", "per", "each", "every", "any",
     "some", "no", "average", "avg", "mean", "total", "median", "typical", "overall"}
)  # fmt: skip
"""Words after which a noun-or-verb word is a noun ("the *ticket* price"), even after an
auxiliary."""
"""Auxiliaries that start a question's verb phrase: after one, a noun-or-verb word is the verb
("how many tweets did customers post")."""

VERB_MARKERS = frozenset({"to"} | set(AUXILIARIES))
"""Words after which a word that can be a verb is the verb ("scheduled to *leave*")."""

CONTENT_ADVERBS = frozenset({"never"})
"""Adverbs that carry content, so never pass over: "customers who never ordered" asks for the
groups without a row, a shape the reader does not build; passing the word over would answer
for the customers who did."""

UNLINKED_FILLERS = frozenset(
    {"period", "far", "history", "record", "records", "overall", "left", "obs"}
)
"""Words passed over only when no model word has them: nouns of time and scope ("so far", "over
the whole period", "on record"), "left" as a verb ("flights that left X")."""

YEAR_SPANS = frozenset({"to", "through", "thru", "until", "till", "-"})
"""Words between two years that make them one range ("2008 through 2012")."""

LIST_JOINERS = frozenset({"and", "or", "nor", ",", "&"})
"""Words that continue a list of values: "excluding Houston and Dallas" excludes both."""
