"""Node watches against a real cluster: from a read's revision nothing is
missed, and a revision the members no longer keep is ``compacted``."""

from __future__ import annotations

import base64
import queue
import threading
import time
from typing import Iterator, Union

import httpx

import raftlock
from cluster import ServeCluster, UpCluster


def _reading(events: Iterator[raftlock.WatchEvent]) -> "queue.Queue[Union[raftlock.WatchEvent, BaseException]]":
    """Reads ``events`` in a thread, so a test waits for each with a
    deadline instead of hanging on a watch that delivers nothing (the
    thread ends when the client closes the stream)."""
    got: "queue.Queue[Union[raftlock.WatchEvent, BaseException]]" = queue.Queue()

    def run() -> None:
        try:
            for event in events:
                got.put(event)
        except BaseException as e:  # handed to the test
            got.put(e)

    threading.Thread(target=run, daemon=True).start()
    return got


def _next(got: "queue.Queue[Union[raftlock.WatchEvent, BaseException]]") -> raftlock.WatchEvent:
    item = got.get(timeout=30)
    if isinstance(item, BaseException):
        raise item
    return item


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
        got = _reading(events)
        seen = []
        last = revision
        for _ in range(4):
            event = _next(got)
            assert event.revision > last
            last = event.revision
            seen.append((event.kind, event.path, event.node.data if event.node else None))
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


def test_a_watch_resumes_on_another_member_without_repeats(serve_cluster: ServeCluster) -> None:
    """The member the watch streams from is killed: it reconnects to
    another from the last change delivered; each change arrives once."""
    e = serve_cluster.endpoints
    with raftlock.Client(e, timeout=3) as watcher, raftlock.Client(e[1:] + e[:1], timeout=3) as writer:
        writer.put_node("/watched", b"")
        _, revision = watcher.read_node("/watched")
        assert watcher.current_endpoint == e[0]
        got = _reading(watcher.watch("/watched", since_revision=revision))
        writer.put_node("/watched/a", b"a")
        first = _next(got)
        assert (first.kind, first.path) == ("put", "/watched/a")
        serve_cluster.kill(1)
        writer.put_node("/watched/b", b"b")
        writer.put_node("/watched/c", b"c")
        rest = [_next(got), _next(got)]
    assert [(ev.kind, ev.path) for ev in rest] == [("put", "/watched/b"), ("put", "/watched/c")]
