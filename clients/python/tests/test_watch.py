"""Node watches against a real cluster: from a read's revision nothing is
missed, and a revision the members no longer keep is ``compacted``."""

from __future__ import annotations

import base64
import time

import httpx

import raftlock
from cluster import UpCluster


def test_a_watch_from_a_read_misses_nothing(cluster: UpCluster, client: raftlock.Client, name: str) -> None:
    root = f"/{name}/svc"
    client.put_node(f"{root}/a", b"1")
    node, revision = client.read_node(f"{root}/a")
    assert node.data == b"1" and revision >= node.mod_revision
    client.put_node(f"{root}/b", b"2")  # after the read, before the watch
    with raftlock.Client(list(reversed(cluster.endpoints)), timeout=5) as watcher:
        events = watcher.watch(root, since_revision=revision)
        client.put_node(f"{root}/a", b"3")
        client.delete_node(f"{root}/b")
        client.put_node(f"/{name}/elsewhere", b"x")
        client.put_node(f"{root}/c", b"4")
        seen = []
        last = revision
        for event in events:
            assert event.revision > last
            last = event.revision
            seen.append((event.kind, event.path, event.node.data if event.node else None))
            if len(seen) == 4:
                break
        events.close()  # type: ignore[attr-defined]
    assert seen == [
        ("put", f"{root}/b", b"2"),
        ("put", f"{root}/a", b"3"),
        ("delete", f"{root}/b", None),
        ("put", f"{root}/c", b"4"),
    ]


def test_a_watch_from_a_compacted_revision_ends(cluster: UpCluster, client: raftlock.Client, name: str) -> None:
    root = f"/{name}/bulk"
    client.put_node(f"{root}/first", b"1")
    _, revision = client.read_node(root)
    # Each member keeps its last 10,000 changes: 80 transactions of 128
    # puts (the API's most per transaction) push the revision out.
    data = base64.b64encode(b"x").decode()
    for batch in range(80):
        ops = [{"put": {"path": f"{root}/{batch}-{i}", "data": data}} for i in range(128)]
        answer = httpx.post(f"{cluster.endpoints[0]}/v1/txn", json={"compare": [], "success": ops, "failure": []}, timeout=30)
        assert answer.status_code == 200, answer.text
    # A member that has not applied every write yet still serves the
    # revision (its first event is then a put): retry within a deadline.
    deadline = time.monotonic() + 60
    while True:
        events = client.watch(root, since_revision=revision)
        first = next(events)
        if first.kind == "compacted":
            assert first.floor is not None and first.floor > revision
            assert list(events) == []  # the watch ended
            return
        events.close()  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, f"no compaction notice, got {first}"
