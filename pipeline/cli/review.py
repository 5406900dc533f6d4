"""``chatscribe review``: review queues and reviewers (issue 26; :mod:`pipeline.archive.reviews`).

Commands (registered in :mod:`pipeline.cli.app`)::

    chatscribe review queue create QUEUE --reviewer NAME [--reviewer NAME ...]
        [--run RUN] [--persona P] [--view V] [--failed] [--changed-since RUN]
        [--sample N [--seed S]] [--compare RUN]
    chatscribe review queue list [--json]
    chatscribe review queue show QUEUE [--first N] [--limit N] [--json]
    chatscribe review reviewers add NAME      prints the reviewer's token, once
    chatscribe review reviewers revoke NAME
    chatscribe review reviewers list

Verdicts are given in the console's Review page (``/review``) with a reviewer token.
Exit codes: 0 fine, 2 bad input (a refused name or filter, an unknown run or queue).
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from pipeline.settings import Settings

review_app = typer.Typer(no_args_is_help=True, help="Review queues, reviewers and verdicts.")
queue_app = typer.Typer(no_args_is_help=True, help="Review queues: filters over the archive.")
reviewers_app = typer.Typer(no_args_is_help=True, help="Reviewers: named identities with tokens.")
review_app.add_typer(queue_app, name="queue")
review_app.add_typer(reviewers_app, name="reviewers")
err = Console(stderr=True)
T = TypeVar("T")
JsonOutput = Annotated[bool, typer.Option("--json", help="JSON on stdout.")]


@contextmanager
def _archive(*, write: bool) -> Iterator[Any]:
    from pipeline.archive.engine import create_engine

    engine = create_engine(Settings())
    try:
        with engine.begin() if write else engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def _refused(call: Callable[[], T]) -> T:
    from pipeline.errors import ReviewRefusedError, RunNotFoundError

    try:
        return call()
    except (ReviewRefusedError, RunNotFoundError) as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc


@queue_app.command("create")
def create(
    queue: Annotated[str, typer.Argument(help="The queue's id (letters, digits, . _ @ -).")],
    reviewer: Annotated[list[str], typer.Option(help="A reviewer assigned (repeat).")],
    run: Annotated[str | None, typer.Option(help="Only this run's jobs.")] = None,
    persona: Annotated[str | None, typer.Option(help="Only this persona.")] = None,
    view: Annotated[str | None, typer.Option(help="Only jobs whose SQL touched it.")] = None,
    failed: Annotated[bool, typer.Option(help="Only failed or refused jobs.")] = False,
    changed_since: Annotated[
        str | None, typer.Option(help="Only answers changed since this run (with --run).")
    ] = None,
    sample: Annotated[int | None, typer.Option(help="A random sample of N.", min=1)] = None,
    seed: Annotated[int, typer.Option(help="The sample's random seed.")] = 0,
    compare: Annotated[
        str | None, typer.Option(help="Pairwise: show this run's answer beside each.")
    ] = None,
) -> None:
    """Make a queue of the jobs the filters select, with reviewers assigned."""
    from pipeline.archive.reviews import QueueFilter, create_queue

    flt = QueueFilter(
        run=run,
        persona=persona,
        view=view,
        failed=failed,
        changed_since=changed_since,
        sample=sample,
        seed=seed,
    )
    with _archive(write=True) as conn:
        count = _refused(
            lambda: create_queue(
                conn,
                queue,
                flt,
                reviewers=reviewer,
                compare_run=compare,
                created_by=getpass.getuser(),
            )
        )
    err.print(f"queue {queue}: {count} jobs; review at /review/{queue} in `chatscribe console`")


@queue_app.command("list")
def list_(json_output: JsonOutput = False) -> None:
    """List the queues: filter, reviewers, items and how many were reviewed."""
    from pipeline.archive.reviews import list_queues

    with _archive(write=False) as conn:
        queues = list_queues(conn)
    if json_output:
        print(json.dumps([q.to_json() for q in queues], ensure_ascii=False))
        return
    table = Table("queue", "filter", "reviewers", "reviewed", "created")
    for q in queues:
        flt = " ".join(f"{k}={v}" for k, v in q.filter.items())
        pair = f" compare={q.compare_run}" if q.compare_run else ""
        table.add_row(
            q.queue_id,
            flt + pair,
            ", ".join(q.reviewers),
            f"{q.reviewed}/{q.item_count}",
            q.created_at.strftime("%Y-%m-%d %H:%M"),
        )
    Console(width=max(Console().width, 140)).print(table)


@queue_app.command("show")
def show(
    queue: Annotated[str, typer.Argument(help="The queue.")],
    first: Annotated[int, typer.Option(help="First position (from 1).", min=1)] = 1,
    limit: Annotated[int, typer.Option(help="Positions shown.", min=1, max=10_000)] = 50,
    json_output: JsonOutput = False,
) -> None:
    """Show a queue's items and each one's latest verdict."""
    from pipeline.archive.reviews import list_queues, queue_items

    with _archive(write=False) as conn:
        found = list_queues(conn, queue_id=queue)
        items = queue_items(conn, queue, first=first, limit=limit) if found else []
    if not found:
        err.print(f"[red]no queue {queue!r} in the archive[/]")
        raise typer.Exit(2)
    if json_output:
        document = {"queue": found[0].to_json(), "items": [i.to_json() for i in items]}
        print(json.dumps(document, ensure_ascii=False))
        return
    table = Table("#", "job", "persona", "question", "verdict", "reviewer")
    for i in items:
        table.add_row(
            str(i.position),
            i.job_id,
            i.persona or "-",
            (i.question or "")[:80],
            i.verdict or "-",
            i.reviewer or "-",
        )
    console = Console(width=max(Console().width, 140))
    console.print(table)
    console.print(f"{found[0].reviewed} of {found[0].item_count} reviewed")


@reviewers_app.command("add")
def add(name: Annotated[str, typer.Argument(help="The reviewer's name.")]) -> None:
    """Add a reviewer (or renew a revoked one); print the token once (only its hash is kept)."""
    from pipeline.archive.reviews import add_reviewer

    with _archive(write=True) as conn:
        token = _refused(lambda: add_reviewer(conn, name))
    print(token)
    err.print(f"reviewer {name} added: the token above is shown only now")


@reviewers_app.command("revoke")
def revoke(name: Annotated[str, typer.Argument(help="The reviewer's name.")]) -> None:
    """Revoke a reviewer's token (their verdicts stay); exit 2 when none was active."""
    from pipeline.archive.reviews import revoke_reviewer

    with _archive(write=True) as conn:
        done = revoke_reviewer(conn, name)
    if not done:
        err.print(f"[red]no active reviewer {name!r}[/]")
        raise typer.Exit(2)
    err.print(f"reviewer {name} revoked")


@reviewers_app.command("list")
def list_reviewers_(json_output: JsonOutput = False) -> None:
    """List reviewers: added, revoked."""
    from pipeline.archive.reviews import list_reviewers

    with _archive(write=False) as conn:
        rows = list_reviewers(conn)
    if json_output:
        print(json.dumps(rows, default=str))
        return
    for r in rows:
        state = f"revoked {r['revoked_at']:%Y-%m-%d}" if r["revoked_at"] else "active"
        print(f"{r['name']}\t{state}\tadded {r['added_at']:%Y-%m-%d}")
