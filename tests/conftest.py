"""Settings shared by every tier.

Shared fixtures: the local control plane (`cluster`) and a fresh `namespace`, for the cluster tier
and the browser tests alike (one control plane per session for both). They import the cluster tier's
code only when a test asks for them, so the unit tier never loads it.

Hypothesis: no per-example deadline (the 2-core CI machine runs cluster processes beside the unit
tests, so wall time per example says nothing), and under CI a derandomized search so a run is
reproducible from its commit; locally the search stays random so new counterexamples keep turning up.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from tests.tools import under_ci

if TYPE_CHECKING:
    from controller.devtools.devcluster import Cluster

settings.register_profile("zonda", deadline=None)
settings.register_profile("zonda-ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("zonda-ci" if under_ci() else "zonda")


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The real control plane of tests/cluster/conftest.py's docstring, started once per session."""
    from controller.devtools.devcluster import connect_cluster

    with connect_cluster() as running:
        yield running


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards (without waiting for it to finish)."""
    from tests.cluster.zonda_processes import fresh_namespace

    with fresh_namespace(cluster) as name:
        yield name
