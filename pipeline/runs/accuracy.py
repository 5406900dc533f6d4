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
accuracy is the share of jobs with an expectation that match (the text-to-SQL metric). Partial
credit (:func:`partial_score`), repeated cases and threads: :mod:`pipeline.runs.scores`.

Reviewed truths (:mod:`pipeline.archive.reviewed`) fill in what the questions file leaves out:
a job whose (question, persona) the file expects nothing of is scored against the truth
reviewers gave for its (question, identity) in earlier runs (:func:`accuracy_scores`). Beside
that *automatic* accuracy, a run's *reviewed* accuracy is the share of its jobs reviewed
``correct`` among those reviewed ``correct`` or ``incorrect``, and the *agreement* is the share
of jobs with both an automatic score and such a verdict where the two say the same.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.archive.console_queries import Connection
from pipeline.archive.diff import JobSnapshot, load_run
from pipeline.archive.engine import ArchiveEngine, create_engine
from pipeline.archive.reviewed import latest_verdicts, reviewed_truths
from pipeline.archive.runs import read_run, run_sources
from pipeline.errors import QuestionsFileError
from pipeline.runs.batch import QuestionsFile, load_questions
from pipeline.runs.scores import (
    JobScore,
    PassRateChange,
    RunScores,
    compare_pass_rates,
    run_scores,
)
from pipeline.settings import Settings
from pipeline.transcript.result_compare import (
    ExpectedResult,
    Result,
    normal_rows,
    results_match,
    soft_f1,
)

logger = logging.getLogger(__name__)

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


def partial_score(job: JobSnapshot, expected: ExpectedResult) -> float:
    """Returns: the job's soft F1 over result cells against the expected rows, in [0, 1].

    :func:`pipeline.transcript.result_compare.soft_f1`; 0.0 when the job has no result.
    """
    got = job.result()
    if got is None:
        return 0.0
    want = Result(rows=normal_rows(expected.rows), total_rows=expected.total_rows)
    return soft_f1(got, want, rel_tol=expected.rel_tol)


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


def score_run(
    jobs: Sequence[JobSnapshot],
    expectations: Mapping[tuple[str, str | None], ExpectedResult],
) -> RunScores:
    """Scores a run every way: exact match, partial credit, repeated cases, threads.

    Args:
        jobs: The run's jobs in submission order (:func:`pipeline.archive.diff.load_run`).
        expectations: ``(question, persona) → expected result``.

    Returns:
        The run's scores (:class:`pipeline.runs.scores.RunScores`).
    """
    exact = score(jobs, expectations)
    partial = {
        job.job_id: partial_score(job, expectations[(job.question, job.persona)])
        for job in jobs
        if job.job_id in exact
    }
    return run_scores(jobs, exact, partial)


def repeated_pass_rates(
    jobs_a: Sequence[JobSnapshot],
    jobs_b: Sequence[JobSnapshot],
    expectations: Mapping[tuple[str, str | None], ExpectedResult],
) -> tuple[PassRateChange, ...] | None:
    """Compares two runs by pass rate per case, when either was repeated.

    Args:
        jobs_a: Run A's jobs in submission order.
        jobs_b: Run B's jobs in submission order.
        expectations: ``(question, persona) → expected result``.

    Returns:
        One change per case (:func:`pipeline.runs.scores.compare_pass_rates`); None when
        neither run asked a case more than once or nothing was scored.
    """
    a, b = score_run(jobs_a, expectations), score_run(jobs_b, expectations)
    if not (a.repeated or b.repeated) or not (a.exact or b.exact):
        return None
    return compare_pass_rates(a, b)


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


def run_scores_of(settings: Settings, run_id: str, path: Path) -> RunScores:
    """Scores an archived run every way (:func:`score_run`) against its questions file.

    Returns:
        The run's scores; no scored job when the file expects nothing.

    Raises:
        QuestionsFileError: The file is invalid.
        RunNotFoundError: The run has no jobs.
    """
    expectations = expectations_of(load_questions(path))
    if not expectations:
        return run_scores((), {}, {})
    engine = create_engine(settings)
    try:
        jobs = load_run(engine, run_id=run_id)
    finally:
        engine.dispose()
    return score_run(jobs, expectations)


def job_scores(bind: ArchiveEngine | Connection, run_ids: Sequence[str]) -> dict[str, JobScore]:
    """Scores the jobs of runs whose questions file is still where it was recorded.

    A run without a recorded file, whose file is gone or invalid, or whose file expects
    nothing, gives no scores (logged at INFO).

    Args:
        bind: The archive's engine or one of its connections.
        run_ids: The runs (each scored once).

    Returns:
        ``job_id → scores`` (:meth:`pipeline.runs.scores.RunScores.per_job`).
    """
    out: dict[str, JobScore] = {}
    for run_id, source in run_sources(bind, run_ids=sorted(set(run_ids))).items():
        try:
            expectations = expectations_of(load_questions(Path(source))) if source else {}
        except QuestionsFileError as exc:
            logger.info("run not scored run_id=%s source=%s error=%s", run_id, source, exc)
            continue
        if expectations:
            out.update(score_run(load_run(bind, run_id=run_id), expectations).per_job())
    return out


@dataclass(frozen=True)
class AccuracyScores:
    """A run's automatic and reviewed accuracy (module docstring).

    Attributes:
        automatic: ``job_id → matched`` against the questions file and reviewed truths.
        reviewed: ``job_id → verdict is correct`` for jobs reviewed correct or incorrect.
        from_reviews: How many of ``automatic`` were scored against a reviewed truth.
    """

    automatic: dict[str, bool]
    reviewed: dict[str, bool]
    from_reviews: int = 0

    @property
    def agreement(self) -> tuple[int, int]:
        """``(agreeing, jobs with both an automatic score and a verdict)``."""
        both = set(self.automatic) & set(self.reviewed)
        return sum(self.automatic[j] == self.reviewed[j] for j in both), len(both)

    def lines(self) -> list[str]:
        """Returns: the three report lines (execution, reviewed accuracy, agreement)."""
        auto = accuracy_line(self.automatic)
        if self.from_reviews:
            auto += f" ({self.from_reviews} against reviewed truths)"
        if not self.reviewed:
            return [auto, "reviewed accuracy: no verdict on this run's answers"]
        hits = sum(self.reviewed.values())
        reviewed = f"reviewed accuracy: {hits}/{len(self.reviewed)}"
        reviewed += f" ({100 * hits / len(self.reviewed):.1f}%)"
        agree, both = self.agreement
        agreement = f"agreement: {agree}/{both}" if both else "agreement: no job has both"
        return [auto, reviewed, agreement]

    def to_json(self) -> dict[str, object]:
        """Returns: ``{"automatic", "reviewed", "agreement"}`` as ``{"hits", "of"}`` pairs."""
        agree, both = self.agreement
        return {
            "automatic": {"hits": sum(self.automatic.values()), "of": len(self.automatic)},
            "automatic_from_reviews": self.from_reviews,
            "reviewed": {"hits": sum(self.reviewed.values()), "of": len(self.reviewed)},
            "agreement": {"hits": agree, "of": both},
        }


def accuracy_scores(
    conn: Connection,
    run_id: str,
    *,
    expectations: Mapping[tuple[str, str | None], ExpectedResult] | None = None,
) -> AccuracyScores:
    """Scores a run automatically and by its verdicts (module docstring).

    Args:
        conn: A connection of the archive (read only is enough).
        run_id: The run.
        expectations: The questions file's (:func:`expectations_of`), if any.

    Raises:
        RunNotFoundError: The run has no jobs.
    """
    jobs = load_run(conn, run_id=run_id)
    truths = reviewed_truths(conn, run_id=run_id)
    automatic, from_reviews = {}, 0
    for job in jobs:
        expected = (expectations or {}).get((job.question, job.persona))
        if expected is None:
            expected = truths.get((job.question, job.identity))
            from_reviews += expected is not None
        if expected is not None:
            automatic[job.job_id] = matches(job, expected)
    verdicts = latest_verdicts(conn, [j.job_id for j in jobs])
    reviewed = {
        job_id: v.verdict == "correct"
        for job_id, v in verdicts.items()
        if v.verdict in ("correct", "incorrect")
    }
    return AccuracyScores(automatic, reviewed, from_reviews)


def questions_expectations(source: str | None) -> dict[tuple[str, str | None], ExpectedResult]:
    """Returns: the expectations of a run's questions file, or none when it is gone.

    Raises:
        QuestionsFileError: The file exists but is invalid.
    """
    if not source or not Path(source).is_file():
        return {}
    return expectations_of(load_questions(Path(source)))


def archived_accuracy(settings: Settings, run_id: str) -> AccuracyScores:
    """Scores an archived run (:func:`accuracy_scores`): its questions file and reviewed truths.

    The questions file counts when it is still there and valid.

    Raises:
        RunNotFoundError: The run has no jobs.
    """
    engine = create_engine(settings)
    try:
        info = read_run(engine, run_id=run_id)
        try:
            expectations = questions_expectations(info.source_file if info else None)
        except QuestionsFileError:
            expectations = {}
        with engine.connect() as conn:
            return accuracy_scores(conn, run_id, expectations=expectations)
    finally:
        engine.dispose()
