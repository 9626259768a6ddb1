"""Callbacks and SLAs: which callback tries the controller launches (pure), and what the runner calls.

Real: `decide` and `plan_callbacks` over DAGs resolved from specs, pass after pass as the reconciler
drives them (status written back, the same observation replayed); the task runner's `run_task` in
process with importable callbacks (this module's functions) that record their calls; the DAG-file
compiler and loader for callbacks a DAG file defines.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.runner.task import run_task
from zonda.authoring import dag_files, manifests, rendering
from zonda.passes import callbacks, run_pass
from zonda.passes.callbacks import CallbackLaunch
from zonda.passes.decisions import AttemptPhase, Observation, ObservedAttempt
from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.invocations import CallbackRequest, MissedSla, TaskInvocation, TaskOutcome, TaskResult
from zonda.resources.models import DagRunState, DagSpec, TaskInstanceState
from zonda.resources.run_types import RunType
from zonda.specs.dags import ResolvedDag, resolve_dag

S = TaskInstanceState
LOGICAL_DATE = datetime(2024, 1, 1, tzinfo=UTC)
INTERVAL_END = LOGICAL_DATE + timedelta(days=1)
RUN = "etl-scheduled-20240101"
HERE = "tests.unit.zonda.passes.test_callbacks"

#: What the callbacks below were called with, in order.
CALLS: list[tuple[str, Any]] = []


def on_execute(context: Any) -> None:
    CALLS.append(("execute", (context,)))


def on_success(context: Any) -> None:
    CALLS.append(("success", (context,)))


def on_failure(context: Any) -> None:
    CALLS.append(("failure", (context,)))


def on_retry(context: Any) -> None:
    CALLS.append(("retry", (context,)))


def on_skipped(context: Any) -> None:
    CALLS.append(("skipped", (context,)))


def on_dag(context: Any) -> None:
    CALLS.append(("dag", (context,)))


def on_sla(*args: Any) -> None:
    CALLS.append(("sla", args))


def pre_hook(context: Any) -> None:
    CALLS.append(("pre_execute", (context,)))


def post_hook(context: Any, result: Any) -> Any:
    """A generator, as a TaskFlow callable may be: its `Metadata` sets the outlet's event extra."""
    from zonda.authoring.assets import Asset, Metadata

    CALLS.append(("post_execute", (context, result)))
    yield Metadata(Asset("s3://hooks/out"), {"result": result})


def broken_callback(context: Any) -> None:
    raise RuntimeError("the callback broke")


def boom() -> None:
    raise ValueError("the task broke")


def skip_me() -> None:
    from zonda.exceptions import AirflowSkipException

    raise AirflowSkipException("nothing to do")


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    CALLS.clear()


def dag_of(tasks: list[dict[str, Any]], **spec: Any) -> ResolvedDag:
    return resolve_dag("etl", DagSpec.model_validate({"tasks": tasks, **spec}))


@dataclass
class Driver:
    """A run driven pass by pass as the reconciler drives it: decide, then plan_callbacks, then write."""

    dag: ResolvedDag
    run_type: RunType = RunType.SCHEDULED
    now: datetime = INTERVAL_END + timedelta(minutes=1)
    status: DagRunStatus = field(
        default_factory=lambda: DagRunStatus(
            logical_date=LOGICAL_DATE, data_interval_start=LOGICAL_DATE, data_interval_end=INTERVAL_END
        )
    )
    launched: list[CallbackLaunch] = field(default_factory=list)

    def step(
        self,
        *attempts: ObservedAttempt,
        after: timedelta = timedelta(0),
        callback_tries: dict[str, ObservedAttempt] | None = None,
    ) -> callbacks.CallbackPlan:
        self.now += after
        observed = Observation(attempts={a.task_id: a for a in attempts})
        plan = run_pass.decide(
            self.dag,
            run_name=RUN,
            run_type=self.run_type,
            status=self.status,
            observed=observed,
            now=self.now,
        )
        due = callbacks.plan_callbacks(
            self.dag,
            run_name=RUN,
            run_type=self.run_type,
            before=self.status,
            after=plan.status,
            observed=observed,
            callback_attempts=callback_tries or {},
            now=self.now,
        )
        self.status = due.status
        self.launched.extend(due.launches)
        return due

    def replay_crashed_pass(self, before: DagRunStatus, *attempts: ObservedAttempt) -> callbacks.CallbackPlan:
        """The controller died after launching but before writing: the next pass starts from `before`."""
        self.status = before
        return self.step(*attempts)

    def attempt(
        self, task_id: str, phase: AttemptPhase, outcome: TaskOutcome | None = None
    ) -> ObservedAttempt:
        ti = self.status.task_instances[task_id]
        assert ti.pod_name is not None
        result = TaskResult(outcome=outcome) if outcome is not None else None
        return ObservedAttempt(
            task_id=task_id,
            try_number=ti.try_number,
            name=ti.pod_name,
            phase=phase,
            result=result,
            started_at=ti.queued_at,
            finished_at=self.now if phase is not AttemptPhase.RUNNING else None,
        )

    def kinds(self) -> list[tuple[str, str, int]]:
        return [(launch.request.kind, launch.task_id, launch.try_number) for launch in self.launched]


# ------------------------------------------------------------- task failures the runner could not report


def test_a_zombie_gets_its_failure_callback_launched_once_even_when_the_pass_is_replayed() -> None:
    dag = dag_of(
        [
            {
                "id": "load",
                "operator": "BashOperator",
                "args": {"bash_command": "true"},
                "onFailureCallback": [f"{HERE}:on_failure"],
            }
        ]
    )
    run = Driver(dag)
    run.step()
    run.step(run.attempt("load", AttemptPhase.RUNNING))
    before = run.status
    zombie = ObservedAttempt(
        task_id="load",
        try_number=1,
        name=before.task_instances["load"].pod_name or "",
        phase=AttemptPhase.MISSING,
        message="its pod no longer exists",
    )
    due = run.step(zombie)
    assert run.kinds() == [("on_failure_callback", "load", 1)]
    assert due.launches[0].request.message is not None and "pod" in due.launches[0].request.message
    assert [(r.kind, r.state) for r in run.status.callbacks] == [("on_failure_callback", "launched")]
    run.replay_crashed_pass(before, zombie)  # same name: the executor's launch is a no-op
    assert run.launched[0].name == run.launched[1].name
    run.step()  # the written status already holds the record: nothing new
    run.step()
    assert len({launch.name for launch in run.launched}) == 1 and len(run.status.callbacks) == 1


def test_a_zombie_with_retries_left_gets_its_retry_callback() -> None:
    dag = dag_of(
        [
            {
                "id": "load",
                "operator": "BashOperator",
                "args": {"bash_command": "true"},
                "retries": 1,
                "onRetryCallback": [f"{HERE}:on_retry"],
                "onFailureCallback": [f"{HERE}:on_failure"],
            }
        ]
    )
    run = Driver(dag)
    run.step()
    run.step(run.attempt("load", AttemptPhase.FAILED))  # exited without a result: nothing reported
    assert run.kinds() == [("on_retry_callback", "load", 1)]


def test_a_failure_the_runner_reported_has_had_its_callback_in_the_runner() -> None:
    dag = dag_of(
        [
            {
                "id": "load",
                "operator": "BashOperator",
                "args": {"bash_command": "false"},
                "onFailureCallback": [f"{HERE}:on_failure"],
            }
        ]
    )
    run = Driver(dag)
    run.step()
    run.step(run.attempt("load", AttemptPhase.FAILED, TaskOutcome.FAILED))
    assert run.status.task_instances["load"].state is S.FAILED and run.kinds() == []


def test_a_try_killed_by_sigterm_reports_a_failure_but_its_callback_is_the_controllers() -> None:
    dag = dag_of(
        [
            {
                "id": "load",
                "operator": "BashOperator",
                "args": {"bash_command": "sleep 99"},
                "onFailureCallback": [f"{HERE}:on_failure"],
            }
        ]
    )
    run = Driver(dag)
    run.step()
    ti = run.status.task_instances["load"]
    killed = ObservedAttempt(
        task_id="load",
        try_number=1,
        name=ti.pod_name or "",
        phase=AttemptPhase.FAILED,
        result=TaskResult(
            outcome=TaskOutcome.FAILED, message="Task received SIGTERM signal", terminated=True
        ),
    )
    run.step(killed)
    assert run.kinds() == [("on_failure_callback", "load", 1)]


def test_an_execution_timeout_kill_gets_the_failure_callback() -> None:
    dag = dag_of(
        [
            {
                "id": "load",
                "operator": "BashOperator",
                "args": {"bash_command": "sleep 99"},
                "executionTimeout": "1m",
                "onFailureCallback": [f"{HERE}:on_failure"],
            }
        ]
    )
    run = Driver(dag)
    run.step()
    run.step(run.attempt("load", AttemptPhase.RUNNING))
    run.step(run.attempt("load", AttemptPhase.RUNNING), after=timedelta(minutes=2))
    assert run.kinds() == [("on_failure_callback", "load", 1)]
    assert "execution_timeout" in (run.launched[0].request.message or "")


def test_a_task_without_the_callback_launches_nothing() -> None:
    run = Driver(dag_of([{"id": "load", "operator": "BashOperator", "args": {"bash_command": "true"}}]))
    run.step()
    run.step(run.attempt("load", AttemptPhase.FAILED))
    assert run.status.task_instances["load"].state is S.FAILED and run.kinds() == []


# ----------------------------------------------------------------------------------- DAG callbacks


def _two_tasks(**spec: Any) -> ResolvedDag:
    return dag_of(
        [
            {"id": "a", "operator": "BashOperator", "args": {"bash_command": "true"}},
            {"id": "b", "operator": "BashOperator", "args": {"bash_command": "true"}, "dependsOn": ["a"]},
        ],
        onSuccessCallback=[f"{HERE}:on_dag"],
        onFailureCallback=[f"{HERE}:on_dag"],
        **spec,
    )


@pytest.mark.parametrize(
    ("b_outcome", "kind", "reason"),
    [
        (TaskOutcome.SUCCESS, "dag_success", "success"),
        (TaskOutcome.FAILED, "dag_failure", "task_failure"),
    ],
)
def test_a_finished_run_calls_its_dag_callback_once_with_airflows_reason(
    b_outcome: TaskOutcome, kind: str, reason: str
) -> None:
    run = Driver(_two_tasks())
    run.step()
    run.step(run.attempt("a", AttemptPhase.SUCCEEDED, TaskOutcome.SUCCESS))
    before = run.status
    phase = AttemptPhase.SUCCEEDED if b_outcome is TaskOutcome.SUCCESS else AttemptPhase.FAILED
    last = run.attempt("b", phase, b_outcome)
    run.step(last)
    assert [(launch.request.kind, launch.request.reason, launch.task_id) for launch in run.launched] == [
        (kind, reason, "b")  # the context of the last task instance to end, as Airflow's get_last_ti
    ]
    run.replay_crashed_pass(before, last)
    run.step()
    assert len({launch.name for launch in run.launched}) == 1 and len(run.status.callbacks) == 1


def test_a_timed_out_run_says_timed_out() -> None:
    run = Driver(_two_tasks(dagrunTimeout="10m"))
    run.step()
    run.step(run.attempt("a", AttemptPhase.RUNNING), after=timedelta(minutes=11))
    assert run.status.state is DagRunState.FAILED
    assert [(launch.request.kind, launch.request.reason) for launch in run.launched] == [
        ("dag_failure", "timed_out")
    ]


def test_a_callback_tries_end_is_written_to_its_record_and_a_failed_one_warns() -> None:
    run = Driver(_two_tasks())
    run.step()
    run.step(run.attempt("a", AttemptPhase.SUCCEEDED, TaskOutcome.SUCCESS))
    run.step(run.attempt("b", AttemptPhase.SUCCEEDED, TaskOutcome.SUCCESS))
    name = run.launched[0].name
    failed = ObservedAttempt(
        task_id="b", try_number=1, name=name, phase=AttemptPhase.FAILED, message="exit 1"
    )
    due = run.step(callback_tries={name: failed})
    assert run.status.callbacks[0].state == "failed"
    assert [event.reason for event in due.events] == ["CallbackFailed"]
    assert run.step(callback_tries={name: failed}).events == []  # said once


# ------------------------------------------------------------------------------------------- SLAs


def _sla_dag(**spec: Any) -> ResolvedDag:
    return dag_of(
        [
            {"id": "slow", "operator": "BashOperator", "args": {"bash_command": "sleep 9"}, "sla": "1h"},
            {"id": "quick", "operator": "BashOperator", "args": {"bash_command": "true"}},
        ],
        slaMissCallback=[f"{HERE}:on_sla"],
        **spec,
    )


def test_the_controller_wakes_at_the_sla_deadline_and_records_a_miss_once() -> None:
    run = Driver(_sla_dag())
    due = run.step()
    deadline = INTERVAL_END + timedelta(hours=1)
    assert due.wake_at == deadline and due.new_sla_misses == []
    missed = run.step(run.attempt("slow", AttemptPhase.RUNNING), after=deadline - run.now)
    assert [miss.task_id for miss in run.status.sla_misses] == ["slow"]
    assert [
        (launch.request.kind, [m.task_id for m in launch.request.sla_misses]) for launch in run.launched
    ] == [("sla_miss", ["slow"])]
    assert run.launched[0].request.task_states["slow"] == "running"
    assert [event.reason for event in missed.events] == ["SlaMissed", "CallbackLaunched"]
    again = run.step(run.attempt("slow", AttemptPhase.RUNNING), after=timedelta(minutes=5))
    assert again.new_sla_misses == [] and again.wake_at is None and len(run.launched) == 1


def test_a_task_done_before_its_deadline_misses_nothing_and_a_late_one_misses_once_it_ends() -> None:
    run = Driver(_sla_dag())
    run.step()
    run.step(
        run.attempt("slow", AttemptPhase.SUCCEEDED, TaskOutcome.SUCCESS),
        run.attempt("quick", AttemptPhase.SUCCEEDED, TaskOutcome.SUCCESS),
        after=timedelta(minutes=5),
    )
    assert run.status.state is DagRunState.SUCCESS
    assert run.step(after=timedelta(hours=2)).new_sla_misses == [] and run.status.sla_misses == []
    late = Driver(_sla_dag())
    late.step()
    late.now += timedelta(hours=2)  # the attempts end (and are reported) after the deadline
    late.step(
        late.attempt("slow", AttemptPhase.SUCCEEDED, TaskOutcome.SUCCESS),
        late.attempt("quick", AttemptPhase.SUCCEEDED, TaskOutcome.SUCCESS),
    )
    assert [miss.task_id for miss in late.status.sla_misses] == ["slow"]


def test_manual_runs_have_no_sla() -> None:
    run = Driver(_sla_dag(), run_type=RunType.MANUAL)
    assert run.step().wake_at is None
    assert run.step(after=timedelta(hours=3)).new_sla_misses == []


# ------------------------------------------------------------------------------------------ runner


def _invocation(args: dict[str, Any], callbacks_: dict[str, list[str]], **extra: Any) -> TaskInvocation:
    extra.setdefault("try_number", 1)
    return TaskInvocation(
        dag_name="etl",
        run_name=RUN,
        run_type=RunType.SCHEDULED,
        task_id="t",
        operator="PythonOperator",
        args=args,
        logical_date=LOGICAL_DATE,
        data_interval_start=LOGICAL_DATE,
        data_interval_end=INTERVAL_END,
        callbacks=callbacks_,
        **extra,
    )


ALL = {
    kind: [f"{HERE}:on_{kind.split('_')[1]}"]
    for kind in (
        "on_execute_callback",
        "on_success_callback",
        "on_failure_callback",
        "on_retry_callback",
        "on_skipped_callback",
    )
}


@pytest.mark.parametrize(
    ("callable_", "try_number", "max_tries", "expected"),
    [
        ("builtins:print", 1, 0, ["execute", "success"]),
        (f"{HERE}:boom", 1, 1, ["execute", "retry"]),
        (f"{HERE}:boom", 2, 1, ["execute", "failure"]),
        (f"{HERE}:skip_me", 1, 0, ["execute", "skipped"]),
    ],
)
def test_the_runner_calls_the_tasks_callbacks_with_its_context(
    callable_: str, try_number: int, max_tries: int, expected: list[str]
) -> None:
    run_task(_invocation({"python_callable": callable_}, ALL, try_number=try_number, max_tries=max_tries))
    assert [kind for kind, _ in CALLS] == expected
    context = CALLS[-1][1][0]
    assert context["ti"].task_id == "t" and context["run_id"] == RUN
    if expected[-1] in ("retry", "failure"):
        assert isinstance(context["exception"], ValueError) and "the task broke" in str(context["exception"])


def test_a_broken_callback_is_logged_and_changes_no_outcome() -> None:
    result = run_task(
        _invocation(
            {"python_callable": "builtins:print"},
            {"on_success_callback": [f"{HERE}:broken_callback", f"{HERE}:on_success"]},
        )
    )
    assert result.outcome is TaskOutcome.SUCCESS and [kind for kind, _ in CALLS] == ["success"]


def test_a_callback_try_calls_only_its_callbacks_with_the_reason_or_the_sla_arguments() -> None:
    request = CallbackRequest(kind="dag_failure", callables=[f"{HERE}:on_dag"], reason="task_failure")
    result = run_task(_invocation({"python_callable": f"{HERE}:boom"}, ALL, callback=request))
    assert result.outcome is TaskOutcome.SUCCESS
    assert [kind for kind, _ in CALLS] == ["dag"] and CALLS[0][1][0]["reason"] == "task_failure"
    CALLS.clear()
    miss = MissedSla(task_id="t", deadline=INTERVAL_END, detected_at=INTERVAL_END)
    sla = CallbackRequest(
        kind="sla_miss",
        callables=[f"{HERE}:on_sla"],
        sla_misses=[miss],
        task_states={"t": "running", "u": "success"},
    )
    run_task(_invocation({"python_callable": "builtins:print"}, {}, callback=sla))
    dag, task_list, blocking_task_list, slas, blocking_tis = CALLS[0][1]
    assert dag.dag_id == "etl"
    assert task_list == blocking_task_list == f"t on {LOGICAL_DATE.isoformat()}"
    assert [s.task_id for s in slas] == ["t"] and [ti.task_id for ti in blocking_tis] == ["t"]
    broken = CallbackRequest(kind="dag_success", callables=[f"{HERE}:broken_callback"], reason="success")
    failed = run_task(_invocation({"python_callable": "builtins:print"}, {}, callback=broken))
    assert failed.outcome is TaskOutcome.FAILED_NO_RETRY and "the callback broke" in (failed.message or "")


# --------------------------------------------------------------------------------------- authoring


def test_callbacks_and_sla_compile_to_references_and_a_dag_files_own_are_loaded_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cbs.py").write_text(
        textwrap.dedent(f"""
        from datetime import timedelta
        import pendulum
        from zonda import DAG
        from zonda.operators.bash import BashOperator
        from {HERE} import on_dag, on_success

        def local_failure(context):
            return "local failure"

        with DAG("cbs", schedule="@daily", start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
                 on_success_callback=on_dag, on_failure_callback=[on_dag, lambda context: "dag lambda"],
                 sla_miss_callback=on_dag, default_args={{"on_retry_callback": local_failure}}) as dag:
            BashOperator(task_id="t", bash_command="true", sla=timedelta(minutes=30),
                         on_success_callback=on_success, on_failure_callback=[local_failure])
    """)
    )
    spec = rendering.render_paths([tmp_path], safe_mode=False).dags[0].manifest["spec"]
    assert spec["onSuccessCallback"] == [f"{HERE}:on_dag"] and spec["slaMissCallback"] == [f"{HERE}:on_dag"]
    assert spec["onFailureCallback"] == [
        f"{HERE}:on_dag",
        "dagfile:cbs.py?dag_id=cbs&dag_callback=on_failure_callback&index=1",
    ]
    assert spec["defaultArgs"]["onRetryCallback"] == [
        "dagfile:cbs.py?dag_id=cbs&default_arg=on_retry_callback&index=0"
    ]
    task = spec["tasks"][0]
    assert task["sla"] == "30m" and task["onSuccessCallback"] == [f"{HERE}:on_success"]
    assert task["onFailureCallback"] == [
        "dagfile:cbs.py?dag_id=cbs&task_id=t&callback=on_failure_callback&index=0"
    ]
    monkeypatch.setenv(dag_files.DAGS_FOLDER_ENV, str(tmp_path))
    assert dag_files.load_callback(spec["onFailureCallback"][1])({}) == "dag lambda"
    assert dag_files.load_callback(task["onFailureCallback"][0])({}) == "local failure"
    assert dag_files.load_callback(spec["defaultArgs"]["onRetryCallback"][0])({}) == "local failure"
    resolved = resolve_dag("cbs", DagSpec.model_validate(spec))
    assert resolved.tasks["t"].sla == timedelta(minutes=30)
    assert set(resolved.tasks["t"].callbacks) == {
        "on_success_callback",
        "on_failure_callback",
        "on_retry_callback",
    }


def test_a_nested_callback_outside_the_dags_folder_is_refused() -> None:
    from zonda import DAG
    from zonda.operators.bash import BashOperator

    with DAG("x", schedule=None, on_success_callback=lambda context: None) as built:
        BashOperator(task_id="t", bash_command="true")
    with pytest.raises(
        manifests.ManifestError, match=r"on_success_callback: .*<lambda>' is defined in a DAG file"
    ):
        manifests.dag_manifest(built)


# ---------------------------------------------------------------------------------- mapped tasks


def test_a_mapped_instance_gets_its_own_callback_and_the_sla_counts_every_instance() -> None:
    dag = dag_of(
        [
            {
                "id": "work",
                "operator": "BashOperator",
                "expand": {"kwargs": {"bash_command": ["true", "sleep 99"]}},
                "onFailureCallback": [f"{HERE}:on_failure"],
                "sla": "1h",
            }
        ],
        slaMissCallback=[f"{HERE}:on_sla"],
    )
    run = Driver(dag)
    run.step()
    assert set(run.status.task_instances) == {"work[0]", "work[1]"}
    done = run.attempt("work[0]", AttemptPhase.SUCCEEDED, TaskOutcome.SUCCESS)
    ti = run.status.task_instances["work[1]"]
    zombie = ObservedAttempt(
        task_id="work[1]", try_number=1, name=ti.pod_name or "", phase=AttemptPhase.MISSING, message="gone"
    )
    due = run.step(done, zombie)
    assert run.status.state is DagRunState.FAILED
    assert due.wake_at == INTERVAL_END + timedelta(hours=1)  # a failed instance misses at the deadline
    assert [(launch.request.kind, launch.task_id, launch.map_index) for launch in run.launched] == [
        ("on_failure_callback", "work", 1)
    ]
    assert run.status.callbacks[0].task_id == "work[1]"
    run.step(after=timedelta(hours=2))  # woken at the deadline: the mapped task missed its SLA, once
    assert [miss.task_id for miss in run.status.sla_misses] == ["work"]
    assert [launch.map_index for launch in run.launched if launch.request.kind == "sla_miss"] == [0]


def test_dags_test_runs_the_dag_callback_in_process_once(tmp_path: Path) -> None:
    from controller.devtools import dag_runs

    (tmp_path / "ends.py").write_text(
        textwrap.dedent(f"""
        import pendulum
        from zonda import DAG
        from zonda.operators.bash import BashOperator
        from {HERE} import on_dag, on_failure

        with DAG("ends", schedule=None, start_date=pendulum.datetime(2021, 1, 1, tz="UTC"),
                 on_failure_callback=on_dag) as dag:
            BashOperator(task_id="t", bash_command="exit 3", on_failure_callback=on_failure)
    """)
    )
    outcome = dag_runs.test_file(tmp_path / "ends.py")
    assert outcome.state == "failed"
    assert [kind for kind, _ in CALLS] == ["failure", "dag"]
    assert CALLS[1][1][0]["reason"] == "task_failure"
    assert [record.kind for record in outcome.status.callbacks] == ["dag_failure"]


def test_pre_and_post_execute_run_in_the_try_in_airflows_order_and_an_error_fails_it() -> None:
    """Airflow's `pre_execute`/`post_execute` arguments (`task_runner._execute_task`): the pre hook, the
    execute callback, the task, the post hook with its result (a generator's Metadata reported as the
    outlet's extra); unlike a callback, a hook's error fails the try."""
    hooks = {"pre_execute": [f"{HERE}:pre_hook"], "post_execute": [f"{HERE}:post_hook"]}
    result = run_task(
        _invocation(
            {"python_callable": "builtins:len", "op_args": ["abc"]},
            {**hooks, "on_execute_callback": [f"{HERE}:on_execute"]},
        )
    )
    assert result.outcome is TaskOutcome.SUCCESS
    assert [kind for kind, _ in CALLS] == ["pre_execute", "execute", "post_execute"]
    assert CALLS[-1][1][1] == 3, "post_execute gets the task's result"
    reported = result.xcoms["__zonda_outlet_events"]
    assert "s3://hooks/out" in str(reported) and "'result': 3" in str(reported), reported
    CALLS.clear()
    failed = run_task(
        _invocation({"python_callable": "builtins:print"}, {"pre_execute": [f"{HERE}:broken_callback"]})
    )
    assert failed.outcome is TaskOutcome.FAILED and "the callback broke" in (failed.message or "")
    assert CALLS == [], "a task whose pre_execute failed does not run"


def test_pre_and_post_execute_compile_to_references_no_longer_reported_unsupported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "hooks.py").write_text(
        textwrap.dedent(f"""
        import pendulum
        from zonda import DAG
        from zonda.operators.bash import BashOperator
        from {HERE} import pre_hook

        def local_post(context, result):
            return "local post"

        with DAG("hooks", schedule=None, start_date=pendulum.datetime(2021, 1, 1, tz="UTC")) as dag:
            BashOperator(task_id="t", bash_command="true", pre_execute=pre_hook, post_execute=local_post)
    """)
    )
    rendered = rendering.render_paths([tmp_path], safe_mode=False).dags[0]
    task = rendered.manifest["spec"]["tasks"][0]
    assert "pre_execute" not in rendered.unsupported and "post_execute" not in rendered.unsupported
    assert task["preExecute"] == [f"{HERE}:pre_hook"]
    assert task["postExecute"] == ["dagfile:hooks.py?dag_id=hooks&task_id=t&callback=post_execute&index=0"]
    monkeypatch.setenv(dag_files.DAGS_FOLDER_ENV, str(tmp_path))
    assert dag_files.load_callback(task["postExecute"][0])({}, None) == "local post"
    resolved = resolve_dag("hooks", DagSpec.model_validate(rendered.manifest["spec"]))
    assert set(resolved.tasks["t"].callbacks) == {"pre_execute", "post_execute"}
