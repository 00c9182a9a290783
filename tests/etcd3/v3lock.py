"""etcd's v3lock service (`v3lockpb.Lock`) through grpcio, the gRPC
library python-etcd3 brings, against raftlock's etcd doors. Neither
etcdctl nor python-etcd3 calls this service, so its two messages are
encoded here by hand (LockRequest{name=1, lease=2}, LockResponse{header=1,
key=2}, UnlockRequest{key=1}). Prints one line per check; exits non-zero
on the first failure.

Usage: v3lock.py HOST:PORT,HOST:PORT,...
"""

import sys
import threading
import time

import etcd3
import grpc

endpoints = sys.argv[1].split(",")


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


def lock_request(name, lease):
    return field_bytes(1, name) + (bytes([2 << 3]) + varint(lease) if lease else b"")


def response_key(data):
    i = 0
    while i < len(data):
        key = data[i]
        i += 1
        tag, wire = key >> 3, key & 7
        if wire != 2:
            raise ValueError("unexpected wire type")
        n, shift = 0, 0
        while True:
            b = data[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if tag == 2:
            return data[i : i + n]
        i += n
    return None


def stubs(endpoint):
    channel = grpc.insecure_channel(endpoint)
    lock = channel.unary_unary("/v3lockpb.Lock/Lock")
    unlock = channel.unary_unary("/v3lockpb.Lock/Unlock")
    return lock, unlock


def kv(endpoint):
    host, port = endpoint.rsplit(":", 1)
    return etcd3.client(host=host, port=int(port), timeout=20)


lock0, unlock0 = stubs(endpoints[0])
lock1, _ = stubs(endpoints[1])
lock2, _ = stubs(endpoints[2])
c = kv(endpoints[0])

holder_lease = c.lease(30)
key = response_key(lock0(lock_request(b"svc", holder_lease.id), timeout=20))
check("Lock with a live lease answers its key", key is not None and key.startswith(b"svc/"))
check("the key exists, leased", c.get(key.decode())[1].lease_id == holder_lease.id)

# A second caller waits until the holder unlocks.
second_lease = c.lease(30)
answers = []
waiter = threading.Thread(
    target=lambda: answers.append(response_key(lock1(lock_request(b"svc", second_lease.id), timeout=30)))
)
waiter.start()
deadline = time.monotonic() + 20
while len(list(c.get_prefix("svc/"))) < 2:
    check("the waiter queued its key", time.monotonic() < deadline)
    time.sleep(0.05)
check("the waiter is not granted while the holder holds", not answers)
unlock0(field_bytes(1, key), timeout=20)
waiter.join(30)
check("Unlock hands the lock to the waiter", len(answers) == 1 and answers[0] not in (None, key))
unlock0(field_bytes(1, answers[0]), timeout=20)


def refused(call, request, what):
    try:
        call(request, timeout=30)
    except grpc.RpcError as e:
        check(what, e.code() == grpc.StatusCode.NOT_FOUND and "requested lease not found" in e.details())
        return
    check(what, False)


refused(lock2, lock_request(b"svc", 0), "Lock with lease 0 is refused, nothing orphaned")
check("no key was left by the refused call", len(list(c.get_prefix("svc/"))) == 0)
gone = c.lease(30)
gone.revoke()
refused(lock2, lock_request(b"svc", gone.id), "Lock with a revoked lease is refused")

# A waiter whose lease expires while it waits is refused, never granted.
key = response_key(lock0(lock_request(b"svc", holder_lease.id), timeout=20))
short = c.lease(2)
start = time.monotonic()
refused(lock2, lock_request(b"svc", short.id), "a waiter whose lease expired while waiting is refused")
waited = time.monotonic() - start
check(f"not before its TTL (waited {waited:.2f} s)", waited >= 1.5)
unlock0(field_bytes(1, key), timeout=20)
print("all checks passed", flush=True)
