"""Exporting archived conversations to an OTLP/HTTP endpoint (protobuf), idempotently.

:func:`export_turns` sends the spans of :func:`pipeline.otel.spans.add_turn` as OTLP/HTTP
requests: a protobuf ``ExportTraceServiceRequest`` body (``opentelemetry-proto``), the encoding
every collector and Arize Phoenix accept, :data:`SPANS_PER_REQUEST` spans per request, POSTed
with urllib3. Ids are derived from the archive (:mod:`pipeline.otel.spans`), so exporting the
same turns again sends the same spans.

The request follows the OTLP/HTTP specification (opentelemetry.io/docs/specs/otlp, "OTLP/HTTP"):
``Content-Type: application/x-protobuf``; 429, 502, 503 and 504 are retried with exponential
backoff, honouring ``Retry-After`` up to :data:`MAX_RETRY_AFTER_S`; a 200 whose body reports
``partial_success.rejected_spans`` is logged. Headers, gzip compression and a CA certificate come
from the standard exporter variables (``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` or
``OTEL_EXPORTER_OTLP_HEADERS``, ``..._COMPRESSION``, ``..._CERTIFICATE``), as the SDK's exporter
reads them.
"""

from __future__ import annotations

import gzip
import itertools
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final
from urllib.parse import urlsplit

import urllib3
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans
from opentelemetry.util.re import parse_env_headers
from urllib3.util.retry import Retry

from pipeline.archive.engine import ArchiveEngine
from pipeline.archive.traces import TurnRow, iter_turns
from pipeline.errors import RunNotFoundError, TraceExportError
from pipeline.otel.spans import RESOURCE_ATTRIBUTES, SCOPE, add_turn

logger = logging.getLogger(__name__)

SPANS_PER_REQUEST: Final = 512
"""Spans per OTLP request (the SDK's batch processor's default export batch size)."""
DEFAULT_TIMEOUT_S: Final = 10.0
TRACES_PATH: Final = "/v1/traces"
"""The OTLP/HTTP traces path, appended to an endpoint given without a path (OTLP spec)."""
RETRIES: Final = 4
"""Retries of one request on a retryable status or a connection error."""
MAX_RETRY_AFTER_S: Final = 30.0
"""Longest ``Retry-After`` honoured; a longer one waits this long."""
RETRYABLE_STATUSES: Final = frozenset({429, 502, 503, 504})
"""OTLP/HTTP spec, "Failures": the statuses a client retries."""


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


class _Retry(Retry):
    """urllib3's retry policy with ``Retry-After`` capped at :data:`MAX_RETRY_AFTER_S`."""

    def get_retry_after(self, response: urllib3.BaseHTTPResponse) -> float | None:
        after = super().get_retry_after(response)
        return None if after is None else min(after, MAX_RETRY_AFTER_S)


class _Sender:
    """POSTs serialized requests to one traces URL over a pooled connection."""

    def __init__(self, url: str, *, timeout_s: float, retries: int, env: Mapping[str, str]) -> None:
        self.url = url
        self._gzip = _env(env, "COMPRESSION") == "gzip"
        self._headers = {
            **parse_env_headers(_env(env, "HEADERS") or "", liberal=True),
            "Content-Type": "application/x-protobuf",
        }
        if self._gzip:
            self._headers["Content-Encoding"] = "gzip"
        retry = _Retry(
            total=retries,
            backoff_factor=0.5,
            status_forcelist=RETRYABLE_STATUSES,
            allowed_methods=None,
            raise_on_status=False,
        )
        self._pool = urllib3.PoolManager(
            retries=retry,
            timeout=urllib3.Timeout(total=timeout_s),
            ca_certs=_env(env, "CERTIFICATE"),
        )

    def send(self, request: ExportTraceServiceRequest, spans: int) -> None:
        body = request.SerializeToString()
        try:
            response = self._pool.request(
                "POST",
                self.url,
                body=gzip.compress(body) if self._gzip else body,
                headers=self._headers,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise TraceExportError(
                f"the OTLP endpoint is unreachable: {exc}", endpoint=self.url, spans=spans
            ) from exc
        if not 200 <= response.status < 300:
            raise TraceExportError(
                f"the OTLP endpoint refused the spans with HTTP {response.status}",
                endpoint=self.url,
                spans=spans,
            )
        _log_partial_success(response.data, self.url)

    def close(self) -> None:
        self._pool.clear()


def _env(env: Mapping[str, str], name: str) -> str | None:
    return env.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or env.get(f"OTEL_EXPORTER_OTLP_{name}")


def _log_partial_success(body: bytes, url: str) -> None:
    if not body:
        return
    response = ExportTraceServiceResponse()
    try:
        response.ParseFromString(body)
    except Exception:  # a body that is not the OTLP response is not ours to judge
        return
    if response.partial_success.rejected_spans:
        logger.warning(
            "otel export endpoint=%s rejected_spans=%d: %s",
            url,
            response.partial_success.rejected_spans,
            response.partial_success.error_message,
        )


def _new_request() -> tuple[ExportTraceServiceRequest, ScopeSpans]:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    for key, value in RESOURCE_ATTRIBUTES.items():
        resource_spans.resource.attributes.add(key=key).value.string_value = value
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.CopyFrom(SCOPE)
    return request, scope_spans


def export_turns(
    turns: Iterable[TurnRow],
    *,
    endpoint: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retries: int = RETRIES,
    env: Mapping[str, str] | None = None,
) -> ExportSummary:
    """Sends every turn as a trace to ``endpoint`` over OTLP/HTTP with protobuf.

    Args:
        turns: Archived turns (:func:`pipeline.archive.traces.read_turns`).
        endpoint: The collector's base URL or traces URL (:func:`traces_url`).
        timeout_s: Seconds allowed for each try of a request.
        retries: Tries after the first, on a retryable status or a connection error.
        env: Where the ``OTEL_EXPORTER_OTLP_*`` variables are read (default: the process's).

    Returns:
        How many traces and spans were sent.

    Raises:
        ValueError: ``endpoint`` is not an http(s) URL.
        TraceExportError: The endpoint did not accept a request after its retries (spans sent
            before it stay).
    """
    sender = _Sender(
        traces_url(endpoint),
        timeout_s=timeout_s,
        retries=retries,
        env=os.environ if env is None else env,
    )
    traces = spans = pending = 0
    request, scope = _new_request()
    try:
        for turn in turns:
            traces += 1
            pending += add_turn(scope, turn)
            if pending >= SPANS_PER_REQUEST:
                sender.send(request, pending)
                spans += pending
                pending = 0
                request, scope = _new_request()
        if pending:
            sender.send(request, pending)
            spans += pending
    finally:
        sender.close()
    logger.info("otel export endpoint=%s traces=%d spans=%d", sender.url, traces, spans)
    return ExportSummary(endpoint=sender.url, traces=traces, spans=spans)


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
    turns = iter_turns(engine, run_id=run_id, since=since)
    first = next(turns, None)
    if run_id is not None and first is None:
        raise RunNotFoundError(run_id, message=f"run {run_id} has no finished job to export")
    everything = turns if first is None else itertools.chain((first,), turns)
    return export_turns(everything, endpoint=endpoint, timeout_s=timeout_s)
