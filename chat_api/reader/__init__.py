"""The model-driven reader: questions about any semantic model, read into a typed query.

``index`` (what the model and its data call things) -> ``linking`` (words to members, values,
entities and grammar) -> ``interpret`` (links to a :class:`Query`, Cube's REST query shape with
extensions) -> ``sql`` (the query as Semantic SQL, compiled under the user's access policies
like any other) -> ``describe`` ("Read as: ..." and the answer). ``words`` holds the grammar as
tables; no dataset's words live in this package.
"""

from __future__ import annotations

from chat_api.reader.index import ModelIndex, build_index
from chat_api.reader.interpret import read
from chat_api.reader.query import Filter, Query, TimeDimension
from chat_api.reader.sql import semantic_sql

__all__ = ["Filter", "ModelIndex", "Query", "TimeDimension", "build_index", "read", "semantic_sql"]
