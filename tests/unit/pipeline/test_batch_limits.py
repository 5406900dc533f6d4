"""Run and target limits: questions-file fields and batch options, carried on every job."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.records import RateLimits
from pipeline.archive.runs import RunThrottling
from pipeline.errors import QuestionsFileError
from pipeline.reports.run_report import throttling_line
from pipeline.runs.batch import expand_jobs, load_questions

FILE = """
chatUrl: http://agent.test/api/v1/public/r/a/agents/1/chat/stream-chat-state
limits: {maxConcurrency: 20, requestsPerMinute: 600}
targetLimits: {maxConcurrency: 50}
personas:
  - {name: a, sessionSettings: {externalId: a}}
  - {name: b, sessionSettings: {externalId: b}}
questions:
  - text: How many flights?
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "questions.yaml"
    path.write_text(text)
    return path


def test_file_limits_travel_on_every_job(tmp_path: Path) -> None:
    questions = load_questions(_write(tmp_path, FILE))
    jobs = expand_jobs(questions, run_id="r1", chat_url="http://default.test/chat")
    assert len(jobs) == 2
    for job in jobs:
        assert job.limits == RateLimits(max_concurrency=20, requests_per_minute=600)
        assert job.target_limits == RateLimits(max_concurrency=50)


def test_command_line_limits_win_field_by_field(tmp_path: Path) -> None:
    questions = load_questions(_write(tmp_path, FILE))
    jobs = expand_jobs(
        questions,
        run_id="r1",
        chat_url="http://default.test/chat",
        limits=RateLimits(max_concurrency=5),
        target_limits=RateLimits(requests_per_minute=120),
    )
    assert jobs[0].limits == RateLimits(max_concurrency=5, requests_per_minute=600)
    assert jobs[0].target_limits == RateLimits(max_concurrency=50, requests_per_minute=120)


def test_no_limits_anywhere_leaves_the_jobs_without(tmp_path: Path) -> None:
    text = FILE.replace("limits: {maxConcurrency: 20, requestsPerMinute: 600}\n", "")
    text = text.replace("targetLimits: {maxConcurrency: 50}\n", "")
    jobs = expand_jobs(load_questions(_write(tmp_path, text)), run_id="r", chat_url="http://x/c")
    assert jobs[0].limits is None and jobs[0].target_limits is None
    empty = RateLimits()
    jobs = expand_jobs(
        load_questions(_write(tmp_path, text)),
        run_id="r",
        chat_url="http://x/c",
        limits=empty,
        target_limits=empty,
    )
    assert jobs[0].limits is None and jobs[0].target_limits is None


@pytest.mark.parametrize(
    "bad", ["limits: {maxConcurrency: 0}", "limits: {rpm: 5}", "limits: {maxConcurrency: x}"]
)
def test_invalid_limits_name_the_field(tmp_path: Path, bad: str) -> None:
    text = FILE.replace("limits: {maxConcurrency: 20, requestsPerMinute: 600}", bad)
    with pytest.raises(QuestionsFileError, match="imits"):
        load_questions(_write(tmp_path, text))


def test_throttling_line_reports_the_absorbed_429s() -> None:
    assert throttling_line(RunThrottling(answers=0, jobs=0)) == "429s absorbed: none"
    line = throttling_line(RunThrottling(answers=1234, jobs=56))
    assert line.startswith("429s absorbed: 1,234 throttled answers over 56 jobs")
