"""The cluster tier: tests against a real kube-apiserver + etcd, with kwok simulating nodes and pods.

What is real: the apiserver (RBAC on), etcd, kube-controller-manager (garbage collection, service
accounts), kube-scheduler, our CRDs. What is simulated: kubelets — kwok moves pods through their
phases following `controller/data/kwok-stages.yaml` (exit code and termination message from pod
annotations), so container images are never pulled or run.

The cluster comes from `controller.devtools.devcluster.connect_cluster`: the local control plane by default,
an existing cluster only with ZONDA_TEST_CLUSTER=existing, kind with ZONDA_TEST_CLUSTER=kind. If it
cannot start, every test here errors (never skips): CI must not pass without this tier.
"""

# The `cluster` and `namespace` fixtures live in tests/conftest.py, so the cluster tier and the UI's
# browser tests (tests/ui) share one local control plane per session.

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.devtools import realnode
from controller.devtools.devcluster import Cluster, start_local_cluster

CLUSTER_TIER = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test of this tier needs the API, so every one gets the `cluster` marker (`-m cluster`,
    `-m "not cluster"` select by it); a hook in a sub-folder's conftest still sees the session's items.

    A test marked `on_demand("ENV_VAR")` is deselected, not skipped, while that variable is unset: a
    large on-demand size is not a test CI passes over (no "skipped" in its summary)."""
    deselected = [
        item
        for item in items
        if (mark := item.get_closest_marker("on_demand")) is not None and not os.environ.get(mark.args[0])
    ]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]
    for item in items:
        if CLUSTER_TIER in item.path.parents:
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="module")
def real_cluster() -> Iterator[Cluster]:
    """A local control plane with the real node (kubelet + containerd, Zonda's images loaded), one
    per module (one real node runs at a time: a module that starts its own must not wait on a
    session's). The kwok nodes stay schedulable, so tests steer their pods with the
    `zonda.dev/node: real` node selector. Stopping it must leave nothing behind."""
    cluster = start_local_cluster(real_node=True)
    node = cluster.real_node
    assert node is not None
    try:
        yield cluster
    finally:
        cluster.stop()
        left = realnode.leftovers(node)
        assert not left, f"the real node left these behind: {left}"
