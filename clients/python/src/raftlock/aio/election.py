"""``AsyncElection``: the asyncio twin of :class:`raftlock.Election`."""
#> """``Election``: leader election over a queue, as in etcd's concurrency
#> package. The first candidate in line leads; its value (an address, an id)
#> is what followers read or observe."""

from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator, Optional

from .. import _api
from .._waiting import WaitPlan
from ..types import Grant, Leader

if TYPE_CHECKING:
    from .session import AsyncSession


class AsyncElection:
    """A named election, joined through a session; see :class:`raftlock.Election`."""
    #> """A named election, joined through a session. Leadership lasts until
    #> :meth:`resign` or the session's end; the session's ``lost`` says when
    #> it may be over."""

    def __init__(self, session: AsyncSession, name: str) -> None:
        self.session = session
        self.name = name

    async def campaign(self, value: str, timeout: Optional[float] = None) -> Grant:
        """Joins with ``value`` and waits until elected; cancelling or
        failing withdraws the candidacy. See :meth:`raftlock.Election.campaign`."""
        #> """Joins as a candidate with ``value`` and waits until elected
        #> (``timeout`` seconds at most; ``None``: no limit; 0: only if nobody
        #> leads, else :class:`~raftlock.errors.LockHeld`). The grant's fencing
        #> token increases with every new leader. However the wait ends
        #> without winning, the candidacy is withdrawn. Long waits keep their
        #> place in line as lock waits do (see :meth:`Session.lock`)."""
        session = self.session
        plan = WaitPlan(
            self.name, timeout, session.client.settings, keep_queued=True, lost=lambda: session.lost_reason
        )
        return await session._wait(
            plan,
            lambda piece: _api.campaign(self.name, session.id, value, piece.wait, piece.keep_queued),
            cleanup=_api.resign(self.name, session.id),
        )

    async def proclaim(self, value: str) -> None:
        """Changes the value followers see; ``NotLeader`` unless leading."""
        #> """Changes the value followers see; :class:`~raftlock.errors.NotLeader`
        #> unless leading."""
        await self.session._call(_api.proclaim(self.name, self.session.id, value))

    async def resign(self) -> None:
        """Steps down, or withdraws a candidacy still waiting."""
        await self.session._call(_api.resign(self.name, self.session.id))

    async def leader(self) -> Optional[Leader]:
        """The current leader, if any."""
        return await self.session.client.leader(self.name)

    def observe(self) -> AsyncIterator[Optional[Leader]]:
        """The current leader, then every change."""
        #> """The current leader, then every change (see :meth:`Client.observe`)."""
        return self.session.client.observe(self.name)

    def __repr__(self) -> str:
        return f"AsyncElection({self.name!r}, session={self.session.id!r})"
