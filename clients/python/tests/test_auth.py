"""Bearer tokens: a cluster started with ``raftlock up --auth`` refuses a
client without a token (401) or outside its grants (403), and shows
another principal's session without its id."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator, List

import pytest

from cluster import UpCluster, _reap, _start, binary, free_base_port, member_ports

import raftlock
from raftlock import _api


def new_token(directory: Path, name: str, allow: List[str]) -> str:
    """``raftlock token new``; returns the token, appends the block to auth.toml."""
    out = directory / f"{name}.token"
    args = [str(binary()), "token", "new", name, "--out", str(out)]
    for grant in allow:
        args += ["--allow", grant]
    block = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    with open(directory / "auth.toml", "a") as auth:
        auth.write(block)
    return out.read_text().strip()


class AuthCluster(UpCluster):
    """``raftlock up --auth auth.toml``."""

    def start(self, attempts: int = 5) -> AuthCluster:
        for attempt in range(attempts):
            base = free_base_port()
            self.endpoints = [f"http://127.0.0.1:{p}" for p in member_ports(base)[:3]]
            args = [str(binary()), "up", "--data-dir", str(self.dir / f"data-{attempt}")]
            args += ["--base-port", str(base), "--auth", str(self.dir / "auth.toml")]
            self.process = _start(args, self.dir / f"up-{attempt}.log")
            if self._wait_healthy([self.process]) is None:
                return self
            _reap(self.process, 0)
        raise RuntimeError(f"raftlock up --auth failed {attempts} times\n{self.logs()}")


@pytest.fixture
def tokens(tmp_path: Path) -> Iterator[tuple[AuthCluster, str, str]]:
    alice = new_token(tmp_path, "alice", ["shared/=read,lock"])
    bob = new_token(tmp_path, "bob", ["shared/=read,lock"])
    cluster = AuthCluster(tmp_path).start()
    try:
        yield cluster, alice, bob
    finally:
        cluster.stop()


def test_tokens_authenticate_and_isolate_sessions(
    tokens: tuple[AuthCluster, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, alice, bob = tokens
    monkeypatch.delenv("RAFTLOCK_TOKEN", raising=False)
    with raftlock.Client(cluster.endpoints, timeout=5) as anonymous:
        with pytest.raises(raftlock.Unauthorized) as refused:
            anonymous.lock("shared/x", timeout=1)
        assert refused.value.status == 401
    with raftlock.Client(cluster.endpoints, timeout=5, token=alice) as a:
        with pytest.raises(raftlock.Forbidden):
            a.lock("private/x", timeout=1)
        session = a.session(ttl=30)
        guard = session.lock("shared/x", timeout=5)
        mine = a.lock_state("shared/x")
        assert mine.holder is not None and mine.holder.session_id == session.id
        assert mine.holder.principal == "alice"
        # The token from the environment, as the CLI reads it.
        monkeypatch.setenv("RAFTLOCK_TOKEN", bob)
        with raftlock.Client(cluster.endpoints, timeout=5) as b:
            seen = b.lock_state("shared/x")
            assert seen.holder is not None and seen.holder.session_id is None
            assert seen.holder.principal == "alice"
            with pytest.raises(raftlock.Forbidden):
                b._call(_api.keepalive(session.id))
        guard.release()
        session.close()
