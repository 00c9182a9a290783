"""Typed errors: each API code as its own class, with code, status and
message, and one base class to catch them all."""

from __future__ import annotations

import pytest

import raftlock
from cluster import free_base_port


def test_bad_requests(client: raftlock.Client) -> None:
    with pytest.raises(raftlock.BadRequest) as bad_name:
        client.lock("no spaces allowed", timeout=1)
    assert (bad_name.value.code, bad_name.value.status) == ("bad_request", 400)
    assert "invalid name" in bad_name.value.message
    with pytest.raises(raftlock.BadRequest):
        client.session(ttl=0.01)  # below the cluster's minimum TTL
    with pytest.raises(raftlock.BadRequest):
        client.put_node("locks/x", b"")  # the lock tree is not writable


def test_not_found_and_session_not_found(client: raftlock.Client, name: str) -> None:
    with pytest.raises(raftlock.NotFound) as missing:
        client.get_node(f"nowhere/{name}")
    assert missing.value.status == 404 and isinstance(missing.value, raftlock.RaftlockError)
    session = client.session(ttl=5)
    session.close()
    with pytest.raises(raftlock.SessionNotFound):
        session.keepalive()


def test_releasing_a_lost_lock_says_so(client: raftlock.Client, name: str) -> None:
    session = client.session(ttl=5)
    guard = session.lock(name, timeout=5)
    session.close()  # the cluster drops the lock with the session
    with pytest.raises(raftlock.SessionNotFound):
        guard.release()


def test_unreachable_cluster_is_unavailable() -> None:
    nowhere = f"127.0.0.1:{free_base_port()}"
    with raftlock.Client([nowhere], retry=raftlock.RetryPolicy(attempts=2)) as client:
        with pytest.raises(raftlock.Unavailable) as error:
            client.cluster()
    assert error.value.status is None and not error.value.outcome_unknown


def test_every_error_is_a_raftlock_error() -> None:
    for cls in raftlock.ERRORS_BY_CODE.values():
        assert issubclass(cls, raftlock.RaftlockError)
    assert raftlock.OutcomeUnknown("x").outcome_unknown and not raftlock.LockHeld("x").outcome_unknown


def test_error_classes_follow_the_contract_table() -> None:
    from raftlock import _codes, _failover

    for code, cls in raftlock.ERRORS_BY_CODE.items():
        assert cls.http_status == _codes.STATUS[code], code
        assert cls.outcome_unknown == (code in _codes.OUTCOME_UNKNOWN), code
    assert raftlock.ShuttingDown("x").outcome_unknown
    assert not raftlock.NotCaughtUp("x").outcome_unknown
    # The members a client moves on from refused before proposing.
    assert _failover._MEMBER_CANNOT_SERVE == {
        "storage_failed",
        "disk_full",
        "member_replaced",
        "overloaded",
    }
