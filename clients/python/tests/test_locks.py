"""Locks against a real cluster: guards, try_lock, timeouts, and two
processes contending for one lock."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import raftlock
from cluster import UpCluster

HERE = Path(__file__).parent


def test_a_guard_holds_the_lock_and_releases_it_on_exit(client: raftlock.Client, name: str) -> None:
    with client.lock(name, timeout=5) as guard:
        state = client.lock_state(name)
        assert state.holder is not None
        assert (state.holder.fencing_token, state.holder.node) == (guard.fencing_token, guard.node)
        assert client.fencing_check(name, guard.fencing_token).valid
        assert not guard.lost.is_set()
    assert client.lock_state(name).holder is None
    assert not client.fencing_check(name, guard.fencing_token).valid
    guard.release()  # a second release does nothing


def test_try_lock_takes_a_free_lock_and_refuses_a_held_one(client: raftlock.Client, name: str) -> None:
    with client.session(ttl=5) as other:
        first = other.try_lock(name)
        with pytest.raises(raftlock.LockHeld) as held:
            client.try_lock(name)
        assert (held.value.code, held.value.status) == ("lock_held", 409)
        assert client.lock_state(name).waiters == []  # the refused try left nothing queued
        first.release()
    with client.try_lock(name) as second:
        assert second.fencing_token > first.fencing_token


def test_a_timed_out_wait_leaves_no_node(client: raftlock.Client, name: str) -> None:
    with client.session(ttl=5) as other, other.lock(name, timeout=5):
        with pytest.raises(raftlock.Timeout):
            client.lock(name, timeout=0.3)
        state = client.lock_state(name)
        assert state.holder is not None and state.holder.session_id == other.id
        assert state.waiters == []


def test_one_session_cannot_hold_a_lock_twice(client: raftlock.Client, name: str) -> None:
    """The cluster would hand the same node to both; the session queues locally."""
    with client.session(ttl=5) as session, session.lock(name, timeout=5):
        with pytest.raises(raftlock.LockHeld):
            session.try_lock(name)
        with pytest.raises(raftlock.Timeout):
            session.lock(name, timeout=0.2)


def test_two_processes_exclude_each_other_with_increasing_tokens(
    cluster: UpCluster, name: str, tmp_path: Path
) -> None:
    rounds = 15
    contenders = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "contender.py"),
                ",".join(cluster.endpoints),
                name,
                str(rounds),
                str(tmp_path),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for process in contenders:  # both sessions open before either locks
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        for process in contenders:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.close()
        codes = [process.wait(timeout=120) for process in contenders]
    finally:
        for process in contenders:
            process.kill()
            process.wait()
    assert codes == [0, 0], "a contender found the other inside the critical section"
    lines = (tmp_path / "tokens").read_text().split("\n")[:-1]
    tokens = [int(line.split()[0]) for line in lines]
    assert len(tokens) == 2 * rounds
    assert all(a < b for a, b in zip(tokens, tokens[1:])), f"tokens not strictly increasing: {tokens}"
    assert len({line.split()[1] for line in lines}) == 2


def test_lock_delay_holds_the_lock_off_after_a_close_by_someone_else(cluster: UpCluster, name: str) -> None:
    """The holder's session is closed from another member (as an operator
    would, ``DELETE /v1/sessions/{id}``): the next ``lock`` is granted no
    earlier than the delay after the close, and ``lock_state`` shows the
    lock held off, with its delay, in between."""
    delay = 1.5
    with raftlock.Client(cluster.endpoints, timeout=5) as first, raftlock.Client(
        list(reversed(cluster.endpoints)), timeout=5
    ) as other:
        stuck = first.session(ttl=10)
        with other.session(ttl=10) as following:
            stuck.lock(name, timeout=5, lock_delay=delay)
            with pytest.raises(raftlock.BadRequest):
                following.lock(name, timeout=0, lock_delay=0.5)
            closing = time.monotonic()
            request = urllib.request.Request(f"{cluster.endpoints[2]}/v1/sessions/{stuck.id}", method="DELETE")
            with urllib.request.urlopen(request, timeout=5) as answer:
                assert answer.status == 204
            during = other.lock_state(name)
            assert during.held_off and during.holder is None, during
            assert during.lock_delay == delay
            with following.lock(name, timeout=10, lock_delay=delay) as guard:
                took = time.monotonic() - closing
                assert took >= delay, f"granted {took:.3f} s after the close, inside the delay"
                after = other.lock_state(name)
                assert not after.held_off and after.holder is not None
                assert after.holder.fencing_token == guard.fencing_token
        stuck.close()


def test_the_clients_own_session_takes_a_lock_delay(cluster: UpCluster, name: str) -> None:
    """``Client.lock`` passes ``lock_delay`` on, as ``Session.lock`` does."""
    with raftlock.Client(cluster.endpoints, timeout=5) as client:
        with client.lock(name, timeout=5, lock_delay=0.7):
            assert client.lock_state(name).lock_delay == 0.7
