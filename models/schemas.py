"""JSON Schemas of the records the pipeline publishes, versioned and shipped with the code.

One :class:`RecordSchema` per published record (:data:`SCHEMAS`): the ``chat.requests`` job
(:class:`models.records.ChatJob`), the ``chat.job-events`` event
(:class:`~models.records.JobEvent`), the ``chat.answers`` answer
(:class:`~models.records.AnswerRecord`) and the dead letter's headers
(:class:`~models.records.DeadLetter`, read as an object of its fields; the value of a dead letter
is the original record's bytes). Each schema is generated from its pydantic model
(``model_json_schema``, JSON Schema draft 2020-12, serialisation mode, field names as written
on the wire, class docstrings left out) and shipped as
``models/json_schemas/<name>.v<version>.json``; ``chatscribe schemas`` serves them.

Versioning rule: a shipped file never changes. When a model's generated schema differs from the
file of its current :attr:`RecordSchema.version`, the version must be bumped and a new file
written (``chatscribe schemas write``); :func:`drift` finds schemas changed without a bump and
``tests/unit/models/test_schemas.py`` fails on them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel

from models import wire
from models.records import AnswerRecord, ChatJob, DeadLetter, JobEvent

DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
DEAD_LETTERS: Final = "dead-letters"
"""Schema name of the dead-letter headers (``chat.requests.dlq``, ``chat.lines.dlq``)."""


@dataclass(frozen=True)
class RecordSchema:
    """One published record's schema.

    Attributes:
        name: The topic the record is published to (``chat.answers``), or
            :data:`DEAD_LETTERS`.
        model: The pydantic model that writes the record.
        version: The schema's version (from 1); bumped whenever the generated schema changes.
        description: What the record is, for ``chatscribe schemas list``.
    """

    name: str
    model: type[BaseModel]
    version: int
    description: str

    @property
    def file_name(self) -> str:
        """``<name>.v<version>.json``."""
        return f"{self.name}.v{self.version}.json"

    @property
    def schema_id(self) -> str:
        """The schema's ``$id``: ``urn:chatscribe:schema:<name>:v<version>``."""
        return f"urn:chatscribe:schema:{self.name}:v{self.version}"

    def generate(self) -> dict[str, Any]:
        """Returns: the JSON Schema generated from :attr:`model` (a JSON object)."""
        body = _without_docstrings(
            self.model.model_json_schema(by_alias=False, mode="serialization")
        )
        return {
            "$schema": DIALECT,
            "$id": self.schema_id,
            **body,
            "title": self.name,
            "description": self.description,
        }

    def shipped(self, directory: Path | None = None) -> dict[str, Any] | None:
        """Returns: the shipped schema of :attr:`version`, or None when no file ships it.

        Args:
            directory: Where the schema files are; default: the package's ``json_schemas``.
        """
        path = (directory or schemas_dir()) / self.file_name
        return json.loads(path.read_text()) if path.is_file() else None


SCHEMAS: Final = (
    RecordSchema(wire.TOPIC_REQUESTS, ChatJob, 1, "a question to ask as one identity"),
    RecordSchema(wire.TOPIC_JOB_EVENTS, JobEvent, 1, "a job lifecycle event"),
    RecordSchema(wire.TOPIC_ANSWERS, AnswerRecord, 1, "an attempt's final answer"),
    RecordSchema(DEAD_LETTERS, DeadLetter, 1, "why a record was dead-lettered (headers)"),
)


def _without_docstrings(node: Any) -> Any:
    """Drops the ``description`` texts pydantic takes from class docstrings.

    A docstring edit is not a change of the record, so it must not ask for a version bump.
    """
    if isinstance(node, dict):
        return {
            k: _without_docstrings(v)
            for k, v in node.items()
            if not (k == "description" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_without_docstrings(v) for v in node]
    return node


def schemas_dir() -> Path:
    """Returns: the directory of the shipped schema files (``models/json_schemas``)."""
    return Path(str(resources.files("models") / "json_schemas"))


def by_name(name: str) -> RecordSchema:
    """Returns: the schema named ``name``.

    Raises:
        KeyError: No published record has that name (the message lists the names).
    """
    for schema in SCHEMAS:
        if schema.name == name:
            return schema
    raise KeyError(f"no schema {name!r}; known: {', '.join(s.name for s in SCHEMAS)}")


def render(schema: dict[str, Any]) -> str:
    """Returns: ``schema`` as the text of a shipped file (sorted keys, 2-space indent, newline)."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def drift(
    schemas: tuple[RecordSchema, ...] = SCHEMAS, *, directory: Path | None = None
) -> list[str]:
    """Finds schemas whose model changed without a version bump, or whose file is missing.

    Args:
        schemas: The schemas to check (default: every published record's).
        directory: Where the shipped files are (default: :func:`schemas_dir`).

    Returns:
        One message per problem (empty when every shipped file matches its model).
    """
    problems = []
    for schema in schemas:
        shipped = schema.shipped(directory)
        if shipped is None:
            problems.append(f"{schema.file_name}: not shipped (chatscribe schemas write)")
        elif render(shipped) != render(schema.generate()):
            problems.append(
                f"{schema.file_name}: the model's schema changed without a version bump "
                f"(bump {schema.name} past v{schema.version}, then chatscribe schemas write)"
            )
    return problems
