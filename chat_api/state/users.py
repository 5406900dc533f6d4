"""Chat users: created from ``sessionSettings``, ephemeral by default, internal ones by an admin.

Rules (``chat-api-interface.md``, "What the service does", "Session settings", "Limits"):

- An ``externalId`` user is created by the first request that names it. It is ephemeral: it is
  removed, with its threads, ``ephemeralTtlSeconds`` after its creation (default one week) and
  never lives longer. ``isEphemeral: false`` persists it; once persisted it stays persisted.
  Each request refreshes its email, groups, attributes and security context (the request's
  ``sessionSettings`` are the user's current identity).
- At most ``max_external_users`` (default 10,000) live external users per account; the request
  that would create one more is refused (:class:`~chat_api.errors.UserLimitError`, 403).
- An ``internalId`` must name an internal user created beforehand (``chatscribe api users add``
  or ``CHATSCRIBE_INTERNAL_USERS``); that user's own groups and attributes apply. The wire model
  already refuses ``userAttributes``/``groups``/``securityContext`` next to ``internalId``.
- One rule names the user of a request (:func:`chat_api.state.identity.identity_key`):
  ``externalId`` together with ``internalId`` is a 400 for chat, abort and generate-session.
- Attribute values are non-empty strings; groups must be declared
  (``CHATSCRIBE_USER_GROUPS``); both are 400s (field notes: unknown attribute or group names
  are errors; issue 12: an empty value never widens access).
- Every ``userAttributes`` name must be declared for the account first (``CHATSCRIBE_USER_
  ATTRIBUTES``); an undeclared name is a 400, as the hosted admin panel requires ("Each
  attribute must first be configured in the admin panel").

Expired users are purged lazily by :meth:`UserDirectory.resolve` (and by ``chatscribe api users
purge``). Creation is serialised by a lock, so the limit holds within one process; several
processes sharing one database may overshoot it by their number.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, RowMapping, delete, func, insert, select, update

from chat_api.errors import InvalidRequestError, UnknownInternalUserError, UserLimitError
from chat_api.sql.policies import UserContext
from chat_api.state import tables
from chat_api.state.database import StateDatabase
from chat_api.state.identity import (
    check_attribute_values,
    check_declared,
    check_groups,
    identity_key,
)
from models.chat import SessionSettings, UserIdentity

logger = logging.getLogger(__name__)

DEFAULT_EPHEMERAL_TTL_S = 7 * 24 * 3600
"""Lifetime of an ephemeral user: one week (interface, "Limits")."""
DEFAULT_MAX_EXTERNAL_USERS = 10_000
"""External users per account (interface, "Limits")."""
MAX_EPHEMERAL_TTL_S = 10 * 366 * 24 * 3600
"""Longest ``ephemeralTtlSeconds`` accepted: ten years."""


@dataclass(frozen=True)
class ChatUser:
    """A resolved user.

    Attributes:
        row_id: ``users.id``.
        key: ``"external:<id>"`` or ``"internal:<email>"``, the owner key of threads.
        kind: ``"external"`` or ``"internal"``.
        context: Groups, attributes (values as text) and security context for row-level security.
        expires_at_s: When an ephemeral user is removed (epoch seconds); None when persisted.
    """

    row_id: int
    key: str
    kind: str
    context: UserContext
    expires_at_s: float | None


def attribute_text(value: object) -> str:
    """Attribute values are text (requests with other values are refused before)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class UserDirectory:
    """Users of one account in the state database.

    Args:
        state: The state database (its ``account`` and ``clock``).
        declared_attributes: User attribute names the account accepts.
        declared_groups: Group names the account accepts (others are a 400).
        max_external_users: Most live external users of the account.
        default_ttl_s: Lifetime of an ephemeral user without ``ephemeralTtlSeconds``.
    """

    def __init__(
        self,
        state: StateDatabase,
        *,
        declared_attributes: Iterable[str],
        declared_groups: Iterable[str] | None = None,
        max_external_users: int = DEFAULT_MAX_EXTERNAL_USERS,
        default_ttl_s: float = DEFAULT_EPHEMERAL_TTL_S,
    ) -> None:
        self._state = state
        self.declared_attributes = frozenset(declared_attributes)
        self.declared_groups = frozenset(declared_groups or ())
        self.max_external_users = max_external_users
        self.default_ttl_s = default_ttl_s
        self._lock = threading.Lock()
        self.purged = 0

    def __repr__(self) -> str:
        return f"UserDirectory(account={self._state.account!r} purged={self.purged})"

    def resolve(self, identity: UserIdentity) -> ChatUser:
        """Finds or creates the user a request acts as (rules in the module docstring).

        Args:
            identity: ``sessionSettings`` of a chat request or the body of generate-session.

        Returns:
            The user, with the identity row-level security applies.

        Raises:
            UndeclaredAttributeError: A ``userAttributes`` name is not declared (400).
            UnknownInternalUserError: ``internalId`` names no internal user (400).
            UserLimitError: Creating the external user would pass the limit (403).
        """
        self.check(identity)
        with self._lock, self._state.engine.begin() as conn:
            self._purge(conn)
            if identity.internal_id is not None:
                row = self._find(conn, "internal", identity.internal_id)
                if row is None:
                    raise UnknownInternalUserError(identity.internal_id, self._state.account)
                return _user(row)
            assert identity.external_id is not None
            row = self._find(conn, "external", identity.external_id)
            if row is None:
                return self._create_external(conn, identity)
            return self._refresh_external(conn, row, identity)

    def check(self, identity: UserIdentity) -> str:
        """Checks an identity without touching the database.

        Returns:
            Its owner key (:func:`chat_api.state.identity.identity_key`).

        Raises:
            InvalidRequestError: Two ids, a non-string or empty attribute value, or an
                ``ephemeralTtlSeconds`` over ``MAX_EPHEMERAL_TTL_S``.
            UndeclaredAttributeError: An attribute name is not declared.
            UndeclaredGroupError: A group is not declared.
        """
        key = identity_key(identity)
        check_declared(identity.attributes(), self.declared_attributes)
        check_attribute_values(identity.attributes())
        check_groups(identity.groups or (), self.declared_groups)
        _ttl_s(identity)
        return key

    def purge_expired(self) -> int:
        """Removes expired ephemeral users and their threads. Returns: users removed."""
        with self._lock, self._state.engine.begin() as conn:
            return self._purge(conn)

    def add_internal(
        self,
        email: str,
        *,
        groups: Sequence[str] = (),
        attributes: Mapping[str, str] | None = None,
    ) -> ChatUser:
        """Creates or replaces the internal user ``email`` (``chatscribe api users add``).

        Raises:
            UndeclaredAttributeError: An attribute name is not declared for the account.
            pydantic.ValidationError: ``email`` is not an email address.
        """
        UserIdentity(internal_id=email)
        attributes = dict(attributes or {})
        check_declared(attributes, self.declared_attributes)
        check_attribute_values(attributes)
        check_groups(groups, self.declared_groups)
        values = {
            "groups": list(groups),
            "attributes": {k: attribute_text(v) for k, v in attributes.items()},
            "security_context": {},
        }
        with self._lock, self._state.engine.begin() as conn:
            row = self._find(conn, "internal", email)
            if row is None:
                self._insert(conn, "internal", email, values, expires_at_s=None)
            else:
                conn.execute(
                    update(tables.users).where(tables.users.c.id == row["id"]).values(**values)
                )
            found = self._find(conn, "internal", email)
        assert found is not None
        logger.info("internal user saved email=%s groups=%s", email, list(groups))
        return _user(found)

    def remove(self, kind: str, user_id: str) -> bool:
        """Removes a user and its threads. Returns: False when there was no such user."""
        with self._lock, self._state.engine.begin() as conn:
            row = self._find(conn, kind, user_id)
            if row is None:
                return False
            _delete_users(conn, [row["id"]])
        return True

    def list_users(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Returns: the account's users as dicts (``kind``, ``user_id``, ``groups``, ...)."""
        users = tables.users
        query = select(users).where(users.c.account == self._state.account).order_by(users.c.id)
        if kind is not None:
            query = query.where(users.c.kind == kind)
        with self._state.engine.connect() as conn:
            return [dict(row) for row in conn.execute(query).mappings()]

    def count_external(self) -> int:
        """Returns: live external users of the account."""
        with self._state.engine.connect() as conn:
            return self._count_external(conn)

    # -- inside a transaction ---------------------------------------------------------------

    def _find(self, conn: Connection, kind: str, user_id: str) -> RowMapping | None:
        users = tables.users
        query = select(users).where(
            users.c.account == self._state.account,
            users.c.kind == kind,
            users.c.user_id == user_id,
        )
        return conn.execute(query).mappings().first()

    def _count_external(self, conn: Connection) -> int:
        users = tables.users
        query = select(func.count()).where(
            users.c.account == self._state.account, users.c.kind == "external"
        )
        return int(conn.execute(query).scalar_one())

    def _create_external(self, conn: Connection, identity: UserIdentity) -> ChatUser:
        if self._count_external(conn) >= self.max_external_users:
            raise UserLimitError(self._state.account, self.max_external_users)
        ephemeral = _is_ephemeral(identity)
        ttl_s = _ttl_s(identity) or self.default_ttl_s
        expires_at_s = self._state.clock() + ttl_s if ephemeral else None
        assert identity.external_id is not None
        self._insert(
            conn, "external", identity.external_id, _identity_values(identity), expires_at_s
        )
        row = self._find(conn, "external", identity.external_id)
        assert row is not None
        logger.info(
            "external user created user_id=%s ephemeral=%s expires_at_s=%s",
            identity.external_id,
            ephemeral,
            expires_at_s,
        )
        return _user(row)

    def _refresh_external(
        self, conn: Connection, row: RowMapping, identity: UserIdentity
    ) -> ChatUser:
        values = {**_identity_values(identity), "last_seen_at_s": self._state.clock()}
        if not _is_ephemeral(identity):
            values |= {"is_ephemeral": False, "expires_at_s": None}
        conn.execute(update(tables.users).where(tables.users.c.id == row["id"]).values(**values))
        return _user({**row, **values})

    def _insert(
        self,
        conn: Connection,
        kind: str,
        user_id: str,
        values: Mapping[str, Any],
        expires_at_s: float | None,
    ) -> None:
        now = self._state.clock()
        conn.execute(
            insert(tables.users).values(
                account=self._state.account,
                kind=kind,
                user_id=user_id,
                is_ephemeral=expires_at_s is not None,
                expires_at_s=expires_at_s,
                created_at_s=now,
                last_seen_at_s=now,
                **values,
            )
        )

    def _purge(self, conn: Connection) -> int:
        users = tables.users
        expired = select(users.c.id).where(
            users.c.expires_at_s.is_not(None), users.c.expires_at_s <= self._state.clock()
        )
        ids = list(conn.execute(expired).scalars())
        if ids:
            _delete_users(conn, ids)
            self.purged += len(ids)
            logger.info("ephemeral users removed count=%d", len(ids))
        return len(ids)


def _delete_users(conn: Connection, ids: list[int]) -> None:
    """Deletes users ``ids`` with their threads, turns, messages and embed sessions."""
    chat_ids = select(tables.threads.c.chat_id).where(tables.threads.c.user_row.in_(ids))
    conn.execute(delete(tables.messages).where(tables.messages.c.chat_id.in_(chat_ids)))
    conn.execute(delete(tables.turns).where(tables.turns.c.chat_id.in_(chat_ids)))
    conn.execute(delete(tables.threads).where(tables.threads.c.user_row.in_(ids)))
    keys = select(tables.users.c.kind + ":" + tables.users.c.user_id).where(
        tables.users.c.id.in_(ids)
    )
    conn.execute(delete(tables.embed_sessions).where(tables.embed_sessions.c.user_key.in_(keys)))
    conn.execute(delete(tables.users).where(tables.users.c.id.in_(ids)))


def _is_ephemeral(identity: UserIdentity) -> bool:
    if isinstance(identity, SessionSettings) and identity.is_ephemeral is not None:
        return identity.is_ephemeral
    return True


def _ttl_s(identity: UserIdentity) -> float | None:
    """Returns the requested lifetime of an ephemeral user in seconds, or None when none is asked.

    Raises:
        InvalidRequestError: The lifetime is over ``MAX_EPHEMERAL_TTL_S`` (a number such as
            10**400 has no float and no meaning as a lifetime).
    """
    if isinstance(identity, SessionSettings) and identity.ephemeral_ttl_seconds is not None:
        if identity.ephemeral_ttl_seconds > MAX_EPHEMERAL_TTL_S:
            raise InvalidRequestError(
                f"sessionSettings.ephemeralTtlSeconds: at most {MAX_EPHEMERAL_TTL_S} seconds "
                "(ten years); use isEphemeral: false to keep a user"
            )
        return float(identity.ephemeral_ttl_seconds)
    return None


def _identity_values(identity: UserIdentity) -> dict[str, Any]:
    return {
        "email": identity.email,
        "groups": list(identity.groups or ()),
        "attributes": {k: attribute_text(v) for k, v in identity.attributes().items()},
        "security_context": dict(identity.security_context or {}),
    }


def _user(row: Mapping[str, Any] | RowMapping) -> ChatUser:
    context = UserContext(
        groups=tuple(row["groups"]),
        attributes=dict(row["attributes"]),
        security_context=dict(row["security_context"]),
    )
    return ChatUser(
        row_id=row["id"],
        key=f"{row['kind']}:{row['user_id']}",
        kind=row["kind"],
        context=context,
        expires_at_s=row["expires_at_s"],
    )
