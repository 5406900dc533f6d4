"""The members of the data model the planner speaks of, and how to say them.

The tables here are a contract with ``chat_api/data_model/main/views.yml``: the measures behind
each metric word (:data:`METRICS`, :data:`COUNT_MEASURES`), the dimension behind each condition
slot (:data:`SLOT_MEMBERS`) and breakdown noun (:data:`DIM_MEMBERS`), and the labels and units
answers use (:data:`MEASURES`, :data:`DIMENSION_LABELS`). Change a member name in the model only
together with these tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class MeasureInfo:
    """How to speak about a measure: ``label`` ("average arrival delay") and ``unit``."""

    label: str
    unit: str


AGG_WORDS: Mapping[str, str] = {
    "avg": "average",
    "sum": "total",
    "min": "minimum",
    "max": "maximum",
    "median": "median",
}
"""Aggregation key -> the word for it."""


def _measure_catalogue() -> dict[str, MeasureInfo]:
    out = {
        f"{view}.{member}": MeasureInfo(f"{AGG_WORDS[agg]} {label}", unit)
        for view, label, unit, members in METRICS.values()
        for agg, member in members.items()
    }
    for member, label in COUNT_LABELS.items():
        out[member] = MeasureInfo(label, "")
    out["flights.cancellation_rate"] = MeasureInfo("cancellation rate", "%")
    return out


METRICS: Mapping[str, tuple[str, str, str, Mapping[str, str]]] = {
    key: (view, label, unit, dict(pair.split("=") for pair in members.split()))
    for key, (view, label, unit, members) in {
        "arr_delay": ("flights", "arrival delay", "minutes",
                      "avg=avg_arr_delay sum=total_arr_delay min=min_arr_delay max=max_arr_delay "
                      "median=median_arr_delay"),
        "dep_delay": ("flights", "departure delay", "minutes",
                      "avg=avg_dep_delay sum=total_dep_delay min=min_dep_delay max=max_dep_delay "
                      "median=median_dep_delay"),
        "distance": ("flights", "distance", "miles",
                     "avg=avg_distance sum=total_distance min=min_distance max=max_distance "
                     "median=median_distance"),
        "air_time": ("flights", "air time", "minutes",
                     "avg=avg_air_time sum=total_air_time min=min_air_time max=max_air_time "
                     "median=median_air_time"),
        "temp": ("weather", "temperature", "°F", "avg=avg_temp min=min_temp max=max_temp"),
        "humid": ("weather", "relative humidity", "%", "avg=avg_humid"),
        "wind_speed": ("weather", "wind speed", "mph",
                       "avg=avg_wind_speed min=min_wind_speed max=max_wind_speed"),
        "wind_gust": ("weather", "wind gust", "mph", "avg=avg_wind_gust max=max_wind_gust"),
        "precip": ("weather", "precipitation", "inches", "sum=total_precip avg=avg_precip"),
        "visib": ("weather", "visibility", "miles", "avg=avg_visib"),
        "pressure": ("weather", "sea level pressure", "millibars", "avg=avg_pressure"),
        "seats": ("planes", "seats", "seats",
                  "avg=avg_seats sum=total_seats min=min_seats max=max_seats"),
        "plane_year": ("planes", "year built", "", "avg=avg_year min=min_year max=max_year"),
        "alt": ("airports", "altitude", "feet", "avg=avg_alt min=min_alt max=max_alt"),
    }.items()
}  # fmt: skip
"""Metric key -> (view, label, unit, aggregation -> measure name)."""

COUNT_LABELS: Mapping[str, str] = {
    "flights.count": "number of flights",
    "flights.distinct_destinations": "number of distinct destinations",
    "flights.distinct_origins": "number of distinct origins",
    "flights.distinct_carriers": "number of distinct airlines",
    "flights.distinct_planes": "number of distinct planes",
    "weather.count": "number of weather observations",
    "planes.count": "number of planes",
    "planes.distinct_manufacturers": "number of distinct manufacturers",
    "planes.distinct_models": "number of distinct models",
    "airlines.count": "number of airlines",
    "airports.count": "number of airports",
    "flights.cancelled_count": "number of cancelled flights",
    "flights.departed_count": "number of departed flights",
}
MEASURES: Mapping[str, MeasureInfo] = _measure_catalogue()
"""Qualified measure -> label and unit, for titles and answers."""

DIMENSION_LABELS: Mapping[str, str] = {
    "carrier_name": "carrier", "carrier": "carrier code", "origin": "origin",
    "origin_name": "origin name", "dest": "destination", "dest_name": "destination name",
    "month": "month", "hour": "hour", "day": "day", "year": "year", "flight": "flight number",
    "plane_manufacturer": "plane manufacturer", "plane_model": "plane model",
    "tailnum": "tail number", "manufacturer": "manufacturer", "model": "model",
    "engine": "engine", "type": "type", "tzone": "time zone", "faa": "airport",
    "plane_year": "year built", "arr_delay": "arrival delay", "dep_delay": "departure delay",
    "distance": "distance", "air_time": "air time", "seats": "seats", "temp": "temperature",
    "wind_speed": "wind speed", "humid": "humidity", "precip": "precipitation",
    "visib": "visibility", "alt": "altitude", "weekday": "day of the week",
    "quarter": "quarter", "route": "route", "cancelled": "cancelled",
    "dep_temp": "temperature at departure", "dep_humid": "humidity at departure",
    "dep_wind_speed": "wind speed at departure", "dep_wind_gust": "wind gust at departure",
    "dep_precip": "precipitation at departure", "dep_visib": "visibility at departure",
    "plane_seats": "plane seats", "cancellation_rate": "cancellation rate",
}  # fmt: skip
"""Member name (without view) -> label."""

TIME_DIMENSIONS = frozenset({"month", "hour", "day", "year", "quarter"})
"""Dimensions that order a breakdown by themselves and draw as a line."""


def column_name(member: str) -> str:
    """Returns: the result column of a member, its name without the view (``"avg_arr_delay"``)."""
    return member.rpartition(".")[2]


COUNT_MEASURES: Mapping[str, Mapping[str, str]] = {
    "flights": {"flights": "count"},
    "planes": {"planes": "count", "flights": "distinct_planes"},
    "airlines": {"airlines": "count", "flights": "distinct_carriers"},
    "airports": {"airports": "count", "flights": "distinct_destinations"},
    "destinations": {"flights": "distinct_destinations"},
    "origins": {"flights": "distinct_origins"},
    "manufacturers": {"planes": "distinct_manufacturers"},
    "models": {"planes": "distinct_models"},
    "observations": {"weather": "count"},
}
"""Countable noun -> view -> measure, the entity's own view first."""

SLOT_MEMBERS: Mapping[str, Mapping[str, str]] = {
    "flights": {
        "carrier": "carrier", "origin": "origin", "dest": "dest",
        "manufacturer": "plane_manufacturer", "month": "month", "year": "year", "day": "day",
        "plane_year": "plane_year", "arr_delay": "arr_delay", "dep_delay": "dep_delay",
        "air_time": "air_time", "distance": "distance", "weekday": "weekday",
        "quarter": "quarter", "hour": "hour", "cancelled": "cancelled", "route": "route",
        "temp": "dep_temp", "humid": "dep_humid", "wind_speed": "dep_wind_speed",
        "wind_gust": "dep_wind_gust", "precip": "dep_precip", "visib": "dep_visib",
        "seats": "plane_seats",
    },
    "weather": {
        "origin": "origin", "month": "month", "year": "year", "day": "day", "temp": "temp",
        "hour": "hour",
        "humid": "humid", "wind_speed": "wind_speed", "precip": "precip", "visib": "visib",
    },
    "planes": {"manufacturer": "manufacturer", "plane_year": "year", "seats": "seats"},
    "airports": {"origin": "faa", "dest": "faa", "airport": "faa", "alt": "alt"},
    "airlines": {"carrier": "carrier"},
}  # fmt: skip
"""View -> condition slot -> dimension."""

DIM_MEMBERS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "flights": {
        "airlines": ("carrier_name",), "origins": ("origin", "origin_name"),
        "airports": ("origin", "origin_name"), "destinations": ("dest", "dest_name"),
        "months": ("month",), "hours": ("hour",), "days": ("day",), "years": ("year",),
        "manufacturers": ("plane_manufacturer",), "models": ("plane_model",),
        "planes": ("tailnum",), "weekdays": ("weekday",), "quarters": ("quarter",),
        "routes": ("route",),
    },
    "weather": {
        "origins": ("origin",), "airports": ("origin",), "months": ("month",),
        "hours": ("hour",), "days": ("day",), "years": ("year",),
    },
    "planes": {
        "manufacturers": ("manufacturer",), "models": ("model",), "engines": ("engine",),
        "plane_types": ("type",), "years": ("year",),
    },
    "airports": {"timezones": ("tzone",)},
    "airlines": {},
}  # fmt: skip
"""View -> breakdown noun -> dimensions to group by."""
