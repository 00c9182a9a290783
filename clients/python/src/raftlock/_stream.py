"""Following an SSE stream across reconnects, free of IO: what the blocking
and the asyncio client share for ``observe`` and ``watch``.

Each client opens the stream with failover and reads its bytes; a
:class:`Feed` turns the bytes into items (:class:`raftlock._sse.LeaderFeed`,
:class:`raftlock._watch.WatchFeed`), and :class:`Reconnects` decides, after
each drop, how long to pause or that it is time to give up.
"""

from __future__ import annotations

import logging
from typing import Iterator, Protocol, TypeVar

from ._failover import RetryPolicy
from .errors import Unavailable

T_co = TypeVar("T_co", covariant=True)
log = logging.getLogger("raftlock")

CLOSED = "the server closed the stream"
"""Why a connection ended when its stream ended without a transport error."""


class Feed(Protocol[T_co]):
    """Raw stream bytes in, items out, across reconnects."""

    events: int
    """Events read, repeats included: a connection that read one has worked."""
    done: bool
    """True once the stream is over for good (no reconnect)."""

    def reconnected(self) -> None:
        """A new connection starts: drop any half-read event."""

    def push(self, chunk: bytes) -> Iterator[T_co]:
        """Yields each new item in ``chunk``."""


class Reconnects:
    """The drops of one followed stream: after ``retry.attempts`` drops in a
    row with no event between them, the stream is given up."""

    def __init__(self, what: str, retry: RetryPolicy) -> None:
        self._what = what
        """The stream, for the log and the error (``observe orders``)."""
        self._retry = retry
        self._drops = 0

    def read(self, feed: Feed[object], before: int) -> None:
        """After a chunk: an event read since ``before`` (the feed's count
        then) shows the connection worked, so the count starts again."""
        if feed.events > before:
            self._drops = 0

    def dropped(self, why: str) -> float:
        """A connection ended for ``why``: the pause before the next one, or
        :class:`~raftlock.errors.Unavailable` when it is time to give up."""
        self._drops += 1
        log.debug("%s reconnects: %s", self._what, why)
        if self._drops >= self._retry.attempts:
            raise Unavailable(f"{self._what}: {why}")
        return self._retry.backoff(self._drops)
