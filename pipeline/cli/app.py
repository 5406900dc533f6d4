"""The ``chatscribe`` command line.

Commands::

    chatscribe api serve [--host H] [--port N]     our Chat API under uvicorn (no Kafka, no DB)
    chatscribe api users add|list|remove|purge     Chat API users (pipeline.cli.api_users)
    chatscribe api keys add|revoke|count           Chat API keys
    chatscribe db upgrade                          create or upgrade the archive schema
    chatscribe db partitions ensure|list           monthly partitions of stream_lines
    chatscribe worker                              a worker process (faust)
    chatscribe sink                                a sink process (Kafka → PostgreSQL)
    chatscribe batch FILE [--chat-url] [--api-key] [--json]   run a questions file, print a report
    chatscribe batch FILE --detach                 submit only; print the run id
    chatscribe runs show|wait RUN_ID               a run's progress / wait for its outcome
    chatscribe dlq list|show|replay                inspect and re-submit dead letters
    chatscribe cancel JOB_ID... | --run RUN_ID [--reason]   ask the workers to abort jobs
    chatscribe demo FILE                           start API, worker and sink; run FILE; stop them
    chatscribe replay|rerun|diff|audit|verify      the archive as a product (pipeline.cli.archive)
    chatscribe retention apply --policy FILE       delete or redact content past its age
    chatscribe console [--host H] [--port N]       the read-only web console over the archive
    chatscribe review queue|reviewers ...          review queues and reviewers (pipeline.cli.review)
    chatscribe schemas list|show NAME|write        JSON Schemas of published records
    chatscribe export otel --endpoint URL [--run RUN | --since T]   traces over OTLP/HTTP

Configuration comes from ``CHATSCRIBE_*`` environment variables (:mod:`pipeline.settings`,
:mod:`chat_api.settings`), read once here and passed down.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from models.records import MAX_REQUESTS_PER_MINUTE
from pipeline.cli.api_users import keys_app, users_app
from pipeline.cli.archive import archive_app, retention_app
from pipeline.cli.dlq import dlq_app
from pipeline.cli.evaluation import (
    LlmApiKeyEnvOption,
    LlmBaseUrlOption,
    LlmModelOption,
    ModelDirOption,
    ReaderOption,
    WarehouseOption,
    reader_settings,
    run_eval,
)
from pipeline.cli.export import export_app
from pipeline.cli.partitions import partitions_app
from pipeline.cli.review import review_app
from pipeline.cli.runs import runs_app
from pipeline.cli.schemas import schemas_app
from pipeline.settings import Settings

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__.split("\n\n")[0])
api_app = typer.Typer(no_args_is_help=True, help="Our Chat API implementation.")
db_app = typer.Typer(no_args_is_help=True, help="The PostgreSQL archive.")
app.add_typer(api_app, name="api")
api_app.add_typer(users_app, name="users")
api_app.add_typer(keys_app, name="keys")
app.add_typer(db_app, name="db")
db_app.add_typer(partitions_app, name="partitions")
app.add_typer(runs_app, name="runs")
app.add_typer(archive_app)
app.add_typer(retention_app, name="retention")
app.add_typer(dlq_app, name="dlq")
app.add_typer(schemas_app, name="schemas")
app.add_typer(export_app, name="export")
app.add_typer(review_app, name="review")
app.command("eval")(run_eval)

err = Console(stderr=True)


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    for noisy in (
        "aiokafka",
        "faust",
        "mode",
        "httpx",
        "httpcore",
        "kafka",
        "alembic.runtime.plugins",
    ):
        logging.getLogger(noisy).setLevel(logging.WARNING)


Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")]


@api_app.command("serve")
def api_serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8400,
    model_dir: ModelDirOption = None,
    warehouse: WarehouseOption = None,
    reader: ReaderOption = None,
    llm_base_url: LlmBaseUrlOption = None,
    llm_model: LlmModelOption = None,
    llm_api_key_env: LlmApiKeyEnvOption = None,
    verbose: Verbose = False,
) -> None:
    """Serve the Chat API (chat stream, abort, generate-session) under uvicorn."""
    _logging(verbose)
    from chat_api import ChatApiSettings
    from chat_api.http import serve

    given: dict[str, Any] = {"model_dir": model_dir, "warehouse": warehouse}
    overrides = {key: value for key, value in given.items() if value is not None}
    overrides |= reader_settings(reader, llm_base_url, llm_model, llm_api_key_env)
    serve(ChatApiSettings(**overrides), host=host, port=port)


@db_app.command("upgrade")
def db_upgrade(verbose: Verbose = False) -> None:
    """Apply the Alembic migrations (CHATSCRIBE_DATABASE_URL, CHATSCRIBE_DATABASE_SCHEMA)."""
    _logging(verbose)
    from pipeline.archive.engine import upgrade

    upgrade(Settings())
    err.print("[green]archive schema is up to date[/]")


@app.command()
def worker(verbose: Verbose = False) -> None:
    """Run a worker: consume chat.requests, drive Chat API streams, produce every line."""
    _logging(verbose)
    from pipeline.kafka.outage import install_outage_log
    from pipeline.worker.app import run_worker

    install_outage_log()
    run_worker(Settings())


@app.command()
def sink(verbose: Verbose = False) -> None:
    """Run a sink: archive chat.lines and chat.job-events into PostgreSQL."""
    _logging(verbose)
    from pipeline.kafka.outage import install_outage_log
    from pipeline.sink.loop import run_sink

    install_outage_log()
    run_sink(Settings())


ChatUrl = Annotated[
    str | None, typer.Option("--chat-url", help="Chat endpoint URL (default CHATSCRIBE_CHAT_URL).")
]
ApiKey = Annotated[
    str | None,
    typer.Option("--api-key", help="Chat API key for these jobs (default: the worker's)."),
]
Timeout = Annotated[float, typer.Option("--timeout", help="Seconds to wait for the run.")]
MaxConcurrency = Annotated[
    int | None,
    typer.Option("--max-concurrency", min=1, help="Streams of this run at once, all workers."),
]
RequestsPerMinute = Annotated[
    int | None,
    typer.Option(
        "--requests-per-minute",
        min=1,
        max=MAX_REQUESTS_PER_MINUTE,
        help="Jobs of this run started per minute.",
    ),
]
TargetConcurrency = Annotated[
    int | None,
    typer.Option(
        "--target-max-concurrency", min=1, help="Streams to this agent at once, all runs."
    ),
]
TargetRequestsPerMinute = Annotated[
    int | None,
    typer.Option(
        "--target-requests-per-minute",
        min=1,
        max=MAX_REQUESTS_PER_MINUTE,
        help="Jobs started per minute on this agent.",
    ),
]


MaxJobs = Annotated[
    int | None,
    typer.Option(
        "--max-jobs",
        min=1,
        help="Most jobs the file may expand to (default CHATSCRIBE_RUN_MAX_JOBS, 10,000).",
    ),
]


@app.command()
def batch(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Questions YAML.")],
    chat_url: ChatUrl = None,
    api_key: ApiKey = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON object per job.")] = False,
    timeout: Timeout = 600.0,
    detach: Annotated[
        bool, typer.Option("--detach", help="Submit, print the run id, do not wait.")
    ] = False,
    verbose: Verbose = False,
    max_concurrency: MaxConcurrency = None,
    requests_per_minute: RequestsPerMinute = None,
    target_max_concurrency: TargetConcurrency = None,
    target_requests_per_minute: TargetRequestsPerMinute = None,
    max_jobs: MaxJobs = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            "--repeat",
            min=1,
            help="Ask each (question, persona) N times (default: the file's repeat, or 1);"
            " the report gives pass rates, pass^N and flaky cases.",
        ),
    ] = None,
) -> None:
    """Submit a questions file as a run, wait for it, print the report. Exit 1 if a job failed.

    Limits given here win over the file's ``limits``/``targetLimits`` and hold across every
    worker of the group.
    """
    _logging(verbose)
    from models.records import RateLimits
    from pipeline.runs.runner import run_questions_file, submit_questions_file

    run_limits = RateLimits(
        max_concurrency=max_concurrency, requests_per_minute=requests_per_minute
    )
    agent_limits = RateLimits(
        max_concurrency=target_max_concurrency, requests_per_minute=target_requests_per_minute
    )
    if detach:
        run = asyncio.run(
            submit_questions_file(
                Settings(),
                file,
                chat_url=chat_url,
                api_key=api_key,
                limits=run_limits,
                target_limits=agent_limits,
                max_jobs=max_jobs,
                repeat=repeat,
            )
        )
        err.print(
            f"{run.job_count} job(s) submitted; follow with `chatscribe runs wait {run.run_id}`"
        )
        print(run.run_id)
        return

    outcome = asyncio.run(
        run_questions_file(
            Settings(),
            file,
            chat_url=chat_url,
            api_key=api_key,
            timeout_s=timeout,
            show_progress=not json_output,
            limits=run_limits,
            target_limits=agent_limits,
            max_jobs=max_jobs,
            repeat=repeat,
        )
    )
    _print_outcome(outcome, json_output=json_output, questions=file)


@app.command()
def demo(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False)] = Path(
        "examples/questions.yaml"
    ),
    timeout: Timeout = 600.0,
    verbose: Verbose = False,
) -> None:
    """The main job: start the Chat API, a worker and a sink, run FILE, print the report, stop."""
    _logging(verbose)
    from pipeline.cli.demo import run_demo

    outcome = run_demo(Settings(), file, timeout_s=timeout)
    try:
        _print_outcome(outcome, json_output=False, questions=file)
    finally:
        err.print(
            f"look at it: [bold]make console[/] (or [bold]{_own_command()} console[/]), then open"
            f" http://127.0.0.1:8500/runs/{outcome.run_id}"
        )


def _own_command() -> str:
    """Returns: how to run this ``chatscribe`` again: its path when it is not on ``PATH``.

    After ``make demo`` a newcomer's shell has no ``chatscribe`` (it lives in ``.venv/bin``).
    """
    on_path = shutil.which("chatscribe")
    mine = Path(sys.argv[0]).resolve() if Path(sys.argv[0]).name == "chatscribe" else None
    if mine is None or (on_path is not None and Path(on_path).resolve() == mine):
        return "chatscribe"
    try:
        return str(mine.relative_to(Path.cwd()))
    except ValueError:
        return str(mine)


@app.command()
def cancel(
    job_ids: Annotated[list[str] | None, typer.Argument(help="Jobs to cancel.")] = None,
    run: Annotated[
        str | None, typer.Option("--run", help="Cancel every unfinished job of this run.")
    ] = None,
    reason: Annotated[str, typer.Option(help="Recorded with the aborted job.")] = "",
    verbose: Verbose = False,
) -> None:
    """Publish a cancellation per job (or per unfinished job of --run); workers abort them."""
    _logging(verbose)
    from pipeline.runs.cancel import cancel_run
    from pipeline.runs.submit import cancel_jobs

    if bool(job_ids) == (run is not None):
        raise typer.BadParameter("give job ids or --run RUN_ID (one of them)")
    if run is not None:
        job_ids = asyncio.run(cancel_run(Settings(), run, reason=reason))
    else:
        asyncio.run(cancel_jobs(Settings(), job_ids or [], reason=reason))
    err.print(f"cancellation sent for {len(job_ids or [])} job(s)")


@app.command()
def console(
    host: Annotated[
        str,
        typer.Option(help="Address to listen on (beyond loopback: set CHATSCRIBE_CONSOLE_TOKEN)."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8500,
    verbose: Verbose = False,
) -> None:
    """Serve the read-only web console: runs, conversations, diffs, audit, search."""
    _logging(verbose)
    from pipeline.console.app import serve
    from pipeline.errors import ConsoleBindError

    try:
        serve(Settings(), host=host, port=port)
    except ConsoleBindError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc


def _print_outcome(outcome: object, *, json_output: bool, questions: Path | None = None) -> None:
    from pipeline.reports.run_report import render_json, render_table, summary
    from pipeline.runs.accuracy import run_scores_of
    from pipeline.runs.runner import RunOutcome

    assert isinstance(outcome, RunOutcome)
    scores = run_scores_of(Settings(), outcome.run_id, questions) if questions else None
    if json_output:
        print(render_json(outcome.results))
    else:
        console = Console(width=max(Console().width, 160))
        exact = scores.exact if scores is not None else {}
        render_table(console, outcome.results, title=f"run {outcome.run_id}", accuracy=exact)
        console.print(summary(outcome.results))
        for line in scores.lines() if scores is not None else ():
            console.print(line, markup=False)
        console.print(outcome.footer())
    failed = [r for r in outcome.results if r.status != "completed"]
    if failed or not outcome.finished:
        err.print(
            f"[red]{len(failed)} job(s) did not complete[/]"
            + ("" if outcome.finished else "; the run timed out")
        )
        raise typer.Exit(1)


def main() -> None:
    """Entry point for ``python -m pipeline.cli.app``."""
    app(prog_name="chatscribe")


if __name__ == "__main__":
    main()
