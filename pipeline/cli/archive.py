"""The archive's commands: replay, rerun, diff, audit, verify, retention.

Commands (registered in :mod:`pipeline.cli.app`)::

    chatscribe replay JOB_ID [--attempt N] [--sorted] [--output FILE]   the NDJSON as received
    chatscribe replay serve [--host] [--port] [--speed X] [--run RUN_ID]   Chat API replaying it
    chatscribe rerun RUN_ID [--chat-url URL] [--json]    ask a past run again as a new run
    chatscribe diff RUN_A RUN_B [--json] [--rel-tol X] [--questions FILE]
                                                         exit 1 when results regressed
    chatscribe audit [--since] [--until] [--user] [--view] [--format csv|json|html] [--output]
    chatscribe verify [--run RUN_ID | --job JOB_ID]      exit 1 when a row changed
    chatscribe retention apply --policy FILE [--now ISO]

Exit codes: 0 fine, 1 regressed / tampered / jobs failed, 2 bad input (unknown job or run,
invalid file).
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.console import Console
from rich.table import Table

from pipeline.settings import Settings

if TYPE_CHECKING:
    from pipeline.archive.diff import JobSnapshot

archive_app = typer.Typer(no_args_is_help=True, help="Replay, compare and audit the archive.")
retention_app = typer.Typer(no_args_is_help=True, help="Retention and redaction of content.")
err = Console(stderr=True)


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[red]{message}[/]")
    return typer.Exit(code)


def _when(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise _fail(f"not an ISO date or time: {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@archive_app.command()
def replay(
    target: Annotated[str, typer.Argument(help="JOB_ID, or 'serve' to run the replay server.")],
    attempt: Annotated[int | None, typer.Option(help="Attempt (default: last).")] = None,
    by_sort: Annotated[bool, typer.Option("--sorted", help="Order by 'sort'.")] = False,
    output: Annotated[Path | None, typer.Option(help="File (default: stdout).")] = None,
    host: Annotated[str, typer.Option(help="serve: address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="serve: TCP port.")] = 8410,
    speed: Annotated[float, typer.Option(help="serve: timing divisor, 0 = no delay.")] = 1.0,
    run: Annotated[str | None, typer.Option(help="serve: only this run.")] = None,
) -> None:
    """Write a job's NDJSON exactly as received (or, with 'serve', serve archived chats)."""
    settings = Settings()
    if target == "serve":
        from pipeline.replay.server import serve

        serve(settings, host=host, port=port, speed=speed, run_id=run)
        return
    from pipeline.archive.engine import create_engine
    from pipeline.archive.replay import read_attempt, write_ndjson
    from pipeline.errors import ReplayError

    engine = create_engine(settings)
    try:
        with engine.connect() as conn:
            _, lines = read_attempt(conn, job_id=target, attempt=attempt)
    except ReplayError as exc:
        raise _fail(str(exc)) from exc
    finally:
        engine.dispose()
    if output is None:
        write_ndjson(sys.stdout.buffer, lines, sort=by_sort)
    else:
        with output.open("wb") as out:
            write_ndjson(out, lines, sort=by_sort)


@archive_app.command()
def rerun(
    run_id: Annotated[str, typer.Argument(help="The run to ask again.")],
    chat_url: Annotated[
        str | None, typer.Option(help="Chat endpoint (default: as before).")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON object per job.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait.")] = 600.0,
) -> None:
    """Ask a past run's questions again, as the same identities, as a new linked run."""
    from pipeline.errors import RunNotFoundError
    from pipeline.reports.run_report import render_json, render_table, summary
    from pipeline.runs.accuracy import archived_accuracy
    from pipeline.runs.rerun import rerun as run_again

    try:
        outcome = asyncio.run(run_again(Settings(), run_id, chat_url=chat_url, timeout_s=timeout))
    except RunNotFoundError as exc:
        raise _fail(str(exc)) from exc
    if json_output:
        print(render_json(outcome.results))
    else:
        console = Console(width=max(Console().width, 160))
        render_table(console, outcome.results, title=f"run {outcome.run_id} (rerun of {run_id})")
        console.print(summary(outcome.results))
        for line in archived_accuracy(Settings(), outcome.run_id).lines():
            console.print(line)
        console.print(f"compare: chatscribe diff {run_id} {outcome.run_id}")
    if not outcome.finished or any(r.status != "completed" for r in outcome.results):
        raise typer.Exit(1)


@archive_app.command()
def diff(
    run_a: Annotated[str, typer.Argument(help="The baseline run.")],
    run_b: Annotated[str, typer.Argument(help="The run to compare with it.")],
    json_output: Annotated[bool, typer.Option("--json", help="JSON document.")] = False,
    rel_tol: Annotated[float, typer.Option(help="Relative tolerance for numbers.")] = 1e-6,
    questions: Annotated[
        Path | None,
        typer.Option(
            "--questions",
            dir_okay=False,
            help="Expected results for repeated runs (default: run B's, else run A's file).",
        ),
    ] = None,
) -> None:
    """Compare two runs per (question, identity); exit 1 when results regressed.

    When either run asked a case more than once and a questions file gives expected results,
    the runs are compared by each case's pass rate instead; exit 1 when one fell.
    """
    from pipeline.archive.diff import diff_runs, load_run
    from pipeline.archive.engine import create_engine
    from pipeline.archive.runs import read_run
    from pipeline.errors import RunNotFoundError
    from pipeline.reports.diff_report import render_diff
    from pipeline.runs.accuracy import archived_accuracy

    settings = Settings()
    engine = create_engine(settings)
    try:
        a = load_run(engine, run_id=run_a)
        b = load_run(engine, run_id=run_b)
        if questions is None:
            recorded = [read_run(engine, run_id=r) for r in (run_b, run_a)]
            files = [r.source_file for r in recorded if r is not None and r.source_file]
            questions = Path(files[0]) if files else None
    except RunNotFoundError as exc:
        raise _fail(str(exc)) from exc
    finally:
        engine.dispose()
    if questions is not None and _diff_pass_rates(run_a, a, run_b, b, questions, json_output):
        return
    result = diff_runs(run_a, a, run_b, b, rel_tol=rel_tol)
    scores = {run: archived_accuracy(settings, run) for run in (run_a, run_b)}
    if json_output:
        document = {**result.to_json(), "accuracy": {r: s.to_json() for r, s in scores.items()}}
        print(json.dumps(document, ensure_ascii=False, indent=1, default=str))
    else:
        console = Console(width=max(Console().width, 140))
        render_diff(console, result)
        for run, run_scores in scores.items():
            console.print(f"{run}: " + "; ".join(run_scores.lines()))
    if result.regressed:
        raise typer.Exit(1)


def _diff_pass_rates(
    run_a: str,
    a: list[JobSnapshot],
    run_b: str,
    b: list[JobSnapshot],
    questions: Path,
    json_output: bool,
) -> bool:
    """Prints the pass-rate comparison of repeated runs; False when it does not apply.

    Raises:
        typer.Exit: 1 when a case's pass rate fell.
    """
    from pipeline.errors import QuestionsFileError
    from pipeline.reports.diff_report import render_pass_rates
    from pipeline.runs.accuracy import expectations_of, repeated_pass_rates
    from pipeline.runs.batch import load_questions

    if all(len({(j.question, j.persona) for j in jobs}) == len(jobs) for jobs in (a, b)):
        return False
    try:
        expectations = expectations_of(load_questions(questions))
    except QuestionsFileError as exc:
        err.print(f"[dim]pass rates not compared: {exc}[/]")
        return False
    changes = repeated_pass_rates(a, b, expectations)
    if changes is None:
        return False
    regressed = any(change.regressed for change in changes)
    if json_output:
        document = {
            "run_a": run_a,
            "run_b": run_b,
            "by": "pass_rate",
            "regressed": regressed,
            "cases": [change.to_json() for change in changes],
        }
        print(json.dumps(document, ensure_ascii=False, indent=1))
    else:
        render_pass_rates(Console(width=max(Console().width, 140)), run_a, run_b, changes)
    if regressed:
        raise typer.Exit(1)
    return True


@archive_app.command()
def audit(
    since: Annotated[str | None, typer.Option(help="From (ISO date/time, UTC).")] = None,
    until: Annotated[str | None, typer.Option(help="Before (ISO date/time, UTC).")] = None,
    user: Annotated[str | None, typer.Option(help="externalId, internalId or owner key.")] = None,
    view: Annotated[str | None, typer.Option(help="Only jobs whose SQL touched it.")] = None,
    fmt: Annotated[Literal["csv", "json", "html"], typer.Option("--format")] = "csv",
    output: Annotated[Path | None, typer.Option(help="File (default: stdout).")] = None,
) -> None:
    """Who asked what, when, as which identity; views, members, rows, errors, aborts."""
    from pipeline.archive.audit import AuditFilter, read_entries
    from pipeline.archive.engine import create_engine
    from pipeline.reports.audit_formats import to_csv, to_html, to_json
    from pipeline.runs.accuracy import job_scores

    settings = Settings()
    flt = AuditFilter(since=_when(since), until=_when(until), user=user, view=view)
    engine = create_engine(settings)
    try:
        with engine.connect() as conn:
            entries = read_entries(conn, flt=flt)
            scores = job_scores(conn, [e.run_id for e in entries]) if fmt != "html" else {}
    finally:
        engine.dispose()
    if fmt == "csv":
        text = to_csv(entries, scores)
    elif fmt == "json":
        text = to_json(entries, flt, scores)
    else:
        text = to_html(entries, flt)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        err.print(f"{len(entries)} entries written to {output}")


@archive_app.command()
def verify(
    run: Annotated[str | None, typer.Option(help="Only this run.")] = None,
    job: Annotated[str | None, typer.Option(help="Only this job.")] = None,
) -> None:
    """Recompute hash chains and seals; exit 1 and list every row changed after it was written.

    Seals are compared with the anchor file when ``CHATSCRIBE_CHAIN_ANCHOR_DIR`` is set.
    """
    from pipeline.archive.chain import verify as check
    from pipeline.archive.engine import create_engine
    from pipeline.archive.seals import Anchor
    from pipeline.errors import ChainAnchorError

    settings = Settings()
    anchor = Anchor(settings.chain_anchor_dir) if settings.chain_anchor_dir else None
    engine = create_engine(settings)
    try:
        with engine.connect() as conn:
            report = check(conn, run_id=run, job_id=job, anchor=anchor)
    except ChainAnchorError as exc:
        raise _fail(str(exc)) from exc
    finally:
        engine.dispose()
    console = Console(width=max(Console().width, 160))
    console.print(
        f"checked {report.lines} lines of {report.attempts} attempts: {report.redacted} redacted,"
        f" {report.unchained} unchained (open attempts), {report.sealed} sealed attempts,"
        f" {report.verdicts} reviewers' verdicts, {len(report.problems)} problems"
    )
    if anchor is None:
        console.print(
            "[yellow]seals not anchored outside PostgreSQL (CHATSCRIBE_CHAIN_ANCHOR_DIR unset):"
            " a whole attempt rewritten consistently inside the database would pass[/]"
        )
    else:
        console.print(f"{report.anchored} seals match the anchor {anchor.path}")
        console.print(
            f"{report.verdicts_anchored} verdicts match their anchor in {anchor.directory}"
        )
    if report.problems:
        table = Table("job", "attempt", "line", "problem", "detail")
        for p in report.problems:
            table.add_row(p.job_id, str(p.attempt), str(p.line_no or "-"), p.kind, p.detail)
        console.print(table)
        raise typer.Exit(1)
    console.print("[green]every chain and seal verifies[/]")


@retention_app.command("apply")
def retention_apply(
    policy: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="Policy YAML.")],
    now: Annotated[str | None, typer.Option(help="Measure ages from (ISO; default now).")] = None,
) -> None:
    """Delete or redact content past its age, keeping metadata and hashes.

    Also detach or drop whole months of lines (policy ``partitions``).
    """
    from pipeline.archive.engine import create_engine
    from pipeline.archive.redaction import Redactor
    from pipeline.archive.retention import apply_policy, load_policy
    from pipeline.archive.seals import Anchor
    from pipeline.errors import RedactionRuleError, RetentionPolicyError

    settings = Settings()
    try:
        rules = load_policy(policy)
        default = Redactor.build(
            detectors=settings.redact_detectors, patterns=settings.redact_patterns
        )
    except (RetentionPolicyError, RedactionRuleError) as exc:
        raise _fail(str(exc)) from exc
    engine = create_engine(settings)
    try:
        with engine.begin() as conn:
            outcome = apply_policy(
                conn,
                rules,
                now=_when(now) or datetime.now(UTC),
                default_redactor=default,
                anchor=Anchor(settings.chain_anchor_dir) if settings.chain_anchor_dir else None,
            )
    finally:
        engine.dispose()
    err.print(
        f"deleted content of {outcome.deleted_jobs} jobs, redacted {outcome.redacted_jobs} jobs;"
        f" {outcome.lines_changed} lines changed; partitions removed:"
        f" {', '.join(outcome.partitions_removed) or '-'}"
    )
