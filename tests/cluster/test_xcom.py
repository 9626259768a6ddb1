"""XComs through a real controller: a 100 KB value via the XCom backend, a controller kill in between.

What is real: the apiserver, the controller process with the local executor (tries are processes of the
task runner, adopted after the restart), the fsspec `file://` backend, `zonda xcom get` as a subprocess.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import (
    ZondaProcess,
    get,
    ti_states,
    trigger,
    wait_for,
    wait_run_finished,
    zonda,
)

DAG_FOLDER = Path(__file__).parent / "xcom_dags"


def test_a_100_kb_value_crosses_a_controller_kill_through_the_backend(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    backend = tmp_path / "xcom"
    process = ZondaProcess(
        "controller",
        ["controller", "--namespace", namespace, "--executor", "local",
         "--state-dir", str(tmp_path / "state"), "--kubeconfig", str(cluster.kubeconfig)],
        cluster,
        tmp_path,
        env={"ZONDA_DAGS_FOLDER": str(DAG_FOLDER), "ZONDA_XCOM_BACKEND_URL": f"file://{backend}"},
    ).start()  # fmt: skip
    try:
        run = trigger(cluster, namespace, "xcom-large")

        def slow_running() -> bool:
            tis = (get(cluster, namespace, "dagrun", run).get("status") or {}).get("taskInstances") or {}
            return (tis.get("slow") or {}).get("state") == "running"

        wait_for(slow_running, "slow running", timeout=120)
        process.stop(signal.SIGKILL)
        time.sleep(1)
        process.start()
        body = wait_run_finished(cluster, namespace, run, timeout=120)
    finally:
        process.stop()
        print(f"--- controller log\n{process.log()[-6000:]}")
    assert ti_states(body) == {"produce": "success", "slow": "success", "consume": "success"}
    tis = body["status"]["taskInstances"]
    assert {t: ti["tryNumber"] for t, ti in tis.items()} == {"produce": 1, "slow": 1, "consume": 1}
    stored = tis["produce"]["xcom"]["__zonda_xcom_stored__"]
    assert stored["bytes"] == 100_002 and stored["url"].startswith(f"file://{backend}/{namespace}/{run}/")
    assert tis["produce"]["xcoms"] == {"rows": [1, 2, 3], "at": "2024-01-02T00:00:00+00:00"}
    assert tis["consume"]["xcom"] == {
        "length": 100_000, "same": True, "rows": [1, 2, 3], "at": "2024-01-02T00:00:00+00:00"
    }  # fmt: skip
    status_bytes = len(json.dumps(body["status"]))
    print(f"status of the run: {status_bytes} bytes with a 100 KB XCom stored outside")
    assert status_bytes < 10_000
    got = zonda(cluster, "xcom", "get", run, "produce", "-n", namespace)
    assert json.loads(got.stdout) == "x" * 100_000
    rows = zonda(cluster, "xcom", "get", run, "produce", "--key", "rows", "-n", namespace)
    assert json.loads(rows.stdout) == [1, 2, 3]
    missing = zonda(cluster, "xcom", "get", run, "produce", "--key", "nope", "-n", namespace, check=False)
    assert missing.returncode == 1
    assert "has no XCom 'nope'; its keys: return_value, at, rows" in missing.stderr
