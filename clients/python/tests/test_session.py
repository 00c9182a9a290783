"""Sessions: keepalives, and `lost` firing before the cluster can have
expired the session."""

from __future__ import annotations

import threading
import time
from typing import List, Tuple

import httpx
import pytest

import raftlock
from cluster import UpCluster, poll


def test_keepalives_keep_a_session_alive_past_its_ttl(client: raftlock.Client) -> None:
    with client.session(ttl=1.5) as session:
        opened = session.last_renewed
        poll(lambda: session.last_renewed > opened + 3.0, 10, "keepalives for twice the TTL")
        assert not session.lost.is_set()
        answer = httpx.get(f"{client.current_endpoint}/v1/sessions/{session.id}", trust_env=False)
        assert answer.status_code == 200


def test_lost_fires_before_expiry_when_the_cluster_stops(own_cluster: UpCluster, name: str) -> None:
    calls: List[Tuple[float, raftlock.LostReason]] = []
    with raftlock.Client(own_cluster.endpoints, timeout=1) as client:
        session = client.session(ttl=3, on_lost=lambda reason: calls.append((time.monotonic(), reason)))
        guard = session.lock(name, timeout=5)
        assert not session.lost.is_set()
        own_cluster.stop()
        assert session.lost.wait(timeout=10), "lost never fired"
        assert [reason for _, reason in calls] == [raftlock.LostReason.KEEPALIVE_FAILED]
        assert session.lost_reason is raftlock.LostReason.KEEPALIVE_FAILED
        assert guard.lost.is_set()
        # The rule: at last_renewed + ttl - margin, so before the cluster
        # could expire the session (last_renewed + ttl at the earliest).
        fired = calls[0][0]
        assert session.lost_at == pytest.approx(
            session.last_renewed + session.ttl - raftlock.lost_margin(session.ttl)
        )
        assert session.lost_at <= fired < session.last_renewed + session.ttl


def test_session_not_found_fires_lost_at_once(client: raftlock.Client, name: str) -> None:
    reasons: List[raftlock.LostReason] = []
    session = client.session(ttl=30, on_lost=reasons.append)
    httpx.delete(f"{client.current_endpoint}/v1/sessions/{session.id}", trust_env=False).raise_for_status()
    with pytest.raises(raftlock.SessionNotFound):
        session.keepalive()
    assert session.lost.is_set() and reasons == [raftlock.LostReason.EXPIRED]
    with pytest.raises(raftlock.SessionLost):
        session.lock(name, timeout=1)
    session.close()  # already gone: not an error


def test_close_releases_locks_and_sets_lost_without_the_callback(client: raftlock.Client, name: str) -> None:
    called = threading.Event()
    with client.session(ttl=5, on_lost=lambda _: called.set()) as session:
        session.lock(name, timeout=5)
    assert session.lost_reason is raftlock.LostReason.CLOSED and not called.is_set()
    assert client.lock_state(name).holder is None


def test_the_client_closes_its_own_sessions(cluster: UpCluster, name: str) -> None:
    client = raftlock.Client(cluster.endpoints, timeout=5)
    guard = client.lock(name, timeout=5)
    client.close()
    assert guard.lost.is_set()
    with raftlock.Client(cluster.endpoints) as other:
        assert other.lock_state(name).holder is None
