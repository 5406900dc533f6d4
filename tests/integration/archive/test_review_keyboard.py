"""A reviewer works through a 50-conversation queue from the keyboard alone (issue 26 target).

Real Chromium (Debian's, driven by Playwright over the DevTools protocol) against the real
console under uvicorn on a loopback port, over a migrated schema of the real PostgreSQL holding
a run of 50 jobs (``review_support.copy_run``). The reviewer signs in with a token, then only
presses keys: a verdict key on each of the 50 positions (each moves to the next), a comment, an
expected value and labels typed on some, ``k`` back and a changed verdict. Screenshots go to
``tmp_path`` (and ``$CHATSCRIBE_SCREENSHOT_DIR`` when set, e.g. ``docs/console``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from playwright.sync_api import Page, sync_playwright

from pipeline.archive import reviews
from pipeline.archive.chain import verify
from pipeline.console.app import create_app
from pipeline.settings import Settings
from tests.browser_support import chromium_path
from tests.integration.archive.archive_stack import serve_in_thread
from tests.integration.archive.review_support import copy_run

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(180),
    pytest.mark.usefixtures("archive_schema"),
]

JOBS = 50
KEYS = {"1": "correct", "2": "incorrect", "3": "needs_follow_up", "4": "not_applicable"}


@pytest.fixture
def console(settings: Settings) -> Iterator[str]:
    with serve_in_thread(create_app(settings)) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def page() -> Iterator[Page]:
    with sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=chromium_path(),
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(20_000)
            yield page
        finally:
            browser.close()


def _shot(page: Page, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    keep = os.environ.get("CHATSCRIBE_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / f"{name}.png")


def _type_into(page: Page, key: str, text: str) -> None:
    """Focuses a field with its key, types, leaves it with Escape."""
    page.keyboard.press(key)
    page.keyboard.type(text)
    page.keyboard.press("Escape")


def _verdict(n: int) -> str:
    return "2" if n % 7 == 0 else "3" if n % 11 == 0 else "1"


def test_a_reviewer_works_through_fifty_conversations_by_keyboard(
    settings: Settings, engine: sa.Engine, console: str, page: Page, tmp_path: Path
) -> None:
    jobs = copy_run(settings, "kb", JOBS)
    with engine.begin() as conn:
        token = reviews.add_reviewer(conn, "ana")
        reviews.create_queue(conn, "triage", reviews.QueueFilter(run="kb"), reviewers=["ana"])
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: problems.append(str(e)))

    page.goto(f"{console}/review")
    page.fill("#token", token)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.endswith("/review"), (page.url, page.content()[:3000])
    page.wait_for_selector("#reviewer")
    _shot(page, tmp_path, "review-queues")
    page.goto(f"{console}/review/triage")
    page.wait_for_selector("body[data-keys=ready]")
    _shot(page, tmp_path, "review")
    for n in range(1, JOBS + 1):
        assert page.inner_text("#position") == f"{n} of {JOBS}"
        if n == 7:
            _type_into(page, "c", "counts the wrong carrier")
            _type_into(page, "x", '[["UA", 1234]]')
            _type_into(page, "l", "wrong-filter, sql")
        with page.expect_navigation():
            page.keyboard.press(_verdict(n))
        page.wait_for_selector("body[data-keys=ready]")
    assert page.inner_text("#position") == f"{JOBS} of {JOBS}" and page.is_visible("#done")
    with page.expect_navigation():
        page.keyboard.press("k")
    assert page.inner_text("#position") == f"{JOBS - 1} of {JOBS}"
    with page.expect_navigation():
        page.keyboard.press("4")  # changes position 49's verdict, moves to 50
    with page.expect_navigation():
        page.keyboard.press("ArrowLeft")
    assert "superseded" in page.inner_text(".history")
    _shot(page, tmp_path, "review-changed")
    assert problems == []

    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT job_id, verdict, comment, expected, labels, supersedes FROM"
                    " review_verdicts ORDER BY seq")
        ).all()  # fmt: skip
        report = verify(conn)
    assert [r.job_id for r in rows] == [*jobs, jobs[48]]
    assert [r.verdict for r in rows[:JOBS]] == [KEYS[_verdict(n)] for n in range(1, JOBS + 1)]
    seventh = rows[6]
    assert (seventh.comment, seventh.expected) == (
        "counts the wrong carrier",
        {"rows": [["UA", 1234]]},
    )
    assert seventh.labels == ["sql", "wrong-filter"]
    assert (rows[-1].verdict, rows[-1].supersedes) == ("not_applicable", 49)
    assert report.verdicts == JOBS + 1
    assert not [p for p in report.problems if p.kind.startswith("verdict")]
