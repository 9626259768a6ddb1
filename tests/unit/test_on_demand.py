"""An on-demand test (marked `on_demand("ENV")`, tests/cluster/conftest.py) is deselected, not skipped,
while its variable is unset: CI's summary shows no skip for the fault suite's large `mixed` type.

Checked by collecting tests/cluster/test_faults.py in a fresh pytest (collection only: no cluster
starts) with ZONDA_FAULT_INJECTIONS unset and set."""

from __future__ import annotations

import os

from tests.tools import run_python

FAULTS = "tests/cluster/test_faults.py"


def collect(env: dict[str, str]) -> tuple[set[str], str]:
    """The fault types collected (their ids) and pytest's summary line."""
    result = run_python(["-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", FAULTS], env)
    lines = result.stdout.splitlines()
    ids = {line.rsplit("[", 1)[1].rstrip("]") for line in lines if line.startswith(FAULTS) and "[" in line}
    return ids, next(line for line in reversed(lines) if "collected" in line)


def test_the_mixed_fault_type_is_deselected_not_skipped_unless_injections_are_asked_for() -> None:
    unset = {k: v for k, v in os.environ.items() if k != "ZONDA_FAULT_INJECTIONS"}
    asked, _ = collect({**unset, "ZONDA_FAULT_INJECTIONS": "3"})
    assert {"mixed", "proxy", "pod-delete"} <= asked, "positive control: on demand, mixed is collected"
    ci, summary = collect(unset)
    assert "mixed" not in ci
    assert ci == asked - {"mixed"}, "only the on-demand type is left out"
    assert "1 deselected" in summary, summary
