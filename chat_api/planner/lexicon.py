"""The fixed lexicon of the planner: phrases of the question language and their roles.

``LEXICON`` maps lower-case phrases to a :class:`Word`: measures' subjects ("arrival delay"),
aggregation words ("average", "highest"), nouns that can be counted or grouped by ("flights",
"carrier"), breakdown markers ("by", "monthly"), comparators, units, role prepositions ("from",
"to"), comparison and share markers ("vs", "percentage"), cancellations, and subjects the data
model cannot answer ("revenue"). Values in the data are in :mod:`chat_api.planner.vocabulary`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Role = Literal[
    "metric", "noun", "agg", "superlative", "count", "distinct", "breakdown", "which", "top",
    "comparator", "unit", "place_role", "temporal", "negation", "built", "delay", "direction",
    "overall", "followup", "unsupported", "filler", "compare", "share", "cancelled", "ontime",
]  # fmt: skip


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


def _lexicon(table: Mapping[tuple[Role, str], str]) -> dict[tuple[str, ...], Word]:
    """Inverts ``(role, key[:hint]) -> "phrase, phrase"`` into ``phrase words -> Word``."""
    out: dict[tuple[str, ...], Word] = {}
    for (role, key_hint), phrases in table.items():
        key, _, hint = key_hint.partition(":")
        for phrase in phrases.split(","):
            out[tuple(phrase.split())] = Word(role, key, hint)
    return out


LEXICON: Mapping[tuple[str, ...], Word] = _lexicon({
    ("metric", "arr_delay"): "arrival delay, arrival delays, arr delay, arrival delay time, "
    "arr delays",
    ("metric", "dep_delay"): "departure delay, departure delays, dep delay, departure delay time, "
    "dep delays, dept delay, dept delays",
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
    ("agg", "median"): "median, medians, the median",
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
    ("superlative", "max:arr_delay"): "most delayed",
    ("superlative", "min:arr_delay"): "least delayed",
    ("superlative", "min:flights"): "least busy, quietest",
    ("count", "count"): "how many, number of, count of, count, counts, total number of, volume, "
    "volumes, traffic, flight volume",
    ("count", "much"): "how much",
    ("distinct", "distinct"): "distinct, different, unique, separate",
    ("breakdown", ""): "by, per, for each, for every, each, every, across, broken down by, "
    "grouped by, split by, in each, for all",
    ("breakdown", "months"): "monthly, month by month, each month, every month",
    ("breakdown", "hours"): "hourly, each hour, every hour, by hour, per hour, by hour of day, "
    "by hour of the day, per hour of day, per hour of the day",
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
    ("direction", "dep"): "depart, departs, departed, departure, left, took off, dept, dep",
    ("direction", "arr"): "arrive, arrives, arrived, arrival, landed, arr",
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
    ("ontime", "ontime"): "on time, on-time, ontime, punctual, punctuality, on time rate, "
    "on time performance, on time percentage",
    ("followup", "followup"): "and, what about, how about, now, only, just, same, but, "
    "instead, also, then, ok, okay, what if, and now, same for, same but, same thing for, "
    "same thing, was that, is that, were those, are those, was it, of that, for that",
    ("unsupported", "money"): "revenue, revenues, price, prices, fare, fares, ticket, tickets, "
    "ticket price, cost, costs, profit, profits, sales, income, money, dollars",
    ("unsupported", "people"): "passenger, passengers, people, customers, customer, crew, "
    "pilot, pilots, travellers, travelers",
    ("unsupported", "status"): "diverted, diversion, diversions",
    ("unsupported", "derived"): "percentile, percentiles, standard deviation, variance, "
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
    "whats, whos, hows, theres, lets, let, know, did any, some, ones, one of, where, when, "
    "happened, take, took, have been, record, records, scheduled, "
    "altogether there, planes that, flights that, were there, in the data, "
    "hold, holds, carry, carries, using, used, use, or, while, weather, international, intl, "
    "airport named, table, tables, planes table, them, thing, things, full, name, "
    "names, spent, busy, "
    "in hours with, during hours with, hours with, in hours when, hours when, morning, evening, "
    "afternoon, single, covered, counting, counted, "
    "pls, plz, thx, thanks, break down, breakdown, breakdown of, "
    "in the hour, that hour, in that hour, vary, varied, change, changed, evolve, evolved, "
    "cover, covers, sends, send, sent, at departure, which is, with their, along with, "
    "together with, is it, leave",
})  # fmt: skip
"""Phrase (lower-case words) -> meaning. Longer phrases win over shorter ones when scanning."""
