"""Batch runs.

Questions files, submitting jobs, waiting for a run, reruns, cancelling a run, execution accuracy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.runs import rerun
    from pipeline.runs.accuracy import accuracy_line, run_accuracy
    from pipeline.runs.batch import expand_jobs, load_questions
    from pipeline.runs.cancel import cancel_run
    from pipeline.runs.runner import (
        RunOutcome,
        run_questions_file,
        submit_questions_file,
        wait_for_run,
    )
    from pipeline.runs.submit import cancel_jobs, submit_jobs

__all__ = [
    "RunOutcome",
    "accuracy_line",
    "cancel_jobs",
    "cancel_run",
    "expand_jobs",
    "load_questions",
    "rerun",
    "run_accuracy",
    "run_questions_file",
    "submit_jobs",
    "submit_questions_file",
    "wait_for_run",
]

_EXPORTS: dict[str, str] = {
    "RunOutcome": "pipeline.runs.runner",
    "accuracy_line": "pipeline.runs.accuracy",
    "cancel_jobs": "pipeline.runs.submit",
    "cancel_run": "pipeline.runs.cancel",
    "expand_jobs": "pipeline.runs.batch",
    "load_questions": "pipeline.runs.batch",
    "rerun": "pipeline.runs.rerun",
    "run_accuracy": "pipeline.runs.accuracy",
    "run_questions_file": "pipeline.runs.runner",
    "submit_jobs": "pipeline.runs.submit",
    "submit_questions_file": "pipeline.runs.runner",
    "wait_for_run": "pipeline.runs.runner",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
