"""The IO-free rules, tested without a cluster: loss deadline, wait
slices, cleanup decisions, failover plan, error mapping, SSE parsing."""

from __future__ import annotations

import json
from typing import List, Optional

import pytest

import raftlock
from raftlock import _api, _endpoints, _sse
from raftlock._failover import Answer, Attempt, Call, Lost, NotSent, Outcome, RetryPolicy, drive, plan
from raftlock._lease import LeaseClock, lost_margin
from raftlock._settings import Settings
from raftlock._stream import CLOSED, Reconnects
from raftlock._waiting import Slice, WaitPlan, must_release
from raftlock.errors import from_answer


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the loss deadline --------------------------------------------------------


@pytest.mark.parametrize(
    "ttl, margin",
    [(60.0, 6.0), (10.0, 1.0), (3.0, 0.5), (1.0, 0.5), (0.8, 0.4)],
)
def test_lost_margin_is_a_tenth_at_least_half_a_second_at_most_half_the_ttl(
    ttl: float, margin: float
) -> None:
    assert lost_margin(ttl) == pytest.approx(margin)


def test_lease_clock_moves_the_deadline_forward_only() -> None:
    clock = LeaseClock(ttl=10.0, renewed=100.0)
    assert clock.lost_at() == pytest.approx(109.0)
    assert clock.next_keepalive() == pytest.approx(100.0 + 10.0 / 3)
    clock.renew(105.0, 10.0)
    assert clock.lost_at() == pytest.approx(114.0)
    clock.renew(101.0, 10.0)  # an older keepalive answered late
    assert clock.lost_at() == pytest.approx(114.0)
    assert clock.retry_interval() == pytest.approx(1.0)


# -- waiting in slices ----------------------------------------------------------


def _plan(timeout: Optional[float], clock: FakeClock, keep_queued: bool = True) -> WaitPlan:
    settings = Settings(long_poll=60.0, retry=RetryPolicy(attempts=2))
    return WaitPlan("l", timeout, settings, keep_queued=keep_queued, lost=lambda: None, clock=clock)


def test_a_long_wait_keeps_its_place_on_every_slice_but_the_last() -> None:
    clock = FakeClock()
    plan = _plan(150.0, clock)
    slices: List[Slice] = []
    with pytest.raises(raftlock.Timeout):
        while True:
            piece = plan.next()
            slices.append(piece)
            clock.now += piece.wait
            plan.failed(raftlock.Timeout("server"))
    assert slices == [Slice(60.0, True), Slice(60.0, True), Slice(pytest.approx(30.0), False)]  # type: ignore[arg-type]
    assert plan.maybe_queued  # kept nodes: a give-up must release


def test_a_short_wait_is_one_slice_that_never_keeps_its_node() -> None:
    clock = FakeClock()
    plan = _plan(5.0, clock)
    assert plan.next() == Slice(5.0, False)
    clock.now += 5.0
    plan.failed(raftlock.Timeout("server"))
    with pytest.raises(raftlock.Timeout):
        plan.next()
    assert not plan.maybe_queued
    assert not must_release(plan, raftlock.Timeout("x"))


def test_waiting_forever_always_keeps_queued() -> None:
    plan = _plan(None, FakeClock())
    for _ in range(3):
        assert plan.next() == Slice(60.0, True)
        plan.failed(raftlock.Timeout("server"))


def test_a_try_is_one_request_and_lock_held_ends_it() -> None:
    plan = _plan(0, FakeClock())
    assert plan.next() == Slice(0.0, False)
    with pytest.raises(raftlock.LockHeld):
        plan.failed(raftlock.LockHeld("held"))
    assert not must_release(plan, raftlock.LockHeld("held"))


def test_a_server_without_keep_queued_is_waited_on_without_it() -> None:
    plan = _plan(None, FakeClock())
    assert plan.next().keep_queued
    plan.failed(raftlock.BadRequest("invalid JSON body: unknown field `keep_queued`, expected ..."))
    assert plan.next() == Slice(60.0, False)
    with pytest.raises(raftlock.BadRequest):
        plan.failed(raftlock.BadRequest("invalid name"))


def test_lost_answers_are_retried_then_reported_and_always_cleaned_up() -> None:
    plan = _plan(None, FakeClock())  # two attempts: two retries of lost answers
    for _ in range(2):
        plan.next()
        plan.failed(raftlock.OutcomeUnknown("lost"))
    plan.next()
    with pytest.raises(raftlock.OutcomeUnknown):
        plan.failed(raftlock.OutcomeUnknown("lost"))
    assert must_release(plan, raftlock.OutcomeUnknown("lost"))


def test_cleanup_rules() -> None:
    plan = _plan(5.0, FakeClock())
    assert must_release(plan, KeyboardInterrupt())
    assert must_release(plan, raftlock.OutcomeUnknown("x"))
    assert must_release(plan, raftlock.SessionLost(raftlock.LostReason.KEEPALIVE_FAILED))
    assert not must_release(plan, raftlock.SessionLost(raftlock.LostReason.CLOSED))
    assert not must_release(plan, raftlock.SessionLost(raftlock.LostReason.EXPIRED))
    assert not must_release(plan, raftlock.SessionNotFound("gone"))
    assert not must_release(plan, raftlock.Unavailable("never sent"))


def test_a_lost_session_ends_the_wait() -> None:
    settings = Settings()
    plan = WaitPlan("l", None, settings, keep_queued=True, lost=lambda: raftlock.LostReason.EXPIRED)
    with pytest.raises(raftlock.SessionLost):
        plan.next()


# -- the failover plan --------------------------------------------------------


def _run(outcomes: List[Outcome], call: Call, endpoints: _endpoints.Endpoints) -> List[Attempt]:
    """Drives a plan against scripted outcomes; returns the attempts made."""
    attempts: List[Attempt] = []

    def send(attempt: Attempt) -> Outcome:
        attempts.append(attempt)
        return outcomes.pop(0)

    drive(plan(endpoints, RetryPolicy(attempts=4, initial_backoff=0.0), call, 5.0), send)
    return attempts


def _error(code: str, status: int) -> Answer:
    return Answer(status, json.dumps({"error": code, "message": code}).encode())


def test_failover_moves_on_and_sticks_to_the_endpoint_that_answered() -> None:
    endpoints = _endpoints.Endpoints("a:1,b:2,c:3")
    attempts = _run(
        [NotSent("refused"), _error("no_leader", 503), Answer(200, b"{}")], Call("GET", "/x"), endpoints
    )
    assert [a.url for a in attempts] == ["http://a:1", "http://b:2", "http://c:3"]
    assert endpoints.current == "http://c:3"
    attempts = _run([Answer(200, b"{}")], Call("GET", "/x"), endpoints)
    assert [a.url for a in attempts] == ["http://c:3"]


@pytest.mark.parametrize("code", ["storage_failed", "disk_full", "member_replaced", "overloaded"])
def test_a_member_that_cannot_serve_is_passed_over(code: str) -> None:
    endpoints = _endpoints.Endpoints("a:1,b:2")
    attempts = _run([_error(code, 503), Answer(200, b"{}")], Call("POST", "/x", resend=False), endpoints)
    assert [a.url for a in attempts] == ["http://a:1", "http://b:2"]
    assert endpoints.current == "http://b:2"


def test_definite_errors_are_raised_at_once() -> None:
    endpoints = _endpoints.Endpoints(["a:1", "b:2"])
    with pytest.raises(raftlock.NotOwner) as info:
        _run([_error("not_owner", 403)], Call("POST", "/x"), endpoints)
    assert (info.value.code, info.value.status) == ("not_owner", 403)


def test_a_lost_answer_is_resent_only_when_safe() -> None:
    endpoints = _endpoints.Endpoints(["a:1", "b:2"])
    attempts = _run([Lost("reset"), Answer(200, b"{}")], Call("POST", "/x"), endpoints)
    assert len(attempts) == 2
    with pytest.raises(raftlock.OutcomeUnknown):
        _run([Lost("reset")], Call("POST", "/x", resend=False), endpoints)
    with pytest.raises(raftlock.ShuttingDown):
        _run([_error("shutting_down", 503)], Call("POST", "/x", resend=False), endpoints)
    with pytest.raises(raftlock.OutcomeUnknown):
        _run([Lost("reset")] * 4, Call("POST", "/x"), endpoints)


def test_after_a_lost_answer_the_next_call_starts_elsewhere() -> None:
    endpoints = _endpoints.Endpoints(["a:1", "b:2"])
    with pytest.raises(raftlock.OutcomeUnknown):
        _run([Lost("reset")], Call("POST", "/acquire", resend=False), endpoints)
    assert endpoints.current == "http://b:2"


def test_a_delete_whose_first_answer_was_lost_is_done_when_gone() -> None:
    endpoints = _endpoints.Endpoints(["a:1"])
    call = Call("POST", "/release", gone_is_done=(raftlock.NotFound,))
    _run([Lost("timeout"), _error("not_found", 404)], call, endpoints)
    with pytest.raises(raftlock.NotFound):
        _run([_error("not_found", 404)], call, endpoints)


def test_the_deadline_bounds_the_attempts() -> None:
    clock = FakeClock()
    endpoints = _endpoints.Endpoints(["a:1"])
    steps = plan(endpoints, RetryPolicy(), Call("POST", "/k"), 10.0, deadline=clock.now + 2.0, clock=clock)
    first = next(steps)
    assert first.timeout == pytest.approx(2.0)
    clock.now += 3.0
    with pytest.raises(raftlock.Unavailable):
        steps.send(NotSent("refused"))


def test_backoff_doubles_and_is_jittered() -> None:
    policy = RetryPolicy()
    assert policy.backoff(0) == 0
    for attempt in range(1, 10):
        full = min(0.05 * 2 ** (attempt - 1), 1.0)
        assert full / 2 <= policy.backoff(attempt) <= full


# -- errors -------------------------------------------------------------------


def test_every_documented_code_has_its_class() -> None:
    documented = {
        "bad_request": 400, "session_not_found": 404, "not_found": 404, "not_owner": 403,
        "lock_held": 409, "timeout": 408, "no_leader": 503, "too_large": 413,
        "version_mismatch": 409, "not_leader": 409, "unsupported_media_type": 415,
        "method_not_allowed": 405, "withdrawn": 409, "not_empty": 409, "ephemeral_parent": 409,
        "session_conflict": 409, "sequence_exhausted": 409, "already_granted": 409,
        "outcome_unknown": 503, "shutting_down": 503, "not_caught_up": 503, "internal": 500,
        "unauthorized": 401, "forbidden": 403, "limit_mismatch": 409,
    }  # fmt: skip
    assert set(raftlock.ERRORS_BY_CODE) == set(documented)
    for code, status in documented.items():
        error = from_answer(status, json.dumps({"error": code, "message": "m"}).encode())
        assert type(error) is raftlock.ERRORS_BY_CODE[code]
        assert (error.code, error.status, error.message) == (code, status, "m")
        assert type(error).http_status == status
        assert isinstance(error, raftlock.RaftlockError)


def test_errors_decided_here_have_no_status() -> None:
    assert raftlock.Timeout("waited").status is None and raftlock.Timeout.http_status == 408


def test_unknown_codes_and_foreign_bodies() -> None:
    newer = from_answer(409, b'{"error": "brand_new", "message": "m"}')
    assert type(newer) is raftlock.RaftlockError and newer.code == "brand_new"
    assert isinstance(from_answer(502, b"<html>bad gateway</html>"), raftlock.OutcomeUnknown)
    assert isinstance(from_answer(404, b"nope"), raftlock.ProtocolError)
    assert from_answer(502, b"<html>").outcome_unknown


# -- endpoints ------------------------------------------------------------------


def test_endpoints_default_to_the_environment_then_the_local_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAFTLOCK_ENDPOINTS", raising=False)
    assert _endpoints.parse(None) == [f"http://127.0.0.1:{p}" for p in (7001, 7002, 7003)]
    monkeypatch.setenv("RAFTLOCK_ENDPOINTS", "http://h:1/, h:2")
    assert _endpoints.parse(None) == ["http://h:1", "http://h:2"]
    with pytest.raises(raftlock.BadRequest):
        _endpoints.parse([" "])
    with pytest.raises(raftlock.BadRequest):
        _endpoints.parse("ftp://h:1")


# -- SSE ------------------------------------------------------------------------


def test_sse_events_split_across_chunks() -> None:
    parser = _sse.Parser()
    assert list(parser.push(b': keep-alive\n\nevent: leader\r\ndata: {"a":')) == []
    events = list(parser.push(b"1}\ndata: x\n\nevent: other\ndata:y\n\n"))
    assert events == [_sse.Event("leader", '{"a":1}\nx'), _sse.Event("other", "y")]


def test_leader_feed_drops_repeats_across_reconnects() -> None:
    feed = _sse.LeaderFeed()
    none = b'event: leader\ndata: {"election":"e","leader":null}\n\n'
    led = (
        b'event: leader\ndata: {"election":"e","leader":{"session_id":"s","value":"v",'
        b'"node":"/elections/e/lock-1","fencing_token":7}}\n\n'
    )
    assert list(feed.push(none)) == [None]
    feed.reconnected()
    assert list(feed.push(none)) == []
    [leader] = list(feed.push(led))
    assert leader is not None and (leader.value, leader.fencing_token) == ("v", 7)
    assert feed.events == 3


def test_a_followed_stream_gives_up_only_after_drops_in_a_row_without_an_event() -> None:
    feed = _sse.LeaderFeed()
    reconnects = Reconnects("observe e", RetryPolicy(attempts=3))
    assert reconnects.dropped("reset") > 0
    before = feed.events
    list(feed.push(b'event: leader\ndata: {"election":"e","leader":null}\n\n'))
    reconnects.read(feed, before)  # an event: the count starts again
    assert reconnects.dropped(CLOSED) > 0
    before = feed.events
    list(feed.push(b": keep-alive\n\n"))
    reconnects.read(feed, before)  # no event: the drops go on counting
    assert reconnects.dropped("reset") > 0
    with pytest.raises(raftlock.Unavailable, match="observe e: refused"):
        reconnects.dropped("refused")


# -- read-write locks, semaphores, multi-locks, watches ------------------------


@pytest.mark.parametrize(
    "op",
    [
        _api.acquire_rwlock("a", "s", "write", 1.0, True),
        _api.acquire_semaphore("a", "s", 2, 1.0, True),
        _api.acquire_multi(["a", "b"], "s", 1.0, True),
    ],
)
def test_shared_acquires_pass_an_overloaded_member_and_are_not_resent(op: _api.Op[object]) -> None:
    assert op.call.wait == 1.0 and op.call.resend is False
    assert op.call.body is not None and op.call.body["keep_queued"] is True
    endpoints = _endpoints.Endpoints("a:1,b:2")
    attempts = _run([_error("overloaded", 503), Answer(200, b"{}")], op.call, endpoints)
    assert [a.url for a in attempts] == ["http://a:1", "http://b:2"]


def test_a_watch_feed_resumes_without_repeats() -> None:
    from raftlock._watch import WatchFeed

    def change(kind: str, revision: int, path: str) -> bytes:
        node = ', "node": {"data": "", "version": 1, "create_revision": 1, "mod_revision": 1}'
        body = f'{{"revision": {revision}, "path": "{path}"{node if kind == "put" else ""}}}'
        return f"event: {kind}\ndata: {body}\n\n".encode()

    feed = WatchFeed(10)
    got = [(e.kind, e.revision, e.path) for e in feed.push(change("put", 11, "/a") + change("put", 12, "/b"))]
    assert got == [("put", 11, "/a"), ("put", 12, "/b")]
    assert feed.since() == 11  # revision 12 may have more changes to come
    feed.reconnected()
    again = change("put", 12, "/b") + change("delete", 12, "/c") + change("put", 13, "/a")
    assert [(e.kind, e.path) for e in feed.push(again)] == [("delete", "/c"), ("put", "/a")]
    end = list(feed.push(b'event: compacted\ndata: {"since_revision": 13, "floor": 20}\n\n'))
    assert [(e.kind, e.floor) for e in end] == [("compacted", 20)] and feed.done
