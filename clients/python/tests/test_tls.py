"""TLS: a cluster started with ``raftlock up --tls`` (HTTPS, a throwaway
CA), and three ``raftlock serve`` members with ``client_auth =
"required"`` using the same certificates (docs/api.md, "TLS")."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Iterator

import pytest

from cluster import ServeCluster, UpCluster

import raftlock
from raftlock import _endpoints

REFUSED_WITHIN = 5.0
"""Seconds a refused handshake may take to surface: it is not retried."""


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    up = UpCluster(tmp_path_factory.mktemp("up-tls"), tls=True).start()
    try:
        yield up
    finally:
        up.stop()


@pytest.fixture
def mutual_tls_cluster(tls_cluster: UpCluster, tmp_path: Path) -> Iterator[ServeCluster]:
    assert tls_cluster.tls_dir is not None
    members = ServeCluster(tmp_path, tls_cluster.tls_dir, client_auth="required").start()
    try:
        yield members
    finally:
        members.stop()


@pytest.fixture(autouse=True)
def no_tls_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RAFTLOCK_CACERT", "RAFTLOCK_CERT", "RAFTLOCK_KEY"):
        monkeypatch.delenv(var, raising=False)


def plain(endpoints: list[str]) -> list[str]:
    return [e.replace("https://", "http://") for e in endpoints]


def test_lock_through_tls(tls_cluster: UpCluster, name: str) -> None:
    assert tls_cluster.tls_dir is not None
    # http:// endpoints are dialed as https:// once a CA is given, as the CLI does.
    ca = tls_cluster.tls_dir / "ca.pem"
    with raftlock.Client(plain(tls_cluster.endpoints), timeout=5, cacert=ca) as c:
        assert c.endpoints == tls_cluster.endpoints
        with c.lock(name, timeout=5) as guard:
            assert c.fencing_check(name, guard.fencing_token).valid


def test_async_client_takes_tls_from_the_environment(
    tls_cluster: UpCluster, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert tls_cluster.tls_dir is not None
    monkeypatch.setenv("RAFTLOCK_CACERT", str(tls_cluster.tls_dir / "ca.pem"))

    async def main() -> None:
        async with raftlock.AsyncClient(",".join(plain(tls_cluster.endpoints)), timeout=5) as c:
            async with c.lock(name, timeout=5) as guard:
                assert guard.fencing_token > 0

    asyncio.run(main())


def test_client_without_the_ca_is_refused_at_once(tls_cluster: UpCluster, name: str) -> None:
    with raftlock.Client(tls_cluster.endpoints, timeout=5) as c:
        started = time.monotonic()
        with pytest.raises(raftlock.TlsError) as refused:
            c.lock_state(name)
        assert time.monotonic() - started < REFUSED_WITHIN
    assert "certificate verify failed" in str(refused.value).lower()
    assert isinstance(refused.value, raftlock.Unavailable)  # nothing was applied


def test_plain_http_to_an_https_member_says_why(tls_cluster: UpCluster, name: str) -> None:
    with raftlock.Client(plain(tls_cluster.endpoints), timeout=5) as c:
        with pytest.raises(raftlock.RaftlockError) as refused:
            c.lock_state(name)
    assert "give cacert=" in str(refused.value)


def test_client_auth_required(mutual_tls_cluster: ServeCluster, name: str) -> None:
    tls = mutual_tls_cluster.tls_dir
    assert tls is not None
    with raftlock.Client(
        mutual_tls_cluster.endpoints,
        timeout=5,
        cacert=tls / "ca.pem",
        cert=tls / "client.pem",
        key=tls / "client-key.pem",
    ) as c:
        with c.lock(name, timeout=5) as guard:
            assert guard.fencing_token > 0
    with raftlock.Client(mutual_tls_cluster.endpoints, timeout=5, cacert=tls / "ca.pem") as anonymous:
        started = time.monotonic()
        with pytest.raises(raftlock.TlsError):
            anonymous.lock_state(name)
        assert time.monotonic() - started < REFUSED_WITHIN


def test_tls_arguments_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cert needs cacert"):
        raftlock.Client("127.0.0.1:1", cert="c.pem", key="k.pem")
    with pytest.raises(ValueError, match="together"):
        raftlock.Client("127.0.0.1:1", cacert="ca.pem", cert="c.pem")
    with pytest.raises(ValueError, match="cacert"):
        raftlock.Client("127.0.0.1:1", cacert=tmp_path / "missing.pem")


def test_a_ca_makes_every_endpoint_https() -> None:
    assert _endpoints.parse("a:1,http://b:2,https://c:3", https=True) == [
        "https://a:1",
        "https://b:2",
        "https://c:3",
    ]
    assert _endpoints.parse("a:1,https://c:3") == ["http://a:1", "https://c:3"]
