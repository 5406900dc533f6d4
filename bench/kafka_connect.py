"""Issue 27 part 5: the Debezium JDBC sink connector on Kafka Connect beside our sink.

Teams that already run Kafka Connect load a topic into PostgreSQL with a JDBC sink connector.
This bench loads the same ``chat.lines`` records (benchmark 1's mix: recorded transcripts with
tool results padded to 1-100 KiB, :func:`bench.transcripts.sink_mix`) both ways, each into a
bench space of its own (schema, topics, consumer group), and compares lines/s:

* ours: an in-process :class:`pipeline.sink.loop.Sink`, warmed up with one line, drains the
  lines and each job's ``accepted`` (with the job, as the submitter sends it) and ``completed``
  events: every line as a raw ``stream_lines`` row with its hash chain, every job's row, and
  every job normalised into ``messages``, ``tool_calls``, ``sql_queries`` and ``answers``
  (published to ``chat.answers`` from the outbox);
* theirs: Kafka Connect standalone (``org.apache.kafka:connect-runtime``) with
  ``io.debezium.connector.jdbc.JdbcSinkConnector`` (jars resolved by ``ops/connect.sh``), one
  task, the connector's defaults but idempotent (``insert.mode=upsert``,
  ``primary.key.mode=kafka``): each record's value as text in a plain table ``chat_lines``
  (``line``, keyed by topic, partition and offset) that the connector creates
  (``schema.evolution=basic``). Raw rows only: no headers, no chain, no derived rows.

Timing is alike: Connect is started on a topic holding one warm-up line and waits until that
row is written (JVM, plugins, consumer group and table ready); then the connector is paused
through Connect's REST API, the lines are produced, and the clock runs from ``resume`` until
the table holds every line. Connect's offsets file, its log and configuration live in a
temporary directory; its REST listener takes a free loopback port.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

from bench import processes
from bench.archive_schema import ARCHIVE_TABLES, BenchSpace, conninfo
from bench.results import Result, Target
from bench.sink_ingest import completed_events, drain, envelopes, produce
from bench.transcripts import MixLine, Transcript, sink_mix
from models import wire
from models.records import ChatJob, JobEvent, LineEnvelope
from pipeline.settings import Settings
from pipeline.sink.loop import Sink

CONNECTOR_CLASS: Final = "io.debezium.connector.jdbc.JdbcSinkConnector"
TABLE: Final = "chat_lines"
READY_TIMEOUT_S: Final = 180.0
"""Connect's start until the warm-up row is written (JVM start on a busy 2-core machine)."""
DRAIN_TIMEOUT_S: Final = 600.0
POLL_S: Final = 0.05
STOP_TIMEOUT_S: Final = 30.0
HEAP: Final = "-Xmx1g"
CONNECT_SH: Final = processes.ROOT / "ops" / "connect.sh"
WARM_UP: Final = b'{"id":"__cutoff__","sort":0}'
BYTES: Final = (
    "(SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree(t.oid))"
    " + pg_total_relation_size(t.oid)"
)
"""A table's bytes: its own, plus its partitions' when it is partitioned (its own are 0 then)."""
TARGET: Final = Target(">=", 0.5)
"""Issue 27: our sink at least half the JDBC sink connector's lines/s."""
LABEL: Final = (
    "Kafka Connect standalone + Debezium JDBC sink (upsert, 1 task) on the same chat.lines"
    " records; it writes raw rows only (line text keyed by topic/partition/offset), ours raw"
    " rows with their hash chain and every job's derived rows"
)


@dataclass(frozen=True)
class ConnectFigures:
    """One size's figures.

    Attributes:
        lines: Lines loaded (without the warm-up line).
        raw_bytes: Their NDJSON bytes.
        sink_s, connect_s: Wall seconds of our sink's drain and of Connect's, from resume.
        sink_rows, sink_bytes: Rows and ``pg_total_relation_size`` (heap, TOAST, indexes;
            a partitioned table's partitions included) of our archive's tables, per table.
        connect_rows, connect_bytes: The same of Connect's ``chat_lines`` table.
    """

    lines: int
    raw_bytes: int
    sink_s: float
    connect_s: float
    sink_rows: dict[str, int]
    sink_bytes: dict[str, int]
    connect_rows: int
    connect_bytes: int


def results(transcripts: Sequence[Transcript], size: int) -> list[Result]:
    """Returns: our sink's lines/s against Connect's on ``size`` lines (:func:`measure`)."""
    f = measure(transcripts, size)
    return [
        Result(
            f"connect-jdbc-sink-{size // 1000}k" if size >= 1000 else f"connect-jdbc-sink-{size}",
            f.lines / f.sink_s,
            f.lines / f.connect_s,
            "lines/s",
            LABEL,
            target=TARGET,
            details={
                "lines": f.lines,
                "raw_bytes": f.raw_bytes,
                "sink_s": f.sink_s,
                "connect_s": f.connect_s,
                "sink_rows": f.sink_rows,
                "sink_bytes": f.sink_bytes,
                "connect_rows": f.connect_rows,
                "connect_bytes": f.connect_bytes,
            },
        )
    ]


def measure(transcripts: Sequence[Transcript], size: int) -> ConnectFigures:
    """Loads ``size`` lines with Kafka Connect, then with our sink, in fresh bench spaces.

    Raises:
        RuntimeError: Connect exited, or its jars could not be resolved.
        TimeoutError: Connect or our sink did not write everything in time.
    """
    mix = list(sink_mix(transcripts, size))
    lines = envelopes(mix)
    ours = BenchSpace.new("connect_ours")
    theirs = BenchSpace.new("connect")
    try:
        ours.create()
        theirs.create()
        connect_s = run_connect(theirs, mix)
        sink_s = asyncio.run(sink_run(ours, lines))
        return ConnectFigures(
            lines=len(lines),
            raw_bytes=sum(len(m.raw) + 1 for m in mix),
            sink_s=sink_s,
            connect_s=connect_s,
            sink_rows=table_sizes(ours, ARCHIVE_TABLES, "count(*)"),
            sink_bytes=table_sizes(ours, ARCHIVE_TABLES, BYTES),
            connect_rows=table_sizes(theirs, (TABLE,), "count(*)")[TABLE],
            connect_bytes=table_sizes(theirs, (TABLE,), BYTES)[TABLE],
        )
    finally:
        ours.drop()
        theirs.drop()


def job_events(lines: Sequence[LineEnvelope]) -> list[JobEvent]:
    """Returns: per job of ``lines``, its ``accepted`` event (with the job) and ``completed``."""
    events = []
    for done in completed_events(lines):
        job = ChatJob.model_validate(
            {
                "job_id": done.job_id,
                "run_id": done.run_id,
                "question": f"bench question {done.job_id}",
                "session_settings": {"externalId": "bench-1"},
                "chat_url": "http://127.0.0.1/bench",
            }
        )
        accepted = JobEvent(job_id=done.job_id, run_id=done.run_id, kind="accepted", job=job)
        events += [accepted, done]
    return events


async def sink_run(space: BenchSpace, lines: Sequence[LineEnvelope]) -> float:
    """Warms a sink up with one line, produces ``lines`` and their events, times the drain."""
    sink = Sink(space.settings)
    await sink.start()
    try:
        await produce(space.settings, envelopes([MixLine(0, 1, WARM_UP)]))
        await drain(sink, lines=1)
        events = job_events(lines)
        await produce(space.settings, lines, events)
        return await drain(sink, lines=len(lines), events=len(events))
    finally:
        await sink.stop()


def run_connect(space: BenchSpace, mix: Sequence[MixLine]) -> float:
    """Runs Connect standalone on ``space``'s ``chat.lines`` and times loading ``mix``.

    Returns:
        Wall seconds from resuming the paused connector until every line is in the table.
    """
    home = install()
    port = processes.free_port()
    name = f"{space.schema}-jdbc-sink"
    with tempfile.TemporaryDirectory(prefix="bench-connect-") as tmp:
        work = Path(tmp)
        worker, connector = write_config(work, space.settings, home=home, port=port, name=name)
        asyncio.run(produce(space.settings, envelopes([MixLine(0, 1, WARM_UP)])))
        with (work / "connect.log").open("wb") as log:
            child = subprocess.Popen(
                ["java", HEAP, "-XX:+UseSerialGC", "-Djava.awt.headless=true",
                 f"-Dlog4j.configuration=file:{work / 'log4j.properties'}",
                 "-cp", f"{home / 'runtime'}/*",
                 "org.apache.kafka.connect.cli.ConnectStandalone", str(worker), str(connector)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                _wait_rows(space, child, work, 1, READY_TIMEOUT_S)
                _rest(port, "PUT", f"/connectors/{name}/pause")
                _wait_state(port, name, child, work, "PAUSED")
                asyncio.run(produce(space.settings, envelopes(mix)))
                started = time.perf_counter()
                _rest(port, "PUT", f"/connectors/{name}/resume")
                _wait_rows(space, child, work, 1 + len(mix), DRAIN_TIMEOUT_S)
                return time.perf_counter() - started
            finally:
                _stop(child)


def install() -> Path:
    """Resolves Connect's and the connector's jars (``ops/connect.sh``); returns their folder.

    Raises:
        RuntimeError: ``ops/connect.sh`` failed.
    """
    for command in ("install", "dir"):
        done = subprocess.run(
            [str(CONNECT_SH), command], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"ops/connect.sh {command} failed: {done.stderr.strip()[-2000:]}")
    return Path(done.stdout.strip())


def write_config(
    work: Path, settings: Settings, *, home: Path, port: int, name: str
) -> tuple[Path, Path]:
    """Writes the worker's and the connector's properties and a log4j file into ``work``.

    Returns:
        The worker's and the connector's properties files.
    """
    db = urlsplit(conninfo(settings))
    worker = {
        "bootstrap.servers": settings.kafka_bootstrap,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "offset.storage.file.filename": str(work / "connect.offsets"),
        "plugin.path": str(home / "plugins"),
        "listeners": f"http://127.0.0.1:{port}",
        # Plugins found through their ServiceLoader manifests, without scanning every class.
        "plugin.discovery": "service_load",
    }
    connector = {
        "name": name,
        "connector.class": CONNECTOR_CLASS,
        "tasks.max": "1",
        "topics": settings.topic(wire.TOPIC_LINES),
        "connection.url": (
            f"jdbc:postgresql://{db.hostname}:{db.port or 5432}{db.path}"
            f"?currentSchema={settings.database_schema}"
        ),
        "connection.username": db.username or "",
        "connection.password": db.password or "",
        "insert.mode": "upsert",
        "primary.key.mode": "kafka",
        "schema.evolution": "basic",
        "collection.name.format": TABLE,
        # A record's value is the NDJSON line as a string; the connector needs a struct.
        "transforms": "line",
        "transforms.line.type": "org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.line.field": "line",
    }
    log4j = {
        "log4j.rootLogger": "WARN, out",
        "log4j.appender.out": "org.apache.log4j.ConsoleAppender",
        "log4j.appender.out.layout": "org.apache.log4j.PatternLayout",
        "log4j.appender.out.layout.ConversionPattern": "[%d] %p %m (%c)%n",
    }
    paths = []
    for file, values in (("worker", worker), ("connector", connector), ("log4j", log4j)):
        path = work / f"{file}.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
        paths.append(path)
    return paths[0], paths[1]


def table_sizes(space: BenchSpace, tables: Sequence[str], measure: str) -> dict[str, int]:
    """Returns: ``measure`` (``count(*)`` or :data:`BYTES`) of each table of ``space``."""
    found = {}
    with psycopg.connect(conninfo(space.settings)) as conn:
        for table in tables:
            name = sql.Identifier(space.schema, table)
            if measure == BYTES:
                query = sql.SQL("SELECT {} FROM (SELECT {}::regclass AS oid) t").format(
                    sql.SQL(measure), sql.Literal(name.as_string(conn))
                )
            else:
                query = sql.SQL("SELECT count(*) FROM {}").format(name)
            row = conn.execute(query).fetchone()
            found[table] = int(row[0]) if row else 0
    return found


def _rows(space: BenchSpace) -> int:
    query = sql.SQL("SELECT count(*) FROM {}.{}").format(
        sql.Identifier(space.schema), sql.Identifier(TABLE)
    )
    try:
        with psycopg.connect(conninfo(space.settings)) as conn:
            found = conn.execute(query).fetchone()
    except psycopg.errors.UndefinedTable:
        return 0
    return int(found[0]) if found else 0


def _wait_rows(
    space: BenchSpace, child: subprocess.Popen[bytes], work: Path, rows: int, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while _rows(space) < rows:
        _check_alive(child, work)
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"Kafka Connect wrote fewer than {rows} rows in {timeout_s:.0f} s:\n{_log(work)}"
            )
        time.sleep(POLL_S)


def _wait_state(
    port: int, name: str, child: subprocess.Popen[bytes], work: Path, state: str
) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        status = json.loads(_rest(port, "GET", f"/connectors/{name}/status"))
        states = {status["connector"]["state"], *(task["state"] for task in status["tasks"])}
        if states == {state}:
            return
        _check_alive(child, work)
        if time.monotonic() > deadline:
            raise TimeoutError(f"connector {name} not {state}: {status}")
        time.sleep(POLL_S)


def _rest(port: int, method: str, path: str) -> bytes:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        body: bytes = response.read()
        return body


def _check_alive(child: subprocess.Popen[bytes], work: Path) -> None:
    if child.poll() is not None:
        raise RuntimeError(f"Kafka Connect exited with {child.returncode}:\n{_log(work)}")


def _log(work: Path) -> str:
    return (work / "connect.log").read_text(errors="replace")[-3000:]


def _stop(child: subprocess.Popen[bytes]) -> None:
    child.terminate()
    try:
        child.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
