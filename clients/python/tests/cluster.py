"""Real raftlock clusters for the tests, on free loopback ports.

Two shapes:

- :class:`UpCluster` runs ``raftlock up`` (the one command a user runs):
  three members as its children, in a process group of their own so that
  every one of them can be killed at the end whatever happened.
- :class:`ServeCluster` runs three ``raftlock serve`` members separately,
  with the config ``raftlock up`` would write, for tests that kill one
  member: ``raftlock up`` stops the whole cluster when a member exits.

Nothing here sleeps to synchronise: start-up polls each member's health
until a deadline.
"""

from __future__ import annotations

import atexit
import os
import random
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

import httpx

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT = 60.0
"""Seconds for a cluster to become healthy (debug builds on a busy machine)."""

_running: Dict[int, subprocess.Popen[bytes]] = {}
"""Every process group started here, killed at exit as a last resort."""


def binary() -> Path:
    """``$RAFTLOCK_BIN``, else the workspace's debug build."""
    path = Path(os.environ.get("RAFTLOCK_BIN") or REPO / "target" / "debug" / "raftlock")
    if not path.is_file():
        raise RuntimeError(
            f"no raftlock binary at {path}: build it (cargo build -p raftlock-cli) or set RAFTLOCK_BIN"
        )
    return path


def _ephemeral_start() -> int:
    """First port of the kernel's ephemeral range: ports below it are only
    ever taken by an explicit bind, never by an outgoing connection."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def member_ports(base: int) -> List[int]:
    """``raftlock up``'s layout: API ports base..base+2, Raft ports 100
    above, ZooKeeper ports 200 above, etcd ports 300 above."""
    return [base + offset + i for offset in (0, 100, 200, 300) for i in range(3)]


def free_base_port() -> int:
    """A base port whose twelve member ports are all free right now. Another
    process may still take one before a member binds it; callers retry."""
    top = _ephemeral_start() - 310
    for _ in range(500):
        base = random.randrange(10_000, top)
        if all(_is_free(p) for p in member_ports(base)):
            return base
    raise RuntimeError("no free ports found below the ephemeral range")


def _start(args: List[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as one
        )
    _running[process.pid] = process
    return process


def _kill_group(process: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def _reap(process: subprocess.Popen[bytes], grace: float) -> None:
    """Waits for ``process`` up to ``grace`` seconds, then kills its group."""
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    _kill_group(process)
    process.wait()
    _running.pop(process.pid, None)


@atexit.register
def _kill_leftovers() -> None:
    for process in list(_running.values()):
        _kill_group(process)


def poll(condition: Callable[[], bool], timeout: float, what: str, every: float = 0.02) -> None:
    """Waits until ``condition()`` holds, checking every ``every`` seconds,
    failing after ``timeout``: the tests' only way to wait."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def tls_context(tls_dir: Optional[Path]) -> Union[ssl.SSLContext, bool]:
    """For the tests' own health checks: trust ``tls_dir/ca.pem`` and
    present ``client.pem`` (the files ``raftlock up --tls`` generates)."""
    if tls_dir is None:
        return True
    context = ssl.create_default_context(cafile=str(tls_dir / "ca.pem"))
    context.load_cert_chain(str(tls_dir / "client.pem"), str(tls_dir / "client-key.pem"))
    return context


def _healthy(endpoint: str, tls_dir: Optional[Path]) -> bool:
    try:
        verify = tls_context(tls_dir)
    except OSError:  # `raftlock up --tls` has not written its CA yet
        return False
    try:
        answer = httpx.get(f"{endpoint}/v1/health", timeout=1.0, verify=verify, trust_env=False)
        return answer.status_code == 200
    except httpx.HTTPError:
        return False


class Cluster:
    """What both shapes share: a directory, endpoints, logs."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.endpoints: List[str] = []
        self.tls_dir: Optional[Path] = None
        """Where the CA and certificates are, for a cluster serving HTTPS."""

    def logs(self, lines: int = 30) -> str:
        """The tail of every log, for failure messages."""
        out = []
        for log in sorted(self.dir.rglob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log}\n" + "\n".join(tail))
        return "\n".join(out)

    def _wait_healthy(self, processes: List[subprocess.Popen[bytes]]) -> Optional[str]:
        """None once every member is healthy; a reason if a process died."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            for process in processes:
                if process.poll() is not None:
                    return f"exited with {process.returncode}"
            if all(_healthy(e, self.tls_dir) for e in self.endpoints):
                return None
            time.sleep(0.05)
        raise RuntimeError(f"cluster not healthy within {START_TIMEOUT:g} s\n{self.logs()}")


class UpCluster(Cluster):
    """``raftlock up --data-dir DIR --base-port PORT`` (``--tls`` with ``tls``)."""

    def __init__(self, directory: Path, tls: bool = False) -> None:
        super().__init__(directory)
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.tls = tls

    def start(self, attempts: int = 5) -> UpCluster:
        scheme = "https" if self.tls else "http"
        for attempt in range(attempts):
            base = free_base_port()
            self.endpoints = [f"{scheme}://127.0.0.1:{p}" for p in member_ports(base)[:3]]
            data = self.dir / f"data-{attempt}"
            args = [str(binary()), "up", "--data-dir", str(data), "--base-port", str(base)]
            if self.tls:
                args.append("--tls")
                self.tls_dir = data / "tls"
            self.process = _start(args, self.dir / f"up-{attempt}.log")
            died = self._wait_healthy([self.process])
            if died is None:
                return self
            _reap(self.process, 0)
            # Most likely a port taken between the check and the bind: retry.
        raise RuntimeError(f"raftlock up failed {attempts} times\n{self.logs()}")

    def stop(self) -> None:
        """Stops the cluster as Ctrl-C would (SIGTERM), then makes sure."""
        if self.process is not None:
            self.process.terminate()  # `raftlock up` stops its members
            _reap(self.process, 15.0)


class ServeCluster(Cluster):
    """Three ``raftlock serve`` members, each killable on its own. With
    ``tls_dir`` (certificates as ``raftlock up --tls`` makes them) they
    serve HTTPS, asking clients for a certificate as ``client_auth`` says."""

    def __init__(self, directory: Path, tls_dir: Optional[Path] = None, client_auth: str = "none") -> None:
        super().__init__(directory)
        self.config = directory / "cluster.toml"
        self.members: Dict[int, subprocess.Popen[bytes]] = {}
        self.tls_dir = tls_dir
        self.client_auth = client_auth

    def start(self, attempts: int = 5) -> ServeCluster:
        scheme = "https" if self.tls_dir else "http"
        for attempt in range(attempts):
            base = free_base_port()
            ports = member_ports(base)
            self.endpoints = [f"{scheme}://127.0.0.1:{p}" for p in ports[:3]]
            self._write_config(attempt, ports)
            for member in (1, 2, 3):
                self.start_member(member)
            died = self._wait_healthy(list(self.members.values()))
            if died is None:
                return self
            self.stop()
        raise RuntimeError(f"raftlock serve failed {attempts} times\n{self.logs()}")

    def _write_config(self, attempt: int, ports: List[int]) -> None:
        text = f'[cluster]\ndata_dir = "data-{attempt}"\n'
        if self.tls_dir is not None:
            tls = self.tls_dir.resolve()
            text += (
                f'\n[tls]\nca = "{tls / "ca.pem"}"\ncert = "{tls / "member.pem"}"\n'
                f'key = "{tls / "member-key.pem"}"\nclient_auth = "{self.client_auth}"\n'
            )
        for i in range(3):
            text += (
                f"\n[[members]]\nid = {i + 1}\n"
                f'api_addr = "127.0.0.1:{ports[i]}"\nraft_addr = "127.0.0.1:{ports[3 + i]}"\n'
            )
        self.config.write_text(text)

    def start_member(self, member: int) -> None:
        self.members[member] = _start(
            [str(binary()), "serve", "--config", str(self.config), "--id", str(member)],
            self.dir / f"member-{member}.log",
        )

    def kill(self, member: int) -> None:
        """kill -9: no shutdown path runs."""
        process = self.members.pop(member)
        _kill_group(process)
        _reap(process, 0)

    def stop(self) -> None:
        for member in list(self.members):
            self.kill(member)
