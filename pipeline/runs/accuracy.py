"""Expected results in a questions file and the execution accuracy of a run.

A question may carry the result it should produce, per persona (``"*"``: any persona)::

    questions:
      - text: How many flights were there in March?
        expected:
          analyst: {rows: [[28834]]}
          jfk-ops: {rows: [[9707]]}
      - text: Flights per origin
        expected:
          "*": {rows: [["EWR", 120835], ["JFK", 111279], ["LGA", 104662]], ordered: false}

A job *matches* when its result (the last SQL query that returned rows) equals the expected rows
under :func:`pipeline.transcript.result_compare.results_match`: column order free, row order only
when ``ordered`` (default: when the job's SQL orders), numbers within ``rel_tol``. Execution
accuracy is the share of jobs with an expectation that match (the text-to-SQL metric).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pipeline.archive.diff import JobSnapshot, load_run
from pipeline.archive.engine import create_engine
from pipeline.runs.batch import QuestionsFile, load_questions
from pipeline.settings import Settings
from pipeline.transcript.result_compare import ExpectedResult, Result, normal_rows, results_match

ANY_PERSONA = "*"


def expected_for(
    expected: Mapping[str, ExpectedResult] | None, persona: str | None
) -> ExpectedResult | None:
    """Returns: the expectation for ``persona``, else the ``"*"`` one, else None."""
    if not expected:
        return None
    return expected.get(persona or "") or expected.get(ANY_PERSONA)


def matches(job: JobSnapshot, expected: ExpectedResult) -> bool:
    """Returns: True when the job's result equals the expected rows (module docstring)."""
    got = job.result()
    if got is None:
        return False
    ordered = got.ordered if expected.ordered is None else expected.ordered
    want = Result(rows=normal_rows(expected.rows), total_rows=expected.total_rows, ordered=ordered)
    return results_match(Result(got.rows, got.total_rows, ordered), want, rel_tol=expected.rel_tol)


def score(
    jobs: Sequence[JobSnapshot],
    expectations: Mapping[tuple[str, str | None], ExpectedResult],
) -> dict[str, bool]:
    """Scores a run.

    Args:
        jobs: The run's jobs.
        expectations: ``(question, persona) → expected result`` (see :func:`expected_for`).

    Returns:
        ``job_id → matched`` for the jobs that have an expectation.
    """
    out = {}
    for job in jobs:
        expected = expectations.get((job.question, job.persona))
        if expected is not None:
            out[job.job_id] = matches(job, expected)
    return out


def accuracy_line(scores: Mapping[str, bool]) -> str:
    """Returns: ``"execution accuracy: 5/6 (83.3%)"``, or a note when nothing was expected."""
    if not scores:
        return "execution accuracy: no expected results in the questions file"
    hits = sum(scores.values())
    return f"execution accuracy: {hits}/{len(scores)} ({100 * hits / len(scores):.1f}%)"


def expectations_of(questions: QuestionsFile) -> dict[tuple[str, str | None], ExpectedResult]:
    """Returns: ``(question text, persona) → expected result`` for every job of the file."""
    names = [p.name for p in questions.personas]
    out: dict[tuple[str, str | None], ExpectedResult] = {}
    for question in questions.questions:
        for persona in question.personas or names:
            expected = expected_for(question.expected, persona)
            if expected is not None:
                out[(question.text, persona)] = expected
    return out


def run_accuracy(settings: Settings, run_id: str, path: Path) -> dict[str, bool]:
    """Scores an archived run against the expected results of its questions file.

    Returns:
        ``job_id → matched`` (empty when the file expects nothing).

    Raises:
        QuestionsFileError: The file is invalid.
        RunNotFoundError: The run has no jobs.
    """
    expectations = expectations_of(load_questions(path))
    if not expectations:
        return {}
    engine = create_engine(settings)
    try:
        jobs = load_run(engine, run_id=run_id)
    finally:
        engine.dispose()
    return score(jobs, expectations)
