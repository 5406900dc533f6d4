"""The PostgreSQL archive (SQLAlchemy 2, psycopg 3).

Engine, writer, lines, derived rows, jobs, hash chain, redaction, runs, replay, audit, diff and
retention. The only package that imports SQLAlchemy or psycopg.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.archive import chain, lines, runs
    from pipeline.archive.audit import AuditEntry, AuditFilter, read_entries
    from pipeline.archive.chain import verify
    from pipeline.archive.diff import CaseDiff, JobSnapshot, RunDiff, diff_runs, load_run
    from pipeline.archive.engine import ArchiveEngine, create_engine, upgrade
    from pipeline.archive.outbox import mark_published, pending_answers
    from pipeline.archive.redaction import Redactor
    from pipeline.archive.replay import StoredLine, find_conversation, read_attempt, write_ndjson
    from pipeline.archive.retention import apply_policy, load_policy
    from pipeline.archive.runs import (
        JobResult,
        PastQuestion,
        RunInfo,
        RunProgress,
        count_rows,
        past_questions,
        read_run,
        record_run,
        run_progress,
        run_results,
    )
    from pipeline.archive.tables import metadata
    from pipeline.archive.writer import ArchiveWriter, BatchOutcome, refusal

__all__ = [
    "ArchiveEngine",
    "ArchiveWriter",
    "AuditEntry",
    "AuditFilter",
    "BatchOutcome",
    "CaseDiff",
    "JobResult",
    "JobSnapshot",
    "PastQuestion",
    "Redactor",
    "RunDiff",
    "RunInfo",
    "RunProgress",
    "StoredLine",
    "apply_policy",
    "chain",
    "count_rows",
    "create_engine",
    "diff_runs",
    "find_conversation",
    "lines",
    "load_policy",
    "load_run",
    "mark_published",
    "metadata",
    "past_questions",
    "pending_answers",
    "read_attempt",
    "read_entries",
    "read_run",
    "record_run",
    "refusal",
    "run_progress",
    "run_results",
    "runs",
    "upgrade",
    "verify",
    "write_ndjson",
]

_EXPORTS: dict[str, str] = {
    "ArchiveEngine": "pipeline.archive.engine",
    "ArchiveWriter": "pipeline.archive.writer",
    "AuditEntry": "pipeline.archive.audit",
    "AuditFilter": "pipeline.archive.audit",
    "BatchOutcome": "pipeline.archive.writer",
    "CaseDiff": "pipeline.archive.diff",
    "JobResult": "pipeline.archive.runs",
    "JobSnapshot": "pipeline.archive.diff",
    "PastQuestion": "pipeline.archive.runs",
    "Redactor": "pipeline.archive.redaction",
    "RunDiff": "pipeline.archive.diff",
    "RunInfo": "pipeline.archive.runs",
    "RunProgress": "pipeline.archive.runs",
    "StoredLine": "pipeline.archive.replay",
    "apply_policy": "pipeline.archive.retention",
    "chain": "pipeline.archive.chain",
    "count_rows": "pipeline.archive.runs",
    "create_engine": "pipeline.archive.engine",
    "diff_runs": "pipeline.archive.diff",
    "find_conversation": "pipeline.archive.replay",
    "lines": "pipeline.archive.lines",
    "load_policy": "pipeline.archive.retention",
    "load_run": "pipeline.archive.diff",
    "mark_published": "pipeline.archive.outbox",
    "metadata": "pipeline.archive.tables",
    "past_questions": "pipeline.archive.runs",
    "pending_answers": "pipeline.archive.outbox",
    "read_attempt": "pipeline.archive.replay",
    "read_entries": "pipeline.archive.audit",
    "read_run": "pipeline.archive.runs",
    "record_run": "pipeline.archive.runs",
    "refusal": "pipeline.archive.writer",
    "run_progress": "pipeline.archive.runs",
    "run_results": "pipeline.archive.runs",
    "runs": "pipeline.archive.runs",
    "upgrade": "pipeline.archive.engine",
    "verify": "pipeline.archive.chain",
    "write_ndjson": "pipeline.archive.replay",
}


def __getattr__(name: str) -> Any:
    """Imports an exported name on first use, so importing the package stays cheap (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if module == f"{__name__}.{name}" else getattr(value, name)
