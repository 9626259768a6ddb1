"""The unit tier: the pure core, and the adapters against the in-memory fake of the API.

Real here: every `zonda` function (pure, `now` passed in), the reconcilers, the work queue, the
executors' pod builder, the runner as a real subprocess, the CLI's click commands. Fake: the Kubernetes
API (`controller.kube.fake.FakeKube`; tests/cluster/test_fake_kube_contract.py runs the same scenarios
against it and a real apiserver) and, for reconciler tests, the executor (`tests.unit.fake_world`).

Shared builders: `tests.unit.pure_runs` (a DAG and a run driven pass by pass through `decide()`),
`tests.unit.fake_world` (the in-memory API and executor). Layout: one folder per package, mirroring
`zonda/` and `controller/`; `chart/` for the Helm chart's templates.
"""

from __future__ import annotations

import pytest

from controller.kube.fake import FakeKube
from controller.reconcilers.reconcilers import Reconcilers
from tests.unit.fake_world import FakeExecutor


@pytest.fixture
def world() -> tuple[FakeKube, FakeExecutor, Reconcilers]:
    """The in-memory API, a recording executor and the controller's reconcilers over them."""
    kube, executor = FakeKube(), FakeExecutor()
    return kube, executor, Reconcilers(kube, executor)
