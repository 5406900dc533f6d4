"""Two sinks in one consumer group share the partitions and archive every record once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

from models import wire
from pipeline.kafka.clients import DEFAULT_PARTITIONS, ensure_topics
from pipeline.settings import Settings
from pipeline.sink.loop import Sink
from tests.integration.pipeline.sink_records_support import (
    jobs_records,
    produce_records,
    running_sinks,
    wait_for,
)
from tests.stack_support import migrated_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

JOBS = 40
DELTAS = 20
WAIT_S = 90.0


@pytest.fixture
def settings(kafka_bootstrap: str, database_url: str, pg_schema: str) -> Settings:
    return migrated_settings(
        kafka_bootstrap,
        database_url,
        schema=pg_schema,
        tag="scale",
        sink_batch_wait_ms=100,
        sink_batch_max_records=50,
    )


def _scalar(engine: sa.Engine, query: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(query)).scalar_one())


async def _wait(condition: Callable[[], bool], what: str) -> None:
    await wait_for(condition, what, timeout_s=WAIT_S)


def _split(sinks: list[Sink]) -> bool:
    """True once the rebalance settled: both sinks own partitions, none twice, all 8 owned."""
    first, second = (s.assigned() for s in sinks)
    return (
        bool(first and second and not first & second)
        and len(first | second) == 2 * DEFAULT_PARTITIONS
    )


async def test_two_sinks_in_one_group_split_the_partitions_and_store_each_line_once(
    settings: Settings, engine: sa.Engine
) -> None:
    await ensure_topics(settings, (wire.TOPIC_LINES, wire.TOPIC_JOB_EVENTS, wire.TOPIC_LINES_DLQ))
    async with running_sinks(settings, 2) as sinks:
        await _wait(lambda: _split(sinks), "the group to split the partitions between both sinks")
        lines, events = jobs_records([f"job-{n:03d}" for n in range(JOBS)], n_deltas=DELTAS)
        await produce_records(settings, lines, events)
        schema = settings.database_schema
        done = (
            f"SELECT count(*) FROM \"{schema}\".jobs WHERE status = 'completed'"
            " AND normalised_attempt = 1"
        )
        await _wait(lambda: _scalar(engine, done) == JOBS, "every job to be normalised")
    schema = settings.database_schema
    stored = _scalar(engine, f'SELECT count(*) FROM "{schema}".stream_lines')
    distinct = _scalar(
        engine,
        f'SELECT count(DISTINCT (job_id, attempt, line_no)) FROM "{schema}".stream_lines',
    )
    answers = _scalar(engine, f'SELECT count(*) FROM "{schema}".answers')
    print(
        f"two sinks: lines sent={len(lines)} stored={stored} per sink="
        f"{[s.stats.lines for s in sinks]} events per sink={[s.stats.events for s in sinks]}"
    )
    assert stored == distinct == len(lines) == JOBS * (DELTAS + 2)
    assert answers == JOBS
    assert all(s.stats.lines > 0 for s in sinks), "one sink did no work"
    assert sum(s.stats.lines for s in sinks) == len(lines)
    assert sum(s.stats.events for s in sinks) == len(events)
