"""OpenTelemetry export: archived conversations as traces over OTLP/HTTP (protobuf).

semconv.py (every attribute name), spans.py (turns as spans, deterministic ids), export.py
(the SDK's OTLP/HTTP exporter).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.otel.export import ExportSummary, export_archive, export_turns
    from pipeline.otel.spans import turn_spans

__all__ = ["ExportSummary", "export_archive", "export_turns", "turn_spans"]

_EXPORTS: dict[str, str] = {
    "ExportSummary": "pipeline.otel.export",
    "export_archive": "pipeline.otel.export",
    "export_turns": "pipeline.otel.export",
    "turn_spans": "pipeline.otel.spans",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
