"""One renderer for answers: Markdown made safe, numbers and time labels as people read them.

Pure (no I/O): used by the console (:mod:`pipeline.console`), the Chat API's embed page
(:mod:`chat_api.http.embed`) and the HTML audit report (:mod:`pipeline.reports.audit_formats`),
so an answer looks the same wherever it is shown.

* :func:`markdown_html`: CommonMark plus tables (markdown-it-py) with raw HTML disabled, images
  disabled (an answer must not make the browser fetch anything), and links limited to
  ``http``, ``https`` and ``mailto`` (markdown-it's ``validateLink`` already refuses
  ``javascript:``, ``vbscript:``, ``file:`` and ``data:``), opened with ``rel="noopener
  noreferrer nofollow"``. The output is HTML safe to put into a page as is.
* :func:`format_cell`: a result value by its column's type (``column_type`` of the SQL tool's
  ``schema``, interface "svcSqlApi tool") and name: counts and integral numbers with thousands
  separators, averages to one or two decimals, shares as percents, years without separators,
  months as ``Jan`` ... ``Dec``; never a 15-decimal float.
* :func:`chart_spec`: a ``vegaSpec`` made safe to draw and readable: every ``url`` (data,
  images, ``href``) removed, ``usermeta`` removed wherever it is (vega-embed merges
  ``usermeta.embedOptions`` into the options our pages pass: a ``config`` or ``patch`` URL, a
  loader), ``config`` kept only as an object (a string names a file to load), ``$schema`` kept
  only under :data:`VEGA_SCHEMA_PREFIX` (vega-embed reads the mode from it; anything else
  becomes Vega-Lite 5's), the rows bound as inline data, month axes labelled ``Jan`` ...
  ``Dec`` (``labelExpr``) and quantitative tooltips formatted.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

MONTHS: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
NUMERIC_TYPES: Final = frozenset(
    {"Int64", "Int32", "Int16", "Int8", "Double", "Float", "Decimal", "Number", "number"}
)
INTEGER_TYPES: Final = frozenset({"Int64", "Int32", "Int16", "Int8"})
MONTH_COLUMNS: Final = frozenset({"month", "month_of_year"})
YEAR_COLUMNS: Final = frozenset({"year", "manufactured_year"})
PERCENT_HINTS: Final = ("pct", "percent", "share", "rate")
SAFE_SCHEMES: Final = ("http://", "https://", "mailto:")
_URL_KEYS: Final = frozenset({"url", "href", "image", "usermeta"})
VEGA_SCHEMA_PREFIX: Final = "https://vega.github.io/schema/"
"""The only ``$schema`` host kept: the Vega project's (vega-embed parses it, never loads it)."""
DEFAULT_SCHEMA: Final = VEGA_SCHEMA_PREFIX + "vega-lite/v5.json"
_LINK_REL: Final = "noopener noreferrer nofollow"
_MONTH_LABEL_EXPR: Final = (
    "isValid(datum.value) && datum.value >= 1 && datum.value <= 12 ? "
    "['Jan','Feb','Mar','Apr','May','Jun','Jul','Aug','Sep','Oct','Nov','Dec']"
    "[datum.value - 1] : datum.label"
)


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table").disable("image")
    md.validateLink = _safe_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    return md


def _safe_link(url: str) -> bool:
    return url.strip().lower().startswith(SAFE_SCHEMES)


def _link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    tokens[idx].attrSet("rel", _LINK_REL)
    return self.renderToken(tokens, idx, options, env)


_MD: Final = _markdown()


def markdown_html(text: str | None) -> str:
    """Renders an answer's Markdown as safe HTML (module docstring).

    Args:
        text: Markdown (attacker-controlled: raw HTML in it is shown as text), or None.

    Returns:
        HTML: paragraphs, lists, emphasis, code, tables, safe links; ``""`` for None.
    """
    if not text:
        return ""
    html: str = _MD.render(text)
    return html


_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s")
MAX_PREVIEW_HEADERS: Final = 8


def answer_preview(text: str | None, chars: int = 160) -> str:
    """Returns: an answer's first sentence as plain text, for a list of answers.

    The Markdown is parsed (the same parser as :func:`markdown_html`); the first paragraph or
    heading outside a table gives the text, without its markup, cut after its first sentence
    and at ``chars`` characters with an ellipsis. An answer that is only a table previews as
    ``"Table: <its column names>"``; an empty one as ``""``.
    """
    headers: list[str] = []
    where = ""
    for token in _MD.parse(text or ""):
        if token.type in ("table_open", "thead_open", "tbody_open"):
            where = token.type.removesuffix("_open")
        elif token.type == "table_close":
            where = ""
        elif token.type == "inline" and where == "thead":
            headers.append(_plain(token))
        elif token.type == "inline" and not where and _plain(token):
            return _cut(_SENTENCE_END.split(_plain(token), maxsplit=1)[0], chars)
    shown = [h for h in headers[:MAX_PREVIEW_HEADERS] if h]
    return _cut("Table: " + ", ".join(shown), chars) if shown else ""


def _plain(token: Token) -> str:
    parts = [
        " " if c.type in ("softbreak", "hardbreak") else c.content
        for c in token.children or ()
        if c.type in ("text", "code_inline", "softbreak", "hardbreak")
    ]
    return " ".join("".join(parts).split())


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def as_number(value: Any) -> Any:
    """Returns: ``value`` as int or float when it is a number or a numeric string, else as is."""
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() and "." not in value else number
    return value


def format_number(value: float | int, *, name: str = "", column_type: str | None = None) -> str:
    """Formats a number by its column's name and type.

    Args:
        value: The number.
        name: The column name (``"count"``, ``"avg_arr_delay"``, ``"year"``, ``"pct_delayed"``).
        column_type: The result schema's ``column_type`` (``"Int64"``, ``"Double"``), if known.

    Returns:
        ``"28,834"`` (integral), ``"2004"`` (a year), ``"12.35"`` (under 100), ``"1,266.2"``
        (from 100), ``"0.00453"`` (under 0.1), ``"12.3%"`` (a share: ``pct``/``percent``/
        ``share``/``rate`` in the name; fractions up to 1 are multiplied by 100); ``"n/a"`` for
        NaN.
    """
    lowered = name.lower()
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a"
    if lowered in YEAR_COLUMNS:
        return f"{value:.0f}"
    if any(hint in lowered for hint in PERCENT_HINTS):
        share = value * 100 if abs(value) <= 1 else value
        return f"{share:.1f}%"
    if column_type in INTEGER_TYPES or float(value).is_integer():
        return f"{round(value):,}"
    if abs(value) >= 100:
        return f"{value:,.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def format_cell(value: Any, *, name: str = "", column_type: str | None = None) -> str:
    """Formats one result value for a table cell (module docstring).

    Args:
        value: The value as the result holds it (numbers may arrive as strings).
        name: The column name.
        column_type: The result schema's ``column_type``, if known.

    Returns:
        The text to show; ``""`` for None, ``Jan`` ... ``Dec`` for a month column.
    """
    if value is None:
        return ""
    number = as_number(value) if column_type is None or column_type in NUMERIC_TYPES else value
    if name.lower() in MONTH_COLUMNS and _is_number(number) and 1 <= number <= 12:
        return MONTHS[int(number) - 1]
    if _is_number(number):
        return format_number(number, name=name, column_type=column_type)
    return str(value)


def result_table(
    schema: Sequence[Mapping[str, Any]], rows: Sequence[Sequence[Any]], *, limit: int = 50
) -> dict[str, Any]:
    """A SQL tool result as a table of formatted cells.

    Args:
        schema: ``[{"name", "column_type"}, ...]`` (interface, "svcSqlApi tool").
        rows: The rows, one list per row, in ``schema``'s column order.
        limit: At most this many rows.

    Returns:
        ``{"columns": [name, ...], "numeric": [bool, ...], "rows": [[text, ...], ...],
        "shown": n, "total": len(rows)}``.
    """
    names = [str(column.get("name", "")) for column in schema]
    types = [column.get("column_type") for column in schema]
    body = [
        [format_cell(v, name=n, column_type=t) for n, t, v in zip(names, types, row, strict=False)]
        for row in rows[:limit]
    ]
    numeric = [t in NUMERIC_TYPES for t in types]
    return {
        "columns": names,
        "numeric": numeric,
        "rows": body,
        "shown": len(body),
        "total": len(rows),
    }


def strip_urls(value: Any) -> Any:
    """Returns a deep copy of a JSON value without any ``url``/``href``/``image``/``usermeta``.

    So a chart cannot make the browser load anything, nor set vega-embed's options.
    """
    if isinstance(value, dict):
        return {k: strip_urls(v) for k, v in value.items() if k not in _URL_KEYS}
    if isinstance(value, list):
        return [strip_urls(v) for v in value]
    return value


def chart_spec(
    spec: Mapping[str, Any] | None,
    schema: Sequence[Mapping[str, Any]],
    rows: Sequence[Sequence[Any]],
) -> dict[str, Any] | None:
    """A ``vegaSpec`` ready to draw: safe, with data, labelled (module docstring).

    Args:
        spec: The Vega-Lite spec of a SQL tool result (it holds no data: interface,
            "svcSqlApi tool"), or None.
        schema: The result's columns, ``[{"name", "column_type"}, ...]``.
        rows: The result's rows (lists in ``schema`` order).

    Returns:
        A new spec with ``data: {"values": [{column: value}, ...]}`` (numeric columns as
        numbers), no URL, ``usermeta`` or non-object ``config`` anywhere, ``$schema`` on the
        Vega host, ``labelExpr`` on month axes; None when there is no spec or
        it is not a JSON object.
    """
    if not isinstance(spec, Mapping):
        return None
    out: dict[str, Any] = strip_urls(copy.deepcopy(dict(spec)))
    if not isinstance(out.get("config", {}), dict):
        out.pop("config")
    schema_url = out.get("$schema", VEGA_SCHEMA_PREFIX)
    if not (isinstance(schema_url, str) and schema_url.startswith(VEGA_SCHEMA_PREFIX)):
        out["$schema"] = DEFAULT_SCHEMA
    names = [str(column.get("name", "")) for column in schema]
    numeric = [column.get("column_type") in NUMERIC_TYPES for column in schema]
    out["data"] = {
        "values": [
            {
                n: as_number(v) if is_num else v
                for n, is_num, v in zip(names, numeric, row, strict=False)
            }
            for row in rows
        ]
    }
    out.pop("datasets", None)
    _label_encoding(out.get("encoding"))
    return out


def _label_encoding(encoding: Any) -> None:
    if not isinstance(encoding, dict):
        return
    for channel, definition in encoding.items():
        if isinstance(definition, list):
            for item in definition:
                _label_field(channel, item)
        else:
            _label_field(channel, definition)


def _label_field(channel: str, definition: Any) -> None:
    if not isinstance(definition, dict):
        return
    field = str(definition.get("field", "")).lower()
    guide = {"x": "axis", "y": "axis", "color": "legend"}.get(channel)
    if field in MONTH_COLUMNS and guide is not None:
        labels = definition.get(guide)
        labels = dict(labels) if isinstance(labels, dict) else {}
        labels["labelExpr"] = _MONTH_LABEL_EXPR
        definition[guide] = labels
    if channel == "tooltip" and definition.get("type") == "quantitative":
        definition.setdefault("format", ",.2~f")
