"""An acquire whose answer is lost (a dropped connection, an
``outcome_unknown`` answer, a request that times out) must not leave its
node behind: the client releases it before reporting the error."""

from __future__ import annotations

from typing import Iterator

import pytest

import raftlock
from cluster import UpCluster
from proxy import LossyProxy


@pytest.fixture(params=["drop", "outcome_unknown", "hang"])
def proxy(request: pytest.FixtureRequest, cluster: UpCluster) -> Iterator[LossyProxy]:
    lossy = LossyProxy(cluster.endpoints[0], lambda path: path.endswith("/acquire"), request.param)
    yield lossy
    lossy.close()


def test_an_acquire_with_a_lost_answer_is_released(
    proxy: LossyProxy, client: raftlock.Client, name: str
) -> None:
    with raftlock.Client([proxy.url], timeout=1, retry=raftlock.RetryPolicy(attempts=2)) as lossy:
        session = lossy.session(ttl=10)
        # A hung request outlives the caller's patience: that is a Timeout.
        expected = raftlock.Timeout if proxy.mode == "hang" else raftlock.OutcomeUnknown
        with pytest.raises(expected):
            session.lock(name, timeout=1)
        # The cluster did grant it (the proxy only withheld the answers)...
        assert proxy.lost and all(status == 200 for _, status in proxy.lost)
        # ...and the client released it before raising.
        state = client.lock_state(name)
        assert state.holder is None and state.waiters == []
        assert not session.lost.is_set()  # the session itself is fine
        session.close()


def test_an_unknown_acquire_while_the_lock_is_held_leaves_no_waiter(
    proxy: LossyProxy, client: raftlock.Client, name: str
) -> None:
    with client.lock(name, timeout=5):
        with raftlock.Client([proxy.url], timeout=1, retry=raftlock.RetryPolicy(attempts=2)) as lossy:
            session = lossy.session(ttl=10)
            with pytest.raises(raftlock.RaftlockError):
                session.lock(name, timeout=0.5)
            assert client.lock_state(name).waiters == []
            session.close()
