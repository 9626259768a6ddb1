"""XComs through a real controller: a 100 KB value via the XCom backend, a controller kill in between.

What is real: the apiserver, the controller process with the local executor (tries are processes of the
task runner, adopted after the restart), the fsspec `file://` backend, `zonda xcom get` as a subprocess.
"""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import (
    ZondaProcess,
    get,
    ti_states,
    trigger,
    triggerer,
    wait_for,
    wait_run_finished,
    zonda,
)

DAG_FOLDER = Path(__file__).parent / "xcom_dags"


def local_controller(cluster: Cluster, namespace: str, tmp_path: Path, **env: str) -> ZondaProcess:
    """A started controller with the local executor (tries are runner processes) and this DAG folder."""
    return ZondaProcess(
        "controller",
        ["controller", "--namespace", namespace, "--executor", "local",
         "--state-dir", str(tmp_path / "state"), "--kubeconfig", str(cluster.kubeconfig)],
        cluster,
        tmp_path,
        env={"ZONDA_DAGS_FOLDER": str(DAG_FOLDER), **env},
    ).start()  # fmt: skip


def test_a_100_kb_value_crosses_a_controller_kill_through_the_backend(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    backend = tmp_path / "xcom"
    process = local_controller(cluster, namespace, tmp_path, ZONDA_XCOM_BACKEND_URL=f"file://{backend}")
    try:
        run = trigger(cluster, namespace, "xcom-large")

        def slow_running() -> bool:
            tis = (get(cluster, namespace, "dagrun", run).get("status") or {}).get("taskInstances") or {}
            return (tis.get("slow") or {}).get("state") == "running"

        wait_for(slow_running, "slow running", timeout=120)
        process.stop(signal.SIGKILL)  # returns once the process has exited
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


def test_the_kubernetes_backend_passes_100_kb_and_3_mb_values_and_deletes_them_with_the_run(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The default backend: XComChunk objects owned by the run, written by the task runner, read by the
    downstream try and `zonda xcom get`, garbage-collected with the run (kube-controller-manager)."""
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    process = local_controller(cluster, namespace, tmp_path, ZONDA_XCOM_MAX_BYTES="4000000")
    try:
        run = trigger(cluster, namespace, "xcom-chunks")
        body = wait_run_finished(cluster, namespace, run, timeout=240)
    finally:
        process.stop()
        print(f"--- controller log\n{process.log()[-6000:]}")
    tis = body["status"]["taskInstances"]
    assert ti_states(body) == {
        "small": "success",
        "large": "success",
        "consume": "success",
        "too_big": "failed",
    }
    rows = [f"row {i} é ✓ {i * i}" for i in range(100_000)]
    assert tis["consume"]["xcom"] == {
        "small": 100_000, "rows": 100_000, "last": rows[-1],
        "sha256": hashlib.sha256("\n".join(rows).encode()).hexdigest(),
    }  # fmt: skip
    assert "XCom 'return_value' is 5000002 bytes; the limit is 4000000 bytes" in tis["too_big"]["reason"]
    large_bytes = len(json.dumps(rows, separators=(",", ":"), ensure_ascii=False).encode())
    small_ref = tis["small"]["xcom"]["__zonda_xcom_stored__"]
    large_ref = tis["large"]["xcom"]["__zonda_xcom_stored__"]
    assert small_ref["bytes"] == 100_002 and small_ref["url"].startswith(f"xcomchunks://{namespace}/{run}-")
    assert large_ref["bytes"] == large_bytes and large_ref["url"].endswith("?chunks=4")
    assert len(json.dumps(body["status"])) < 10_000, "the values live outside the run's status"

    chunks = get(cluster, namespace, "xcomchunks")["items"]
    uid = body["metadata"]["uid"]
    assert sorted((c["spec"]["taskId"], c["spec"]["index"], c["spec"]["count"]) for c in chunks) == [
        ("large", 0, 4), ("large", 1, 4), ("large", 2, 4), ("large", 3, 4), ("small", 0, 1),
    ]  # fmt: skip
    assert all(c["metadata"]["ownerReferences"][0]["uid"] == uid for c in chunks)
    assert all(len(json.dumps(c)) < 1_500_000 for c in chunks), "each chunk under etcd's request limit"

    got = zonda(cluster, "xcom", "get", run, "large", "-n", namespace)
    assert json.loads(got.stdout) == rows
    got = zonda(cluster, "xcom", "get", run, "small", "-n", namespace)
    assert json.loads(got.stdout) == "s" * 100_000

    cluster.kubectl("delete", "dagrun", run, "-n", namespace)
    wait_for(
        lambda: not get(cluster, namespace, "xcomchunks")["items"],
        "the run's XComChunks garbage-collected",
        timeout=120,
    )
    gone = zonda(cluster, "xcom", "get", run, "large", "-n", namespace, check=False)
    assert gone.returncode == 1 and "not found" in gone.stderr


def test_include_prior_dates_reads_the_latest_earlier_run_at_or_before_this_ones(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Each run's task lists the DAG's runs itself (its runner, through the cluster) and reads the value
    of the latest one at or before its logical date, stored as XComChunks."""
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    process = local_controller(cluster, namespace, tmp_path)
    counted = {}
    try:
        for date in ("2024-01-02", "2024-01-03", "2024-01-01"):
            out = zonda(
                cluster, "trigger", "xcom-prior", "-n", namespace, "--logical-date", f"{date}T00:00:00+00:00"
            )
            run = out.stdout.split()[0].split("/", 1)[1]
            body = wait_run_finished(cluster, namespace, run, timeout=120)
            assert ti_states(body) == {"count": "success"}, body["status"]
            value = json.loads(zonda(cluster, "xcom", "get", run, "count", "-n", namespace).stdout)
            counted[date] = value["n"]
    finally:
        process.stop()
        print(f"--- controller log\n{process.log()[-6000:]}")
    # The third run is the earliest: no run is at or before it, so it starts over.
    assert counted == {"2024-01-02": 1, "2024-01-03": 2, "2024-01-01": 1}


def test_xcoms_pushed_before_a_deferral_reach_the_resumed_try_and_the_downstream_task(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Airflow keeps a deferred try's pushes: its resumed `execute_complete` and a downstream task pull
    them, a large one from the XComChunks written before deferring; a later push of a key wins."""
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    process = local_controller(cluster, namespace, tmp_path)
    try:
        with triggerer(cluster, namespace, tmp_path):
            run = trigger(cluster, namespace, "xcom-deferred")

            def deferred() -> dict | None:
                body = get(cluster, namespace, "dagrun", run)
                ti = ((body.get("status") or {}).get("taskInstances") or {}).get("wait") or {}
                return ti if ti.get("state") == "deferred" else None

            waiting = wait_for(deferred, "wait deferred", timeout=120)
            assert waiting["xcoms"]["child_run"] == "child-1", "kept while the task waits"
            early = zonda(cluster, "xcom", "get", run, "wait", "--key", "shared", "-n", namespace)
            assert json.loads(early.stdout) == "before deferring"
            body = wait_run_finished(cluster, namespace, run, timeout=180)
    finally:
        process.stop()
        print(f"--- controller log\n{process.log()[-6000:]}")
    assert ti_states(body) == {"wait": "success", "consume": "success"}
    tis = body["status"]["taskInstances"]
    assert (tis["wait"]["tryNumber"], tis["wait"]["deferralCount"]) == (1, 1)
    resumed = {"child_run": "child-1", "shared": "before deferring", "blob": 5000}
    assert tis["wait"]["xcom"] == resumed, "execute_complete pulled what execute pushed"
    assert tis["wait"]["xcoms"]["shared"] == "after resuming"
    assert tis["wait"]["xcoms"]["blob"]["__zonda_xcom_stored__"]["url"].startswith("xcomchunks://")
    assert tis["consume"]["xcom"] == {
        "child_run": "child-1", "shared": "after resuming", "blob": 5000, "resumed": resumed
    }  # fmt: skip
    blob = zonda(cluster, "xcom", "get", run, "wait", "--key", "blob", "-n", namespace)
    assert json.loads(blob.stdout) == "b" * 5000
