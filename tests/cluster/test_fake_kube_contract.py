"""The real apiserver passes the Kubernetes API contract of `tests.kube_contract`: what FakeKube must do.

Real: kube-apiserver, etcd, Zonda's CRDs, `controller.kube.client.Kube`. Each scenario gets its own
namespace; tests/unit/controller/kube/test_fake_kube_contract.py runs the same scenarios on FakeKube.
"""

from __future__ import annotations

import asyncio

import pytest

from controller.devtools.devcluster import Cluster
from controller.kube.client import Kube
from tests.kube_contract import SCENARIOS, Scenario


@pytest.mark.parametrize("scenario", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_the_apiserver_keeps_the_contract(cluster: Cluster, namespace: str, scenario: Scenario) -> None:
    async def run() -> None:
        async with await Kube.connect(str(cluster.kubeconfig), component="zonda-contract") as kube:
            await scenario(kube, namespace)

    asyncio.run(run())
