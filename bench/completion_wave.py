"""Probe: what archiving a wave of paced job completions costs (issue 13, paced C=1,000).

At C=1,000 the paced benchmark's jobs start together and end within about a second; the job
archive delay (``paced-c1000-archive-delay-p99``) is then how long the sink and PostgreSQL take
to archive the wave. This probe measures that work alone, on an idle machine:

1. every line of ``jobs`` paced turns (:mod:`bench.paced_turns`, issue 13's 20 s turns of ~300
   lines with two tool results of 4-64 KiB) is written through the sink's
   :class:`~pipeline.archive.writer.ArchiveWriter` in batches of ``batch`` lines, interleaved
   as they arrive from concurrent streams;
2. the ``completed`` events of all of them are written in one batch: each attempt is then
   normalised into the derived tables (messages, tool calls, SQL queries, answers).

Printed, for step 2: the sink's CPU (this process, ``time.process_time``), PostgreSQL's CPU
(:func:`bench.paced.server_cpu_s`) and the wall time, and the shortest time those CPU seconds
can take on this machine's cores. Not a benchmark (no baseline, no target): it says whether a
target on the wave can be met here at all. ``python -m bench.completion_wave --jobs 1000``
(~1 minute, writes ~300,000 lines into a schema it drops).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from bench.archive_schema import BenchSpace
from bench.paced import server_cpu_s
from bench.paced_turns import Pacing, turns
from bench.transcripts import load_transcripts
from models.records import JobEvent, LineEnvelope
from pipeline.archive.writer import ArchiveWriter
from pipeline.collector import collector_paused


@dataclass(frozen=True)
class Wave:
    """The figures of one probe.

    Attributes:
        jobs: Jobs completed in the wave.
        lines: Lines archived before it.
        normalised: Attempts the completion batch normalised.
        sink_cpu_s: CPU seconds of the writer (decoding excluded) for the completion batch.
        postgres_cpu_s: CPU seconds of the PostgreSQL server meanwhile.
        wall_s: Wall time of the completion batch.
        cores: CPUs this process may run on.
    """

    jobs: int
    lines: int
    normalised: int
    sink_cpu_s: float
    postgres_cpu_s: float
    wall_s: float
    cores: int

    @property
    def floor_s(self) -> float:
        """Shortest wall time of the wave's CPU seconds if they spread over every core."""
        return (self.sink_cpu_s + self.postgres_cpu_s) / self.cores


def interleaved(per_job: Sequence[Sequence[LineEnvelope]]) -> list[LineEnvelope]:
    """Returns: line 1 of every job, then line 2 of every job, ... (concurrent streams)."""
    longest = max((len(lines) for lines in per_job), default=0)
    return [lines[n] for n in range(longest) for lines in per_job if n < len(lines)]


def paced_jobs(count: int, *, at: datetime | None = None) -> list[list[LineEnvelope]]:
    """Returns: the lines of ``count`` jobs as the sink decodes them, each job a paced turn.

    The turns of :func:`bench.paced_turns.turns` in turn (issue 13's defaults), each under a
    fresh job id, attempt 1, received and submitted at ``at`` (default: now).
    """
    paced = turns(load_transcripts(), Pacing())
    now = at or datetime.now(UTC)
    per_job: list[list[LineEnvelope]] = []
    for number in range(count):
        job_id = str(uuid.uuid4())
        per_job.append(
            [
                LineEnvelope.from_raw(
                    job_id=job_id, attempt=1, line_no=n, raw=raw, received_at=now, job_at=now
                )
                for n, raw in enumerate(paced[number % len(paced)], start=1)
            ]
        )
    return per_job


def measure(space: BenchSpace, *, jobs: int, batch: int) -> Wave:
    """Archives ``jobs`` paced turns, then their completions in one batch; returns the figures.

    Raises:
        ValueError: ``jobs`` or ``batch`` is not positive.
    """
    if jobs < 1 or batch < 1:
        raise ValueError("jobs and batch must be positive")
    per_job = paced_jobs(jobs)
    ids = [lines[0].job_id for lines in per_job]
    writer = ArchiveWriter.from_settings(space.settings)
    try:
        writer.write_batch(
            [], [JobEvent(job_id=j, run_id="wave", kind="started", attempt=1) for j in ids]
        )
        lines = interleaved(per_job)
        for start in range(0, len(lines), batch):
            with collector_paused():  # as the sink decodes and writes a batch
                writer.write_batch(lines[start : start + batch], [])
        completions = [
            JobEvent(job_id=j, run_id="wave", kind="completed", attempt=1, line_count=len(ls))
            for j, ls in zip(ids, per_job, strict=True)
        ]
        postgres_before, cpu_before, started = server_cpu_s()[0], time.process_time(), time.time()
        with collector_paused():
            outcome = writer.write_batch([], completions)
        wall_s = time.time() - started
        sink_cpu_s = time.process_time() - cpu_before
        postgres_cpu_s = server_cpu_s()[0] - postgres_before
    finally:
        writer.close()
    return Wave(
        jobs=jobs,
        lines=len(lines),
        normalised=len(outcome.normalised),
        sink_cpu_s=sink_cpu_s,
        postgres_cpu_s=postgres_cpu_s,
        wall_s=wall_s,
        cores=len(os.sched_getaffinity(0)),
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: prints the figures as one JSON object and a sentence."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=2000, help="Lines per batch before it.")
    args = parser.parse_args(argv)
    space = BenchSpace.new("wave")
    space.create()
    try:
        wave = measure(space, jobs=args.jobs, batch=args.batch)
    finally:
        space.drop()
    sys.stdout.write(json.dumps({**asdict(wave), "floor_s": wave.floor_s}) + "\n")
    sys.stdout.write(
        f"{wave.jobs} completions: sink {wave.sink_cpu_s:.2f} s + PostgreSQL "
        f"{wave.postgres_cpu_s:.2f} s of CPU, {wave.wall_s:.2f} s of wall; on {wave.cores} "
        f"cores no less than {wave.floor_s:.2f} s\n"
    )


if __name__ == "__main__":
    main()
