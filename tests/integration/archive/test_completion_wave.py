"""The completion-wave probe (bench.completion_wave) archives and normalises every job it makes.

Against a real PostgreSQL, in a fresh schema.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from bench.archive_schema import BenchSpace
from bench.completion_wave import interleaved, measure
from models.records import LineEnvelope
from pipeline.settings import Settings

T = datetime(2026, 11, 27, tzinfo=UTC)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("archive_schema"),
]


def test_the_wave_normalises_every_job_and_counts_both_processes(
    settings: Settings, engine: sa.Engine
) -> None:
    wave = measure(BenchSpace(settings), jobs=3, batch=50)
    with engine.connect() as conn:
        answers = conn.execute(sa.text("SELECT count(*) FROM answers")).scalar_one()
        stored = conn.execute(sa.text("SELECT count(*) FROM stream_lines")).scalar_one()
    assert (wave.jobs, wave.normalised, answers) == (3, 3, 3)
    assert stored == wave.lines > 3 * 100  # paced turns of ~300 lines
    assert wave.sink_cpu_s > 0 and wave.postgres_cpu_s >= 0 and wave.wall_s > 0
    assert wave.floor_s == pytest.approx((wave.sink_cpu_s + wave.postgres_cpu_s) / wave.cores)


def test_interleaved_takes_the_nth_line_of_every_job_in_turn() -> None:
    def lines(job: str, count: int) -> list[LineEnvelope]:
        return [
            LineEnvelope.from_raw(job_id=job, attempt=1, line_no=n, raw=b"{}", received_at=T)
            for n in range(1, count + 1)
        ]

    order = [(x.job_id, x.line_no) for x in interleaved([lines("a", 3), lines("b", 1)])]
    assert order == [("a", 1), ("b", 1), ("a", 2), ("a", 3)]
