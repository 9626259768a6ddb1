"""Setup/teardown through the real apiserver (which validates the fields) and a local-executor controller."""

from __future__ import annotations

from pathlib import Path

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import ZondaProcess, get, ti_states, trigger, wait_run_finished, zonda

DAG_FOLDER = Path(__file__).parent / "setup_teardown_dags"


def test_teardowns_run_after_failed_work_and_only_the_work_decides_the_run(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    tasks = {t["id"]: t for t in get(cluster, namespace, "dag", "cleanup")["spec"]["tasks"]}
    assert tasks["create"]["isSetup"] is True
    assert tasks["delete"]["isTeardown"] is True
    assert tasks["delete"]["triggerRule"] == "all_done_setup_success"
    process = ZondaProcess(
        "controller",
        ["controller", "--namespace", namespace, "--executor", "local",
         "--state-dir", str(tmp_path / "state"), "--kubeconfig", str(cluster.kubeconfig)],
        cluster,
        tmp_path,
        env={"ZONDA_DAGS_FOLDER": str(DAG_FOLDER)},
    ).start()  # fmt: skip
    try:
        failing = trigger(cluster, namespace, "cleanup", {"fail": True})
        body = wait_run_finished(cluster, namespace, failing, timeout=120)
        passing = trigger(cluster, namespace, "cleanup")
        passed = wait_run_finished(cluster, namespace, passing, timeout=120)
    finally:
        process.stop()
        print(f"--- controller log\n{process.log()[-4000:]}")
    assert ti_states(body) == {"create": "success", "work": "failed", "delete": "success", "audit": "failed"}
    assert body["status"]["taskInstances"]["delete"]["xcom"] == "deleted bucket-1"
    assert body["status"]["state"] == "failed"  # for the work
    assert ti_states(passed) == {**ti_states(body), "work": "success"}
    assert passed["status"]["state"] == "success"  # the failed audit teardown does not fail the run
