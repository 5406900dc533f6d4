"""PostgreSQL CPU per line of the archive's writes, with ``pglz`` or LZ4 TOAST compression.

Usage (from a checkout's root, against the PostgreSQL of ``ops/services.sh``)::

    PYTHONPATH=$PWD .venv/bin/python docs/toast_cpu.py pglz|lz4 [JOBS]

Writes JOBS paced turns (``bench.paced_turns``, ~300 lines each with 4-64 KiB tool results)
through :class:`pipeline.archive.writer.ArchiveWriter` in batches of 2,000 lines, then their
``completed`` events (normalising), into a fresh bench schema, and prints the CPU its
PostgreSQL backend used (``/proc/<pid>/stat``), the writer's own CPU and the archive's size.
The engine asks for LZ4 (:func:`pipeline.archive.engine.create_engine`); ``pglz`` sets the
server's default back on the writer's connections.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import sqlalchemy as sa

from bench.archive_schema import BenchSpace
from bench.completion_wave import paced_jobs
from bench.paced import cpu_s
from models.records import JobEvent
from pipeline.archive.writer import ArchiveWriter


def main() -> None:
    """Prints the figures of one mode (module docstring)."""
    mode = sys.argv[1]
    jobs_count = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    space = BenchSpace.new("toast")
    space.create()
    writer = ArchiveWriter.from_settings(space.settings)
    if mode == "pglz":

        @sa.event.listens_for(writer._engine, "connect")
        def _pglz(dbapi: Any, _record: object) -> None:
            with dbapi.cursor() as cursor:
                cursor.execute("SET default_toast_compression = 'pglz'")
            dbapi.commit()

    try:
        with writer._engine.connect() as conn:
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            setting = conn.exec_driver_sql("SHOW default_toast_compression").scalar_one()
        jobs = paced_jobs(jobs_count)
        started = [
            JobEvent(job_id=j[0].job_id, run_id="r", kind="started", attempt=1) for j in jobs
        ]
        writer.write_batch([], started)
        lines = [line for job in jobs for line in job]
        pg_before, cpu_before, wall_before = cpu_s(pid), time.process_time(), time.perf_counter()
        for first in range(0, len(lines), 2000):
            writer.write_batch(lines[first : first + 2000], [])
        done = [
            JobEvent(job_id=j[0].job_id, run_id="r", kind="completed", attempt=1, line_count=len(j))
            for j in jobs
        ]
        writer.write_batch([], done)
        per_line = 1e6 / len(lines)
        print(
            f"{setting}: {len(lines)} lines, PostgreSQL {(cpu_s(pid) - pg_before) * per_line:.1f}"
            f" us/line, writer {(time.process_time() - cpu_before) * per_line:.1f} us/line,"
            f" wall {time.perf_counter() - wall_before:.2f} s,"
            f" archive {sum(space.relation_bytes().values()) / 1e6:.0f} MB"
        )
    finally:
        writer.close()
        space.drop()


if __name__ == "__main__":
    main()
