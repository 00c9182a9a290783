"""Reentrant locks against a real cluster, blocking (a count per thread)
and asyncio (a count per task): the lock is freed only when every hold
has been given back, and another thread or task waits instead of
re-entering."""

from __future__ import annotations

import asyncio
import threading
from typing import List

import pytest

import raftlock
from cluster import UpCluster
from raftlock.aio import AsyncClient, AsyncReentrantHold, AsyncReentrantLock

PATIENCE = 30.0  # a failure bound, never a synchronisation device


def test_a_reentrant_lock_is_freed_when_the_count_returns_to_zero(client: raftlock.Client, name: str) -> None:
    with client.session(ttl=10) as holder, client.session(ttl=10) as other:
        lock = raftlock.ReentrantLock(holder, name)
        first = lock.acquire(timeout=5)
        second = lock.acquire(timeout=0)  # a re-entry: no request, no wait
        assert lock.hold_count == 2
        assert second.fencing_token == first.fencing_token

        second.release()
        assert lock.hold_count == 1
        with pytest.raises(raftlock.LockHeld):
            other.try_lock(name)
        state = client.lock_state(name)
        assert state.holder is not None and state.holder.session_id == holder.id

        first.release()
        first.release()  # a hold is given back once
        assert lock.hold_count == 0
        with other.try_lock(name) as taken:
            assert taken.fencing_token > first.fencing_token


def test_another_thread_waits_instead_of_reentering(client: raftlock.Client, name: str) -> None:
    with client.session(ttl=10) as holder:
        lock = raftlock.ReentrantLock(holder, name)
        held = lock.acquire(timeout=5)

        refused: List[BaseException] = []

        def try_briefly() -> None:
            try:
                lock.acquire(timeout=0.3).release()
            except raftlock.Timeout as e:
                refused.append(e)

        t = threading.Thread(target=try_briefly)
        t.start()
        t.join(PATIENCE)
        assert refused, "another thread re-entered the lock"
        assert lock.hold_count == 1

        got: List[raftlock.ReentrantHold] = []
        started = threading.Event()

        def wait_for_it() -> None:
            started.set()
            got.append(lock.acquire(timeout=PATIENCE))

        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        assert started.wait(PATIENCE)
        held.release()
        waiter.join(PATIENCE)
        assert got and got[0].fencing_token > held.fencing_token
        assert lock.hold_count == 1
        got[0].release()
        assert client.lock_state(name).holder is None


def test_async_reentrant_lock_counts_per_task(cluster: UpCluster, name: str) -> None:
    async def main() -> None:
        async with AsyncClient(cluster.endpoints, timeout=5) as client:
            async with client.session(ttl=10) as holder, client.session(ttl=10) as other:
                lock = AsyncReentrantLock(holder, name)
                async with lock.acquire(timeout=5) as first:
                    second = await lock.try_acquire()  # a re-entry: no request
                    assert lock.hold_count == 2
                    assert second.fencing_token == first.fencing_token

                    # Another task does not re-enter: it waits, here in vain.
                    with pytest.raises(raftlock.Timeout):
                        await asyncio.ensure_future(lock.acquire(timeout=0.3))

                    await second.release()
                    with pytest.raises(raftlock.LockHeld):
                        await other.try_lock(name)
                    state = await client.lock_state(name)
                    assert state.holder is not None and state.holder.session_id == holder.id

                    waiting = asyncio.ensure_future(lock.acquire(timeout=PATIENCE))
                # The last hold is given back: the waiting task gets the lock.
                taken: AsyncReentrantHold = await asyncio.wait_for(waiting, PATIENCE)
                assert taken.fencing_token > first.fencing_token
                assert lock.hold_count == 1
                await taken.release()
                assert lock.hold_count == 0
                again = await other.try_lock(name)
                await again.release()

    asyncio.run(main())
