"""The OpenTelemetry export against a real PostgreSQL archive and a real OTLP/HTTP receiver.

The receiver is an HTTP server on a loopback port that decodes each request body as the
collector's protobuf ``ExportTraceServiceRequest`` (``opentelemetry-proto``) and answers as a
collector does; the archive is written by the real :class:`ArchiveWriter` in a fresh schema.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import sqlalchemy as sa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from typer.testing import CliRunner

from models import wire
from models.records import ChatJob, JobEvent, LineEnvelope
from pipeline.archive.engine import create_engine
from pipeline.archive.traces import read_turns
from pipeline.archive.writer import ArchiveWriter
from pipeline.cli.app import app
from pipeline.errors import RunNotFoundError, TraceExportError
from pipeline.otel.export import export_archive, export_turns
from pipeline.otel.spans import span_id, trace_id
from pipeline.settings import Settings
from pipeline.sink.loop import Sink
from tests.integration.pipeline.sink_records_support import produce_records
from tests.stack_support import migrated_settings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(60),
    pytest.mark.usefixtures("archive_schema"),
]

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
URL = "http://127.0.0.1:8400/api/v1/public/local/demo/agents/1/chat/stream-chat-state"
TOOLS = ["svc_data_analyst_agent", "tools"]
SQL = "SELECT carrier, MEASURE(flight_count) FROM flights_view GROUP BY 1"
FINAL = "UA flew the most flights (245)."


def _raw(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def _tool(message_id: str, name: str, given: dict[str, Any], got: dict[str, Any]) -> list[bytes]:
    call = {"name": name, "input": json.dumps(given)}
    done = {**call, "result": json.dumps(got)}
    return [
        _raw(id=message_id, role="assistant", graphPath=TOOLS, isInProcess=True, toolCall=call),
        _raw(id=message_id, role="assistant", graphPath=TOOLS, isInProcess=False, toolCall=done),
    ]


TRANSCRIPT = [
    _raw(id=wire.ID_CUTOFF, role="assistant", sort=0, state={"chatId": "chat-otel"}),
    _raw(id="u1", role="user", content="Who flies most?", sort=1),
    *_tool("t1", wire.TOOL_META, {"searchQuery": "flights"}, {"cubes": [], "searchQuery": "x"}),
    *_tool(
        "t2",
        wire.TOOL_SQL,
        {"sqlQuery": "SELECT nope", "queryTitle": "bad"},
        {"sqlQuery": "SELECT nope", "error": "column nope does not exist"},
    ),
    *_tool(
        "t3",
        wire.TOOL_SQL,
        {"sqlQuery": SQL, "queryTitle": "Flights by carrier"},
        {"sqlQuery": SQL, "data": [["UA", "245"], ["AA", "120"]], "totalRows": 16},
    ),
    _raw(id="f1", role="assistant", content=FINAL, graphPath=["final"], isDelta=False),
]


def _records(job_id: str, run_id: str) -> tuple[list[LineEnvelope], list[JobEvent]]:
    job = ChatJob.model_validate(
        {
            "job_id": job_id,
            "run_id": run_id,
            "question": "Who flies most?",
            "persona": "analyst",
            "session_settings": {"externalId": "analyst-1"},
            "chat_url": URL,
        }
    )
    lines = [
        LineEnvelope.from_raw(
            job_id=job_id,
            attempt=1,
            line_no=n,
            raw=raw,
            received_at=T0 + timedelta(milliseconds=100 * n),
            chat_id="chat-otel",
        )
        for n, raw in enumerate(TRANSCRIPT, start=1)
    ]
    common: dict[str, Any] = {"job_id": job_id, "run_id": run_id}
    events = [
        JobEvent(**common, kind="accepted", job=job, at=T0),
        JobEvent(**common, kind="started", attempt=1, job=job, at=T0),
        JobEvent(
            **common, kind="first_line", attempt=1, line_count=1, at=T0 + timedelta(seconds=1)
        ),
        JobEvent(
            **common,
            kind="completed",
            attempt=1,
            chat_id="chat-otel",
            line_count=len(lines),
            http_status=200,
            at=T0 + timedelta(seconds=3),
        ),
    ]
    return lines, events


def _write_job(engine: sa.Engine, job_id: str, run_id: str) -> None:
    ArchiveWriter(engine).write_batch(*_records(job_id, run_id))


@dataclass
class Receiver:
    """What the OTLP/HTTP receiver got: one decoded request per POST."""

    url: str
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)
    content_types: list[str] = field(default_factory=list)
    refuse: bool = False
    refused: int = 0
    busy: int = 0
    """Answer this many more requests with 503 and ``Retry-After: 0``."""
    headers: list[dict[str, str]] = field(default_factory=list)

    def spans(self) -> list[dict[str, Any]]:
        """Every span received, as dicts with hex ids and plain attribute values."""
        out = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        attributes = {a.key: _value(a.value) for a in span.attributes}
                        out.append(
                            {
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "status": span.status.code,
                                "status_message": span.status.message,
                                "attributes": attributes,
                            }
                        )
        return out


def _value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.headers.append(dict(self.headers))
            if state.busy:
                state.busy -= 1
                self.send_response(503)
                self.send_header("Retry-After", "0")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if state.refuse:
                state.refused += 1
                self.send_response(400)
                self.end_headers()
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            state.requests.append(request)
            state.content_types.append(self.headers["Content-Type"])
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def test_export_sends_a_trace_per_turn_with_tool_spans_over_otlp_protobuf(
    engine: sa.Engine, receiver: Receiver
) -> None:
    _write_job(engine, "job-otel", "run-otel")
    summary = export_archive(engine, endpoint=receiver.url, run_id="run-otel")
    assert (summary.traces, summary.spans, summary.endpoint) == (
        1,
        4,
        f"{receiver.url}/v1/traces",
    )
    assert receiver.content_types == ["application/x-protobuf"]
    (resource_spans,) = receiver.requests[0].resource_spans
    resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
    assert resource == {"service.name": "chatscribe", "openinference.project.name": "chatscribe"}
    received = receiver.spans()
    assert sorted(s["name"] for s in received) == [
        "execute_tool svcMeta",
        "execute_tool svcSqlApi",
        "execute_tool svcSqlApi",
        "invoke_agent chatscribe-agent",
    ]
    (turn,) = [s for s in received if s["name"].startswith("invoke_agent")]
    assert turn["trace_id"] == trace_id("job-otel", 1).hex()
    assert turn["span_id"] == span_id("job-otel", 1, None).hex()
    attributes = turn["attributes"]
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.conversation.id"] == "chat-otel"
    assert attributes["session.id"] == "chat-otel"
    assert attributes["openinference.span.kind"] == "AGENT"
    assert attributes["user.id"] == attributes["chatscribe.identity"] == "external:analyst-1"
    assert (attributes["chatscribe.run.id"], attributes["chatscribe.job.id"]) == (
        "run-otel",
        "job-otel",
    )
    assert attributes["input.value"] == "Who flies most?"
    assert attributes["output.value"] == FINAL
    assert FINAL in attributes["gen_ai.output.messages"]
    assert attributes["gen_ai.response.time_to_first_chunk"] == 1.0
    tools = [s for s in received if s["parent_span_id"] == turn["span_id"]]
    assert len(tools) == 3
    assert {s["trace_id"] for s in tools} == {turn["trace_id"]}
    by_call = {s["attributes"]["gen_ai.tool.call.id"]: s for s in tools}
    assert by_call["t1"]["attributes"]["gen_ai.tool.name"] == wire.TOOL_META
    assert by_call["t1"]["attributes"]["gen_ai.operation.name"] == "execute_tool"
    failed = by_call["t2"]
    assert failed["attributes"]["error.type"] == "tool_error"
    assert failed["status"] == 2 and "column nope" in failed["status_message"]  # ERROR
    sql = by_call["t3"]["attributes"]
    assert sql["db.query.text"] == SQL
    assert sql["chatscribe.sql.total_rows"] == 16
    assert sql["db.response.returned_rows"] == 2
    assert sql["user.id"] == "external:analyst-1"
    assert "error.type" not in sql


def test_a_second_export_sends_the_same_trace_and_span_ids(
    engine: sa.Engine, receiver: Receiver
) -> None:
    _write_job(engine, "job-again", "run-again")
    export_archive(engine, endpoint=receiver.url, run_id="run-again")
    first = sorted((s["trace_id"], s["span_id"]) for s in receiver.spans())
    receiver.requests.clear()
    export_archive(engine, endpoint=receiver.url, run_id="run-again")
    second = sorted((s["trace_id"], s["span_id"]) for s in receiver.spans())
    assert first == second and len(first) == 4 and len(set(first)) == 4


def test_export_of_an_unknown_run_or_to_a_refusing_endpoint_fails_clearly(
    engine: sa.Engine, receiver: Receiver
) -> None:
    with pytest.raises(RunNotFoundError):
        export_archive(engine, endpoint=receiver.url, run_id="run-missing")
    _write_job(engine, "job-refused", "run-refused")
    receiver.refuse = True
    with pytest.raises(TraceExportError) as caught:
        export_archive(engine, endpoint=receiver.url, run_id="run-refused", timeout_s=2)
    assert caught.value.spans == 4 and caught.value.endpoint.endswith("/v1/traces")


def test_export_retries_a_busy_endpoint_and_sends_the_standard_headers_and_gzip(
    engine: sa.Engine, receiver: Receiver
) -> None:
    """OTLP/HTTP spec, "Failures": a 503 is retried; ``OTEL_EXPORTER_OTLP_*`` apply."""
    _write_job(engine, "job-busy", "run-busy")
    turns = read_turns(engine, run_id="run-busy")
    receiver.busy = 2
    env = {
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Basic%20abc,x-tenant=t1",
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip",
    }
    summary = export_turns(turns, endpoint=receiver.url, env=env)
    assert summary.spans == 4 and len(receiver.spans()) == 4
    assert len(receiver.headers) == 3  # two 503s, then the accepted request
    sent = receiver.headers[-1]
    assert sent["authorization"] == "Basic abc" and sent["x-tenant"] == "t1"
    assert sent["Content-Encoding"] == "gzip"
    receiver.busy = 10
    with pytest.raises(TraceExportError, match="HTTP 503"):
        export_turns(turns, endpoint=receiver.url, retries=1, env={})


def test_export_otel_command_exports_a_run(
    engine: sa.Engine, receiver: Receiver, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_job(engine, "job-cli", "run-cli")
    monkeypatch.setenv("CHATSCRIBE_DATABASE_URL", settings.database_url.get_secret_value())
    monkeypatch.setenv("CHATSCRIBE_DATABASE_SCHEMA", settings.database_schema)
    runner = CliRunner()
    done = runner.invoke(app, ["export", "otel", "--endpoint", receiver.url, "--run", "run-cli"])
    assert done.exit_code == 0, done.output
    assert "exported 1 traces, 4 spans" in done.stdout
    bad = runner.invoke(app, ["export", "otel", "--endpoint", "ftp://x", "--run", "run-cli"])
    assert bad.exit_code == 2


async def _sink_archives(settings: Settings, engine: sa.Engine, job_id: str) -> Sink:
    """Produces a job's lines and events to Kafka and runs a sink until it is normalised."""
    lines, events = _records(job_id, f"run-{job_id}")
    await produce_records(settings, lines, events)
    sink = Sink(settings)
    await sink.start()
    query = sa.text("SELECT normalised_attempt FROM jobs WHERE job_id = :j")
    try:
        for _ in range(200):
            report = await sink.run_once()
            assert report.committed or not report.records
            with engine.connect() as conn:
                if conn.execute(query, {"j": job_id}).scalar() == 1:
                    return sink
        raise AssertionError(f"{job_id} was not normalised")
    finally:
        await sink.stop()


async def test_sink_sends_each_normalised_attempt_live_when_an_endpoint_is_set(
    kafka_bootstrap: str, database_url: str, pg_schema: str, receiver: Receiver
) -> None:
    settings = migrated_settings(
        kafka_bootstrap, database_url, schema=pg_schema, otel_endpoint=receiver.url
    )
    engine = create_engine(settings)
    try:
        await _sink_archives(settings, engine, "job-live")
    finally:
        engine.dispose()
    received = receiver.spans()
    assert len(received) == 4
    assert {s["trace_id"] for s in received} == {trace_id("job-live", 1).hex()}
    (turn,) = [s for s in received if s["name"].startswith("invoke_agent")]
    assert turn["attributes"]["output.value"] == FINAL


async def test_sink_keeps_archiving_when_the_live_endpoint_refuses(
    kafka_bootstrap: str, database_url: str, pg_schema: str, receiver: Receiver
) -> None:
    receiver.refuse = True
    settings = migrated_settings(
        kafka_bootstrap, database_url, schema=pg_schema, otel_endpoint=receiver.url
    )
    engine = create_engine(settings)
    try:
        await _sink_archives(settings, engine, "job-refused-live")
        with engine.connect() as conn:
            answers = conn.execute(sa.text("SELECT count(*) FROM answers")).scalar()
    finally:
        engine.dispose()
    assert answers == 1 and receiver.spans() == [] and receiver.refused == 1
