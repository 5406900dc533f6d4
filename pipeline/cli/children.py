"""Child processes of the demo and the benchmarks: start, check, stop, with a log file each.

A child runs ``sys.executable -m <module> ...`` from the repository root, with its output in
``<log_dir>/<name>.log``. :meth:`Child.check` raises :class:`ChildError` with the end of the
log when the process has exited; :meth:`Child.stop` sends SIGTERM, then SIGKILL after a grace.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pipeline.errors import ChildError

logger = logging.getLogger(__name__)

ROOT: Final = Path(__file__).resolve().parents[2]
"""The repository root: children run from here (so ``-m pipeline.cli.app`` resolves)."""
STOP_TIMEOUT_S: Final = 20.0


@dataclass
class Child:
    """A running child process and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def tail(self, lines: int = 40) -> str:
        """Returns: the last ``lines`` lines of the log."""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def check(self) -> None:
        """Raises ChildError when the process has exited."""
        code = self.process.poll()
        if code is not None:
            raise ChildError(
                f"{self.name} exited with {code}; its log ends:\n{self.tail()}",
                name=self.name,
            )

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s`` seconds; safe to call twice."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            logger.warning("child did not stop, killing name=%s", self.name)
            self.process.kill()
            self.process.wait()


def start_child(
    name: str, module: str, *args: str, log_dir: Path, env: dict[str, str] | None = None
) -> Child:
    """Starts ``python -m module args`` from :data:`ROOT`, output to ``log_dir/name.log``.

    Args:
        name: The child's name (log file name, messages).
        module: The module to run (``pipeline.cli.app``, ``bench.synthetic_chat``).
        args: Its arguments.
        log_dir: Folder of the log file (created when missing; the log is overwritten).
        env: Variables added to this process's environment.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    logger.info("started name=%s pid=%d log=%s", name, process.pid, log_path)
    return Child(name, process, log_path)
