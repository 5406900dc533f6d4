"""Human-readable reports over what :mod:`pipeline.archive` returns.

Rich tables, CSV, JSON and HTML.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.reports.audit_formats import to_csv, to_html, to_json
    from pipeline.reports.diff_report import render_diff
    from pipeline.reports.run_report import render_json, render_table, summary

__all__ = ["render_diff", "render_json", "render_table", "summary", "to_csv", "to_html", "to_json"]

_EXPORTS: dict[str, str] = {
    "render_diff": "pipeline.reports.diff_report",
    "render_json": "pipeline.reports.run_report",
    "render_table": "pipeline.reports.run_report",
    "summary": "pipeline.reports.run_report",
    "to_csv": "pipeline.reports.audit_formats",
    "to_html": "pipeline.reports.audit_formats",
    "to_json": "pipeline.reports.audit_formats",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
