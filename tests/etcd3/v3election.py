"""etcd's v3election service (`v3electionpb.Election`) through grpcio, the
gRPC library python-etcd3 brings, against raftlock's etcd doors. Neither
etcdctl nor python-etcd3 calls this service (etcdctl's `elect` runs the
client-side recipe), so its messages are encoded here by hand:
CampaignRequest{name=1, lease=2, value=3}, CampaignResponse{header=1,
leader=2}, LeaderKey{name=1, key=2, rev=3, lease=4}, LeaderRequest{name=1},
LeaderResponse{header=1, kv=2}, ResignRequest{leader=1},
ProclaimRequest{leader=1, value=2}, and mvccpb.KeyValue{key=1,
create_revision=2, mod_revision=3, version=4, value=5, lease=6}. Prints
one line per check; exits non-zero on the first failure.

Usage: v3election.py HOST:PORT,HOST:PORT,...
"""

import sys
import threading
import time

import etcd3
import grpc

endpoints = sys.argv[1].split(",")
NAME = b"svc-leader"


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_bytes(tag, data):
    return bytes([tag << 3 | 2]) + varint(len(data)) + data


def field_int(tag, n):
    return bytes([tag << 3]) + varint(n) if n else b""


def parse(data):
    """A message's fields: tag -> list of ints (varints) or bytes."""
    fields = {}
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        tag, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
        elif wire == 2:
            n, i = read_varint(data, i)
            value, i = data[i : i + n], i + n
        else:
            raise ValueError(f"unexpected wire type {wire}")
        fields.setdefault(tag, []).append(value)
    return fields


def read_varint(data, i):
    n, shift = 0, 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def one(fields, tag, default):
    return fields.get(tag, [default])[0]


def leader_key(name, key, rev, lease):
    return field_bytes(1, name) + field_bytes(2, key) + field_int(3, rev) + field_int(4, lease)


def decode_leader_key(data):
    f = parse(data)
    return (one(f, 1, b""), one(f, 2, b""), one(f, 3, 0), one(f, 4, 0))


def decode_kv(data):
    f = parse(data)
    return {"key": one(f, 1, b""), "create": one(f, 2, 0), "mod": one(f, 3, 0), "value": one(f, 5, b""), "lease": one(f, 6, 0)}


class Election:
    def __init__(self, endpoint):
        channel = grpc.insecure_channel(endpoint)
        self.channel = channel
        self._campaign = channel.unary_unary("/v3electionpb.Election/Campaign")
        self._proclaim = channel.unary_unary("/v3electionpb.Election/Proclaim")
        self._leader = channel.unary_unary("/v3electionpb.Election/Leader")
        self._resign = channel.unary_unary("/v3electionpb.Election/Resign")
        self._observe = channel.unary_stream("/v3electionpb.Election/Observe")

    def campaign(self, lease, value, timeout=30):
        request = field_bytes(1, NAME) + field_int(2, lease) + field_bytes(3, value)
        answer = parse(self._campaign(request, timeout=timeout))
        return decode_leader_key(one(answer, 2, b""))

    def proclaim(self, leader, value):
        self._proclaim(field_bytes(1, leader_key(*leader)) + field_bytes(2, value), timeout=20)

    def leader(self):
        return decode_kv(one(parse(self._leader(field_bytes(1, NAME), timeout=20)), 2, b""))

    def resign(self, leader):
        self._resign(field_bytes(1, leader_key(*leader)), timeout=20)

    def observe(self):
        return self._observe(field_bytes(1, NAME), timeout=200)


def fails(call, code, text, what):
    try:
        call()
    except grpc.RpcError as e:
        check(f"{what} ({e.code()}: {e.details()})", e.code() == code and text in (e.details() or ""))
        return
    check(what, False)


def keys():
    return sorted(m.key for _, m in c.get_prefix(NAME.decode() + "/"))


def wait_for(what, predicate, within=20):
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() >= deadline:
            check(what, False)
        time.sleep(0.05)
    check(what, True)


e0, e1, e2 = Election(endpoints[0]), Election(endpoints[1]), Election(endpoints[2])
host, port = endpoints[0].rsplit(":", 1)
c = etcd3.client(host=host, port=int(port), timeout=20)

fails(e0.leader, grpc.StatusCode.UNKNOWN, "election: no leader", "Leader with no leader answers etcd's error")

# An observer on the third member, from before the first campaign.
observed = []
stream = e2.observe()


def follow():
    try:
        for answer in stream:
            kv = decode_kv(one(parse(answer), 2, b""))
            observed.append((kv["key"], kv["value"]))
    except grpc.RpcError:
        pass


observer = threading.Thread(target=follow, daemon=True)
observer.start()

a, b = c.lease(30), c.lease(30)
la = e0.campaign(a.id, b"a")
check("Campaign answers a LeaderKey", la[0] == NAME and la[1] == NAME + b"/" + f"{a.id:x}".encode() and la[2] > 0 and la[3] == a.id)
check("Leader is the campaigner's key and value", e1.leader()["value"] == b"a" and e1.leader()["key"] == la[1])

# The second campaigner, on another member, waits.
granted = []
second = threading.Thread(target=lambda: granted.append(e1.campaign(b.id, b"b")))
second.start()
wait_for("the second campaigner queued its key", lambda: len(keys()) == 2)
check("the second campaigner is not elected while the first leads", not granted)

e0.proclaim(la, b"a2")
check("Proclaim by the leader updates its value", e2.leader()["value"] == b"a2")
b_kv = c.get(NAME.decode() + "/" + f"{b.id:x}")[1]
waiting = (NAME, b_kv.key, b_kv.create_revision, b.id)
fails(lambda: e1.proclaim(waiting, b"usurp"), grpc.StatusCode.UNKNOWN, "election: not leader",
      "Proclaim by a waiting campaigner is refused")
check("the leader's value stands", e0.leader()["value"] == b"a2")

e0.resign(la)
second.join(30)
check("Resign hands leadership to the second campaigner", len(granted) == 1 and granted[0][1] == b_kv.key)
lb = granted[0]
check("the new leader is the second's key", e0.leader()["key"] == lb[1] and e0.leader()["value"] == b"b")
fails(lambda: e0.proclaim(la, b"late"), grpc.StatusCode.UNKNOWN, "election: not leader",
      "Proclaim with a resigned LeaderKey is refused")

# A leader whose lease is revoked hands on to the next campaigner.
d = c.lease(30)
third = []
waiter = threading.Thread(target=lambda: third.append(e2.campaign(d.id, b"d")))
waiter.start()
wait_for("the third campaigner queued its key", lambda: len(keys()) == 2)
b.revoke()
waiter.join(30)
check("revoking the leader's lease elects the next campaigner", len(third) == 1 and e1.leader()["value"] == b"d")
ld = third[0]

# Observe saw every leader and value, in order.
expected = [(la[1], b"a"), (la[1], b"a2"), (lb[1], b"b"), (ld[1], b"d")]
wait_for("Observe saw all four leaders and values", lambda: len(observed) >= 4)
check(f"Observe saw them in order: {observed}", observed == expected)

# Lease 0 and a revoked lease are refused, nothing orphaned.
fails(lambda: e0.campaign(0, b"x"), grpc.StatusCode.NOT_FOUND, "requested lease not found",
      "Campaign with lease 0 is refused")
gone = c.lease(30)
gone.revoke()
fails(lambda: e1.campaign(gone.id, b"x"), grpc.StatusCode.NOT_FOUND, "requested lease not found",
      "Campaign with a revoked lease is refused")
check("no key was left by the refused campaigns", keys() == [ld[1]])

# A campaigner that gives up while it waits leaves no key behind.
quitter = c.lease(30)
fails(lambda: e0.campaign(quitter.id, b"q", timeout=1.5), grpc.StatusCode.DEADLINE_EXCEEDED, "",
      "a waiting campaign times out on its caller's deadline")
wait_for("the abandoned campaign's key is deleted", lambda: keys() == [ld[1]])

e2.resign(ld)
fails(e1.leader, grpc.StatusCode.UNKNOWN, "election: no leader", "after the last resign there is no leader")
stream.cancel()
print("all checks passed", flush=True)
