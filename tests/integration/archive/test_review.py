"""Review queues, reviewers and verdicts on a real PostgreSQL (issue 26, parts 1-3).

Runs are written by ``COPY`` into a fresh migrated schema (``review_support.copy_run``). The
console is the real application, requested in process; ``verify`` is the real check, and the
rows are changed by hand with plain SQL (the append-only trigger disabled first, as the table's
owner can).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from pipeline.archive import reviews
from pipeline.archive.audit import AuditFilter, read_entries
from pipeline.archive.chain import verify
from pipeline.archive.reviewed import latest_verdicts
from pipeline.archive.seals import Anchor
from pipeline.cli.app import app as cli
from pipeline.console.app import create_app
from pipeline.errors import ReviewerAuthError, ReviewRefusedError
from pipeline.reports.audit_formats import to_csv
from pipeline.runs.accuracy import accuracy_scores
from pipeline.settings import Settings
from tests.integration.archive.review_support import copy_run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("archive_schema"),
]


def _queue(engine: sa.Engine, run_id: str, reviewer: str = "ana") -> str:
    with engine.begin() as conn:
        token = reviews.add_reviewer(conn, reviewer)
        reviews.create_queue(
            conn, f"q-{run_id}", reviews.QueueFilter(run=run_id), reviewers=[reviewer]
        )
    return token


def _give(
    engine: sa.Engine, token: str, queue: str, pos: int, job: str, verdict: str, **kw: str
) -> None:
    with engine.begin() as conn:
        reviews.give(conn, token, reviews.VerdictForm(queue, pos, job, verdict, **kw), anchor=None)


def _kinds(engine: sa.Engine, anchor: Anchor | None = None) -> list[tuple[str, int | None]]:
    with engine.connect() as conn:
        report = verify(conn, anchor=anchor)
    return [(p.kind, p.line_no) for p in report.problems if p.kind.startswith("verdict")]


def _by_hand(engine: sa.Engine, statement: str) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE review_verdicts DISABLE TRIGGER USER"))
        conn.execute(sa.text(statement))
        conn.execute(sa.text("ALTER TABLE review_verdicts ENABLE TRIGGER USER"))


def test_queue_filters_select_by_run_persona_view_sample_and_failed(
    settings: Settings, engine: sa.Engine
) -> None:
    jobs = copy_run(settings, "r1", 12)
    copy_run(settings, "r2", 3)
    with engine.begin() as conn:
        reviews.add_reviewer(conn, "ana")
        select = reviews.select_jobs
        assert select(conn, reviews.QueueFilter(run="r1")) == jobs
        assert select(conn, reviews.QueueFilter(run="r1", persona="jfk-ops")) == jobs[1::3]
        assert select(conn, reviews.QueueFilter(run="r1", view="weather")) == jobs[1::3]
        sample = select(conn, reviews.QueueFilter(run="r1", sample=5, seed=7))
        assert len(sample) == 5 and sample == select(
            conn, reviews.QueueFilter(run="r1", sample=5, seed=7)
        )
        conn.execute(sa.text("UPDATE jobs SET status = 'failed' WHERE job_id = :j"), {"j": jobs[4]})
        assert select(conn, reviews.QueueFilter(run="r1", failed=True)) == [jobs[4]]
        with pytest.raises(ReviewRefusedError, match="selects no job"):
            reviews.create_queue(conn, "empty", reviews.QueueFilter(run="nope"), reviewers=["ana"])
        with pytest.raises(ReviewRefusedError, match="no active reviewer"):
            reviews.create_queue(conn, "q", reviews.QueueFilter(run="r1"), reviewers=["bob"])


def test_queue_of_answers_changed_since_a_run(settings: Settings, engine: sa.Engine) -> None:
    copy_run(settings, "old", 4)
    new = copy_run(settings, "new", 4)
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE sql_queries SET rows = '[[\"UA\", 99]]' WHERE job_id = :j"),
            {"j": new[2]},
        )
        flt = reviews.QueueFilter(run="new", changed_since="old")
        assert reviews.select_jobs(conn, flt) == [new[2]]


def test_a_changed_verdict_is_a_new_row_and_the_audit_carries_the_latest(
    settings: Settings, engine: sa.Engine
) -> None:
    jobs = copy_run(settings, "r1", 3)
    token = _queue(engine, "r1")
    _give(engine, token, "q-r1", 1, jobs[0], "incorrect", comment="wrong carrier")
    _give(engine, token, "q-r1", 1, jobs[0], "correct", labels="checked, sql")
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT seq, verdict, supersedes FROM review_verdicts ORDER BY seq")
        ).all()
        latest = latest_verdicts(conn, jobs)
        entries = {e.job_id: e for e in read_entries(conn, flt=AuditFilter())}
    assert [tuple(r) for r in rows] == [(1, "incorrect", None), (2, "correct", 1)]
    assert latest[jobs[0]].verdict == "correct" and set(latest) == {jobs[0]}
    assert (entries[jobs[0]].verdict, entries[jobs[0]].reviewer) == ("correct", "ana")
    assert entries[jobs[1]].verdict is None
    header, first = to_csv([entries[jobs[0]]]).splitlines()[:2]
    assert header.endswith("verdict,reviewer,reviewed_at") and ",correct,ana," in first


def test_the_verdict_table_refuses_update_and_delete(settings: Settings, engine: sa.Engine) -> None:
    jobs = copy_run(settings, "r1", 1)
    _give(engine, _queue(engine, "r1"), "q-r1", 1, jobs[0], "correct")
    for statement in (
        "UPDATE review_verdicts SET verdict = 'incorrect'",
        "DELETE FROM review_verdicts",
    ):
        with pytest.raises(sa.exc.DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(sa.text(statement))


def test_verify_reports_a_verdict_edited_or_deleted_by_hand(
    settings: Settings, engine: sa.Engine
) -> None:
    jobs = copy_run(settings, "r1", 4)
    token = _queue(engine, "r1")
    for n, job in enumerate(jobs, start=1):
        _give(engine, token, "q-r1", n, job, "correct", expected="1e20" if n == 1 else "")
    assert _kinds(engine) == []  # 1e20 hashed as jsonb gives it back, 100000000000000000000
    _by_hand(engine, "UPDATE review_verdicts SET verdict = 'incorrect' WHERE seq = 2")
    assert _kinds(engine) == [("verdict_changed", 2)]
    _by_hand(engine, "UPDATE review_verdicts SET verdict = 'correct' WHERE seq = 2")
    _by_hand(engine, "DELETE FROM review_verdicts WHERE seq = 3")
    assert _kinds(engine) == [("verdict_missing", 4), ("verdict_chain_broken", 4)]
    with engine.connect() as conn:
        scoped = verify(conn, job_id=jobs[0])
    assert scoped.verdicts == 3  # the whole chain walked, the problem is another job's:
    assert not [p for p in scoped.problems if p.kind.startswith("verdict")]


def test_verify_with_an_anchor_reports_the_last_verdict_deleted(
    settings: Settings, engine: sa.Engine, tmp_path: Path
) -> None:
    jobs = copy_run(settings, "r1", 2)
    token = _queue(engine, "r1")
    anchor = Anchor(tmp_path)
    from pipeline.archive.verdicts import VerdictAnchor

    for n, job in enumerate(jobs, start=1):
        with engine.begin() as conn:
            form = reviews.VerdictForm("q-r1", n, job, "correct")
            reviews.give(conn, token, form, anchor=VerdictAnchor(tmp_path))
    assert _kinds(engine, anchor) == []
    _by_hand(engine, "DELETE FROM review_verdicts WHERE seq = 2")
    assert _kinds(engine) == []  # the chain's tail alone cannot show it
    assert _kinds(engine, anchor) == [("verdict_missing", 2)]


def test_reviewers_revoked_or_not_assigned_cannot_give_verdicts(
    settings: Settings, engine: sa.Engine
) -> None:
    jobs = copy_run(settings, "r1", 1)
    token = _queue(engine, "r1")
    with engine.begin() as conn:
        other = reviews.add_reviewer(conn, "bob")
    with pytest.raises(ReviewerAuthError, match="not assigned"):
        _give(engine, other, "q-r1", 1, jobs[0], "correct")
    with pytest.raises(ReviewRefusedError, match="verdict"):
        _give(engine, token, "q-r1", 1, jobs[0], "a_better")
    with engine.begin() as conn:
        assert reviews.revoke_reviewer(conn, "ana")
    with pytest.raises(ReviewerAuthError, match="unknown or revoked"):
        _give(engine, token, "q-r1", 1, jobs[0], "correct")
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM review_verdicts")).scalar() == 0


def test_verdicts_are_truth_for_later_runs_of_the_same_question_and_identity(
    settings: Settings, engine: sa.Engine
) -> None:
    a = copy_run(settings, "ra", 4)
    b = copy_run(settings, "rb", 4)
    token = _queue(engine, "ra")
    _give(engine, token, "q-ra", 1, a[0], "correct")  # truth: its own result
    _give(engine, token, "q-ra", 2, a[1], "incorrect", expected='[["UA", 999]]')
    _give(engine, token, "q-ra", 3, a[2], "incorrect")  # no expected value: no truth
    with engine.connect() as conn:
        scores_b = accuracy_scores(conn, "rb")
    assert scores_b.automatic == {b[0]: True, b[1]: False} and scores_b.from_reviews == 2
    assert scores_b.reviewed == {}
    with engine.begin() as conn:
        reviews.create_queue(conn, "q-rb", reviews.QueueFilter(run="rb"), reviewers=["ana"])
    _give(engine, token, "q-rb", 1, b[0], "correct")
    _give(engine, token, "q-rb", 2, b[1], "correct")
    with engine.connect() as conn:
        scores_b = accuracy_scores(conn, "rb")
        scores_a = accuracy_scores(conn, "ra")
    assert scores_b.reviewed == {b[0]: True, b[1]: True} and scores_b.agreement == (1, 2)
    # run A is scored by B's verdicts, never by its own (its own says 999 for the second)
    assert scores_a.automatic == {a[0]: True, a[1]: True}
    assert scores_a.reviewed == {a[0]: True, a[1]: False, a[2]: False}


def test_cli_adds_reviewers_makes_queues_and_runs_show_reports_reviewed_accuracy(
    settings: Settings, engine: sa.Engine
) -> None:
    jobs = copy_run(settings, "r1", 3)
    env = {
        "CHATSCRIBE_DATABASE_URL": settings.database_url.get_secret_value(),
        "CHATSCRIBE_DATABASE_SCHEMA": settings.database_schema,
    }
    runner = CliRunner(env=env)
    added = runner.invoke(cli, ["review", "reviewers", "add", "ana"])
    assert added.exit_code == 0, added.output
    token = added.stdout.strip().splitlines()[0]
    made = runner.invoke(
        cli, ["review", "queue", "create", "triage", "--run", "r1", "--reviewer", "ana"]
    )
    assert made.exit_code == 0, made.output
    again = runner.invoke(
        cli, ["review", "queue", "create", "triage", "--run", "r1", "--reviewer", "ana"]
    )
    assert again.exit_code == 2 and "exists" in again.output
    _give(engine, token, "triage", 2, jobs[1], "incorrect", expected="7")
    shown = runner.invoke(cli, ["review", "queue", "show", "triage", "--json"])
    items = json.loads(shown.stdout)["items"]
    assert [(i["job_id"], i["verdict"]) for i in items] == [
        (jobs[0], None),
        (jobs[1], "incorrect"),
        (jobs[2], None),
    ]
    report = json.loads(runner.invoke(cli, ["runs", "show", "r1", "--json"]).stdout)
    assert report["accuracy"]["reviewed"] == {"hits": 0, "of": 1}
    assert runner.invoke(cli, ["review", "reviewers", "revoke", "ana"]).exit_code == 0
    assert runner.invoke(cli, ["review", "reviewers", "revoke", "ana"]).exit_code == 2


@pytest.mark.asyncio
async def test_console_writes_need_a_reviewer_token_and_reads_stay_open(
    settings: Settings, engine: sa.Engine
) -> None:
    jobs = copy_run(settings, "r1", 3)
    token = _queue(engine, "r1")
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    form = {"pos": "1", "job_id": jobs[0], "verdict": "correct"}
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        assert (await client.get("/review/q-r1?pos=2")).status_code == 200
        assert (await client.post("/review/q-r1/verdicts", data=form)).status_code == 401
        bad = await client.post("/review/login", data={"token": "nope"})
        assert bad.status_code == 401
        foreign = {"origin": "http://evil.example"}
        login = await client.post("/review/login", data={"token": token}, headers=foreign)
        assert login.status_code == 403
        login = await client.post("/review/login", data={"token": token})
        assert login.status_code == 303 and "HttpOnly" in login.headers["set-cookie"]
        refused = await client.post("/review/q-r1/verdicts", data=form, headers=foreign)
        assert refused.status_code == 403
        cross = {"sec-fetch-site": "cross-site", "origin": "null"}
        refused = await client.post("/review/q-r1/verdicts", data=form, headers=cross)
        assert refused.status_code == 403
        given = await client.post("/review/q-r1/verdicts", data=form)
        assert given.status_code == 303 and given.headers["location"] == "/review/q-r1?pos=2"
        wrong = await client.post("/review/q-r1/verdicts", data={**form, "verdict": "maybe"})
        assert wrong.status_code == 400
        api = (await client.get("/review/q-r1/items?first=1&limit=2")).json()
        assert [(i["job_id"], i["verdict"], i["reviewer"]) for i in api["items"]] == [
            (jobs[0], "correct", "ana"),
            (jobs[1], None, None),
        ]
        page = (await client.get("/review/q-r1?pos=1")).text
        assert 'id="reviewer">ana<' in page and "correct</strong> by ana" in page
        assert (await client.get("/review/q-r1?pos=4")).status_code == 404
        assert "1/1 (100.0%)" in (await client.get("/")).text
        run_page = (await client.get("/runs/r1")).text
        assert "reviewed accuracy: 1/1 (100.0%)" in run_page
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM review_verdicts")).scalar() == 1


@pytest.mark.asyncio
async def test_a_pairwise_queue_shows_both_runs_answers_and_takes_which_is_better(
    settings: Settings, engine: sa.Engine
) -> None:
    a = copy_run(settings, "ra", 2)
    b = copy_run(settings, "rb", 2)
    with engine.begin() as conn:
        token = reviews.add_reviewer(conn, "ana")
        flt = reviews.QueueFilter(run="ra")
        reviews.create_queue(conn, "pair", flt, reviewers=["ana"], compare_run="rb")
    transport = httpx.ASGITransport(app=create_app(settings))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        page = (await client.get("/review/pair?pos=2")).text
        assert "A · run ra" in page and "B · run rb" in page and b[1] in page
        assert 'data-key="a"' in page and 'data-key="1"' not in page
        form = {"pos": "2", "job_id": a[1], "verdict": "b_better"}
        given = await client.post(
            "/review/pair/verdicts", data=form, headers={"x-reviewer-token": token}
        )
        assert given.status_code == 303
        single = {**form, "verdict": "correct"}
        refused = await client.post(
            "/review/pair/verdicts", data=single, headers={"x-reviewer-token": token}
        )
        assert refused.status_code == 400
    with engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT job_id, pair_job_id, verdict FROM review_verdicts")
        ).one()
        assert tuple(row) == (a[1], b[1], "b_better")
        assert latest_verdicts(conn, a) == {}  # a pairwise verdict is not a verdict on one answer
