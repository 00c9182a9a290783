"""``AsyncClient``: the asyncio twin of :class:`raftlock.Client`.

Same settings, same failover plan (:mod:`raftlock._failover`), same
routes (:mod:`raftlock._api`); only the waiting is ``await``.
"""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType
from typing import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    List,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
)

import httpx

from .. import _api
from .._base import ClientBase
from .._failover import Answer, Attempt, Call, Outcome, Plan
from .._httpx import SSE_HEADERS, answer_of, outcome_of, stream_timeouts, timeouts
from .._settings import default_owner
from .._sse import LeaderFeed
from .._stream import CLOSED, Feed, Reconnects
from .._watch import WatchFeed
from ..types import (
    ClusterState,
    FencingCheck,
    Leader,
    LockState,
    LostReason,
    Node,
    RwLockState,
    RwLockSummary,
    SemaphoreState,
    SemaphoreSummary,
    WatchEvent,
)
from ._pending import Pending
from .lock import AsyncLockGuard
from .session import AsyncSession

T = TypeVar("T")


async def _drive(steps: Plan, send: Callable[[Attempt], Awaitable[Outcome]]) -> Answer:
    """Runs a failover plan with an asynchronous ``send``."""
    attempt = next(steps)
    while True:
        outcome = await send(attempt)
        try:
            attempt = steps.send(outcome)
        except StopIteration as done:
            answer: Answer = done.value
            return answer


class AsyncClient(ClientBase):
    """An asyncio client of a raftlock cluster; see :class:`raftlock.Client`
    for the arguments.

    >>> async with AsyncClient(timeout=5) as client:
    ...     async with client.lock("orders/42", timeout=5) as guard:
    ...         print(guard.fencing_token)
    """

    def _setup(self) -> None:
        self._http = httpx.AsyncClient(headers=self._headers, verify=self._tls.verify(), trust_env=False)
        self._sessions: "weakref.WeakSet[AsyncSession]" = weakref.WeakSet()
        self._default: Optional[AsyncSession] = None
        self._default_guard: Optional[asyncio.Lock] = None  # made in the loop

    # -- plumbing ---------------------------------------------------------

    async def _call(self, op: _api.Op[T], deadline: Optional[float] = None) -> T:
        """Runs ``op`` with failover and retries, within ``deadline``."""
        return op.parse((await self._answer(op.call, deadline)).body)

    async def _answer(self, call: Call, deadline: Optional[float] = None) -> Answer:
        """The 2xx answer to ``call``, with failover and retries."""

        async def send(attempt: Attempt) -> Outcome:
            return await self._send(call, attempt)

        return await _drive(self._plan(call, deadline), send)

    async def _send(self, call: Call, attempt: Attempt) -> Outcome:
        if attempt.pause > 0:
            await asyncio.sleep(attempt.pause)  # the backoff
        try:
            response = await self._http.request(
                call.method,
                attempt.url + call.path,
                json=call.body,
                params=call.params,
                timeout=timeouts(self.settings, attempt.timeout),
            )
        except httpx.TransportError as e:
            return outcome_of(e)
        return answer_of(response)

    async def _open_stream(self, path: str) -> httpx.Response:
        """A streaming GET (SSE), with failover; the caller closes it."""
        opened: List[httpx.Response] = []

        async def send(attempt: Attempt) -> Outcome:
            if attempt.pause > 0:
                await asyncio.sleep(attempt.pause)
            request = self._http.build_request(
                "GET", attempt.url + path, headers=SSE_HEADERS, timeout=stream_timeouts(self.settings)
            )
            try:
                response = await self._http.send(request, stream=True)
            except httpx.TransportError as e:
                return outcome_of(e)
            if response.is_success:
                opened.append(response)
                return Answer(response.status_code, b"")
            try:
                return Answer(response.status_code, await response.aread())
            except httpx.TransportError as e:
                return outcome_of(e)
            finally:
                await response.aclose()

        await _drive(self._plan(Call("GET", path)), send)
        return opened[-1]

    async def _follow(self, what: str, route: Callable[[], str], feed: Feed[T]) -> AsyncGenerator[T, None]:
        """The asyncio twin of :meth:`raftlock.Client._follow`."""
        reconnects = Reconnects(what, self.settings.retry)
        while True:
            response = await self._open_stream(route())
            feed.reconnected()
            try:
                async for chunk in response.aiter_bytes():
                    before = feed.events
                    for item in feed.push(chunk):
                        yield item
                    if feed.done:
                        return
                    reconnects.read(feed, before)
                why = CLOSED
            except httpx.TransportError as e:
                why = f"{type(e).__name__}: {e}"
            finally:
                await response.aclose()
            await asyncio.sleep(reconnects.dropped(why))  # the backoff

    # -- sessions and locks ----------------------------------------------

    def session(
        self,
        ttl: Optional[float] = None,
        owner: Optional[str] = None,
        on_lost: Optional[Callable[[LostReason], None]] = None,
    ) -> Pending[AsyncSession]:
        """Opens a session: ``await client.session()`` or
        ``async with client.session() as session``. See
        :meth:`raftlock.Client.session`; ``on_lost`` runs on the event loop."""

        async def start() -> AsyncSession:
            session = await AsyncSession.open(
                self, ttl or self.settings.session_ttl, owner or default_owner(), on_lost
            )
            self._sessions.add(session)
            return session

        return Pending(start)

    async def _default_session(self) -> AsyncSession:
        if self._default_guard is None:
            self._default_guard = asyncio.Lock()
        async with self._default_guard:
            if self._default is None or self._default.lost.is_set():
                self._default = await self.session()
            return self._default

    def lock(
        self, name: str, timeout: Optional[float] = None, lock_delay: Optional[float] = None
    ) -> Pending[AsyncLockGuard]:
        """Takes ``name`` through the client's own session:
        ``async with client.lock("orders/42", timeout=5) as guard``, or
        ``guard = await client.lock(...)``. See :meth:`raftlock.Client.lock`."""

        async def start() -> AsyncLockGuard:
            return await (await self._default_session()).lock(name, timeout, lock_delay)

        return Pending(start)

    def try_lock(self, name: str) -> Pending[AsyncLockGuard]:
        """Takes ``name`` only if it is free now, else raises ``LockHeld``."""
        return self.lock(name, 0)

    async def lock_state(self, name: str, stale: bool = False) -> LockState:
        """The lock's holder and waiters."""
        return await self._call(_api.lock_state(name, stale))

    async def fencing_check(self, name: str, fencing_token: int) -> FencingCheck:
        """Is ``fencing_token`` the current holder's?"""
        return await self._call(_api.fencing_check(name, fencing_token))

    async def rwlock_state(self, name: str, stale: bool = False) -> RwLockState:
        """See :meth:`raftlock.Client.rwlock_state`."""
        return await self._call(_api.rwlock_state(name, stale))

    async def rwlocks(self, prefix: str = "", stale: bool = False) -> List[RwLockSummary]:
        """See :meth:`raftlock.Client.rwlocks`."""
        return await self._call(_api.rwlocks(prefix, stale))

    async def semaphore_state(self, name: str, stale: bool = False) -> SemaphoreState:
        """See :meth:`raftlock.Client.semaphore_state`."""
        return await self._call(_api.semaphore_state(name, stale))

    async def semaphores(self, prefix: str = "", stale: bool = False) -> List[SemaphoreSummary]:
        """See :meth:`raftlock.Client.semaphores`."""
        return await self._call(_api.semaphores(prefix, stale))

    # -- elections ---------------------------------------------------------

    async def leader(self, election: str, stale: bool = False) -> Optional[Leader]:
        """The election's current leader, if any."""
        return await self._call(_api.leader(election, stale))

    def observe(self, election: str) -> AsyncIterator[Optional[Leader]]:
        """The current leader, then every change (``None``: no leader),
        reconnecting with failover; see :meth:`raftlock.Client.observe`."""
        return self._follow(f"observe {election}", lambda: _api.observe_path(election), LeaderFeed())

    # -- the node tree --------------------------------------------------------

    async def read_node(self, path: str) -> Tuple[Node, int]:
        """See :meth:`raftlock.Client.read_node`."""
        return _api.node_at_revision(await self._answer(_api.read_node(path)))

    async def watch(self, path: str, since_revision: Optional[int] = None) -> AsyncIterator[WatchEvent]:
        """See :meth:`raftlock.Client.watch`."""
        if since_revision is None:
            _, since_revision = await self.read_node("/")
        feed = WatchFeed(since_revision)
        changes = self._follow(f"watch {path}", lambda: _api.watch_path(path, feed.since()), feed)
        try:
            async for event in changes:
                yield event
        finally:
            # An async generator is not closed with the one that iterates
            # it: close it here, so the stream closes when the caller stops.
            await changes.aclose()

    async def get_node(self, path: str, stale: bool = False) -> Node:
        """The node at ``path``; ``NotFound`` if none."""
        return await self._call(_api.get_node(path, stale))

    async def children(self, path: str, stale: bool = False) -> List[str]:
        """Names of the node's children."""
        return await self._call(_api.children(path, stale))

    async def put_node(
        self,
        path: str,
        data: Union[bytes, str] = b"",
        *,
        session: Optional[AsyncSession] = None,
        sequential: bool = False,
        expected_version: Optional[int] = None,
    ) -> Node:
        """Creates or updates a node; see :meth:`raftlock.Client.put_node`."""
        op = _api.put_node(path, data, session.id if session else None, sequential, expected_version)
        return await (session._call(op) if session else self._call(op))

    async def delete_node(self, path: str, expected_version: Optional[int] = None) -> None:
        """Deletes a node (that has no children)."""
        await self._call(_api.delete_node(path, expected_version))

    async def cluster(self) -> ClusterState:
        """Members, leader and term."""
        return await self._call(_api.cluster())

    # -- lifetime -----------------------------------------------------------

    async def close(self) -> None:
        """Closes every session this client opened, then the connections."""
        for session in list(self._sessions):
            await session.close_quietly()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()
