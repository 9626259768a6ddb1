"""Every call the controller makes of a custom timetable runs with its time limit, and one that raises
is named: a run's start (its manual data interval), a run's LatestOnlyOperator window, a Backfill's
dates, the DAG pass, and `zonda dags next-runs`. The object whose timetable failed gets a condition
and one Warning Event naming the class and the limit or the exception; the objects beside it go on.

Real: the reconcilers, the status writer, the pure core, `tests.faulty_timetables` (a timetable that
blocks until released, one that raises). Fake: the API (`FakeKube`), the executor.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import click
import pytest

from controller.cli.listings import upcoming_runs
from controller.kube import BACKFILLS, DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers import user_code
from controller.reconcilers.reconcilers import Reconcilers
from tests import faulty_timetables
from tests.unit.fake_world import NS, FakeExecutor, dag_body, run_body, settle
from zonda.resources.models import DagSpec, DagStatus

HANGING = "tests.faulty_timetables.HangingTimetable"
RAISING = "tests.faulty_timetables.RaisingTimetable"
LIMIT = 0.05
START = "2026-01-01T00:00:00Z"

#: (class, the condition's reason, what its message says)
FAULTS = {
    "hangs": (HANGING, "TimetableTimeout", f"did not answer within the controller's limit of {LIMIT:g} s"),
    "raises": (RAISING, "TimetableError", f"raised RuntimeError: {faulty_timetables.DOWN}"),
}
faults = pytest.mark.parametrize("fault", sorted(FAULTS))


@pytest.fixture(autouse=True)
def released() -> Iterator[None]:
    """Each test's hanging calls block until it ends; then their threads return (waited for: a thread
    still calling would block again on the next test's cleared `RELEASE`)."""
    faulty_timetables.RELEASE.clear()
    faulty_timetables.ENTERED.clear()
    yield
    faulty_timetables.RELEASE.set()
    for thread in threading.enumerate():
        if thread.name.startswith("user-code"):
            thread.join(timeout=30)
            assert not thread.is_alive(), f"{thread.name} did not return once released"


def reconcilers_with_limit(kube: FakeKube) -> Reconcilers:
    reconcilers = Reconcilers(kube, FakeExecutor())
    for each in (reconcilers.dags, reconcilers.runs, reconcilers.backfills):
        each.timetable_calls.limit_seconds = LIMIT
    return reconcilers


def condition(kube: FakeKube, plural: str, name: str, kind: str) -> dict[str, Any]:
    conds = (kube.objects[(plural, NS, name)].get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == kind), {})


def warnings_about(kube: FakeKube, name: str, reason: str) -> list[str]:
    return [e.message for e in kube.events if e.name == name and e.reason == reason and e.warning]


def told(kube: FakeKube, plural: str, name: str, kind: str, fault: str) -> None:
    """The object's `kind` condition is False with the fault's reason and words, and one Warning
    Event says the same."""
    class_path, reason, words = FAULTS[fault]
    cond = condition(kube, plural, name, kind)
    assert (cond.get("status"), cond.get("reason")) == ("False", reason), cond
    assert class_path in cond["message"] and words in cond["message"], cond["message"]
    events = warnings_about(kube, name, reason)
    assert len(events) == 1 and class_path in events[0] and words in events[0], events


def timetable(class_path: str) -> dict[str, Any]:
    return {"class": class_path, "params": {}}


@faults
def test_a_manual_run_whose_timetable_fails_waits_queued_and_says_why(fault: str) -> None:
    kube = FakeKube()
    reconcilers = reconcilers_with_limit(kube)
    class_path = FAULTS[fault][0]

    async def scenario() -> None:
        await kube.create_custom(
            DAGS, NS, dag_body("custom", timetable=timetable(class_path), startDate=START)
        )
        await kube.create_custom(DAGS, NS, dag_body("normal", schedule="@daily", startDate=START))
        manual = run_body("custom-manual-1", "custom")
        del manual["spec"]["logicalDate"]  # its interval is the timetable's infer_manual_data_interval
        await kube.create_custom(DAGRUNS, NS, manual)
        await kube.create_custom(DAGRUNS, NS, run_body("normal-manual-1", "normal"))
        wake = await reconcilers.reconcile("run", NS, "custom-manual-1")
        await reconcilers.reconcile("run", NS, "normal-manual-1")  # beside it: starts and launches
        await settle()
        told(kube, DAGRUNS, "custom-manual-1", "Ready", fault)
        status = kube.objects[(DAGRUNS, NS, "custom-manual-1")]["status"]
        assert status["state"] == "queued" and "dagSpec" not in status, "not started from a guess"
        assert wake is not None, "asked again later"
        normal = kube.objects[(DAGRUNS, NS, "normal-manual-1")]["status"]
        assert normal["taskInstances"]["extract"]["state"] == "queued", "the run beside it launched"

    asyncio.run(scenario())


def latest_only_dag(name: str, **spec: Any) -> dict[str, Any]:
    body = dag_body(name, **spec)
    body["spec"]["tasks"] = [
        {"id": "latest", "operator": "LatestOnlyOperator"},
        {
            "id": "after",
            "operator": "BashOperator",
            "args": {"bash_command": "true"},
            "dependsOn": ["latest"],
        },
        {"id": "beside", "operator": "BashOperator", "args": {"bash_command": "true"}},
    ]
    return body


def scheduled_run(name: str, dag: str) -> dict[str, Any]:
    """A run with its data interval given (as the DAG pass creates one): its start asks no timetable."""
    body = run_body(name, dag)
    body["spec"] |= {
        "runType": "scheduled",
        "dataInterval": {"start": "2026-01-01T00:00:00+00:00", "end": "2026-01-02T00:00:00+00:00"},
    }
    return body


@faults
def test_latest_only_waits_for_a_timetable_that_fails_and_the_rest_of_the_run_goes_on(fault: str) -> None:
    kube = FakeKube()
    reconcilers = reconcilers_with_limit(kube)
    class_path = FAULTS[fault][0]

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, latest_only_dag("custom", timetable=timetable(class_path)))
        await kube.create_custom(DAGS, NS, latest_only_dag("normal", schedule="@daily", startDate=START))
        await kube.create_custom(DAGRUNS, NS, scheduled_run("custom-1", "custom"))
        await kube.create_custom(DAGRUNS, NS, scheduled_run("normal-1", "normal"))
        wake = await reconcilers.reconcile("run", NS, "custom-1")
        await settle()
        told(kube, DAGRUNS, "custom-1", "Timetable", fault)
        tis = kube.objects[(DAGRUNS, NS, "custom-1")]["status"]["taskInstances"]
        assert tis["beside"]["state"] == "queued", "the task that needs no timetable launched"
        assert (tis["latest"]["state"], tis["after"]["state"]) == ("none", "none"), "LatestOnly waits"
        assert wake is not None
        await reconcilers.reconcile("run", NS, "custom-1")  # again: no second Event, no second thread
        await settle()
        assert len(warnings_about(kube, "custom-1", FAULTS[fault][1])) == 1
        # the positive control: Zonda's own timetable decides LatestOnly in the same pass
        await reconcilers.reconcile("run", NS, "normal-1")
        normal = kube.objects[(DAGRUNS, NS, "normal-1")]["status"]["taskInstances"]
        assert normal["latest"]["state"] == "success", normal["latest"]
        assert condition(kube, DAGRUNS, "normal-1", "Timetable") == {}

    asyncio.run(scenario())


def test_latest_only_is_decided_once_the_timetable_answers_again() -> None:
    kube = FakeKube()
    reconcilers = reconcilers_with_limit(kube)

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, latest_only_dag("custom", timetable=timetable(HANGING)))
        await kube.create_custom(DAGRUNS, NS, scheduled_run("custom-1", "custom"))
        await reconcilers.reconcile("run", NS, "custom-1")
        assert condition(kube, DAGRUNS, "custom-1", "Timetable")["status"] == "False"
        faulty_timetables.RELEASE.set()
        run = kube.objects[(DAGRUNS, NS, "custom-1")]
        await reconcilers.runs.timetable_calls.returned(user_code.key_of("run", run))
        await reconcilers.reconcile("run", NS, "custom-1")
        await settle()
        cond = condition(kube, DAGRUNS, "custom-1", "Timetable")
        assert (cond["status"], cond["reason"]) == ("True", "Answered")
        tis = kube.objects[(DAGRUNS, NS, "custom-1")]["status"]["taskInstances"]
        assert tis["latest"]["state"] == "success", tis["latest"]

    asyncio.run(scenario())


def backfill_body(name: str, dag: str) -> dict[str, Any]:
    spec = {"dagName": dag, "fromDate": "2026-01-01T00:00:00Z", "toDate": "2026-01-03T00:00:00Z"}
    return {"apiVersion": "zonda.dev/v1alpha1", "kind": "Backfill", "metadata": {"name": name}, "spec": spec}


@faults
def test_a_backfill_whose_timetable_fails_creates_nothing_and_says_why(fault: str) -> None:
    kube = FakeKube()
    reconcilers = reconcilers_with_limit(kube)
    class_path = FAULTS[fault][0]

    async def scenario() -> None:
        await kube.create_custom(
            DAGS, NS, dag_body("custom", timetable=timetable(class_path), startDate=START)
        )
        await kube.create_custom(DAGS, NS, dag_body("normal", schedule="@daily", startDate=START))
        await kube.create_custom(BACKFILLS, NS, backfill_body("bf-custom", "custom"))
        await kube.create_custom(BACKFILLS, NS, backfill_body("bf-normal", "normal"))
        wake = await reconcilers.reconcile("backfill", NS, "bf-custom")
        await reconcilers.reconcile("backfill", NS, "bf-normal")
        await reconcilers.reconcile("backfill", NS, "bf-custom")  # again: one Event, one thread
        await settle()
        told(kube, BACKFILLS, "bf-custom", "Ready", fault)
        assert wake is not None, "the dates are asked again later"
        runs = sorted(name for kind, _, name in kube.objects if kind == DAGRUNS)
        assert runs and all(name.startswith("bf-normal-") for name in runs), runs

    asyncio.run(scenario())


def test_the_dag_pass_names_a_timetable_that_raises_and_schedules_the_other_dags() -> None:
    kube = FakeKube()
    reconcilers = reconcilers_with_limit(kube)

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("custom", timetable=timetable(RAISING), startDate=START))
        await kube.create_custom(DAGS, NS, dag_body("normal", schedule="@daily", startDate=START))
        wake = await reconcilers.reconcile("dag", NS, "custom")
        await reconcilers.reconcile("dag", NS, "custom")
        await reconcilers.reconcile("dag", NS, "normal")
        await settle()
        told(kube, DAGS, "custom", "Ready", "raises")
        assert wake is not None
        runs = sorted(name for kind, _, name in kube.objects if kind == DAGRUNS)
        assert runs and all(name.startswith("normal-") for name in runs), runs

    asyncio.run(scenario())


@faults
def test_next_runs_ends_with_a_message_naming_the_timetable(fault: str) -> None:
    class_path, _, words = FAULTS[fault]
    raw = {"tasks": [{"id": "t", "operator": "EmptyOperator"}], "timetable": timetable(class_path)}
    raw["startDate"] = START
    spec = DagSpec.model_validate(raw)
    with pytest.raises(click.ClickException) as raised:
        upcoming_runs("custom", raw, spec, DagStatus(), 3, LIMIT)
    message = raised.value.message
    assert class_path in message and "no upcoming runs of custom listed" in message, message
    assert words.replace("the controller's", "this command's") in message, message


def test_a_backfill_created_again_under_its_name_is_asked_again_not_given_the_old_report() -> None:
    kube = FakeKube()
    reconcilers = reconcilers_with_limit(kube)

    async def scenario() -> None:
        await kube.create_custom(DAGS, NS, dag_body("hanging", timetable=timetable(HANGING), startDate=START))
        await kube.create_custom(DAGS, NS, dag_body("raising", timetable=timetable(RAISING), startDate=START))
        await kube.create_custom(BACKFILLS, NS, backfill_body("bf", "hanging"))
        await reconcilers.reconcile("backfill", NS, "bf")  # its call hangs on
        await kube.delete_custom(BACKFILLS, NS, "bf")
        await kube.create_custom(BACKFILLS, NS, backfill_body("bf", "raising"))
        await reconcilers.reconcile("backfill", NS, "bf")
        await settle()
        cond = condition(kube, BACKFILLS, "bf", "Ready")
        assert (cond["reason"], RAISING in cond["message"]) == ("TimetableError", True), cond

    asyncio.run(scenario())
