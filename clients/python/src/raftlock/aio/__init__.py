"""The asyncio flavour of the raftlock client: the same API with ``await``
and ``async with``, over the same failover, waiting and loss rules."""

from .client import AsyncClient
from .election import AsyncElection
from .lock import AsyncLockGuard
from .reentrant import AsyncReentrantHold, AsyncReentrantLock
from .session import AsyncSession
from .shared import AsyncMultiLockGuard, AsyncRwLockGuard, AsyncSemaphorePermit

__all__ = [
    "AsyncClient",
    "AsyncElection",
    "AsyncLockGuard",
    "AsyncMultiLockGuard",
    "AsyncReentrantHold",
    "AsyncReentrantLock",
    "AsyncRwLockGuard",
    "AsyncSemaphorePermit",
    "AsyncSession",
]
