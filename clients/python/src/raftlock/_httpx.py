"""What an httpx exception means for a request: never sent, or sent and lost."""

from __future__ import annotations

import ssl
from typing import Optional

import httpx

from ._failover import Answer, Lost, NotSent, Outcome, Refused
from ._settings import Settings
from ._tls import CACERT_ENV


def outcome_of(error: httpx.TransportError) -> Outcome:
    """Connect failures and pool waits happen before anything is sent;
    every other transport error (read timeout, reset, a dropped connection)
    may come after the server got the request. A failed TLS handshake is
    neither: the server ends it before reading any request."""
    tls = _ssl_error(error)
    if tls is not None:
        return Refused(f"TLS handshake failed: {tls}")
    why = f"{type(error).__name__}: {error}".rstrip(": ")
    if isinstance(error, httpx.RemoteProtocolError) and _plain_http(error):
        # What a member serving HTTPS does to a plain-HTTP request: it
        # answers with a TLS alert, which httpx cannot parse (and does
        # not show), so this is only a likely cause.
        why += f" (if the cluster serves HTTPS, give cacert= or ${CACERT_ENV})"
    if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return NotSent(why)
    return Lost(why)


def answer_of(response: httpx.Response) -> Answer:
    """An answer as the failover plan takes it, with the revision its
    ``Raftlock-Revision`` header names, if any."""
    revision = response.headers.get("raftlock-revision")
    known = revision is not None and revision.isdigit()
    return Answer(response.status_code, response.content, int(revision) if known else None)


def _ssl_error(error: BaseException) -> Optional[ssl.SSLError]:
    """The ``ssl.SSLError`` under an httpx error (httpx and httpcore chain
    their exceptions with ``raise ... from``): a certificate the client does
    not trust, or the server's alert refusing the client's."""
    seen: Optional[BaseException] = error
    for _ in range(8):  # a short chain; bounded in case of a cycle
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _plain_http(error: httpx.RequestError) -> bool:
    try:
        return error.request.url.scheme == "http"
    except RuntimeError:  # an error raised without its request
        return False


def timeouts(settings: Settings, budget: float) -> httpx.Timeout:
    """httpx timeouts for one attempt that may take ``budget`` seconds."""
    return httpx.Timeout(budget, connect=min(settings.connect_timeout, budget))


def stream_timeouts(settings: Settings) -> httpx.Timeout:
    """For an SSE stream: each read may wait the idle timeout."""
    return httpx.Timeout(
        settings.timeout,
        connect=settings.connect_timeout,
        read=settings.observe_idle_timeout,
    )


HEADERS = {"Accept": "application/json", "User-Agent": "raftlock-python"}
SSE_HEADERS = {"Accept": "text/event-stream", "User-Agent": "raftlock-python"}
