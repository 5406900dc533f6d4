"""The console under hostile parameters, a slow search and a questions-file bomb.

A fresh schema per test holds one run of one archived job (written by the real
:class:`~pipeline.archive.writer.ArchiveWriter`); the console serves it under uvicorn on a
loopback port.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from models.records import JobEvent
from pipeline.archive.runs import record_run
from pipeline.archive.writer import ArchiveWriter
from pipeline.console import pages
from pipeline.console.app import create_app
from pipeline.settings import Settings
from tests.integration.archive.archive_records import T0, envelopes, opening_events, raw
from tests.integration.archive.archive_stack import serve_in_thread

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("archive_schema"),
]

RUN_ID = "r1"
ALIAS_BOMB = """\
name: bomb
personas: [{name: p, sessionSettings: {externalId: p-1}}]
questions:
  - text: q
    expected:
      "*":
        rows: &j [*i, *i, *i, *i, *i, *i, *i, *i, *i]
"""
_ANCHORS = "abcdefghi"
_LEVELS = "".join(
    f"x{n}: &{_ANCHORS[n + 1]} [{', '.join(['*' + _ANCHORS[n]] * 9)}]\n" for n in range(8)
)


def _bomb(path: Path) -> Path:
    """Writes a questions file whose expected rows expand to 9**9 cells (YAML aliases)."""
    path.write_text("x: &a [1]\n" + _LEVELS + ALIAS_BOMB)
    return path


@pytest.fixture
def archived_job(engine: sa.Engine, tmp_path: Path) -> str:
    """One completed job of run ``r1`` (the run's source file expects nothing)."""
    job_id = str(uuid.uuid4())
    lines = [
        raw(id="__cutoff__", role="assistant", sort=0, state={"chatId": "c1"}),
        raw(id="u1", role="user", content="How many flights?", sort=1),
        raw(id="f1", role="assistant", content="42 flights.", graphPath=["final"], sort=2),
    ]
    writer = ArchiveWriter(engine)
    done = JobEvent(
        job_id=job_id, run_id=RUN_ID, kind="completed", attempt=1, line_count=len(lines), at=T0
    )
    writer.write_batch(envelopes(job_id, lines), [*opening_events(job_id), done])
    plain = tmp_path / "questions.yaml"
    plain.write_text("personas: [{name: p, sessionSettings: {externalId: p-1}}]\n")
    record_run(
        engine,
        run_id=RUN_ID,
        name="plain",
        source_file=str(plain),
        chat_url=None,
        job_count=1,
        created_by="t",
        options={},
    )
    return job_id


@pytest.fixture
def console(settings: Settings) -> Iterator[str]:
    with serve_in_thread(create_app(settings)) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    "path",
    [
        f"/runs/{RUN_ID}?offset={10**20}",
        f"/runs/{RUN_ID}?offset=-5",
        f"/runs/{RUN_ID}?offset=ten",
        f"/runs/{RUN_ID}?sort=nope",
        f"/runs/{RUN_ID}?status=a%00b",
        f"/runs/{RUN_ID}?persona={'p' * 500}",
        "/runs/r%001",
        "/jobs/j%001",
        f"/jobs/JOB/ndjson?attempt={10**20}",
        "/jobs/JOB/ndjson?attempt=0",
        "/diff?a=r%001&b=r1",
        f"/audit?offset={10**20}",
        "/audit?since=yesterday",
        "/audit?user=a%00b",
        "/audit?format=xml",
        "/search?q=" + "+".join(["delay"] * 200),
        "/search?q=a%00b",
    ],
)
def test_a_bad_parameter_on_any_page_is_a_400_naming_it(
    console: str, archived_job: str, path: str
) -> None:
    answered = httpx.get(console + path.replace("JOB", archived_job), timeout=30)
    assert answered.status_code == 400, answered.text[:500]
    assert "parameter" in answered.text and "Bad request" in answered.text


@pytest.mark.parametrize(
    "sort", ["submitted", "duration", "status", "persona", "question", "lines"]
)
def test_every_sort_the_run_page_offers_answers(console: str, archived_job: str, sort: str) -> None:
    answered = httpx.get(f"{console}/runs/{RUN_ID}?sort={sort}&desc=1", timeout=30)
    assert answered.status_code == 200 and f"/jobs/{archived_job}" in answered.text


def test_the_runs_page_never_parses_a_questions_file(
    console: str,
    archived_job: str,
    engine: sa.Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The finished run's source file is an alias bomb; the stand-in parser refuses to run, so
    # a page that parsed it fails instead of expanding 9**9 cells.
    def parse(path: Path) -> None:
        raise AssertionError(f"the Runs page parsed {path}")

    monkeypatch.setattr(pages, "load_questions", parse, raising=False)
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE runs SET source_file = :f"), {"f": str(_bomb(tmp_path / "bomb.yaml"))}
        )
    answered = httpx.get(console + "/", timeout=60)
    assert answered.status_code == 200, answered.text[:500]
    assert f'href="/runs/{RUN_ID}"' in answered.text and "bomb.yaml" in answered.text


def test_a_search_waiting_on_the_archive_does_not_stall_other_pages(
    console: str, archived_job: str, engine: sa.Engine
) -> None:
    # The test holds an exclusive lock on answers: the search's query waits for it in PostgreSQL.
    # While it waits, another request is answered; then the lock goes and the search ends.
    with engine.connect() as holder, ThreadPoolExecutor(1) as pool:
        holder.execute(sa.text("LOCK TABLE answers IN ACCESS EXCLUSIVE MODE"))
        searching = pool.submit(httpx.get, f"{console}/search?q=count", timeout=60)
        _wait_for_lock_waiter(engine)
        assert httpx.get(console + "/healthz", timeout=30).text == "ok"
        assert f'href="/runs/{RUN_ID}"' in httpx.get(console + "/", timeout=30).text
        assert not searching.done()
        holder.rollback()
        found = searching.result(timeout=60)
    assert found.status_code == 200 and f"/jobs/{archived_job}" in found.text


def _wait_for_lock_waiter(engine: sa.Engine) -> None:
    """Returns once a search query waits for a lock (the module's timeout bounds the wait)."""
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND query LIKE '%websearch_to_tsquery%'"
    )
    with engine.connect() as conn:
        while not conn.execute(query).scalar_one():
            conn.rollback()
            time.sleep(0.05)
