"""Published records' JSON Schemas: shipped files match the models, records validate."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import SecretStr, create_model
from typer.testing import CliRunner

from models import schemas, wire
from models.archive import ANSWER_SOURCES
from models.records import AnswerRecord, ChatJob, DeadLetter, JobEvent
from pipeline.cli.app import app
from pipeline.cli.schemas import EXIT_UNKNOWN_SCHEMA

URL = "http://127.0.0.1:8400/api/v1/public/local/demo/agents/1/chat/stream-chat-state"


def _job() -> ChatJob:
    return ChatJob.model_validate(
        {
            "job_id": "job-1",
            "run_id": "run-1",
            "question": "Who flies most?",
            "persona": "analyst",
            "session_settings": {
                "externalId": "analyst-1",
                "userAttributes": [{"name": "origin", "value": "JFK"}],
            },
            "chat_url": URL,
            "limits": {"max_concurrency": 2},
            "api_key": SecretStr("k-secret"),
        }
    )


def _answer(**changes: Any) -> AnswerRecord:
    fields: dict[str, Any] = {
        "job_id": "job-1",
        "run_id": "run-1",
        "attempt": 1,
        "question": "Who flies most?",
        "persona": None,
        "identity": "external:analyst-1",
        "chat_id": "chat-1",
        "answer": "UA.",
        "answer_source": "final",
        "sql": "SELECT 1",
        "total_rows": 16,
        "chart_spec": {"mark": "bar"},
        "finished_at": datetime(2026, 11, 28, 12, 0, tzinfo=UTC),
    }
    return AnswerRecord(**{**fields, **changes})


def _valid(name: str, value: bytes | dict[str, Any]) -> list[str]:
    schema = schemas.by_name(name).shipped()
    assert schema is not None
    document = json.loads(value) if isinstance(value, bytes) else value
    return [e.message for e in Draft202012Validator(schema).iter_errors(document)]


def test_shipped_schemas_match_their_models() -> None:
    assert schemas.drift() == []


def test_every_shipped_schema_is_a_valid_draft_2020_12_schema() -> None:
    for schema in schemas.SCHEMAS:
        shipped = schema.shipped()
        assert shipped is not None and shipped["$id"] == schema.schema_id
        Draft202012Validator.check_schema(shipped)


def test_a_schema_change_without_a_version_bump_is_found() -> None:
    answers = schemas.by_name(wire.TOPIC_ANSWERS)
    changed = create_model("AnswerRecord", __base__=AnswerRecord, model_version=(str, "gpt"))
    same_version = schemas.RecordSchema(answers.name, changed, answers.version, "changed")
    (problem,) = schemas.drift((same_version,))
    assert "changed without a version bump" in problem and "chat.answers.v1.json" in problem
    bumped = schemas.RecordSchema(answers.name, changed, answers.version + 1, "changed")
    (problem,) = schemas.drift((bumped,))
    assert "chat.answers.v2.json: not shipped" in problem


def test_records_the_pipeline_writes_validate_against_their_schemas() -> None:
    job = _job()
    assert _valid(wire.TOPIC_REQUESTS, job.to_value()) == []
    events = [
        JobEvent(job_id="job-1", run_id="run-1", kind="accepted", job=job.without_secrets()),
        JobEvent(job_id="job-1", run_id="run-1", kind="completed", attempt=1, line_count=9),
    ]
    assert [_valid(wire.TOPIC_JOB_EVENTS, e.to_value()) for e in events] == [[], []]
    assert _valid(wire.TOPIC_ANSWERS, _answer().to_value()) == []
    empty = _answer(answer=None, answer_source="none", sql=None, chart_spec=None, finished_at=None)
    assert _valid(wire.TOPIC_ANSWERS, empty.to_value()) == []
    letter = DeadLetter(reason="bad", source_topic="chat.lines", source_offset=3)
    assert _valid(schemas.DEAD_LETTERS, letter.model_dump(mode="json", exclude_none=True)) == []


def test_answer_sources_in_the_schema_are_the_archives() -> None:
    shipped = schemas.by_name(wire.TOPIC_ANSWERS).shipped()
    assert shipped is not None
    assert shipped["properties"]["answer_source"]["enum"] == list(ANSWER_SOURCES)


def test_a_record_that_breaks_its_schema_is_refused() -> None:
    value = json.loads(_answer().to_value())
    assert _valid(wire.TOPIC_ANSWERS, {**value, "answer_source": "guess"}) != []
    assert _valid(wire.TOPIC_ANSWERS, {k: v for k, v in value.items() if k != "sql"}) != []


def test_schemas_command_lists_and_shows_the_shipped_files() -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["schemas", "list"])
    assert listed.exit_code == 0
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == [
        s.name for s in schemas.SCHEMAS
    ]
    shown = runner.invoke(app, ["schemas", "show", "chat.answers"])
    assert shown.exit_code == 0
    path = Path(schemas.schemas_dir()) / "chat.answers.v1.json"
    assert shown.stdout == path.read_text()
    unknown = runner.invoke(app, ["schemas", "show", "chat.nothing"])
    assert unknown.exit_code == EXIT_UNKNOWN_SCHEMA
