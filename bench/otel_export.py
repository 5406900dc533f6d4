"""OpenTelemetry export of a 10,000-job run: spans per second (issue 27: at least 5,000).

A private schema (``bench_otel_<hex>``, migrated, dropped afterwards) is filled by ``COPY`` with
a run of ``jobs`` jobs, each with its answer and one SQL tool call (two spans per job), and
``chatscribe export otel``'s code (:func:`pipeline.otel.export.export_archive`: read the
archive, build the spans, encode protobuf, POST) sends it to an OTLP/HTTP receiver on a loopback
port that reads each request whole and answers 200.

Measured in the same run, on the same turns read beforehand:

* ``build_spans_per_s``: our building, encoding and posting alone (:func:`export_turns`);
* ``sdk_spans_per_s`` (the baseline): the OpenTelemetry SDK's way, the same attributes as SDK
  ``ReadableSpan`` objects sent by the SDK's ``OTLPSpanExporter`` (its generic encoder), which
  :mod:`pipeline.otel.spans` replaced.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final

import psycopg
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext
from psycopg import sql

from bench.archive_schema import BenchSpace, conninfo
from bench.console_pages import _copy_run
from pipeline.archive.engine import create_engine, upgrade
from pipeline.archive.traces import TurnRow, read_turns
from pipeline.otel.export import SPANS_PER_REQUEST, export_archive, export_turns
from pipeline.otel.spans import (
    AGENT_SPAN_ATTRIBUTES,
    RESOURCE_ATTRIBUTES,
    SCOPE,
    TOOL_SPAN_ATTRIBUTES,
    shared_attributes,
    span_id,
    tool_attributes,
    trace_id,
    turn_attributes,
)

TARGET_SPANS_PER_S: Final = 5_000.0


@dataclass(frozen=True)
class ExportFigures:
    """Spans per second of the export, of its build-and-send part, and of the SDK's way."""

    spans: int
    export_spans_per_s: float
    build_spans_per_s: float
    sdk_spans_per_s: float
    jobs: int


_SDK_RESOURCE = Resource(RESOURCE_ATTRIBUTES)
_SDK_SCOPE = InstrumentationScope(SCOPE.name)


def _sdk_spans(turn: TurnRow) -> list[ReadableSpan]:
    """The turn's spans as the SDK builds them: same ids, names and attributes."""
    shared = shared_attributes(turn)
    root = SpanContext(
        int.from_bytes(trace_id(turn.job_id, turn.attempt), "big"),
        int.from_bytes(span_id(turn.job_id, turn.attempt, None), "big"),
        is_remote=False,
    )
    start = int(turn.started_at.timestamp() * 1e9) if turn.started_at else 0
    spans = [
        ReadableSpan(
            name="invoke_agent",
            context=root,
            attributes={**AGENT_SPAN_ATTRIBUTES, **shared, **turn_attributes(turn)},
            start_time=start,
            end_time=start,
            resource=_SDK_RESOURCE,
            instrumentation_scope=_SDK_SCOPE,
        )
    ]
    for call in turn.tool_calls:
        context = SpanContext(
            root.trace_id,
            int.from_bytes(span_id(turn.job_id, turn.attempt, call.message_id), "big"),
            is_remote=False,
        )
        attributes = {**TOOL_SPAN_ATTRIBUTES, **shared, **tool_attributes(call)}
        spans.append(
            ReadableSpan(
                name="execute_tool",
                context=context,
                parent=root,
                attributes=attributes,
                start_time=start,
                end_time=start,
                resource=_SDK_RESOURCE,
                instrumentation_scope=_SDK_SCOPE,
            )
        )
    return spans


def _sdk_export(turns: list[TurnRow], url: str) -> int:
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces")
    sent = 0
    batch: list[ReadableSpan] = []
    for turn in turns:
        batch += _sdk_spans(turn)
        if len(batch) >= SPANS_PER_REQUEST:
            assert exporter.export(batch) is SpanExportResult.SUCCESS
            sent, batch = sent + len(batch), []
    if batch:
        assert exporter.export(batch) is SpanExportResult.SUCCESS
        sent += len(batch)
    exporter.shutdown()  # type: ignore[no-untyped-call]
    return sent


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def _receiver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _copy_tool_calls(conn: psycopg.Connection, schema: str, run_id: str) -> None:
    """Adds the tool-call message and tool call of each job's SQL query (``t1``)."""
    ident = sql.Identifier(schema)
    conn.execute(
        sql.SQL(
            "INSERT INTO {s}.messages (job_id, attempt, message_id, role, is_final,"
            " is_delta_merged, first_line, last_line, tool_name, extra)"
            " SELECT job_id, 1, 't1', 'assistant', false, false, 3, 4, 'cubeSqlApi', '{{}}'"
            " FROM {s}.jobs WHERE run_id = %s"
        ).format(s=ident),
        (run_id,),
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {s}.tool_calls (job_id, attempt, message_id, name, kind, input, result,"
            " complete) SELECT job_id, 1, 't1', 'cubeSqlApi', 'sql', %s::jsonb, %s::jsonb, true"
            " FROM {s}.jobs WHERE run_id = %s"
        ).format(s=ident),
        (json.dumps({"sqlQuery": "SELECT 1"}), json.dumps({"data": [["UA", 1]]}), run_id),
    )


def measure(jobs: int = 10_000) -> ExportFigures:
    """Exports a ``jobs``-job run twice: through the archive, then from turns already read."""
    space = BenchSpace.new("otel")
    dsn = conninfo(space.settings)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(space.schema)))
    engine = None
    try:
        upgrade(space.settings)
        run_id = f"run-otel-{uuid.uuid4().hex[:6]}"
        with psycopg.connect(dsn) as conn:
            _copy_run(conn, space.schema, run_id, jobs)
            _copy_tool_calls(conn, space.schema, run_id)
        engine = create_engine(space.settings)
        with _receiver() as url:
            began = time.perf_counter()
            summary = export_archive(engine, endpoint=url, run_id=run_id)
            export_s = time.perf_counter() - began
            turns = read_turns(engine, run_id=run_id)
            began = time.perf_counter()
            export_turns(turns, endpoint=url)
            build_s = time.perf_counter() - began
            began = time.perf_counter()
            sdk_sent = _sdk_export(turns, url)
            sdk_s = time.perf_counter() - began
        assert sdk_sent == summary.spans
        return ExportFigures(
            spans=summary.spans,
            export_spans_per_s=summary.spans / export_s,
            build_spans_per_s=summary.spans / build_s,
            sdk_spans_per_s=summary.spans / sdk_s,
            jobs=jobs,
        )
    finally:
        if engine is not None:
            engine.dispose()
        with psycopg.connect(dsn, autocommit=True) as conn:
            drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE")
            conn.execute(drop.format(sql.Identifier(space.schema)))
