"""Local turns: one mutex per (session, lock name), blocking or asyncio.

The cluster keeps one node per session and lock, and an acquire of a lock
the session already holds or waits on returns that same node. Two callers
of one session locking the same name would therefore share one grant, and
the first release would end both. So each session lets one local caller
at a time queue on a name, and hands the turn on only after the release
was answered, so that a new acquire cannot be given the very node being
released.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Dict, Generic, TypeVar

L = TypeVar("L")


@dataclass
class _Entry(Generic[L]):
    lock: L
    users: int = 0


class Turns(Generic[L]):
    """A mutex per name, created on first use and dropped with its last user."""

    def __init__(self, new_lock: Callable[[], L]) -> None:
        self._new_lock = new_lock
        self._guard = threading.Lock()
        self._turns: Dict[str, _Entry[L]] = {}

    def enter(self, name: str) -> L:
        """The name's mutex (not yet taken); pair with :meth:`leave`."""
        with self._guard:
            entry = self._turns.get(name)
            if entry is None:
                entry = self._turns[name] = _Entry(self._new_lock())
            entry.users += 1
            return entry.lock

    def leave(self, name: str) -> None:
        """One user of the name's mutex is done with it."""
        with self._guard:
            entry = self._turns[name]
            entry.users -= 1
            if entry.users == 0:
                del self._turns[name]
