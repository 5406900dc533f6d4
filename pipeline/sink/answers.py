"""Final answers to ``chat.answers``: compact records for downstream consumers, from an outbox.

After the sink's database commit, every answer of the batch's (job, attempt) pairs that has not
been published yet (``answers.published_at IS NULL``, the outbox; partial index
``ix_answers_unpublished``) becomes one record on ``chat.answers`` (key: job id; value: the
JSON of :class:`AnswerRecord`). Once Kafka acknowledged all of them, ``published_at`` is set.
If producing fails, the sink rewinds and reads the batch again: the archive writes change
nothing, and the still unpublished answers are sent again. So delivery is at least once;
consumers keep the latest record per (job id, attempt). An attempt normalised again
(``renormalise``) is published again.

Record value (UTF-8 JSON)::

    {"job_id", "run_id", "attempt", "question", "persona", "identity", "chat_id",
     "answer", "answer_source": "final"|"fallback"|"none", "sql", "total_rows",
     "chart_spec": {...Vega-Lite, no data...} | null, "finished_at"}
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any, Final

import sqlalchemy as sa

from models import wire
from models.records import JobEvent, LineEnvelope
from pipeline.archive.engine import create_engine, translate_errors
from pipeline.kafka.clients import Pending, delivered, send
from pipeline.settings import Settings

logger = logging.getLogger(__name__)

PAIRS_PER_QUERY: Final = 500

_PENDING = """
SELECT a.job_id, a.attempt, j.run_id, j.question, j.persona, j.identity, a.chat_id,
       a.content AS answer, a.source AS answer_source, j.finished_at, q.sql_query AS sql,
       q.total_rows, q.vega_spec
FROM "{s}".answers a
JOIN "{s}".jobs j ON j.job_id = a.job_id
JOIN unnest(CAST(:jobs AS text[]), CAST(:attempts AS int[])) AS t(job_id, attempt)
  ON t.job_id = a.job_id AND t.attempt = a.attempt
LEFT JOIN LATERAL (
    SELECT s.sql_query, s.total_rows, s.vega_spec FROM "{s}".sql_queries s
    JOIN "{s}".messages m USING (job_id, attempt, message_id)
    WHERE s.job_id = a.job_id AND s.attempt = a.attempt AND s.error IS NULL
    ORDER BY m.first_line DESC LIMIT 1
) q ON true
WHERE a.published_at IS NULL
"""
_MARK = """
UPDATE "{s}".answers SET published_at = now()
WHERE job_id = :job_id AND attempt = :attempt AND published_at IS NULL
"""


def answer_record(row: Any) -> dict[str, Any]:
    """Returns: the compact record of an outbox row (module docstring)."""
    return {
        "job_id": row.job_id,
        "run_id": row.run_id,
        "attempt": row.attempt,
        "question": row.question,
        "persona": row.persona,
        "identity": row.identity,
        "chat_id": row.chat_id,
        "answer": row.answer,
        "answer_source": row.answer_source,
        "sql": row.sql,
        "total_rows": row.total_rows,
        "chart_spec": row.vega_spec,
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
    }


class AnswerPublisher:
    """Publishes unpublished answers of touched attempts (module docstring).

    Args:
        settings: Database and topic settings.
        producer: A started aiokafka producer (the sink's); not owned.
    """

    def __init__(self, settings: Settings, producer: Any) -> None:
        self._engine = create_engine(settings)
        self._schema = settings.database_schema
        self._topic = settings.topic(wire.TOPIC_ANSWERS)
        self._producer = producer
        self.published = 0

    def __repr__(self) -> str:
        return f"<AnswerPublisher topic={self._topic} published={self.published}>"

    def close(self) -> None:
        """Disposes of the publisher's engine."""
        self._engine.dispose()

    async def publish(self, lines: Sequence[LineEnvelope], events: Sequence[JobEvent]) -> int:
        """Publishes the batch's unpublished answers and marks them published.

        Returns:
            How many records were published.

        Raises:
            RecordDeliveryError: Kafka did not acknowledge a record (nothing marked).
            ArchiveUnavailableError: PostgreSQL failed (nothing marked).
        """
        pairs = sorted(
            {(x.job_id, x.attempt) for x in lines} | {(e.job_id, e.attempt) for e in events}
        )
        if not pairs:
            return 0
        records = await asyncio.to_thread(self._pending, pairs)
        if not records:
            return 0
        pending: list[Pending] = []
        for record in records:
            value = json.dumps(record, ensure_ascii=False, default=str).encode()
            key = record["job_id"].encode()
            pending.append(await send(self._producer, self._topic, key=key, value=value))
        await delivered(pending)
        await asyncio.to_thread(self._mark, records)
        self.published += len(records)
        logger.debug("answers published count=%d topic=%s", len(records), self._topic)
        return len(records)

    def _pending(self, pairs: list[tuple[str, int]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        with translate_errors("read answers outbox"), self._engine.connect() as conn:
            for chunk in _chunks(pairs, PAIRS_PER_QUERY):
                params = {"jobs": [p[0] for p in chunk], "attempts": [p[1] for p in chunk]}
                rows = conn.execute(sa.text(_PENDING.format(s=self._schema)), params)
                out += [answer_record(row) for row in rows]
        return out

    def _mark(self, records: list[dict[str, Any]]) -> None:
        keys = [{"job_id": r["job_id"], "attempt": r["attempt"]} for r in records]
        with translate_errors("mark answers published"), self._engine.begin() as conn:
            conn.execute(sa.text(_MARK.format(s=self._schema)), keys)


def _chunks(items: list[tuple[str, int]], size: int) -> Iterable[list[tuple[str, int]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
