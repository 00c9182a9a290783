"""What the blocking and the asyncio client share: settings, endpoints,
and the failover plan of each request."""

from __future__ import annotations

import os
from typing import Dict, List, Optional

from ._endpoints import Endpoints, EndpointsArg
from ._failover import Call, Plan, RetryPolicy, plan
from ._httpx import HEADERS
from ._settings import Settings
from ._tls import PathArg, TlsFiles


TOKEN_ENV = "RAFTLOCK_TOKEN"
"""Where a client without ``token=`` finds its bearer token, as the CLI does."""


class ClientBase:
    """The part of a client that does no IO; subclasses add the sockets
    in :meth:`_setup`."""

    def __init__(
        self,
        endpoints: EndpointsArg = None,
        timeout: float = 10.0,
        *,
        connect_timeout: float = 1.0,
        retry: Optional[RetryPolicy] = None,
        long_poll: float = 60.0,
        session_ttl: float = 15.0,
        observe_idle_timeout: float = 60.0,
        token: Optional[str] = None,
        cacert: PathArg = None,
        cert: PathArg = None,
        key: PathArg = None,
    ) -> None:
        self.settings = Settings(
            timeout=timeout,
            connect_timeout=connect_timeout,
            retry=retry or RetryPolicy(),
            long_poll=long_poll,
            session_ttl=session_ttl,
            observe_idle_timeout=observe_idle_timeout,
        )
        self._tls = TlsFiles.resolve(cacert, cert, key)
        self._endpoints = Endpoints(endpoints, https=self._tls.cacert is not None)
        if token is None:
            token = os.environ.get(TOKEN_ENV)
        token = (token or "").strip()
        self._auth: Dict[str, str] = {"Authorization": f"Bearer {token}"} if token else {}
        self._setup()

    def _setup(self) -> None:
        """Creates what the flavour needs (connection pool, locks)."""

    @property
    def endpoints(self) -> List[str]:
        """The endpoints, in configured order."""
        return list(self._endpoints.urls)

    @property
    def current_endpoint(self) -> str:
        """The endpoint the next request goes to first."""
        return self._endpoints.current

    def _plan(self, call: Call, deadline: Optional[float] = None) -> Plan:
        """The attempts of ``call``; ``deadline`` (a ``time.monotonic()``
        instant) bounds it as a whole."""
        return plan(self._endpoints, self.settings.retry, call, self.settings.timeout, deadline)

    @property
    def _headers(self) -> Dict[str, str]:
        """Headers of every request: JSON, and the bearer token if any
        (a cluster with ``[[auth.tokens]]`` answers 401 without one)."""
        return {**HEADERS, **self._auth}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._endpoints.urls!r}, current={self.current_endpoint!r})"
