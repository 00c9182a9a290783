"""When a session must be presumed lost, and when to renew it (no IO).

The server restarts a session's TTL when it *handles* a keepalive, which is
after the client sent it, and a leader change only ever lengthens a
session. So a session cannot expire before

    (send time of the last successful keepalive) + TTL.

``lost`` fires a margin earlier, at ``renewed + ttl - margin``, with

    margin = max(ttl / 10, 500 ms), at most ttl / 2.

The margin is the application's time to notice and stop (a thread
wake-up on a busy machine, aborting a write in flight) before another
client can be granted its lock. 10 % scales with the TTL the caller
chose; the 500 ms floor is there because reaction time does not shrink
with the TTL; the ttl / 2 cap keeps the deadline after the first
keepalives (sent every ttl / 3) for very short TTLs. This is the Rust
client's rule (``raftlock_client::session``), kept identical on purpose.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Optional

from .types import LostReason

log = logging.getLogger("raftlock")


def lost_margin(ttl: float) -> float:
    """Seconds before the earliest possible expiry at which ``lost`` fires."""
    return min(max(ttl / 10.0, 0.5), ttl / 2.0)


class LeaseClock:
    """A session's renewal times, shared by its keepalive and its watchdog.

    Times are ``time.monotonic()`` seconds. Thread-safe, and never held
    across IO, so the asyncio session uses it as it is.
    """

    def __init__(self, ttl: float, renewed: float) -> None:
        self._lock = threading.Lock()
        self._ttl = ttl
        self._renewed = renewed

    @property
    def ttl(self) -> float:
        """The TTL the cluster granted, in seconds."""
        with self._lock:
            return self._ttl

    @property
    def renewed(self) -> float:
        """Send time of the last keepalive (or the open) that succeeded."""
        with self._lock:
            return self._renewed

    def renew(self, sent: float, ttl: float) -> None:
        """A keepalive sent at ``sent`` succeeded; the cluster granted ``ttl``.
        Out-of-order answers never move the deadline back."""
        with self._lock:
            self._renewed = max(self._renewed, sent)
            self._ttl = ttl

    def lost_at(self) -> float:
        """When ``lost`` fires unless a keepalive succeeds first."""
        with self._lock:
            return self._renewed + self._ttl - lost_margin(self._ttl)

    def next_keepalive(self) -> float:
        """When to renew after a success: every ttl / 3."""
        with self._lock:
            return self._renewed + self._ttl / 3.0

    def retry_interval(self) -> float:
        """How soon to retry after a failed keepalive: ttl / 10, 50 ms to 1 s."""
        with self._lock:
            return min(max(self._ttl / 10.0, 0.05), 1.0)


class LeaseHolder:
    """What the blocking and the asyncio session share: their identity
    and the read side of their lease clock."""

    id: str
    """The session id (32 hex digits)."""
    owner: str
    """The free label the session was opened with."""
    lost_reason: Optional[LostReason]
    """Why ``lost`` fired; ``None`` while it has not."""
    _clock: LeaseClock
    _on_lost: Optional[Callable[[LostReason], None]]

    @property
    def ttl(self) -> float:
        """The TTL the cluster granted, in seconds."""
        return self._clock.ttl

    @property
    def last_renewed(self) -> float:
        """``time.monotonic()`` send time of the last successful keepalive
        (or of the open)."""
        return self._clock.renewed

    @property
    def lost_at(self) -> float:
        """When ``lost`` fires unless a keepalive succeeds first."""
        return self._clock.lost_at()

    def _announce_lost(self, reason: LostReason) -> None:
        """Once ``lost`` has fired for ``reason``: logs it and calls
        ``on_lost``, except for a deliberate close."""
        if reason is LostReason.CLOSED:
            return
        log.info("session %s lost: %s", self.id, reason.value)
        if self._on_lost is not None:
            try:
                self._on_lost(reason)
            except Exception:  # the callback's own bug must not kill the thread or task that noticed
                log.exception("session %s: on_lost callback failed", self.id)

    def __repr__(self) -> str:
        reason = self.lost_reason.value if self.lost_reason else None
        return f"{type(self).__name__}(id={self.id!r}, ttl={self.ttl:g}, lost={reason})"
