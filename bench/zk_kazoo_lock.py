#!/usr/bin/env python3
"""The uncontended lock loop on kazoo, a ZooKeeper client the bench did
not write, so `raftlock-bench zk-crosscheck` can hold the bench's own
ZooKeeper rows against it on the same cluster.

Each client has its own session (one KazooClient) and its own lock, and
loops kazoo's `Lock` recipe (create an ephemeral sequential node under
the lock's directory, list the children, delete on release) as fast as
it can. Clients are spread over `--procs` processes (kazoo is threaded
Python; one process would be bound by its interpreter lock).

Protocol with the caller, one line each on stdout/stdin: the script
prints `ready` once every session is open and has done one unrecorded
cycle, waits for a line on stdin, runs for `--secs`, prints one JSON
object: cycles, secs, acquire/release latencies (ms), errors.
"""

import argparse
import json
import multiprocessing as mp
import sys
import threading
import time

from kazoo.client import KazooClient


def percentile(sorted_values, q):
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return sorted_values[i]


def worker(hosts, locks, ready, go, stop_at, out):
    """One process: a thread per client."""
    clients = []
    for h in hosts:
        c = KazooClient(hosts=h, timeout=30.0)
        c.start(timeout=30)
        clients.append(c)
    lock_objs = []
    for c, name in zip(clients, locks):
        lk = c.Lock("/kazoo-bench/" + name)
        lk.acquire(timeout=10)
        lk.release()
        lock_objs.append(lk)
    ready.wait()
    go.wait()
    end = stop_at.value
    results = []

    def run(lk):
        acq, rel, errors = [], [], 0
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                if not lk.acquire(timeout=5):
                    errors += 1
                    continue
                t1 = time.monotonic()
                lk.release()
                t2 = time.monotonic()
            except Exception:  # counted, as the bench counts its errors
                errors += 1
                continue
            acq.append((t1 - t0) * 1000.0)
            rel.append((t2 - t1) * 1000.0)
        results.append((acq, rel, errors))

    threads = [threading.Thread(target=run, args=(lk,)) for lk in lock_objs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    acq = [x for r in results for x in r[0]]
    rel = [x for r in results for x in r[1]]
    errors = sum(r[2] for r in results)
    out.put((acq, rel, errors))
    for c in clients:
        c.stop()
        c.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", required=True,
                   help="comma-separated host:port, one per client (client i's server)")
    p.add_argument("--secs", type=float, default=5.0)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--tag", default="k", help="lock name prefix")
    a = p.parse_args()
    hosts = a.hosts.split(",")
    n = len(hosts)
    procs = max(1, min(a.procs, n))
    ready = mp.Barrier(procs + 1)
    go = mp.Event()
    stop_at = mp.Value("d", 0.0)
    out = mp.Queue()
    ps = []
    for k in range(procs):
        idx = list(range(k, n, procs))
        mine = [hosts[i] for i in idx]
        locks = ["%s%d-%d" % (a.tag, n, i) for i in idx]
        pr = mp.Process(target=worker, args=(mine, locks, ready, go, stop_at, out))
        pr.start()
        ps.append(pr)
    ready.wait()
    print("ready", flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    stop_at.value = t0 + a.secs
    go.set()
    parts = [out.get() for _ in ps]
    secs = time.monotonic() - t0
    acq = sorted(x for r in parts for x in r[0])
    rel = sorted(x for r in parts for x in r[1])
    print(json.dumps({
        "cycles": len(acq),
        "secs": secs,
        "errors": sum(r[2] for r in parts),
        "acquire_p50_ms": percentile(acq, 0.50),
        "acquire_p99_ms": percentile(acq, 0.99),
        "acquire_max_ms": acq[-1] if acq else 0.0,
        "release_p50_ms": percentile(rel, 0.50),
        "release_max_ms": rel[-1] if rel else 0.0,
    }), flush=True)
    # Closing the sessions happens after the result, outside the window.
    for pr in ps:
        pr.join()


if __name__ == "__main__":
    main()
