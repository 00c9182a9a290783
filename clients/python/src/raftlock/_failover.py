"""The failover and retry policy of one request, in one place, free of IO.

:func:`plan` is a generator: it yields each :class:`Attempt` (which
endpoint, how long to pause first, how long to wait for the answer) and is
sent back what became of it. The blocking client and the asyncio client
drive the same plan with their own sockets, so both follow one policy:

- Stick to the endpoint that last answered; on a failure move on to the
  next one, for this attempt and for later calls.
- An attempt that was never delivered (connection refused, connect
  timeout) or answered ``no_leader`` changed nothing: retry elsewhere after
  a jittered backoff. So did one answered by a member that cannot serve
  (``storage_failed``, ``disk_full``, ``member_replaced``, ``overloaded``:
  it refuses before proposing anything): move on to another member.
- An attempt whose answer was lost after sending (timeout, dropped
  connection, ``outcome_unknown``, ``shutting_down``, ``internal``) may
  have been applied. It is resent only if the call says that is safe
  (``Call.resend``); if the attempts run out the error is
  :class:`~raftlock.errors.OutcomeUnknown`, never a definite one.
- Any other answer is final and raised as its typed error.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generator, Optional, Tuple, Type, Union

from . import _codes
from .errors import NoLeader, OutcomeUnknown, RaftlockError, TlsError, Unavailable, from_answer
from ._endpoints import Endpoints


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is retried.

    The defaults (six attempts, pausing 50, 100, 200, 400, 800 ms, each
    jittered down by up to half) ride out a Raft election, as the Rust
    client's do; the servers themselves also wait for a leader before
    answering ``no_leader``.
    """

    attempts: int = 6
    """Attempts per request, the first included."""
    initial_backoff: float = 0.05
    """Seconds before the second attempt; doubles with each attempt."""
    max_backoff: float = 1.0
    """Cap on one pause, in seconds."""

    def backoff(self, attempt: int) -> float:
        """The pause before ``attempt`` (0-based, none before the first),
        scaled by a random factor in [0.5, 1] so that clients which failed
        together do not retry together."""
        if attempt <= 0:
            return 0.0
        full = min(self.initial_backoff * (1 << min(attempt - 1, 16)), self.max_backoff)
        return full * random.uniform(0.5, 1.0)


@dataclass(frozen=True)
class Call:
    """One API request, as the retry loop needs to know it."""

    method: str
    path: str
    body: Optional[Dict[str, Any]] = None
    params: Optional[Dict[str, str]] = None
    wait: float = 0.0
    """Seconds the server may hold the request (a long poll); added to the
    request timeout so that the server's own ``timeout`` answer arrives
    before the client gives up."""
    resend: bool = True
    """Whether an attempt with an unknown outcome may be sent again. False
    for writes that are not idempotent, and for long polls, whose caller
    retries with a fresh wait instead."""
    gone_is_done: Tuple[Type[RaftlockError], ...] = ()
    """For deletes: after an attempt with an unknown outcome, these answers
    mean the earlier attempt did the work."""


@dataclass(frozen=True)
class Attempt:
    """One try of a call on one endpoint."""

    index: int
    """Which endpoint."""
    url: str
    """That endpoint's base URL."""
    pause: float
    """Seconds to sleep before sending (the backoff)."""
    timeout: float
    """Seconds to wait for the answer."""


@dataclass(frozen=True)
class Answer:
    """An HTTP answer."""

    status: int
    body: bytes
    revision: Optional[int] = None
    """The ``Raftlock-Revision`` header of a node read, when known."""


@dataclass(frozen=True)
class NotSent:
    """The request never reached the server: nothing changed."""

    why: str


@dataclass(frozen=True)
class Lost:
    """The request was sent but no usable answer came back."""

    why: str


@dataclass(frozen=True)
class Refused:
    """The TLS handshake failed: nothing was applied, and trying again
    (here or on another member, which has the same CA) fails the same way."""

    why: str


Outcome = Union[Answer, NotSent, Lost, Refused]
Plan = Generator[Attempt, Outcome, Answer]


def plan(
    endpoints: Endpoints,
    policy: RetryPolicy,
    call: Call,
    timeout: float,
    deadline: Optional[float] = None,
    clock: Callable[[], float] = time.monotonic,
) -> Plan:
    """The attempts of ``call``; returns its 2xx answer or raises its error.

    ``timeout`` bounds each attempt (plus ``call.wait``); ``deadline`` (a
    ``clock()`` instant) bounds the whole call, retries and pauses included.
    """
    start = endpoints.preferred
    unknown: Optional[str] = None
    last: RaftlockError = Unavailable("the deadline passed before any attempt")
    for n in range(max(policy.attempts, 1)):
        index = endpoints.at(start, n)
        url = endpoints.urls[index]
        pause = policy.backoff(n)
        budget = timeout + call.wait
        if deadline is not None:
            budget = min(budget, deadline - clock() - pause)
            if budget <= 0:
                break
        outcome = yield Attempt(index, url, pause, budget)
        if isinstance(outcome, Refused):
            raise TlsError(f"{url}: {outcome.why}")
        if isinstance(outcome, Answer) and 200 <= outcome.status < 300:
            endpoints.prefer(index)
            return outcome
        error = from_answer(outcome.status, outcome.body) if isinstance(outcome, Answer) else None
        if error is not None and not _changed_nothing(error) and not error.outcome_unknown:
            endpoints.prefer(index)  # a definite answer: this member works
            if unknown is not None and isinstance(error, call.gone_is_done):
                return Answer(204, b"")
            raise error
        _move_on(endpoints, index)
        if isinstance(outcome, NotSent):
            last = Unavailable(f"{url}: {outcome.why}")
        elif isinstance(outcome, Lost):
            unknown = _unknown(call, f"{url}: {outcome.why}")
        elif error is not None and _changed_nothing(error):
            last = error
        elif error is not None:
            unknown = _unknown(call, f"{url}: {error}", error)
    if unknown is not None:
        raise OutcomeUnknown(unknown)
    raise last


# Answers of a member that cannot serve right now and refused before
# proposing anything (docs/api.md): another member may serve. From the
# contract's table (``_codes``, generated from raftlock-api's ErrorCode).
_MEMBER_CANNOT_SERVE = _codes.RETRY_ELSEWHERE & _codes.NOT_APPLIED


def _changed_nothing(error: RaftlockError) -> bool:
    """Whether ``error`` says the request changed nothing and another
    member may answer it."""
    return isinstance(error, NoLeader) or error.code in _MEMBER_CANNOT_SERVE


def _unknown(call: Call, why: str, error: Optional[RaftlockError] = None) -> str:
    """Notes an attempt with an unknown outcome; raises at once if the call
    must not be resent (the answer's own error when there was one)."""
    if not call.resend:
        raise error if error is not None else OutcomeUnknown(why)
    return why


def _move_on(endpoints: Endpoints, failed: int) -> None:
    """After a failure of the preferred endpoint, prefer the next one."""
    if endpoints.preferred == failed:
        endpoints.prefer(endpoints.at(failed, 1))


def drive(steps: Plan, send: Callable[[Attempt], Outcome]) -> Answer:
    """Runs a plan with a blocking ``send`` (which also does the pause)."""
    attempt = next(steps)
    while True:
        outcome = send(attempt)
        try:
            attempt = steps.send(outcome)
        except StopIteration as done:
            answer: Answer = done.value
            return answer
