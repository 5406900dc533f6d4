"""Pure logic over a conversation.

Parse lines, merge deltas into messages, classify tool calls, fold lifecycle events, pick the final
answer, compare results. No I/O library is imported here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.transcript import normalise
    from pipeline.transcript.lifecycle import COLUMNS, JobState, fold
    from pipeline.transcript.normalise import Transcript
    from pipeline.transcript.result_compare import (
        REL_TOL,
        ExpectedResult,
        Result,
        normal_rows,
        results_match,
    )
    from pipeline.transcript.sql_refs import orders_rows
    from pipeline.transcript.thread_state import state_answer

__all__ = [
    "COLUMNS",
    "REL_TOL",
    "ExpectedResult",
    "JobState",
    "Result",
    "Transcript",
    "fold",
    "normal_rows",
    "normalise",
    "orders_rows",
    "results_match",
    "state_answer",
]

_EXPORTS: dict[str, str] = {
    "COLUMNS": "pipeline.transcript.lifecycle",
    "ExpectedResult": "pipeline.transcript.result_compare",
    "JobState": "pipeline.transcript.lifecycle",
    "REL_TOL": "pipeline.transcript.result_compare",
    "Result": "pipeline.transcript.result_compare",
    "Transcript": "pipeline.transcript.normalise",
    "fold": "pipeline.transcript.lifecycle",
    "normal_rows": "pipeline.transcript.result_compare",
    "normalise": "pipeline.transcript.normalise",
    "orders_rows": "pipeline.transcript.sql_refs",
    "results_match": "pipeline.transcript.result_compare",
    "state_answer": "pipeline.transcript.thread_state",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
