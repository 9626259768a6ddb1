"""`BackfillReconciler`: gather a Backfill, its DAG and the DAG's runs,
`zonda.schedules.backfills.plan_backfill`,
create the runs it asks for (deterministic names, 409 = created before), write the status.

It runs again whenever a run of its DAG starts or finishes (the controller keeps the DAG -> backfills
map from the Backfill watch), so a finished run makes room for the next one.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from controller.kube import BACKFILLS, DAGRUNS, DAGS, AlreadyExists, KubeApi
from controller.reconcilers import user_code
from controller.reconcilers.common import StatusWriter, parse_status
from controller.reconcilers.dags import run_ref
from controller.reconcilers.user_code import BoundedCalls
from zonda.resources.backfill_models import BackfillSpec, BackfillStatus
from zonda.resources.dagrun_models import DagRunSpec
from zonda.resources.models import API_VERSION, DagSpec
from zonda.resources.run_types import RunType
from zonda.resources.wire import LABEL_DAG, LABEL_RUN_TYPE, label_value
from zonda.schedules import backfills, dag_plans
from zonda.timetables.base import coerce_utc

logger = logging.getLogger(__name__)

#: On each of a backfill's runs: the backfill's name (the watch wakes the backfill when a run changes).
LABEL_BACKFILL = "zonda.dev/backfill"


#: Backfills whose dates are kept (`backfills.backfill_dates`), newest used last out.
KEPT_DATES = 64


@dataclass
class BackfillReconciler:
    kube: KubeApi
    writer: StatusWriter
    #: A range wholly in the past: its dates by (backfill uid, generation, DAG generation).
    kept_dates: OrderedDict[tuple[str, int, int], backfills.BackfillDates] = field(
        default_factory=OrderedDict
    )
    #: A custom timetable is user code: listing a backfill's dates runs with a time limit.
    timetable_calls: BoundedCalls = field(default_factory=BoundedCalls)

    plural = BACKFILLS

    async def reconcile_object(self, backfill: Mapping[str, Any], now: datetime) -> datetime | None:
        """One pass; nothing to wake for on a timer (run changes enqueue the backfill), unless its DAG's
        custom timetable did not list the dates (asked again after `TIMETABLE_RETRY`)."""
        namespace, name = backfill["metadata"]["namespace"], backfill["metadata"]["name"]
        old_status = parse_status(BackfillStatus, backfill.get("status"))
        spec = BackfillSpec.model_validate(backfill["spec"])  # the CRD schema has checked it
        dag = await self.kube.get_custom(DAGS, namespace, spec.dag_name)
        dag_spec = None
        if dag is not None:
            try:
                dag_spec = DagSpec.model_validate(dag["spec"])
            except ValidationError:
                dag_spec = None  # reported below as a missing DAG would be: the DAG's own status says why
        dates = None
        if (
            dag is not None
            and dag_spec is not None
            and coerce_utc(spec.from_date) <= coerce_utc(spec.to_date)
        ):
            listed = await self.dates(backfill, spec, dag, dag_spec, old_status, now)
            if isinstance(listed, backfills.BackfillPlan):  # the custom timetable did not list them
                return await self._act(backfill, listed, old_status)
            dates = listed
        runs = [
            run_ref(r)
            for r in await self.kube.list_custom(DAGRUNS, namespace)
            if (r.get("spec") or {}).get("dagName") == spec.dag_name
        ]
        plan = backfills.plan_backfill(
            name,
            spec,
            dag_spec,
            runs=runs,
            generation=backfill["metadata"].get("generation"),
            now=now,
            dates=dates,
        )
        return await self._act(backfill, backfills.listed_again(plan, old_status, now), old_status, spec)

    async def dates(
        self,
        backfill: Mapping[str, Any],
        spec: BackfillSpec,
        dag: Mapping[str, Any],
        dag_spec: DagSpec,
        old_status: BackfillStatus,
        now: datetime,
    ) -> backfills.BackfillDates | backfills.BackfillPlan:
        """The backfill's dates, listed once per spec and DAG generation when listing again could not
        change them (`backfills.dates_are_final`).

        A DAG's custom timetable lists them with the controller's time limit, in a thread of its own
        (`controller.reconcilers.user_code`); past the limit, or when it raises, the plan that says so on
        the Backfill is returned instead (the kept dates are read and written on the event loop only)."""
        meta = backfill["metadata"]
        key = (meta["uid"], meta.get("generation", 0), dag["metadata"].get("generation", 0))
        if (kept := self.kept_dates.get(key)) is not None:
            self.kept_dates.move_to_end(key)
            return kept

        def listed() -> backfills.BackfillDates:
            return backfills.backfill_dates(spec, dag_spec, now=now)

        class_path = dag_plans.timetable_class(dag.get("spec"))
        if class_path is None:
            dates = listed()
        else:
            key_of = user_code.key_of("backfill", backfill)
            answer = await self.timetable_calls.ask_timetable(key_of, class_path, listed)
            if isinstance(answer, dag_plans.TimetableFailure):
                if answer.error is not None:
                    where = f"{meta['namespace']}/{meta['name']}"
                    logger.warning("backfill %s: %s", where, answer.says("no runs"))
                generation = meta.get("generation")
                return backfills.timetable_failed(old_status, answer, generation=generation, now=now)
            dates = answer
        if backfills.dates_are_final(dates, spec, now=now):
            self.kept_dates[key] = dates
            while len(self.kept_dates) > KEPT_DATES:
                self.kept_dates.popitem(last=False)
        return dates

    async def _act(
        self,
        backfill: Mapping[str, Any],
        plan: backfills.BackfillPlan,
        old_status: BackfillStatus,
        spec: BackfillSpec | None = None,
    ) -> datetime | None:
        namespace = backfill["metadata"]["namespace"]
        for run in plan.to_create:
            assert spec is not None
            try:
                created = await self.kube.create_custom(DAGRUNS, namespace, backfill_run(backfill, spec, run))
            except AlreadyExists:
                continue  # created before a restart: exactly once by name
            self.writer.wrote(DAGRUNS, created)  # the DAG's passes count it (maxActiveRuns) at once
        new_wire = BackfillStatus.model_validate(plan.status.model_dump()).to_wire()
        if new_wire.get("state") != old_status.to_wire().get("state") or plan.to_create:
            for reason, message in plan.events:
                await self.kube.emit_event(backfill, reason=reason, message=message)
        for reason, message in plan.warnings:
            await self.kube.emit_event(backfill, reason=reason, message=message, warning=True)
        await self.writer.write_status(BACKFILLS, backfill, old_status.to_wire(), new_wire)
        return plan.wake_at


def backfill_run(
    backfill: Mapping[str, Any], spec: BackfillSpec, run: backfills.BackfillRun
) -> dict[str, Any]:
    """The DagRun body: run type backfill, labelled with its DAG and backfill (not owned by the
    backfill: deleting a backfill keeps the history of what it ran)."""
    meta = backfill["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": "DagRun",
        "metadata": {
            "name": run.name,
            "namespace": meta["namespace"],
            "labels": {
                LABEL_DAG: label_value(spec.dag_name),
                LABEL_RUN_TYPE: RunType.BACKFILL.value,
                LABEL_BACKFILL: label_value(meta["name"]),
            },
        },
        "spec": DagRunSpec(
            dag_name=spec.dag_name,
            run_type=RunType.BACKFILL,
            logical_date=run.logical_date,
            data_interval={"start": run.data_interval_start, "end": run.data_interval_end},
            conf=spec.conf,
        ).to_wire(),
    }
