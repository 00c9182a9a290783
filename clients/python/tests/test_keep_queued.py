"""Long waits keep their place in line across long-poll slices.

NEEDS THE NEW SERVER: these tests pass only against a server
whose acquire accepts ``"keep_queued": true``. Older servers reject the
field with ``bad_request`` (the client then falls back to re-queueing on
each slice), and these tests fail at once saying so. Deselect them with
``-m "not keep_queued"`` when testing against an older binary.
"""

from __future__ import annotations

import threading
from typing import Iterator, List

import httpx
import pytest

import raftlock
from cluster import UpCluster, poll
from proxy import LossyProxy

pytestmark = pytest.mark.keep_queued

SLICE = 1.0
"""Seconds per long-poll slice, so that a test crosses several quickly."""


@pytest.fixture
def counted(cluster: UpCluster) -> Iterator[LossyProxy]:
    """A proxy that loses nothing: it counts the slices sent through it."""
    proxy = LossyProxy(cluster.endpoints[0], lambda path: False, "drop")
    yield proxy
    proxy.close()


@pytest.fixture
def slicing(counted: LossyProxy) -> Iterator[raftlock.Client]:
    """A client, through the counting proxy, whose waits are cut into 1-second slices."""
    with raftlock.Client([counted.url], timeout=5, long_poll=SLICE) as c:
        yield c


@pytest.fixture(autouse=True)
def require_keep_queued(cluster: UpCluster) -> None:
    with httpx.Client(base_url=cluster.endpoints[0], trust_env=False) as http:
        session = http.post("/v1/sessions", json={"ttl_ms": 5000}).json()["session_id"]
        answer = http.post(
            "/v1/locks/probe/keep_queued/acquire",
            json={"session_id": session, "wait_ms": 0, "keep_queued": True},
        )
        http.delete(f"/v1/sessions/{session}")
    if answer.status_code == 400 and "keep_queued" in answer.text:
        pytest.fail("this raftlock server does not accept keep_queued: the test needs the issue-13 server")


def test_a_long_wait_keeps_its_fifo_place_across_slices(
    counted: LossyProxy, slicing: raftlock.Client, client: raftlock.Client, name: str
) -> None:
    with client.session(ttl=10) as holding, client.session(ttl=10) as late:
        holder = holding.lock(name, timeout=5)
        granted: List[raftlock.LockGuard] = []
        waiter = threading.Thread(target=lambda: granted.append(slicing.lock(name, timeout=30)))
        waiter.start()
        poll(lambda: len(client.lock_state(name).waiters) == 1, 10, "the long waiter to queue")
        node = client.lock_state(name).waiters[0].node
        after: List[raftlock.LockGuard] = []
        behind = threading.Thread(target=lambda: after.append(late.lock(name, timeout=30)))
        behind.start()
        poll(lambda: len(client.lock_state(name).waiters) == 2, 10, "the second waiter to queue")

        def slices() -> int:
            return sum(path.endswith(f"{name}/acquire") for path in counted.requests)

        def still_first() -> bool:
            waiters = [w.node for w in client.lock_state(name).waiters]
            assert waiters[0] == node, f"the long waiter lost its place: {waiters}"
            return slices() >= 3  # two slices timed out, a third is waiting

        poll(still_first, 15, "three slices of the long wait")
        holder.release()
        waiter.join(timeout=10)
        assert [g.node for g in granted] == [node], "the long waiter was not granted first, on its first node"
        granted[0].release()
        behind.join(timeout=10)
        assert after and after[0].fencing_token > granted[0].fencing_token


def test_giving_up_after_kept_slices_leaves_no_node(
    slicing: raftlock.Client, client: raftlock.Client, name: str
) -> None:
    with client.session(ttl=10) as holding, holding.lock(name, timeout=5):
        with pytest.raises(raftlock.Timeout):
            slicing.lock(name, timeout=2.5 * SLICE)  # two kept slices, then the last
        assert client.lock_state(name).waiters == []
