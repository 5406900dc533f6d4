"""The OpenAPI 3.1 document of the Chat API's JSON endpoints, generated from the wire models.

Request and response bodies are the pydantic models of :mod:`models.chat` (JSON Schema 2020-12,
which OpenAPI 3.1 uses as is); the statuses are those of ``chat-api-interface.md``, "Errors",
plus what this service adds (403 for the external user limit, 409 for a thread that is
streaming, 413 for a body over 1 MiB or an ``input`` over its limit, 415 for a body that is
not JSON). The chat response is NDJSON served as
``application/json`` (field notes): its schema describes one line. Served at
``GET /openapi.json``; ``tests/integration/chat_api/test_openapi.py`` fuzzes the service
against it with schemathesis.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from chat_api.http.service import REVOKE_SESSION_PATH, RevokeSessionRequest
from chat_api.settings import ChatApiSettings
from chat_api.state.users import MAX_EPHEMERAL_TTL_S
from models import wire
from models.chat import (
    AbortRequest,
    ChatRequest,
    GenerateSessionRequest,
    GenerateSessionResponse,
    StreamMessage,
)

OPENAPI_VERSION = "3.1.0"
EXTERNAL_ID = r"^[a-z0-9._@+-]+$"
r"""``externalId``: lowercase, no spaces. ASCII only here, a subset of what the server takes
(:class:`models.chat.UserIdentity` refuses whitespace and A-Z), so that a value valid for the
document is valid for the server whatever a generator makes of ``\s``."""
EMAIL = r"^[a-z0-9._%+-]+@[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}$"
r"""An email address, again an ASCII subset of the server's ``^[^@\s]+@[^@\s]+\.[^@\s]+$``."""
_FORBIDDEN_WITH_INTERNAL = ("userAttributes", "groups", "securityContext")
_REF = "#/components/schemas/{model}"
_ERROR = {
    "type": "object",
    "required": ["error", "status"],
    "properties": {"error": {"type": "string"}, "status": {"type": "integer"}},
}
_MEANINGS = {
    "400": "Invalid request body or parameters",
    "401": "Invalid or missing API key",
    "403": "Not allowed (another user's thread, or the external user limit)",
    "404": "Agent, account, chat thread or session not found",
    "409": "Streaming for thread is in progress",
    "413": "Body larger than 1 MiB, or input longer than CHATSCRIBE_MAX_INPUT_CHARS",
    "415": "A body declared as something else than application/json",
}


def openapi_document(settings: ChatApiSettings) -> dict[str, Any]:
    """Returns: the OpenAPI document (a JSON object) for the agent ``settings`` serves."""
    models: list[type[BaseModel]] = [
        ChatRequest,
        AbortRequest,
        GenerateSessionRequest,
        RevokeSessionRequest,
    ]
    pairs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(m, "validation") for m in models]
    pairs += [(GenerateSessionResponse, "serialization"), (StreamMessage, "serialization")]
    _, top = models_json_schema(pairs, ref_template=_REF)
    schemas = {**top.get("$defs", {}), "Error": _ERROR}
    _identity_rules(schemas, settings)
    chat_path = wire.CHAT_PATH_TEMPLATE.format(
        cloud_region="{cloudRegion}", account_name="{accountName}", agent_id="{agentId}"
    )
    agent = _agent_parameters(settings)
    paths = {
        chat_path: {"post": _chat_operation(agent)},
        chat_path + wire.ABORT_SUFFIX: {
            "post": _operation("abortChat", "AbortRequest", agent, {"204": "Aborted"}, "403 404")
        },
        wire.GENERATE_SESSION_PATH: {
            "post": _operation(
                "generateSession",
                "GenerateSessionRequest",
                [],
                _json_ok("GenerateSessionResponse"),
                "403",
            )
        },
        REVOKE_SESSION_PATH: {
            "post": _operation(
                "revokeSession", "RevokeSessionRequest", [], {"204": "Revoked"}, "404"
            )
        },
    }
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "chatscribe Chat API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "apiKey": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "`Api-Key <API_KEY>`",
                }
            },
        },
        "security": [{"apiKey": []}],
    }


def _identity_rules(schemas: dict[str, Any], settings: ChatApiSettings) -> None:
    """Writes the identity rules the server checks in code into the schemas.

    Interface, "Session settings"; issue 12: the forms of externalId and email, exactly one of
    externalId and internalId, nothing but the id with internalId, only declared attribute and group
    names, attribute values non-empty strings, a bounded lifetime and a bounded ``input``.
    """
    declared_attributes = settings.user_attributes
    for name in ("SessionSettings", "GenerateSessionRequest"):
        properties = schemas[name]["properties"]
        properties["externalId"] = {"type": "string", "minLength": 1, "pattern": EXTERNAL_ID}
        properties["internalId"] = {"type": "string", "pattern": EMAIL}
        properties["email"] = {"type": "string", "pattern": EMAIL}
        external = {"required": ["externalId"], "properties": {"internalId": False}}
        internal_only = dict.fromkeys(("externalId", *_FORBIDDEN_WITH_INTERNAL), False)
        internal = {"required": ["internalId"], "properties": internal_only}
        schemas[name]["anyOf"] = [external, internal]
        attributes = properties["userAttributes"]["anyOf"][0]
        attributes["maxItems"] = len(declared_attributes)  # names are unique (field notes)
        groups: dict[str, Any] = {"type": "array", "maxItems": 0}  # none declared
        if settings.user_groups:
            group = {"type": "string", "enum": list(settings.user_groups)}
            groups = {"type": "array", "items": group, "uniqueItems": True}
        properties["groups"] = groups
    ttl = schemas["SessionSettings"]["properties"]["ephemeralTtlSeconds"]
    ttl["anyOf"][0]["maximum"] = MAX_EPHEMERAL_TTL_S
    attribute = schemas["UserAttribute"]["properties"]
    attribute["name"] = {"type": "string", "enum": list(declared_attributes)}
    attribute["value"] = {"type": "string", "pattern": r"\S"}
    chat = schemas["ChatRequest"]
    chat["properties"]["input"] = {"type": "string", "maxLength": settings.max_input_chars}
    chat["properties"]["chatId"] = {"type": "string", "minLength": 1}
    chat["anyOf"] = [{"required": ["input"]}, {"required": ["chatId"]}]


def _agent_parameters(settings: ChatApiSettings) -> list[dict[str, Any]]:
    values = {
        "cloudRegion": settings.cloud_region,
        "accountName": settings.account_name,
        "agentId": settings.agent_id,
    }
    return [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string", "enum": [v]}}
        for name, v in values.items()
    ]


def _chat_operation(agent: list[dict[str, Any]]) -> dict[str, Any]:
    ok = {
        "200": {
            "description": "NDJSON: one chat stream message per line (served as application/json)",
            "content": {
                "application/json": {"schema": {"$ref": _REF.format(model="StreamMessage")}}
            },
        }
    }
    return _operation("streamChatState", "ChatRequest", agent, ok, "403 404 409")


def _json_ok(model: str) -> dict[str, Any]:
    return {
        "200": {
            "description": "OK",
            "content": {"application/json": {"schema": {"$ref": _REF.format(model=model)}}},
        }
    }


def _operation(
    operation_id: str,
    body: str,
    parameters: list[dict[str, Any]],
    ok: dict[str, Any],
    errors: str = "",
) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "parameters": parameters,
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": _REF.format(model=body)}}},
        },
        "responses": _responses(ok, errors),
    }


def _responses(ok: dict[str, Any], errors: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for status, value in ok.items():
        found[status] = value if isinstance(value, dict) else {"description": value}
    for status in ["400", "401", *errors.split(), "413", "415"]:
        found[status] = {
            "description": _MEANINGS[status],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    return found
