"""Embed sessions made by generate-session, held in memory.

``POST /api/v1/embed/generate-session`` returns a ``sessionId`` for signed embedding
(interface, "3. Generate session"). Hosted sessions are valid for 5 minutes (field notes,
"Generate session and signed embedding"); that lifetime is kept here. Single use, revoke and the
embed page that redeems a session come later.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from models.chat import UserIdentity

logger = logging.getLogger(__name__)

SESSION_TTL_S = 300.0
"""Lifetime of an embed session in seconds (field notes: "valid for 5 minutes")."""


@dataclass(frozen=True)
class EmbedSession:
    """A generated session.

    Attributes:
        session_id: Random URL-safe token (43 characters).
        identity: Who the session acts as (the flattened identity of the request).
        expires_at: ``clock()`` value after which the session is void (monotonic seconds).
    """

    session_id: str
    identity: UserIdentity
    expires_at: float


class SessionStore:
    """Embed sessions by id, dropped once expired.

    Args:
        ttl_s: Lifetime of a session in seconds.
        clock: Monotonic seconds (tests pass a fake clock).
    """

    def __init__(
        self, *, ttl_s: float = SESSION_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._sessions: dict[str, EmbedSession] = {}
        self._ttl_s = ttl_s
        self._clock = clock
        self.created = 0

    def __repr__(self) -> str:
        return f"SessionStore(sessions={len(self._sessions)} created={self.created})"

    def create(self, identity: UserIdentity) -> EmbedSession:
        """Returns: a new session for ``identity``, valid for ``ttl_s`` seconds."""
        self._purge()
        session = EmbedSession(
            session_id=secrets.token_urlsafe(32),
            identity=identity,
            expires_at=self._clock() + self._ttl_s,
        )
        self._sessions[session.session_id] = session
        self.created += 1
        logger.info("embed session created user=%s", identity.user_key)
        return session

    def get(self, session_id: str) -> EmbedSession | None:
        """Returns: the session ``session_id``, or None when unknown or expired."""
        session = self._sessions.get(session_id)
        if session is None or session.expires_at <= self._clock():
            self._sessions.pop(session_id, None)
            return None
        return session

    def _purge(self) -> None:
        now = self._clock()
        for session_id in [s for s, v in self._sessions.items() if v.expires_at <= now]:
            del self._sessions[session_id]
