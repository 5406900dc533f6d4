"""Records for the archive writer's tests: raw lines, their envelopes, a job's opening events.

Also the retention run those tests make (:func:`apply_retention`).

Shared by ``test_chain_and_redaction`` and ``test_normalise_held_lines``: a job of run ``r1``
asked as ``ann`` whose question holds an e-mail address (the redaction tests' subject), lines
received one second apart from :data:`T0`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from models import wire
from models.records import ChatJob, JobEvent, LineEnvelope
from pipeline.archive.redaction import Redactor
from pipeline.archive.retention import RetentionOutcome, RetentionPolicy, apply_policy
from pipeline.archive.seals import Anchor

T0 = datetime(2026, 1, 1, tzinfo=UTC)
URL = "http://127.0.0.1:8400" + wire.CHAT_PATH_TEMPLATE.format(
    cloud_region="local", account_name="demo", agent_id="1"
)


def raw(**fields: Any) -> bytes:
    """Returns: one NDJSON line (without its newline) of ``fields``."""
    return json.dumps(fields).encode()


def envelopes(job_id: str, raws: Sequence[bytes]) -> list[LineEnvelope]:
    """Returns: ``raws`` as attempt 1's lines 1..n of ``job_id``, parsed."""
    return [
        LineEnvelope.from_raw(
            job_id=job_id, attempt=1, line_no=n, raw=line, received_at=T0 + timedelta(seconds=n)
        )
        for n, line in enumerate(raws, start=1)
    ]


def opening_events(job_id: str) -> list[JobEvent]:
    """Returns: ``job_id``'s ``accepted`` and attempt 1's ``started`` events, with the job."""
    job = ChatJob.model_validate(
        {
            "job_id": job_id,
            "run_id": "r1",
            "question": "Mail ann@corp.io the count",
            "session_settings": {"externalId": "ann"},
            "chat_url": URL,
        }
    )
    common = {"job_id": job_id, "run_id": "r1"}
    return [
        JobEvent(**common, kind="accepted", job=job, at=T0),
        JobEvent(**common, kind="started", attempt=1, job=job, at=T0),
    ]


def apply_retention(
    engine: sa.Engine, action: str = "redact", *, anchor: Anchor | None = None
) -> RetentionOutcome:
    """Runs ``retention apply`` two days on: ``action`` on lines older than a day, e-mails.

    ``anchor``: where new seals are anchored, as ``CHATSCRIBE_CHAIN_ANCHOR_DIR`` makes it.

    Returns:
        What the policy changed.
    """
    policy = RetentionPolicy.model_validate(
        {"rules": [{"afterDays": 1, "action": action}], "redaction": {"detectors": ["email"]}}
    )
    with engine.begin() as conn:
        return apply_policy(
            conn,
            policy,
            now=datetime.now(UTC) + timedelta(days=2),
            default_redactor=Redactor.build(),
            anchor=anchor,
        )
