"""The cluster tier: tests against a real kube-apiserver + etcd, with kwok simulating nodes and pods.

What is real: the apiserver (RBAC on), etcd, kube-controller-manager (garbage collection, service
accounts), kube-scheduler, our CRDs. What is simulated: kubelets — kwok moves pods through their
phases following `controller/data/kwok-stages.yaml` (exit code and termination message from pod
annotations), so container images are never pulled or run.

The cluster comes from `controller.devtools.devcluster.connect_cluster`: the local control plane by default,
an existing cluster only with ZONDA_TEST_CLUSTER=existing, kind with ZONDA_TEST_CLUSTER=kind. If it
cannot start, every test here errors (never skips): CI must not pass without this tier.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controller.devtools.devcluster import Cluster, connect_cluster
from tests.cluster.zonda_processes import fresh_namespace


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    with connect_cluster() as running:
        yield running


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards (without waiting for it to finish)."""
    with fresh_namespace(cluster) as name:
        yield name
