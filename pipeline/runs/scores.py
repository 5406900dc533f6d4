"""A run's scores beyond exact execution accuracy: repeated cases and threads (pure).

Given each scored job's exact match (:func:`pipeline.runs.accuracy.score`) and partial credit
(:func:`pipeline.runs.accuracy.partial_scores`):

* **Cases.** A case is a (question, persona) pair; a run asks it once, or ``repeat`` times
  (questions file ``repeat:``, ``chatscribe batch --repeat N``). Its runs are its jobs in
  submission order. Per case: the pass rate (right runs / runs), pass^k (all of k runs right,
  estimated from n ≥ k runs of which c were right as ``C(c, k) / C(n, k)``: Yao et al., 2024,
  "τ-bench", section 5) and the flaky flag (at least one run right and one wrong).
* **Threads.** Jobs that continue the same thread (``chat_id``) are its turns, in submission
  order. A thread is right when every scored turn is right; otherwise its first wrong turn
  (1-based) is kept. Only threads with more than one scored turn are multi-turn; a run without
  one reports no thread line.
* **Partial credit.** The mean over scored jobs of the soft F1 over result cells
  (:func:`pipeline.transcript.result_compare.soft_f1`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.archive.diff import JobSnapshot


def pass_hat_k(runs: int, right: int, k: int) -> float:
    """Returns: the chance that k runs are all right: ``C(right, k)/C(runs, k)``.

    Args:
        runs: Runs of the case (n ≥ 1).
        right: Runs that were right (0 ≤ c ≤ n).
        k: Runs that must all be right (1 ≤ k ≤ n).

    Raises:
        ValueError: ``k`` is not in ``1..runs`` or ``right`` not in ``0..runs``.
    """
    if not 1 <= k <= runs or not 0 <= right <= runs:
        raise ValueError(f"pass^k needs 1 <= k <= runs and 0 <= right <= runs: {k=} {runs=}")
    return math.comb(right, k) / math.comb(runs, k)


@dataclass(frozen=True)
class CaseRuns:
    """A (question, persona) case and its scored runs, in submission order.

    Attributes:
        question, persona: The case.
        job_ids: Its scored jobs.
        outcomes: Whether each job's result matched.
        partial: Each job's soft F1, in [0, 1].
    """

    question: str
    persona: str | None
    job_ids: tuple[str, ...]
    outcomes: tuple[bool, ...]
    partial: tuple[float, ...]

    @property
    def runs(self) -> int:
        """How many times the case was scored."""
        return len(self.outcomes)

    @property
    def right(self) -> int:
        """Runs whose result matched."""
        return sum(self.outcomes)

    @property
    def pass_rate(self) -> float:
        """Right runs over runs, in [0, 1]."""
        return self.right / self.runs

    @property
    def flaky(self) -> bool:
        """True when at least one run was right and one wrong."""
        return 0 < self.right < self.runs

    def to_json(self, k: int) -> dict[str, Any]:
        """Returns: the case with its runs, pass rate, ``pass^k`` and flaky flag."""
        return {
            "question": self.question,
            "persona": self.persona,
            "runs": self.runs,
            "right": self.right,
            "pass_rate": self.pass_rate,
            f"pass^{k}": pass_hat_k(self.runs, self.right, k),
            "flaky": self.flaky,
            "outcomes": list(self.outcomes),
            "partial_credit": list(self.partial),
            "job_ids": list(self.job_ids),
        }


@dataclass(frozen=True)
class ThreadScore:
    """One thread's scored turns, in submission order.

    Attributes:
        chat_id: The thread.
        job_ids: Its scored turns' jobs.
        outcomes: Whether each turn's result matched.
    """

    chat_id: str
    job_ids: tuple[str, ...]
    outcomes: tuple[bool, ...]

    @property
    def all_right(self) -> bool:
        """True when every scored turn matched."""
        return all(self.outcomes)

    @property
    def first_wrong_turn(self) -> int | None:
        """The 1-based number of the first turn that did not match; None when all did."""
        return next((n for n, ok in enumerate(self.outcomes, 1) if not ok), None)

    def to_json(self) -> dict[str, Any]:
        """Returns: ``{"chat_id", "turns", "all_right", "first_wrong_turn", "job_ids"}``."""
        return {
            "chat_id": self.chat_id,
            "turns": len(self.outcomes),
            "all_right": self.all_right,
            "first_wrong_turn": self.first_wrong_turn,
            "job_ids": list(self.job_ids),
        }


@dataclass(frozen=True)
class JobScore:
    """One scored job's scores, as the audit report carries them.

    Attributes:
        matched: Its result matched the expected rows.
        partial_credit: Its soft F1 over result cells, in [0, 1].
        case_runs: How many times its case was scored in its run.
        case_pass_rate: Its case's pass rate in its run, in [0, 1].
        flaky: Its case is flaky in its run.
    """

    matched: bool
    partial_credit: float
    case_runs: int
    case_pass_rate: float
    flaky: bool


@dataclass(frozen=True)
class RunScores:
    """Every score of one run (module docstring).

    Attributes:
        exact: ``job_id → matched`` for the jobs with an expectation.
        partial: ``job_id → soft F1`` for the same jobs.
        cases: The cases, in the order of their first job.
        threads: The multi-turn threads, in the order of their first turn.
    """

    exact: dict[str, bool]
    partial: dict[str, float]
    cases: tuple[CaseRuns, ...]
    threads: tuple[ThreadScore, ...]

    @property
    def repeated(self) -> bool:
        """True when some case was scored more than once."""
        return any(case.runs > 1 for case in self.cases)

    @property
    def k(self) -> int:
        """The k of pass^k: the fewest runs of any case (0 without cases)."""
        return min((case.runs for case in self.cases), default=0)

    @property
    def pass_hat_k(self) -> float:
        """The mean over cases of pass^k (0.0 without cases)."""
        if not self.cases:
            return 0.0
        k = self.k
        return sum(pass_hat_k(c.runs, c.right, k) for c in self.cases) / len(self.cases)

    @property
    def flaky(self) -> tuple[CaseRuns, ...]:
        """The flaky cases."""
        return tuple(case for case in self.cases if case.flaky)

    @property
    def partial_credit(self) -> float | None:
        """The mean soft F1 over scored jobs; None when no job was scored."""
        return sum(self.partial.values()) / len(self.partial) if self.partial else None

    def per_job(self) -> dict[str, JobScore]:
        """Returns: ``job_id → its scores`` for every scored job."""
        out = {}
        for case in self.cases:
            for job_id, matched, partial in zip(
                case.job_ids, case.outcomes, case.partial, strict=True
            ):
                out[job_id] = JobScore(matched, partial, case.runs, case.pass_rate, case.flaky)
        return out

    def lines(self) -> list[str]:
        """Returns: the report's score lines, execution accuracy first; empty when unscored."""
        if not self.exact:
            return []
        hits, total = sum(self.exact.values()), len(self.exact)
        out = [
            f"execution accuracy: {hits}/{total} ({100 * hits / total:.1f}%)",
            f"partial credit (soft F1 over cells): {self.partial_credit or 0.0:.3f}",
        ]
        if self.repeated:
            k, cases = self.k, len(self.cases)
            all_right = sum(1 for c in self.cases if c.right == c.runs)
            out.append(
                f"repeated runs: {cases} cases, pass^{k} {self.pass_hat_k:.3f}"
                f" ({all_right}/{cases} cases right every run), {len(self.flaky)} flaky"
            )
            out += [
                f"  flaky: {c.question!r} as {c.persona or '-'}: {c.right}/{c.runs} right"
                for c in self.flaky
            ]
        if self.threads:
            right = sum(t.all_right for t in self.threads)
            out.append(f"threads: {right}/{len(self.threads)} right at every turn")
            out += [
                f"  thread {t.chat_id}: first wrong turn {t.first_wrong_turn} of {len(t.outcomes)}"
                for t in self.threads
                if not t.all_right
            ]
        return out

    def to_json(self) -> dict[str, Any]:
        """Returns: the scores as one JSON object (``cases`` and ``threads`` listed)."""
        hits, total = sum(self.exact.values()), len(self.exact)
        k = self.k
        return {
            "scored_jobs": total,
            "execution_accuracy": hits / total if total else None,
            "partial_credit": self.partial_credit,
            "repeated": self.repeated,
            "k": k,
            "pass^k": self.pass_hat_k if self.cases else None,
            "flaky_cases": len(self.flaky),
            "cases": [case.to_json(k) for case in self.cases],
            "threads": [thread.to_json() for thread in self.threads],
        }


def case_runs(
    jobs: Sequence[JobSnapshot], exact: Mapping[str, bool], partial: Mapping[str, float]
) -> tuple[CaseRuns, ...]:
    """Groups the scored jobs by (question, persona), jobs in the given (submission) order."""
    grouped: dict[tuple[str, str | None], list[JobSnapshot]] = defaultdict(list)
    for job in jobs:
        if job.job_id in exact:
            grouped[(job.question, job.persona)].append(job)
    return tuple(
        CaseRuns(
            question=question,
            persona=persona,
            job_ids=tuple(j.job_id for j in group),
            outcomes=tuple(exact[j.job_id] for j in group),
            partial=tuple(partial.get(j.job_id, 0.0) for j in group),
        )
        for (question, persona), group in grouped.items()
    )


def thread_scores(
    jobs: Sequence[JobSnapshot], exact: Mapping[str, bool]
) -> tuple[ThreadScore, ...]:
    """Returns: the threads with more than one scored turn, turns in the given order."""
    grouped: dict[str, list[JobSnapshot]] = defaultdict(list)
    for job in jobs:
        if job.chat_id and job.job_id in exact:
            grouped[job.chat_id].append(job)
    return tuple(
        ThreadScore(
            chat_id=chat_id,
            job_ids=tuple(j.job_id for j in turns),
            outcomes=tuple(exact[j.job_id] for j in turns),
        )
        for chat_id, turns in grouped.items()
        if len(turns) > 1
    )


def run_scores(
    jobs: Sequence[JobSnapshot], exact: Mapping[str, bool], partial: Mapping[str, float]
) -> RunScores:
    """Returns: every score of a run whose jobs (submission order) were scored as given."""
    return RunScores(
        exact=dict(exact),
        partial=dict(partial),
        cases=case_runs(jobs, exact, partial),
        threads=thread_scores(jobs, exact),
    )


@dataclass(frozen=True)
class PassRateChange:
    """One case's pass rate in two runs (``chatscribe diff`` of repeated runs).

    Attributes:
        question, persona: The case.
        a, b: ``(right, runs)`` in run A and run B; None when the run did not score the case.
    """

    question: str
    persona: str | None
    a: tuple[int, int] | None
    b: tuple[int, int] | None

    @property
    def regressed(self) -> bool:
        """True when B's pass rate is below A's, or B lacks a case A scored."""
        if self.a is None:
            return False
        if self.b is None:
            return True
        return self.b[0] * self.a[1] < self.a[0] * self.b[1]

    def to_json(self) -> dict[str, Any]:
        """Returns: the case, each run's right/runs/pass rate, and ``regressed``."""

        def side(value: tuple[int, int] | None) -> dict[str, Any] | None:
            if value is None:
                return None
            return {"right": value[0], "runs": value[1], "pass_rate": value[0] / value[1]}

        return {
            "question": self.question,
            "persona": self.persona,
            "a": side(self.a),
            "b": side(self.b),
            "regressed": self.regressed,
        }


def compare_pass_rates(a: RunScores, b: RunScores) -> tuple[PassRateChange, ...]:
    """Pairs the cases of two scored runs by (question, persona); A's order, then B's new cases.

    Returns:
        One :class:`PassRateChange` per case scored in either run.
    """
    in_b = {(c.question, c.persona): c for c in b.cases}
    out = []
    for case in a.cases:
        other = in_b.pop((case.question, case.persona), None)
        after = (other.right, other.runs) if other is not None else None
        out.append(PassRateChange(case.question, case.persona, (case.right, case.runs), after))
    out += [PassRateChange(c.question, c.persona, None, (c.right, c.runs)) for c in in_b.values()]
    return tuple(out)
