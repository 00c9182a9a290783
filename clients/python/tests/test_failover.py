"""Failover: kill -9 the member the client uses (the Raft leader), and the
client moves on, its session and lock intact."""

from __future__ import annotations

import time

import pytest

import raftlock
from cluster import ServeCluster, poll


def test_the_client_fails_over_when_its_member_is_killed(serve_cluster: ServeCluster, name: str) -> None:
    with raftlock.Client(serve_cluster.endpoints, timeout=3) as probe:
        leader_id = probe.cluster().leader_id
    assert leader_id is not None
    leader = serve_cluster.endpoints[leader_id - 1]
    # The leader first, so that the client sticks to the member we kill.
    order = [leader] + [e for e in serve_cluster.endpoints if e != leader]
    with raftlock.Client(order, timeout=3) as client, client.session(ttl=10) as session:
        guard = session.lock(name, timeout=5)
        assert client.current_endpoint == leader
        serve_cluster.kill(leader_id)
        killed = time.monotonic()

        state = client.lock_state(name)
        assert client.current_endpoint != leader
        assert state.holder is not None and state.holder.fencing_token == guard.fencing_token
        assert client.fencing_check(name, guard.fencing_token).valid
        with client.session(ttl=5) as other, pytest.raises(raftlock.LockHeld):
            other.try_lock(name)
        poll(lambda: session.last_renewed > killed, 15, "a keepalive through another member")
        assert not session.lost.is_set()
        guard.release()
        with session.lock(name, timeout=5) as again:
            assert again.fencing_token > guard.fencing_token
