"""The answers outbox: archived answers not yet published to ``chat.answers``.

A database module (SQLAlchemy) used by :class:`pipeline.sink.answers.AnswerPublisher`: an
answer row whose ``published_at`` is NULL is in the outbox (partial index
``ix_answers_unpublished``); :func:`pending_answers` reads those of some (job, attempt) pairs as
:class:`models.records.AnswerRecord` records and :func:`mark_published` takes them out once Kafka
acknowledged them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from models.records import AnswerRecord
from pipeline.archive.engine import chunks, translate_errors

_PENDING = """
SELECT a.job_id, a.attempt, j.run_id, j.question, j.persona, j.identity, a.chat_id,
       a.content AS answer, a.source AS answer_source, j.finished_at, q.sql_query AS sql,
       q.total_rows, q.vega_spec
FROM answers a
JOIN jobs j ON j.job_id = a.job_id
JOIN unnest(CAST(:jobs AS text[]), CAST(:attempts AS int[])) AS t(job_id, attempt)
  ON t.job_id = a.job_id AND t.attempt = a.attempt
LEFT JOIN LATERAL (
    SELECT s.sql_query, s.total_rows, s.vega_spec FROM sql_queries s
    JOIN messages m USING (job_id, attempt, message_id)
    WHERE s.job_id = a.job_id AND s.attempt = a.attempt AND s.error IS NULL
    ORDER BY m.first_line DESC LIMIT 1
) q ON true
WHERE a.published_at IS NULL
"""
_MARK = """
UPDATE answers SET published_at = now()
WHERE job_id = :job_id AND attempt = :attempt AND published_at IS NULL
"""


def answer_record(row: Any) -> AnswerRecord:
    """Returns: the ``chat.answers`` record of an outbox row."""
    return AnswerRecord(
        job_id=row.job_id,
        run_id=row.run_id,
        attempt=row.attempt,
        question=row.question,
        persona=row.persona,
        identity=row.identity,
        chat_id=row.chat_id,
        answer=row.answer,
        answer_source=row.answer_source,
        sql=row.sql,
        total_rows=row.total_rows,
        chart_spec=row.vega_spec,
        finished_at=row.finished_at,
    )


def pending_answers(engine: sa.Engine, pairs: Sequence[tuple[str, int]]) -> list[AnswerRecord]:
    """Returns: the record of every unpublished answer of ``pairs`` (module docstring).

    Args:
        engine: The archive's engine.
        pairs: ``(job_id, attempt)`` pairs, read :data:`PAIRS_PER_QUERY` at a time.

    Raises:
        ArchiveUnavailableError, ArchiveSchemaError: Translated PostgreSQL failures.
    """
    out: list[AnswerRecord] = []
    with translate_errors("read answers outbox"), engine.connect() as conn:
        for chunk in chunks(pairs):
            params = {"jobs": [p[0] for p in chunk], "attempts": [p[1] for p in chunk]}
            out += [answer_record(row) for row in conn.execute(sa.text(_PENDING), params)]
    return out


def mark_published(engine: sa.Engine, records: Sequence[AnswerRecord]) -> None:
    """Takes ``records`` (from :func:`pending_answers`) out of the outbox, in one transaction.

    Raises:
        ArchiveUnavailableError, ArchiveSchemaError: Translated PostgreSQL failures.
    """
    keys = [{"job_id": r.job_id, "attempt": r.attempt} for r in records]
    with translate_errors("mark answers published"), engine.begin() as conn:
        conn.execute(sa.text(_MARK), keys)
