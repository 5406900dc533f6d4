"""Fuzzing the Chat API against its own OpenAPI document with schemathesis.

Schemathesis (hypothesis underneath) generates valid and invalid requests for every operation of
``GET /openapi.json`` and sends them to the real server with a valid API key. Checks: no 5xx,
every status is documented, the content type and the body match the document. The chat 200 is
NDJSON (served as ``application/json``, field notes), so its body is checked line by line
against the ``StreamMessage`` schema instead of as one JSON document.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import jsonschema_rs
import pytest
import schemathesis
from hypothesis import given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

if TYPE_CHECKING:
    from tests.integration.chat_api.conftest import RunningServer

MAX_EXAMPLES = 60


OPERATIONS = (
    "POST /api/v1/public/{cloudRegion}/{accountName}/agents/{agentId}/chat/stream-chat-state",
    "POST /api/v1/public/{cloudRegion}/{accountName}/agents/{agentId}/chat/stream-chat-state/abort",
    "POST /api/v1/embed/generate-session",
    "POST /api/v1/embed/session/revoke",
)


def _line_validator(server: RunningServer) -> jsonschema_rs.Validator:
    document = server.app.state.service_document
    line_schema = {**document["components"]["schemas"]["StreamMessage"]}
    line_schema["$defs"] = document["components"]["schemas"]
    text = json.dumps(line_schema).replace("#/components/schemas/", "#/$defs/")
    return jsonschema_rs.validator_for(json.loads(text))


def _check(case: Any, server: RunningServer, validator: jsonschema_rs.Validator) -> None:
    case.headers = {**(case.headers or {}), **server.headers}  # a valid key, not a generated one
    response = case.call(base_url=server.base_url, timeout=60)
    print(
        "STATUS", case.operation.path[-20:], response.status_code, response.text[:150], case.headers
    )
    ndjson = response.status_code == 200 and case.operation.path.endswith("stream-chat-state")
    checks = [not_a_server_error, status_code_conformance, content_type_conformance]
    if not ndjson:
        checks.append(response_schema_conformance)
    case.validate_response(response, checks=checks)
    if ndjson:
        for text in response.text.splitlines():
            line = json.loads(text)
            assert "error" not in line, line
            validator.validate(line)


@pytest.mark.parametrize("label", OPERATIONS)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_the_service_honours_its_openapi_document(
    server: RunningServer, label: str, mode: GenerationMode
) -> None:
    document = schemathesis.openapi.from_url(server.base_url + "/openapi.json")
    operation = document.find_operation_by_label(label)
    assert operation is not None, label
    validator = _line_validator(server)

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None)
    def fuzz(case: Any) -> None:
        _check(case, server, validator)

    fuzz()
