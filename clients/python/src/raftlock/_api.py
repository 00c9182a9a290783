"""Every API route the client uses: the request to send and how to read the
answer, written once for the blocking and the asyncio client.

Requests carry only documented fields, since the server rejects unknown
ones (``keep_queued`` is sent only when true, so servers that predate it
still accept every other acquire).
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Optional, Tuple, TypeVar, Union
from urllib.parse import quote

from . import _wire
from ._failover import Answer, Call
from .errors import NotFound, NotOwner, ProtocolError, SessionNotFound
from .types import (
    ClusterState,
    FencingCheck,
    Grant,
    Leader,
    LockState,
    Node,
    RwLockState,
    RwLockSummary,
    SemaphoreState,
    SemaphoreSummary,
    SessionLease,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Op(Generic[T]):
    """A request and the parser of its 2xx answer."""

    call: Call
    parse: Callable[[bytes], T]


def _nothing(_body: bytes) -> None:
    return None


def _path(name: str) -> str:
    """A lock, election or node name as URL path segments. Names are
    validated by the server; quoting only keeps a bad one from changing
    the route (it is then answered ``bad_request``)."""
    return quote(name.strip("/"), safe="/")


def millis(seconds: float) -> int:
    """Seconds as the API's integer milliseconds, rounded up so that a
    positive wait never becomes 0 (which would mean a try-lock)."""
    return max(0, math.ceil(seconds * 1000))


def _read_params(stale: bool) -> Optional[Dict[str, str]]:
    return {"consistency": "stale"} if stale else None


# -- sessions -----------------------------------------------------------------


def open_session(owner: str, ttl: float) -> Op[SessionLease]:
    # Resending is safe: a duplicate session owns nothing and expires.
    body = {"ttl_ms": millis(ttl), "owner": owner}
    return Op(Call("POST", "/v1/sessions", body), _wire.session_lease)


def keepalive(session_id: str) -> Op[float]:
    return Op(Call("POST", f"/v1/sessions/{quote(session_id)}/keepalive"), _wire.ttl)


def close_session(session_id: str) -> Op[None]:
    call = Call("DELETE", f"/v1/sessions/{quote(session_id)}", gone_is_done=(SessionNotFound,))
    return Op(call, _nothing)


# -- locks --------------------------------------------------------------------

_RELEASED = (NotFound, NotOwner, SessionNotFound)
"""What a release or resign answers when an earlier attempt already did it."""


def acquire(name: str, session_id: str, wait: float, keep_queued: bool, lock_delay: Optional[float] = None) -> Op[Grant]:
    body: Dict[str, Any] = {"session_id": session_id, "wait_ms": millis(wait)}
    if keep_queued:
        body["keep_queued"] = True
    if lock_delay is not None:
        # Rounded, not ceiled: a delay must equal the lock's to be accepted
        # (0.1 s is 100 ms, not 101).
        body["lock_delay_ms"] = max(0, round(lock_delay * 1000))
    call = Call("POST", f"/v1/locks/{_path(name)}/acquire", body, wait=wait, resend=False)
    return Op(call, lambda answer: _wire.grant(answer, name, session_id))


def release(name: str, session_id: str) -> Op[None]:
    body = {"session_id": session_id}
    call = Call("POST", f"/v1/locks/{_path(name)}/release", body, gone_is_done=_RELEASED)
    return Op(call, _nothing)


def lock_state(name: str, stale: bool = False) -> Op[LockState]:
    call = Call("GET", f"/v1/locks/{_path(name)}", params=_read_params(stale))
    return Op(call, _wire.lock_state)


def fencing_check(name: str, token: int) -> Op[FencingCheck]:
    body = {"lock": name, "fencing_token": token}
    return Op(Call("POST", "/v1/fencing/check", body), _wire.fencing_check)


# -- elections ----------------------------------------------------------------


def campaign(name: str, session_id: str, value: str, wait: float, keep_queued: bool) -> Op[Grant]:
    body: Dict[str, Any] = {"session_id": session_id, "value": value, "wait_ms": millis(wait)}
    if keep_queued:
        body["keep_queued"] = True
    call = Call("POST", f"/v1/elections/{_path(name)}/campaign", body, wait=wait, resend=False)
    return Op(call, lambda answer: _wire.grant(answer, name, session_id))


def proclaim(name: str, session_id: str, value: str) -> Op[None]:
    body = {"session_id": session_id, "value": value}
    return Op(Call("POST", f"/v1/elections/{_path(name)}/proclaim", body), _nothing)


def resign(name: str, session_id: str) -> Op[None]:
    body = {"session_id": session_id}
    call = Call("POST", f"/v1/elections/{_path(name)}/resign", body, gone_is_done=_RELEASED)
    return Op(call, _nothing)


def leader(name: str, stale: bool = False) -> Op[Optional[Leader]]:
    call = Call("GET", f"/v1/elections/{_path(name)}", params=_read_params(stale))
    return Op(call, _wire.leader)


def observe_path(name: str) -> str:
    """The SSE route of an election."""
    return f"/v1/elections/{_path(name)}/observe"


# -- read-write locks, semaphores, multi-locks --------------------------------


def _list_params(prefix: str, stale: bool) -> Dict[str, str]:
    return {"prefix": prefix, **(_read_params(stale) or {})}


def _shared_acquire(route: str, name: str, body: Dict[str, Any], wait: float, keep_queued: bool) -> Call:
    if keep_queued:
        body["keep_queued"] = True
    return Call("POST", f"/v1/{route}/{_path(name)}/acquire", body, wait=wait, resend=False)


def acquire_rwlock(name: str, session_id: str, mode: str, wait: float, keep_queued: bool) -> Op[Grant]:
    body: Dict[str, Any] = {"session_id": session_id, "mode": mode, "wait_ms": millis(wait)}
    call = _shared_acquire("rwlocks", name, body, wait, keep_queued)
    return Op(call, lambda answer: _wire.shared_grant(answer, name, session_id))


def release_rwlock(name: str, session_id: str) -> Op[None]:
    body = {"session_id": session_id}
    call = Call("POST", f"/v1/rwlocks/{_path(name)}/release", body, gone_is_done=_RELEASED)
    return Op(call, _nothing)


def rwlock_state(name: str, stale: bool = False) -> Op[RwLockState]:
    call = Call("GET", f"/v1/rwlocks/{_path(name)}", params=_read_params(stale))
    return Op(call, _wire.rwlock_state)


def rwlocks(prefix: str, stale: bool = False) -> Op[List[RwLockSummary]]:
    return Op(Call("GET", "/v1/rwlocks", params=_list_params(prefix, stale)), _wire.rwlock_list)


def acquire_semaphore(name: str, session_id: str, permits: int, wait: float, keep_queued: bool) -> Op[Grant]:
    body: Dict[str, Any] = {"session_id": session_id, "permits": permits, "wait_ms": millis(wait)}
    call = _shared_acquire("semaphores", name, body, wait, keep_queued)
    return Op(call, lambda answer: _wire.shared_grant(answer, name, session_id))


def release_semaphore(name: str, session_id: str) -> Op[None]:
    body = {"session_id": session_id}
    call = Call("POST", f"/v1/semaphores/{_path(name)}/release", body, gone_is_done=_RELEASED)
    return Op(call, _nothing)


def semaphore_state(name: str, stale: bool = False) -> Op[SemaphoreState]:
    call = Call("GET", f"/v1/semaphores/{_path(name)}", params=_read_params(stale))
    return Op(call, _wire.semaphore_state)


def semaphores(prefix: str, stale: bool = False) -> Op[List[SemaphoreSummary]]:
    return Op(Call("GET", "/v1/semaphores", params=_list_params(prefix, stale)), _wire.semaphore_list)


def acquire_multi(names: List[str], session_id: str, wait: float, keep_queued: bool) -> Op[List[Grant]]:
    body: Dict[str, Any] = {"session_id": session_id, "locks": list(names), "wait_ms": millis(wait)}
    if keep_queued:
        body["keep_queued"] = True
    call = Call("POST", "/v1/multilocks/acquire", body, wait=wait, resend=False)
    return Op(call, lambda answer: _wire.multi_grants(answer, session_id))


def release_multi(names: List[str], session_id: str) -> Op[None]:
    body = {"session_id": session_id, "locks": list(names)}
    call = Call("POST", "/v1/multilocks/release", body, gone_is_done=_RELEASED)
    return Op(call, _nothing)


# -- nodes --------------------------------------------------------------------


def get_node(path: str, stale: bool = False) -> Op[Node]:
    call = Call("GET", f"/v1/nodes/{_path(path)}", params=_read_params(stale))
    return Op(call, _wire.node)


def _node_route(path: str) -> str:
    """``/v1/nodes/{path}``, and ``/v1/nodes`` for the root."""
    return f"/v1/nodes/{_path(path)}".rstrip("/")


def read_node(path: str) -> Call:
    """A linearizable node read; its answer's ``Raftlock-Revision`` header is
    the revision the read saw (:func:`node_at_revision` reads both)."""
    return Call("GET", _node_route(path))


def node_at_revision(answer: Answer) -> Tuple[Node, int]:
    """A :func:`read_node` answer: the node, and the revision the read saw."""
    if answer.revision is None:
        raise ProtocolError("a node read without a Raftlock-Revision header")
    return _wire.node(answer.body), answer.revision


def watch_path(path: str, since_revision: int) -> str:
    """The SSE route of a node watch after ``since_revision``."""
    return f"{_node_route(path)}?watch=true&since_revision={since_revision}"


def children(path: str, stale: bool = False) -> Op[List[str]]:
    params = {"children": "true", **(_read_params(stale) or {})}
    return Op(Call("GET", f"/v1/nodes/{_path(path)}", params=params), _wire.children)


def put_node(
    path: str,
    data: Union[bytes, str],
    session_id: Optional[str],
    sequential: bool,
    expected_version: Optional[int],
) -> Op[Node]:
    raw = data.encode() if isinstance(data, str) else data
    body: Dict[str, Any] = {"data": base64.b64encode(raw).decode("ascii")}
    if session_id is not None:
        body["session_id"] = session_id
    if sequential:
        body["sequential"] = True
    if expected_version is not None:
        body["expected_version"] = expected_version
    # A second sequential create makes a second node, and a conditional
    # write that did apply would then fail its own condition.
    plain = not sequential and expected_version is None
    call = Call("PUT", f"/v1/nodes/{_path(path)}", body, resend=plain)
    return Op(call, _wire.node)


def delete_node(path: str, expected_version: Optional[int]) -> Op[None]:
    params = None if expected_version is None else {"expected_version": str(expected_version)}
    call = Call("DELETE", f"/v1/nodes/{_path(path)}", params=params, gone_is_done=(NotFound,))
    return Op(call, _nothing)


# -- cluster ------------------------------------------------------------------


def cluster() -> Op[ClusterState]:
    return Op(Call("GET", "/v1/cluster"), _wire.cluster)
