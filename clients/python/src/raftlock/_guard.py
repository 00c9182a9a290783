"""What a guard holds, the same in the blocking and the asyncio client."""

from __future__ import annotations

from typing import Generic, Optional, TypeVar

from . import _api
from ._lease import LeaseHolder
from .types import Grant

S = TypeVar("S", bound=LeaseHolder)
L = TypeVar("L")
BUSY = "another caller of this session holds or is taking this lock"


class GuardBase(Generic[S, L]):
    """What a guard holds, shared by the blocking and asyncio guards: the
    grant, the session (``S``) and its local turn on the lock (``L``), and
    the request that releases it."""

    def __init__(
        self,
        session: S,
        grant: Grant,
        turn: L,
        release: Optional[_api.Op[None]] = None,
        key: Optional[str] = None,
    ) -> None:
        self.session = session
        self.grant = grant
        self._turn = turn
        self._release = release or _api.release(grant.name, session.id)
        self._key = key or grant.name
        self._released = False

    @property
    def name(self) -> str:
        """The lock's name."""
        return self.grant.name

    @property
    def fencing_token(self) -> int:
        """Strictly greater than every token granted before, on any lock."""
        return self.grant.fencing_token

    @property
    def node(self) -> str:
        """The session's queue node (``/locks/{name}/lock-0000000042``)."""
        return self.grant.node

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, fencing_token={self.fencing_token}, node={self.node!r})"
