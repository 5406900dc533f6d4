"""The Kafka outage summary (pipeline/kafka/outage.py) over synthetic log records: pure."""

from __future__ import annotations

import logging

from pipeline import metrics
from pipeline.kafka.outage import OutageLog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _record(name: str, level: int, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, level, "x.py", 1, msg, args, None)


def _unreachable(n: int) -> logging.LogRecord:
    return _record("aiokafka.conn", logging.ERROR, 'Unable connect to "%s:%s": %s', "h", n, "x")


def _summary(clock: Clock) -> tuple[OutageLog, list[tuple[int, str]]]:
    said: list[tuple[int, str]] = []
    summary = OutageLog(
        remind_s=30, quiet_s=5, clock=clock, emit=lambda lv, m: said.append((lv, m))
    )
    return summary, said


def test_outage_of_1400_errors_gives_start_reminder_and_end_lines() -> None:
    clock = Clock()
    summary, said = _summary(clock)
    outage_seconds = metrics.KAFKA_OUTAGE_SECONDS._value.get()
    written = 0
    for n in range(1400):  # 70 records/s for 20 s
        clock.now = 100.0 + n / 70
        written += summary.filter(_unreachable(n))
        if n % 70 == 0:
            summary.tick()
        if n == 10:
            assert metrics.KAFKA_OUTAGE._value.get() == 1
    for _ in range(10):  # the broker is back: silence
        clock.now += 1
        summary.tick()
    assert written == 0
    assert len(said) == 2  # 20 s: shorter than a reminder's 30 s
    assert said[0][1].startswith("kafka outage started") and "Unable connect" in said[0][1]
    assert said[-1][1].startswith("kafka outage ended duration_s=20.0 held_records=1400")
    assert all(level == logging.WARNING for level, _ in said)
    assert not summary.active and summary.outages == 1
    assert metrics.KAFKA_OUTAGE._value.get() == 0
    assert metrics.KAFKA_OUTAGE_SECONDS._value.get() - outage_seconds >= 20


def test_long_outage_reminds_every_remind_s() -> None:
    clock = Clock()
    summary, said = _summary(clock)
    for second in range(95):
        clock.now = 100.0 + second
        summary.filter(_unreachable(second))
        summary.tick()
    reminders = [m for _, m in said if m.startswith("kafka outage continues")]
    assert [r.split()[3] for r in reminders] == ["duration_s=30", "duration_s=60", "duration_s=90"]
    assert summary.active


def test_a_reminder_quotes_the_last_record_held_back() -> None:
    clock = Clock()
    summary, said = _summary(clock)
    stuck = _record("aiokafka.consumer", logging.ERROR, "Heartbeat failed: %s", "UnknownMember")
    for second in range(31):
        clock.now = 100.0 + second
        summary.filter(stuck if second == 30 else _unreachable(second))
        summary.tick()
    [reminder] = [m for _, m in said if m.startswith("kafka outage continues")]
    assert reminder.endswith("last_error='Heartbeat failed: UnknownMember'")


def test_other_records_pass_and_library_warnings_pass_outside_an_outage() -> None:
    summary, said = _summary(Clock())
    ours = _record("pipeline.worker.app", logging.ERROR, "job crashed")
    unrelated = _record("aiokafka.producer.sender", logging.WARNING, "Got error produce response")
    info = _record("aiokafka.consumer.group_coordinator", logging.INFO, "Joined group")
    assert summary.filter(ours) and summary.filter(unrelated) and summary.filter(info)
    assert not said and not summary.active


def test_during_an_outage_all_library_warnings_are_held_and_ours_pass() -> None:
    summary, said = _summary(Clock())
    assert not summary.filter(_unreachable(1))
    assert not summary.filter(_record("aiokafka.producer.sender", logging.WARNING, "Got error"))
    assert summary.filter(_record("pipeline.sink.loop", logging.ERROR, "write failed"))
    assert summary.filter(_record("aiokafka.conn", logging.INFO, "connected"))
    assert summary.held == 2 and len(said) == 1


def test_a_connection_error_argument_starts_an_outage() -> None:
    summary, _ = _summary(Clock())
    error = type("KafkaConnectionError", (Exception,), {})("refused")
    record = _record("kafka.client", logging.ERROR, "Something: %s", error)
    assert not summary.filter(record) and summary.active


def test_a_record_seen_by_two_handlers_is_counted_once() -> None:
    summary, _ = _summary(Clock())
    record = _unreachable(1)
    assert summary.filter(record) is False and summary.filter(record) is False
    assert summary.held == 1
