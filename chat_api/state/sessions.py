"""Embed sessions made by generate-session, kept in the state database.

``POST /api/v1/embed/generate-session`` returns a ``sessionId`` for signed embedding
(interface, "3. Generate session"). Hosted sessions are single-use and valid for 5 minutes, and
a revoke call exists (field notes, "Generate session and signed embedding"); this store keeps
those rules:

- :meth:`SessionStore.create` issues a random 43-character token; only its SHA-256 is stored.
- :meth:`SessionStore.redeem` (the embed page) succeeds once, before ``expires_at_s``, unless
  revoked; the check and the marking are one conditional ``UPDATE``, so two concurrent loads
  of the same session cannot both succeed.
- A session whose user is gone (an ephemeral user past its lifetime, purged or not) opens
  nothing: :class:`~chat_api.errors.SessionUserGoneError` (404), as its threads are gone too.
- :meth:`SessionStore.revoke` voids a session (``POST /api/v1/embed/session/revoke``).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select, update

from chat_api.errors import SessionInvalidError, SessionNotFoundError, SessionUserGoneError
from chat_api.state import tables
from chat_api.state.database import StateDatabase, key_digest
from chat_api.state.identity import live_user
from models.chat import UserIdentity

logger = logging.getLogger(__name__)

SESSION_TTL_S = 300.0
"""Lifetime of an embed session in seconds (field notes: "valid for 5 minutes")."""
PURGE_AFTER_S = 24 * 3600.0
"""Sessions are deleted this long after they expired (kept a day to answer "expired")."""


@dataclass(frozen=True)
class EmbedSession:
    """A generated session.

    Attributes:
        session_id: The token given to the caller (only returned by :meth:`SessionStore.create`;
            empty when read back, since only its hash is stored).
        user_key: Owner key of the user the session acts as (``"external:alice"``).
        identity: The flattened identity of the generate-session request (wire names).
        expires_at_s: Epoch seconds after which the session is void.
    """

    session_id: str
    user_key: str
    identity: dict[str, Any]
    expires_at_s: float


class SessionStore:
    """Embed sessions of one account.

    Args:
        state: The state database (account, clock).
        ttl_s: Lifetime of a session in seconds.
    """

    def __init__(self, state: StateDatabase, *, ttl_s: float = SESSION_TTL_S) -> None:
        self._state = state
        self.ttl_s = ttl_s
        self.created = 0
        self.redeemed = 0

    def __repr__(self) -> str:
        return f"SessionStore(ttl_s={self.ttl_s} created={self.created} redeemed={self.redeemed})"

    def create(self, identity: UserIdentity, *, user_key: str) -> EmbedSession:
        """Issues a session for ``identity``.

        Returns:
            The session with its ``session_id``, valid for ``ttl_s`` seconds.
        """
        now = self._state.clock()
        session = EmbedSession(
            session_id=secrets.token_urlsafe(32),
            user_key=user_key,
            identity=identity.to_wire(),
            expires_at_s=now + self.ttl_s,
        )
        sessions = tables.embed_sessions
        with self._state.engine.begin() as conn:
            conn.execute(delete(sessions).where(sessions.c.expires_at_s < now - PURGE_AFTER_S))
            conn.execute(
                insert(sessions).values(
                    session_sha256=key_digest(session.session_id),
                    account=self._state.account,
                    user_key=user_key,
                    identity=session.identity,
                    created_at_s=now,
                    expires_at_s=session.expires_at_s,
                )
            )
        self.created += 1
        logger.info("embed session created user=%s ttl_s=%s", user_key, self.ttl_s)
        return session

    def redeem(self, session_id: str) -> EmbedSession:
        """Uses the session (single use).

        Returns:
            The session (``session_id`` empty).

        Raises:
            SessionInvalidError: Unknown, expired, already used or revoked (403).
            SessionUserGoneError: The session's user no longer exists (404).
        """
        now = self._state.clock()
        sessions = tables.embed_sessions
        digest = key_digest(session_id)
        mine = (sessions.c.session_sha256 == digest) & (sessions.c.account == self._state.account)
        users = tables.users
        live = select(users.c.id).where(users.c.account == self._state.account, live_user(now))
        user_key = users.c.kind + ":" + users.c.user_id
        alive = live.where(user_key == sessions.c.user_key).exists()
        with self._state.engine.begin() as conn:
            used = conn.execute(
                update(sessions)
                .where(
                    mine,
                    sessions.c.used_at_s.is_(None),
                    sessions.c.revoked_at_s.is_(None),
                    sessions.c.expires_at_s > now,
                    alive,
                )
                .values(used_at_s=now)
            ).rowcount
            row = conn.execute(select(sessions).where(mine)).mappings().first()
            user_alive = row is not None and (
                conn.execute(live.where(user_key == row["user_key"])).first() is not None
            )
        if row is None:
            raise SessionInvalidError("unknown")
        if used != 1:
            reason = _why_void(row, now)
            if reason == "unknown" and not user_alive:
                raise SessionUserGoneError()
            raise SessionInvalidError(reason)
        self.redeemed += 1
        return EmbedSession("", row["user_key"], dict(row["identity"]), row["expires_at_s"])

    def revoke(self, session_id: str) -> None:
        """Voids the session; revoking twice is harmless.

        Raises:
            SessionNotFoundError: No such session (404).
        """
        sessions = tables.embed_sessions
        mine = (sessions.c.session_sha256 == key_digest(session_id)) & (
            sessions.c.account == self._state.account
        )
        with self._state.engine.begin() as conn:
            found = conn.execute(
                update(sessions)
                .where(mine)
                .values(revoked_at_s=self._state.clock())
                .returning(sessions.c.session_sha256)
            ).first()
        if found is None:
            raise SessionNotFoundError()
        logger.info("embed session revoked")


def _why_void(row: Any, now: float) -> str:
    if row["revoked_at_s"] is not None:
        return "revoked"
    if row["used_at_s"] is not None:
        return "already used"
    return "expired" if row["expires_at_s"] <= now else "unknown"
