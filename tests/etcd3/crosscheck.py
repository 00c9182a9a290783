"""A seeded cross-check of raftlock's etcd door against a real etcd: the
same random request sequences (puts, ranges with every option, deletes,
transactions) go to both, and every answer is compared. Revisions are
compared by order: each sequence works under its own key prefix, and a
revision is taken relative to the store's revision when the sequence
began (both stores count one revision per key write).

Deliberate differences (docs/etcd.md) are kept out of the comparison:
sorting by a target other than the key or create revision is compared
without a limit and with ties put in key order (etcd's sort is not
stable); nothing here grants leases, compacts or watches.

Usage: crosscheck.py ETCD_ENDPOINT RAFTLOCK_ENDPOINT SEEDS [FIRST_SEED]
Prints the first difference with its seed and exits 1, or a summary.
"""

import random
import sys

import collections

import grpc
from etcd3 import etcdrpc

# What the sequences exercised, so a run that compared nothing shows it.
STATS = collections.Counter()

KEYS = ["a", "b", "b/c", "c", "d/e", "d/f"]


def stub(endpoint):
    return etcdrpc.KVStub(grpc.insecure_channel(endpoint))


def rel(rev, base):
    return rev - base if rev else 0


def kv_view(kv, base):
    return (kv.key, kv.value, kv.version, rel(kv.create_revision, base), rel(kv.mod_revision, base), kv.lease)


def call(fn, request):
    try:
        return ("ok", fn(request, timeout=20))
    except grpc.RpcError as e:
        return ("error", e.code(), e.details())


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.prefix = f"x/{seed}/".encode()
        self.writes = 0

    def key(self):
        return self.prefix + self.r.choice(KEYS).encode()

    def end(self, key):
        roll = self.r.random()
        if roll < 0.4:
            return b""
        if roll < 0.7:
            return self.prefix + b"\xff"
        return key + b"\x00" if self.r.random() < 0.5 else self.prefix + self.r.choice(KEYS).encode()

    def range(self, past):
        key = self.key() if self.r.random() < 0.6 else self.prefix
        end = self.end(key) if key != self.prefix else self.prefix + b"\xff"
        target = self.r.choice([0, 0, 1, 2, 3, 4])
        order = self.r.choice([0, 0, 1, 2])
        ties = target != 0
        req = etcdrpc.RangeRequest(
            key=key,
            range_end=end,
            limit=0 if ties else self.r.choice([0, 0, 1, 2, 3]),
            sort_order=order,
            sort_target=target,
            keys_only=self.r.random() < 0.2,
            count_only=self.r.random() < 0.1,
        )
        if self.r.random() < 0.2:
            req.min_mod_revision = past(self.r)
        if self.r.random() < 0.2:
            req.max_mod_revision = past(self.r)
        if self.r.random() < 0.2:
            req.min_create_revision = past(self.r)
        if self.r.random() < 0.2:
            req.max_create_revision = past(self.r)
        if self.r.random() < 0.3:
            req.revision = past(self.r)
        return req, ties

    def put(self):
        return etcdrpc.PutRequest(key=self.key(), value=bytes([self.r.randrange(4)]), prev_kv=self.r.random() < 0.5)

    def delete(self):
        key = self.key()
        return etcdrpc.DeleteRangeRequest(key=key, range_end=self.end(key), prev_kv=self.r.random() < 0.5)

    def compare(self):
        c = etcdrpc.Compare(key=self.key(), result=self.r.randrange(4), target=self.r.choice([0, 1, 2, 3]))
        if c.target == 0:
            c.version = self.r.randrange(3)
        elif c.target == 1:
            c.create_revision = 0
        elif c.target == 2:
            c.mod_revision = 0
        else:
            c.value = bytes([self.r.randrange(4)])
        return c

    def op(self, past):
        roll = self.r.random()
        if roll < 0.4:
            return etcdrpc.RequestOp(request_put=self.put()), False
        if roll < 0.6:
            return etcdrpc.RequestOp(request_delete_range=self.delete()), False
        req, ties = self.range(past)
        return etcdrpc.RequestOp(request_range=req), ties

    def txn(self, past):
        ties = False
        success, failure = [], []
        for branch in (success, failure):
            for _ in range(self.r.randrange(3)):
                op, t = self.op(past)
                ties |= t
                branch.append(op)
        return etcdrpc.TxnRequest(compare=[self.compare() for _ in range(self.r.randrange(3))], success=success, failure=failure), ties


def range_view(resp, base, ties):
    kvs = [kv_view(kv, base) for kv in resp.kvs]
    if ties:
        kvs = sorted(kvs)
    return ("range", kvs, resp.count, resp.more)


def answer(kind, outcome, base, ties):
    if outcome[0] == "error":
        return ("error", outcome[1], outcome[2])
    resp = outcome[1]
    if kind == "range":
        return range_view(resp, base, ties)
    if kind == "put":
        return ("put", kv_view(resp.prev_kv, base) if resp.HasField("prev_kv") else None)
    if kind == "delete":
        return ("delete", resp.deleted, [kv_view(kv, base) for kv in resp.prev_kvs])
    out = []
    for r in resp.responses:
        which = r.WhichOneof("response")
        if which == "response_range":
            out.append(range_view(r.response_range, base, ties))
        elif which == "response_put":
            p = r.response_put
            out.append(("put", kv_view(p.prev_kv, base) if p.HasField("prev_kv") else None))
        elif which == "response_delete_range":
            d = r.response_delete_range
            out.append(("delete", d.deleted, [kv_view(kv, base) for kv in d.prev_kvs]))
    return ("txn", resp.succeeded, out)


def run(seed, systems):
    gens = [Gen(seed) for _ in systems]
    bases = []
    for s in systems:
        head = s.Range(etcdrpc.RangeRequest(key=b"\x00", range_end=b"\x00", count_only=True), timeout=20)
        bases.append(head.header.revision)
    steps = random.Random(seed).randrange(5, 25)
    for step in range(steps):
        answers = []
        for s, g, base in zip(systems, gens, bases):
            # A past revision inside this sequence (or a future one, rarely).
            def past(r, base=base, g=g):
                return base + r.randrange(0, g.writes + 2)
            kind_roll = g.r.random()
            if kind_roll < 0.35:
                req, ties, kind = g.put(), False, "put"
                outcome = call(s.Put, req)
            elif kind_roll < 0.5:
                req, ties, kind = g.delete(), False, "delete"
                outcome = call(s.DeleteRange, req)
            elif kind_roll < 0.8:
                (req, ties), kind = g.range(past), "range"
                outcome = call(s.Range, req)
            else:
                (req, ties), kind = g.txn(past), "txn"
                outcome = call(s.Txn, req)
            if outcome[0] == "ok" and kind != "range":
                # Both count the store's revision the same way: follow it.
                g.writes = outcome[1].header.revision - base
            answers.append((answer(kind, outcome, base, ties), req))
        a = answers[0][0]
        STATS[kind] += 1
        if a[0] == "error":
            STATS[f"error {a[1]}"] += 1
        elif kind == "range" and a[1]:
            STATS["range with keys"] += 1
        elif kind == "txn":
            STATS["txn succeeded" if a[1] else "txn failed"] += 1
        elif kind == "delete" and a[1]:
            STATS["delete that deleted"] += 1
        if answers[0][0] != answers[1][0]:
            print(f"DIFFERENCE seed {seed} step {step}:\n request: {answers[0][1]}\n etcd:     {answers[0][0]}\n raftlock: {answers[1][0]}", flush=True)
            return False
    return True


def main():
    etcd, raftlock, seeds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    first = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    systems = [stub(etcd), stub(raftlock)]
    for seed in range(first, first + seeds):
        if not run(seed, systems):
            sys.exit(1)
    print(f"{seeds} seeded sequences from seed {first}: no difference", flush=True)
    print("  " + ", ".join(f"{k}: {v}" for k, v in sorted(STATS.items())), flush=True)


main()
