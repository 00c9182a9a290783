"""python-etcd3 0.12 (PyPI) against raftlock's etcd doors: its Lock recipe
with contenders on every member, a holder whose lease runs out, a watch.
Prints one line per check; exits non-zero on the first failure.

Usage: lock_scenario.py HOST:PORT[,HOST:PORT...]
"""

import sys
import threading
import time

import etcd3

endpoints = [e.rsplit(":", 1) for e in sys.argv[1].split(",")]


def client(i):
    host, port = endpoints[i % len(endpoints)]
    return etcd3.client(host=host, port=int(port), timeout=20)


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


# Keys, ranges and a transaction.
c = client(0)
c.delete_prefix("py/")
c.put("py/a", "1")
c.put("py/b", "2")
value, meta = c.get("py/a")
check("get returns the put value", value == b"1" and meta.version == 1)
check("get_prefix sees both keys", sorted(k.key for _, k in c.get_prefix("py/")) == [b"py/a", b"py/b"])
ok, _ = c.transaction(
    compare=[c.transactions.value("py/a") == "1"],
    success=[c.transactions.put("py/a", "3")],
    failure=[],
)
check("a transaction whose compare holds runs its success branch", ok and c.get("py/a")[0] == b"3")

# The Lock recipe: contenders on every member never overlap.
holder = []
overlaps = []
entered = []
guard = threading.Lock()


def acquire(lock, within=120):
    """python-etcd3's acquire watches for the holder's delete from the
    revision it starts its watch at, so a delete between its failed
    transaction and its watch is missed until the timeout: short timeouts,
    retried, bound that wait."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if lock.acquire(timeout=3):
            return True
    return False


def contend(i):
    lock = client(i).lock("jobs", ttl=10)
    for _ in range(3):
        if not acquire(lock):
            overlaps.append(f"contender {i} timed out")
            return
        with guard:
            if holder:
                overlaps.append(f"{i} entered while {holder[0]} held")
            holder.append(i)
            entered.append(i)
        time.sleep(0.05)
        with guard:
            holder.remove(i)
        lock.release()


threads = [threading.Thread(target=contend, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(f"4 contenders x 3 acquisitions, none overlapping ({overlaps})", not overlaps and len(entered) == 12)

# A holder whose lease is never refreshed loses the lock when it expires.
stale = client(1).lock("expiring", ttl=2)
check("the stale holder acquires", stale.acquire(timeout=10))
start = time.monotonic()
waiter = client(2).lock("expiring", ttl=10)
check("a waiter acquires once the holder's lease expired", acquire(waiter, 30))
check("not before the lease's TTL", time.monotonic() - start >= 1.5)
waiter.release()

# A watch sees a put made through another member.
events, cancel = client(0).watch_prefix("py/watched/")
client(1).put("py/watched/x", "y")
first = next(events)
cancel()
check("a watch sees the put", first.key == b"py/watched/x" and first.value == b"y")
print("all checks passed", flush=True)
