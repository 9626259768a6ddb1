"""Airflow 3.3's retry policies: what each decides, and what the try and the pass do with it.

Expected behaviour comes from Airflow's code (task SDK 1.3.2, `airflow.sdk.definitions.retry_policy` and
`execution_time.task_runner._handle_current_task_failed`; `TaskInstance.next_retry_datetime` of
airflow-core 3.3.2): the first matching rule wins, an exception path that does not import matches
nothing, FAIL fails without the remaining retries, RETRY retries within `retries` after the rule's
delay counted from the try's end (no backoff), a policy that raises falls back to the task's retries,
`AirflowFailException` never reaches the policy.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from controller.runner import task as runner_task
from tests.airflow_examples import compare
from tests.unit.pure_runs import make_dag, started
from zonda.authoring import rendering
from zonda.passes.decisions import AttemptPhase
from zonda.resources.invocations import TaskInvocation, TaskOutcome, TaskResult
from zonda.resources.models import TaskInstanceState
from zonda.resources.run_types import RunType
from zonda.specs.dags import parse_dag_spec, resolve_dag
from zonda.tries.retry_policies import (
    ExceptionRetryPolicy,
    RetryAction,
    RetryDecision,
    RetryPolicy,
    RetryRule,
    load_retry_policy,
    policy_reference,
)

S = TaskInstanceState
EXAMPLE = compare.AF3 / "dags" / "core" / "example_retry_policy.py"

API_POLICY = ExceptionRetryPolicy(
    rules=[
        RetryRule(exception="json.JSONDecodeError", action=RetryAction.RETRY,
                  retry_delay=timedelta(minutes=5), reason="Rate limit, backing off"),
        RetryRule(exception="no_such_package.AuthError", action=RetryAction.FAIL),
        RetryRule(exception=ConnectionError, action=RetryAction.RETRY, retry_delay=timedelta(seconds=30)),
        RetryRule(exception=[KeyError, "builtins.IndexError"], action=RetryAction.FAIL, reason="bad input"),
    ]
)  # fmt: skip


class Boom(RetryPolicy):
    def evaluate(self, exception: BaseException, try_number: int, max_tries: int, context: Any = None) -> Any:
        raise RuntimeError("the policy itself broke")

    def serialize(self) -> dict[str, Any]:
        return {}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Boom:
        return cls()


def _decide(policy: RetryPolicy, error: BaseException) -> RetryDecision:
    return policy.evaluate(exception=error, try_number=1, max_tries=5)


def test_the_first_matching_rule_decides_with_its_delay_and_reason() -> None:
    import json

    decision = _decide(API_POLICY, json.JSONDecodeError("x", "doc", 0))  # a ValueError subclass
    assert decision == RetryDecision(RetryAction.RETRY, timedelta(minutes=5), "Rate limit, backing off")
    decision = _decide(API_POLICY, ConnectionResetError())  # subclasses match by default
    assert decision == RetryDecision(
        RetryAction.RETRY, timedelta(seconds=30), "Matched rule for ConnectionResetError"
    )
    assert _decide(API_POLICY, IndexError()).action is RetryAction.FAIL  # one of a rule's list
    assert _decide(API_POLICY, ValueError()) == RetryDecision(RetryAction.DEFAULT)  # no rule: the default


def test_exact_matching_and_a_policy_default() -> None:
    policy = ExceptionRetryPolicy(
        rules=[RetryRule(exception=ConnectionError, match_subclasses=False, action=RetryAction.FAIL)],
        default=RetryAction.RETRY,
    )
    assert _decide(policy, ConnectionError()).action is RetryAction.FAIL
    assert _decide(policy, ConnectionResetError()).action is RetryAction.RETRY


def test_a_rule_with_no_dotted_path_is_refused_as_airflows() -> None:
    with pytest.raises(ValueError, match="must be a dotted import path"):
        RetryRule(exception="ValueError")


def test_the_stored_form_is_airflows_serialize_and_loads_back() -> None:
    reference = policy_reference(API_POLICY)
    assert reference["class"] == "zonda.tries.retry_policies.ExceptionRetryPolicy"
    assert (
        reference["params"]["__type"] == "ExceptionRetryPolicy"
        and reference["params"]["default"] == "default"
    )
    assert reference["params"]["rules"][2] == {
        "exception": "builtins.ConnectionError", "action": "retry", "match_subclasses": True,
        "retry_delay": 30.0,
    }  # fmt: skip
    assert reference["params"]["rules"][3]["exception"] == ["builtins.KeyError", "builtins.IndexError"]
    loaded = load_retry_policy(reference)
    assert _decide(loaded, ConnectionAbortedError()).retry_delay == timedelta(seconds=30)
    assert policy_reference(loaded) == reference


def _invocation(policy: RetryPolicy | None) -> TaskInvocation:
    return TaskInvocation(
        dag_name="etl", run_name="manual-1", run_type=RunType.MANUAL, task_id="t", try_number=1, max_tries=3,
        logical_date=None, data_interval_start=None, data_interval_end=None,
        retry_policy=policy_reference(policy) if policy is not None else None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "error", "outcome", "delay"),
    [
        (API_POLICY, ConnectionRefusedError("refused"), TaskOutcome.FAILED, 30.0),
        (API_POLICY, KeyError("k"), TaskOutcome.FAILED_NO_RETRY, None),
        (API_POLICY, ValueError("v"), TaskOutcome.FAILED, None),  # DEFAULT: the task's own retries
        (Boom(), ConnectionError(), TaskOutcome.FAILED, None),  # the policy raised: the default
        (None, KeyError("k"), TaskOutcome.FAILED, None),
    ],
)
def test_the_runner_turns_the_decision_into_the_tries_result(
    policy: RetryPolicy | None, error: BaseException, outcome: TaskOutcome, delay: float | None
) -> None:
    result = runner_task._failed_result(_invocation(policy), error, None)
    assert (result.outcome, result.retry_delay_seconds) == (outcome, delay)


def test_a_fail_decision_says_the_policys_reason() -> None:
    result = runner_task._failed_result(_invocation(API_POLICY), KeyError("k"), None)
    assert result.message is not None and result.message.endswith("(retry policy: bad input)")


def _failed(delay: float | None) -> Any:
    result = TaskResult(outcome=TaskOutcome.FAILED, retry_delay_seconds=delay)
    return lambda run: run.attempt("t", AttemptPhase.FAILED, exit_code=1, result=result)


def test_a_retry_decisions_delay_counts_from_the_tries_end_without_backoff() -> None:
    run = started(make_dag({"t": {"retries": 3, "retry_delay": timedelta(minutes=5),
                                  "retry_exponential_backoff": True}}))  # fmt: skip
    run.step(_failed(30.0)(run))
    ti = run.ti("t")
    assert ti.state is S.UP_FOR_RETRY and ti.next_try_at == run.now + timedelta(seconds=30)
    run.step(after=timedelta(seconds=30))
    run.step(_failed(None)(run))  # no override: the task's own (backoff) delay
    assert run.ti("t").next_try_at != run.now + timedelta(seconds=30)


def test_a_retry_decision_cannot_go_past_the_tasks_retries() -> None:
    run = started(make_dag({"t": {"retries": 0}}))
    run.step(_failed(30.0)(run))
    assert run.ti("t").state is S.FAILED


def test_airflows_example_retry_policy_renders_its_policy() -> None:
    report = rendering.render_paths([EXAMPLE], airflow_compat=True)
    (dag,) = report.dags
    assert dag.manifest is not None, dag.errors
    resolved = resolve_dag(dag.dag_id, parse_dag_spec(dag.manifest["spec"]))
    policy_ref = resolved.tasks["call_external_api"].retry_policy
    assert policy_ref is not None
    policy = load_retry_policy(policy_ref.model_dump(mode="json", by_alias=True))
    assert _decide(policy, ConnectionError()) == RetryDecision(
        RetryAction.RETRY, timedelta(seconds=30), "Matched rule for ConnectionError"
    )
    assert resolved.tasks["call_external_api"].retries == 5


def test_a_policy_class_in_the_dag_file_or_without_serialize_fails_the_render(tmp_path: Any) -> None:
    (tmp_path / "policies.py").write_text(
        "from airflow.sdk import DAG, RetryPolicy, task\n"
        "from tests.unit.zonda.tries.test_retry_policies import Boom\n"
        "class InFile(Boom):\n"
        "    pass\n"
        "class Unserializable(RetryPolicy):\n"
        "    def evaluate(self, exception, try_number, max_tries, context=None):\n"
        "        return None\n"
        "with DAG('policies', schedule=None):\n"
        "    @task(retry_policy=InFile())\n"
        "    def a(): pass\n"
        "    @task(retry_policy=Unserializable())\n"
        "    def b(): pass\n"
        "    @task(retry_policy=Boom())\n"
        "    def c(): pass\n"
        "    a(); b(); c()\n"
    )
    (dag,) = rendering.render_paths([tmp_path / "policies.py"], airflow_compat=True).dags
    assert dag.manifest is None
    where = "must live in an importable module (the task runner imports it), not in a DAG file"
    assert sorted(dag.errors) == [
        f"retry policy class InFile {where}",
        f"retry policy class Unserializable {where}",
        "task 'b' retry_policy: Unserializable must implement serialize() (the task runner rebuilds the "
        "policy from it)",
    ]


def test_dags_test_fails_a_task_its_policy_fails_after_one_try(tmp_path: Any) -> None:
    from controller.devtools import dag_runs

    tries = tmp_path / "tries.txt"
    (tmp_path / "policy_dag.py").write_text(
        "from datetime import timedelta\n"
        "from airflow.sdk import DAG, ExceptionRetryPolicy, RetryAction, RetryRule, task\n"
        "POLICY = ExceptionRetryPolicy(rules=[RetryRule(exception=KeyError, action=RetryAction.FAIL)])\n"
        "with DAG('policy_dag', schedule=None):\n"
        "    @task(retries=2, retry_delay=timedelta(seconds=0), retry_policy=POLICY)\n"
        "    def fails():\n"
        f"        open({str(tries)!r}, 'a').write('try\\n')\n"
        "        raise KeyError('missing')\n"
        "    @task(retries=1, retry_delay=timedelta(seconds=0), retry_policy=POLICY)\n"
        "    def retried():\n"  # a ValueError matches no rule: the task's own retry, a positive control
        f"        open({str(tries)!r}, 'a').write('retried\\n')\n"
        "        raise ValueError('again')\n"
        "    fails(); retried()\n"
    )
    outcome = dag_runs.test_file(tmp_path / "policy_dag.py", airflow_compat=True)
    assert dict(outcome.task_states) == {"fails": "failed", "retried": "failed"}
    assert sorted(tries.read_text().split()) == ["retried", "retried", "try"]
