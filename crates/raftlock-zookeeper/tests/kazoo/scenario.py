"""The real kazoo 2.11 client against raftlock's ZooKeeper door.

Run by tests/kazoo.rs with the connect string of a three-member cluster:
basic znode operations, a transaction, ACLs stored and returned
(set_acls / get_acls, make_digest_acl, an invalid one refused), DataWatch
and ChildrenWatch,
closeSession removing ephemerals, and kazoo's recipes with several clients
spread over the members, each checking the recipe's promise: Lock (nobody
else inside the critical section), Election (one leader at a time, every
contender leads), Semaphore (never more holders than leases), Barrier and
DoubleBarrier (nobody passes early), Counter (no lost increment), Queue and
LockingQueue (every item taken exactly once).
Exits non-zero (an assertion) on the first thing that is not as
ZooKeeper would answer.
"""

import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    InvalidACLError,
    NoNodeError,
    NodeExistsError,
    NotEmptyError,
)
from kazoo.security import ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Id, Permissions, make_digest_acl
from kazoo.recipe.barrier import Barrier, DoubleBarrier
from kazoo.recipe.counter import Counter
from kazoo.recipe.election import Election
from kazoo.recipe.lock import Lock, Semaphore
from kazoo.recipe.queue import LockingQueue, Queue

HOSTS = sys.argv[1]
MEMBERS = HOSTS.split(",")
WAIT = 20.0


def client(home=None):
    """A started client; with `home`, it tries member `home` first (kazoo
    otherwise shuffles them), so a recipe's clients can be spread out."""
    if home is None:
        c = KazooClient(hosts=HOSTS, timeout=10.0)
    else:
        k = home % len(MEMBERS)
        c = KazooClient(hosts=",".join(MEMBERS[k:] + MEMBERS[:k]), timeout=10.0, randomize_hosts=False)
    c.start(timeout=WAIT)
    return c


def spread(n):
    return [client(i) for i in range(n)]


def stop_all(clients):
    for c in clients:
        c.stop()
        c.close()


def run_threads(targets):
    """Runs each callable on a thread; the errors they raised."""
    errors = []

    def guarded(f):
        try:
            f()
        except Exception as e:  # reported by the caller, not swallowed
            errors.append(repr(e))

    threads = [threading.Thread(target=guarded, args=(f,)) for f in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
        assert not t.is_alive(), "a recipe worker hung"
    return errors


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


def acls(zk, other):
    # Stored and returned as given, by another member too; not enforced.
    bob = make_digest_acl("bob", "secret", all=True)
    assert bob.id.id == "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=", bob
    zk.create("/kz/acl", b"", acl=[bob] + list(READ_ACL_UNSAFE))
    acl, stat = other.get_acls("/kz/acl")
    assert list(acl) == [bob] + list(READ_ACL_UNSAFE) and stat.aversion == 0, (acl, stat)
    net = ACL(Permissions.READ | Permissions.WRITE, Id("ip", "10.0.0.0/8"))
    stat = other.set_acls("/kz/acl", [net], version=0)
    assert stat.aversion == 1, stat
    try:
        zk.set_acls("/kz/acl", list(OPEN_ACL_UNSAFE), version=0)
        raise AssertionError("a stale ACL version was accepted")
    except BadVersionError:
        pass
    assert list(zk.get_acls("/kz/acl")[0]) == [net]
    try:
        zk.set_acls("/kz/acl", [ACL(Permissions.ALL, Id("ip", "10.0.0.0/40"))])
        raise AssertionError("an invalid ACL was accepted")
    except InvalidACLError:
        pass
    # The tokens' grants decide access, not the ACL: this client may write.
    zk.set("/kz/acl", b"still writable")
    zk.set_acls("/kz/acl", list(OPEN_ACL_UNSAFE))
    assert list(other.get_acls("/kz/acl")[0]) == list(OPEN_ACL_UNSAFE)
    zk.delete("/kz/acl")


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
    clients = spread(n_clients)
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


def election(n_clients=3, terms=2):
    clients = spread(n_clients)
    leading = [0]
    led = {}
    guard = threading.Lock()
    errors = []

    def lead(name):
        with guard:
            leading[0] += 1
            if leading[0] != 1:
                errors.append("two leaders at once")
            led[name] = led.get(name, 0) + 1
        # A round trip while leading, so that an overlap would show.
        clients[0].exists("/kz/election")
        with guard:
            leading[0] -= 1

    def contend(c, name):
        e = Election(c, "/kz/election", name)
        for _ in range(terms):
            e.run(lead, name)

    errors += run_threads([lambda c=c, i=i: contend(c, "c%d" % i) for i, c in enumerate(clients)])
    assert not errors, errors
    assert led == {"c%d" % i: terms for i in range(n_clients)}, led
    stop_all(clients)


def semaphore(n_clients=5, leases=2, rounds=4):
    clients = spread(n_clients)
    holders = [0]
    most = [0]
    guard = threading.Lock()

    def work(c, name):
        sem = Semaphore(c, "/kz/semaphore", name, max_leases=leases)
        for _ in range(rounds):
            with sem:
                with guard:
                    holders[0] += 1
                    most[0] = max(most[0], holders[0])
                c.exists("/kz/semaphore")
                with guard:
                    holders[0] -= 1

    errors = run_threads([lambda c=c, i=i: work(c, "s%d" % i) for i, c in enumerate(clients)])
    assert not errors, errors
    assert 1 <= most[0] <= leases, most
    stop_all(clients)


def barriers(n_clients=3):
    clients = spread(n_clients)
    Barrier(clients[0], "/kz/barrier").create()
    # Waiters stay blocked while the barrier stands.
    assert Barrier(clients[1], "/kz/barrier").wait(timeout=0.2) is False
    passed = []

    def wait(c):
        assert Barrier(c, "/kz/barrier").wait(timeout=WAIT), "released"
        passed.append(c)

    threads = [threading.Thread(target=wait, args=(c,)) for c in clients[1:]]
    for t in threads:
        t.start()
    assert not passed, "a waiter passed a standing barrier"
    Barrier(clients[0], "/kz/barrier").remove()
    for t in threads:
        t.join(WAIT)
    assert len(passed) == n_clients - 1, passed

    # DoubleBarrier: nobody enters before all have arrived, nobody leaves
    # before all are done.
    arrived = [0]
    left = [0]
    guard = threading.Lock()
    errors = []

    def both_ways(c, i):
        b = DoubleBarrier(c, "/kz/double", n_clients, identifier="d%d" % i)
        with guard:
            arrived[0] += 1
        b.enter()
        with guard:
            if arrived[0] != n_clients:
                errors.append("entered with %d of %d arrived" % (arrived[0], n_clients))
            if left[0] != 0:
                errors.append("entered after someone left")
        b.leave()
        with guard:
            left[0] += 1

    errors += run_threads([lambda c=c, i=i: both_ways(c, i) for i, c in enumerate(clients)])
    assert not errors, errors
    assert left[0] == n_clients
    stop_all(clients)


def counter(n_clients=4, each=10):
    clients = spread(n_clients)

    def work(c):
        n = Counter(c, "/kz/counter-recipe")
        for _ in range(each):
            n += 1

    errors = run_threads([lambda c=c: work(c) for c in clients])
    assert not errors, errors
    assert Counter(clients[1], "/kz/counter-recipe").value == n_clients * each
    stop_all(clients)


def queues(n_producers=3, n_consumers=3, each=8):
    clients = spread(n_producers + n_consumers)
    producers, consumers = clients[:n_producers], clients[n_producers:]
    total = n_producers * each

    # Queue: several producers and consumers, each item out exactly once.
    taken = []
    guard = threading.Lock()

    def produce(c, p):
        q = Queue(c, "/kz/queue")
        for k in range(each):
            q.put(("%d-%d" % (p, k)).encode())

    def consume(c):
        q = Queue(c, "/kz/queue")
        deadline = time.monotonic() + WAIT
        while True:
            with guard:
                if len(taken) >= total:
                    return
            item = q.get()
            if item is None:
                assert time.monotonic() < deadline, "the queue ran dry early"
                time.sleep(0.01)
                continue
            with guard:
                taken.append(item)

    errors = run_threads(
        [lambda c=c, p=p: produce(c, p) for p, c in enumerate(producers)]
        + [lambda c=c: consume(c) for c in consumers]
    )
    assert not errors, errors
    expected = sorted(("%d-%d" % (p, k)).encode() for p in range(n_producers) for k in range(each))
    assert sorted(taken) == expected, taken
    assert len(Queue(producers[0], "/kz/queue")) == 0
    # One producer's items come out in the order it put them.
    q = Queue(producers[0], "/kz/fifo")
    for k in range(5):
        q.put(b"%d" % k)
    assert [Queue(consumers[0], "/kz/fifo").get() for _ in range(5)] == [b"%d" % k for k in range(5)]

    # LockingQueue: an item is held while processed, removed by consume().
    lq = LockingQueue(producers[0], "/kz/lqueue")
    lq.put_all([b"job-%d" % k for k in range(total)])
    done = []

    def work(c):
        q = LockingQueue(c, "/kz/lqueue")
        while True:
            with guard:
                if len(done) >= total:
                    return
            item = q.get(timeout=0.5)
            if item is None:
                continue
            with guard:
                done.append(item)
            assert q.consume(), "consumed"

    errors = run_threads([lambda c=c: work(c) for c in consumers])
    assert not errors, errors
    assert sorted(done) == sorted(b"job-%d" % k for k in range(total)), done
    assert len(LockingQueue(producers[0], "/kz/lqueue")) == 0
    stop_all(clients)


def main():
    zk = client()
    other = client()
    basics(zk)
    acls(zk, other)
    watches(zk, other)
    ephemerals_go_with_their_session(zk)
    locks()
    for name, recipe in [
        ("election", election),
        ("semaphore", semaphore),
        ("barriers", barriers),
        ("counter", counter),
        ("queues", queues),
    ]:
        start = time.monotonic()
        recipe()
        print("kazoo %s: ok (%.1f s)" % (name, time.monotonic() - start), flush=True)
    other.stop()
    zk.stop()
    print("kazoo scenario: ok")


if __name__ == "__main__":
    main()
