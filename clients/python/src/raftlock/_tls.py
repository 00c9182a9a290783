"""``cacert``/``cert``/``key``: HTTPS to a cluster with a ``[tls]`` table,
as the CLI's ``--cacert/--cert/--key`` (docs/api.md, "TLS")."""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from typing import Optional, Union

CACERT_ENV = "RAFTLOCK_CACERT"
CERT_ENV = "RAFTLOCK_CERT"
KEY_ENV = "RAFTLOCK_KEY"

PathArg = Union[str, "os.PathLike[str]", None]


def _from_env(given: PathArg, var: str) -> Optional[str]:
    """``given``, else ``$var`` (an empty one counts as unset)."""
    if given is not None:
        return os.fspath(given)
    return os.environ.get(var) or None


@dataclass(frozen=True)
class TlsFiles:
    """The PEM files of a client; each ``None`` argument falls back to its
    environment variable, as the CLI's flags do."""

    cacert: Optional[str] = None
    """The cluster CA to trust (and only it). Given, every endpoint is
    dialed as ``https://``."""
    cert: Optional[str] = None
    """The client certificate for a cluster with ``client_auth``."""
    key: Optional[str] = None
    """The private key of ``cert``."""

    @classmethod
    def resolve(cls, cacert: PathArg, cert: PathArg, key: PathArg) -> TlsFiles:
        files = cls(_from_env(cacert, CACERT_ENV), _from_env(cert, CERT_ENV), _from_env(key, KEY_ENV))
        if (files.cert is None) != (files.key is None):
            raise ValueError("cert and key go together: give both or neither")
        if files.cert is not None and files.cacert is None:
            raise ValueError("cert needs cacert (the CA that signed the cluster's certificates)")
        return files

    def verify(self) -> Union[ssl.SSLContext, bool]:
        """What httpx's ``verify=`` takes: a context trusting only
        ``cacert`` (and presenting ``cert``), else the system's trust
        store for ``https://`` endpoints."""
        if self.cacert is None:
            return True
        try:
            context = ssl.create_default_context(cafile=self.cacert)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"cacert {self.cacert}: {e}") from e
        if self.cert is not None:
            try:
                context.load_cert_chain(self.cert, self.key)
            except (OSError, ssl.SSLError) as e:
                raise ValueError(f"cert {self.cert} / key {self.key}: {e}") from e
        return context
