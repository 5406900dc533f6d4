"""``chatscribe runs show|wait``: a run's progress and outcome, read from the archive.

Commands::

    chatscribe runs show RUN_ID [--json]               progress by status and one row per job
    chatscribe runs wait RUN_ID [--timeout S] [--json] wait until every job finished, then report

Both read PostgreSQL only (:mod:`pipeline.archive.runs`), so they work from any machine that reaches
the archive, for runs submitted with ``chatscribe batch --detach`` or by another process; ``show``
also reads a finished run's questions file, when it is still where it was recorded, for the
scores of :mod:`pipeline.runs.scores`.
Exit status of ``wait`` (like ``batch``): 0 when every job completed, 1 when a job did not
complete or the wait timed out; both commands exit 2 for a run id the archive does not know.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from pipeline.settings import Settings

if TYPE_CHECKING:
    from pipeline.runs.scores import RunScores

runs_app = typer.Typer(no_args_is_help=True, help="Runs recorded in the archive.")
err = Console(stderr=True)

RunId = Annotated[str, typer.Argument(help="The run id printed by `chatscribe batch`.")]
JsonOutput = Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")]
EXIT_UNKNOWN_RUN = 2


@runs_app.command("show")
def show(run_id: RunId, json_output: JsonOutput = False) -> None:
    """Show a run's progress (jobs by status, finished of submitted) and its jobs so far."""
    from pipeline.archive.engine import create_engine
    from pipeline.archive.runs import read_run, run_progress, run_results, run_throttling
    from pipeline.runs.accuracy import archived_accuracy

    settings = Settings()
    engine = create_engine(settings)
    try:
        run = read_run(engine, run_id=run_id)
        if run is None:
            _unknown(run_id)
        progress = run_progress(engine, run_id=run_id, expected=run.job_count)
        results = run_results(engine, run_id=run_id)
        throttling = run_throttling(engine, run_id=run_id)
        accuracy = archived_accuracy(settings, run_id) if results else None
    finally:
        engine.dispose()
    scores = _scores(settings, run_id, run.source_file) if progress.done else None
    if json_output:
        jobs = [r.to_json() for r in results]
        document = {
            "run": run.to_json(),
            "progress": progress.to_json(),
            "throttled": throttling.to_json(),
            "scores": scores.to_json() if scores is not None and scores.exact else None,
            "accuracy": accuracy.to_json() if accuracy else None,
            "jobs": jobs,
        }
        print(json.dumps(document, ensure_ascii=False))
        return
    from pipeline.reports.run_report import render_table, summary, throttling_line

    console = Console(width=max(Console().width, 160))
    exact = scores.exact if scores is not None else None
    render_table(console, results, title=f"run {run_id} ({run.name or 'unnamed'})", accuracy=exact)
    statuses = " ".join(f"{k}={v}" for k, v in sorted(progress.by_status.items()))
    console.print(
        f"{progress.finished} of {run.job_count} jobs finished"
        f" ({'done' if progress.done else 'in progress'}); {statuses or 'no job seen yet'}"
    )
    if results:
        console.print(summary(results))
    # Execution accuracy once: the reviewed scores' (questions file and reviewed truths), then
    # the file's finer scores after their own accuracy line.
    lines = accuracy.lines() if accuracy else []
    lines += (scores.lines()[1:] if lines else scores.lines()) if scores is not None else []
    for line in lines:
        console.print(line, markup=False)
    console.print(throttling_line(throttling))


def _scores(settings: Settings, run_id: str, source_file: str | None) -> RunScores | None:
    """Returns: the finished run's scores against its questions file; None without one."""
    from pipeline.errors import QuestionsFileError, RunNotFoundError
    from pipeline.runs.accuracy import run_scores_of

    if not source_file:
        return None
    try:
        return run_scores_of(settings, run_id, Path(source_file))
    except (QuestionsFileError, RunNotFoundError) as exc:
        err.print(f"[dim]no scores: {exc}[/]")
        return None


@runs_app.command("wait")
def wait(
    run_id: RunId,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait.", min=0)] = 600.0,
    json_output: JsonOutput = False,
) -> None:
    """Wait until every job of the run finished, print its report; exit 1 unless all completed."""
    from pipeline.errors import RunNotFoundError
    from pipeline.reports.run_report import render_json, render_table, summary
    from pipeline.runs.runner import wait_for_run

    try:
        outcome = asyncio.run(
            wait_for_run(Settings(), run_id, timeout_s=timeout, show_progress=not json_output)
        )
    except RunNotFoundError:
        _unknown(run_id)
    if json_output:
        print(render_json(outcome.results))
    else:
        console = Console(width=max(Console().width, 160))
        render_table(console, outcome.results, title=f"run {outcome.run_id}")
        console.print(summary(outcome.results))
        console.print(outcome.footer())
    failed = [r for r in outcome.results if r.status != "completed"]
    if not outcome.finished:
        err.print(f"[red]run {run_id} did not finish within {timeout:g} s[/]")
        raise typer.Exit(1)
    if failed:
        err.print(f"[red]{len(failed)} job(s) did not complete[/]")
        raise typer.Exit(1)


def _unknown(run_id: str) -> NoReturn:
    err.print(f"[red]no run {run_id!r} in the archive[/] (check CHATSCRIBE_DATABASE_SCHEMA)")
    raise typer.Exit(EXIT_UNKNOWN_RUN)
