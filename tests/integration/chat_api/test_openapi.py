"""Fuzzing the Chat API against its own OpenAPI document with schemathesis.

Schemathesis (hypothesis underneath) generates valid and invalid requests for every operation of
``GET /openapi.json`` and sends them to the real server with a valid API key. Checks: no 5xx,
every status is documented, the content type and the body match the document. The chat 200 is
NDJSON (served as ``application/json``, field notes), so its body is checked line by line
against the ``StreamMessage`` schema instead of as one JSON document.

Beyond the document (issue 12): hostile values (nesting 100,000 deep, numbers of thousands of
digits or out of float range, ``NaN``, huge strings and arrays) put in every field of every
body must be a 4xx naming the problem, and a body declared as anything but JSON a 415.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import jsonschema_rs
import pytest
import schemathesis
from hypothesis import given, settings
from hypothesis import strategies as st
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


# -- hostile values (issue 12): nested, huge and unreadable values anywhere in a body ------------

LONG_TEXT = '"' + "x" * 200_000 + '"'
VALID_IN = {"session": {"text-200k", "array-50000", "int-10^400"}, "chat-attr": {"text-200k"}}
"""Values that are valid there (any JSON is a security context member, any text an attribute
value): those must only never be a 5xx."""
HOSTILE_VALUES = {
    "nested-5000": "[" * 5_000 + "]" * 5_000,
    "nested-100000-unclosed": "[" * 100_000,
    "objects-2000": '{"a":' * 2_000 + "1" + "}" * 2_000,
    "digits-4301": "9" * 4_301,
    "digits-10001": "-" + "9" * 10_000,
    "float-1e400": "1e400",
    "float--1e400": "-1e400",
    "nan": "NaN",
    "infinity": "Infinity",
    "int-10^400": "1" + "0" * 400,
    "text-200k": LONG_TEXT,
    "lone-surrogate": '"\\ud800"',
    "array-50000": "[" + ",".join(["0"] * 50_000) + "]",
}
"""Name -> JSON text of the value (names keep hypothesis's reports short)."""
BODY_SKELETONS = {
    "chat": '{"input": %s, "sessionSettings": {"externalId": "fz"}}',
    "chat-ttl": (
        '{"input": "hi", "sessionSettings": {"externalId": "fz", "ephemeralTtlSeconds": %s}}'
    ),
    "chat-attr": (
        '{"input": "hi", "sessionSettings": {"externalId": "fz", '
        '"userAttributes": [{"name": "origin", "value": %s}]}}'
    ),
    "chat-groups": '{"input": "hi", "sessionSettings": {"externalId": "fz", "groups": %s}}',
    "abort": '{"chatId": %s}',
    "session": '{"externalId": "fz", "securityContext": {"x": %s}}',
    "revoke": '{"sessionId": %s}',
}


def _url(server: RunningServer, skeleton: str) -> str:
    if skeleton.startswith("chat"):
        return server.chat_url()
    return {
        "abort": server.abort_url(),
        "session": server.session_url,
        "revoke": server.base_url + "/api/v1/embed/session/revoke",
    }[skeleton]


def test_nested_and_huge_values_anywhere_are_a_4xx_naming_the_problem(
    server: RunningServer,
) -> None:
    with httpx.Client(timeout=60) as http:

        @given(
            name=st.sampled_from(sorted(HOSTILE_VALUES)),
            skeleton=st.sampled_from(sorted(BODY_SKELETONS)),
        )
        @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None)
        def fuzz(name: str, skeleton: str) -> None:
            value = HOSTILE_VALUES[name]
            body = (BODY_SKELETONS[skeleton] % value).encode()
            response = http.post(_url(server, skeleton), content=body, headers=server.headers)
            if name in VALID_IN.get(skeleton, ()):
                assert response.status_code < 500, response.text[:200]
                return
            assert 400 <= response.status_code < 500, (skeleton, name, response.text[:200])
            error = response.json()
            assert error["status"] == response.status_code and error["error"], error

        fuzz()


@given(
    content_type=st.sampled_from(
        [
            "text/plain",
            "application/xml",
            "multipart/form-data; boundary=b",
            "application/x-www-form-urlencoded",
            "text/json",
            "application/octet-stream",
        ]
    ),
    skeleton=st.sampled_from(sorted(BODY_SKELETONS)),
)
@settings(max_examples=30, deadline=None, database=None)
def test_a_body_declared_as_anything_but_json_is_415(
    server: RunningServer, content_type: str, skeleton: str
) -> None:
    body = (BODY_SKELETONS[skeleton] % '"x"').encode()
    headers = {**server.headers, "Content-Type": content_type}
    response = httpx.post(_url(server, skeleton), content=body, headers=headers, timeout=60)
    assert response.status_code == 415, response.text
    assert "application/json" in response.json()["error"]


IDENTITY_CLASSES: dict[str, dict[str, Any]] = {
    "both ids": {"externalId": "fz", "internalId": "ann@example.com"},
    "empty attribute": {"externalId": "fz", "userAttributes": [{"name": "origin", "value": ""}]},
    "blank attribute": {"externalId": "fz", "userAttributes": [{"name": "origin", "value": " "}]},
    "number attribute": {"externalId": "fz", "userAttributes": [{"name": "origin", "value": 7}]},
    "unknown group": {"externalId": "fz", "groups": ["admins"]},
    "lifetime 10^400": {"externalId": "fz", "ephemeralTtlSeconds": 10**400},
}
"""Identities every endpoint refuses with a 400 (issue 12, points 3 to 5)."""


@pytest.mark.parametrize(
    ("name", "endpoint"),
    [
        (name, endpoint)
        for name in sorted(IDENTITY_CLASSES)
        for endpoint in ("chat", "abort", "session")
        if not (endpoint == "session" and "ephemeralTtlSeconds" in IDENTITY_CLASSES[name])
    ],  # generate-session has no ephemeralTtlSeconds
)
def test_each_refused_identity_class_is_a_400_on_every_endpoint(
    server: RunningServer, name: str, endpoint: str
) -> None:
    identity = IDENTITY_CLASSES[name]
    body: dict[str, Any]
    if endpoint == "session":
        body, url = identity, server.session_url
    elif endpoint == "abort":
        body, url = {"chatId": "unknown", "sessionSettings": identity}, server.abort_url()
    else:
        body, url = {"input": "hi", "sessionSettings": identity}, server.chat_url()
    response = httpx.post(url, content=json.dumps(body), headers=server.headers, timeout=60)
    assert response.status_code == 400, response.text
    assert response.json()["error"]
