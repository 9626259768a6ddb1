"""The Helm chart `helm/zonda`, rendered by the real `helm` binary (no cluster needed).

What is real: helm's lint, its template engine and its values.schema.json validation. What is not:
nothing is sent to an apiserver here (tests/cluster/test_helm_rbac.py does that).

The RBAC tests compute each ServiceAccount's *effective* grants from the rendered Roles, ClusterRoles
and their bindings, and compare them with the exact least-privilege tables below: a permission added
to the chart without being added here fails, and so does one taken away.

Without the helm binary these tests skip locally (with the reason) but FAIL under CI (`tests.tools`):
CI must never pass by running nothing.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devtools.control_plane_files import ClusterError, binaries_dir
from tests.paths import REPO_ROOT
from tests.tools import tool_missing

REPO = REPO_ROOT
CHART = REPO / "helm" / "zonda"
RELEASE = "zonda"
RELEASE_NAMESPACE = "zonda-system"

Manifest = dict[str, Any]
#: (namespace or "*" for every namespace, apiGroup, resource, verb)
Grant = tuple[str, str, str, str]


# ------------------------------------------------------------------------------------------ helm


def find_helm() -> Path | str:
    """The helm binary, or why it is missing (as a string)."""
    try:
        helm = binaries_dir() / "helm"
    except ClusterError as error:
        return f"no helm binary: {error}"
    return helm if helm.is_file() else f"no helm binary at {helm} (run hack/build-cluster-binaries.sh)"


@pytest.fixture(scope="session")
def helm() -> Path:
    found = find_helm()
    if isinstance(found, Path):
        return found
    tool_missing(found)


def run_helm(
    helm: Path, *args: str, values: dict[str, Any] | None = None, tmp_path: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs helm with `values` written to a file (-f keeps their YAML types: "two" stays a string)."""
    command = [str(helm), *args]
    if values is not None:
        assert tmp_path is not None
        values_file = tmp_path / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        command += ["-f", str(values_file)]
    env = dict(
        os.environ,
        HELM_CACHE_HOME=str(tmp_path or "/tmp") + "/.helm-cache",
        HELM_CONFIG_HOME=str(tmp_path or "/tmp") + "/.helm-config",
    )
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def render(helm: Path, tmp_path: Path, values: dict[str, Any] | None = None) -> list[Manifest]:
    result = run_helm(
        helm,
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        RELEASE_NAMESPACE,
        values=values or {},
        tmp_path=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def of_kind(manifests: Iterable[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def named(manifests: Iterable[Manifest], kind: str, name: str) -> Manifest:
    matches = [m for m in of_kind(manifests, kind) if m["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


def container(manifests: Iterable[Manifest], component: str) -> dict[str, Any]:
    deployment = named(manifests, "Deployment", f"zonda-{component}")
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def env_of(manifests: Iterable[Manifest], component: str) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(manifests, component)["env"]}


# ------------------------------------------------------------------------------------------ RBAC


def grants_of(
    manifests: list[Manifest], service_account: str, sa_namespace: str, subject: Manifest | None = None
) -> set[Grant]:
    """Everything the ServiceAccount (or another RBAC `subject`) may do, from the rendered (Cluster)Roles
    and their bindings."""
    roles = {
        (m["metadata"].get("namespace", "*"), m["kind"], m["metadata"]["name"]): m["rules"]
        for m in manifests
        if m["kind"] in ("Role", "ClusterRole")
    }
    grants: set[Grant] = set()
    for binding in manifests:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        wanted = subject or {"kind": "ServiceAccount", "name": service_account, "namespace": sa_namespace}
        if wanted not in binding["subjects"]:
            continue
        scope = binding["metadata"].get("namespace", "*")
        ref = binding["roleRef"]
        role_namespace = scope if ref["kind"] == "Role" else "*"
        rules = roles[(role_namespace, ref["kind"], ref["name"])]
        for rule in rules:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        grants.add((scope, group, resource, verb))
    return grants


def table(namespace: str, rows: dict[tuple[str, str], str]) -> set[Grant]:
    """{(group, resource): "verb verb"} in one namespace, as grants."""
    return {
        (namespace, group, resource, verb)
        for (group, resource), verbs in rows.items()
        for verb in verbs.split()
    }


CONTROLLER_RULES = {
    ("zonda.dev", "dags"): "get list watch",
    ("zonda.dev", "dags/status"): "patch update",
    ("zonda.dev", "dagruns"): "get list watch create delete",
    ("zonda.dev", "dagruns/status"): "patch update",
    ("zonda.dev", "dagrunshards"): "get list watch create delete",
    ("zonda.dev", "dagrunshards/status"): "update",
    ("zonda.dev", "triggers"): "get list watch create delete",
    ("zonda.dev", "backfills"): "get list watch",
    ("zonda.dev", "backfills/status"): "patch update",
    ("zonda.dev", "pools"): "get list watch",
    ("zonda.dev", "pools/status"): "patch update",
    ("zonda.dev", "assets"): "get list watch create",
    ("zonda.dev", "assets/status"): "patch update",
    ("zonda.dev", "assetevents"): "get list watch create delete",
    ("zonda.dev", "xcomchunks"): "get",  # a mapped KubernetesPodOperator's items in the XCom backend
    ("", "pods"): "get list watch create delete patch",  # patch: only to remove zonda.dev/try-tracking
    ("", "pods/log"): "get",
    ("", "configmaps"): "list",  # rbac.readVariablesAndConnections: Variables and Connections
    ("", "secrets"): "list",
    ("", "events"): "create patch",
    ("events.k8s.io", "events"): "create patch",
}
CONTROLLER_LEASES = {("coordination.k8s.io", "leases"): "get list watch create update patch delete"}
CRD_READ = {("apiextensions.k8s.io", "customresourcedefinitions"): "get list watch"}
NAMESPACE_READ = {("", "namespaces"): "get list watch"}
TASK_POD_RULES = {
    ("", "pods"): "get list watch create delete patch", ("", "pods/log"): "get",
    ("", "configmaps"): "list", ("", "secrets"): "list",
}  # fmt: skip
TRIGGERER_RULES = {
    ("zonda.dev", "triggers"): "get list watch",
    ("zonda.dev", "triggers/status"): "patch update",
    ("zonda.dev", "assetevents"): "create",
    ("", "events"): "create",
    ("events.k8s.io", "events"): "create",
}
TRIGGERER_LEASES = {("coordination.k8s.io", "leases"): "get list watch create update patch delete"}


def controller_grants(namespaces: Iterable[str]) -> set[Grant]:
    grants = table(RELEASE_NAMESPACE, CONTROLLER_LEASES)
    for namespace in namespaces:
        grants |= table(namespace, CONTROLLER_RULES)
    return grants


def triggerer_grants(namespaces: Iterable[str]) -> set[Grant]:
    grants = table(RELEASE_NAMESPACE, TRIGGERER_LEASES)
    for namespace in namespaces:
        grants |= table(namespace, TRIGGERER_RULES)
    return grants


JOB_READ_RULE = {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]}
CONFIGMAP_READ_RULE = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}

#: What the task runner needs where DagRuns live: XComChunks (the Kubernetes XCom backend), reading
#: DagRuns (include_prior_dates) and listing AssetEvents (inlet_events).
TASK_READS = {("zonda.dev", "dagruns"): "get list", ("zonda.dev", "assetevents"): "list"}
TASK_XCOM = {**TASK_READS, ("zonda.dev", "xcomchunks"): "create patch get"}

RBAC_CASES = [
    pytest.param(
        {},
        controller_grants([RELEASE_NAMESPACE]),
        triggerer_grants([RELEASE_NAMESPACE]),
        table(RELEASE_NAMESPACE, TASK_XCOM),
        id="by default both components act in the release namespace only",
    ),
    pytest.param(
        {"watch": {"namespaces": ["team-a", "team-b"]}},
        controller_grants(["team-a", "team-b"]),
        triggerer_grants(["team-a", "team-b"]),
        set(),
        id="a namespace list grants each listed namespace and leases stay in the release namespace",
    ),
    pytest.param(
        {"watch": {"clusterWide": True}},
        controller_grants(["*"]) | table("*", NAMESPACE_READ),
        triggerer_grants(["*"]),
        table("*", TASK_XCOM),
        id="cluster-wide mode grants the same rules in every namespace plus reading namespaces",
    ),
    pytest.param(
        {"rbac": {"readCustomResourceDefinitions": True}},
        controller_grants([RELEASE_NAMESPACE]) | table("*", CRD_READ),
        triggerer_grants([RELEASE_NAMESPACE]),
        table(RELEASE_NAMESPACE, TASK_XCOM),
        id="reading CRDs, cluster-wide, is granted only when asked for",
    ),
    pytest.param(
        {"triggerer": {"extraRules": [JOB_READ_RULE]}},
        controller_grants([RELEASE_NAMESPACE]),
        triggerer_grants([RELEASE_NAMESPACE])
        | table(RELEASE_NAMESPACE, {("batch", "jobs"): "get list watch"}),
        table(RELEASE_NAMESPACE, TASK_XCOM),
        id="triggerer extra rules are added to what the triggerer may do and to nothing else",
    ),
    pytest.param(
        {"taskPods": {"namespace": "tasks"}},
        controller_grants([RELEASE_NAMESPACE]) | table("tasks", TASK_POD_RULES),
        triggerer_grants([RELEASE_NAMESPACE]),
        table(RELEASE_NAMESPACE, TASK_XCOM),
        id="a separate task namespace gives the controller pods there and nothing else; task pods there "
        "write XComs where the runs are",
    ),
    pytest.param(
        {"taskPods": {"rbac": {"rules": [CONFIGMAP_READ_RULE]}}},
        controller_grants([RELEASE_NAMESPACE]),
        triggerer_grants([RELEASE_NAMESPACE]),
        table(RELEASE_NAMESPACE, {("", "configmaps"): "get", **TASK_XCOM}),
        id="task pods get exactly the rules their values grant, and their XComs",
    ),
    pytest.param(
        {"xcom": {"backend": "fsspec", "backendUrl": "s3://bucket/xcom"}},
        controller_grants([RELEASE_NAMESPACE]),
        triggerer_grants([RELEASE_NAMESPACE]),
        table(RELEASE_NAMESPACE, TASK_READS),
        id="with object storage for XComs, task pods only read DagRuns and AssetEvents",
    ),
    pytest.param(
        {"taskPods": {"rbac": {"dagDependencies": True}}},
        controller_grants([RELEASE_NAMESPACE]),
        triggerer_grants([RELEASE_NAMESPACE]),
        table(
            RELEASE_NAMESPACE,
            {
                ("zonda.dev", "dagruns"): "create get list watch",
                ("zonda.dev", "dags"): "get",
                ("zonda.dev", "dagruns/status"): "update",
            },
        )
        | table(RELEASE_NAMESPACE, TASK_XCOM),
        id="DAG dependencies let task pods trigger and read DagRuns and nothing else (beyond XComs)",
    ),
]


@pytest.mark.parametrize(("values", "controller", "triggerer", "task"), RBAC_CASES)
def test_each_identity_gets_exactly_its_least_privilege_grants(
    helm: Path,
    tmp_path: Path,
    values: dict[str, Any],
    controller: set[Grant],
    triggerer: set[Grant],
    task: set[Grant],
) -> None:
    manifests = render(helm, tmp_path, values)
    task_namespace = values.get("taskPods", {}).get("namespace") or RELEASE_NAMESPACE
    assert grants_of(manifests, "zonda-controller", RELEASE_NAMESPACE) == controller
    assert grants_of(manifests, "zonda-triggerer", RELEASE_NAMESPACE) == triggerer
    assert grants_of(manifests, "zonda-task", task_namespace) == task


@pytest.mark.parametrize(
    "values", [case.values[0] for case in RBAC_CASES[:3]], ids=["default", "namespace list", "cluster-wide"]
)
def test_no_rule_uses_wildcards_and_secrets_or_configmaps_are_only_listed_by_the_controller(
    helm: Path, tmp_path: Path, values: dict[str, Any]
) -> None:
    manifests = render(helm, tmp_path, values)
    for role in of_kind(manifests, "Role") + of_kind(manifests, "ClusterRole"):
        name = role["metadata"]["name"]
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], f"{name}: wildcard in {field}"
            if {"secrets", "configmaps"} & set(rule["resources"]):
                assert "controller" in name and rule["verbs"] == ["list"], name
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), name


def test_without_variables_and_connections_no_rule_touches_secrets_or_configmaps(
    helm: Path, tmp_path: Path
) -> None:
    manifests = render(helm, tmp_path, {"rbac": {"readVariablesAndConnections": False}})
    for role in of_kind(manifests, "Role") + of_kind(manifests, "ClusterRole"):
        for rule in role["rules"]:
            assert not {"secrets", "configmaps"} & set(rule["resources"]), role["metadata"]["name"]


def test_the_controller_writes_dags_and_dagruns_only_through_their_status(helm: Path, tmp_path: Path) -> None:
    grants = grants_of(render(helm, tmp_path), "zonda-controller", RELEASE_NAMESPACE)
    writes = {"update", "patch"}
    for resource in ("dags", "dagruns"):
        main_verbs = {verb for (_, group, res, verb) in grants if (group, res) == ("zonda.dev", resource)}
        status_verbs = {verb for (_, _, res, verb) in grants if res == f"{resource}/status"}
        assert not main_verbs & writes
        assert status_verbs & writes


# ------------------------------------------------------------------------------- namespace modes


@pytest.mark.parametrize(
    ("values", "scope_args", "task_account_namespaces"),
    [
        pytest.param(
            {},
            [f"--namespace={RELEASE_NAMESPACE}"],
            [RELEASE_NAMESPACE],
            id="by default the components are scoped to the release namespace",
        ),
        pytest.param(
            {"watch": {"namespaces": ["team-a", "team-b"]}},
            ["--namespace=team-a", "--namespace=team-b"],
            ["team-a", "team-b"],
            id="a namespace list scopes to each namespace and puts a task account in each",
        ),
        pytest.param(
            {"watch": {"clusterWide": True}},
            ["--all-namespaces"],
            [RELEASE_NAMESPACE],
            id="cluster-wide mode watches all namespaces with the task account in the release one",
        ),
        pytest.param(
            {"watch": {"namespaces": ["team-a"]}, "taskPods": {"namespace": "tasks"}},
            ["--namespace=team-a"],
            ["tasks"],
            id="a task namespace holds the only task account",
        ),
    ],
)
def test_namespace_modes_scope_the_arguments_and_the_task_accounts(
    helm: Path,
    tmp_path: Path,
    values: dict[str, Any],
    scope_args: list[str],
    task_account_namespaces: list[str],
) -> None:
    manifests = render(helm, tmp_path, values)
    for component in ("controller", "triggerer"):
        args = container(manifests, component)["args"]
        assert [a for a in args if a.startswith(("--namespace", "--all-namespaces"))] == scope_args
    accounts = [
        sa["metadata"]["namespace"]
        for sa in of_kind(manifests, "ServiceAccount")
        if sa["metadata"]["name"] == "zonda-task"
    ]
    assert accounts == task_account_namespaces


def test_cluster_wide_and_a_namespace_list_are_exclusive(helm: Path, tmp_path: Path) -> None:
    result = run_helm(
        helm,
        "template",
        RELEASE,
        str(CHART),
        tmp_path=tmp_path,
        values={"watch": {"clusterWide": True, "namespaces": ["team-a"]}},
    )
    assert result.returncode != 0
    assert "watch" in result.stderr


# ------------------------------------------------------------------------------------ workloads


def test_default_install_renders_every_kind_it_needs(helm: Path, tmp_path: Path) -> None:
    kinds = sorted(m["kind"] for m in render(helm, tmp_path))
    assert {kind: kinds.count(kind) for kind in set(kinds)} == {
        "Deployment": 3,
        "ServiceAccount": 4,
        "Service": 3,
        "PodDisruptionBudget": 2,
        "Role": 7,  # with the HITL responders' Role, unbound
        "RoleBinding": 6,
    }, "a default (namespaced) install has nothing cluster-scoped"


def test_the_controller_runs_with_leader_election_probes_and_json_logs(helm: Path, tmp_path: Path) -> None:
    controller = container(render(helm, tmp_path), "controller")
    assert controller["image"] == "zonda:0.1.0"
    assert controller["args"][0] == "controller"
    for arg in (
        "--executor=kubernetes",
        "--peering=zonda",
        "--metrics-port=8080",
        "--health-port=8081",
        "--log-format=json",
    ):
        assert arg in controller["args"]
    assert controller["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert controller["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert {p["name"]: p["containerPort"] for p in controller["ports"]} == {"metrics": 8080, "health": 8081}


@pytest.mark.parametrize(
    ("values", "controller_replicas", "triggerer_replicas", "triggerer_args"),
    [
        pytest.param({}, 1, 1, ["--shards=1", "--capacity=1000"], id="one replica of each by default"),
        pytest.param(
            {"controller": {"replicas": 3}, "triggerer": {"replicas": 2, "shards": 8, "capacity": 50}},
            3,
            2,
            ["--shards=8", "--capacity=50"],
            id="replicas shards and capacity reach the deployments",
        ),
    ],
)
def test_replicas_and_triggerer_sharding(
    helm: Path,
    tmp_path: Path,
    values: dict[str, Any],
    controller_replicas: int,
    triggerer_replicas: int,
    triggerer_args: list[str],
) -> None:
    manifests = render(helm, tmp_path, values)
    assert named(manifests, "Deployment", "zonda-controller")["spec"]["replicas"] == controller_replicas
    assert named(manifests, "Deployment", "zonda-triggerer")["spec"]["replicas"] == triggerer_replicas
    args = container(manifests, "triggerer")["args"]
    assert args[0] == "triggerer"
    assert [a for a in args if a.startswith(("--shards", "--capacity"))] == triggerer_args


@pytest.mark.parametrize(
    ("values", "arg"), [({}, "--shards=1"), ({"controller": {"shards": 4}}, "--shards=4")]
)
def test_controller_shards_reach_the_controller(
    helm: Path, tmp_path: Path, values: dict[str, Any], arg: str
) -> None:
    args = container(render(helm, tmp_path, values), "controller")["args"]
    assert [a for a in args if a.startswith("--shards")] == [arg]


DEFAULT_TASK_RESOURCES = '{"limits":{"memory":"512Mi"},"requests":{"cpu":"100m","memory":"128Mi"}}'


@pytest.mark.parametrize(
    ("values", "expected_env"),
    [
        pytest.param(
            {},
            {
                "ZONDA_TASK_IMAGE": "zonda:0.1.0",
                "ZONDA_TASK_SERVICE_ACCOUNT": "zonda-task",
                "ZONDA_TASK_RESOURCES": DEFAULT_TASK_RESOURCES,
            },
            id="task pods default to the controller image and the task account",
        ),
        pytest.param(
            {
                "taskPods": {
                    "image": "registry.example/etl:7",
                    "namespace": "tasks",
                    "serviceAccount": {"name": "etl-runner"},
                    "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
                }
            },
            {
                "ZONDA_TASK_IMAGE": "registry.example/etl:7",
                "ZONDA_TASK_SERVICE_ACCOUNT": "etl-runner",
                "ZONDA_TASK_RESOURCES": '{"limits":{"memory":"512Mi"},"requests":{"cpu":"2","memory":"4Gi"}}',
                "ZONDA_TASK_NAMESPACE": "tasks",
            },
            id="custom task pod values reach the controller merged over the defaults",
        ),
        pytest.param(
            {
                "image": {"repository": "registry.example/zonda", "tag": "1.2.3"},
                "imagePullSecrets": [{"name": "regcred"}],
            },
            {
                "ZONDA_TASK_IMAGE": "registry.example/zonda:1.2.3",
                "ZONDA_TASK_SERVICE_ACCOUNT": "zonda-task",
                "ZONDA_TASK_RESOURCES": DEFAULT_TASK_RESOURCES,
                "ZONDA_TASK_IMAGE_PULL_SECRETS": '[{"name":"regcred"}]',
            },
            id="the image and its pull secrets are passed on to task pods",
        ),
        pytest.param(
            {"taskPods": {"nodeSelector": {"zonda.dev/node": "real"}}},
            {
                "ZONDA_TASK_IMAGE": "zonda:0.1.0",
                "ZONDA_TASK_SERVICE_ACCOUNT": "zonda-task",
                "ZONDA_TASK_RESOURCES": DEFAULT_TASK_RESOURCES,
                "ZONDA_TASK_NODE_SELECTOR": '{"zonda.dev/node":"real"}',
            },
            id="a task node selector reaches the controller as JSON",
        ),
    ],
)
def test_task_pod_defaults_reach_the_controller(
    helm: Path, tmp_path: Path, values: dict[str, Any], expected_env: dict[str, str]
) -> None:
    env = env_of(render(helm, tmp_path, values), "controller")
    assert {k: v for k, v in env.items() if k.startswith("ZONDA_TASK_")} == expected_env


@pytest.mark.parametrize(
    ("values", "expected_env"),
    [
        pytest.param(
            {},
            {"ZONDA_XCOM_BACKEND": "kubernetes", "ZONDA_XCOM_MAX_BYTES": "67108864"},
            id="by default XComChunks in the cluster",
        ),
        pytest.param(
            {"xcom": {"backend": "none"}},
            {"ZONDA_XCOM_BACKEND": "none", "ZONDA_XCOM_MAX_BYTES": "67108864"},
            id="no backend: large values fail",
        ),
        pytest.param(
            {"xcom": {"backend": "fsspec", "backendUrl": "s3://bucket/xcom", "maxBytes": 1000000}},
            {
                "ZONDA_XCOM_BACKEND": "fsspec",
                "ZONDA_XCOM_BACKEND_URL": "s3://bucket/xcom",
                "ZONDA_XCOM_MAX_BYTES": "1000000",
            },
            id="an object-storage backend and a maximum",
        ),
    ],
)
def test_xcom_settings_reach_the_controller(
    helm: Path, tmp_path: Path, values: dict[str, Any], expected_env: dict[str, str]
) -> None:
    env = env_of(render(helm, tmp_path, values), "controller")
    assert {k: v for k, v in env.items() if k.startswith("ZONDA_XCOM_")} == expected_env


def test_dag_dependencies_mount_the_task_accounts_token(helm: Path, tmp_path: Path) -> None:
    values = {"taskPods": {"rbac": {"dagDependencies": True}}, "xcom": {"backend": "none"}}
    manifests = render(helm, tmp_path, values)
    assert named(manifests, "ServiceAccount", "zonda-task")["automountServiceAccountToken"] is True


def test_a_custom_task_account_gets_a_token_and_its_xcom_grants_only_for_the_kubernetes_backend(
    helm: Path, tmp_path: Path
) -> None:
    manifests = render(helm, tmp_path, {"taskPods": {"serviceAccount": {"name": "etl-runner"}}})
    account = named(manifests, "ServiceAccount", "etl-runner")
    assert account["automountServiceAccountToken"] is True
    assert grants_of(manifests, "etl-runner", RELEASE_NAMESPACE) == table(RELEASE_NAMESPACE, TASK_XCOM)
    values = {"taskPods": {"serviceAccount": {"name": "etl-runner"}}, "xcom": {"backend": "none"}}
    account = named(render(helm, tmp_path, values), "ServiceAccount", "etl-runner")
    assert account["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    ("values", "image"),
    [
        pytest.param({"image": {"tag": "9.9.9"}}, "zonda:9.9.9", id="a tag overrides the app version"),
        pytest.param(
            {"image": {"digest": "sha256:" + "a" * 64}},
            "zonda@sha256:" + "a" * 64,
            id="a digest pins the image and wins over the tag",
        ),
    ],
)
def test_image_reference(helm: Path, tmp_path: Path, values: dict[str, Any], image: str) -> None:
    manifests = render(helm, tmp_path, values)
    assert {container(manifests, c)["image"] for c in ("controller", "triggerer")} == {image}


def test_scheduling_and_environment_values_pass_through(helm: Path, tmp_path: Path) -> None:
    toleration = {"key": "dedicated", "operator": "Equal", "value": "zonda", "effect": "NoSchedule"}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["ops"]}]}
                ]
            }
        }
    }
    component = {
        "nodeSelector": {"pool": "ops"},
        "tolerations": [toleration],
        "affinity": affinity,
        "extraEnv": [{"name": "ZONDA_EXTRA", "value": "1"}],
        "podAnnotations": {"a": "b"},
    }
    manifests = render(
        helm,
        tmp_path,
        {"controller": component, "triggerer": component, "imagePullSecrets": [{"name": "regcred"}]},
    )
    for name in ("controller", "triggerer"):
        pod = named(manifests, "Deployment", f"zonda-{name}")["spec"]["template"]
        assert pod["spec"]["nodeSelector"] == {"pool": "ops"}
        assert pod["spec"]["tolerations"] == [toleration]
        assert pod["spec"]["affinity"] == affinity
        assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
        assert pod["metadata"]["annotations"] == {"a": "b"}
        assert env_of(manifests, name)["ZONDA_EXTRA"] == "1"


def test_pods_meet_the_restricted_pod_security_standard(helm: Path, tmp_path: Path) -> None:
    for deployment in of_kind(render(helm, tmp_path), "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}]
        for c in pod["containers"]:
            context = c["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert context["readOnlyRootFilesystem"] is True
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}
            assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
            assert c["resources"]["requests"] and c["resources"]["limits"]


def test_every_object_carries_the_standard_labels(helm: Path, tmp_path: Path) -> None:
    values = {"watch": {"namespaces": ["team-a"]}, "commonLabels": {"team": "data"}}
    manifests = render(helm, tmp_path, values)
    for manifest in manifests:
        labels = manifest["metadata"]["labels"]
        assert labels["helm.sh/chart"] == "zonda-0.1.0"
        assert labels["app.kubernetes.io/name"] == "zonda"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/version"] == "0.1.0"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["team"] == "data"


@pytest.mark.parametrize(
    ("values", "kinds"),
    [
        pytest.param(
            {"metrics": {"serviceMonitor": {"enabled": True}}},
            {"ServiceMonitor": 1, "Service": 3},
            id="a ServiceMonitor is rendered only when asked for",
        ),
        pytest.param(
            {"metrics": {"service": {"enabled": False}}},
            {"ServiceMonitor": 0, "Service": 1},
            id="the metrics services can be turned off",
        ),
        pytest.param(
            {
                "controller": {"podDisruptionBudget": {"enabled": False}},
                "triggerer": {"podDisruptionBudget": {"enabled": False}},
            },
            {"PodDisruptionBudget": 0},
            id="disruption budgets can be turned off",
        ),
        pytest.param(
            {"triggerer": {"enabled": False}},
            {"Deployment": 2, "PodDisruptionBudget": 1, "Service": 2, "ServiceAccount": 3},
            id="a disabled triggerer leaves nothing of itself behind",
        ),
    ],
)
def test_optional_objects(helm: Path, tmp_path: Path, values: dict[str, Any], kinds: dict[str, int]) -> None:
    manifests = render(helm, tmp_path, values)
    assert {kind: len(of_kind(manifests, kind)) for kind in kinds} == kinds


HITL_RESPONDER = {
    ("zonda.dev", "dagruns"): "get",
    ("zonda.dev", "triggers"): "get",
    ("zonda.dev", "triggers/status"): "patch",
    ("events.k8s.io", "events"): "create",
}


@pytest.mark.parametrize(
    ("values", "scope"),
    [
        pytest.param({}, RELEASE_NAMESPACE, id="namespaced: a Role and RoleBinding where the runs are"),
        pytest.param({"watch": {"clusterWide": True}}, "*", id="cluster-wide: a ClusterRoleBinding"),
    ],
)
def test_hitl_responders_may_answer_and_nothing_more(
    helm: Path, tmp_path: Path, values: dict[str, Any], scope: str
) -> None:
    approvers = {"kind": "Group", "name": "approvers", "apiGroup": "rbac.authorization.k8s.io"}
    unbound = render(helm, tmp_path, values)
    assert grants_of(unbound, "", "", subject=approvers) == set()
    manifests = render(helm, tmp_path, {**values, "hitl": {"responders": [approvers]}})
    assert grants_of(manifests, "", "", subject=approvers) == table(scope, HITL_RESPONDER)


def test_a_disabled_triggerer_has_no_identity_and_no_rules(helm: Path, tmp_path: Path) -> None:
    manifests = render(helm, tmp_path, {"triggerer": {"enabled": False}})
    assert [m["metadata"]["name"] for m in manifests if "triggerer" in m["metadata"]["name"]] == []
    assert grants_of(manifests, "zonda-triggerer", RELEASE_NAMESPACE) == set()


def test_service_monitor_selects_both_metrics_services(helm: Path, tmp_path: Path) -> None:
    manifests = render(helm, tmp_path, {"metrics": {"serviceMonitor": {"enabled": True}}})
    selector = of_kind(manifests, "ServiceMonitor")[0]["spec"]["selector"]["matchLabels"]
    for service in of_kind(manifests, "Service"):
        assert selector.items() <= service["metadata"]["labels"].items()


# --------------------------------------------------------------------------------------- schema


@pytest.mark.parametrize(
    ("values", "mentioned"),
    [
        pytest.param({"controller": {"replicas": "two"}}, "replicas", id="replicas must be a number"),
        pytest.param({"controler": {"replicas": 2}}, "controler", id="a misspelt key is refused"),
        pytest.param({"logging": {"format": "xml"}}, "format", id="the log format is json or text"),
        pytest.param(
            {"controller": {"executor": "celery"}}, "executor", id="the executor is kubernetes or local"
        ),
        pytest.param({"triggerer": {"shards": 0}}, "shards", id="there is at least one shard"),
        pytest.param({"controller": {"shards": 0}}, "shards", id="the controller has at least one shard"),
        pytest.param({"watch": {"namespaces": ["Team_A"]}}, "namespaces", id="namespaces are DNS labels"),
        pytest.param(
            {"securityContext": {"allowPrivilegeEscalation": True, "capabilities": {"drop": ["ALL"]}}},
            "allowPrivilegeEscalation",
            id="privilege escalation cannot be turned on",
        ),
        pytest.param(
            {"podSecurityContext": {"runAsNonRoot": False}}, "runAsNonRoot", id="pods cannot run as root"
        ),
        pytest.param(
            {"triggerer": {"extraRules": [{"resources": ["jobs"]}]}}, "verbs", id="an extra rule needs verbs"
        ),
        pytest.param(
            {"xcom": {"backend": "fsspec", "backendUrl": "bucket/xcom"}},
            "backendUrl",
            id="the XCom backend is a URL with its scheme",
        ),
        pytest.param({"xcom": {"backend": "etcd"}}, "backend", id="the XCom backend is one Zonda has"),
    ],
)
def test_the_schema_refuses_bad_values(
    helm: Path, tmp_path: Path, values: dict[str, Any], mentioned: str
) -> None:
    result = run_helm(helm, "template", RELEASE, str(CHART), values=values, tmp_path=tmp_path)
    assert result.returncode != 0, "helm accepted values the schema should refuse"
    assert "schema" in result.stderr
    assert mentioned in result.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"xcom": {"backendUrl": "s3://bucket/xcom"}},
            "xcom.backendUrl is set but xcom.backend is kubernetes: set xcom.backend=fsspec",
            id="a URL with the Kubernetes backend would be ignored: refused",
        ),
        pytest.param(
            {"xcom": {"backend": "fsspec"}},
            "xcom.backend=fsspec needs xcom.backendUrl",
            id="the fsspec backend needs its URL",
        ),
    ],
)
def test_the_xcom_backend_and_its_url_go_together(
    helm: Path, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    result = run_helm(helm, "template", RELEASE, str(CHART), values=values, tmp_path=tmp_path)
    assert result.returncode != 0 and message in result.stderr, result.stderr


# ----------------------------------------------------------------------------------- lint, CRDs


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="the default values lint clean"),
        pytest.param({"watch": {"namespaces": ["team-a", "team-b"]}}, id="a namespace list lints clean"),
        pytest.param(
            {"watch": {"clusterWide": True}, "metrics": {"serviceMonitor": {"enabled": True}}},
            id="cluster-wide mode with a ServiceMonitor lints clean",
        ),
    ],
)
@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_helm_lint_is_clean(helm: Path, tmp_path: Path, values: dict[str, Any], strict: bool) -> None:
    result = run_helm(
        helm,
        "lint",
        str(CHART),
        "--namespace",
        RELEASE_NAMESPACE,
        *(["--strict"] if strict else []),
        values=values,
        tmp_path=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


def test_chart_crds_are_byte_identical_to_the_generated_ones() -> None:
    generated = {p.name: p.read_bytes() for p in sorted((REPO / "crds").glob("*.yaml"))}
    in_chart = {p.name: p.read_bytes() for p in sorted((CHART / "crds").glob("*.yaml"))}
    assert in_chart.keys() == generated.keys(), "copy crds/*.yaml to helm/zonda/crds/"
    for name, content in generated.items():
        assert in_chart[name] == content, f"helm/zonda/crds/{name} differs from crds/{name}: copy it again"
    names = {yaml.safe_load(content)["metadata"]["name"] for content in in_chart.values()}
    assert {"dags.zonda.dev", "dagruns.zonda.dev", "triggers.zonda.dev"} <= names


def test_zonda_up_grants_task_pods_what_the_chart_grants_them_by_default(helm: Path, tmp_path: Path) -> None:
    """`zonda up --real-node` applies its own task ServiceAccount (no chart there): the chart's rules."""
    from controller.devtools import task_rbac

    roles = [
        role
        for role in of_kind(render(helm, tmp_path), "Role")
        if role["metadata"]["name"].endswith("task-xcom")
    ]
    assert roles, "the chart renders a task-xcom Role"
    for role in roles:
        assert role["rules"] == task_rbac.TASK_RULES
    kinds = [item["kind"] for item in task_rbac.task_rbac_manifests("default")]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding"]
