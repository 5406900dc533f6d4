"""Who a request acts as: the checks every endpoint applies to an identity, one rule for all.

Issue 12 (an attacker and a real client): ``externalId`` together with ``internalId`` named one
user for chat and another for abort; an empty attribute value read as "no restriction"; unknown
groups were taken silently. Rules here (interface, "Session settings"; field notes, "Generate
session": unknown attribute or group names are errors):

- :func:`identity_key` decides the user of chat, abort and generate-session; both ids: 400.
- Attribute names must be declared, values non-empty strings; groups must be declared.
- :func:`live_user` is the SQL condition "this user exists now": an ephemeral user past its
  lifetime is gone everywhere, purged or not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import ColumnElement, or_

from chat_api.errors import InvalidRequestError, UndeclaredAttributeError, UndeclaredGroupError
from chat_api.state import tables
from models.chat import UserIdentity


def live_user(now: float) -> ColumnElement[bool]:
    """Returns the condition that a ``users`` row is alive at ``now``.

    Alive: persisted, or an ephemeral user before its ``expires_at_s``; expired means gone
    everywhere (issue 12).
    """
    users = tables.users
    return or_(users.c.expires_at_s.is_(None), users.c.expires_at_s > now)


def check_declared(names: Iterable[str], declared: frozenset[str]) -> None:
    """Raises: UndeclaredAttributeError when a name of ``names`` is not in ``declared``."""
    unknown = sorted(set(names) - declared)
    if unknown:
        raise UndeclaredAttributeError(unknown, declared=sorted(declared))


def check_groups(groups: Iterable[str], declared: frozenset[str]) -> None:
    """Checks that every group is declared.

    Raises:
        UndeclaredGroupError: A group is not declared (field notes, "Generate session": unknown
            attribute or group names are errors).
    """
    unknown = sorted(set(groups) - declared)
    if unknown:
        raise UndeclaredGroupError(unknown, declared=sorted(declared))


def check_attribute_values(attributes: Mapping[str, object]) -> None:
    """Checks that attribute values are non-empty strings.

    A number or boolean is not silently turned into text, and an empty value never widens access
    (issue 12).

    Raises:
        InvalidRequestError: Naming ``userAttributes.<name>``.
    """
    for name, value in attributes.items():
        if not isinstance(value, str):
            raise InvalidRequestError(
                f"userAttributes.{name}: the value must be a string, not {type(value).__name__}"
            )
        if not value.strip():
            raise InvalidRequestError(
                f"userAttributes.{name}: the value is empty; omit the attribute instead"
            )


def identity_key(identity: UserIdentity) -> str:
    """The one rule deciding who a request acts as, for chat, abort and generate-session.

    Returns:
        ``"external:<id>"`` or ``"internal:<email>"`` (``ChatUser.key``).

    Raises:
        InvalidRequestError: Both ``externalId`` and ``internalId`` are given (issue 12: they
            would name two users, one for chat and another for abort).
    """
    if identity.external_id is not None and identity.internal_id is not None:
        raise InvalidRequestError("sessionSettings: give either externalId or internalId, not both")
    if identity.internal_id is not None:
        return f"internal:{identity.internal_id}"
    return f"external:{identity.external_id}"
