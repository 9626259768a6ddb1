"""Airflow 3.3.2's own `example_hitl_operator.py`, unchanged, under the controller with a human answering.

Real: the apiserver, the controller (local executor: task-runner processes re-importing the file
from `$ZONDA_DAGS_FOLDER`), the triggerer (which fires `wait_for_default_option`'s one-second
response timeout with its default), and `zonda tasks respond` as a subprocess answering each
request. Each request is seen waiting (deferred, its reason naming the subject and the options)
before it is answered; the branch the answer chose runs and the others are skipped, read from the
apiserver.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from controller.devtools.devcluster import Cluster
from tests.airflow_examples import compare
from tests.cluster.zonda_processes import (
    controller,
    get,
    ti_states,
    trigger,
    triggerer,
    wait_for,
    wait_run_finished,
    zonda,
)

EXAMPLE = compare.AF3 / "dags" / "standard" / "example_hitl_operator.py"


def waiting(cluster: Cluster, namespace: str, run: str, task_id: str) -> dict[str, Any]:
    """The task instance once it waits for its answer (deferred, its Trigger created)."""

    def deferred() -> dict[str, Any] | None:
        ti = ((get(cluster, namespace, "dagrun", run).get("status") or {}).get("taskInstances") or {}).get(
            task_id
        )
        if not ti or ti.get("state") != "deferred" or not ti.get("triggerName"):
            return None
        found = cluster.kubectl("get", "trigger", ti["triggerName"], "-n", namespace, check=False)
        return ti if found.returncode == 0 else None

    result: dict[str, Any] = wait_for(deferred, f"{task_id} to wait for a response", timeout=120)
    return result


def respond(
    cluster: Cluster, namespace: str, run: str, task_id: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return zonda(cluster, "tasks", "respond", run, task_id, "-n", namespace, *args, check=False)


def test_a_human_answers_airflows_hitl_example_and_the_chosen_branch_runs(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / EXAMPLE.name)  # unchanged
    applied = zonda(cluster, "dags", "apply", str(folder), "--airflow-compat", "-n", namespace)
    assert "example-hitl-operator" in applied.stdout + applied.stderr
    with (
        controller(cluster, namespace, tmp_path, executor="local", env={"ZONDA_DAGS_FOLDER": str(folder)}),
        triggerer(cluster, namespace, tmp_path),
    ):
        run = trigger(cluster, namespace, "example-hitl-operator")
        option = waiting(cluster, namespace, run, "wait_for_option")
        assert "'Please choose one option to proceed:'" in option["reason"]
        assert "'option 1', 'option 2', 'option 3'" in option["reason"]
        assert f"zonda tasks respond {run} wait_for_option --option OPTION" in option["reason"]

        refused = respond(cluster, namespace, run, "wait_for_option", "--option", "option 9")
        assert refused.returncode != 0
        assert "'option 9' not offered: the options are 'option 1', 'option 2', 'option 3'" in refused.stderr

        waiting(cluster, namespace, run, "wait_for_input")
        waiting(cluster, namespace, run, "wait_for_multiple_options")
        for task_id, args in [
            ("wait_for_input", ["--option", "OK", "--param", "information=all good"]),
            ("wait_for_option", ["--option", "option 2"]),
            ("wait_for_multiple_options", ["--option", "option 4", "--option", "option 6"]),
        ]:
            answered = respond(cluster, namespace, run, task_id, *args)
            assert answered.returncode == 0, answered.stderr
        again = respond(cluster, namespace, run, "wait_for_option", "--option", "option 1")
        assert again.returncode != 0 and "cannot answer" in again.stderr, again.stderr

        approval = waiting(cluster, namespace, run, "valid_input_and_options")
        assert "'Are the following input and options valid?'" in approval["reason"]
        assert (
            respond(cluster, namespace, run, "valid_input_and_options", "--option", "Approve").returncode == 0
        )

        branch = waiting(cluster, namespace, run, "choose_a_branch_to_run")
        assert "'task_1', 'task_2', 'task_3'" in branch["reason"]
        chose = respond(cluster, namespace, run, "choose_a_branch_to_run", "--option", "task_2")
        assert chose.returncode == 0, chose.stderr
        body = wait_run_finished(cluster, namespace, run, timeout=120)

    assert ti_states(body) == {
        "wait_for_input": "success",
        "wait_for_option": "success",
        "wait_for_multiple_options": "success",
        "wait_for_default_option": "success",  # its one-second timeout chose its default
        "valid_input_and_options": "success",
        "choose_a_branch_to_run": "success",
        "task_1": "skipped",
        "task_2": "success",
        "task_3": "skipped",
    }
    assert body["status"]["state"] == "success"
    tis = body["status"]["taskInstances"]
    assert tis["wait_for_input"]["xcom"]["params_input"] == {"information": "all good"}
    assert tis["wait_for_multiple_options"]["xcom"]["chosen_options"] == ["option 4", "option 6"]
    assert tis["wait_for_default_option"]["xcom"]["chosen_options"] == ["option 7"]
    assert tis["wait_for_default_option"]["xcom"]["responded_by_user"] is None
    assert tis["choose_a_branch_to_run"]["xcom"] == ["task_2"]
    finished = respond(cluster, namespace, run, "choose_a_branch_to_run", "--option", "task_1")
    assert finished.returncode != 0 and "it is success, not waiting for a response" in finished.stderr
    reasons = cluster.kubectl("get", "events", "-n", namespace, "-o", "jsonpath={.items[*].reason}").stdout
    assert "TaskResponded" in reasons


UI_DAG = """
import pendulum
from airflow.providers.standard.operators.hitl import HITLBranchOperator
from airflow.sdk import DAG, task

with DAG("hitl_ui", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    choose = HITLBranchOperator(task_id="choose", subject="Which way?", options=["left", "right"],
                                params={"note": "none"})

    @task
    def left(): ...

    @task
    def right(): ...

    choose >> [left(), right()]
"""
#: The chart's `hitl-responder` Role (tests/unit/chart checks the chart grants exactly these).
RESPONDER_RULES = [
    {"apiGroups": ["zonda.dev"], "resources": ["dagruns", "triggers"], "verbs": ["get"]},
    {"apiGroups": ["zonda.dev"], "resources": ["triggers/status"], "verbs": ["patch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]},
]


async def test_the_uis_form_answers_as_the_viewer_and_rbac_decides_who_may(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from controller.kube import Kube
    from controller.ui.access import AuthMode
    from controller.ui.app_state import STORE, UiSettings
    from controller.ui.server import create_app
    from tests.cluster.test_ui_server import READ_RULES, Viewer, service_account_token, wait_until

    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "hitl_ui.py").write_text(UI_DAG)
    zonda(cluster, "dags", "apply", str(folder), "--airflow-compat", "-n", namespace)
    reader = service_account_token(cluster, namespace, "reader", READ_RULES)
    responder = service_account_token(cluster, namespace, "responder", [*READ_RULES, *RESPONDER_RULES])
    kube = await Kube.connect(str(cluster.kubeconfig), component="zonda-ui-test")
    settings = UiSettings(namespaces=[namespace], auth=AuthMode.TOKEN, state_dir=tmp_path / "state")
    client = TestClient(TestServer(create_app(kube, settings)))
    await client.start_server()
    try:
        viewers = {"reader": Viewer(client, reader), "responder": Viewer(client, responder)}
        with (
            controller(
                cluster, namespace, tmp_path, executor="local", env={"ZONDA_DAGS_FOLDER": str(folder)}
            ),
            triggerer(cluster, namespace, tmp_path),
        ):
            run = trigger(cluster, namespace, "hitl-ui")
            ti = waiting(cluster, namespace, run, "choose")

            def deferred_in_store() -> bool:
                body = client.app[STORE].runs.get((namespace, run)) or {}
                tis = (body.get("status") or {}).get("taskInstances") or {}
                return (tis.get("choose") or {}).get("state") == "deferred"

            await wait_until(deferred_in_store, "the waiting task in the UI's store")
            status, page = await viewers["responder"].get(f"/runs/{namespace}/{run}/tasks/choose")
            assert status == 200 and "Which way?" in page and 'id="hitl-form"' in page
            assert 'value="right"' in page and 'name="note"' in page

            url = f"/api/runs/{namespace}/{run}/tasks/choose/respond"
            status, refused = await viewers["reader"].post(url, {"options": ["right"], "params": {}})
            assert status == 403, refused
            assert "status" not in get(cluster, namespace, "trigger", ti["triggerName"])  # still waiting
            status, wrong = await viewers["responder"].post(url, {"options": ["up"], "params": {}})
            assert status == 409 and "'up' not offered" in wrong["error"], wrong
            status, answered = await viewers["responder"].post(
                url, {"options": ["right"], "params": {"note": "via the UI"}}
            )
            assert status == 200 and answered["chosen"] == ["right"], answered
            body = wait_run_finished(cluster, namespace, run, timeout=120)
    finally:
        await client.close()
        await kube.close()
    assert ti_states(body) == {"choose": "success", "left": "skipped", "right": "success"}
    assert body["status"]["taskInstances"]["choose"]["xcom"] == ["right"]
    notes = cluster.kubectl("get", "events", "-n", namespace, "-o", "jsonpath={.items[*].message}").stdout
    assert f"choose: answered 'right' by system:serviceaccount:{namespace}:responder" in notes
