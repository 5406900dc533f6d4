"""The archive as a product, on runs made through the real pipeline (fixtures: conftest.py).

Order matters at the end of the module: tampering and retention change archived rows, so they
run last, on the hosted transcripts' jobs (tampering first: retention deletes their content).
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from jsonschema import Draft202012Validator
from typer.testing import CliRunner, Result

from models import schemas, wire
from models.records import ChatJob
from pipeline.cli.app import app as cli_app
from pipeline.console.app import create_app as create_console
from pipeline.kafka.clients import create_consumer
from pipeline.replay.server import create_app
from pipeline.runs.accuracy import accuracy_line, run_accuracy, run_scores_of
from pipeline.runs.rerun import rerun
from pipeline.runs.runner import RunOutcome
from pipeline.runs.submit import submit_jobs
from tests.integration.archive.archive_stack import (
    API_KEY,
    DELAY,
    HOSTED_IDENTITY,
    MARCH,
    ORIGINS,
    ArchiveStack,
    hosted_transcript,
    run_cli,
    scripted_app,
    serve_in_thread,
    wait_finished,
)
from tests.stack_support import ROOT, chat_url

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _job(outcome: RunOutcome, persona: str, question: str) -> str:
    (job,) = [r for r in outcome.results if r.persona == persona and r.question == question]
    return job.job_id


@pytest.mark.parametrize(
    "name",
    ["cube_tools", "older_sql_payload", "no_final", "unmappable", "aborted", "out_of_order"],
)
def test_replay_writes_the_stream_byte_for_byte_as_received(
    stack: ArchiveStack, hosted_jobs: dict[str, str], name: str
) -> None:
    done = run_cli(stack.env, "replay", hosted_jobs[name])
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == hosted_transcript(name)


def test_replay_sorted_orders_lines_by_sort(
    stack: ArchiveStack, hosted_jobs: dict[str, str]
) -> None:
    done = run_cli(stack.env, "replay", hosted_jobs["out_of_order"], "--sorted")
    ids = [json.loads(line).get("id") for line in done.stdout.splitlines()]
    assert ids == [wire.ID_CUTOFF, "u1", "a1", "f1", wire.ID_USAGE]
    unknown = run_cli(stack.env, "replay", "no-such-job")
    assert unknown.returncode == 2 and b"not in the archive" in unknown.stderr


def test_hosted_oddities_normalise_through_the_real_sink(
    stack: ArchiveStack, hosted_jobs: dict[str, str]
) -> None:
    answers = {
        row.job_id: row
        for row in stack.query(
            "SELECT job_id, source, content, stream_errors FROM {s}.answers"
            " WHERE job_id = ANY(:ids)",
            ids=list(hosted_jobs.values()),
        )
    }
    assert answers[hosted_jobs["no_final"]].source == "fallback"
    assert answers[hosted_jobs["cube_tools"]].content == "Most orders are completed (245)."
    assert answers[hosted_jobs["error_line"]].stream_errors == [
        "Rate limit exceeded for model gpt-x"
    ]
    assert answers[hosted_jobs["suspended"]].source == "none"
    (query,) = stack.query(
        "SELECT tool_name, rows, result_schema, views FROM {s}.sql_queries WHERE job_id = :j",
        j=hosted_jobs["cube_tools"],
    )
    assert query.tool_name == "cubeSqlApi" and query.rows[0] == ["completed", "245"]
    assert query.views == ["orders_view"]
    (failed,) = stack.query(
        "SELECT name, error #>> '{{}}' AS error FROM {s}.tool_calls WHERE job_id = :j",
        j=hosted_jobs["tool_error"],
    )
    assert failed.name == "cubeSqlApiWithChart" and "statuz" in failed.error
    raw = stack.query(
        "SELECT line_no, raw, parse_error FROM {s}.stream_lines WHERE job_id = :j ORDER BY line_no",
        j=hosted_jobs["unmappable"],
    )
    assert bytes(raw[4].raw) == b'{"id":"a1","role":"assistant","content":"caf\xe9 bytes"}'
    assert "invalid UTF-8" in raw[4].parse_error


def test_replay_server_serves_the_archived_stream_through_the_chat_api_protocol(
    stack: ArchiveStack, run_a: RunOutcome
) -> None:
    job_id = _job(run_a, "jfk-ops", MARCH)
    recorded = run_cli(stack.env, "replay", job_id).stdout
    app = create_app(stack.settings, speed=0, api_keys=[API_KEY], run_id=run_a.run_id)
    with serve_in_thread(app) as port:
        url = f"http://127.0.0.1:{port}" + wire.CHAT_PATH_TEMPLATE.format(
            cloud_region="local", account_name="demo", agent_id="1"
        )
        auth = {"Authorization": f"Api-Key {API_KEY}"}
        jfk = {"externalId": "jfk-ops-1", "userAttributes": [{"name": "origin", "value": "JFK"}]}
        body = {"input": MARCH, "sessionSettings": jfk}
        with httpx.stream("POST", url, json=body, headers=auth, timeout=30) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("application/json")
            replayed = b"".join(response.iter_bytes())
        assert replayed == recorded
        other = {"input": MARCH, "sessionSettings": {"externalId": "someone-else"}}
        assert httpx.post(url, json=other, headers=auth).status_code == 404
        unscoped = {"input": MARCH, "sessionSettings": {"externalId": "jfk-ops-1"}}
        assert httpx.post(url, json=unscoped, headers=auth).status_code == 404
        assert (
            httpx.post(url, json=body, headers={"Authorization": "Api-Key nope"}).status_code == 401
        )


def test_replay_server_keeps_recorded_gaps_until_aborted(
    stack: ArchiveStack, hosted_jobs: dict[str, str]
) -> None:
    # Recorded gaps of ~10 ms at speed 0.0001 become pauses of many seconds: the replay is
    # still paused after its first line when the abort arrives, and ends with __aborted__.
    app = create_app(stack.settings, speed=0.0001, api_keys=[API_KEY])
    with serve_in_thread(app) as port:
        base = f"http://127.0.0.1:{port}" + wire.CHAT_PATH_TEMPLATE.format(
            cloud_region="t", account_name="acme", agent_id="7"
        )
        auth = {"Authorization": f"Api-Key {API_KEY}"}
        body = {"input": "cube_tools", "sessionSettings": {"externalId": HOSTED_IDENTITY}}
        with httpx.stream("POST", base, json=body, headers=auth, timeout=60) as response:
            lines = response.iter_lines()
            first = json.loads(next(lines))
            assert first["id"] == wire.ID_CUTOFF
            abort = {
                "chatId": first["state"]["chatId"],
                "sessionSettings": {"externalId": HOSTED_IDENTITY},
            }
            assert httpx.post(base + wire.ABORT_SUFFIX, json=abort, headers=auth).status_code == 204
            rest = [json.loads(line) for line in lines]
        assert [line["id"] for line in rest] == [wire.ID_ABORTED]
        unknown = httpx.post(base + wire.ABORT_SUFFIX, json={"chatId": "nope"}, headers=auth)
        assert unknown.status_code == 404


def test_rerun_against_the_replay_server_links_the_run_and_diff_finds_no_change(
    stack: ArchiveStack, run_a: RunOutcome
) -> None:
    app = create_app(stack.settings, speed=0, api_keys=[API_KEY], run_id=run_a.run_id)
    with serve_in_thread(app) as port:
        url = f"http://127.0.0.1:{port}" + wire.CHAT_PATH_TEMPLATE.format(
            cloud_region="local", account_name="demo", agent_id="1"
        )
        outcome = asyncio.run(
            rerun(stack.settings, run_a.run_id, chat_url=url, check_alive=stack.assert_running)
        )
    assert outcome.finished and {r.status for r in outcome.results} == {"completed"}
    (run,) = stack.query("SELECT rerun_of FROM {s}.runs WHERE run_id = :r", r=outcome.run_id)
    assert run.rerun_of == run_a.run_id
    identities = sorted((r.question, r.identity) for r in outcome.results)
    assert identities == sorted((r.question, r.identity) for r in run_a.results)
    done = run_cli(stack.env, "diff", run_a.run_id, outcome.run_id, "--json")
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    summary = json.loads(done.stdout)["summary"]
    assert summary == {"same": 5, "changed": 0, "new": 0, "missing": 0, "regressed": 0}


@pytest.fixture(scope="module")
def changed_run(stack: ArchiveStack, run_a: RunOutcome) -> str:
    """The run asked again through the CLI against the Chat API with the changed model."""
    changed_url = stack.chat_urls["chat-api-changed"]
    done = run_cli(stack.env, "rerun", run_a.run_id, "--chat-url", changed_url, "--json")
    assert done.returncode == 0, done.stderr.decode()
    results = [json.loads(line) for line in done.stdout.splitlines()]
    (run_id,) = {r["run_id"] for r in results}
    return str(run_id)


def test_diff_against_a_changed_data_model_regresses_and_exits_non_zero(
    stack: ArchiveStack, run_a: RunOutcome, changed_run: str
) -> None:
    done = run_cli(stack.env, "diff", run_a.run_id, changed_run, "--json")
    assert done.returncode == 1, done.stderr.decode()
    doc = json.loads(done.stdout)
    assert doc["summary"]["same"] == 3 and doc["summary"]["changed"] == 2
    changed = [c for c in doc["cases"] if c["state"] == "changed"]
    assert {c["question"] for c in changed} == {DELAY}
    assert all(c["result_changed"] and c["regressed"] and not c["sql_changed"] for c in changed)
    text = run_cli(stack.env, "diff", run_a.run_id, changed_run)
    assert text.returncode == 1 and b"regressed" in text.stdout


def test_expected_results_give_the_execution_accuracy(
    stack: ArchiveStack, run_a: RunOutcome, questions_file: Any
) -> None:
    scores = run_accuracy(stack.settings, run_a.run_id, questions_file)
    assert scores == {_job(run_a, "analyst", MARCH): True, _job(run_a, "jfk-ops", MARCH): True}
    assert accuracy_line(scores) == "execution accuracy: 2/2 (100.0%)"


STEADY, ALTERNATING, WRONG = "steady", "alternating", "wrong"


@pytest.fixture(scope="module")
def scripted_url() -> Iterator[str]:
    """A scripted agent: ``steady`` answers 1, ``alternating`` 1 then 2 then 1..., ``wrong`` 0."""
    script = {STEADY: lambda n: 1, ALTERNATING: lambda n: 1 + n % 2, WRONG: lambda n: 0}
    with serve_in_thread(scripted_app(script)) as port:
        yield chat_url(port, account="scripted")


def _cli(stack: ArchiveStack, *args: str) -> Result:
    """Runs ``chatscribe ARGS`` in this process (no interpreter start) with the stack's env."""
    return CliRunner().invoke(cli_app, list(args), env=stack.env)


def _scripted_questions(path: Path, url: str, questions: list[str], repeat: int) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "name": "scripted",
                "chatUrl": url,
                "repeat": repeat,
                "personas": [{"name": "analyst", "sessionSettings": {"externalId": "scripted-1"}}],
                "questions": [{"text": q, "expected": {"*": {"rows": [[1]]}}} for q in questions],
            }
        )
    )
    return path


def test_a_run_repeated_5_times_reports_pass_hat_5_and_flags_the_alternating_case(
    stack: ArchiveStack, scripted_url: str, tmp_path: Path
) -> None:
    path = _scripted_questions(tmp_path / "q.yaml", scripted_url, [STEADY, ALTERNATING], 5)
    run = stack.run_questions(path, timeout_s=120)
    assert len(run.results) == 10 and {r.status for r in run.results} == {"completed"}
    scores = run_scores_of(stack.settings, run.run_id, path)
    by_question = {case.question: case for case in scores.cases}
    assert (by_question[STEADY].right, by_question[STEADY].runs) == (5, 5)
    assert (by_question[ALTERNATING].right, by_question[ALTERNATING].runs) == (3, 5)
    assert [c.question for c in scores.flaky] == [ALTERNATING]
    assert scores.k == 5 and scores.pass_hat_k == 0.5
    assert scores.partial_credit == pytest.approx(0.8)  # 2 of 10 jobs have 0 cells right
    shown = _cli(stack, "runs", "show", run.run_id, "--json")
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.stdout)["scores"]
    assert doc["pass^k"] == 0.5 and doc["k"] == 5 and doc["flaky_cases"] == 1
    text = _cli(stack, "runs", "show", run.run_id).stdout
    assert "pass^5 0.500 (1/2 cases right every run), 1 flaky" in text
    assert "flaky: 'alternating' as analyst: 3/5 right" in text
    with serve_in_thread(create_console(stack.settings)) as port:
        page = httpx.get(f"http://127.0.0.1:{port}/runs/{run.run_id}").text
    assert "8/10 (80.0%)" in page and "1 flaky" in page
    same = _cli(stack, "diff", run.run_id, run.run_id, "--json")
    assert same.exit_code == 0, same.output
    compared = json.loads(same.stdout)
    assert compared["by"] == "pass_rate" and not compared["regressed"]
    rates = {c["question"]: c["b"]["pass_rate"] for c in compared["cases"]}
    assert rates == {STEADY: 1.0, ALTERNATING: 0.6}
    audit = json.loads(_cli(stack, "audit", "--user", "scripted-1", "--format", "json").stdout)
    mine = [e for e in audit["entries"] if e["run_id"] == run.run_id]
    assert len(mine) == 10
    assert {(e["question"], e["score"]["flaky"], e["score"]["case_runs"]) for e in mine} == {
        (STEADY, False, 5),
        (ALTERNATING, True, 5),
    }


def test_a_thread_scores_every_turn_and_names_its_first_wrong_turn(
    stack: ArchiveStack, scripted_url: str, tmp_path: Path
) -> None:
    path = _scripted_questions(tmp_path / "q.yaml", scripted_url, [STEADY, WRONG], 1)
    run_id, chat_id = f"thread-{uuid.uuid4().hex[:8]}", f"c-{uuid.uuid4()}"
    start = datetime.now(UTC)
    jobs = [
        ChatJob.model_validate(
            {
                "job_id": str(uuid.uuid4()),
                "run_id": run_id,
                "question": question,
                "persona": "analyst",
                "chat_id": chat_id,
                "session_settings": {"externalId": "scripted-1"},
                "chat_url": scripted_url,
                "submitted_at": start + timedelta(seconds=turn),
            }
        )
        for turn, question in enumerate([STEADY, WRONG, STEADY])
    ]
    asyncio.run(submit_jobs(stack.settings, jobs))
    wait_finished(stack, [job.job_id for job in jobs])
    scores = run_scores_of(stack.settings, run_id, path)
    (thread,) = scores.threads
    assert thread.chat_id == chat_id and thread.outcomes == (True, False, True)
    assert not thread.all_right and thread.first_wrong_turn == 2
    assert "  thread " + chat_id + ": first wrong turn 2 of 3" in scores.lines()


def test_audit_reports_identity_views_members_and_rows(
    stack: ArchiveStack, run_a: RunOutcome, hosted_jobs: dict[str, str]
) -> None:
    done = run_cli(stack.env, "audit", "--user", "jfk-ops-1", "--format", "json")
    assert done.returncode == 0, done.stderr.decode()
    entries = json.loads(done.stdout)["entries"]
    assert {e["question"] for e in entries} >= {MARCH, DELAY}
    assert all(e["user_attributes"] == {"origin": "JFK"} for e in entries)
    march = next(e for e in entries if e["question"] == MARCH and e["run_id"] == run_a.run_id)
    assert march["views"] == ["flights"] and "flights.month" in march["members"]
    assert march["rows_returned"] == 1
    csv_text = run_cli(stack.env, "audit", "--view", "orders_view", "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(csv_text.decode())))
    assert {r["identity"] for r in rows} == {f"external:{HOSTED_IDENTITY}"}
    assert any("statuz" in r["tool_errors"] for r in rows)
    hosted = json.loads(
        run_cli(stack.env, "audit", "--user", HOSTED_IDENTITY, "--format", "json").stdout
    )
    assert any(e["aborted"] for e in hosted["entries"])
    page = run_cli(stack.env, "audit", "--user", "analyst-1", "--format", "html").stdout.decode()
    assert "vegaEmbed('#chart-" in page and ORIGINS in page and "analyst-1" in page


def test_dashboard_views_answer_on_a_real_run(stack: ArchiveStack, run_a: RunOutcome) -> None:
    usage = stack.query("SELECT identity, view, jobs FROM {s}.dash_usage_daily")
    assert ("external:analyst-1", "flights") in {(r.identity, r.view) for r in usage}
    (latency,) = stack.query(
        "SELECT sum(jobs) AS jobs, max(first_line_p50_s) AS p50, max(final_answer_p90_s) AS p90"
        " FROM {s}.dash_latency_daily"
    )
    assert latency.jobs >= 5 and latency.p50 is not None and latency.p90 >= latency.p50
    outcomes = stack.query(
        "SELECT sum(completed) AS c, sum(jobs) AS n FROM {s}.dash_outcomes_daily"
    )
    assert outcomes[0].c >= 5
    top = stack.query("SELECT question, asked FROM {s}.dash_top_questions ORDER BY asked DESC")
    assert {r.question for r in top} >= {MARCH, DELAY, ORIGINS}
    errors = stack.query("SELECT tool_name, error FROM {s}.dash_tool_errors")
    assert all(r.error for r in errors)
    counts = stack.query(
        "SELECT view, max_total_rows FROM {s}.dash_row_counts WHERE view = 'flights'"
    )
    assert counts and max(r.max_total_rows for r in counts) == 16
    # Every Grafana panel's SQL runs against the views (macros replaced as Grafana would).
    dashboard = json.loads((ROOT / "ops" / "grafana" / "archive.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            sql = target["rawSql"].replace("$__timeFilter(day)", "true")
            rows = stack.query(sql.replace('"$schema"', "{s}"))
            assert rows, panel["title"]


async def test_final_answers_are_published_to_the_answers_topic(
    stack: ArchiveStack, run_a: RunOutcome
) -> None:
    consumer = create_consumer(
        stack.settings, stack.settings.topic(wire.TOPIC_ANSWERS), group_id=None
    )
    await consumer.start()
    wanted = {r.job_id for r in run_a.results}
    found: dict[str, dict[str, Any]] = {}
    try:
        for _ in range(60):
            batches = await consumer.getmany(timeout_ms=500)
            for record in (r for part in batches.values() for r in part):
                value = json.loads(record.value)
                if value["job_id"] in wanted:
                    found[value["job_id"]] = value
            if set(found) == wanted:
                break
    finally:
        await consumer.stop()
    assert set(found) == wanted
    march = found[_job(run_a, "analyst", MARCH)]
    assert march["identity"] == "external:analyst-1" and march["question"] == MARCH
    assert march["answer_source"] == "final" and march["total_rows"] == 1
    assert "MEASURE" in march["sql"]
    (unpublished,) = stack.query(
        "SELECT count(*) AS n FROM {s}.answers a JOIN {s}.jobs j USING (job_id)"
        " WHERE j.run_id = :r AND a.published_at IS NULL",
        r=run_a.run_id,
    )
    assert unpublished.n == 0


async def _records_of_run(stack: ArchiveStack, topic: str, run_id: str) -> list[dict[str, Any]]:
    """Every record of ``run_id`` on ``topic`` so far, from the topic's beginning."""
    consumer = create_consumer(stack.settings, stack.settings.topic(topic), group_id=None)
    await consumer.start()
    found: list[dict[str, Any]] = []
    read = 0
    try:
        for _ in range(30):  # until a poll finds nothing after the topic's records
            batches = await consumer.getmany(timeout_ms=1000)
            if not batches and read:
                break
            values = [json.loads(r.value) for part in batches.values() for r in part]
            read += len(values)
            found += [v for v in values if v["run_id"] == run_id]
    finally:
        await consumer.stop()
    return found


async def test_every_record_the_pipeline_publishes_validates_against_its_schema(
    stack: ArchiveStack, run_a: RunOutcome
) -> None:
    for topic in (wire.TOPIC_REQUESTS, wire.TOPIC_JOB_EVENTS, wire.TOPIC_ANSWERS):
        shipped = schemas.by_name(topic).shipped()
        assert shipped is not None
        records = await _records_of_run(stack, topic, run_a.run_id)
        assert len(records) >= len(run_a.results), topic
        validator = Draft202012Validator(shipped)
        errors = [(r, e.message) for r in records for e in validator.iter_errors(r)]
        assert errors == [], topic


def test_verify_reports_rows_changed_after_they_were_written(
    stack: ArchiveStack, run_a: RunOutcome, hosted_jobs: dict[str, str]
) -> None:
    clean = run_cli(stack.env, "verify", "--run", run_a.run_id)
    assert clean.returncode == 0 and b"every chain and seal verifies" in clean.stdout
    job_id = hosted_jobs["older_sql_payload"]
    stack.execute(
        "UPDATE {s}.stream_lines SET raw = convert_to('{{\"id\":\"forged\"}}', 'UTF8')"
        " WHERE job_id = :j AND line_no = 2",
        j=job_id,
    )
    stack.execute(
        "UPDATE {s}.stream_lines SET received_at = received_at + interval '1 second'"
        " WHERE job_id = :j AND line_no = 4",
        j=job_id,
    )
    stack.execute("DELETE FROM {s}.stream_lines WHERE job_id = :j AND line_no = 6", j=job_id)
    tampered = run_cli(stack.env, "verify", "--job", job_id)
    assert tampered.returncode == 1
    report = tampered.stdout.decode()
    assert "raw_changed" in report and "chain_broken" in report and "missing" in report
    assert run_cli(stack.env, "verify", "--run", run_a.run_id).returncode == 0


def test_retention_deletes_expired_content_and_keeps_the_audit_trail(
    stack: ArchiveStack, hosted_jobs: dict[str, str], tmp_path: Any
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"rules:\n  - identity: 'external:{HOSTED_IDENTITY}'\n    afterDays: 30\n"
        "    action: delete\n  - afterDays: 3650\n    action: redact\n"
    )
    job_id = hosted_jobs["cube_tools"]
    now = run_cli(stack.env, "retention", "apply", "--policy", str(policy))
    assert now.returncode == 0 and b"deleted content of 0 jobs" in now.stderr
    later = run_cli(
        stack.env, "retention", "apply", "--policy", str(policy), "--now", "2099-01-01T00:00:00"
    )
    assert later.returncode == 0, later.stderr.decode()
    lines = stack.query(
        "SELECT raw, redaction, raw_sha256 FROM {s}.stream_lines WHERE job_id = :j", j=job_id
    )
    assert all(bytes(r.raw) == b"" and r.redaction == "deleted" and r.raw_sha256 for r in lines)
    (answer,) = stack.query("SELECT content, source FROM {s}.answers WHERE job_id = :j", j=job_id)
    assert answer.content is None and answer.source == "final"
    (query,) = stack.query(
        "SELECT rows, views, total_rows FROM {s}.sql_queries WHERE job_id = :j", j=job_id
    )
    assert query.rows is None and query.views == ["orders_view"] and query.total_rows == 3
    verified = run_cli(stack.env, "verify", "--job", job_id)
    assert verified.returncode == 0, verified.stdout.decode()
    assert f"{len(lines)} redacted" in verified.stdout.decode()
    audit = json.loads(
        run_cli(stack.env, "audit", "--view", "orders_view", "--format", "json").stdout
    )
    assert job_id in {e["job_id"] for e in audit["entries"]}


def test_unknown_run_is_a_clear_error(stack: ArchiveStack) -> None:
    done = run_cli(stack.env, "diff", str(uuid.uuid4()), str(uuid.uuid4()))
    assert done.returncode == 2 and b"has no jobs in the archive" in done.stderr
