"""The Chat API's resources as pydantic v2 models.

Source: ``chat-api-interface.md`` ("Resources and their fields", "Endpoints") and
``field-notes.md`` for what hosted streams add. Python attribute names are snake_case; the wire
names (camelCase) are the aliases, so ``model_dump(by_alias=True, exclude_none=True)`` gives the
JSON a Chat API expects. Validation failures raise :class:`pydantic.ValidationError`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from models import wire

MESSAGE_ID_PATTERN = r"^\d{13,}-message$"
"""``messageId`` form accepted by hosted services (field notes, "Threads and idempotency")."""

_EXTERNAL_ID = re.compile(r"^[^\sA-Z]+$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_FORBIDDEN_WITH_INTERNAL = ("user_attributes", "groups", "security_context")

Scalar = str | int | float | bool


class WireModel(BaseModel):
    """Base: camelCase aliases, population by name or alias, immutable."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    def to_wire(self) -> dict[str, Any]:
        """Returns: the JSON object with wire names, unset optional fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class UserAttribute(WireModel):
    """One ``{name, value}`` pair of ``userAttributes`` (interface, "Session settings")."""

    name: str = Field(min_length=1)
    value: Scalar


class UserIdentity(WireModel):
    """Who a request acts as: the fields shared by session settings and generate-session.

    Rules (interface, "Session settings", rules 1 and 2):
        * Either ``externalId`` or ``internalId`` is given.
        * ``externalId`` is lowercase with no spaces.
        * With ``internalId`` the internal user's own permissions apply, so ``userAttributes``,
          ``groups`` and ``securityContext`` are refused.
        * Attribute names are unique (field notes: duplicates are a 400).
    """

    external_id: str | None = Field(default=None, alias="externalId", min_length=1)
    internal_id: str | None = Field(default=None, alias="internalId")
    email: str | None = None
    user_attributes: tuple[UserAttribute, ...] | None = Field(default=None, alias="userAttributes")
    groups: tuple[str, ...] | None = None
    security_context: dict[str, Any] | None = Field(default=None, alias="securityContext")

    @field_validator("external_id")
    @classmethod
    def _external_id_form(cls, value: str | None) -> str | None:
        if value is not None and not _EXTERNAL_ID.match(value):
            raise ValueError("externalId must be lowercase and contain no spaces")
        return value

    @field_validator("internal_id", "email")
    @classmethod
    def _email_form(cls, value: str | None) -> str | None:
        if value is not None and not _EMAIL.match(value):
            raise ValueError("must be an email address")
        return value

    @model_validator(mode="after")
    def _identity_rules(self) -> UserIdentity:
        if self.external_id is None and self.internal_id is None:
            raise ValueError("either externalId or internalId must be provided")
        if self.internal_id is not None:
            given = [n for n in _FORBIDDEN_WITH_INTERNAL if getattr(self, n) is not None]
            if given:
                wire_names = ", ".join(type(self).model_fields[n].alias or n for n in given)
                raise ValueError(f"{wire_names} not allowed with internalId (rule 1)")
        names = [a.name for a in self.user_attributes or ()]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate userAttributes names: {', '.join(duplicates)}")
        return self

    @property
    def user_key(self) -> str:
        """Returns: ``"external:<id>"`` or ``"internal:<email>"``, a stable owner key."""
        if self.external_id is not None:
            return f"external:{self.external_id}"
        return f"internal:{self.internal_id}"

    def attributes(self) -> dict[str, Scalar]:
        """Returns: ``userAttributes`` as a name → value mapping (empty when absent)."""
        return {a.name: a.value for a in self.user_attributes or ()}

    def row_level_scope(self) -> tuple[str, dict[str, Scalar], tuple[str, ...], dict[str, Any]]:
        """Returns what row-level security sees of this identity, comparable with ``==``.

        ``(user_key, userAttributes as a mapping, groups sorted, securityContext or {})``: two
        identities with equal scopes see the same rows (interface, "Session settings", rule 2);
        the order of attributes and groups does not count.
        """
        groups = tuple(sorted(set(self.groups or ())))
        return self.user_key, self.attributes(), groups, dict(self.security_context or {})


class SessionSettings(UserIdentity):
    """``sessionSettings``: the chat user and its lifetime (interface, "Session settings")."""

    ephemeral_ttl_seconds: int | None = Field(default=None, alias="ephemeralTtlSeconds", gt=0)
    is_ephemeral: bool | None = Field(default=None, alias="isEphemeral")


class ChatRequest(WireModel):
    """Body of ``POST .../chat/stream-chat-state`` (interface, "1. Chat").

    ``input`` omitted asks for the thread's current state; ``chatId`` omitted starts a thread.
    ``isDefaultBranch`` defaults to true without ``activeBranchName`` and false with it.
    """

    input: str | None = None
    chat_id: str | None = Field(default=None, alias="chatId", min_length=1)
    session_settings: SessionSettings = Field(alias="sessionSettings")
    active_branch_name: str | None = Field(default=None, alias="activeBranchName", min_length=1)
    is_default_branch: bool | None = Field(default=None, alias="isDefaultBranch")
    message_id: str | None = Field(default=None, alias="messageId", pattern=MESSAGE_ID_PATTERN)

    @property
    def effective_is_default_branch(self) -> bool:
        """Returns: ``isDefaultBranch`` with the interface's default applied."""
        if self.is_default_branch is not None:
            return self.is_default_branch
        return self.active_branch_name is None


class AbortRequest(WireModel):
    """Body of ``POST .../chat/stream-chat-state/abort`` (interface, "2. Abort")."""

    chat_id: str = Field(alias="chatId", min_length=1)
    session_settings: SessionSettings | None = Field(default=None, alias="sessionSettings")


class GenerateSessionRequest(UserIdentity):
    """Body of ``POST /api/v1/embed/generate-session``: flattened identity (interface, "3.")."""


class GenerateSessionResponse(WireModel):
    """``{"sessionId": ...}`` (interface, "Session")."""

    session_id: str = Field(alias="sessionId", min_length=1)


class ToolCall(BaseModel):
    """``toolCall``: name and JSON-string payloads (interface, "toolCall object").

    Unknown members are kept. Typed views of the payloads: :mod:`models.tools`.
    """

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="allow")

    name: str | None = None
    input: str | None = None
    result: str | None = None


class StreamMessage(BaseModel):
    """One NDJSON line of a chat stream (interface, "Chat stream message"; field notes).

    Every field is optional because sentinel and error lines carry only a few. Unknown fields
    (``isStructuredResponse`` and whatever comes next) are preserved in ``model_extra``, and
    :meth:`to_wire` gives them back, so nothing a hosted service sends is dropped.
    """

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="allow")

    id: str | None = None
    role: Literal["user", "assistant"] | str | None = None
    content: str | None = None
    thinking: str | None = None
    tool_call: ToolCall | None = Field(default=None, alias="toolCall")
    graph_path: tuple[str, ...] | None = Field(default=None, alias="graphPath")
    is_delta: bool | None = Field(default=None, alias="isDelta")
    is_in_process: bool | None = Field(default=None, alias="isInProcess")
    sort: float | None = None
    state: dict[str, Any] | None = None
    # Hosted sentinels and error lines (field notes).
    type: str | None = None
    code: str | None = None
    error: Any = None
    usage: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        """Returns: the message as JSON with wire names; only the fields that were set."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    @property
    def chat_id(self) -> str | None:
        """Returns: ``state.chatId`` when this line carries one (``__cutoff__``, ``__state__``)."""
        value = (self.state or {}).get("chatId")
        return value if isinstance(value, str) else None

    @property
    def is_final_answer(self) -> bool:
        """The interface's final-answer rule (interface, "Extracting the final answer").

        Returns:
            True when ``role == "assistant"``, ``graphPath[0] == "final"`` and
            ``len(graphPath) <= 2``.
        """
        path = self.graph_path
        return (
            self.role == "assistant"
            and bool(path)
            and path is not None
            and path[0] == wire.GRAPH_FINAL
            and len(path) <= 2
        )

    @property
    def is_sentinel(self) -> bool:
        """True for the ids ``__cutoff__``.

        ``__state__``, ``__aborted__``, ``__suspended__``, ``__usage__`` (field notes,
        "Lines that the interface does not list").
        """
        return self.id in wire.SENTINEL_IDS

    @property
    def is_error_line(self) -> bool:
        """True for a bare ``{"error": ...}`` line sent inside an HTTP 200 (field notes)."""
        return self.error is not None and self.id is None
