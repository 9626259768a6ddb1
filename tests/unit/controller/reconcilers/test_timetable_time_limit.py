"""A custom timetable is a user's code in the controller: it runs with a time limit, and one that hangs
does not stop the passes of other DAGs (`controller.reconcilers.user_code`).

Real: the reconcilers, the status writer, the pure core, a timetable that blocks until released
(`tests.faulty_timetables`). Fake: the API (`FakeKube`).
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from controller.kube import DAGRUNS, DAGS
from controller.kube.fake import FakeKube
from controller.reconcilers import user_code
from controller.reconcilers.reconcilers import Reconcilers
from controller.reconcilers.user_code import BoundedCalls, TimeLimitExceeded
from tests import faulty_timetables
from tests.unit.fake_world import NS, FakeExecutor, dag_body, settle

HANGING = "tests.faulty_timetables.HangingTimetable"


def runs_of(kube: FakeKube, dag: str) -> list[str]:
    return sorted(n for kind, _, n in kube.objects if kind == DAGRUNS and n.startswith(f"{dag}-"))


def ready(kube: FakeKube, dag: str) -> dict[str, object]:
    conds = kube.objects[(DAGS, NS, dag)]["status"]["conditions"]
    return next(c for c in conds if c["type"] == "Ready")


def test_a_hanging_timetable_fails_its_dag_and_the_other_dags_are_scheduled() -> None:
    faulty_timetables.RELEASE.clear()
    faulty_timetables.CALLS.clear()
    kube = FakeKube()
    reconcilers = Reconcilers(kube, FakeExecutor())
    calls = reconcilers.dags.timetable_calls
    calls.limit_seconds = 0.05  # the call below never returns in time: it waits for RELEASE

    async def scenario() -> None:
        await kube.create_custom(
            DAGS,
            NS,
            dag_body("stuck", timetable={"class": HANGING, "params": {}}, startDate="2026-01-01T00:00:00Z"),
        )
        normal = dag_body("normal", schedule="@daily", startDate="2026-01-01T00:00:00Z")
        await kube.create_custom(DAGS, NS, normal)
        await reconcilers.reconcile("dag", NS, "stuck")
        assert faulty_timetables.ENTERED.is_set()
        cond = ready(kube, "stuck")
        assert (cond["status"], cond["reason"]) == ("False", "TimetableTimeout")
        assert HANGING in str(cond["message"]) and "0.05 s" in str(cond["message"])
        await settle()
        warnings = [e for e in kube.events if e.reason == "TimetableTimeout"]
        assert len(warnings) == 1 and warnings[0].warning and HANGING in warnings[0].message
        assert runs_of(kube, "stuck") == []

        await reconcilers.reconcile("dag", NS, "normal")  # the other DAG's pass runs and schedules
        assert runs_of(kube, "normal"), "a DAG beside the hanging one gets its runs"

        await reconcilers.reconcile("dag", NS, "stuck")  # the first call is still blocked
        assert len(faulty_timetables.CALLS) == 1, "no second thread while the first is still running"
        assert "still running" in str(ready(kube, "stuck")["message"])
        assert calls.overrunning() == 1

        faulty_timetables.RELEASE.set()
        await calls.returned(
            user_code.key_of("dag", kube.objects[(DAGS, NS, "stuck")])
        )  # the runaway thread returns once released
        assert calls.overrunning() == 0
        await reconcilers.reconcile("dag", NS, "stuck")
        assert runs_of(kube, "stuck"), "once the timetable answers in time the DAG schedules again"
        assert ready(kube, "stuck")["status"] == "True"
        await settle()

    try:
        asyncio.run(scenario())
    finally:
        faulty_timetables.RELEASE.set()


def test_a_bounded_call_returns_its_result_or_raises_its_error() -> None:
    def boom() -> int:
        raise RuntimeError("timetable bug")

    async def scenario() -> None:
        calls = BoundedCalls(limit_seconds=30)
        assert await calls.call("a", lambda: 42) == 42
        with pytest.raises(RuntimeError, match="timetable bug"):
            await calls.call("a", boom)
        assert calls.overrunning() == 0

    asyncio.run(scenario())


def test_a_call_past_its_limit_raises_and_holds_its_key_until_it_returns() -> None:
    import threading

    release = threading.Event()

    async def scenario() -> None:
        calls = BoundedCalls(limit_seconds=0.01)
        with pytest.raises(TimeLimitExceeded) as first:
            await calls.call("k", release.wait)
        assert not first.value.earlier
        with pytest.raises(TimeLimitExceeded) as again:
            await calls.call("k", lambda: True)
        assert again.value.earlier
        assert await calls.call("other", lambda: "free") == "free"
        release.set()
        await calls.returned("k")
        assert await calls.call("k", lambda: "back") == "back"

    try:
        asyncio.run(scenario())
    finally:
        release.set()


def test_a_call_that_spins_in_python_past_its_limit_is_stopped_in_its_thread() -> None:
    """A timetable that loops forever in Python gives its thread (and the interpreter lock) back
    `STOP_AFTER_SECONDS` after its limit; one waiting in C (the positive control: a lock) keeps it."""
    release = threading.Event()

    def spins() -> None:
        while not release.is_set():  # a user's loop that never ends
            pass

    async def scenario() -> tuple[int, int]:
        spinning, waiting = BoundedCalls(limit_seconds=0.1), BoundedCalls(limit_seconds=0.1)
        for calls, fn in ((spinning, spins), (waiting, release.wait)):
            with pytest.raises(TimeLimitExceeded):
                await calls.call("k", fn)
        assert spinning.overrunning() == 1 and waiting.overrunning() == 1
        await asyncio.wait_for(spinning.returned("k"), timeout=0.1 + user_code.STOP_AFTER_SECONDS + 10)
        return spinning.overrunning(), waiting.overrunning()

    try:
        assert asyncio.run(scenario()) == (0, 1)
    finally:
        release.set()
