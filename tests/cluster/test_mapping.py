"""Dynamic task mapping through a real controller (local executor: tries are task-runner processes).

Real: the apiserver, the controller process (killed with SIGKILL and restarted mid-run), the task
runner, the fsspec `file://` XCom backend holding the list mapped over, `zonda` CLI subprocesses.
The 1,024-instance run prints its wall time, its status size and its API writes per mapped instance
(the apiserver's own request counters); it asserts outcomes, not durations.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import (
    ZondaProcess,
    apply,
    controller,
    get,
    ti_states,
    trigger,
    wait_for,
    wait_run_finished,
    zonda,
)

DAG_FOLDER = Path(__file__).parent / "mapping_dags"


def local_controller(cluster: Cluster, namespace: str, tmp_path: Path, *extra: str) -> ZondaProcess:
    return ZondaProcess(
        "controller",
        ["controller", "--namespace", namespace, "--executor", "local",
         "--state-dir", str(tmp_path / "state"), "--kubeconfig", str(cluster.kubeconfig), *extra],
        cluster,
        tmp_path,
        env={"ZONDA_DAGS_FOLDER": str(DAG_FOLDER), "ZONDA_XCOM_BACKEND_URL": f"file://{tmp_path / 'xcom'}"},
    )  # fmt: skip


def test_a_list_made_at_run_time_is_mapped_and_reduced_across_a_controller_kill(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    process = local_controller(cluster, namespace, tmp_path).start()
    try:
        run = trigger(cluster, namespace, "mapped-reduce", {"count": 30})

        def some_instances_done() -> bool:
            tis = (get(cluster, namespace, "dagrun", run).get("status") or {}).get("taskInstances") or {}
            done = [key for key, ti in tis.items() if key.startswith("measure[") and ti["state"] == "success"]
            return len(done) >= 2

        wait_for(some_instances_done, "two mapped instances done", timeout=180)
        process.stop(signal.SIGKILL)  # returns once the process has exited
        process.start()
        body = wait_run_finished(cluster, namespace, run, timeout=300)
    finally:
        process.stop()
        print(f"--- controller log\n{process.log()[-6000:]}")
    states = ti_states(body)
    assert states == {
        "make_words": "success",
        **{f"measure[{i}]": "success" for i in range(30)},
        "total": "success",
    }
    tis = body["status"]["taskInstances"]
    assert all(ti["tryNumber"] == 1 for ti in tis.values()), "a task instance ran twice"
    assert "__zonda_xcom_stored__" in tis["make_words"]["xcom"]  # mapped over a value in the backend
    assert tis["make_words"]["xcomLengths"] == {"return_value": 30}
    assert tis["total"]["xcom"] == {
        "indexes": list(range(30)), "total": 30 * 50, "third": {"index": 2, "length": 50}
    }  # fmt: skip
    got = zonda(cluster, "xcom", "get", run, "measure", "--map-index", "7", "-n", namespace)
    assert json.loads(got.stdout) == {"index": 7, "length": 50}
    log = zonda(cluster, "logs", run, "measure", "--map-index", "3", "-n", namespace,
                "--state-dir", str(tmp_path / "state"))  # fmt: skip
    assert "# measure[3] try 1 of" in log.stderr
    table = zonda(cluster, "tasks", "states", run, "-n", namespace).stdout
    assert table.index("measure[2]") < table.index("measure[10]")  # in map-index order


def api_writes(cluster: Cluster) -> dict[str, int]:
    """Write requests the apiserver served so far, by resource (its `apiserver_request_total`)."""
    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout
    counts: dict[str, int] = {}
    for match in WRITE_SAMPLE.finditer(metrics):
        counts[match["resource"]] = counts.get(match["resource"], 0) + int(float(match["value"]))
    return counts


WRITE_SAMPLE = re.compile(
    r'^apiserver_request_total\{(?=[^}]*verb="(?:POST|PUT|PATCH|DELETE)")(?=[^}]*[{,]resource="(?P<resource>[a-z]+)")'
    r"[^}]*\} (?P<value>\S+)$",
    re.MULTILINE,
)


def test_1024_mapped_instances_finish_with_the_local_executor(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    process = local_controller(cluster, namespace, tmp_path, "--parallelism", "16").start()
    try:
        before = api_writes(cluster)
        started = time.monotonic()
        run = trigger(cluster, namespace, "mapped-wide", {"count": 1024})
        body = wait_run_finished(cluster, namespace, run, timeout=1500)
        wall = time.monotonic() - started
        after = api_writes(cluster)
    finally:
        process.stop()
        print(f"--- controller log\n{process.log()[-3000:]}")
    states = ti_states(body)
    assert states.pop("make_numbers") == "success" and states.pop("count") == "success"
    assert states == {f"square[{index}]": "success" for index in range(1024)}
    assert body["status"]["taskInstances"]["count"]["xcom"] == 1024
    writes = {
        kind: after.get(kind, 0) - before.get(kind, 0)
        for kind in ("dagruns", "dagrunshards", "events", "pods")
    }
    status_bytes = len(json.dumps(body["status"], separators=(",", ":")))  # whole (1,026 > 1,000: in shards)
    stored = get(cluster, namespace, "dagrun", run)
    assert stored["status"]["progress"] == "1026/1026" and len(stored["status"]["taskInstanceShards"]) == 5
    load = os.getloadavg()
    print(
        f"1024 mapped instances, local executor, --parallelism 16: wall {wall:.1f} s; "
        f"status {status_bytes} bytes ({status_bytes / 1024:.0f} bytes per instance); API writes during "
        f"the run {writes} = {sum(writes.values()) / 1024:.3f} per mapped instance; "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )
    assert writes.get("dagruns", 0) >= 2  # observed at all (the run was written, more than once)
    assert status_bytes < 1_572_864 // 2  # well under the apiserver's 1.5 MiB object limit


def test_a_mapped_kubernetes_pod_operator_runs_one_labelled_pod_per_item_on_kwok(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    kwok = {"kwok.zonda.dev/exit-code": "0", "kwok.zonda.dev/duration-ms": "200"}
    task = {
        "id": "greet",
        "operator": "KubernetesPodOperator",
        "args": {"image": "busybox", "cmds": ["echo"]},
        "podOverride": {"metadata": {"annotations": kwok}},
        "expand": {"kwargs": {"arguments": [["hello"], ["world"], ["again"]]}},
    }
    dag = {"apiVersion": "zonda.dev/v1alpha1", "kind": "DAG", "metadata": {"name": "mapped-pods"},
           "spec": {"schedule": None, "tasks": [task]}}  # fmt: skip
    apply(cluster, namespace, dag)
    with controller(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "mapped-pods")
        body = wait_run_finished(cluster, namespace, run, timeout=180)
    assert ti_states(body) == {"greet[0]": "success", "greet[1]": "success", "greet[2]": "success"}
    pods = {p["metadata"]["name"]: p for p in get(cluster, namespace, "pods")["items"]}
    for index, word in enumerate(["hello", "world", "again"]):
        pod = pods[body["status"]["taskInstances"][f"greet[{index}]"]["podName"]]
        assert pod["metadata"]["labels"]["zonda.dev/map-index"] == str(index)
        assert f"-greet-{index}-1-" in pod["metadata"]["name"] and len(pod["metadata"]["name"]) <= 63
        assert pod["spec"]["containers"][0]["args"] == [word]  # the instance's own item


def test_a_mapped_task_group_runs_each_index_on_its_own_with_the_local_executor(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """`words.prepare[1]` only finishes once `words.check[0]` ran: per-index dependencies inside the
    group (waiting for every `prepare` first would time `prepare[1]` out and fail the run)."""
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    signal_dir = tmp_path / "signals"
    signal_dir.mkdir()
    process = local_controller(cluster, namespace, tmp_path).start()
    try:
        run = trigger(cluster, namespace, "mapped-group", {"count": 3, "signal_dir": str(signal_dir)})
        body = wait_run_finished(cluster, namespace, run, timeout=400)
    finally:
        process.stop()
        print(f"--- controller log\n{process.log()[-3000:]}")
    assert ti_states(body) == {
        "make_words": "success",
        **{f"words.{name}[{i}]": "success" for name in ("prepare", "check") for i in range(3)},
        "collect": "success",
    }
    tis = body["status"]["taskInstances"]
    assert "__zonda_xcom_stored__" in tis["words.prepare[1]"]["xcom"]  # read back per index from the backend
    assert tis["collect"]["xcom"] == [
        {"index": i, "head": f"WORD-{i}", "pulled_same": True} for i in range(3)
    ]  # ti.xcom_pull inside the group read its own index


def test_a_branch_in_a_mapped_task_group_decides_per_index_with_the_local_executor(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """Index i's branch skips only the path it did not choose at index i; index 0's short-circuit
    skips index 0's report only; `collect` (all_done, outside the group) gets the reports that ran."""
    zonda(cluster, "dags", "apply", str(DAG_FOLDER), "-n", namespace)
    process = local_controller(cluster, namespace, tmp_path).start()
    try:
        run = trigger(cluster, namespace, "mapped-branches", {"count": 4})
        body = wait_run_finished(cluster, namespace, run, timeout=400)
    finally:
        process.stop()
        print(f"--- controller log\n{process.log()[-3000:]}")
    even, odd = ["success", "skipped", "success", "skipped"], ["skipped", "success", "skipped", "success"]
    assert ti_states(body) == {
        "make_numbers": "success",
        **{f"per_number.choose[{i}]": "success" for i in range(4)},
        **{f"per_number.even[{i}]": even[i] for i in range(4)},
        **{f"per_number.odd[{i}]": odd[i] for i in range(4)},
        **{f"per_number.not_zero[{i}]": "success" for i in range(4)},
        "per_number.report[0]": "skipped",
        **{f"per_number.report[{i}]": "success" for i in range(1, 4)},
        "collect": "success",
    }
    tis = body["status"]["taskInstances"]
    assert tis["per_number.choose[1]"]["followTaskIds"] == ["per_number.odd"]
    assert tis["collect"]["xcom"] == [{"index": i, "number": i} for i in range(1, 4)]
