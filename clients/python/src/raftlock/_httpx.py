"""What an httpx exception means for a request: never sent, or sent and lost."""

from __future__ import annotations

import httpx

from ._failover import Lost, NotSent, Outcome
from ._settings import Settings


def outcome_of(error: httpx.TransportError) -> Outcome:
    """Connect failures and pool waits happen before anything is sent;
    every other transport error (read timeout, reset, a dropped connection)
    may come after the server got the request."""
    why = f"{type(error).__name__}: {error}".rstrip(": ")
    if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return NotSent(why)
    return Lost(why)


def timeouts(settings: Settings, budget: float) -> httpx.Timeout:
    """httpx timeouts for one attempt that may take ``budget`` seconds."""
    return httpx.Timeout(budget, connect=min(settings.connect_timeout, budget))


def stream_timeouts(settings: Settings) -> httpx.Timeout:
    """For an SSE stream: each read may wait the idle timeout."""
    return httpx.Timeout(
        settings.timeout,
        connect=settings.connect_timeout,
        read=settings.observe_idle_timeout,
    )


HEADERS = {"Accept": "application/json", "User-Agent": "raftlock-python"}
SSE_HEADERS = {"Accept": "text/event-stream", "User-Agent": "raftlock-python"}
