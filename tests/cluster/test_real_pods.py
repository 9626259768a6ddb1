"""Task pods as real containers: the local control plane plus a real node (kubelet, containerd, runc).

What is real here beyond the rest of the cluster tier: the kubelet, the container runtime, Zonda's
image built from the project's Dockerfile (`hack/node/build-image.sh`), the task runner running in
it, termination messages, container logs, memory limits and kills. The controller gives every task
pod the `zonda.dev/node: real` node selector, so they land on the real node beside the kwok ones.
Nothing is skipped: if the node cannot start, the tests error with the piece that failed and its log.

One module, past the usual ~400 lines, because its tests share one real node (the module-scoped
`real_cluster`: 30-60 s to start, 20-40 s to stop); a second module would start a second node.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controller.devtools import realnode
from controller.devtools.devcluster import Cluster
from controller.kube import Kube
from controller.ui import log_stream
from controller.ui.app_state import STORE, UiSettings
from controller.ui.server import create_app
from tests.cluster.test_controller import SEED_EXAMPLES, dag
from tests.cluster.zonda_processes import (
    apply,
    controller,
    fresh_namespace,
    get,
    load_example,
    ti_states,
    trigger,
    triggerer,
    wait_for,
    wait_run_finished,
    zonda,
)
from zonda.resources.names import is_callback_name


def followed_log(cluster: Cluster, namespace: str, pod: str) -> str:
    """A pod's `base` log through `Kube.follow_pod_log` (what the UI streams), until it ends."""

    async def follow() -> str:
        async with await Kube.connect(str(cluster.kubeconfig), component="zonda-test") as kube:
            chunks = kube.follow_pod_log(namespace, pod, container="base")
            async with asyncio.timeout(60):
                return "".join([chunk async for chunk in chunks])

    return asyncio.run(follow())


@pytest.fixture
def real_namespace(real_cluster: Cluster) -> Iterator[str]:
    with fresh_namespace(real_cluster, "r") as name:
        yield name


def image(cluster: Cluster, *, examples: bool = False) -> str:
    """Zonda's image as the Dockerfile builds it, or that image plus the examples/ package."""
    assert cluster.real_node is not None
    wanted = "zonda-examples" if examples else "zonda"
    return next(i for i in cluster.real_node.images if i.rsplit("/", 1)[-1].split(":")[0] == wanted)


def real_pods(cluster: Cluster, *, examples: bool = False) -> list[str]:
    """The controller's options that put task pods on the real node, with Zonda's image."""
    selector = json.dumps(dict([realnode.NODE_LABEL]))
    return ["--task-image", image(cluster, examples=examples), "--task-node-selector", selector]


def bash(task_id: str, command: str, **extra: Any) -> dict[str, Any]:
    return {"id": task_id, "operator": "BashOperator", "args": {"bash_command": command}, **extra}


def pods_of(cluster: Cluster, namespace: str, task_id: str) -> list[dict[str, Any]]:
    pods = [
        p
        for p in get(cluster, namespace, "pods")["items"]
        if p["metadata"]["annotations"].get("zonda.dev/task-id") == task_id
    ]
    return sorted(pods, key=lambda p: int(p["metadata"]["labels"]["zonda.dev/try"]))


def test_the_real_node_is_ready_beside_the_kwok_nodes(real_cluster: Cluster) -> None:
    nodes = json.loads(real_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    by_name = {n["metadata"]["name"]: n for n in nodes}
    real = by_name[realnode.NODE_NAME]
    assert real["metadata"]["labels"]["zonda.dev/node"] == "real"
    assert real["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert real["status"]["nodeInfo"]["kubeletVersion"] == "v1.36.3"
    ready = {
        name: next(c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready")
        for name, n in by_name.items()
    }
    assert set(ready.values()) == {"True"}, ready
    assert "kwok.x-k8s.io/node" not in real["metadata"].get("annotations", {}), "kwok must not manage it"


def test_tasks_run_in_real_containers_with_results_skips_retries_and_logs(
    real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> None:
    ns = real_namespace
    apply(
        real_cluster,
        ns,
        dag(
            "real",
            [
                bash("hello", 'echo "hello from {{ ti.task_id }} as $(id -u)"; echo 42'),
                bash("skipper", "echo skipping; exit 99"),
                bash("flaky", 'echo "flaky try {{ ti.try_number }}"; exit 3', retries=1, retryDelay="1s"),
                {
                    "id": "container",
                    "container": {
                        "image": image(real_cluster),
                        "command": ["python3", "-c", "print('boxed')"],
                    },
                },
                bash("after", "echo {{ ti.xcom_pull(task_ids='hello') }}", dependsOn=["hello"]),
            ],
        ),
    )
    with controller(real_cluster, ns, tmp_path, extra=real_pods(real_cluster)):
        run = trigger(real_cluster, ns, "real")
        body = wait_run_finished(real_cluster, ns, run, timeout=240)
    tis = body["status"]["taskInstances"]
    assert ti_states(body) == {
        "hello": "success",
        "skipper": "skipped",
        "flaky": "failed",
        "container": "success",
        "after": "success",
    }, tis
    assert tis["flaky"]["tryNumber"] == 2, "retries=1 means two tries"

    # The output is the container's own, through the kubelet: kubectl logs and zonda logs agree.
    hello_pod = pods_of(real_cluster, ns, "hello")[0]["metadata"]["name"]
    kubectl_log = real_cluster.kubectl("logs", "-n", ns, hello_pod, "-c", "base").stdout
    assert "hello from hello as 10001" in kubectl_log
    assert "hello from hello as 10001" in zonda(real_cluster, "logs", run, "hello", "-n", ns).stdout
    # The UI's log stream follows a pod through the kubelet; a finished container's follow ends.
    assert "hello from hello as 10001" in followed_log(real_cluster, ns, hello_pod)
    assert (
        "42"
        in real_cluster.kubectl(
            "logs", "-n", ns, pods_of(real_cluster, ns, "after")[0]["metadata"]["name"]
        ).stdout
    )
    for number, pod in enumerate(pods_of(real_cluster, ns, "flaky"), start=1):
        assert f"flaky try {number}" in real_cluster.kubectl("logs", "-n", ns, pod["metadata"]["name"]).stdout
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert terminated["exitCode"] != 0, "the runner reports the failed try through its exit code"
    for number in (1, 2):
        log = zonda(real_cluster, "logs", run, "flaky", "--try", str(number), "-n", ns).stdout
        assert f"flaky try {number}" in log
    skip_pod = pods_of(real_cluster, ns, "skipper")[0]
    # The runner turns bash's exit 99 into a skip, reported through the termination message.
    skip_terminated = skip_pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert skip_terminated["exitCode"] == 0 and "skipped" in skip_terminated["message"].lower()
    assert (
        "boxed"
        in real_cluster.kubectl(
            "logs", "-n", ns, pods_of(real_cluster, ns, "container")[0]["metadata"]["name"]
        ).stdout
    )
    assert all(p["spec"]["nodeName"] == realnode.NODE_NAME for p in get(real_cluster, ns, "pods")["items"])


def test_a_container_killed_by_its_memory_limit_fails_the_try_as_oomkilled_then_retries(
    real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> None:
    ns = real_namespace
    hog = {
        "id": "hog",
        "container": {
            "image": image(real_cluster),
            "command": ["python3", "-c", "b = bytearray(512 * 1024 * 1024); print(len(b))"],
            "resources": {"limits": {"memory": "64Mi"}, "requests": {"memory": "64Mi"}},
        },
        "retries": 1,
        "retryDelay": "1s",
    }
    apply(real_cluster, ns, dag("oom", [hog]))
    with controller(real_cluster, ns, tmp_path, extra=real_pods(real_cluster)):
        run = trigger(real_cluster, ns, "oom")
        body = wait_run_finished(real_cluster, ns, run, timeout=180)
    ti = body["status"]["taskInstances"]["hog"]
    assert ti["state"] == "failed" and ti["tryNumber"] == 2, ti
    assert "OOMKilled" in (ti.get("reason") or ""), ti
    for pod in pods_of(real_cluster, ns, "hog"):
        assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "OOMKilled"


def test_execution_timeout_kills_a_running_container(
    real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> None:
    ns = real_namespace
    apply(real_cluster, ns, dag("slow", [bash("sleeper", "echo started; sleep 600", executionTimeout="5s")]))
    with controller(real_cluster, ns, tmp_path, extra=real_pods(real_cluster)):
        run = trigger(real_cluster, ns, "slow")
        # The positive control: the container's process is seen on the node (so that its absence later
        # means it ended, not that this check cannot see it).
        wait_for(lambda: "sleep 600" in _node_processes(), "the container's process on the node", timeout=90)
        body = wait_run_finished(real_cluster, ns, run, timeout=120)
        ti = body["status"]["taskInstances"]["sleeper"]
        assert ti["state"] == "failed"
        reason = (ti.get("reason") or "").lower()
        assert "timeout" in reason or "timed out" in reason, ti
        wait_for(lambda: not pods_of(real_cluster, ns, "sleeper"), "the pod to be deleted", timeout=60)
    # The container is gone from the node, not just the Pod object from the apiserver.
    assert real_cluster.real_node is not None
    wait_for(
        lambda: "sleep 600" not in _node_processes(),
        "the container's process to end on the node",
        timeout=30,
    )


def test_a_task_pod_passes_pod_security_restricted(
    real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> None:
    ns = real_namespace
    real_cluster.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
    # No podOverride: the builder's default securityContext is what the namespace admits.
    apply(real_cluster, ns, dag("secure", [bash("locked", "echo locked down; id -u")]))
    with controller(real_cluster, ns, tmp_path, extra=real_pods(real_cluster)):
        run = trigger(real_cluster, ns, "secure")
        body = wait_run_finished(real_cluster, ns, run, timeout=120)
    assert ti_states(body) == {"locked": "success"}, body["status"]
    pod = pods_of(real_cluster, ns, "locked")[0]["metadata"]["name"]
    logs = real_cluster.kubectl("logs", "-n", ns, pod).stdout
    assert "locked down" in logs and "10001" in logs, logs  # the image's uid, not root


def test_a_pod_pending_past_the_pending_timeout_fails_its_try_with_the_kubelets_reason_and_retries(
    real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> None:
    ns = real_namespace
    never = {
        "id": "never",
        "container": {"image": "zonda.example/not-on-this-node:1", "imagePullPolicy": "Never"},
        "retries": 1,
        "retryDelay": "1s",
    }
    apply(real_cluster, ns, dag("pending", [never]))
    extra = [*real_pods(real_cluster), "--pod-pending-timeout", "10"]
    with controller(real_cluster, ns, tmp_path, extra=extra):
        run = trigger(real_cluster, ns, "pending")
        body = wait_run_finished(real_cluster, ns, run, timeout=180)
        wait_for(lambda: not pods_of(real_cluster, ns, "never"), "the pending pods to be deleted", timeout=60)
    ti = body["status"]["taskInstances"]["never"]
    assert body["status"]["state"] == "failed", body["status"]
    assert ti["state"] == "failed" and ti["tryNumber"] == 2, ti
    reason = ti.get("reason") or ""
    assert "still Pending after the pending timeout of 10s" in reason, ti
    assert "ErrImageNeverPull" in reason and "try 2 of 2" in reason, ti
    retried = real_cluster.kubectl("get", "events", "-n", ns, "-o", "json").stdout
    assert "TaskUpForRetry" in retried and "ErrImageNeverPull" in retried


def _node_processes() -> str:
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return "\n".join(lines)


def test_a_deferred_sensor_s_pod_exits_and_a_new_pod_resumes_it(
    real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> None:
    ns = real_namespace
    dag_body = load_example("example_deferrable")
    # From trigger time: a pod started later than this would succeed at once and never defer.
    dag_body["spec"]["tasks"][1]["args"]["delta"] = "20s"
    apply(real_cluster, ns, dag_body)
    with (
        controller(real_cluster, ns, tmp_path, extra=real_pods(real_cluster)),
        triggerer(real_cluster, ns, tmp_path),
    ):
        run = trigger(real_cluster, ns, "example-deferrable")

        def deferred_and_exited() -> bool:
            ti = (
                (get(real_cluster, ns, "dagrun", run).get("status") or {})
                .get("taskInstances", {})
                .get("wait")
            )
            pods = pods_of(real_cluster, ns, "wait")
            return bool(
                ti
                and ti["state"] == "deferred"
                and pods
                and all(p["status"].get("phase") == "Succeeded" for p in pods)
            )

        wait_for(deferred_and_exited, "the sensor to defer and its pod to exit", timeout=120)
        body = wait_run_finished(real_cluster, ns, run, timeout=120)
    assert ti_states(body) == {"start": "success", "wait": "success", "done": "success"}
    wait_ti = body["status"]["taskInstances"]["wait"]
    assert wait_ti["tryNumber"] == 1 and wait_ti["deferralCount"] == 1, wait_ti
    pods = pods_of(real_cluster, ns, "wait")
    assert len(pods) == 2, "the deferring pod and the resuming one, both real containers"
    assert all(p["status"]["phase"] == "Succeeded" for p in pods)
    done = pods_of(real_cluster, ns, "done")[0]["metadata"]["name"]
    assert "waited; resumed at" in real_cluster.kubectl("logs", "-n", ns, done).stdout


def test_the_seed_examples_reproduce_airflows_outcomes_as_real_pods(
    real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> None:
    """The examples' callables are imported in the task pods: the image built FROM zonda with them."""
    ns = real_namespace
    expected: dict[str, tuple[dict[str, str], str]] = {"example-bash": ({}, "success")}
    for example in ["example_bash", *(p.values[0] for p in SEED_EXAMPLES)]:
        body = load_example(example)
        if body["spec"].get("schedule") is not None:
            body["spec"].update(schedule=None, startDate=None, catchup=False)
        apply(real_cluster, ns, body)
        if example != "example_bash":
            outcome = next(p.values for p in SEED_EXAMPLES if p.values[0] == example)
            expected[body["metadata"]["name"]] = (outcome[1], outcome[2])
    with controller(real_cluster, ns, tmp_path, extra=real_pods(real_cluster, examples=True)):
        runs = {name: trigger(real_cluster, ns, name) for name in expected}
        results = {name: wait_run_finished(real_cluster, ns, run, timeout=300) for name, run in runs.items()}
    for name, (states, run_state) in expected.items():
        if states:
            assert ti_states(results[name]) == states, name
        assert results[name]["status"]["state"] == run_state, (name, results[name]["status"])
    bash_run = runs["example-bash"]
    assert "loading: hello 42" in zonda(real_cluster, "logs", bash_run, "load", "-n", ns).stdout
    flaky_run = runs["example-default-args"]
    for number in (1, 2, 3):
        assert (
            f"try {number}"
            in zonda(real_cluster, "logs", flaky_run, "flaky", "--try", str(number), "-n", ns).stdout
        )


def test_a_pod_deleted_while_its_container_runs_is_a_zombie_retried_in_a_new_pod(
    real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> None:
    ns = real_namespace
    apply(
        real_cluster,
        ns,
        dag(
            "zombie",
            [
                bash(
                    "victim",
                    'echo "try {{ ti.try_number }}"; sleep {{ 600 if ti.try_number == 1 else 0 }}',
                    retries=1,
                    retryDelay="1s",
                )
            ],
        ),
    )
    with controller(real_cluster, ns, tmp_path, extra=real_pods(real_cluster)):
        run = trigger(real_cluster, ns, "zombie")

        def first_running() -> str | None:
            pods = pods_of(real_cluster, ns, "victim")
            running = [
                p
                for p in pods
                if any(
                    "running" in (s.get("state") or {}) for s in p["status"].get("containerStatuses") or []
                )
            ]
            return running[0]["metadata"]["name"] if running else None

        victim = wait_for(first_running, "the first try's container running", timeout=120)
        real_cluster.kubectl("delete", "pod", victim, "-n", ns, "--wait=false")
        body = wait_run_finished(real_cluster, ns, run, timeout=180)
    ti = body["status"]["taskInstances"]["victim"]
    assert ti["state"] == "success" and ti["tryNumber"] == 2, ti
    second = pods_of(real_cluster, ns, "victim")[-1]["metadata"]["name"]
    assert "try 2" in real_cluster.kubectl("logs", "-n", ns, second).stdout


# Callbacks the task pods import, as a user's image built FROM zonda would have them (docs/image.md):
# here a ConfigMap mounted as the DAGs folder, which the runner puts on sys.path, so the image stays
# the cached one. Each call prints one line the test reads back from the callback pod's log.
CALLBACKS_MODULE = """
def on_task_failure(context):
    ti = context["ti"]
    print(f"task callback: {ti.task_id} try {ti.try_number} failed: {context['exception']}", flush=True)


def on_dag_failure(context):
    print(f"dag callback: {context['dag'].dag_id} reason {context['reason']}", flush=True)
"""
CALLBACKS_FOLDER = "/opt/zonda-dags"
MOUNT_CALLBACKS = {
    "spec": {
        "volumes": [{"name": "dags", "configMap": {"name": "real-callbacks"}}],
        "containers": [
            {
                "name": "base",
                "env": [{"name": "ZONDA_DAGS_FOLDER", "value": CALLBACKS_FOLDER}],
                "volumeMounts": [{"name": "dags", "mountPath": CALLBACKS_FOLDER, "readOnly": True}],
            }
        ],
    }
}


def test_failure_callbacks_of_killed_containers_and_the_dags_run_once_each_as_real_containers(
    real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> None:
    """A container timed out by the controller and one OOMKilled by the kubelet cannot run their own
    `on_failure_callback`: each gets a callback try, a pod of Zonda's image, as does the DAG's."""
    ns = real_namespace
    apply(real_cluster, ns, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "real-callbacks"},
        "data": {"real_callbacks.py": CALLBACKS_MODULE},
    })  # fmt: skip
    on_failure = {"onFailureCallback": ["real_callbacks:on_task_failure"], "podOverride": MOUNT_CALLBACKS}
    hung = {"id": "hung", "container": {"image": image(real_cluster), "command": ["sleep", "600"]}}
    hog = {
        "id": "hog",
        "container": {
            "image": image(real_cluster),
            "command": ["python3", "-c", "b = bytearray(512 * 1024 * 1024)"],
            "resources": {"limits": {"memory": "64Mi"}, "requests": {"memory": "64Mi"}},
        },
    }
    apply(real_cluster, ns, dag(
        "real-callbacks",
        [{**hung, **on_failure, "executionTimeout": "5s"}, {**hog, **on_failure}],
        onFailureCallback=["real_callbacks:on_dag_failure"],
    ))  # fmt: skip
    with controller(real_cluster, ns, tmp_path, extra=real_pods(real_cluster)):
        run = trigger(real_cluster, ns, "real-callbacks")
        wait_run_finished(real_cluster, ns, run, timeout=180)
        body = wait_for(
            lambda: (
                (b := get(real_cluster, ns, "dagrun", run))["status"].get("callbacks")
                and len(b["status"]["callbacks"]) == 3
                and all(record["state"] != "launched" for record in b["status"]["callbacks"])
                and b
            ),
            "the three callback tries to end",
            timeout=180,
        )
        wait_for(  # the controller deletes the timed-out try's pod (and its log)
            lambda: all(is_callback_name(p["metadata"]["name"]) for p in pods_of(real_cluster, ns, "hung")),
            "the timed-out pod to be deleted",
            timeout=60,
        )
    assert ti_states(body) == {"hung": "failed", "hog": "failed"}, body["status"]
    records = {(r["kind"], r.get("taskId")): r for r in body["status"]["callbacks"]}
    assert {kind for kind, _ in records} == {"on_failure_callback", "dag_failure"}, records
    assert {r["state"] for r in records.values()} == {"succeeded"}, records
    pods = {p["metadata"]["name"]: p for p in get(real_cluster, ns, "pods")["items"]}
    logs = {name: real_cluster.kubectl("logs", "-n", ns, name).stdout for name in pods}
    by_kind = {kind: record for (kind, _), record in records.items() if kind != "on_failure_callback"}
    expected = {
        "task callback: hung try 1 failed: ": records[("on_failure_callback", "hung")],
        "task callback: hog try 1 failed: ": records[("on_failure_callback", "hog")],
        "dag callback: real-callbacks reason task_failure": by_kind["dag_failure"],
    }
    for line, record in expected.items():
        pod = pods[record["name"]]  # the callback try is a pod of its own, under the record's name
        assert pod["spec"]["nodeName"] == realnode.NODE_NAME
        assert pod["spec"]["containers"][0]["image"] == image(real_cluster)  # Zonda's, the runner's
        (container,) = pod["status"]["containerStatuses"]
        assert container["restartCount"] == 0 and container["state"]["terminated"]["exitCode"] == 0
        # Exactly once: the line is in this pod's log once, and in no other pod's.
        assert logs[record["name"]].count(line) == 1, (record, logs[record["name"]])
        assert sum(text.count(line) for text in logs.values()) == 1, (line, logs)
    callback_log = logs[records[("on_failure_callback", "hung")]["name"]]
    assert "execution_timeout" in callback_log, callback_log
    assert "OOMKilled" in logs[records[("on_failure_callback", "hog")]["name"]]
    # `zonda logs` shows a callback try after its try's own log (docs/callbacks.md).
    assert "task callback: hog try 1 failed" in zonda(real_cluster, "logs", run, "hog", "-n", ns).stdout


async def until(predicate: Callable[[], Awaitable[Any]], what: str, seconds: float) -> Any:
    """`wait_for` for a test whose event loop also serves the UI: polls without blocking it."""
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        if found := await predicate():
            return found
        await asyncio.sleep(0.3)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")


async def sse_until_end(client: TestClient, path: str) -> list[str]:
    """The text chunks a log stream sends, as they arrive, up to and including its `end` event."""
    chunks: list[str] = []
    async with client.get(path) as response, asyncio.timeout(120):
        assert response.status == 200 and response.content_type == "text/event-stream"
        async for chunk in response.content.iter_any():
            chunks.append(chunk.decode())
            if "event: end" in "".join(chunks):
                return chunks
    raise AssertionError(f"{path} ended without an end event: {chunks}")


async def test_the_ui_serves_every_tries_log_of_a_real_container_and_streams_the_running_one(
    real_cluster: Cluster, real_namespace: str, tmp_path: Path
) -> None:
    """The UI (in this process, the kubeconfig's identity) reads the kubelet's logs: its log endpoint
    and its Server-Sent Events stream give both tries of a retried task, and the stream follows the
    second while its container runs (its last line arrives after the stream opened)."""
    ns = real_namespace
    talk = (
        'echo "try {{ ti.try_number }} begins"; [ {{ ti.try_number }} = 1 ] && exit 3;'
        ' sleep 6; echo "try {{ ti.try_number }} ends"'
    )
    apply(real_cluster, ns, dag("chatty", [bash("talk", talk, retries=1, retryDelay="1s")]))
    kube = await Kube.connect(str(real_cluster.kubeconfig), component="zonda-ui-test")
    client = TestClient(TestServer(create_app(kube, UiSettings(namespaces=[ns]))))
    await client.start_server()
    try:
        with controller(real_cluster, ns, tmp_path, extra=real_pods(real_cluster)):
            run = await asyncio.to_thread(trigger, real_cluster, ns, "chatty")
            log = f"/runs/{ns}/{run}/tasks/talk/log"

            async def second_try_running() -> bool:
                ti = ((client.app[STORE].runs.get((ns, run)) or {}).get("status") or {}).get(
                    "taskInstances", {}
                ).get("talk") or {}
                if not (ti.get("tryNumber") == 2 and ti.get("state") in log_stream.LIVE_STATES):
                    return False
                pods = await asyncio.to_thread(pods_of, real_cluster, ns, "talk")
                statuses = pods[-1]["status"].get("containerStatuses") or [] if len(pods) == 2 else []
                return any("running" in (s.get("state") or {}) for s in statuses)

            await until(second_try_running, "try 2's container running, as the UI sees the run", 180)
            live = await sse_until_end(client, f"{log}/stream?try=2")
            body = await asyncio.to_thread(wait_run_finished, real_cluster, ns, run, 120)
        assert (
            ti_states(body) == {"talk": "success"}
            and body["status"]["taskInstances"]["talk"]["tryNumber"] == 2
        )
        streamed = "".join(live)
        assert (
            streamed.index("data: try 2 begins\n")
            < streamed.index("data: try 2 ends\n")
            < streamed.index("event: end")
        ), streamed
        seen = ""
        for chunk in live:  # what had come when the first line came
            seen += chunk
            if "data: try 2 begins\n" in seen:
                break
        assert "data: try 2 ends\n" not in seen, "followed while running, not read after the container ended"
        for number in (1, 2):
            pod = pods_of(real_cluster, ns, "talk")[number - 1]["metadata"]["name"]
            kubelet = real_cluster.kubectl("logs", "-n", ns, pod).stdout
            assert f"try {number} begins" in kubelet.splitlines(), kubelet  # a line, not the command
            response = await client.get(f"{log}?try={number}")
            served = await response.text()
            assert response.status == 200 and kubelet.strip() in served, (number, served)
            finished = "".join(await sse_until_end(client, f"{log}/stream?try={number}"))
            assert f"data: try {number} begins\n" in finished and f"try {3 - number} " not in finished
        assert "try 2 ends" in served.splitlines()
    finally:
        await client.close()
        await kube.close()
