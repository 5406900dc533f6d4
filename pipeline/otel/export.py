"""Exporting archived conversations to an OTLP/HTTP endpoint (protobuf), idempotently.

:func:`export_turns` sends the spans of :func:`pipeline.otel.spans.turn_spans` with the
OpenTelemetry SDK's OTLP/HTTP exporter (``opentelemetry-exporter-otlp-proto-http``: protobuf
``ExportTraceServiceRequest`` bodies, the encoding every collector and Arize Phoenix accept),
:data:`SPANS_PER_REQUEST` spans per request. Ids are derived from the archive
(:mod:`pipeline.otel.spans`), so exporting the same turns again sends the same spans.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from pipeline.archive.engine import ArchiveEngine
from pipeline.archive.traces import TurnRow, read_turns
from pipeline.errors import RunNotFoundError, TraceExportError
from pipeline.otel.spans import turn_spans

logger = logging.getLogger(__name__)

SPANS_PER_REQUEST: Final = 512
"""Spans per OTLP request (the SDK's batch processor's default export batch size)."""
DEFAULT_TIMEOUT_S: Final = 10.0
TRACES_PATH: Final = "/v1/traces"
"""The OTLP/HTTP traces path, appended to an endpoint given without a path (OTLP spec)."""


@dataclass(frozen=True)
class ExportSummary:
    """What an export sent.

    Attributes:
        endpoint: The traces URL the spans went to.
        traces: Turns exported (one trace each).
        spans: Spans exported (a turn's root span and its tool-call spans).
    """

    endpoint: str
    traces: int
    spans: int


def traces_url(endpoint: str) -> str:
    """Returns: the OTLP/HTTP traces URL of ``endpoint``.

    ``http://host:4318`` becomes ``http://host:4318/v1/traces``; a URL with a path is taken as
    the full traces URL (as ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``).

    Raises:
        ValueError: ``endpoint`` is not an ``http``/``https`` URL with a host.
    """
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL with a host: {endpoint!r}")
    return endpoint if parts.path not in ("", "/") else endpoint.rstrip("/") + TRACES_PATH


def export_turns(
    turns: Iterable[TurnRow], *, endpoint: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> ExportSummary:
    """Sends every turn as a trace to ``endpoint`` over OTLP/HTTP with protobuf.

    Args:
        turns: Archived turns (:func:`pipeline.archive.traces.read_turns`).
        endpoint: The collector's base URL or traces URL (:func:`traces_url`).
        timeout_s: Seconds the exporter allows each request, retries included.

    Returns:
        How many traces and spans were sent.

    Raises:
        ValueError: ``endpoint`` is not an http(s) URL.
        TraceExportError: The endpoint did not accept a request (spans sent before it stay).
    """
    url = traces_url(endpoint)
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout_s)
    traces = spans = 0
    batch: list[ReadableSpan] = []
    try:
        for turn in turns:
            traces += 1
            batch += turn_spans(turn)
            if len(batch) >= SPANS_PER_REQUEST:
                spans += _send(exporter, url, batch)
                batch = []
        if batch:
            spans += _send(exporter, url, batch)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    logger.info("otel export endpoint=%s traces=%d spans=%d", url, traces, spans)
    return ExportSummary(endpoint=url, traces=traces, spans=spans)


def _send(exporter: OTLPSpanExporter, url: str, batch: Sequence[ReadableSpan]) -> int:
    if exporter.export(batch) is not SpanExportResult.SUCCESS:
        raise TraceExportError(
            "the OTLP endpoint refused the spans", endpoint=url, spans=len(batch)
        )
    return len(batch)


def export_archive(
    engine: ArchiveEngine,
    *,
    endpoint: str,
    run_id: str | None = None,
    since: datetime | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> ExportSummary:
    """Exports a run's turns, or those finished since a time, from the archive.

    Args:
        engine: The archive's engine.
        endpoint: As :func:`export_turns`.
        run_id: Only this run's turns, when given.
        since: Only turns finished at or after this time, when given (neither: all turns).
        timeout_s: As :func:`export_turns`.

    Raises:
        RunNotFoundError: ``run_id`` has no normalised job in the archive.
        TraceExportError, ValueError: As :func:`export_turns`.
        ArchiveUnavailableError, ArchiveSchemaError: Translated PostgreSQL failures.
    """
    traces_url(endpoint)  # a bad URL fails before the archive is read
    turns = read_turns(engine, run_id=run_id, since=since)
    if run_id is not None and not turns:
        raise RunNotFoundError(run_id, message=f"run {run_id} has no finished job to export")
    return export_turns(turns, endpoint=endpoint, timeout_s=timeout_s)
