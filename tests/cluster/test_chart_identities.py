"""The Helm chart's identities run Zonda for real: least privilege proven by working, not by reading.

`test_helm_rbac.py` asks the apiserver's authorizer what the chart's ServiceAccounts *may* do; here
the controller and the triggerer actually run with tokens of those ServiceAccounts, so a permission
the code needs but the chart forgot shows up as a stuck run and a 403 in a log.

What is real: helm, the chart's ServiceAccounts, Roles and bindings, the apiserver with RBAC on,
tokens minted by the TokenRequest API, the controller and triggerer processes (`zonda controller` /
`zonda triggerer`, as the chart's Deployments run them, with POD_NAMESPACE set as the downward API
would), task pods (kwok-simulated: their containers never run). What is not: the chart's own
Deployments, scaled to zero, since their image is not built here.

The release is installed without the chart's one cluster-scoped grant (reading CRDs), to prove a
namespaced install needs none; the default values only add that read on top.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.cli import main as cli
from controller.devtools.devcluster import Cluster, free_port
from tests.cluster.test_controller import container_task, dag
from tests.cluster.test_helm_rbac import CHART, run_helm
from tests.cluster.zonda_processes import (
    ZondaProcess,
    apply,
    deferrable_example,
    get,
    load_example,
    release_task_pods,
    ti_states,
    trigger,
    wait_for,
    wait_run_finished,
    zonda,
)

RELEASE = "zonda"
TASK = f"{RELEASE}-task"
#: The Lease the controller replicas elect their leader with (`--peering`).
PEERING = "zonda-test"
#: A 403 anywhere in a component's log means the chart forgot a permission the code uses. A 403 after a
#: comma or dot is not one: it is the milliseconds of a text log line's timestamp ("17:55:29,403 INFO")
#: or a fraction ("0.403 s"), which made this check fail once in about a thousand lines. Nor after a
#: dash, colon or slash: the end of a generated name ("host-403", the leader's `<hostname>-<pid>`), a
#: time or a path. A real denial says `(403)`, `403 Forbidden`, `'code': 403`, and "forbidden" anyway.
DENIED = re.compile(r"(?<![,.:/-])\b403\b|forbidden", re.IGNORECASE)


@dataclass(frozen=True)
class Release:
    """The chart installed in `namespace`, watching only it, and kubeconfigs of its identities."""

    cluster: Cluster
    namespace: str
    kubeconfigs: dict[str, Path]

    def service_account(self, identity: str) -> str:
        return f"system:serviceaccount:{self.namespace}:{RELEASE}-{identity}"

    def component(self, name: str, log_dir: Path, **options: str) -> ZondaProcess:
        """`zonda controller|triggerer` exactly as the chart's Deployment runs it (arguments and plain
        environment), as the chart's identity; `options` replace or add `--name=value` arguments."""
        deployment = get(self.cluster, self.namespace, "deployment", f"{RELEASE}-{name}")
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        args = with_options(container["args"], kubeconfig=str(self.kubeconfigs[name]), **options)
        env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
        # What the downward API gives the Deployment's pods (fieldRef values are not rendered).
        env |= {"POD_NAMESPACE": self.namespace, "POD_NAME": f"{RELEASE}-{name}-test"}
        # Only this identity, also for the local executor's task processes (which inherit it).
        env["KUBECONFIG"] = str(self.kubeconfigs[name])
        return ZondaProcess(name, args, self.cluster, log_dir, env=env)


def with_options(args: list[str], **options: str) -> list[str]:
    """Command-line `args` with `--key=value` replaced (or appended) for each option (key_with_dashes)."""
    flags = {f"--{key.replace('_', '-')}": value for key, value in options.items()}
    kept = [arg for arg in args if arg.split("=", 1)[0] not in flags]
    return kept + [f"{flag}={value}" for flag, value in flags.items()]


def write_token_kubeconfig(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    """The admin kubeconfig's server and CA, with a ServiceAccount's bearer token as the user."""
    config = json.loads(admin_kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(json.dumps(config, indent=2))
    return path


@pytest.fixture(scope="module")
def release(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    namespace = f"t-chart-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", namespace)
    values = {
        "watch": {"namespaces": [namespace]},
        # The one cluster-scoped grant of a namespaced install, off: Zonda runs without it (kopf's
        # CRD and namespace scanning is disabled), and the defaults only add this read on top.
        "rbac": {"readCustomResourceDefinitions": False},
        # The Deployments' image is not built here: the test runs their command lines itself.
        "controller": {"replicas": 0, "peering": {"name": PEERING}},
        # More than one shard, so that the controller and the triggerer must agree on their number.
        "triggerer": {"replicas": 0, "shards": 4},
    }
    try:
        installed = run_helm(
            cluster, "install", RELEASE, str(CHART), "--namespace", namespace, "--skip-crds", values=values
        )
        assert installed.returncode == 0, installed.stderr
        directory = tmp_path_factory.mktemp("identities")
        kubeconfigs = {}
        for identity in ("controller", "triggerer"):
            token = cluster.kubectl(
                "create", "token", f"{RELEASE}-{identity}", "-n", namespace, "--duration=1h"
            ).stdout.strip()
            kubeconfigs[identity] = write_token_kubeconfig(
                cluster.kubeconfig, token, directory / f"{identity}.kubeconfig"
            )
        yield Release(cluster, namespace, kubeconfigs)
    finally:
        run_helm(cluster, "uninstall", RELEASE, "--namespace", namespace, "--wait")
        release_task_pods(cluster, namespace)  # no controller left to release them
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@contextlib.contextmanager
def running(*processes: ZondaProcess) -> Iterator[None]:
    try:
        for process in processes:
            process.start()
        yield
    finally:
        for process in processes:
            process.stop()
            print(f"--- {process.name} log ({process.log_path})\n{process.log()[-4000:]}")


def assert_never_denied(*processes: ZondaProcess) -> None:
    for process in processes:
        denied = [line for line in process.log().splitlines() if DENIED.search(line)]
        assert not denied, f"{process.name} was denied:\n" + "\n".join(denied[:10])


def event_reasons(cluster: Cluster, namespace: str) -> set[str]:
    reasons = cluster.kubectl("get", "events", "-n", namespace, "-o", "jsonpath={.items[*].reason}").stdout
    return set(reasons.split())


def pod_names(cluster: Cluster, namespace: str) -> list[str]:
    return [pod["metadata"]["name"] for pod in get(cluster, namespace, "pods")["items"]]


def ports() -> dict[str, str]:
    """Free ports instead of the chart's 8080/8081, which every process here would share."""
    return {"metrics_port": str(free_port()), "health_port": str(free_port())}


# ------------------------------------------------------------------------------- running for real


def test_the_chart_identities_run_a_deferred_task_to_success_electing_a_leader(
    release: Release, tmp_path: Path
) -> None:
    cluster, namespace = release.cluster, release.namespace
    apply(cluster, namespace, deferrable_example())
    controller = release.component(
        "controller",
        tmp_path,
        executor="local",
        state_dir=str(tmp_path / "state"),
        log_format="text",
        **ports(),
    )
    triggerer = release.component("triggerer", tmp_path, log_format="text", **ports())
    with running(controller, triggerer):
        run = trigger(cluster, namespace, "example-deferrable")
        body = wait_run_finished(cluster, namespace, run, timeout=60)
        lease = get(cluster, namespace, "lease", PEERING)
        assert controller.process is not None
        leader = f"{socket.gethostname()}-{controller.process.pid}"
        # The controller identity records Events (Kube.emit_event swallows a 403, so look for them).
        # A run's Events are posted in the background after the status write that finished it, and a
        # stopped controller does not post them: wait for them while it runs.
        wait_for(
            lambda: {"TaskDeferred", "RunSucceeded"} <= event_reasons(cluster, namespace),
            "the controller identity's Events TaskDeferred and RunSucceeded",
        )
    assert lease["spec"]["holderIdentity"] == leader, "the controller leads through the chart's Lease Role"
    assert body["status"]["state"] == "success", body["status"]
    assert ti_states(body) == {"start": "success", "wait": "success", "done": "success"}
    assert body["status"]["taskInstances"]["wait"]["deferralCount"] >= 1, "wait went through deferred"
    assert_never_denied(controller, triggerer)


def test_the_controller_identity_creates_watches_deletes_task_pods_and_reads_their_logs(
    release: Release, tmp_path: Path
) -> None:
    cluster, namespace = release.cluster, release.namespace
    apply(
        cluster,
        namespace,
        dag(
            "pods-as-chart-identity",
            [
                container_task("first"),
                container_task("second", depends_on=["first"]),
                container_task("stuck", hold=True, executionTimeout="2s"),
            ],
        ),
    )
    controller = release.component("controller", tmp_path, log_format="text", **ports())
    with running(controller):
        run = trigger(cluster, namespace, "pods-as-chart-identity")
        body = wait_run_finished(cluster, namespace, run, timeout=60)
        stuck_pod = body["status"]["taskInstances"]["stuck"]["podName"]
        wait_for(
            lambda: stuck_pod not in pod_names(cluster, namespace),
            "the timed-out pod to be deleted by the controller identity",
            timeout=30,
        )
    assert ti_states(body) == {"first": "success", "second": "success", "stuck": "failed"}
    first_pod = get(cluster, namespace, "pod", body["status"]["taskInstances"]["first"]["podName"])
    assert first_pod["spec"]["serviceAccountName"] == TASK, "task pods run as the chart's task identity"
    # kwok keeps no container logs, so the node answers 404; a 403 would come from RBAC before that.
    logs = zonda(
        cluster, "logs", run, "first", "-n", namespace, "--kubeconfig", str(release.kubeconfigs["controller"])
    )
    output = logs.stdout + logs.stderr
    assert first_pod["metadata"]["name"] in output, "the run was read and its pods listed"
    assert not DENIED.search(output), output
    assert_never_denied(controller)


# ---------------------------------------------------------------------------- what they cannot do


def dagrun(release: Release) -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DagRun",
        "metadata": {"name": "sneaky"},
        "spec": {"dagName": "example-deferrable", "runType": "manual"},
    }


def pod(release: Release) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sneaky"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "serviceAccountName": TASK},
    }


def live_dag(release: Release) -> dict[str, Any]:
    """The DAG as stored, to PUT back whole (kubectl replace) onto the object or its status."""
    apply(release.cluster, release.namespace, load_example("example_deferrable"))
    body: dict[str, Any] = get(release.cluster, release.namespace, "dag", "example-deferrable")
    return body


HERE = "{namespace}"  # the release namespace, which the identities act in
ELSEWHERE = "default"  # a namespace the release does not watch
#: Mutations are server-side dry runs: authorised exactly like real ones, but harmless if allowed.
DRY_RUN = "--dry-run=server"


@pytest.mark.parametrize(
    ("identity", "command", "stdin", "allowed"),
    [
        # With rbac.readVariablesAndConnections (the default) the controller may `list` Secrets and
        # ConfigMaps to find the labelled variables and connections (helm/zonda/templates/_rbac.tpl);
        # nothing more: no get by name, no watch, no writes.
        pytest.param(
            "controller",
            ["get", "secret", "any-secret", "-n", HERE],
            None,
            False,
            id="the controller identity cannot get a Secret by name",
        ),
        pytest.param(
            "controller",
            ["create", "secret", "generic", "planted", "--from-literal=k=v", "-n", HERE, DRY_RUN],
            None,
            False,
            id="the controller identity cannot create Secrets",
        ),
        pytest.param(
            "controller",
            ["get", "secrets", "-n", HERE],
            None,
            True,
            id="the controller identity lists Secrets for variables and connections",
        ),
        pytest.param(
            "controller", ["get", "dags", "-n", HERE], None, True, id="the controller identity lists DAGs"
        ),
        pytest.param(
            "controller",
            ["get", "customresourcedefinitions"],
            None,
            False,
            id="the controller identity runs without any cluster-scoped grant",
        ),
        pytest.param(
            "controller",
            [
                "patch",
                "dag",
                "example-deferrable",
                "-n",
                HERE,
                "--type=merge",
                "-p",
                json.dumps({"spec": {"paused": True}}),
                DRY_RUN,
            ],
            live_dag,
            False,
            id="the controller identity cannot patch a DAG's spec",
        ),
        pytest.param(
            "controller",
            ["replace", "-n", HERE, "-f", "-", DRY_RUN],
            live_dag,
            False,
            id="the controller identity cannot update a DAG",
        ),
        pytest.param(
            "controller",
            ["replace", "--subresource=status", "-n", HERE, "-f", "-", DRY_RUN],
            live_dag,
            True,
            id="the controller identity updates a DAG's status",
        ),
        pytest.param(
            "controller",
            ["create", "-n", ELSEWHERE, "-f", "-", DRY_RUN],
            dagrun,
            False,
            id="the controller identity cannot create DagRuns in another namespace",
        ),
        pytest.param(
            "controller",
            ["create", "-n", HERE, "-f", "-", DRY_RUN],
            dagrun,
            True,
            id="the controller identity creates DagRuns in its namespace",
        ),
        pytest.param(
            "controller",
            ["create", "-n", HERE, "-f", "-", DRY_RUN],
            pod,
            True,
            id="the controller identity creates pods",
        ),
        pytest.param(
            "triggerer",
            ["create", "-n", HERE, "-f", "-", DRY_RUN],
            pod,
            False,
            id="the triggerer identity cannot create pods",
        ),
        pytest.param(
            "triggerer",
            ["get", "triggers", "-n", HERE],
            None,
            True,
            id="the triggerer identity lists Triggers",
        ),
        pytest.param(
            "triggerer",
            ["get", "dagruns", "-n", HERE],
            None,
            False,
            id="the triggerer identity cannot read DagRuns",
        ),
        pytest.param(
            "triggerer",
            ["get", "secrets", "-n", HERE],
            None,
            False,
            id="the triggerer identity cannot read Secrets",
        ),
    ],
)
def test_the_chart_identities_may_do_what_they_need_and_nothing_more(
    release: Release,
    identity: str,
    command: list[str],
    stdin: Callable[[Release], dict[str, Any]] | None,
    allowed: bool,
) -> None:
    """With the real tokens, through kubectl: a refusal must name the identity, so a broken token
    (401) or a malformed command cannot pass for least privilege."""
    body = stdin(release) if stdin else None
    args = [release.namespace if arg == HERE else arg for arg in command]
    result = release.cluster.kubectl(
        "--kubeconfig",
        str(release.kubeconfigs[identity]),
        *args,
        input=json.dumps(body) if body else None,
        check=False,
    )
    if allowed:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0, result.stdout
        assert f'User "{release.service_account(identity)}" cannot' in result.stderr, result.stderr


# ------------------------------------------------------------------ the chart's command lines

ELSEWHERE_TOO = "t-chart-other"


def served_namespaces(params: dict[str, Any]) -> set[str] | str:
    """The namespaces a parsed `zonda controller|triggerer` command line acts in ("all" or a set)."""
    if params.get("all_namespaces"):
        return "all"
    found = params.get("namespaces", params.get("namespace"))
    return {found} if isinstance(found, str) else set(found or ())


def parse_chart_command(cluster: Cluster, values: dict[str, Any], component: str) -> dict[str, Any]:
    """The chart's rendered arguments for `component`, parsed by the real `zonda` command."""
    rendered = run_helm(cluster, "template", RELEASE, str(CHART), "--namespace", "zonda", values=values)
    assert rendered.returncode == 0, rendered.stderr
    deployments = {
        doc["metadata"]["name"]: doc
        for doc in yaml.safe_load_all(rendered.stdout)
        if doc and doc["kind"] == "Deployment"
    }
    args = deployments[f"{RELEASE}-{component}"]["spec"]["template"]["spec"]["containers"][0]["args"]
    command = cli.main.commands[args[0]]
    with command.make_context(args[0], list(args[1:])) as context:
        return dict(context.params)


@pytest.mark.parametrize(
    ("values", "namespaces"),
    [
        pytest.param({}, {"zonda"}, id="a default install acts in the release namespace"),
        pytest.param(
            {"watch": {"namespaces": ["zonda", ELSEWHERE_TOO]}},
            {"zonda", ELSEWHERE_TOO},
            id="a namespace-list install acts in every listed namespace",
        ),
        pytest.param(
            {"watch": {"clusterWide": True}},
            "all",
            id="a cluster-wide install acts in all namespaces",
        ),
    ],
)
def test_the_chart_command_lines_mean_what_the_values_say(
    cluster: Cluster, values: dict[str, Any], namespaces: set[str] | str
) -> None:
    controller = parse_chart_command(cluster, values, "controller")
    triggerer = parse_chart_command(cluster, values, "triggerer")
    assert served_namespaces(controller) == namespaces
    assert served_namespaces(triggerer) == namespaces


@pytest.mark.parametrize(
    "shards",
    [pytest.param(1, id="one shard by default"), pytest.param(6, id="six shards when asked")],
)
def test_the_chart_gives_the_controller_and_the_triggerer_the_same_shard_count(
    cluster: Cluster, shards: int
) -> None:
    """The controller puts each Trigger in a shard, the triggerer serves shards 0..N-1: a Trigger in a
    shard beyond the triggerer's N is never run, and its task stays deferred."""
    values = {"triggerer": {"shards": shards}}
    assert parse_chart_command(cluster, values, "controller")["trigger_shards"] == shards
    assert parse_chart_command(cluster, values, "triggerer")["shards"] == shards


def test_the_task_identity_writes_and_reads_xcom_chunks_and_nothing_more(
    release: Release, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task runner's own code (`XComStore`, its small REST client) with a token of the chart's task
    ServiceAccount: a value written as XComChunks owned by a real DagRun and read back; no deletes."""
    from urllib.parse import urlsplit

    from controller.kube import rest
    from controller.xcom.backends import XComStore
    from zonda.resources.invocations import TaskInvocation

    cluster, namespace = release.cluster, release.namespace
    run = {**dagrun(release), "metadata": {"name": "xcom-owner"}}
    apply(cluster, namespace, run)
    uid = get(cluster, namespace, "dagrun", "xcom-owner")["metadata"]["uid"]
    token = cluster.kubectl("create", "token", TASK, "-n", namespace, "--duration=1h").stdout.strip()
    kubeconfig = write_token_kubeconfig(cluster.kubeconfig, token, tmp_path / "task.kubeconfig")
    at = "2024-01-02T00:00:00Z"
    invocation = TaskInvocation.from_wire({
        "dagName": "example-deferrable", "runName": "xcom-owner", "runUid": uid, "namespace": namespace,
        "runType": "manual", "taskId": "extract", "tryNumber": 1, "logicalDate": at,
        "dataIntervalStart": at, "dataIntervalEnd": at,
    })  # fmt: skip
    store = XComStore(kubeconfig=str(kubeconfig))
    value = ["row"] * 300_000  # 1.8 MB: three chunks
    reference = store.prepare(invocation, "return_value", value)
    assert XComStore(kubeconfig=str(kubeconfig)).load(reference) == value
    # As in a pod: no kubeconfig, the token and CA where the kubelet mounts them, the Service's address.
    mounted = tmp_path / "serviceaccount"
    mounted.mkdir()
    (mounted / "token").write_text(token)
    admin = json.loads(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]
    (mounted / "ca.crt").write_text(Path(admin["certificate-authority"]).read_text())
    server = urlsplit(admin["server"])
    monkeypatch.setattr(rest, "SERVICE_ACCOUNT_DIR", mounted)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(server.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    in_pod = XComStore()
    assert in_pod.load(reference) == value
    assert in_pod.kube().creds.token_file == str(mounted / "token")
    assert store.prepare(invocation, "return_value", value) == reference, "a retried write rewrites"
    # An invocation without the run's uid (none of the controller's): the runner looks the owner up.
    store.prepare(invocation.replace(run_uid=None), "rows", "r" * 5000)
    chunks = get(cluster, namespace, "xcomchunks")["items"]
    assert len(chunks) == 4 and {c["metadata"]["ownerReferences"][0]["uid"] for c in chunks} == {uid}

    def task_can(*args: str) -> bool:
        done = cluster.kubectl("--kubeconfig", str(kubeconfig), *args, "-n", namespace, check=False)
        return done.returncode == 0

    assert not task_can("delete", "xcomchunks", chunks[0]["metadata"]["name"], DRY_RUN)
    assert not task_can("get", "xcomchunks"), "chunks are read by name, never listed"
    assert task_can("get", "dagruns"), "earlier runs are read for include_prior_dates"
    assert not task_can("delete", "dagrun", "xcom-owner", DRY_RUN)
    assert not task_can("get", "pods")
