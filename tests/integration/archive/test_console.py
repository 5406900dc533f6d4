"""``chatscribe console`` in real headless Chromium over a real archive.

The archive is filled by real runs through the module's stack (Chat API, worker, sink on Kafka
and PostgreSQL): the demo's questions (``examples/questions.yaml``), the archive-product
questions against our data model and against the changed one (for the diff), and one
conversation with hostile content (``<script>``, ``<img onerror>``, a ``vegaSpec`` that loads a
URL) streamed by a stand-in service. The console runs under uvicorn on a loopback port; each
page is opened in Chromium and checked for what a person sees, its console messages (none
expected: a CSP refusal or a script error would show there), and saved as a screenshot
(``tmp_path``; also copied to ``$CHATSCRIBE_SCREENSHOT_DIR`` when set, e.g. ``docs/console``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
import yaml
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from models import wire
from models.records import ChatJob
from pipeline.archive.console_queries import create_read_only_engine
from pipeline.console.app import create_app
from pipeline.runs.runner import RunOutcome, run_questions_file, submit_questions_file
from pipeline.runs.submit import submit_jobs
from tests.browser_support import Page, open_page, screenshot
from tests.integration.archive.archive_stack import (
    DELAY,
    ArchiveStack,
    run_cli,
    serve_in_thread,
    wait_finished,
)
from tests.stack_support import ROOT, chat_url

HOSTILE_QUESTION = "<script>document.title='owned'</script><img src=x onerror=alert(1)> delays?"
HOSTILE_ANSWER = (
    "Here: <img src=x onerror=\"document.title='owned'\"> <script>alert(1)</script>\n\n"
    "| Month | Flights |\n|---|---|\n| Jan | 27,004 |\n\n[click](javascript:alert(1))"
)
EVIL = "evil.example"
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # real runs first


def _hostile_transcript() -> bytes:
    spec = {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"url": f"https://{EVIL}/data.json"},
        "mark": {"type": "bar", "href": f"https://{EVIL}/go"},
        "encoding": {
            "x": {"field": "month", "type": "ordinal"},
            "y": {"field": "flights", "type": "quantitative"},
        },
    }
    result = {
        "sqlQuery": "SELECT month, MEASURE(count) AS flights FROM flights GROUP BY 1",
        "queryTitle": "<b>Flights</b> by month",
        "schema": [
            {"name": "month", "column_type": "Int64"},
            {"name": "flights", "column_type": "Int64"},
        ],
        "data": [["1", "27004"], ["2", "24951"], ["3", "28834"]],
        "totalRows": 3,
        "vegaSpec": json.dumps(spec),
    }
    call = {"name": "cubeSqlApi", "input": json.dumps({"sqlQuery": result["sqlQuery"]})}
    lines = [
        {"id": "__cutoff__", "role": "assistant", "sort": 0, "state": {"chatId": "c-hostile"}},
        {"id": "u1", "role": "user", "content": HOSTILE_QUESTION, "sort": 1},
        {
            "id": "t1",
            "role": "assistant",
            "graphPath": ["data_analyst_agent", "tools"],
            "isInProcess": False,
            "sort": 2,
            "toolCall": {**call, "result": json.dumps(result)},
        },
        {
            "id": "f1",
            "role": "assistant",
            "content": HOSTILE_ANSWER,
            "graphPath": ["final"],
            "isInProcess": False,
            "sort": 3,
        },
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _hostile_app(line_delay_s: float = 0.01) -> Starlette:
    async def chat(request: Request) -> Response:
        async def lines() -> AsyncIterator[bytes]:
            for line in _hostile_transcript().splitlines(keepends=True):
                yield line
                await asyncio.sleep(line_delay_s)

        return StreamingResponse(lines(), media_type="application/json")

    return Starlette(routes=[Route(wire.CHAT_PATH_TEMPLATE, chat, methods=["POST"])])


@pytest.fixture(scope="module")
def demo_run(stack: ArchiveStack) -> RunOutcome:
    """The demo's questions, run through the real stack."""
    return stack.run_questions(ROOT / "examples" / "questions.yaml", timeout_s=400)


@pytest.fixture(scope="module")
def changed_run(stack: ArchiveStack, questions_file: Path, run_a: RunOutcome) -> RunOutcome:
    """The archive-product questions again, against the Chat API with the changed model."""
    outcome = asyncio.run(
        run_questions_file(
            stack.settings,
            questions_file,
            chat_url=stack.chat_urls["chat-api-changed"],
            timeout_s=180,
            show_progress=False,
        )
    )
    assert outcome.finished
    return outcome


@pytest.fixture(scope="module")
def hostile_job(stack: ArchiveStack) -> str:
    """One conversation whose question, answer and chart spec attack the page."""
    with serve_in_thread(_hostile_app()) as port:
        job = ChatJob.model_validate(
            {
                "job_id": str(uuid.uuid4()),
                "run_id": f"hostile-{uuid.uuid4().hex[:6]}",
                "question": HOSTILE_QUESTION,
                "persona": "attacker",
                "session_settings": {"externalId": "mallory"},
                "chat_url": chat_url(port, account="evil"),
            }
        )
        asyncio.run(submit_jobs(stack.settings, [job]))
        wait_finished(stack, [job.job_id])
    return job.job_id


@pytest.fixture(scope="module")
def console(stack: ArchiveStack) -> Iterator[str]:
    """The console on a loopback port; yields its base URL."""
    with serve_in_thread(create_app(stack.settings)) as port:
        yield f"http://127.0.0.1:{port}"


def _look(url: str, tmp_path: Path, name: str) -> Page:
    """Opens the page, checks it settled without a console message, saves a screenshot."""
    page = open_page(url, tmp_path / f"{name}-profile")
    assert page.status == "rendered", (page.console, page.dom[-3000:])
    assert page.console == [], page.console
    shot = screenshot(url, tmp_path / f"{name}.png", tmp_path / f"{name}-shot")
    keep = os.environ.get("CHATSCRIBE_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / f"{name}.png")
    return page


def _job_id(stack: ArchiveStack, run_id: str, question: str, persona: str) -> str:
    rows = stack.query(
        "SELECT job_id FROM {s}.jobs WHERE run_id = :r AND question = :q AND persona = :p",
        r=run_id,
        q=question,
        p=persona,
    )
    return str(rows[0].job_id)


def _links(dom: str, prefix: str) -> set[str]:
    return set(re.findall(rf'href="({re.escape(prefix)}[^"?]+)"', dom))


def test_runs_page_lists_each_run_with_jobs_by_status_and_rerun_its_page_the_accuracy(
    stack: ArchiveStack, demo_run: RunOutcome, run_a: RunOutcome, console: str, tmp_path: Path
) -> None:
    page = _look(console + "/", tmp_path, "runs")
    for run in (demo_run, run_a):
        assert f'href="/runs/{run.run_id}"' in page.dom
        assert f"chatscribe rerun {run.run_id}" in page.dom
    assert "examples/questions.yaml" in page.dom
    completed = sum(r.status == "completed" for r in demo_run.results)
    assert f"completed {completed}" in page.dom
    run_page = open_page(f"{console}/runs/{run_a.run_id}", tmp_path / "run-a")
    assert "2/2 (100.0%)" in run_page.dom  # run_a: two jobs have expected results, both match


def test_a_running_run_refreshes_itself_with_a_progress_bar_until_done(
    stack: ArchiveStack, console: str, tmp_path: Path
) -> None:
    questions = tmp_path / "slow.yaml"
    body = {"name": "slow", "personas": [{"name": "p", "sessionSettings": {"externalId": "p-1"}}]}
    questions.write_text(yaml.safe_dump({**body, "questions": [{"text": "slow one"}]}))
    with serve_in_thread(_hostile_app(line_delay_s=2.0)) as port:
        url = chat_url(port, account="slow")
        run = asyncio.run(submit_questions_file(stack.settings, questions, chat_url=url))
        # a budget under the page's 3 s refresh: the page as first drawn
        page = open_page(f"{console}/runs/{run.run_id}", tmp_path / "running", budget_ms=1000)
        assert '<meta http-equiv="refresh" content="3">' in page.dom
        assert re.search(r'<progress max="1" value="0">', page.dom), page.dom[:3000]
        listing = open_page(console + "/", tmp_path / "listing", budget_ms=1000)
        assert '<meta http-equiv="refresh" content="3">' in listing.dom
        job_ids = [
            r.job_id
            for r in stack.query("SELECT job_id FROM {s}.jobs WHERE run_id = :r", r=run.run_id)
        ]
        wait_finished(stack, job_ids)
    done = open_page(f"{console}/runs/{run.run_id}", tmp_path / "done")
    assert 'http-equiv="refresh"' not in done.dom
    assert '<progress max="1" value="1">' in done.dom


def test_run_page_filters_by_persona_and_links_every_job_to_its_conversation(
    stack: ArchiveStack, demo_run: RunOutcome, console: str, tmp_path: Path
) -> None:
    page = _look(f"{console}/runs/{demo_run.run_id}", tmp_path, "run")
    jobs = {f"/jobs/{r.job_id}" for r in demo_run.results}
    shown = _links(page.dom, "/jobs/")
    assert shown and shown <= jobs
    assert len(shown) == min(len(jobs), 50)
    assert "Average arrival delay by carrier" in page.dom
    previews = re.findall(r'<tr class="job[^>]*>.*?</tr>', page.dom, re.DOTALL)
    assert previews and not [p for p in previews if "| " in p]  # answers as plain first sentences
    jfk = open_page(f"{console}/runs/{demo_run.run_id}?persona=jfk-ops", tmp_path / "jfk")
    expected = {f"/jobs/{r.job_id}" for r in demo_run.results if r.persona == "jfk-ops"}
    assert _links(jfk.dom, "/jobs/") == expected
    assert "analyst-1" not in jfk.dom.split('class="jobs"')[1]


def test_conversation_page_draws_the_chart_renders_the_answer_and_verifies_the_chain(
    stack: ArchiveStack, demo_run: RunOutcome, console: str, tmp_path: Path
) -> None:
    job_id = _job_id(stack, demo_run.run_id, "Monthly flight counts from EWR", "analyst")
    page = _look(f"{console}/jobs/{job_id}", tmp_path, "conversation")
    figure = re.search(r'<figure class="chart[^"]*"[^>]*>(.*?)</figure>', page.dom, re.DOTALL)
    assert figure is not None and "<svg" in figure.group(1)
    assert ">Jan<" in figure.group(1) and ">Dec<" in figure.group(1)  # months named on the axis
    answer = page.dom.split('class="final-answer')[1]
    assert "<table>" in answer and "| " not in answer  # the Markdown table is a table
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page.dom)
    assert cells and not [c for c in cells if re.search(r"\d\.\d{3,}", c)]  # no long decimals
    assert "verifies" in page.dom
    assert "analyst-1" in page.dom  # the identity that ran it
    assert 'class="sql"' in page.dom and "MEASURE" in page.dom
    assert f'href="/runs/{demo_run.run_id}"' in page.dom
    assert 'class="marker" data-message="__cutoff__"' in page.dom  # a point, not a message
    assert 'class="msg system"' not in page.dom


def test_raw_ndjson_download_is_the_bytes_of_chatscribe_replay(
    stack: ArchiveStack, demo_run: RunOutcome, console: str
) -> None:
    job_id = demo_run.results[0].job_id
    downloaded = httpx.get(f"{console}/jobs/{job_id}/ndjson", timeout=30)
    assert downloaded.status_code == 200
    replayed = run_cli(stack.env, "replay", job_id)
    assert replayed.returncode == 0, replayed.stderr.decode()
    assert downloaded.content == replayed.stdout


def test_diff_page_shows_regressions_first_with_changed_rows_marked(
    stack: ArchiveStack, run_a: RunOutcome, changed_run: RunOutcome, console: str, tmp_path: Path
) -> None:
    url = f"{console}/diff?a={run_a.run_id}&b={changed_run.run_id}"
    page = _look(url, tmp_path, "diff")
    cases = re.findall(r'<tr class="case ([^"]+)">\s*<td>([^<]+)<', page.dom)
    assert cases, page.dom[-2000:]
    regressed = [q for state, q in cases if "regressed-row" in state]
    assert regressed and set(regressed) == {DELAY}
    assert all("regressed-row" in s for s, _ in cases[: len(regressed)])  # regressions first
    assert '<tr class="row-changed">' in page.dom
    assert "20.115905511811025" not in page.dom and "20.12" in page.dom  # numbers formatted
    cli = run_cli(stack.env, "diff", run_a.run_id, changed_run.run_id, "--json")
    summary = json.loads(cli.stdout)["summary"]
    assert f"changed {summary['changed']}" in page.dom and f"same {summary['same']}" in page.dom


def test_audit_page_filters_by_user_and_exports_the_rows_of_chatscribe_audit(
    stack: ArchiveStack, demo_run: RunOutcome, console: str, tmp_path: Path
) -> None:
    page = _look(f"{console}/audit?user=jfk-ops-1", tmp_path, "audit")
    shown = _links(page.dom, "/jobs/")
    jfk = {r.job_id for r in demo_run.results if r.persona == "jfk-ops"}
    assert {f"/jobs/{j}" for j in jfk} <= shown
    assert "analyst-1" not in page.dom
    exported = httpx.get(f"{console}/audit?user=jfk-ops-1&format=csv", timeout=30).text
    cli = run_cli(stack.env, "audit", "--user", "jfk-ops-1", "--format", "csv")
    assert exported == cli.stdout.decode()
    doc = httpx.get(f"{console}/audit?user=jfk-ops-1&format=json", timeout=30).json()
    assert {e["job_id"] for e in doc["entries"]} >= jfk


def test_search_finds_questions_and_answers_by_their_words(
    stack: ArchiveStack, demo_run: RunOutcome, console: str, tmp_path: Path
) -> None:
    page = _look(f"{console}/search?q=carrier+delay", tmp_path, "search")
    wanted = {
        r.job_id for r in demo_run.results if r.question == "Average arrival delay by carrier"
    }
    assert {f"/jobs/{j}" for j in wanted} <= _links(page.dom, "/jobs/")
    assert "<mark>" in page.dom
    none = open_page(f"{console}/search?q=zeppelin", tmp_path / "none")
    assert "0 hit(s)" in none.dom


def test_hostile_questions_answers_and_chart_specs_stay_text(
    hostile_job: str, console: str, tmp_path: Path
) -> None:
    page = _look(f"{console}/jobs/{hostile_job}", tmp_path, "hostile")
    assert "<title>Job" in page.dom  # document.title was not rewritten by a script
    assert "owned" not in re.findall(r"<title>(.*?)</title>", page.dom)[0]
    assert "<script>document.title" not in page.dom and "<img" not in page.dom
    assert "&lt;script&gt;document.title='owned'&lt;/script&gt;" in page.dom
    assert 'href="javascript' not in page.dom
    assert EVIL not in page.dom  # every URL of the spec is gone
    figure = re.search(r'<figure class="chart[^"]*"[^>]*>(.*?)</figure>', page.dom, re.DOTALL)
    assert figure is not None and 'class="mark-rect' in figure.group(1)  # drawn from inline rows
    assert "&lt;b&gt;Flights&lt;/b&gt; by month" in page.dom
    hits = open_page(f"{console}/search?q=delays", tmp_path / "hits")
    assert f'href="/jobs/{hostile_job}"' in hits.dom
    assert "<script>document" not in hits.dom and "<img" not in hits.dom


def test_a_token_guards_every_page_and_a_link_sets_it_as_a_cookie(stack: ArchiveStack) -> None:
    settings = stack.settings.model_copy(update={"console_token": SecretStr("s3cret-token")})
    with serve_in_thread(create_app(settings)) as port:
        base = f"http://127.0.0.1:{port}"
        for path in ("/", "/audit?format=csv", "/static/console.js", "/search?q=x"):
            assert httpx.get(base + path, timeout=10).status_code == 401
        assert httpx.get(base + "/?token=wrong", timeout=10).status_code == 401
        with httpx.Client(base_url=base, timeout=10) as client:
            link = client.get("/audit?token=s3cret-token&user=x")
            assert link.status_code == 303 and link.headers["location"] == "/audit?user=x"
            assert "HttpOnly" in link.headers["set-cookie"]
            assert client.get("/audit?user=x").status_code == 200  # the cookie now
        bearer = {"Authorization": "Bearer s3cret-token"}
        assert httpx.get(base + "/", headers=bearer, timeout=10).status_code == 200


def test_the_console_engine_cannot_write(stack: ArchiveStack) -> None:
    engine = create_read_only_engine(stack.settings)
    try:
        with engine.connect() as conn, pytest.raises(sa.exc.DBAPIError, match="read-only"):
            conn.execute(sa.text(f'DELETE FROM "{stack.settings.database_schema}".jobs'))
    finally:
        engine.dispose()
    assert stack.query("SELECT count(*) AS n FROM {s}.jobs")[0].n > 0


def test_content_retention_deleted_stays_deleted_in_the_console(
    stack: ArchiveStack, hostile_job: str, console: str, tmp_path: Path
) -> None:
    # Runs last in this module: it deletes the hostile conversation's content.
    url = f"{console}/jobs/{hostile_job}"
    assert "27,004" in httpx.get(url, timeout=30).text
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "rules:\n  - identity: 'external:mallory'\n    afterDays: 0\n    action: delete\n"
    )
    done = run_cli(stack.env, "retention", "apply", "--policy", str(policy), "--now", "2099-01-01")
    assert done.returncode == 0, done.stderr.decode()
    page = _look(url, tmp_path, "retention")
    assert "27,004" not in page.dom and "Here:" not in page.dom
    assert "No answer stored." in page.dom
    assert "line(s) deleted" in page.dom
    assert page.dom.count("deleted by retention") >= 3  # the question, the tool call, the answer
    assert "Rows removed by retention (3 were returned)" in page.dom
    assert "verifies" in page.dom  # the chain of a deleted attempt still verifies
    assert (
        httpx.get(f"{url}/ndjson", timeout=30).content
        == run_cli(stack.env, "replay", hostile_job).stdout
    )
