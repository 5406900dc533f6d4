"""The Kafka Connect bench's own state and its records (bench/kafka_connect.py), without I/O."""

from __future__ import annotations

from pathlib import Path

from bench.kafka_connect import job_events, write_config
from bench.sink_ingest import envelopes
from bench.transcripts import MixLine
from pipeline.settings import Settings


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_connect_config_keeps_its_state_in_the_work_dir_and_loads_the_bench_topic(
    tmp_path: Path,
) -> None:
    settings = Settings(
        database_url="postgresql+psycopg://u:secret@127.0.0.1:15432/archive",
        database_schema="bench_connect_1",
        topic_prefix="bench_connect_1.",
    )
    worker, connector = write_config(
        tmp_path, settings, home=Path("/jars"), port=40123, name="bench-sink"
    )
    w, c = _properties(worker), _properties(connector)
    assert w["offset.storage.file.filename"] == str(tmp_path / "connect.offsets")
    assert w["listeners"] == "http://127.0.0.1:40123"
    assert w["plugin.path"] == "/jars/plugins"
    assert c["topics"] == "bench_connect_1.chat.lines"
    assert c["connection.url"] == (
        "jdbc:postgresql://127.0.0.1:15432/archive?currentSchema=bench_connect_1"
    )
    assert (c["connection.username"], c["connection.password"]) == ("u", "secret")
    assert (c["insert.mode"], c["primary.key.mode"]) == ("upsert", "kafka")
    assert (tmp_path / "log4j.properties").is_file()


def test_each_job_is_accepted_with_its_question_before_it_completes() -> None:
    lines = envelopes([MixLine(0, 1, b"{}"), MixLine(0, 2, b"{}"), MixLine(1, 1, b"{}")])
    events = job_events(lines)
    assert [e.kind for e in events] == ["accepted", "completed"] * 2
    for accepted, completed in zip(events[::2], events[1::2], strict=True):
        assert accepted.job_id == completed.job_id
        assert accepted.job is not None and accepted.job.question
    assert {e.job_id: e.line_count for e in events if e.kind == "completed"} == {
        lines[0].job_id: 2,
        lines[2].job_id: 1,
    }
