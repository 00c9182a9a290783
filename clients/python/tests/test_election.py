"""Elections: campaign, proclaim, resign and observe (SSE)."""

from __future__ import annotations

import queue
import threading
from typing import List, Optional

import httpx
import pytest

import raftlock
from cluster import poll


def _candidates(client: raftlock.Client, name: str) -> int:
    """How many sessions wait in the election's line behind its leader."""
    answer = httpx.get(f"{client.current_endpoint}/v1/elections", params={"prefix": name}, trust_env=False)
    return sum(e["candidates"] for e in answer.json()["elections"] if e["election"] == name)


def test_campaign_proclaim_resign_observe(client: raftlock.Client, name: str) -> None:
    seen: "queue.Queue[Optional[str]]" = queue.Queue()

    def observe() -> None:
        for leader in client.observe(name):
            seen.put(leader.value if leader else None)
            if leader is not None and leader.value == "b":
                return

    observer = threading.Thread(target=observe, daemon=True)
    observer.start()
    assert seen.get(timeout=10) is None  # the state at connect: nobody leads

    with client.session(ttl=10) as a, client.session(ttl=10) as b, client.session(ttl=10) as c:
        first = a.election(name).campaign("a", timeout=5)
        assert seen.get(timeout=10) == "a"
        leader = client.leader(name)
        assert leader is not None and (leader.session_id, leader.fencing_token) == (a.id, first.fencing_token)

        a.election(name).proclaim("a2")
        assert seen.get(timeout=10) == "a2"
        with pytest.raises(raftlock.NotLeader):
            c.election(name).proclaim("c")
        with pytest.raises(raftlock.LockHeld):
            c.election(name).campaign("c", timeout=0)
        with pytest.raises(raftlock.NotOwner):
            c.election(name).resign()  # not a candidate while someone leads

        won: List[raftlock.Grant] = []
        campaigner = threading.Thread(target=lambda: won.append(b.election(name).campaign("b", timeout=30)))
        campaigner.start()
        poll(lambda: _candidates(client, name) == 1, 10, "b to queue behind a")
        a.election(name).resign()
        campaigner.join(timeout=30)
        assert won and won[0].fencing_token > first.fencing_token
        assert seen.get(timeout=10) == "b"
        observer.join(timeout=10)
        assert not observer.is_alive()


def test_a_campaign_that_times_out_withdraws_the_candidacy(client: raftlock.Client, name: str) -> None:
    with client.session(ttl=10) as a, client.session(ttl=10) as b:
        a.election(name).campaign("a", timeout=5)
        with pytest.raises(raftlock.Timeout):
            b.election(name).campaign("b", timeout=0.3)
        assert _candidates(client, name) == 0
