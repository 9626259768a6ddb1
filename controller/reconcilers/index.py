"""An in-memory index of DagRuns, fed by kopf's watch: the cross-run questions a reconcile asks.

dependsOnPast needs the previous run's task states, maxActiveTasks the task instances running in the
DAG's other runs, templates the previous successful run's interval: reading every run of the DAG from
the API on every pass would cost a list per task-instance change.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from zonda.passes import run_slots
from zonda.passes.pools import Candidate, SlotHolder
from zonda.resources import run_shards
from zonda.resources.models import DagRunState, DagSpec, TaskInstanceState
from zonda.resources.wire import parse_time
from zonda.specs.dags import DagInvalid, ResolvedDag, resolve_dag

logger = logging.getLogger(__name__)


@dataclass
class RunSummary:
    """What the controller remembers of each DagRun from its watch."""

    dag_name: str
    logical_date: datetime | None
    state: str | None
    data_interval: tuple[datetime, datetime] | None
    running_tasks: int
    ti_states: dict[str, str]
    #: Pool slots and concurrency: task instances queued, running or deferred, and those scheduled.
    holders: tuple[SlotHolder, ...] = ()
    waiting: tuple[Candidate, ...] = ()


@dataclass
class RunIndex:
    """DagRuns by (namespace, name).

    Pool admission must never see a run older than what the controller itself wrote, or it would
    count slots as free that a launch just took. So after a status write the reconciler `record`s
    the new body, and watch events (`update`) for that run are ignored until the watch delivers that
    write: a watch stream is ordered, so anything before it is older. (If the watch coalesces it
    away, the run's next reconcile records a fresh read again.)
    """

    runs: dict[tuple[str, str], RunSummary] = field(default_factory=dict)
    #: (namespace, name) -> resourceVersion of our status write the watch has not delivered yet.
    awaiting: dict[tuple[str, str], str] = field(default_factory=dict)
    #: (namespace, name) -> the run's uid and the DAG snapshot it started with, resolved (it never
    #: changes; a run made again under the name has a new uid, and its own snapshot replaces it).
    _dags: dict[tuple[str, str], tuple[str, ResolvedDag | None]] = field(default_factory=dict)
    #: (namespace, DAG) -> its runs' names, in the order `runs` holds them: `of_dag` (every run pass,
    #: every run state change) scanned all runs held, 16 % of the controller's busy loop with 1,000 DAGs
    #: holding 4,500 runs. Kept by `put` and `remove` (write `runs` through them).
    _names_of_dag: dict[tuple[str, str], dict[str, None]] = field(default_factory=dict)
    #: namespace -> the runs holding a pool slot or waiting for one (`occupying`). Kept by `put` and
    #: `remove` (write `runs` through them).
    _occupying: dict[str, dict[str, RunSummary]] = field(default_factory=dict)

    def update(self, body: Mapping[str, Any]) -> RunSummary | None:
        """Record the run's body from the watch; returns what was known of it before (None: new)."""
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        if key in self.awaiting:
            if meta.get("resourceVersion") != self.awaiting[key]:
                return self.runs.get(key)  # older than our own write
            del self.awaiting[key]
        return self._store(body)

    def reserve(self, body: Mapping[str, Any]) -> RunSummary | None:
        """Record the status a pass is about to launch and write, before it does: pool admission
        counts its launches from now on. Watch events are ignored until the pass `record`s what it
        wrote (a conflict or an error leaves the reservation, which only over-counts, until the
        run's next pass records a fresh read). Returns what was known before."""
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        self.awaiting[key] = _RESERVED
        return self._store(body)

    def record(self, body: Mapping[str, Any], written_version: str | None) -> RunSummary | None:
        """Record what a reconcile read and wrote (newer than any watch event still on its way)."""
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if written_version is None:
            self.awaiting.pop(key, None)
        else:
            self.awaiting[key] = written_version
        return self._store(body)

    def _store(self, body: Mapping[str, Any]) -> RunSummary | None:
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        status = body.get("status") or {}
        spec = body.get("spec") or {}
        tis = status.get("taskInstances") or {}
        previous = self.runs.get(key)
        if run_shards.is_summary(status) and previous is not None:
            # a big run as its watch delivers it: the summary without the task instances (they are in
            # its DagRunShards); what they say is kept from the last whole body (`record`, a pass's)
            running = status.get("state") == DagRunState.RUNNING.value
            self.put(key, dataclasses.replace(
                previous,
                state=status.get("state"),
                logical_date=parse_time(status.get("logicalDate")),
                holders=previous.holders if running else (),
                waiting=previous.waiting if running else (),
            ))  # fmt: skip
            return previous
        start, end = parse_time(status.get("dataIntervalStart")), parse_time(status.get("dataIntervalEnd"))
        summary = RunSummary(
            dag_name=spec.get("dagName", ""),
            logical_date=parse_time(status.get("logicalDate")),
            state=status.get("state"),
            data_interval=(start, end) if start and end else None,
            running_tasks=sum(1 for ti in tis.values() if ti.get("state") in ("queued", "running")),
            ti_states={tid: ti.get("state", "none") for tid, ti in tis.items()},
        )
        summary.holders, summary.waiting = self._slots(body, status, tis, summary.logical_date)
        self.put(key, summary)
        return previous

    def put(self, key: tuple[str, str], summary: RunSummary) -> None:
        """Hold `summary` for the run `key` (namespace, name), in `runs` and the indexes beside it."""
        previous = self.runs.get(key)
        self.runs[key] = summary
        if previous is not None and previous.dag_name != summary.dag_name:
            self._forget_name(key[0], previous.dag_name, key[1])
        self._names_of_dag.setdefault((key[0], summary.dag_name), {})[key[1]] = None
        occupying = self._occupying.setdefault(key[0], {})
        if summary.holders or summary.waiting:
            occupying[key[1]] = summary
        else:
            occupying.pop(key[1], None)

    def _forget_name(self, namespace: str, dag_name: str, name: str) -> None:
        names = self._names_of_dag.get((namespace, dag_name))
        if names is not None:
            names.pop(name, None)
            if not names:
                del self._names_of_dag[(namespace, dag_name)]

    def _slots(
        self,
        body: Mapping[str, Any],
        status: Mapping[str, Any],
        tis: Mapping[str, Any],
        logical_date: datetime | None,
    ) -> tuple[tuple[SlotHolder, ...], tuple[Candidate, ...]]:
        interesting = {tid: ti for tid, ti in tis.items() if ti.get("state") in _SLOT_STATES}
        if not interesting or status.get("state") != DagRunState.RUNNING.value:
            return (), ()
        meta = body["metadata"]
        dag = self._dag(
            (meta["namespace"], meta["name"], meta.get("uid", "")),
            (body.get("spec") or {}).get("dagName", ""),
            status.get("dagSpec"),
        )
        if dag is None:
            return (), ()
        parsed = {tid: TaskInstanceState(ti["state"]) for tid, ti in interesting.items()}
        return (
            run_slots.holders(dag, meta["name"], parsed),
            run_slots.candidates(
                dag,
                meta["name"],
                parsed,
                logical_date,
                max_tries={tid: ti.get("maxTries") for tid, ti in interesting.items()},
            ),
        )

    def _dag(self, key: tuple[str, str, str], dag_name: str, dag_spec: Any) -> ResolvedDag | None:
        namespace, name, uid = key
        kept = self._dags.get((namespace, name))
        if kept is not None and kept[0] == uid:
            return kept[1]
        resolved: ResolvedDag | None = None
        try:
            resolved = resolve_dag(dag_name, DagSpec.model_validate(dag_spec or {}))
        except (ValidationError, DagInvalid) as exc:
            logger.debug("run %s/%s: its DAG snapshot does not resolve: %s", namespace, name, exc)
        self._dags[(namespace, name)] = (uid, resolved)
        return resolved

    def remove(self, namespace: str, name: str) -> RunSummary | None:
        self.awaiting.pop((namespace, name), None)
        self._dags.pop((namespace, name), None)
        removed = self.runs.pop((namespace, name), None)
        self._occupying.get(namespace, {}).pop(name, None)
        if removed is not None:
            self._forget_name(namespace, removed.dag_name, name)
        return removed

    def in_namespace(self, namespace: str) -> dict[str, RunSummary]:
        return {name: s for (ns, name), s in self.runs.items() if ns == namespace}

    def occupying(self, namespace: str) -> dict[str, RunSummary]:
        """The runs of `namespace` that hold a pool slot or wait for one (holders or waiting): all
        that admission, a Pool's numbers and its wake-ups read. A copy. Every run pass asks, under
        the admission lock: selecting them from every run held (`in_namespace`) was 20 % of the
        controller's busy loop with 1,000 DAGs holding 3,000 finished runs."""
        return dict(self._occupying.get(namespace, {}))

    def of_dag(self, namespace: str, dag_name: str) -> dict[str, RunSummary]:
        names = self._names_of_dag.get((namespace, dag_name), {})
        return {name: self.runs[(namespace, name)] for name in names}

    def siblings(self, namespace: str, dag_name: str, run_name: str) -> dict[str, RunSummary]:
        """The DAG's other runs."""
        runs = self.of_dag(namespace, dag_name)
        runs.pop(run_name, None)
        return runs


#: Never a resourceVersion: a reserved run ignores every watch event until the pass records its write.
_RESERVED = "reserved by a pass in flight"
_SLOT_STATES = frozenset({"queued", "running", "deferred", "scheduled"})


def previous_states(
    siblings: Mapping[str, RunSummary], logical_date: datetime | None
) -> dict[str, TaskInstanceState] | None:
    """The task states of the run just before `logical_date` (dependsOnPast); None for the first run."""
    earlier = [s for s in siblings.values() if _before(s, logical_date)]
    if not earlier:
        return None
    previous = max(earlier, key=_logical_date)
    return {tid: TaskInstanceState(state) for tid, state in previous.ti_states.items()}


def previous_success(
    siblings: Mapping[str, RunSummary], logical_date: datetime | None
) -> tuple[datetime, datetime] | None:
    """The data interval of the latest successful run before `logical_date` (`prev_*_success` templates)."""
    done = [
        s
        for s in siblings.values()
        if s.state == DagRunState.SUCCESS.value and s.data_interval and _before(s, logical_date)
    ]
    return max(done, key=_logical_date).data_interval if done else None


def _before(summary: RunSummary, logical_date: datetime | None) -> bool:
    return (
        logical_date is not None and summary.logical_date is not None and summary.logical_date < logical_date
    )


def _logical_date(summary: RunSummary) -> datetime:
    assert summary.logical_date is not None
    return summary.logical_date
