"""Real headless Chromium for tests that look at pages as a person does.

The same flags and ``--dump-dom`` approach as the embed page's tests
(``tests/integration/chat_api/test_embed.py``); Chromium comes from Debian's packages
(``ops/chromium.sh install``). A missing browser fails, it never skips.

* :func:`open_page`: the document once the page's scripts settled, and every message the
  page wrote to its console (``console.*`` calls, uncaught errors, content-security-policy
  refusals), from Chromium's ``--enable-logging=stderr`` lines tagged ``CONSOLE``.
* :func:`screenshot`: a PNG of the page at a given window size.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

BROWSER_TIMEOUT_S = 120.0
VIRTUAL_TIME_BUDGET_MS = 20_000
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)
_CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]? ?(.*)$", re.MULTILINE)


def chromium_path() -> str:
    """Returns: the browser's path. Raises AssertionError when it is not installed."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path is not None, "chromium is missing: run `ops/chromium.sh install` (make test does)"
    return path


@dataclass(frozen=True)
class Page:
    """A page as Chromium left it: its document and its console messages."""

    dom: str
    console: list[str]

    @property
    def status(self) -> str:
        """The ``data-status`` of ``<body>`` (``rendered`` once every chart is drawn)."""
        found = re.search(r'<body[^>]*data-status="([^"]+)"', self.dom)
        assert found is not None, self.dom[:2000]
        return found.group(1)


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S, check=False
    )


def open_page(url: str, profile: Path, *, budget_ms: int = VIRTUAL_TIME_BUDGET_MS) -> Page:
    """Opens ``url`` in a fresh profile and returns its document and console messages.

    The document is taken once ``budget_ms`` of virtual time passed (scripts settled; a page that
    refreshes itself sooner is shown refreshed).
    """
    args = [
        chromium_path(),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        f"--virtual-time-budget={budget_ms}",
        "--dump-dom",
        url,
    ]
    done = _run(args)
    assert done.returncode == 0, done.stderr[-2000:]
    return Page(done.stdout, _CONSOLE.findall(done.stderr))


def screenshot(url: str, path: Path, profile: Path, *, size: str = "1400,1000") -> Path:
    """Saves a PNG of ``url`` at ``size`` (``"width,height"``) to ``path``; returns it."""
    args = [
        chromium_path(),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={size}",
        f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}",
        f"--screenshot={path}",
        url,
    ]
    done = _run(args)
    assert done.returncode == 0 and path.is_file(), done.stderr[-2000:]
    return path
