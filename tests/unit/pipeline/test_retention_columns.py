"""The retention column lists cover every column that can hold text, JSON, arrays or bytes."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from pipeline.archive import tables
from pipeline.archive.content import CONTENT, KEPT

_CAN_HOLD_CONTENT = (sa.Text, sa.String, JSONB, sa.JSON, ARRAY, sa.LargeBinary)


def _columns() -> set[tuple[str, str]]:
    return {
        (table.name, column.name)
        for table in tables.metadata.tables.values()
        for column in table.columns
        if isinstance(column.type, _CAN_HOLD_CONTENT)
    }


def test_every_column_that_can_hold_content_is_deleted_or_kept_with_a_reason() -> None:
    unlisted = _columns() - set(CONTENT) - set(KEPT)
    assert not unlisted, f"add these to pipeline.archive.content CONTENT or KEPT: {unlisted}"


def test_the_lists_name_real_columns_once() -> None:
    assert not set(CONTENT) & set(KEPT)
    assert set(CONTENT) | set(KEPT) <= _columns()
    assert all(reason for reason in KEPT.values())
