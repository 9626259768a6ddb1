"""An Event Zonda posts about one of its objects (a DagRun, a DAG): what a pass or a DAG's plan says
happened, before `zonda.passes.events` decides which ones become Kubernetes Events."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunEvent:
    reason: str  # CamelCase, e.g. TaskSucceeded, TaskUpstreamFailed
    message: str
    warning: bool = False
