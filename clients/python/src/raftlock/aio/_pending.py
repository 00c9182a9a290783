"""An awaitable that is also an async context manager, so that the asyncio
API reads like the blocking one:

    session = await client.session()          # or:
    async with client.session() as session:   # closed at the end
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Awaitable, Callable, Generator, Generic, Optional, Protocol, Type, TypeVar


class _Closable(Protocol):
    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None: ...


T = TypeVar("T", bound=_Closable)


class Pending(Generic[T]):
    """Starts ``start()`` when awaited or entered; exiting exits the result."""

    def __init__(self, start: Callable[[], Awaitable[T]]) -> None:
        self._start = start
        self._value: Optional[T] = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._run().__await__()

    async def _run(self) -> T:
        return await self._start()

    async def __aenter__(self) -> T:
        self._value = await self._start()
        return self._value

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._value is not None:
            await self._value.__aexit__(exc_type, exc, tb)
