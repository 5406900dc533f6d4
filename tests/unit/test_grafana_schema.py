"""ops/grafana/*.json against Grafana's dashboard schema, without a Grafana.

Grafana itself (AGPL) is not used. grafana-foundation-sdk's Python models are generated from
Grafana's own schema (the dashboard kind, its panel and query plugins: ``Dashboard``, ``Panel``,
``DataSourceRef``, ``GridPos``, the Prometheus and SQL queries, ...). A dashboard conforms when:

* decoding it with ``Dashboard.from_json`` and encoding it again keeps every field and value:
  a field the schema does not know (misspelt, or in the wrong place) is dropped, a value of the
  wrong shape (a data source given as a bare name) comes back changed;
* every required field of the schema (a field that is not optional and has no default, such as
  a panel's ``type``) is present;
* every decoded value has its field's type in the schema (a number where a number is expected,
  an enum's or a literal's value).
"""

from __future__ import annotations

import copy
import enum
import inspect
import json
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard, Panel, RowPanel

DASHBOARDS = sorted((Path(__file__).resolve().parents[2] / "ops" / "grafana").glob("*.json"))
register_default_plugins()


def schema_errors(dashboard: dict[str, Any]) -> list[str]:
    """Returns: every way ``dashboard`` departs from Grafana's schema, as ``path: problem``."""
    try:
        decoded = Dashboard.from_json(copy.deepcopy(dashboard))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        return _undecodable(dashboard, exc)
    encoded = json.loads(json.dumps(decoded, cls=JSONEncoder))
    return _lost(dashboard, encoded, "") + _typed(decoded, dashboard, "")


def _undecodable(dashboard: dict[str, Any], exc: Exception) -> list[str]:
    """The panel the SDK's decoder failed on (it indexes fields a panel must have)."""
    for i, panel in enumerate(dashboard.get("panels", [])):
        if not isinstance(panel, dict) or "type" not in panel:
            return [f"/panels/{i}/type: required by the schema, missing"]
        cls = RowPanel if panel["type"] == "row" else Panel
        try:
            cls.from_json(copy.deepcopy(panel))
        except (AttributeError, KeyError, TypeError, ValueError) as panel_exc:
            return [f"/panels/{i}: not of the schema's shape ({panel_exc!r})"]
    return [f": not of the schema's shape ({exc!r})"]


def _lost(given: Any, encoded: Any, path: str) -> list[str]:
    """Fields the schema dropped and values it changed (fields it added are its defaults)."""
    if isinstance(given, dict) and isinstance(encoded, dict):
        errors = [f"{path}/{key}: not in the schema" for key in given if key not in encoded]
        for key in given.keys() & encoded.keys():
            errors += _lost(given[key], encoded[key], f"{path}/{key}")
        return errors
    if isinstance(given, list) and isinstance(encoded, list) and len(given) == len(encoded):
        return [
            e
            for i, pair in enumerate(zip(given, encoded, strict=True))
            for e in _lost(*pair, f"{path}/{i}")
        ]
    if given != encoded:
        return [f"{path}: {given!r} is not of the schema's shape (read as {encoded!r})"]
    return []


def _typed(model: Any, given: Any, path: str) -> list[str]:
    """Required fields present and every value of the decoded model of its annotated type."""
    cls = type(model)
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    defaults = inspect.signature(cls.__init__).parameters
    errors = []
    for attribute, hint in hints.items():
        key = _json_key(attribute)
        value = getattr(model, attribute, None)
        default = defaults[attribute].default if attribute in defaults else inspect.Parameter.empty
        required = not _optional(hint) and default in ("", inspect.Parameter.empty)
        if required and isinstance(given, dict) and key not in given:
            errors.append(f"{path}/{key}: required by the schema, missing")
        elif value is not None:
            sub = given.get(key) if isinstance(given, dict) else None
            errors += _value_errors(value, hint, sub, f"{path}/{key}")
    return errors


def _value_errors(value: Any, hint: Any, given: Any, path: str) -> list[str]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        models = [a for a in options if isinstance(a, type) and isinstance(value, a)]
        options = models[:1] or options
        found = [_value_errors(value, a, given, path) for a in options]
        return [] if any(not f for f in found) else found[0]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {value!r} is not a list"]
        items = given if isinstance(given, list) else [None] * len(value)
        return [
            e
            for i, v in enumerate(value)
            for e in _value_errors(v, args[0], items[i], f"{path}/{i}")
        ]
    if origin is dict:
        return [] if isinstance(value, dict) else [f"{path}: {value!r} is not an object"]
    if origin is typing.Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {list(args)}"]
    check = _LEAF_CHECKS.get(hint)
    if check is not None:
        return [] if check(value) else [f"{path}: {value!r} is not a {hint.__name__}"]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        allowed = [member.value for member in hint]
        return [] if value in allowed else [f"{path}: {value!r} is not one of {allowed}"]
    if hint is object or hint is Any:
        return []
    if isinstance(hint, type) and hasattr(hint, "from_json"):
        if not isinstance(value, hint):
            return [f"{path}: {value!r} is not a {hint.__name__}"]
        return _typed(value, given, path)
    return []  # an abstract variant (a query of any data source): its fields are checked above


def _strict(kind: type) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, kind) and not isinstance(value, bool)


_LEAF_CHECKS: dict[Any, Callable[[Any], bool]] = {
    str: lambda value: isinstance(value, str),
    bool: lambda value: isinstance(value, bool),
    int: _strict(int),
    float: lambda value: _strict(int)(value) or _strict(float)(value),
}


def _optional(hint: Any) -> bool:
    return type(None) in typing.get_args(hint)


def _json_key(attribute: str) -> str:
    head, *rest = attribute.removesuffix("_val").split("_")
    return head + "".join(part.capitalize() for part in rest)


def test_there_are_dashboards_to_check() -> None:
    assert {path.name for path in DASHBOARDS} >= {"archive.json", "pipeline.json"}


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda path: path.name)
def test_dashboard_conforms_to_grafanas_dashboard_schema(path: Path) -> None:
    assert schema_errors(json.loads(path.read_text())) == []


def _first_panel_with(key: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def find(dashboard: dict[str, Any]) -> dict[str, Any]:
        return next(panel for panel in dashboard["panels"] if key in panel)

    return find


def _misspell_panel_datasource(dashboard: dict[str, Any]) -> str:
    panel = _first_panel_with("datasource")(dashboard)
    panel["datasource"]["typ"] = panel["datasource"].pop("type")
    return "/datasource/typ: not in the schema"


def _name_panel_datasource_only(dashboard: dict[str, Any]) -> str:
    panel = _first_panel_with("datasource")(dashboard)
    panel["datasource"] = "Prometheus"
    return f"/panels/{dashboard['panels'].index(panel)}: not of the schema's shape"


def _number_panel_datasource_uid(dashboard: dict[str, Any]) -> str:
    _first_panel_with("datasource")(dashboard)["datasource"]["uid"] = 7
    return "/datasource/uid: 7 is not a str"


def _drop_panel_type(dashboard: dict[str, Any]) -> str:
    del dashboard["panels"][0]["type"]
    return "/panels/0/type: required by the schema, missing"


def _string_grid_height(dashboard: dict[str, Any]) -> str:
    dashboard["panels"][0]["gridPos"]["h"] = "8"
    return "/panels/0/gridPos/h: '8' is not a int"


def _unknown_tooltip_mode(dashboard: dict[str, Any]) -> str:
    dashboard["graphTooltip"] = 5
    return "/graphTooltip: 5 is not one of [0, 1, 2]"


BREAKAGES = [
    _misspell_panel_datasource,
    _name_panel_datasource_only,
    _number_panel_datasource_uid,
    _drop_panel_type,
    _string_grid_height,
    _unknown_tooltip_mode,
]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda path: path.name)
@pytest.mark.parametrize("breakage", BREAKAGES, ids=lambda f: f.__name__.lstrip("_"))
def test_a_broken_dashboard_is_reported_with_its_path(
    path: Path, breakage: Callable[[dict[str, Any]], str]
) -> None:
    dashboard = json.loads(path.read_text())
    expected = breakage(dashboard)
    errors = schema_errors(dashboard)
    assert any(expected in error for error in errors), errors
