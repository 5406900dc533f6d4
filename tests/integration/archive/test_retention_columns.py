"""``retention apply`` reaches every column that holds content (issue 24, class 2).

One complete job with a SQL tool call (``tests/data/hosted/cube_tools.ndjson``) is archived
by the real writer into a fresh schema; then every column of
:data:`pipeline.archive.content.CONTENT` is given a value holding a secret word and an e-mail
address, as an agent or a caller could put there, and a policy is applied. ``delete`` must
leave the word nowhere; ``redact`` with the ``email`` detector must leave the address nowhere.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from models.records import JobEvent
from pipeline.archive.content import CONTENT
from pipeline.archive.writer import ArchiveWriter
from tests.integration.archive.archive_records import T0, apply_retention, envelopes, opening_events
from tests.integration.archive.archive_stack import HOSTED_DIR

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("archive_schema"),
]

JOB = "j-retention"
SECRET = "secret-word ann@corp.io"
TRANSCRIPT = (HOSTED_DIR / "cube_tools.ndjson").read_bytes().splitlines()
_SEEDS = {  # a value of each column's type holding SECRET
    ("jobs", "session_settings"): (
        "CAST(:json AS jsonb)",
        '{"externalId": "ann", "userAttributes": {"note": "secret-word ann@corp.io"}}',
    ),
    ("job_events", "payload"): (
        "jsonb_set(payload, '{error}', to_jsonb(CAST(:text AS text)))",
        None,
    ),
    ("stream_lines", "raw"): (
        "convert_to(CAST(:json AS text), 'UTF8')",
        '{"id": "m9", "content": "secret-word ann@corp.io"}',
    ),
}


def _seed(engine: sa.Engine, table: str, column: str) -> None:
    expression, json_value = _SEEDS.get((table, column), (None, None))
    if expression is None:
        kind = _type(engine, table, column)
        expression = {
            "jsonb": "CAST(:json AS jsonb)",
            "ARRAY": "ARRAY[CAST(:text AS text)]",
        }.get(kind, "CAST(:text AS text)")
        json_value = '{"note": "secret-word ann@corp.io"}'
    with engine.begin() as conn:
        changed = conn.execute(
            sa.text(f"UPDATE {table} SET {column} = {expression} WHERE job_id = :j"),
            {"j": JOB, "text": SECRET, "json": json_value},
        ).rowcount
    assert changed > 0, (table, column)


def _type(engine: sa.Engine, table: str, column: str) -> str:
    with engine.connect() as conn:
        return str(
            conn.execute(
                sa.text(
                    "SELECT data_type FROM information_schema.columns WHERE table_name = :t"
                    " AND column_name = :c AND table_schema = current_schema()"
                ),
                {"t": table, "c": column},
            ).scalar()
        )


def _values(engine: sa.Engine, table: str, column: str) -> list[str]:
    text = f"encode({column}, 'escape')" if column == "raw" else f"CAST({column} AS text)"
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(f"SELECT {text} FROM {table} WHERE job_id = :j"), {"j": JOB}
        ).scalars()
        return [value for value in rows if value is not None]


def _archive(engine: sa.Engine) -> None:
    completed = JobEvent(
        job_id=JOB, run_id="r1", kind="completed", attempt=1, line_count=len(TRANSCRIPT), at=T0
    )
    ArchiveWriter(engine).write_batch(envelopes(JOB, TRANSCRIPT), [*opening_events(JOB), completed])


@pytest.mark.parametrize(("table", "column"), sorted(CONTENT))
def test_delete_leaves_no_content_in_the_column(engine: sa.Engine, table: str, column: str) -> None:
    _archive(engine)
    _seed(engine, table, column)
    assert any("secret-word" in v for v in _values(engine, table, column))
    apply_retention(engine, "delete")
    assert not [v for v in _values(engine, table, column) if "secret-word" in v]


@pytest.mark.parametrize(("table", "column"), sorted(CONTENT))
def test_redact_leaves_no_email_in_the_column(engine: sa.Engine, table: str, column: str) -> None:
    _archive(engine)
    _seed(engine, table, column)
    apply_retention(engine, "redact")
    assert not [v for v in _values(engine, table, column) if "ann@corp.io" in v]


def test_deleted_job_keeps_who_asked_for_the_audit(engine: sa.Engine) -> None:
    _archive(engine)
    apply_retention(engine, "delete")
    with engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT identity, session_settings, status FROM jobs WHERE job_id = :j"),
            {"j": JOB},
        ).one()
    assert (row.identity, row.session_settings, row.status) == (
        "external:ann",
        {"externalId": "ann"},
        "completed",
    )
