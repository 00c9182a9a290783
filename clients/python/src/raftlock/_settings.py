"""A client's settings, shared by the blocking and the asyncio client."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from ._failover import RetryPolicy

MAX_WAIT = 300.0
"""The server's default cap on one request's wait, in seconds."""


@dataclass(frozen=True)
class Settings:
    """Every knob of a client, with its default; all durations in seconds."""

    timeout: float = 10.0
    """How long to wait for the answer to a request that does not long-poll;
    added to the wait of a long poll. Above the servers' default wait for a
    leader (3 s) plus a commit."""
    connect_timeout: float = 1.0
    """How long a TCP connect may take before the endpoint counts as down."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Retries of ``no_leader``, unreachable endpoints and lost answers."""
    long_poll: float = 60.0
    """Longest single acquire or campaign request (the server caps one at
    5 minutes by default); longer waits are made of several."""
    session_ttl: float = 15.0
    """TTL of the session ``Client.lock`` opens by itself."""
    observe_idle_timeout: float = 60.0
    """An observe stream silent this long is reconnected (the server sends
    a keep-alive comment every 15 s)."""

    def __post_init__(self) -> None:
        for name in ("timeout", "connect_timeout", "session_ttl", "observe_idle_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 seconds")
        if not 0 < self.long_poll <= MAX_WAIT:
            raise ValueError(f"long_poll must be in (0, {MAX_WAIT:g}] seconds")


def default_owner() -> str:
    """The owner label sessions get unless told otherwise: host and pid,
    so ``raftlock locks`` shows where a holder runs."""
    return f"python:{socket.gethostname()}:{os.getpid()}"
