"""The chaos soak's invariants (:mod:`bench.chaos`), read from PostgreSQL, Kafka and the sent log.

* ``lost``: jobs submitted whose row is not final with all of its last attempt's lines stored;
* ``duplicate_lines``: stored lines that no stream the Chat API sent accounts for once: each
  attempt's lines are matched, in order, to one unused sent stream of its chat (the whole stream
  for a job's last attempt, a prefix for an earlier one, as ``fault_support.audit`` does); the
  lines of an attempt that matches none (a second copy, or bytes nobody sent) count here;
* ``unverified_chains``: problems ``chatscribe verify`` finds in the soak's archive;
* ``stray_dead_letters``: records of ``chat.requests.dlq`` and ``chat.lines.dlq`` that are not a
  poison record the scheduler injected; every injected one must be there too;
* ``final_lag``: records the worker group (``chat.requests``) and the sink group
  (``chat.lines``, ``chat.job-events``) have not committed, after the drain;
* ``longest_idle_wait_s``: the longest time one job waited between its ``accepted`` and first
  ``started`` events while fewer jobs ran than the workers' capacity (workers x concurrency).
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from models import wire
from pipeline.archive.chain import verify
from pipeline.archive.engine import create_engine
from pipeline.kafka.dead_letters import read_dead_letters
from pipeline.kafka.lag import GroupOffsets
from pipeline.settings import Settings
from tests.integration.faults.fault_support import TERMINAL, FaultStack, read_sent_log

if TYPE_CHECKING:
    from bench.chaos_faults import Faults

_JOBS = """
SELECT j.job_id, j.status, j.last_attempt, j.line_count,
       (SELECT count(*) FROM {s}.stream_lines l
         WHERE l.job_id = j.job_id AND l.attempt = j.last_attempt) AS stored
  FROM {s}.jobs j WHERE j.run_id = ANY(%(runs)s)
"""
_LINES = """
SELECT l.job_id, l.attempt, l.line_no, l.chat_id, encode(sha256(l.raw), 'hex') AS sha256
  FROM {s}.stream_lines l JOIN {s}.jobs j USING (job_id)
 WHERE j.run_id = ANY(%(runs)s) ORDER BY l.job_id, l.attempt, l.line_no
"""
_EVENTS = """
SELECT e.job_id, e.attempt, e.kind, e.at
  FROM {s}.job_events e JOIN {s}.jobs j USING (job_id) WHERE j.run_id = ANY(%(runs)s)
"""
DRAIN_POLL_S = 2.0


@dataclass
class Summary:
    """What the soak found; :meth:`last_line` is the issue's ``chaos:`` line."""

    submitted: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    lost: int = 0
    duplicate_lines: int = 0
    unverified_chains: int = 0
    stray_dead_letters: int = 0
    poison_missing: int = 0
    final_lag: int = 0
    longest_idle_wait_s: float = 0.0
    faults: list[str] = field(default_factory=list)
    fault_kinds: Counter[str] = field(default_factory=Counter)
    restarts: Counter[str] = field(default_factory=Counter)
    lines_stored: int = 0
    taken_over: int = 0
    drain_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every invariant holds."""
        return not (
            self.lost
            or self.duplicate_lines
            or self.unverified_chains
            or self.stray_dead_letters
            or self.poison_missing
            or self.final_lag
        )

    def report(self) -> list[str]:
        """Returns: the fault log and the summary lines printed before the last line."""
        kinds = " ".join(f"{kind}={n}" for kind, n in sorted(self.fault_kinds.items()))
        restarts = " ".join(f"{name}={n}" for name, n in sorted(self.restarts.items()))
        return [
            *self.faults,
            f"chaos faults: {len(self.faults)} ({kinds})",
            f"chaos restarts by the supervisor: {restarts or 'none'}",
            f"chaos outcomes: {dict(sorted(self.outcomes.items()))} taken_over={self.taken_over}"
            f" lines_stored={self.lines_stored} poison_missing={self.poison_missing}"
            f" drain_s={self.drain_s:.0f}",
        ]

    def last_line(self) -> str:
        """Returns: ``chaos: submitted=N completed=N ... faults=N`` (issue 25, part 3)."""
        return (
            f"chaos: submitted={self.submitted} completed={self.outcomes['completed']} "
            f"agent_failed={self.outcomes['failed']} lost={self.lost} "
            f"duplicate_lines={self.duplicate_lines} "
            f"unverified_chains={self.unverified_chains} "
            f"stray_dead_letters={self.stray_dead_letters} final_lag={self.final_lag} "
            f"longest_idle_wait_s={self.longest_idle_wait_s:.1f} faults={len(self.faults)}"
        )


def check(
    stack: FaultStack, runs: Sequence[tuple[str, int]], faults: Faults, *, drain_timeout_s: float
) -> Summary:
    """Waits for the runs to drain (at most ``drain_timeout_s``), then checks the invariants."""
    run_ids = [run for run, _ in runs]
    summary = Summary(submitted=sum(count for _, count in runs))
    summary.faults = [str(fault) for fault in faults.log]
    summary.fault_kinds = Counter(fault.kind for fault in faults.log)
    summary.restarts = faults.restarts
    started = time.monotonic()
    _drain(stack, run_ids, summary.submitted, deadline=started + drain_timeout_s)
    summary.drain_s = time.monotonic() - started
    jobs = stack.rows(_JOBS, runs=run_ids)
    summary.outcomes = Counter(row["status"] for row in jobs)
    done = [r for r in jobs if r["status"] in TERMINAL and r["stored"] == r["line_count"]]
    summary.lost = summary.submitted - len(done)
    summary.taken_over = sum(row["last_attempt"] > 1 for row in jobs)
    last = {row["job_id"]: row["last_attempt"] for row in jobs}
    summary.duplicate_lines, summary.lines_stored = _unaccounted(stack, run_ids, last)
    summary.unverified_chains = _chain_problems(stack.settings)
    keys = asyncio.run(_dead_letter_keys(stack.settings))
    summary.stray_dead_letters = sum(key not in faults.poison_keys for key in keys)
    summary.poison_missing = len(faults.poison_keys - set(keys))
    summary.final_lag = _final_lag(stack.settings)
    events = stack.rows(_EVENTS, runs=run_ids)
    capacity = len(stack.workers) * stack.settings.worker_concurrency
    summary.longest_idle_wait_s = longest_idle_wait(events, capacity=capacity)
    return summary


def _drain(stack: FaultStack, run_ids: list[str], submitted: int, *, deadline: float) -> None:
    """Waits until every job is final with its lines and both groups' lag is 0, or deadline."""
    while time.monotonic() < deadline:
        jobs = stack.rows(_JOBS, runs=run_ids)
        done = [r for r in jobs if r["status"] in TERMINAL and r["stored"] == r["line_count"]]
        if len(done) == submitted and _final_lag(stack.settings) == 0:
            return
        time.sleep(DRAIN_POLL_S)


def _unaccounted(stack: FaultStack, run_ids: list[str], last: dict[str, int]) -> tuple[int, int]:
    """Returns: (lines no unused sent stream accounts for, lines stored)."""
    attempts: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in stack.rows(_LINES, runs=run_ids):
        attempts[(row["job_id"], row["attempt"])].append(row)
    streams = read_sent_log(stack.sent_log)
    by_chat: dict[str | None, list[Any]] = defaultdict(list)
    for stream in streams.values():
        by_chat[stream.chat_id].append(stream)
    unaccounted = 0
    for (job_id, attempt), rows in sorted(attempts.items()):
        whole = attempt == last.get(job_id)
        stored = [row["sha256"] for row in rows]
        numbered = [row["line_no"] for row in rows] == list(range(1, len(rows) + 1))
        for stream in by_chat[rows[0]["chat_id"]]:
            match = stream.hashes == stored if whole else stream.hashes[: len(stored)] == stored
            if numbered and not stream.used and match:
                stream.used = True
                break
        else:
            unaccounted += len(rows)
    return unaccounted, sum(len(rows) for rows in attempts.values())


def _chain_problems(settings: Settings) -> int:
    engine = create_engine(settings)
    try:
        with engine.connect() as conn:
            return len(verify(conn).problems)
    finally:
        engine.dispose()


async def _dead_letter_keys(settings: Settings) -> list[bytes]:
    """Returns: the key of every record on the dead-letter topics."""
    return [letter.key or b"" for letter in await read_dead_letters(settings)]


def _final_lag(settings: Settings) -> int:
    groups = (
        (settings.worker_group, [settings.topic(wire.TOPIC_REQUESTS)]),
        (
            settings.sink_group,
            [settings.topic(wire.TOPIC_LINES), settings.topic(wire.TOPIC_JOB_EVENTS)],
        ),
    )
    return sum(asyncio.run(_lag(settings, group, topics)) for group, topics in groups)


async def _lag(settings: Settings, group: str, topics: list[str]) -> int:
    offsets = GroupOffsets(settings, group=group, topics=topics, timeout_s=30.0)
    try:
        found = await offsets.read()
    finally:
        await offsets.stop()
    if found is None:
        return -1  # not known: counts as a failed invariant
    return sum(max(seen.end - seen.committed, 0) for seen in found.values())


def longest_idle_wait(events: Sequence[dict[str, Any]], *, capacity: int) -> float:
    """Returns: the longest wait (s) of one job for its first start while capacity was free.

    Args:
        events: ``job_id``, ``attempt``, ``kind``, ``at`` (datetime) of every job event.
        capacity: Jobs the workers run at once (workers x concurrency).
    """
    accepted: dict[str, float] = {}
    first_start: dict[str, float] = {}
    runs: dict[tuple[str, int], list[float]] = defaultdict(list)
    for event in events:
        at = _seconds(event["at"])
        key = (event["job_id"], event["attempt"])
        if event["kind"] == "accepted":
            accepted[event["job_id"]] = at
        elif event["kind"] == "started":
            runs[key].insert(0, at)
            if event["attempt"] == 1:
                first_start[event["job_id"]] = at
        elif event["kind"] in TERMINAL:
            runs[key].append(at)
    steps = sorted(
        [(span[0], 1) for span in runs.values() if len(span) == 2]
        + [(span[1], -1) for span in runs.values() if len(span) == 2]
    )
    times, free = _free_time(steps, capacity)
    waits = [
        _free_between(times, free, accepted[job], first_start[job])
        for job in first_start
        if job in accepted
    ]
    return max(waits, default=0.0)


def _seconds(at: datetime) -> float:
    return at.timestamp()


def _free_time(steps: list[tuple[float, int]], capacity: int) -> tuple[list[float], list[float]]:
    """Returns: step times and the free-capacity seconds accumulated up to each."""
    times: list[float] = []
    free: list[float] = []
    running = 0
    total = 0.0
    for n, (at, change) in enumerate(steps):
        if n and running < capacity:
            total += at - steps[n - 1][0]
        running += change
        times.append(at)
        free.append(total)
    return times, free


def _free_between(times: list[float], free: list[float], start: float, end: float) -> float:
    """Seconds of [start, end] with free capacity (before the first step: all free)."""
    return max(_free_at(times, free, end) - _free_at(times, free, start), 0.0)


def _free_at(times: list[float], free: list[float], at: float) -> float:
    index = bisect.bisect_right(times, at) - 1
    if index < 0:
        return at - (times[0] if times else at)
    # The count after step ``index`` holds until ``at``; free if below capacity then.
    after = free[index + 1] if index + 1 < len(free) else None
    if after is not None and after > free[index]:
        return free[index] + (at - times[index])
    if after is None:
        return free[index] + (at - times[index])
    return free[index]
