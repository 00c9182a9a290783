"""The node tree: put, get, children, delete, versions, ephemeral nodes."""

from __future__ import annotations

import pytest

import raftlock


def test_put_get_children_delete(client: raftlock.Client, name: str) -> None:
    root = f"apps/{name}"
    created = client.put_node(f"{root}/config", b"v1")
    assert (created.path, created.data, created.version, created.ephemeral_owner) == (
        f"/{root}/config",
        b"v1",
        1,
        None,
    )
    updated = client.put_node(f"{root}/config", "v2", expected_version=1)
    assert (updated.data, updated.version, updated.create_revision) == (b"v2", 2, created.create_revision)
    assert updated.mod_revision > created.mod_revision
    assert client.get_node(f"/{root}/config") == updated
    assert client.children(root) == ["config"]

    with pytest.raises(raftlock.VersionMismatch):
        client.put_node(f"{root}/config", b"v3", expected_version=1)
    with pytest.raises(raftlock.VersionMismatch):
        client.put_node(f"{root}/config", b"v3", expected_version=0)  # must not exist
    with pytest.raises(raftlock.NotEmpty):
        client.delete_node(root)
    with pytest.raises(raftlock.VersionMismatch):
        client.delete_node(f"{root}/config", expected_version=1)

    client.delete_node(f"{root}/config", expected_version=2)
    with pytest.raises(raftlock.NotFound):
        client.get_node(f"{root}/config")
    assert client.children(root) == []
    assert client.get_node(f"{root}/config".rsplit("/", 1)[0], stale=True).data == b""


def test_sequential_and_ephemeral_nodes(client: raftlock.Client, name: str) -> None:
    root = f"queue/{name}"
    with client.session(ttl=5) as session:
        one = client.put_node(f"{root}/job-", b"1", sequential=True)
        two = client.put_node(f"{root}/job-", b"2", sequential=True, session=session)
        assert one.path < two.path and one.path.startswith(f"/{root}/job-")
        assert two.ephemeral_owner == session.id
        with pytest.raises(raftlock.EphemeralParent):
            client.put_node(f"{two.path}/child", b"")
        assert len(client.children(root)) == 2
    assert client.children(root) == [one.path.rsplit("/", 1)[1]]  # the ephemeral one went with its session
