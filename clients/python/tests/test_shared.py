"""Read-write locks, semaphores and multi-locks against a real cluster:
guards, states and listings, and contention between sessions on
clients that enter through different members."""

from __future__ import annotations

import threading
import time
from typing import Callable, List

import pytest

import raftlock
from cluster import UpCluster


def _rotated(cluster: UpCluster, i: int) -> List[str]:
    """The endpoints, starting at member ``i``: each worker enters elsewhere."""
    e = cluster.endpoints
    return e[i % len(e) :] + e[: i % len(e)]


def _contend(cluster: UpCluster, workers: int, body: Callable[[raftlock.Session, int], None]) -> None:
    """Runs ``body(session, i)`` in ``workers`` threads, each with its own
    client and session, and re-raises the first failure."""
    errors: List[BaseException] = []

    def run(i: int) -> None:
        try:
            with raftlock.Client(_rotated(cluster, i), timeout=5) as c, c.session(ttl=10) as s:
                body(s, i)
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a worker hung"
    if errors:
        raise errors[0]


def _company(entries: Callable[[], int], want: int) -> None:
    """Lets a holder keep its hold until ``want`` sessions are queued in
    the lock (holders and waiters) or a short while passes (the others may
    be done): a holder that should not be there then shows up inside
    together with it. Polls the state; never fails."""
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        if entries() >= want:
            return


def test_two_writers_never_hold_together_and_readers_share(cluster: UpCluster, name: str) -> None:
    inside = {"read": 0, "write": 0}
    guard = threading.Lock()
    violations: List[str] = []

    def work(session: raftlock.Session, i: int) -> None:
        mode = "write" if i < 2 else "read"
        for _ in range(4):
            take = session.write_lock if mode == "write" else session.read_lock
            with take(name, timeout=30) as held:
                assert held.mode == mode and held.fencing_token > 0
                with guard:
                    inside[mode] += 1
                    if inside["write"] > 1 or (inside["write"] and inside["read"]):
                        violations.append(f"{inside} with {mode}")

                def entries() -> int:
                    state = session.client.rwlock_state(name)
                    return len(state.holders) + len(state.waiters)

                _company(entries, 2)
                with guard:
                    if inside["write"] > 1 or (inside["write"] and inside["read"]):
                        violations.append(f"{inside} with {mode}")
                    inside[mode] -= 1

    _contend(cluster, 4, work)
    assert violations == []


def test_readers_share_and_a_writer_waits(client: raftlock.Client, name: str) -> None:
    with client.session(ttl=5) as a, client.session(ttl=5) as b, client.session(ttl=5) as w:
        first = a.read_lock(name, timeout=5)
        second = b.try_read_lock(name)
        assert second.fencing_token > first.fencing_token
        with pytest.raises(raftlock.LockHeld):
            w.try_write_lock(name)
        state = client.rwlock_state(name)
        assert [h.mode for h in state.holders] == ["read", "read"]
        assert [h.session_id for h in state.holders] == [a.id, b.id]
        assert state.waiters == []
        listed = client.rwlocks(name)
        assert [(line.name, len(line.holders), line.waiters) for line in listed] == [(name, 2, 0)]
        with pytest.raises(raftlock.Timeout):
            w.write_lock(name, timeout=0.3)
        assert client.rwlock_state(name).waiters == []  # the abandoned wait left nothing
        first.release()
        second.release()
        with w.try_write_lock(name) as writing:
            assert writing.mode == "write" and writing.fencing_token > second.fencing_token
    assert client.rwlocks(name) == []


def test_n_plus_one_semaphore_holders_never_hold_together(cluster: UpCluster, name: str) -> None:
    permits = 2
    inside = [0]
    most = [0]
    guard = threading.Lock()

    def work(session: raftlock.Session, _i: int) -> None:
        for _ in range(4):
            with session.semaphore(name, permits, timeout=30):
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])

                def entries() -> int:
                    state = session.client.semaphore_state(name)
                    return len(state.holders) + len(state.waiters)

                _company(entries, permits + 1)  # the others queued too
                with guard:
                    most[0] = max(most[0], inside[0])
                    inside[0] -= 1

    _contend(cluster, permits + 1, work)
    assert 1 <= most[0] <= permits


def test_a_semaphore_fixes_its_limit(client: raftlock.Client, name: str) -> None:
    with client.session(ttl=5) as a, client.session(ttl=5) as b:
        with a.try_semaphore(name, 2) as permit:
            assert permit.permits == 2
            with pytest.raises(raftlock.LimitMismatch) as refused:
                b.try_semaphore(name, 3)
            assert refused.value.status == 409
            state = client.semaphore_state(name)
            assert (state.permits, [h.session_id for h in state.holders]) == (2, [a.id])
            assert state.holders[0].mode is None
            assert [(s.name, s.permits, s.waiters) for s in client.semaphores(name)] == [(name, 2, 0)]
            with b.try_semaphore(name, 2):
                assert len(client.semaphore_state(name).holders) == 2
    assert client.semaphore_state(name).permits is None


def test_multi_locks_take_all_or_none_without_deadlock(cluster: UpCluster, name: str) -> None:
    x, y, z = f"{name}/x", f"{name}/y", f"{name}/z"
    sets = [[x, y], [y, z, x]]  # overlapping, in different orders
    holding = [0]
    guard = threading.Lock()
    violations: List[str] = []

    def work(session: raftlock.Session, i: int) -> None:
        for _ in range(4):
            with session.multi_lock(sets[i], timeout=30) as held:
                assert [g.name for g in held.grants] == sets[i]
                assert len({g.fencing_token for g in held.grants}) == 1
                with guard:
                    holding[0] += 1
                    if holding[0] > 1:
                        violations.append("both sets held")

                def entries() -> int:
                    state = session.client.lock_state(y)  # in both sets
                    return len(state.waiters) + (state.holder is not None)

                _company(entries, 2)
                with guard:
                    if holding[0] > 1:
                        violations.append("both sets held")
                    holding[0] -= 1

    _contend(cluster, 2, work)
    assert violations == []


def test_a_refused_multi_lock_takes_none(client: raftlock.Client, name: str) -> None:
    x, y, z = f"{name}/x", f"{name}/y", f"{name}/z"
    with client.session(ttl=5) as a, client.session(ttl=5) as b:
        with a.multi_lock([x, y], timeout=5):
            with pytest.raises(raftlock.LockHeld):
                b.try_multi_lock([y, z])
            assert client.lock_state(z).holder is None
            assert client.lock_state(y).holder is not None
        with b.try_multi_lock([y, z]) as held:
            assert [g.name for g in held.grants] == [y, z]
