"""The real kazoo 2.11 client against raftlock's ZooKeeper door.

Run by tests/kazoo.rs with the connect string of a three-member cluster:
basic znode operations, a transaction, DataWatch and ChildrenWatch,
closeSession removing ephemerals, and kazoo's Lock recipe with several
clients, each checking that nobody else is inside the critical section.
Exits non-zero (an assertion) on the first thing that is not as
ZooKeeper would answer.
"""

import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError, NotEmptyError
from kazoo.recipe.lock import Lock

HOSTS = sys.argv[1]
WAIT = 20.0


def client():
    c = KazooClient(hosts=HOSTS, timeout=10.0)
    c.start(timeout=WAIT)
    return c


def eventually(what, check):
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.02)


def basics(zk):
    zk.ensure_path("/kz/app")
    assert zk.create("/kz/app/a", b"one") == "/kz/app/a"
    data, stat = zk.get("/kz/app/a")
    assert data == b"one" and stat.version == 0 and stat.dataLength == 3, stat
    stat = zk.set("/kz/app/a", b"two", version=0)
    assert stat.version == 1, stat
    try:
        zk.set("/kz/app/a", b"x", version=0)
        raise AssertionError("a stale version was accepted")
    except BadVersionError:
        pass
    try:
        zk.create("/kz/app/a")
        raise AssertionError("a second create succeeded")
    except NodeExistsError:
        pass
    try:
        zk.create("/kz/missing/child")
        raise AssertionError("a create without its parent succeeded")
    except NoNodeError:
        pass
    try:
        zk.delete("/kz/app")
        raise AssertionError("a node with children was deleted")
    except NotEmptyError:
        pass
    seq = zk.create("/kz/app/e-", b"", ephemeral=True, sequence=True)
    assert seq.startswith("/kz/app/e-") and len(seq) == len("/kz/app/e-") + 10, seq
    stat = zk.exists(seq)
    assert stat.ephemeralOwner == zk.client_id[0], (stat, zk.client_id)
    assert sorted(zk.get_children("/kz/app")) == sorted(["a", seq.rsplit("/", 1)[1]])
    assert "zookeeper" in zk.get_children("/")
    zk.delete("/kz/app/a")
    assert zk.exists("/kz/app/a") is None
    # create with makepath and a recursive delete, as recipes do.
    zk.create("/kz/deep/a/b", b"x", makepath=True)
    zk.delete("/kz/deep", recursive=True)
    assert zk.exists("/kz/deep") is None
    # A transaction: all or nothing.
    t = zk.transaction()
    t.create("/kz/app/t1", b"")
    t.check("/kz/app", 0)
    t.set_data("/kz/app/t1", b"set")
    results = t.commit()
    assert results[0] == "/kz/app/t1" and results[1] is True, results
    t = zk.transaction()
    t.create("/kz/app/t2", b"")
    t.delete("/kz/app/none")
    results = t.commit()
    assert isinstance(results[1], NoNodeError), results
    assert zk.exists("/kz/app/t2") is None


def watches(zk, other):
    seen = []

    @zk.DataWatch("/kz/w")
    def data_watch(data, stat, event):
        seen.append((data, event.type if event else None))

    other.create("/kz/w", b"1")
    eventually("the create", lambda: (b"1", "CREATED") in seen)
    other.set("/kz/w", b"2")
    eventually("the change", lambda: (b"2", "CHANGED") in seen)
    other.delete("/kz/w")
    eventually("the delete", lambda: (None, "DELETED") in seen)
    assert seen[0] == (None, None), seen

    lists = []

    @zk.ChildrenWatch("/kz/app")
    def children_watch(children):
        lists.append(sorted(children))

    other.create("/kz/app/c1")
    other.create("/kz/app/c2")
    eventually("both children", lambda: lists and {"c1", "c2"} <= set(lists[-1]))
    other.delete("/kz/app/c1")
    eventually("the child's delete", lambda: "c1" not in lists[-1])


def ephemerals_go_with_their_session(zk):
    c = client()
    c.create("/kz/eph", b"", ephemeral=True)
    assert zk.exists("/kz/eph") is not None
    c.stop()
    c.close()
    # closeSession removes them at once, not at the session's timeout.
    assert zk.exists("/kz/eph") is None


def locks(n_clients=4, rounds=5):
    clients = [client() for _ in range(n_clients)]
    clients[0].ensure_path("/kz/counter")
    inside = [0]
    guard = threading.Lock()
    errors = []
    tokens = []

    def work(c, name):
        try:
            lock = Lock(c, "/kz/lock", name)
            for _ in range(rounds):
                with lock:
                    with guard:
                        inside[0] += 1
                        alone = inside[0] == 1
                    try:
                        assert alone, "two holders at once"
                        # The lock node's czxid is the fencing token.
                        tokens.append(c.exists(lock.path + "/" + lock.node).czxid)
                        data, stat = c.get("/kz/counter")
                        value = int(data or b"0")
                        c.set("/kz/counter", str(value + 1).encode(), version=stat.version)
                        time.sleep(0.01)
                    finally:
                        with guard:
                            inside[0] -= 1
        except Exception as e:  # reported below, not swallowed
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(c, "worker-%d" % i)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
        assert not t.is_alive(), "a lock worker hung"
    assert not errors, errors
    data, _ = clients[0].get("/kz/counter")
    assert int(data) == n_clients * rounds, data
    assert None not in tokens and tokens == sorted(tokens) and len(set(tokens)) == len(tokens), tokens
    for c in clients:
        c.stop()
        c.close()


def main():
    zk = client()
    other = client()
    basics(zk)
    watches(zk, other)
    ephemerals_go_with_their_session(zk)
    locks()
    other.stop()
    zk.stop()
    print("kazoo scenario: ok")


if __name__ == "__main__":
    main()
