"""A seeded cross-check of raftlock's etcd door against a real etcd: the
same random request sequences go to both, and every answer is compared.
A sequence mixes puts (with and without a lease, `ignore_value`,
`ignore_lease`), ranges with every option, deletes, transactions, lease
grants (etcd's own ids and chosen ones), revokes, TimeToLive with keys,
Leases, compactions, and watches (from inside the sequence, from now, and
from below the compact revision).

Revisions are compared by order, not by value: raftlock's revision counts
every change of its state (a lease grant or revoke, a Compact), etcd's
only key writes. Each system's revision of the k-th write of a sequence
is recorded from its own answers, a revision in an answer is compared as
its rank among them (0 for none; a revision that is no write of the
sequence is shown as such and differs), and a revision sent in a request
names the same logical point in both: before the sequence, after its k-th
write, or one past the system's own head (a future revision). Lease ids
are compared as their order of grant within the sequence.

Every sequence works under its own key prefix and reads only revisions of
its own, and compacts only at a revision of its own writes, above any
earlier sequence's compaction in both systems, so sequences do not see
each other. Lease TTLs are 600 s, so nothing expires during a run; at a
sequence's end its leases are revoked. Watches opened from a past
revision are opened after the sequence's other requests (a compaction
does not race their replay); at the end every watch's own key is put and
deleted, and its events are compared up to the one it must see last
(each read bounded by the stream's deadline, so a missing event fails
with the seed).

Deliberate differences (docs/etcd.md) are kept out of the comparison:
sorting by a target other than the key or create revision is compared
without a limit and with ties put in key order (etcd's sort is not
stable); TimeToLive's TTL is compared only as "within 10 s of the
granted TTL" (raftlock answers the granted TTL); response headers are not
compared; and no watch starts exactly at the compact revision (etcd
drops a delete made at that revision and the prev_kv of changes made
there, raftlock keeps the changes at its floor whole).

Usage: crosscheck.py ETCD_ENDPOINT RAFTLOCK_ENDPOINTS SEEDS [FIRST_SEED]
RAFTLOCK_ENDPOINTS is a comma-separated list of the members' doors: the
sequences go to a follower's (forwarded writes, read-index reads).
Prints the first difference with its seed and exits 1, or a summary and
a STATS line.
"""

import collections
import queue
import random
import sys

import grpc
from etcd3 import etcdrpc

# What the sequences exercised, so a run that compared nothing shows it.
STATS = collections.Counter()

KEYS = ["a", "b", "b/c", "c", "d/e", "d/f"]
TTL = 600
# TimeToLive's remaining TTL is compared as within this of the granted.
TTL_SLACK = 10
# How long a request may take, and a watch stream from its creation.
TIMEOUT = 20
WATCH_TIMEOUT = 60
NOPUT = etcdrpc.WatchCreateRequest.NOPUT
NODELETE = etcdrpc.WatchCreateRequest.NODELETE


def call(fn, request):
    try:
        return ("ok", fn(request, timeout=TIMEOUT))
    except grpc.RpcError as e:
        return ("error", e.code(), e.details())


def prefix_end(key):
    return key[:-1] + bytes([key[-1] + 1])


class Watch:
    """One watch on its own stream; events are read only at the end."""

    def __init__(self, side, create):
        self.create = create
        self.requests = queue.Queue()
        self.requests.put(etcdrpc.WatchRequest(create_request=create))
        self.call = side.watch.Watch(self._requests(), timeout=WATCH_TIMEOUT)
        self.responses = iter(self.call)

    def _requests(self):
        while True:
            item = self.requests.get()
            if item is None:
                return
            yield item

    def next(self):
        """The next response, or an ("error", ...) tuple."""
        try:
            return next(self.responses)
        except StopIteration:
            return ("error", "stream ended")
        except grpc.RpcError as e:
            return ("error", e.code(), e.details())

    def close(self):
        self.requests.put(None)
        self.call.cancel()


class Side:
    """One system's view of the running sequence: its own revisions and
    lease ids, by their logical position."""

    def __init__(self, endpoint):
        channel = grpc.insecure_channel(endpoint)
        self.kv = etcdrpc.KVStub(channel)
        self.lease = etcdrpc.LeaseStub(channel)
        self.watch = etcdrpc.WatchStub(channel)
        # The highest revision compacted at, by any sequence.
        self.compacted = 0

    def begin(self):
        head = self.kv.Range(etcdrpc.RangeRequest(key=b"\x00", range_end=b"\x00", count_only=True), timeout=TIMEOUT)
        self.base = head.header.revision
        # Earlier sequences' compactions: this one must never read below.
        self.earlier_floor = self.compacted
        self.head = self.base
        self.pending = None
        self.writes = []
        self.leases = []
        self.watches = []

    def end(self):
        """Closes the sequence's watches and revokes its leases."""
        for w in self.watches:
            w.close()
        for lease in self.leases:
            try:
                self.lease.LeaseRevoke(etcdrpc.LeaseRevokeRequest(ID=lease), timeout=TIMEOUT)
            except grpc.RpcError:
                pass

    def saw(self, header):
        self.head = max(self.head, header.revision)

    def rev(self, k):
        """Logical revision k: 0 before the sequence, 1..n after its k-th
        write, n+1 one past this system's head (the future)."""
        rev = self.base if k == 0 else self.writes[k - 1] if k <= len(self.writes) else self.head + 1
        if rev < self.earlier_floor:
            raise AssertionError(f"revision {rev} is below an earlier sequence's compaction at {self.earlier_floor}")
        return rev

    def rank(self, rev):
        if rev == 0:
            return 0
        if rev == self.pending:
            return len(self.writes) + 1
        try:
            return self.writes.index(rev) + 1
        except ValueError:
            return ("not a write of this sequence", rev - self.base)

    def lease_id(self, ordinal, unknown):
        """The id of the ordinal-th lease granted in this sequence; 0 for
        none, `unknown` for one never granted."""
        if ordinal == 0:
            return 0
        if ordinal is None:
            return unknown
        return self.leases[ordinal - 1]

    def lease_ord(self, lease):
        if lease == 0:
            return 0
        try:
            return self.leases.index(lease) + 1
        except ValueError:
            return ("not a lease of this sequence",)

    def kv_view(self, kv):
        return (kv.key, kv.value, kv.version, self.rank(kv.create_revision), self.rank(kv.mod_revision), self.lease_ord(kv.lease))


class Gen:
    """Draws the requests; each is a function of a Side, so revisions and
    lease ids are each system's own."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.seed = seed
        self.prefix = f"x/{seed}/".encode()
        self.unknown_lease = 0x7000_0000_0000 + seed
        self.writes = 0
        self.leases = 0
        self.floor = 0
        self.watches = 0

    def key(self):
        return self.prefix + self.r.choice(KEYS).encode()

    def end(self, key):
        roll = self.r.random()
        if roll < 0.4:
            return b""
        if roll < 0.7:
            return self.prefix + b"\xff"
        return key + b"\x00" if self.r.random() < 0.5 else self.prefix + self.r.choice(KEYS).encode()

    def past(self):
        """A logical revision inside this sequence (or a future one, rarely)."""
        return self.r.randrange(0, self.writes + 2)

    def lease_choice(self):
        """A lease of this sequence (maybe revoked), an unknown one, or 0."""
        roll = self.r.random()
        if self.leases and roll < 0.85:
            return self.r.randrange(1, self.leases + 1)
        return None if roll < 0.95 else 0

    def range(self):
        key = self.key() if self.r.random() < 0.6 else self.prefix
        end = self.end(key) if key != self.prefix else self.prefix + b"\xff"
        target = self.r.choice([0, 0, 1, 2, 3, 4])
        order = self.r.choice([0, 0, 1, 2])
        ties = target != 0
        fields = dict(
            key=key,
            range_end=end,
            limit=0 if ties else self.r.choice([0, 0, 1, 2, 3]),
            sort_order=order,
            sort_target=target,
            keys_only=self.r.random() < 0.2,
            count_only=self.r.random() < 0.1,
        )
        revisions = {}
        for name, p in [("min_mod_revision", 0.2), ("max_mod_revision", 0.2), ("min_create_revision", 0.2), ("max_create_revision", 0.2), ("revision", 0.3)]:
            if self.r.random() < p:
                revisions[name] = self.past()

        def build(side):
            return etcdrpc.RangeRequest(**fields, **{n: side.rev(k) for n, k in revisions.items()})

        return build, ties

    def put(self):
        fields = dict(key=self.key(), value=bytes([self.r.randrange(4)]), prev_kv=self.r.random() < 0.5)
        lease = 0
        roll = self.r.random()
        if roll < 0.04:
            fields["ignore_value"] = True
            fields["value"] = b""
        elif roll < 0.08:
            fields["ignore_lease"] = True
        elif roll < 0.4:
            lease = self.lease_choice()

        def build(side):
            return etcdrpc.PutRequest(**fields, lease=side.lease_id(lease, self.unknown_lease))

        return build

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

    def op(self):
        roll = self.r.random()
        if roll < 0.4:
            put = self.put()
            return lambda side: etcdrpc.RequestOp(request_put=put(side)), False
        if roll < 0.6:
            delete = self.delete()
            return lambda side: etcdrpc.RequestOp(request_delete_range=delete), False
        build, ties = self.range()
        return lambda side: etcdrpc.RequestOp(request_range=build(side)), ties

    def txn(self):
        ties = False
        branches = []
        for _ in range(2):
            ops = []
            for _ in range(self.r.randrange(3)):
                op, t = self.op()
                ties |= t
                ops.append(op)
            branches.append(ops)
        compares = [self.compare() for _ in range(self.r.randrange(3))]

        def build(side):
            return etcdrpc.TxnRequest(compare=compares, success=[op(side) for op in branches[0]], failure=[op(side) for op in branches[1]])

        return build, ties

    def watch_create(self, start):
        """A watch over a key, a key's prefix or the sequence's prefix,
        from logical revision `start` (None: from now)."""
        key = self.key()
        roll = self.r.random()
        if roll < 0.4:
            end = b""
        elif roll < 0.7:
            end = prefix_end(key)
        else:
            key, end = self.prefix, self.prefix + b"\xff"
        filters = self.r.choice([[], [], [NOPUT], [NODELETE]])
        prev_kv = self.r.random() < 0.5

        def build(side):
            return etcdrpc.WatchCreateRequest(key=key, range_end=end, prev_kv=prev_kv, filters=filters, start_revision=0 if start is None else side.rev(start))

        return build


def range_view(side, resp, ties):
    kvs = [side.kv_view(kv) for kv in resp.kvs]
    if ties:
        kvs = sorted(kvs, key=repr)
    return ("range", kvs, resp.count, resp.more)


def put_view(side, resp):
    return ("put", side.kv_view(resp.prev_kv) if resp.HasField("prev_kv") else None)


def delete_view(side, resp):
    return ("delete", resp.deleted, [side.kv_view(kv) for kv in resp.prev_kvs])


def txn_view(side, resp, ties):
    out = []
    for r in resp.responses:
        which = r.WhichOneof("response")
        if which == "response_range":
            out.append(range_view(side, r.response_range, ties))
        elif which == "response_put":
            out.append(put_view(side, r.response_put))
        elif which == "response_delete_range":
            out.append(delete_view(side, r.response_delete_range))
    return ("txn", resp.succeeded, out)


def txn_wrote(resp):
    for r in resp.responses:
        which = r.WhichOneof("response")
        if which == "response_put" or (which == "response_delete_range" and r.response_delete_range.deleted > 0):
            return True
    return False


def ttl_view(side, resp, granted):
    if resp.TTL == -1:
        ttl = -1
    elif granted - TTL_SLACK <= resp.TTL <= granted:
        ttl = f"within {TTL_SLACK} s of the granted TTL"
    else:
        ttl = resp.TTL
    return ("ttl", side.lease_ord(resp.ID), ttl, resp.grantedTTL, sorted(resp.keys))


def event_view(side, ev):
    prev = side.kv_view(ev.prev_kv) if ev.HasField("prev_kv") else None
    return (ev.type, side.kv_view(ev.kv), prev)


class Sequence:
    def __init__(self, seed, sides):
        self.seed = seed
        self.sides = sides
        self.g = Gen(seed)
        self.step = 0

    def same(self, answers, request):
        """Compares one step's answers; prints the difference if any."""
        self.step += 1
        if answers[0] == answers[1]:
            return True
        print(
            f"DIFFERENCE seed {self.seed} step {self.step}:\n request: {request}\n etcd:     {answers[0]}\n raftlock: {answers[1]}",
            flush=True,
        )
        return False

    def each(self, fn):
        """fn(side) for each side: (answers, wrote revisions or None)."""
        results = [fn(side) for side in self.sides]
        return [a for a, _ in results], [w for _, w in results]

    def record(self, answers, writes):
        """Records the writes of a step both answered alike."""
        if writes[0] is not None:
            for side, rev in zip(self.sides, writes):
                side.writes.append(rev)
            self.g.writes += 1

    def kv_step(self, kind, build, ties):
        def one(side):
            req = build(side) if callable(build) else build
            fn = {"put": side.kv.Put, "delete": side.kv.DeleteRange, "range": side.kv.Range, "txn": side.kv.Txn}[kind]
            outcome = call(fn, req)
            if outcome[0] == "error":
                return ("error", outcome[1], outcome[2]), None
            resp = outcome[1]
            side.saw(resp.header)
            if kind == "range":
                return range_view(side, resp, ties), None
            if kind == "put":
                return put_view(side, resp), resp.header.revision
            if kind == "delete":
                return delete_view(side, resp), resp.header.revision if resp.deleted else None
            wrote = resp.header.revision if txn_wrote(resp) else None
            # A range after a put in the same txn sees the txn's revision.
            side.pending = wrote
            try:
                return txn_view(side, resp, ties), wrote
            finally:
                side.pending = None

        answers, writes = self.each(one)
        # Whether it wrote is part of the answer: a write in one system
        # only would shift every later revision.
        answers = [(a, w is not None) for a, w in zip(answers, writes)]
        if not self.same(answers, build(self.sides[0]) if callable(build) else build):
            return False
        self.record(answers, writes)
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
        return True

    def grant(self):
        g = self.g
        explicit = g.r.random() < 0.2
        # A chosen id: new, or one this sequence already granted.
        pick = g.r.randrange(1, g.leases + 2) if explicit else 0
        chosen = (g.seed * 100 + pick) if explicit else 0

        def one(side):
            req = etcdrpc.LeaseGrantRequest(TTL=TTL, ID=chosen)
            outcome = call(side.lease.LeaseGrant, req)
            if outcome[0] == "error":
                return ("error", outcome[1], outcome[2]), None
            resp = outcome[1]
            side.saw(resp.header)
            if resp.error:
                return ("grant error", resp.error), None
            fresh = resp.ID not in side.leases
            return ("grant", resp.TTL, chosen == 0 or resp.ID == chosen, fresh), resp.ID

        answers, ids = self.each(one)
        if not self.same(answers, f"LeaseGrant TTL={TTL} ID={'chosen' if chosen else 0}"):
            return False
        if ids[0] is not None:
            for side, lease in zip(self.sides, ids):
                side.leases.append(lease)
            g.leases += 1
            STATS["lease granted"] += 1
        else:
            STATS["lease grant refused"] += 1
        return True

    def time_to_live(self, lease, keys):
        def one(side):
            req = etcdrpc.LeaseTimeToLiveRequest(ID=side.lease_id(lease, self.g.unknown_lease), keys=keys)
            outcome = call(side.lease.LeaseTimeToLive, req)
            if outcome[0] == "error":
                return ("error", outcome[1], outcome[2]), None
            side.saw(outcome[1].header)
            return ttl_view(side, outcome[1], TTL), None

        answers, _ = self.each(one)
        if not self.same(answers, f"LeaseTimeToLive lease #{lease} keys={keys}"):
            return None
        STATS["lease timetolive"] += 1
        return answers[0]

    def revoke(self):
        lease = self.g.lease_choice()
        # Its keys first: a revoke that deletes keys is a write in both
        # systems (one revision for all); one that deletes none is not in
        # etcd.
        ttl = self.time_to_live(lease, True)
        if ttl is None:
            return False
        deletes = ttl[0] == "ttl" and ttl[2] != -1 and bool(ttl[4])

        def one(side):
            req = etcdrpc.LeaseRevokeRequest(ID=side.lease_id(lease, self.g.unknown_lease))
            outcome = call(side.lease.LeaseRevoke, req)
            if outcome[0] == "error":
                return ("error", outcome[1], outcome[2]), None
            side.saw(outcome[1].header)
            return ("revoked",), outcome[1].header.revision if deletes else None

        answers, writes = self.each(one)
        if not self.same(answers, f"LeaseRevoke lease #{lease}"):
            return False
        self.record(answers, writes)
        STATS["lease revoke" if answers[0][0] == "revoked" else f"lease revoke {answers[0][1]}"] += 1
        if deletes:
            STATS["lease revoke deleting keys"] += 1
        return True

    def leases(self):
        def one(side):
            outcome = call(side.lease.LeaseLeases, etcdrpc.LeaseLeasesRequest())
            if outcome[0] == "error":
                return ("error", outcome[1], outcome[2]), None
            side.saw(outcome[1].header)
            ours = sorted(side.lease_ord(s.ID) for s in outcome[1].leases if s.ID in side.leases)
            return ("leases", ours), None

        answers, _ = self.each(one)
        STATS["lease leases"] += 1
        return self.same(answers, "LeaseLeases")

    def compact(self):
        g = self.g
        if g.writes == 0:
            return True
        roll = g.r.random()
        if roll < 0.1:
            k = g.writes + 1  # the future
        elif roll < 0.25 and g.floor:
            k = g.r.randrange(1, g.floor + 1)  # compacted already
        else:
            k = g.r.randrange(max(1, g.floor), g.writes + 1)
        physical = g.r.random() < 0.5

        def one(side):
            outcome = call(side.kv.Compact, etcdrpc.CompactionRequest(revision=side.rev(k), physical=physical))
            if outcome[0] == "error":
                return ("error", outcome[1], outcome[2]), None
            side.saw(outcome[1].header)
            return ("compacted",), None

        answers, _ = self.each(one)
        if not self.same(answers, f"Compact at write {k} of {g.writes} physical={physical}"):
            return False
        if answers[0][0] == "compacted":
            for side in self.sides:
                side.compacted = max(side.compacted, side.rev(k))
            g.floor = k
            STATS["compact"] += 1
        else:
            STATS[f"compact {answers[0][1]}"] += 1
        return True

    def open_watch(self, start):
        build = self.g.watch_create(start)

        def one(side):
            w = Watch(side, build(side))
            created = w.next()
            side.watches.append(w)
            if isinstance(created, tuple):
                return created, None
            return ("created", created.created, created.canceled, created.cancel_reason, side.rank(created.compact_revision)), None

        answers, _ = self.each(one)
        self.g.watches += 1
        STATS["watch"] += 1
        return self.same(answers, build(self.sides[0]))

    def collect(self, index, finals):
        """Watch `index`'s events up to its final write (or its compacted
        cancelation), on each side."""
        create = self.sides[0].watches[index].create

        def one(side, final):
            w = side.watches[index]
            events = []
            while True:
                resp = w.next()
                if isinstance(resp, tuple):
                    return ("watch failed", resp, events), None
                if resp.canceled:
                    return ("canceled", resp.cancel_reason, side.rank(resp.compact_revision), events), None
                for ev in resp.events:
                    events.append(event_view(side, ev))
                    if ev.kv.key == create.key and ev.kv.mod_revision == final:
                        return ("events", events), None

        answers, _ = self.each(lambda side: one(side, finals[self.sides.index(side)]))
        a = answers[0]
        if a[0] == "events":
            STATS["watch events"] += len(a[1])
        elif a[0] == "canceled":
            STATS["watch compacted"] += 1
        return self.same(answers, f"events of watch {create}")

    def finish_watches(self):
        """Puts and deletes each watch's key; compares each watch's events
        up to the change it must see last."""
        g = self.g
        finals = []
        for index in range(g.watches):
            create = self.sides[0].watches[index].create
            if not self.kv_step("put", etcdrpc.PutRequest(key=create.key, value=b"end"), False):
                return False
            put_revs = [s.writes[-1] for s in self.sides]
            if not self.kv_step("delete", etcdrpc.DeleteRangeRequest(key=create.key), False):
                return False
            del_revs = [s.writes[-1] for s in self.sides]
            finals.append(put_revs if NODELETE in create.filters else del_revs)
        for index in range(g.watches):
            if not self.collect(index, finals[index]):
                return False
        return True

    def run(self):
        g = self.g
        for side in self.sides:
            side.begin()
        try:
            steps = random.Random(self.seed).randrange(5, 25)
            for _ in range(steps):
                if not self.one_step():
                    return False
            # Watches from the past: after every compaction of the sequence.
            if g.r.random() < 0.25:
                for _ in range(g.r.randrange(1, 3)):
                    # Below the floor (half the time, if any), or above.
                    if g.floor and g.r.random() < 0.5:
                        start = g.r.randrange(0, g.floor)
                    else:
                        start = g.r.randrange(g.floor + 1 if g.floor else 0, g.writes + 2)
                    if not self.open_watch(start):
                        return False
            if g.watches and not self.finish_watches():
                return False
            return True
        finally:
            for side in self.sides:
                side.end()

    def one_step(self):
        g = self.g
        roll = g.r.random()
        if roll < 0.30:
            return self.kv_step("put", g.put(), False)
        if roll < 0.42:
            return self.kv_step("delete", g.delete(), False)
        if roll < 0.64:
            build, ties = g.range()
            return self.kv_step("range", build, ties)
        if roll < 0.80:
            build, ties = g.txn()
            return self.kv_step("txn", build, ties)
        if roll < 0.86:
            return self.grant()
        if roll < 0.91:
            return self.revoke()
        if roll < 0.93:
            return self.time_to_live(g.lease_choice(), g.r.random() < 0.7) is not None
        if roll < 0.94:
            return self.leases()
        if roll < 0.97:
            return self.compact()
        if g.watches < 2:
            return self.open_watch(None)
        return True


def follower(endpoints):
    """The first door whose member follows a leader."""
    for endpoint in endpoints:
        m = etcdrpc.MaintenanceStub(grpc.insecure_channel(endpoint))
        status = m.Status(etcdrpc.StatusRequest(), timeout=TIMEOUT)
        if status.leader not in (0, status.header.member_id):
            return endpoint, status.header.member_id
    print(f"no door of {endpoints} is a follower's", flush=True)
    sys.exit(1)


def main():
    etcd, raftlock, seeds = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
    first = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    door, member = follower(raftlock)
    print(f"raftlock door {door} (member {member}, a follower)", flush=True)
    sides = [Side(etcd), Side(door)]
    for seed in range(first, first + seeds):
        if not Sequence(seed, sides).run():
            sys.exit(1)
    print(f"{seeds} seeded sequences from seed {first}: no difference", flush=True)
    print("STATS " + ", ".join(f"{k}: {v}" for k, v in sorted(STATS.items())), flush=True)


main()
