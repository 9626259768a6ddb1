"""Setup and teardown tasks against Airflow 2.7's rules (all_done_setup_success, effective leaves)."""

from __future__ import annotations

import json
from pathlib import Path

import pendulum
import pytest

from controller.devtools import dag_runs
from tests.unit.pure_runs import make_dag, started
from zonda import DAG
from zonda.actions import clear_and_mark
from zonda.authoring import manifests
from zonda.operators.bash import BashOperator
from zonda.passes.trigger_rules import TriggerRuleOutcome, evaluate_trigger_rule
from zonda.resources.invocations import TaskOutcome
from zonda.resources.models import DagRunState
from zonda.resources.models import TaskInstanceState as S
from zonda.resources.models import TriggerRule as TR
from zonda.specs.dags import DagInvalid, ResolvedDag, parse_dag_spec, resolve_dag


def setup_work_teardown(*, on_failure_fail_dagrun: bool = False) -> ResolvedDag:
    teardown = {"is_teardown": True, "on_failure_fail_dagrun": on_failure_fail_dagrun}
    return make_dag({
        "create": {"is_setup": True},
        "work": {"upstream": ["create"]},
        "delete": {"upstream": ["create", "work"], "trigger_rule": TR.ALL_DONE_SETUP_SUCCESS, **teardown},
    })  # fmt: skip


def test_the_teardown_runs_when_the_work_fails_and_the_run_fails_for_the_work() -> None:
    run = started(setup_work_teardown())
    run.step(run.succeeded("create"))
    plan = run.step(run.failed("work"))
    assert [launch.task_id for launch in plan.launches] == ["delete"]
    run.step(run.succeeded("delete"))
    assert run.states() == {"create": "success", "work": "failed", "delete": "success"}
    assert run.status.state is DagRunState.FAILED


@pytest.mark.parametrize(("fail_dagrun", "state"), [
    pytest.param(False, DagRunState.SUCCESS, id="a failing teardown does not fail the run"),
    pytest.param(True, DagRunState.FAILED, id="unless on_failure_fail_dagrun"),
])  # fmt: skip
def test_a_teardowns_failure(fail_dagrun: bool, state: DagRunState) -> None:
    run = started(setup_work_teardown(on_failure_fail_dagrun=fail_dagrun))
    run.step(run.succeeded("create"))
    run.step(run.succeeded("work"))
    run.step(run.failed("delete"))
    assert run.states() == {"create": "success", "work": "success", "delete": "failed"}
    assert run.status.state is state


def test_a_failed_setup_fails_its_work_and_teardown_upstream() -> None:
    run = started(setup_work_teardown())
    run.step(run.failed("create"))
    assert run.states() == {"create": "failed", "work": "upstream_failed", "delete": "upstream_failed"}
    assert "at least one upstream setup task be successful" in (run.ti("delete").reason or "")
    assert run.status.state is DagRunState.FAILED


def test_a_skipped_setup_skips_its_teardown() -> None:
    run = started(setup_work_teardown())
    run.step(run.succeeded("create", outcome=TaskOutcome.SKIPPED))
    assert run.states() == {"create": "skipped", "work": "skipped", "delete": "skipped"}
    assert run.status.state is DagRunState.SUCCESS


@pytest.mark.parametrize(("setups", "outcome"), [
    pytest.param({"s1": S.SUCCESS, "s2": S.FAILED}, TriggerRuleOutcome.RUN, id="one setup succeeded: run"),
    pytest.param({"s1": S.FAILED, "s2": S.SKIPPED}, TriggerRuleOutcome.UPSTREAM_FAILED, id="none succeeded"),
    pytest.param({"s1": S.SKIPPED, "s2": S.SKIPPED}, TriggerRuleOutcome.SKIP, id="all skipped"),
    pytest.param({"s1": S.SUCCESS, "s2": S.RUNNING}, TriggerRuleOutcome.WAIT, id="waits for all upstream"),
])  # fmt: skip
def test_all_done_setup_success(setups: dict[str, S], outcome: TriggerRuleOutcome) -> None:
    states = {**setups, "work": S.FAILED}
    assert evaluate_trigger_rule(TR.ALL_DONE_SETUP_SUCCESS, states, ["s1", "s2"]).outcome is outcome


def test_without_setups_all_done_setup_success_is_all_done() -> None:
    assert evaluate_trigger_rule(TR.ALL_DONE_SETUP_SUCCESS, {"w": S.FAILED}).outcome is TriggerRuleOutcome.RUN


def test_as_setup_and_as_teardown_compile_with_the_shift_sugar() -> None:
    with DAG("st", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
        create = BashOperator(task_id="create", bash_command="echo").as_setup()
        work = BashOperator(task_id="work", bash_command="exit 1")
        delete = BashOperator(task_id="delete", bash_command="echo")
        create >> work >> delete.as_teardown(setups=create, on_failure_fail_dagrun=True)
    spec = manifests.dag_manifest(dag)["spec"]
    tasks = {t["id"]: t for t in spec["tasks"]}
    assert tasks["create"]["isSetup"] is True
    assert tasks["delete"] == {
        "id": "delete", "operator": "BashOperator", "args": {"bash_command": "echo"},
        "dependsOn": ["create", "work"], "isTeardown": True, "onFailureFailDagrun": True,
        "triggerRule": "all_done_setup_success",
    }  # fmt: skip
    resolved = resolve_dag("st", parse_dag_spec(json.loads(json.dumps(spec))))
    assert resolved.tasks["delete"].is_teardown and resolved.tasks["create"].is_setup


@pytest.mark.parametrize(("fields", "error"), [
    pytest.param({"isSetup": True, "isTeardown": True}, "both a setup and a teardown", id="both"),
    pytest.param({"onFailureFailDagrun": True}, "without being teardown", id="fail the run, not a teardown"),
])  # fmt: skip
def test_invalid_setup_teardown_fields_are_refused(fields: dict[str, bool], error: str) -> None:
    spec = {"tasks": [{"id": "t", "operator": "BashOperator", "args": {"bash_command": "echo"}, **fields}]}
    with pytest.raises(DagInvalid, match=error):
        resolve_dag("d", parse_dag_spec(spec))


def test_clearing_work_clears_its_setup_and_teardown() -> None:
    dag = make_dag({
        "create": {"is_setup": True},
        "work": {"upstream": ["create"]},
        "report": {"upstream": ["work"]},
        "delete": {"upstream": ["create", "work"], "is_teardown": True,
                   "trigger_rule": TR.ALL_DONE_SETUP_SUCCESS},
        "unrelated": {},
    })  # fmt: skip
    run = started(dag)
    run.finish_all()
    result = clear_and_mark.clear(run.dag, run.status, task_ids=["report"], now=run.now)
    assert result.changed == ("create", "report", "delete")
    for cleared, changed in [(["create"], ("create", "delete")), (["delete"], ("delete",))]:
        assert clear_and_mark.clear(run.dag, run.status, task_ids=cleared, now=run.now).changed == changed


DECORATED_DAG = """
import pendulum
from airflow.decorators import dag, setup, task, teardown
from airflow.exceptions import AirflowFailException


@dag(dag_id="decorated_st", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
def decorated_st():
    @setup
    def create():
        return "cluster-1"

    @task
    def work(name):
        raise AirflowFailException(f"work on {name} failed")

    @teardown
    def delete(name):
        print(f"deleting {name}")
        return f"deleted {name}"

    created = create()
    work(created) >> delete(created)


decorated_st()
"""


def test_setup_and_teardown_decorators_run_the_teardown_after_failed_work(tmp_path: Path) -> None:
    """Airflow's `@setup`/`@teardown` (an unchanged Airflow file), run in-process as `zonda dags test`."""
    (tmp_path / "decorated_st.py").write_text(DECORATED_DAG)
    outcome = dag_runs.test_file(tmp_path / "decorated_st.py", airflow_compat=True)
    assert outcome.task_states == {"create": "success", "work": "failed", "delete": "success"}
    assert outcome.xcoms["delete"] == "deleted cluster-1"
    assert outcome.state == "failed"  # the work failed; the teardown's success does not hide it
