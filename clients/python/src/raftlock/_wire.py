"""Reading the API's JSON answers into the dataclasses of :mod:`raftlock.types`.

Answers may carry fields this client does not know (additions are allowed
by the contract); a missing or mistyped field we need is a
:class:`~raftlock.errors.ProtocolError`, never a ``KeyError`` deep in a
caller's stack.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Dict, List, Optional

from .errors import ProtocolError
from .types import (
    ClusterState,
    FencingCheck,
    Grant,
    Holder,
    Leader,
    LockState,
    Member,
    Node,
    RwLockState,
    RwLockSummary,
    SemaphoreState,
    SemaphoreSummary,
    SessionLease,
    SharedHolder,
    SharedWaiter,
    Waiter,
    WatchEvent,
)

Obj = Dict[str, Any]


def obj(body: bytes) -> Obj:
    """The answer as a JSON object."""
    try:
        value = json.loads(body)
    except ValueError as e:
        raise ProtocolError(f"not JSON ({e}): {body[:200]!r}") from None
    return _as_obj(value, "answer")


def _as_obj(value: Any, what: str) -> Obj:
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} is not a JSON object: {value!r:.200}")
    return value


def _field(o: Obj, key: str) -> Any:
    if key not in o:
        raise ProtocolError(f"answer lacks {key!r}: {o!r:.200}")
    return o[key]


def text(o: Obj, key: str, default: Optional[str] = None) -> str:
    """A string field (``default`` when absent, if given)."""
    value = o.get(key, default) if default is not None else _field(o, key)
    if not isinstance(value, str):
        raise ProtocolError(f"{key!r} is not a string: {value!r:.200}")
    return value


def integer(o: Obj, key: str) -> int:
    """An integer field (JSON booleans are not integers here)."""
    value = _field(o, key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"{key!r} is not an integer: {value!r:.200}")
    return value


def optional_int(o: Obj, key: str) -> Optional[int]:
    """An integer field that may be ``null`` or absent."""
    return None if o.get(key) is None else integer(o, key)


def optional_text(o: Obj, key: str) -> Optional[str]:
    """A string field that may be ``null`` or absent."""
    return None if o.get(key) is None else text(o, key)


def session_lease(body: bytes) -> SessionLease:
    o = obj(body)
    return SessionLease(text(o, "session_id"), integer(o, "ttl_ms") / 1000.0)


def ttl(body: bytes) -> float:
    """The TTL a keepalive answers, in seconds."""
    return integer(obj(body), "ttl_ms") / 1000.0


def grant(body: bytes, name: str, session_id: str) -> Grant:
    """An acquire's or a campaign's answer (the campaign one names no lock)."""
    o = obj(body)
    return Grant(
        name=text(o, "lock", name),
        node=text(o, "node"),
        fencing_token=integer(o, "fencing_token"),
        session_id=text(o, "session_id", session_id),
    )


def lock_state(body: bytes) -> LockState:
    o = obj(body)
    raw_holder = o.get("holder")
    holder = None
    if raw_holder is not None:
        h = _as_obj(raw_holder, "holder")
        holder = Holder(
            session_id=optional_text(h, "session_id"),
            owner=text(h, "owner", ""),
            node=text(h, "node"),
            fencing_token=integer(h, "fencing_token"),
            since_revision=optional_int(h, "since_revision") or 0,
            principal=optional_text(h, "principal"),
        )
    waiters = [
        Waiter(
            optional_text(w, "session_id"),
            text(w, "owner", ""),
            text(w, "node"),
            optional_text(w, "principal"),
        )
        for w in (_as_obj(raw, "waiter") for raw in _list(o, "waiters"))
    ]
    delay_ms = optional_int(o, "lock_delay_ms")
    return LockState(
        name=text(o, "lock"),
        holder=holder,
        waiters=waiters,
        lock_delay=None if delay_ms is None else delay_ms / 1000,
        held_off=o.get("held_off") is True,
    )


def fencing_check(body: bytes) -> FencingCheck:
    o = obj(body)
    valid = _field(o, "valid")
    if not isinstance(valid, bool):
        raise ProtocolError(f"'valid' is not a boolean: {valid!r:.200}")
    return FencingCheck(valid=valid, current_token=optional_int(o, "current_token"))


def leader(body: bytes) -> Optional[Leader]:
    """``GET /v1/elections/{name}``, also the data of each observe event."""
    raw = obj(body).get("leader")
    if raw is None:
        return None
    o = _as_obj(raw, "leader")
    return Leader(
        session_id=optional_text(o, "session_id"),
        value=text(o, "value", ""),
        node=text(o, "node"),
        fencing_token=integer(o, "fencing_token"),
        principal=optional_text(o, "principal"),
    )


def node(body: bytes) -> Node:
    o = obj(body)
    try:
        data = base64.b64decode(text(o, "data"), validate=True)
    except binascii.Error as e:
        raise ProtocolError(f"node data is not base64: {e}") from None
    return Node(
        path=text(o, "path"),
        data=data,
        version=integer(o, "version"),
        create_revision=integer(o, "create_revision"),
        mod_revision=integer(o, "mod_revision"),
        ephemeral_owner=optional_text(o, "ephemeral_owner"),
    )


def children(body: bytes) -> List[str]:
    names = _list(obj(body), "children")
    if not all(isinstance(n, str) for n in names):
        raise ProtocolError(f"children are not strings: {names!r:.200}")
    return [str(n) for n in names]


def cluster(body: bytes) -> ClusterState:
    o = obj(body)
    members = [
        Member(integer(m, "id"), text(m, "api_addr"), text(m, "role", ""))
        for m in (_as_obj(raw, "member") for raw in _list(o, "members"))
    ]
    return ClusterState(
        node_id=optional_int(o, "node_id"),
        leader_id=optional_int(o, "leader_id"),
        term=integer(o, "term"),
        members=members,
    )


def _list(o: Obj, key: str) -> List[Any]:
    value = o.get(key, [])
    if not isinstance(value, list):
        raise ProtocolError(f"{key!r} is not a list: {value!r:.200}")
    return value


def shared_grant(body: bytes, name: str, session_id: str) -> Grant:
    """A read-write lock's or semaphore's acquire answer (the name is under
    ``rwlock`` or ``semaphore``)."""
    o = obj(body)
    return Grant(
        name=text(o, "rwlock", text(o, "semaphore", name)),
        node=text(o, "node"),
        fencing_token=integer(o, "fencing_token"),
        session_id=text(o, "session_id", session_id),
    )


def multi_grants(body: bytes, session_id: str) -> List[Grant]:
    """A multi-lock's grants, one per lock in the order named."""
    o = obj(body)
    owner = text(o, "session_id", session_id)
    return [
        Grant(
            name=text(g, "lock"),
            node=text(g, "node"),
            fencing_token=integer(g, "fencing_token"),
            session_id=owner,
        )
        for g in (_as_obj(raw, "grant") for raw in _list(o, "locks"))
    ]


def _shared_holder(h: Obj) -> SharedHolder:
    return SharedHolder(
        session_id=optional_text(h, "session_id"),
        owner=text(h, "owner", ""),
        node=text(h, "node"),
        fencing_token=integer(h, "fencing_token"),
        since_revision=optional_int(h, "since_revision") or 0,
        mode=optional_text(h, "mode"),
        principal=optional_text(h, "principal"),
    )


def _shared_waiter(w: Obj) -> SharedWaiter:
    return SharedWaiter(
        session_id=optional_text(w, "session_id"),
        owner=text(w, "owner", ""),
        node=text(w, "node"),
        mode=optional_text(w, "mode"),
        principal=optional_text(w, "principal"),
    )


def _holders(o: Obj) -> List[SharedHolder]:
    return [_shared_holder(_as_obj(raw, "holder")) for raw in _list(o, "holders")]


def rwlock_state(body: bytes) -> RwLockState:
    o = obj(body)
    waiters = [_shared_waiter(_as_obj(raw, "waiter")) for raw in _list(o, "waiters")]
    return RwLockState(name=text(o, "rwlock"), holders=_holders(o), waiters=waiters)


def semaphore_state(body: bytes) -> SemaphoreState:
    o = obj(body)
    waiters = [_shared_waiter(_as_obj(raw, "waiter")) for raw in _list(o, "waiters")]
    return SemaphoreState(
        name=text(o, "semaphore"),
        permits=optional_int(o, "permits"),
        holders=_holders(o),
        waiters=waiters,
    )


def rwlock_list(body: bytes) -> List[RwLockSummary]:
    """``GET /v1/rwlocks?prefix=``."""
    return [
        RwLockSummary(text(line, "rwlock"), _holders(line), integer(line, "waiters"))
        for line in (_as_obj(raw, "line") for raw in _list(obj(body), "rwlocks"))
    ]


def semaphore_list(body: bytes) -> List[SemaphoreSummary]:
    """``GET /v1/semaphores?prefix=``."""
    return [
        SemaphoreSummary(
            text(line, "semaphore"),
            optional_int(line, "permits"),
            _holders(line),
            integer(line, "waiters"),
        )
        for line in (_as_obj(raw, "line") for raw in _list(obj(body), "semaphores"))
    ]


def watch_event(name: str, data: str) -> WatchEvent:
    """One event of a node watch stream (``put``, ``delete``, ``compacted``)."""
    o = obj(data.encode())
    if name == "compacted":
        return WatchEvent(kind=name, revision=0, path="", floor=integer(o, "floor"))
    raw = o.get("node")
    changed = None
    if raw is not None:
        n = _as_obj(raw, "node")
        n.setdefault("path", text(o, "path"))
        changed = node(json.dumps(n).encode())
    return WatchEvent(kind=name, revision=integer(o, "revision"), path=text(o, "path"), node=changed)
