"""Pools and task concurrency: `zonda.passes.pools.admit` (Airflow's `_executable_task_instances_to_queued`)
and the admission step of `decide`, with what other runs hold given as `Observation.concurrency`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pendulum
import pytest
import yaml

from tests.paths import REPO_ROOT
from tests.unit.pure_runs import Run, make_dag
from zonda import DAG
from zonda.authoring import manifests
from zonda.operators.bash import BashOperator
from zonda.passes import pools
from zonda.passes.decisions import AttemptPhase
from zonda.passes.pools import Candidate, Concurrency, PoolLimit, SlotHolder, admit
from zonda.resources import pool_models
from zonda.resources.models import TaskInstanceState, WeightRule
from zonda.resources.pool_models import PoolSpec
from zonda.specs.dags import DagInvalid, parse_dag_spec, resolve_dag

S = TaskInstanceState
DAY = datetime(2024, 1, 1, tzinfo=UTC)


def candidate(
    run: str,
    task: str,
    *,
    weight: int = 1,
    pool: str = "p",
    slots: int = 1,
    day: int = 0,
    dag: str = "d",
    **limits: int,
) -> Candidate:
    return Candidate(
        run=run,
        dag=dag,
        task_id=task,
        pool=pool,
        slots=slots,
        weight=weight,
        logical_date=DAY + timedelta(days=day),
        **limits,
    )


def holder(
    run: str, task: str, *, state: S = S.RUNNING, pool: str = "p", slots: int = 1, dag: str = "d"
) -> SlotHolder:
    return SlotHolder(run=run, dag=dag, task_id=task, pool=pool, slots=slots, state=state)


def admitted(admission: pools.Admission) -> list[tuple[str, str]]:
    return [c.key for c in admission.admitted]


# ----------------------------------------------------------------------------------- admit()


ORDERING = [
    pytest.param(
        [candidate("r1", "low", weight=1), candidate("r2", "high", weight=9)],
        1,
        [("r2", "high")],
        id="the heavier task instance takes the slot, whatever its run",
    ),
    pytest.param(
        [candidate("new", "t", day=2), candidate("old", "t", day=1)],
        1,
        [("old", "t")],
        id="at equal weight the older run (logical date) goes first",
    ),
    pytest.param(
        [candidate("r", "b"), candidate("r", "a")],
        2,
        [("r", "a"), ("r", "b")],
        id="at equal weight and run, task ids in order",
    ),
    pytest.param(
        [candidate("r", "t[10]"), candidate("r", "t[2]")],
        1,
        [("r", "t[2]")],
        id="mapped instances of a task in map index order",
    ),
    pytest.param(
        [candidate("r", "big", weight=9, slots=3), candidate("r", "small", weight=1)],
        2,
        [("r", "small")],
        id="one needing more slots than open is skipped; a smaller one fits",
    ),
]


@pytest.mark.parametrize(("candidates", "slots", "expected"), ORDERING)
def test_admission_order(candidates: list[Candidate], slots: int, expected: list[tuple[str, str]]) -> None:
    assert admitted(admit(candidates, [], {"p": PoolLimit(slots)})) == expected


def test_slots_held_by_queued_and_running_task_instances_are_not_open() -> None:
    holders = [holder("r0", "a", state=S.RUNNING), holder("r0", "b", state=S.QUEUED, slots=2)]
    admission = admit([candidate("r1", "c")], holders, {"p": PoolLimit(3)})
    assert admission.admitted == ()
    assert admission.reasons[("r1", "c")] == "Not scheduling since there are 0 open slots in pool p"


def test_a_task_instance_asking_more_slots_than_the_pool_has_says_so() -> None:
    admission = admit([candidate("r", "t", slots=5)], [], {"p": PoolLimit(4)})
    assert "requested pool slots (5) are greater than total pool slots: '4'" in admission.reasons[("r", "t")]


def test_slots_greater_than_one_are_counted() -> None:
    admission = admit(
        [
            candidate("r", "a", slots=2, weight=3),
            candidate("r", "b", slots=2, weight=2),
            candidate("r", "c", slots=1, weight=1),
        ],
        [],
        {"p": PoolLimit(3)},
    )
    assert admitted(admission) == [("r", "a"), ("r", "c")]
    assert "requires 2 slots but there are 1 open slots" in admission.reasons[("r", "b")]


@pytest.mark.parametrize(("include_deferred", "expected"), [(False, [("r1", "c")]), (True, [])])
def test_deferred_task_instances_hold_slots_only_with_include_deferred(
    include_deferred: bool, expected: list[tuple[str, str]]
) -> None:
    holders = [holder("r0", "a", state=S.DEFERRED)]
    admission = admit([candidate("r1", "c")], holders, {"p": PoolLimit(1, include_deferred)})
    assert admitted(admission) == expected


def test_an_unlimited_pool_admits_everything() -> None:
    many = [candidate(f"r{i}", "t", dag=f"d{i}") for i in range(200)]
    assert len(admit(many, [], {"p": PoolLimit(pool_models.UNLIMITED)}).admitted) == 200


def test_default_pool_has_128_slots_unless_a_pool_resource_says_otherwise() -> None:
    many = [candidate(f"r{i:03}", "t", dag=f"d{i}", pool="default-pool") for i in range(130)]
    assert len(admit(many, [], {}).admitted) == 128
    assert len(admit(many, [], {"default-pool": PoolLimit(2)}).admitted) == 2


def test_a_pool_that_does_not_exist_admits_nothing_and_says_which() -> None:
    admission = admit([candidate("r", "t", pool="gpu")], [], {})
    assert admission.reasons[("r", "t")].startswith(pools.MISSING_POOL + " 'gpu' does not exist")


def test_max_active_tis_per_dag_counts_every_run_of_the_dag() -> None:
    holders = [holder("r0", "t")]
    cands = [candidate("r1", "t", max_active_tis_per_dag=1), candidate("r1", "other")]
    admission = admit(cands, holders, {"p": PoolLimit(10)})
    assert admitted(admission) == [("r1", "other")]
    assert "task concurrency for this task has been reached" in admission.reasons[("r1", "t")]


def test_max_active_tis_per_dag_counts_mapped_instances_as_their_task() -> None:
    cands = [candidate("r1", f"t[{i}]", max_active_tis_per_dag=2) for i in range(4)]
    assert admitted(admit(cands, [holder("r0", "t[7]")], {"p": PoolLimit(10)})) == [("r1", "t[0]")]


def test_max_active_tis_per_dagrun_counts_within_one_run() -> None:
    cands = [
        candidate("r1", "t", max_active_tis_per_dagrun=1),
        candidate("r2", "t", max_active_tis_per_dagrun=1),
    ]
    assert len(admit(cands, [holder("r1", "t")], {"p": PoolLimit(10)}).admitted) == 1


def test_max_active_tasks_counts_the_dags_task_instances_in_every_pool() -> None:
    holders = [holder("r0", "a", pool="other")]
    admission = admit(
        [candidate("r1", "b", max_active_tasks=1)], holders, {"p": PoolLimit(5), "other": PoolLimit(5)}
    )
    assert "max_active_tasks limit of 1" in admission.reasons[("r1", "b")]


def test_pool_status_counts_like_airflows_slots_stats() -> None:
    holders = [
        holder("a", "1"),
        holder("a", "2", state=S.QUEUED, slots=2),
        holder("a", "3", state=S.DEFERRED),
        holder("a", "4", pool="elsewhere"),
    ]
    status = pools.pool_status(PoolLimit(5), holders, [candidate("b", "5", slots=3)], "p")
    assert (status.running_slots, status.queued_slots, status.deferred_slots) == (1, 2, 1)
    assert (status.occupied_slots, status.open_slots, status.scheduled_slots, status.used) == (3, 2, 3, "3/5")
    deferred_too = pools.pool_status(PoolLimit(5, include_deferred=True), holders, [], "p")
    assert (deferred_too.occupied_slots, deferred_too.open_slots) == (4, 1)


def test_airflow_pool_names_map_to_resource_names() -> None:
    assert pool_models.pool_resource_name("default_pool") == "default-pool"
    assert pool_models.pool_resource_name("GPU_Pool") == "gpu-pool"
    assert pool_models.pool_name_problem("a pool!") is not None


def test_a_task_naming_a_pool_no_resource_can_have_is_invalid() -> None:
    spec = parse_dag_spec({"tasks": [{"id": "t", "operator": "EmptyOperator", "pool": "my pool!"}]})
    with pytest.raises(DagInvalid, match="pool 'my pool!' cannot name a Pool resource"):
        resolve_dag("d", spec)


def test_tasks_resolve_pool_and_slots_from_default_args() -> None:
    spec = parse_dag_spec(
        {
            "defaultArgs": {"pool": "etl_pool", "poolSlots": 2, "maxActiveTisPerDag": 1},
            "tasks": [
                {"id": "a", "operator": "EmptyOperator"},
                {"id": "b", "operator": "EmptyOperator", "poolSlots": 3},
            ],
        }
    )
    dag = resolve_dag("d", spec)
    assert [(t.pool, t.pool_slots, t.max_active_tis_per_dag) for t in dag.tasks.values()] == [
        ("etl_pool", 2, 1),
        ("etl_pool", 3, 1),
    ]
    plain = resolve_dag("d", parse_dag_spec({"tasks": [{"id": "a", "operator": "EmptyOperator"}]}))
    assert plain.tasks["a"].pool == "default_pool" and plain.tasks["a"].pool_slots == 1


# ------------------------------------------------------------------------ decide's admission step


def test_decide_launches_only_what_the_pool_admits_and_says_why_the_rest_waits() -> None:
    run = Run(make_dag({"a": {"pool": "p"}, "b": {"pool": "p"}, "c": {"pool": "p"}}))
    elsewhere = Concurrency(pools={"p": PoolLimit(2)}, holders=(holder("other", "x"),))
    plan = run.step(concurrency=elsewhere)
    assert [launch.task_id for launch in plan.launches] == ["a"]
    assert run.ti("b").state is S.SCHEDULED
    assert run.ti("b").reason == "Not scheduling since there are 0 open slots in pool p"
    again = run.step(concurrency=elsewhere)
    assert again.launches == [] and again.status == run.plans[-2].status, "a second pass changes nothing"


def test_a_heavier_task_instance_of_another_run_goes_first_and_that_run_is_woken() -> None:
    run = Run(make_dag({"a": {"pool": "p", "priority_weight": 1, "weight_rule": WeightRule.ABSOLUTE}}))
    heavy = candidate("other-run", "z", weight=50)
    plan = run.step(concurrency=Concurrency(pools={"p": PoolLimit(1)}, waiting=(heavy,)))
    assert plan.launches == []
    assert plan.runs_to_wake == ("other-run",)
    plan = run.step(concurrency=Concurrency(pools={"p": PoolLimit(2)}, waiting=(heavy,)))
    assert [launch.task_id for launch in plan.launches] == ["a"]


def test_a_missing_pool_leaves_the_task_scheduled_with_one_warning_event() -> None:
    run = Run(make_dag({"a": {"pool": "gpu_pool"}}))
    plan = run.step(concurrency=Concurrency())
    assert run.ti("a").state is S.SCHEDULED
    assert [e.reason for e in plan.events if e.warning] == ["PoolNotFound"]
    assert "'gpu-pool' does not exist" in (run.ti("a").reason or "")
    assert not [e for e in run.step(concurrency=Concurrency()).events if e.warning], "said once"


def test_a_finished_task_frees_its_slot_for_the_next_in_the_same_pass() -> None:
    run = Run(make_dag({"a": {"pool": "p", "pool_slots": 2}, "b": {"pool": "p", "pool_slots": 2}}))
    limits = Concurrency(pools={"p": PoolLimit(3)})
    first = run.step(concurrency=limits)
    assert [launch.task_id for launch in first.launches] == ["a"]
    done = run.step(run.attempt("a", AttemptPhase.SUCCEEDED), concurrency=limits)
    assert [launch.task_id for launch in done.launches] == ["b"]
    assert run.ti("a").state is S.SUCCESS and run.ti("b").state is S.QUEUED


def test_the_example_default_pool_is_airflows() -> None:
    example = yaml.safe_load((REPO_ROOT / "examples/pools/default-pool.yaml").read_text())
    assert example["metadata"]["name"] == pool_models.pool_resource_name(pool_models.DEFAULT_POOL)
    assert PoolSpec.model_validate(example["spec"]).slots == pool_models.DEFAULT_POOL_SLOTS


def test_a_python_dag_file_keeps_airflows_pool_arguments() -> None:
    with DAG("pooled", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
             default_args={"pool": "etl_pool"}) as built:  # fmt: skip
        BashOperator(task_id="t", bash_command="true", pool_slots=2, max_active_tis_per_dag=1,
                     priority_weight=5, weight_rule="absolute")  # fmt: skip
    spec = manifests.dag_manifest(built)["spec"]
    assert spec["defaultArgs"] == {"pool": "etl_pool"}
    task_fields = {k: v for k, v in spec["tasks"][0].items() if k not in ("id", "operator", "args")}
    assert task_fields == {
        "poolSlots": 2,
        "maxActiveTisPerDag": 1,
        "priorityWeight": 5,
        "weightRule": "absolute",
    }
    resolved = resolve_dag("pooled", parse_dag_spec(spec)).tasks["t"]
    assert (resolved.pool, resolved.pool_slots, resolved.max_active_tis_per_dag) == ("etl_pool", 2, 1)


# ----------------------------------------------------------------- slots held by other shards


def test_slots_held_elsewhere_count_against_the_pool() -> None:
    waiting = [candidate("r1", "a"), candidate("r1", "b"), candidate("r1", "c")]
    limits = {"p": PoolLimit(3)}
    assert admitted(admit(waiting, [], limits, {"p": 2})) == [("r1", "a")]
    assert admitted(admit(waiting, [holder("r0", "x")], limits, {"p": 2})) == []
    assert admitted(admit(waiting, [], {"p": PoolLimit(pool_models.UNLIMITED)}, {"p": 50})) == [
        ("r1", "a"),
        ("r1", "b"),
        ("r1", "c"),
    ]
    assert admitted(admit(waiting, [], limits, {"other": 9})) == admitted(admit(waiting, [], limits))


def test_slots_held_per_pool_follow_the_pools_deferred_rule() -> None:
    holders = [
        holder("r", "a", slots=2),
        holder("r", "b", state=S.QUEUED),
        holder("r", "c", state=S.DEFERRED),
        holder("r", "d", state=S.DEFERRED, pool="q"),
    ]
    assert pools.slots_held(holders, {"q": PoolLimit(4, include_deferred=True)}) == {"p": 3, "q": 1}


@pytest.mark.parametrize(
    ("declared", "observed", "served", "expected"),
    [
        pytest.param({1: {"p": 2}}, {}, [0], {"p": 2}, id="a shard's declared slots count"),
        pytest.param({0: {"p": 5}, 1: {"p": 2}}, {}, [0], {"p": 2}, id="the shards served are left out"),
        pytest.param(
            {1: {"p": 1}}, {1: {"p": 3}}, [0], {"p": 3}, id="a holder that died before declaring: observed"
        ),
        pytest.param(
            {1: {"p": 4}}, {1: {"p": 3}}, [0], {"p": 4}, id="declared before launching: ahead of the watch"
        ),
        pytest.param(
            {1: {"p": 1}, 2: {"p": 1, "q": 2}}, {3: {"q": 1}}, [0], {"p": 2, "q": 3}, id="summed over shards"
        ),
    ],
)
def test_slots_elsewhere_is_the_larger_of_declared_and_observed_per_shard(
    declared: dict[int, dict[str, int]],
    observed: dict[int, dict[str, int]],
    served: list[int],
    expected: dict[str, int],
) -> None:
    assert pools.slots_elsewhere(declared, observed, served) == expected
