"""The controller's garbage collector settings (`controller.processes.collector`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from controller.processes import collector


@pytest.fixture
def restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored")
def test_tune_collects_young_objects_less_often_and_freezes_what_start_up_built() -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0  # the positive control: nothing frozen before
    kept = [{"metadata": {"name": str(n)}} for n in range(1000)]
    collector.tune()
    assert gc.get_threshold() == collector.THRESHOLDS
    assert collector.THRESHOLDS[0] >= 50 * 700, "a young collection far less often than CPython's default"
    assert gc.get_freeze_count() >= len(kept), "what existed at start-up is out of every collection"
