"""`zonda dags test` of an unchanged Airflow 3 file whose human-in-the-loop tasks time out: the real task
runner defers each to `HITLTrigger`, the in-process triggerer fires the defaults after the one-second
`response_timeout`, and each task resumes in `execute_complete` with them, as in Airflow. A default
"Reject" skips the approval's downstream; the notifiers and an `on_success_callback` notifier run."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from controller.devtools import dag_runs

DAG_FILE = """
import datetime
import pendulum
from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLBranchOperator, HITLOperator
from airflow.sdk import DAG, task
from airflow.sdk.bases.notifier import BaseNotifier


class Note(BaseNotifier):
    template_fields = ("message",)

    def __init__(self, message):
        self.message = message

    def notify(self, context):
        url = HITLOperator.generate_link_to_ui_from_context(context=context, base_url="http://ui:8080")
        print("NOTIFY", self.message, url)


second = datetime.timedelta(seconds=1)
with DAG("hitl_timeouts", start_date=pendulum.datetime(2021, 1, 1, tz="UTC"), schedule=None):
    pick = HITLOperator(
        task_id="pick", subject="Pick", options=["a", "b"], defaults="b", response_timeout=second,
        notifiers=[Note("{{ task.subject }} {{ task.options }}")],
    )
    approve = ApprovalOperator(
        task_id="approve", subject="{{ ti.xcom_pull(task_ids='pick')['chosen_options'] }}",
        defaults="Reject", response_timeout=second, on_success_callback=Note("{{ task.subject }}"),
    )
    branch = HITLBranchOperator(task_id="branch", subject="which", options=["x", "y"], defaults="y",
                                response_timeout=second)
    both = HITLBranchOperator(task_id="both", subject="which", options=["x2", "y2"], defaults="y2",
                              response_timeout=second)

    @task
    def x(): ...

    @task
    def y(): ...

    @task
    def x2(): ...

    @task
    def y2(): ...

    pick >> approve >> branch >> [x(), y()]
    pick >> both >> [x2(), y2()]
"""


def test_timed_out_requests_take_their_defaults(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "hitl_timeouts.py"
    path.write_text(textwrap.dedent(DAG_FILE))
    outcome = dag_runs.test_file(path, airflow_compat=True)
    assert dict(outcome.task_states) == {
        "pick": "success",
        "approve": "success",  # "Reject" by default: the approval succeeds and skips what follows it
        "branch": "skipped",
        "x": "skipped",
        "y": "skipped",
        "both": "success",
        "x2": "skipped",
        "y2": "success",  # the default branch
    }
    assert outcome.state == "success"
    out = capfd.readouterr().out
    link = "http://ui:8080/runs/default/hitl-timeouts-test/tasks/pick?map_index=-1"
    assert f"NOTIFY Pick ['a', 'b'] {link}" in out
    assert "NOTIFY ['b'] " in out  # the approval's success notifier, its subject rendered from pick's answer
