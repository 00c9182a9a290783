"""``AsyncClient``: the asyncio twin of :class:`raftlock.Client`.

Same settings, same failover plan (:mod:`raftlock._failover`), same
routes (:mod:`raftlock._api`); only the waiting is ``await``.
"""
#> """``Client``: the blocking client over the HTTP API, with failover."""

from __future__ import annotations

# <async>
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
# </async>
#> import threading
#> import time
#> import weakref
#> from types import TracebackType
#> from typing import Callable, Generator, Iterator, List, Optional, Sequence, Tuple, Type, TypeVar, Union

import httpx

from .. import _api
from .._base import ClientBase
from .._failover import Answer, Attempt, Call, Outcome, Plan  # [async]
#> from ._failover import Answer, Attempt, Call, Outcome
#> from ._failover import drive as _drive
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
from ._pending import Pending  # [async]
from .lock import AsyncLockGuard
from .session import AsyncSession
#> from .shared import MultiLockGuard, RwLockGuard, SemaphorePermit

T = TypeVar("T")
# <async>


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
# </async>


class AsyncClient(ClientBase):
    """An asyncio client of a raftlock cluster; see :class:`raftlock.Client`
    for the arguments.

    >>> async with AsyncClient(timeout=5) as client:
    ...     async with client.lock("orders/42", timeout=5) as guard:
    ...         print(guard.fencing_token)
    """
    #> """A client of a raftlock cluster. Thread-safe; share one per process.
    #>
    #> >>> with Client(["127.0.0.1:7001", "127.0.0.1:7002"], timeout=5) as client:
    #> ...     with client.lock("orders/42", timeout=5) as guard:
    #> ...         print(guard.fencing_token)
    #>
    #> ``endpoints`` is a list or a comma-separated string of ``host:port``
    #> or URLs; ``None`` means ``$RAFTLOCK_ENDPOINTS``, else the local
    #> cluster ``raftlock up`` starts (``127.0.0.1:7001-7003``), as for the
    #> command line. The client sticks to the member that last answered and
    #> fails over to the next when it does not; ``no_leader`` and
    #> ``shutting_down`` are retried with backoff. ``timeout`` bounds each
    #> request (a long poll gets its wait on top). The other keyword
    #> arguments (``connect_timeout``, ``retry``, ``long_poll``,
    #> ``session_ttl``, ``observe_idle_timeout``) are the fields of
    #> :class:`~raftlock._settings.Settings`, documented there. ``token`` is
    #> the bearer token for a cluster with authentication (sent as
    #> ``Authorization: Bearer``); ``None`` means ``$RAFTLOCK_TOKEN`` if set,
    #> else none. On such a cluster, listings show another principal's
    #> session ids as ``None``.
    #>
    #> For a cluster serving HTTPS (a ``[tls]`` table, or ``raftlock up
    #> --tls``), ``cacert`` is the CA file to trust, and only it: given,
    #> every endpoint is dialed as ``https://`` (``http://`` ones and the
    #> defaults too, as the CLI does with ``--cacert``). ``cert`` and ``key``
    #> are the client certificate and its key for a cluster with
    #> ``client_auth``; they need ``cacert``. Each ``None`` means
    #> ``$RAFTLOCK_CACERT``, ``$RAFTLOCK_CERT``, ``$RAFTLOCK_KEY``. Without
    #> ``cacert``, ``https://`` endpoints are checked against the system's
    #> trust store. A failed handshake (a certificate not signed by the CA,
    #> or the server refusing this client's) raises
    #> :class:`~raftlock.errors.TlsError` at once, without retries.
    #> """

    def _setup(self) -> None:
        # trust_env=False: a proxy from the environment must not sit between
        # a lock client and the cluster (nor swallow loopback traffic).
        self._http = httpx.AsyncClient(headers=self._headers, verify=self._tls.verify(), trust_env=False)
        self._sessions: "weakref.WeakSet[AsyncSession]" = weakref.WeakSet()
        self._default: Optional[AsyncSession] = None
        self._default_guard: Optional[asyncio.Lock] = None  # made in the loop  # [async]
        #> self._default_guard = threading.Lock()

    # -- plumbing ---------------------------------------------------------

    async def _call(self, op: _api.Op[T], deadline: Optional[float] = None) -> T:
        """Runs ``op`` with failover and retries, within ``deadline``."""
        #> """Runs ``op`` with failover and retries; ``deadline`` (a
        #> ``time.monotonic()`` instant) bounds it as a whole."""
        answer = await self._answer(op.call, deadline)
        return op.parse(answer.body)

    async def _answer(self, call: Call, deadline: Optional[float] = None) -> Answer:
        """The 2xx answer to ``call``, with failover and retries."""

        async def send(attempt: Attempt) -> Outcome:
            return await self._send(call, attempt)

        return await _drive(self._plan(call, deadline), send)

    async def _send(self, call: Call, attempt: Attempt) -> Outcome:
        if attempt.pause > 0:
            await asyncio.sleep(attempt.pause)  # the backoff, not a synchronisation
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
        #> """A GET whose answer streams (SSE), with failover until one
        #> endpoint answers 2xx; the caller closes it."""
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

    async def _follow(self, what: str, route: Callable[[], str], feed: Feed[T]) -> AsyncGenerator[T, None]:  # [async]
    #> def _follow(self, what: str, route: Callable[[], str], feed: Feed[T]) -> Generator[T, None, None]:
        """The asyncio twin of :meth:`raftlock.Client._follow`."""
        #> """The items of the stream at ``route()`` (asked again at each
        #> reconnect), reconnecting with failover when it drops, until the feed
        #> is done or :class:`Reconnects` gives up."""
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
    # <async>

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
    # </async>
    #>
    #> def session(
    #>     self,
    #>     ttl: Optional[float] = None,
    #>     owner: Optional[str] = None,
    #>     on_lost: Optional[Callable[[LostReason], None]] = None,
    #> ) -> Session:
    #>     """Opens a session (``ttl`` seconds, default ``session_ttl``), kept
    #>     alive in the background until closed. Use it as a context manager.
    #>     ``on_lost`` is called (from a background thread) when the session
    #>     is or may be gone; see :class:`Session`."""
    #>     session = Session(self, ttl or self.settings.session_ttl, owner or default_owner(), on_lost)
    #>     self._sessions.add(session)
    #>     return session
    #>
    #> def _default_session(self) -> Session:
    #>     """The session ``lock`` and ``try_lock`` use: opened on first use,
    #>     replaced once lost, closed with the client."""
    #>     with self._default_guard:
    #>         if self._default is None or self._default.lost.is_set():
    #>             self._default = self.session()
    #>         return self._default
    #>
    #> def lock(self, name: str, timeout: Optional[float] = None, lock_delay: Optional[float] = None) -> LockGuard:
    #>     """Takes the lock ``name``, waiting up to ``timeout`` seconds
    #>     (``None``: until granted), through the client's own session.
    #>     Raises :class:`~raftlock.errors.Timeout` when the time runs out.
    #>     See :meth:`Session.lock` (``lock_delay`` as there)."""
    #>     return self._default_session().lock(name, timeout, lock_delay)
    #>
    #> def try_lock(self, name: str) -> LockGuard:
    #>     """Takes the lock only if it is free right now, else raises
    #>     :class:`~raftlock.errors.LockHeld`."""
    #>     return self._default_session().try_lock(name)

    async def lock_state(self, name: str, stale: bool = False) -> LockState:
        """The lock's holder and waiters."""
        #> """The lock's holder and waiters (``stale``: skip the read index)."""
        return await self._call(_api.lock_state(name, stale))

    async def fencing_check(self, name: str, fencing_token: int) -> FencingCheck:
        """Is ``fencing_token`` the current holder's?"""
        #> """Is ``fencing_token`` the current holder's? What a storage service
        #> asks before a write."""
        return await self._call(_api.fencing_check(name, fencing_token))

    # -- read-write locks, semaphores, multi-locks ---------------------------
    #>
    #> def read_lock(self, name: str, timeout: Optional[float] = None) -> RwLockGuard:
    #>     """Takes read-write lock ``name`` to read through the client's own
    #>     session. See :meth:`Session.read_lock`."""
    #>     return self._default_session().read_lock(name, timeout)
    #>
    #> def write_lock(self, name: str, timeout: Optional[float] = None) -> RwLockGuard:
    #>     """Takes read-write lock ``name`` to write. See :meth:`Session.write_lock`."""
    #>     return self._default_session().write_lock(name, timeout)
    #>
    #> def semaphore(self, name: str, permits: int, timeout: Optional[float] = None) -> SemaphorePermit:
    #>     """Takes a place of semaphore ``name``. See :meth:`Session.semaphore`."""
    #>     return self._default_session().semaphore(name, permits, timeout)
    #>
    #> def multi_lock(self, names: Sequence[str], timeout: Optional[float] = None) -> MultiLockGuard:
    #>     """Takes every lock of ``names`` or none. See :meth:`Session.multi_lock`."""
    #>     return self._default_session().multi_lock(names, timeout)

    async def rwlock_state(self, name: str, stale: bool = False) -> RwLockState:
        """See :meth:`raftlock.Client.rwlock_state`."""
        #> """The read-write lock's holders (with their mode) and waiters."""
        return await self._call(_api.rwlock_state(name, stale))

    async def rwlocks(self, prefix: str = "", stale: bool = False) -> List[RwLockSummary]:
        """See :meth:`raftlock.Client.rwlocks`."""
        #> """The read-write locks with holders or waiters whose name starts
        #> with ``prefix``; on a cluster with tokens, those the token may read."""
        return await self._call(_api.rwlocks(prefix, stale))

    async def semaphore_state(self, name: str, stale: bool = False) -> SemaphoreState:
        """See :meth:`raftlock.Client.semaphore_state`."""
        #> """The semaphore's limit, holders and waiters."""
        return await self._call(_api.semaphore_state(name, stale))

    async def semaphores(self, prefix: str = "", stale: bool = False) -> List[SemaphoreSummary]:
        """See :meth:`raftlock.Client.semaphores`."""
        #> """The semaphores with holders or waiters, by name prefix."""
        return await self._call(_api.semaphores(prefix, stale))

    # -- elections ---------------------------------------------------------

    async def leader(self, election: str, stale: bool = False) -> Optional[Leader]:
        """The election's current leader, if any."""
        #> """The election's current leader, if any. Campaigning needs a
        #> session: :meth:`Session.election`."""
        return await self._call(_api.leader(election, stale))

    def observe(self, election: str) -> AsyncIterator[Optional[Leader]]:
        """The current leader, then every change (``None``: no leader),
        reconnecting with failover; see :meth:`raftlock.Client.observe`."""
        #> """The current leader, then every change of leader or value
        #> (``None``: no leader), reconnecting with failover when the stream
        #> drops. Close the iterator (or break out of the loop) to stop."""
        return self._follow(f"observe {election}", lambda: _api.observe_path(election), LeaderFeed())

    # -- the node tree --------------------------------------------------------

    async def get_node(self, path: str, stale: bool = False) -> Node:
        """The node at ``path``; ``NotFound`` if none."""
        #> """The node at ``path``; :class:`~raftlock.errors.NotFound` if none."""
        return await self._call(_api.get_node(path, stale))

    async def read_node(self, path: str) -> Tuple[Node, int]:
        """See :meth:`raftlock.Client.read_node`."""
        #> """The node at ``path`` and the revision the (linearizable) read saw:
        #> pass it to :meth:`watch` to miss no later change."""
        return _api.node_at_revision(await self._answer(_api.read_node(path)))

    async def watch(self, path: str, since_revision: Optional[int] = None) -> AsyncIterator[WatchEvent]:
        """See :meth:`raftlock.Client.watch`."""
        #> """The changes of the node at ``path`` and of its direct children
        #> after ``since_revision`` (``None``: from now), in revision order,
        #> including those made between the read that gave the revision and
        #> the watch's start. A dropped stream is reconnected, with failover,
        #> from the last change delivered: nothing is lost or repeated. Ends
        #> after a ``compacted`` event (read afresh and watch from the read's
        #> revision); raises :class:`~raftlock.errors.Unavailable` when every
        #> reconnect failed. Close the iterator (or break out) to stop."""
        if since_revision is None:
            _, since_revision = await self.read_node("/")
        feed = WatchFeed(since_revision)
        changes = self._follow(f"watch {path}", lambda: _api.watch_path(path, feed.since()), feed)
        try:
            async for event in changes:
                yield event
        finally:
            # The inner generator is not closed with this one: close it
            # here, so that the stream closes when the caller stops.
            await changes.aclose()

    async def children(self, path: str, stale: bool = False) -> List[str]:
        """Names of the node's children."""
        #> """Names of the node's children (``""``: the root)."""
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
        #> """Creates or updates a node. With ``session`` it is ephemeral (it
        #> goes with the session); ``sequential`` appends a counter to the
        #> name (``queue/item-`` and ``queue/item`` both give
        #> ``/queue/item-0000000042``); ``expected_version`` makes the write
        #> conditional (0: must not exist). Missing parents are created."""
        op = _api.put_node(path, data, session.id if session else None, sequential, expected_version)
        if session:
            return await session._call(op)
        return await self._call(op)

    async def delete_node(self, path: str, expected_version: Optional[int] = None) -> None:
        """Deletes a node (that has no children)."""
        await self._call(_api.delete_node(path, expected_version))

    async def cluster(self) -> ClusterState:
        """Members, leader and term."""
        #> """Members, leader and term, as the answering member sees them."""
        return await self._call(_api.cluster())

    # -- lifetime -----------------------------------------------------------

    async def close(self) -> None:
        """Closes every session this client opened, then the connections."""
        #> """Closes every session this client opened (releasing their locks),
        #> then the connections."""
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
