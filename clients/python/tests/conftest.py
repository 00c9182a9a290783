"""Fixtures: one shared `raftlock up` cluster for the session, fresh ones
for tests that stop or kill members, and a client per test."""

from __future__ import annotations

import re
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helpers next to the tests

from cluster import ServeCluster, UpCluster  # noqa: E402

import raftlock  # noqa: E402


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    """A `raftlock up` cluster shared by every test that does not harm it."""
    up = UpCluster(tmp_path_factory.mktemp("up")).start()
    try:
        yield up
    finally:
        up.stop()


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[UpCluster]:
    """A `raftlock up` cluster of this test's own (it may stop it)."""
    up = UpCluster(tmp_path).start()
    try:
        yield up
    finally:
        up.stop()


@pytest.fixture
def serve_cluster(tmp_path: Path) -> Iterator[ServeCluster]:
    """Three separate `raftlock serve` members (a test may kill one)."""
    members = ServeCluster(tmp_path).start()
    try:
        yield members
    finally:
        members.stop()


@pytest.fixture
def client(cluster: UpCluster) -> Iterator[raftlock.Client]:
    with raftlock.Client(cluster.endpoints, timeout=5) as c:
        yield c


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A lock/election/node name no other test uses."""
    test = re.sub(r"[^A-Za-z0-9._:-]", "-", request.node.name)
    return f"t/{test}/{uuid.uuid4().hex[:8]}"
