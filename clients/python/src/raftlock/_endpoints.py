"""Which members a client talks to, and which one it tries first."""

from __future__ import annotations

import os
from typing import List, Sequence, Union

from .errors import BadRequest

LOCAL_CLUSTER = "http://127.0.0.1:7001,http://127.0.0.1:7002,http://127.0.0.1:7003"
"""The cluster ``raftlock up`` starts with its defaults; also the CLI's default."""

ENV_VAR = "RAFTLOCK_ENDPOINTS"
"""Comma-separated endpoints, read when a client is given none (as the CLI does)."""

EndpointsArg = Union[str, Sequence[str], None]


def parse(endpoints: EndpointsArg, https: bool = False) -> List[str]:
    """Base URLs without a trailing slash.

    ``None`` means ``$RAFTLOCK_ENDPOINTS``, else the local cluster. A string
    is a comma-separated list. ``host:port`` without a scheme means
    ``http://host:port``. With ``https`` (a client given a CA file) every
    endpoint is dialed as ``https://``, ``http://`` ones and the defaults
    too, as the CLI does with ``--cacert``.
    """
    if endpoints is None:
        endpoints = os.environ.get(ENV_VAR) or LOCAL_CLUSTER
    if isinstance(endpoints, str):
        endpoints = endpoints.split(",")
    urls = [_url(e, https) for e in endpoints if e.strip()]
    if not urls:
        raise BadRequest("no endpoints given")
    return urls


def _url(endpoint: str, https: bool) -> str:
    endpoint = endpoint.strip().rstrip("/")
    if "://" not in endpoint:
        endpoint = "http://" + endpoint
    if https and endpoint.startswith("http://"):
        endpoint = "https://" + endpoint[len("http://") :]
    if not endpoint.startswith(("http://", "https://")):
        raise BadRequest(f"endpoint {endpoint!r} is not http:// or https://")
    return endpoint


class Endpoints:
    """The endpoint list and the sticky choice among them.

    Any member serves any request (followers forward writes to the leader),
    so the client keeps using the member that last answered and moves on
    only when it fails. Shared by every thread of a client: reading and
    writing one int is atomic in CPython, and a lost update only means one
    extra failed attempt.
    """

    def __init__(self, endpoints: EndpointsArg, https: bool = False) -> None:
        self.urls = parse(endpoints, https)
        self._preferred = 0

    @property
    def preferred(self) -> int:
        """Index of the endpoint to try first."""
        return self._preferred

    @property
    def current(self) -> str:
        """The endpoint the next request goes to first."""
        return self.urls[self._preferred]

    def prefer(self, index: int) -> None:
        """Remember the endpoint that just answered."""
        self._preferred = index

    def at(self, start: int, attempt: int) -> int:
        """The endpoint index for ``attempt`` of a call that began at ``start``."""
        return (start + attempt) % len(self.urls)

    def __repr__(self) -> str:
        return f"Endpoints({self.urls!r}, current={self.current!r})"
