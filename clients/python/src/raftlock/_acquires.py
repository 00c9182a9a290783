"""What each primitive's acquire sends, free of IO, written once for the
blocking and the asyncio client: the session's local turn it takes, the
long-poll request of each wait slice, and the release that cleans up an
abandoned wait. :func:`raftlock.lock.take` and :func:`raftlock.aio.lock.take`
wait on it, each with its own sockets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, List, Optional, Sequence, TypeVar

from . import _api
from ._waiting import Slice
from .types import Grant

G = TypeVar("G")

READ = "read"
WRITE = "write"


@dataclass(frozen=True)
class Acquire(Generic[G]):
    """One primitive's acquire, as its wait needs it."""

    key: str
    """The session's local turn: one caller per session and queue at a time."""
    label: str
    """Names the wait in ``Timeout`` and ``LockHeld`` messages."""
    request: Callable[[Slice], _api.Op[G]]
    """The long poll of one wait slice."""
    cleanup: _api.Op[None]
    """Sent when a wait ends with an entry maybe left queued."""


def rw_key(name: str) -> str:
    return f"rwlock:{name}"


def semaphore_key(name: str) -> str:
    return f"semaphore:{name}"


def multi_key(names: Sequence[str]) -> str:
    return "multilock:" + ",".join(names)


def lock(name: str, session_id: str, lock_delay: Optional[float]) -> Acquire[Grant]:
    return Acquire(
        name,
        name,
        lambda piece: _api.acquire(name, session_id, piece.wait, piece.keep_queued, lock_delay),
        _api.release(name, session_id),
    )


def rwlock(name: str, session_id: str, mode: str) -> Acquire[Grant]:
    if mode not in (READ, WRITE):
        raise ValueError(f"mode must be {READ!r} or {WRITE!r}, not {mode!r}")
    return Acquire(
        rw_key(name),
        name,
        lambda piece: _api.acquire_rwlock(name, session_id, mode, piece.wait, piece.keep_queued),
        _api.release_rwlock(name, session_id),
    )


def semaphore(name: str, session_id: str, permits: int) -> Acquire[Grant]:
    if permits < 1:
        raise ValueError(f"permits must be at least 1, not {permits}")
    return Acquire(
        semaphore_key(name),
        name,
        lambda piece: _api.acquire_semaphore(name, session_id, permits, piece.wait, piece.keep_queued),
        _api.release_semaphore(name, session_id),
    )


def multi(locks: List[str], session_id: str) -> Acquire[List[Grant]]:
    if not locks:
        raise ValueError("a multi-lock names at least one lock")
    return Acquire(
        multi_key(locks),
        ",".join(locks),
        lambda piece: _api.acquire_multi(locks, session_id, piece.wait, piece.keep_queued),
        _api.release_multi(locks, session_id),
    )
