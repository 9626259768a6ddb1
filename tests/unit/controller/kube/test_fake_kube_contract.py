"""FakeKube passes the Kubernetes API contract of `tests.kube_contract`, scenario by scenario.

tests/cluster/test_fake_kube_contract.py runs the same scenarios against a real apiserver: a
scenario passing there and failing here is a difference of FakeKube's to fix.
"""

from __future__ import annotations

import asyncio

import pytest

from controller.kube.fake import FakeKube
from tests.kube_contract import SCENARIOS, Scenario


@pytest.mark.parametrize("scenario", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_fake_kube_keeps_the_contract(scenario: Scenario) -> None:
    asyncio.run(scenario(FakeKube(keep_history=True), "contract"))
