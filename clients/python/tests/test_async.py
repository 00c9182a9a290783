"""The asyncio twin: the same behaviour with ``await`` and ``async with``.
Each test runs its own event loop (no plugin needed)."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, List, Optional

import httpx
import pytest

import raftlock
from cluster import UpCluster
from raftlock.aio import AsyncClient


async def apoll(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Waits until ``await check()`` holds, failing after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.02)


def test_async_lock_try_lock_and_fencing(cluster: UpCluster, name: str) -> None:
    async def main() -> None:
        async with AsyncClient(cluster.endpoints, timeout=5) as client:
            async with client.lock(name, timeout=5, lock_delay=0.7) as guard:
                assert (await client.fencing_check(name, guard.fencing_token)).valid
                assert (await client.lock_state(name)).lock_delay == 0.7
                async with client.session(ttl=5) as other:
                    with pytest.raises(raftlock.LockHeld):
                        await other.try_lock(name)
            assert (await client.lock_state(name)).holder is None
            again = await client.try_lock(name)
            assert again.fencing_token > guard.fencing_token
            await again.release()

    asyncio.run(main())


def test_cancelling_a_wait_withdraws_its_node(cluster: UpCluster, name: str) -> None:
    async def main() -> None:
        async with AsyncClient(cluster.endpoints, timeout=5) as client:
            async with client.session(ttl=10) as holder, client.session(ttl=10) as waiter:
                await holder.lock(name, timeout=5)
                waiting = asyncio.ensure_future(waiter.lock(name))  # no time limit

                async def queued() -> bool:
                    return len((await client.lock_state(name)).waiters) == 1

                await apoll(queued, 10, "the waiter to queue")
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
                assert (await client.lock_state(name)).waiters == []  # released before re-raising

    asyncio.run(main())


def test_async_session_lost_on_session_not_found(cluster: UpCluster, name: str) -> None:
    async def main() -> None:
        reasons: List[raftlock.LostReason] = []
        async with AsyncClient(cluster.endpoints, timeout=5) as client:
            session = await client.session(ttl=30, on_lost=reasons.append)
            async with client.session(ttl=10) as holder:
                await holder.lock(name, timeout=5)
                waiting = asyncio.ensure_future(session.lock(name, timeout=30))

                async def queued() -> bool:
                    return len((await client.lock_state(name)).waiters) == 1

                await apoll(queued, 10, "the waiter to queue")
                async with httpx.AsyncClient(trust_env=False) as http:
                    closed = await http.delete(f"{client.current_endpoint}/v1/sessions/{session.id}")
                    closed.raise_for_status()
                with pytest.raises((raftlock.SessionNotFound, raftlock.SessionLost)):
                    await asyncio.wait_for(waiting, 10)
            assert session.lost.is_set() and reasons == [raftlock.LostReason.EXPIRED]
            await session.close()

    asyncio.run(main())


def test_async_election_and_observe(cluster: UpCluster, name: str) -> None:
    async def main() -> None:
        async with AsyncClient(cluster.endpoints, timeout=5) as client:
            async with client.session(ttl=10) as session:
                election = session.election(name)
                won = await election.campaign("here", timeout=5)
                stream = client.observe(name)
                first: Optional[raftlock.Leader] = await stream.__anext__()
                assert first is not None and (first.value, first.fencing_token) == ("here", won.fencing_token)
                await election.proclaim("there")
                second = await asyncio.wait_for(stream.__anext__(), 10)
                assert second is not None and second.value == "there"
                await stream.aclose()  # type: ignore[attr-defined]
                await election.resign()
                assert await client.leader(name) is None

    asyncio.run(main())


def test_async_rwlock_semaphore_multilock_and_watch(cluster: UpCluster, name: str) -> None:
    async def main() -> None:
        async with AsyncClient(cluster.endpoints, timeout=5) as client:
            async with client.session(ttl=10) as a, client.session(ttl=10) as b:
                reading = await a.read_lock(f"{name}/rw", timeout=5)
                also = await b.try_read_lock(f"{name}/rw")
                assert [h.mode for h in (await client.rwlock_state(f"{name}/rw")).holders] == ["read", "read"]
                writing = await b.write_lock(f"{name}/rw2", timeout=5)
                with pytest.raises(raftlock.Timeout):
                    await a.read_lock(f"{name}/rw2", timeout=0.3)
                assert (await client.rwlock_state(f"{name}/rw2")).waiters == []
                await writing.release()
                await also.release()
                await reading.release()
                async with await a.semaphore(f"{name}/sem", 1, timeout=5):
                    with pytest.raises(raftlock.LockHeld):
                        await b.try_semaphore(f"{name}/sem", 1)
                    assert [s.permits for s in await client.semaphores(name)] == [1]
                async with await a.multi_lock([f"{name}/x", f"{name}/y"], timeout=5) as both:
                    assert [g.name for g in both.grants] == [f"{name}/x", f"{name}/y"]
                    with pytest.raises(raftlock.LockHeld):
                        await b.try_multi_lock([f"{name}/y"])
            await client.put_node(f"{name}/watched", b"")
            _, revision = await client.read_node(f"{name}/watched")
            await client.put_node(f"{name}/watched/a", b"1")
            events = client.watch(f"{name}/watched", since_revision=revision)
            first = await asyncio.wait_for(events.__anext__(), 30)
            assert (first.kind, first.path, first.node and first.node.data) == ("put", f"/{name}/watched/a", b"1")
            await events.aclose()  # type: ignore[attr-defined]

    asyncio.run(main())
