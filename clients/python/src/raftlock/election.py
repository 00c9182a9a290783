# Generated from raftlock/aio/election.py by clients/python/gen_sync.py:
# do not edit; edit the asyncio module and run the script again.
"""``Election``: leader election over a queue, as in etcd's concurrency
package. The first candidate in line leads; its value (an address, an id)
is what followers read or observe."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

from . import _api
from ._waiting import WaitPlan
from .types import Grant, Leader

if TYPE_CHECKING:
    from .session import Session


class Election:
    """A named election, joined through a session. Leadership lasts until
    :meth:`resign` or the session's end; the session's ``lost`` says when
    it may be over."""

    def __init__(self, session: Session, name: str) -> None:
        self.session = session
        self.name = name

    def campaign(self, value: str, timeout: Optional[float] = None) -> Grant:
        """Joins as a candidate with ``value`` and waits until elected
        (``timeout`` seconds at most; ``None``: no limit; 0: only if nobody
        leads, else :class:`~raftlock.errors.LockHeld`). The grant's fencing
        token increases with every new leader. However the wait ends
        without winning, the candidacy is withdrawn. Long waits keep their
        place in line as lock waits do (see :meth:`Session.lock`)."""
        session = self.session
        plan = WaitPlan(
            self.name, timeout, session.client.settings, keep_queued=True, lost=lambda: session.lost_reason
        )
        return session._wait(
            plan,
            lambda piece: _api.campaign(self.name, session.id, value, piece.wait, piece.keep_queued),
            cleanup=_api.resign(self.name, session.id),
        )

    def proclaim(self, value: str) -> None:
        """Changes the value followers see; :class:`~raftlock.errors.NotLeader`
        unless leading."""
        self.session._call(_api.proclaim(self.name, self.session.id, value))

    def resign(self) -> None:
        """Steps down, or withdraws a candidacy still waiting."""
        self.session._call(_api.resign(self.name, self.session.id))

    def leader(self) -> Optional[Leader]:
        """The current leader, if any."""
        return self.session.client.leader(self.name)

    def observe(self) -> Iterator[Optional[Leader]]:
        """The current leader, then every change (see :meth:`Client.observe`)."""
        return self.session.client.observe(self.name)

    def __repr__(self) -> str:
        return f"Election({self.name!r}, session={self.session.id!r})"
