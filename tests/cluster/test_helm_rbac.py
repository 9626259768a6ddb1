"""The Helm chart on a real apiserver: it is accepted, installs, and its identities may do exactly
what they need, proven by the apiserver's own RBAC authorizer through impersonation
(`kubectl auth can-i --as=system:serviceaccount:NS:NAME`), not by reading the rendered YAML.

What is real: helm, kubectl, the apiserver with RBAC on, our CRDs (installed by the `cluster`
fixture, so the chart is installed with --skip-crds). What is not: the pods' containers (kwok), so
nothing here proves the image runs; the identities' permissions are what is tested.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devtools.devcluster import Cluster
from tests.cluster.zonda_processes import release_task_pods

CHART = Path(__file__).resolve().parents[2] / "helm" / "zonda"
RELEASE = "zonda"
#: A namespace no install here watches.
OTHER = "default"


@dataclass(frozen=True)
class Install:
    """A release of the chart: its namespace and the kubectl/helm to talk about it."""

    cluster: Cluster
    namespace: str

    def can_i(
        self,
        identity: str,
        verb: str,
        resource: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> bool:
        """The apiserver's answer for the chart's ServiceAccount `zonda-<identity>`."""
        service_account = f"system:serviceaccount:{self.namespace}:zonda-{identity}"
        args = [
            "auth",
            "can-i",
            verb,
            resource,
            f"--as={service_account}",
            "--namespace",
            namespace or self.namespace,
        ]
        if subresource:
            args.append(f"--subresource={subresource}")
        result = self.cluster.kubectl(*args, check=False)
        answer = result.stdout.strip()
        assert answer in ("yes", "no"), f"kubectl auth can-i: {result.stdout}{result.stderr}"
        return answer == "yes"


def run_helm(
    cluster: Cluster, *args: str, values: dict[str, Any] | None = None
) -> subprocess.CompletedProcess[str]:
    helm = cluster.bin_dir / "helm"
    assert helm.is_file(), f"no helm in {cluster.bin_dir}: run hack/build-cluster-binaries.sh"
    with tempfile.TemporaryDirectory(prefix="zonda-helm-") as home:
        command = [str(helm), "--kubeconfig", str(cluster.kubeconfig), *args]
        if values is not None:
            values_file = Path(home) / "values.yaml"
            values_file.write_text(yaml.safe_dump(values))
            command += ["-f", str(values_file)]
        env = dict(
            os.environ,
            HELM_CACHE_HOME=f"{home}/cache",
            HELM_CONFIG_HOME=f"{home}/config",
            HELM_DATA_HOME=f"{home}/data",
        )
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def crds_installed(cluster: Cluster) -> bool:
    return cluster.kubectl("get", "crd", "dags.zonda.dev", check=False).returncode == 0


@contextlib.contextmanager
def installed(cluster: Cluster, values: dict[str, Any]) -> Iterator[Install]:
    """Installs the chart into a fresh namespace; uninstalls it (cluster-scoped RBAC too) afterwards."""
    namespace = f"t-helm-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", namespace)
    skip_crds = ["--skip-crds"] if crds_installed(cluster) else []
    try:
        result = run_helm(
            cluster, "install", RELEASE, str(CHART), "--namespace", namespace, *skip_crds, values=values
        )
        assert result.returncode == 0, result.stderr
        yield Install(cluster, namespace)
    finally:
        run_helm(cluster, "uninstall", RELEASE, "--namespace", namespace, "--wait")
        release_task_pods(cluster, namespace)  # no controller left to release them
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.fixture(scope="module")
def namespaced_install(cluster: Cluster) -> Iterator[Install]:
    with installed(cluster, {}) as install:
        yield install


@pytest.fixture(scope="module")
def cluster_wide_install(cluster: Cluster) -> Iterator[Install]:
    with installed(cluster, {"watch": {"clusterWide": True}}) as install:
        yield install


# ---------------------------------------------------------------------------------- rendering


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="the default install is accepted by the apiserver"),
        pytest.param(
            {
                "watch": {"clusterWide": True},
                "controller": {"replicas": 2},
                "triggerer": {"replicas": 2, "shards": 4},
            },
            id="a cluster-wide install with replicas is accepted by the apiserver",
        ),
        pytest.param(
            {
                "taskPods": {
                    "rbac": {"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}
                },
                "triggerer": {
                    "extraRules": [
                        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]}
                    ]
                },
                "imagePullSecrets": [{"name": "regcred"}],
            },
            id="extra rules and pull secrets are accepted by the apiserver",
        ),
    ],
)
def test_rendered_chart_passes_server_side_dry_run(
    cluster: Cluster, namespace: str, values: dict[str, Any]
) -> None:
    rendered = run_helm(cluster, "template", RELEASE, str(CHART), "--namespace", namespace, values=values)
    assert rendered.returncode == 0, rendered.stderr
    applied = cluster.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=zonda-test",
        "-f",
        "-",
        input=rendered.stdout,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    assert "deployment.apps/zonda-controller serverside-applied (server dry run)" in applied.stdout


UNCONFINED_DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "unconfined"},
    "spec": {
        "selector": {"matchLabels": {"app": "unconfined"}},
        "template": {
            "metadata": {"labels": {"app": "unconfined"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    },
}


def test_pods_meet_the_restricted_pod_security_standard(cluster: Cluster, namespace: str) -> None:
    """PodSecurity admission (on by default in the apiserver) warns about pod templates that would
    violate the namespace's level; an unconfined Deployment shows the warning is really emitted."""
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/warn=restricted")
    unconfined = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=yaml.safe_dump(UNCONFINED_DEPLOYMENT)
    )
    assert 'would violate PodSecurity "restricted' in unconfined.stderr
    rendered = run_helm(cluster, "template", RELEASE, str(CHART), "--namespace", namespace)
    assert rendered.returncode == 0, rendered.stderr
    applied = cluster.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=zonda-test",
        "-f",
        "-",
        input=rendered.stdout,
    )
    assert "PodSecurity" not in applied.stderr, applied.stderr


def test_a_namespace_list_install_is_accepted_in_each_listed_namespace(
    cluster: Cluster, namespace: str
) -> None:
    second = f"t-helm-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", second)
    try:
        rendered = run_helm(
            cluster,
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            namespace,
            values={"watch": {"namespaces": [namespace, second]}},
        )
        assert rendered.returncode == 0, rendered.stderr
        applied = cluster.kubectl(
            "apply",
            "--server-side",
            "--dry-run=server",
            "--field-manager=zonda-test",
            "-f",
            "-",
            input=rendered.stdout,
            check=False,
        )
        assert applied.returncode == 0, applied.stderr
        assert f"role.rbac.authorization.k8s.io/{namespace}-zonda-controller" in applied.stdout
    finally:
        release_task_pods(cluster, second)  # no controller left to release them
        cluster.kubectl("delete", "namespace", second, "--wait=false", check=False)


def test_the_installed_release_deploys_every_component(namespaced_install: Install) -> None:
    result = namespaced_install.cluster.kubectl(
        "get",
        "deployments,serviceaccounts",
        "--namespace",
        namespaced_install.namespace,
        "-l",
        f"app.kubernetes.io/instance={RELEASE}",
        "-o",
        "name",
    )
    assert set(result.stdout.split()) == {
        "deployment.apps/zonda-controller",
        "deployment.apps/zonda-triggerer",
        "deployment.apps/zonda-ui",
        "serviceaccount/zonda-controller",
        "serviceaccount/zonda-triggerer",
        "serviceaccount/zonda-task",
        "serviceaccount/zonda-ui",
    }


@pytest.mark.parametrize(
    ("values", "notes"),
    [
        pytest.param(
            {},
            ["It acts in: {namespace}.", "kubectl auth can-i --list"],
            id="the notes say which namespace a default install acts in",
        ),
        pytest.param(
            {"watch": {"clusterWide": True}},
            ["EVERY namespace", "create it in each namespace"],
            id="the notes warn that a cluster-wide install acts everywhere",
        ),
        pytest.param(
            {"triggerer": {"enabled": False}, "controller": {"executor": "local"}},
            ["deferred tasks will wait forever", "development only"],
            id="the notes warn about a missing triggerer and the local executor",
        ),
    ],
)
def test_install_notes(cluster: Cluster, namespace: str, values: dict[str, Any], notes: list[str]) -> None:
    result = run_helm(
        cluster,
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        namespace,
        "--dry-run=server",
        "--skip-crds",
        values=values,
    )
    assert result.returncode == 0, result.stderr
    printed = result.stdout[result.stdout.index("NOTES:") :]
    for note in notes:
        assert note.format(namespace=namespace) in printed, printed


# --------------------------------------------------------------------------------------- RBAC

#: (identity, verb, resource, subresource, namespace: None = the release's, allowed)
NAMESPACED_CASES = [
    pytest.param("controller", "watch", "dags.zonda.dev", None, None, True, id="the controller watches DAGs"),
    pytest.param(
        "controller", "patch", "dags.zonda.dev", "status", None, True, id="the controller patches DAG status"
    ),
    pytest.param(
        "controller",
        "patch",
        "dags.zonda.dev",
        None,
        None,
        False,
        id="the controller cannot patch a DAG spec",
    ),
    pytest.param(
        "controller", "update", "dags.zonda.dev", None, None, False, id="the controller cannot update a DAG"
    ),
    pytest.param(
        "controller", "delete", "dags.zonda.dev", None, None, False, id="the controller cannot delete a DAG"
    ),
    pytest.param(
        "controller", "create", "dagruns.zonda.dev", None, None, True, id="the controller creates DagRuns"
    ),
    pytest.param(
        "controller",
        "update",
        "dagruns.zonda.dev",
        "status",
        None,
        True,
        id="the controller updates DagRun status",
    ),
    pytest.param(
        "controller",
        "patch",
        "dagruns.zonda.dev",
        None,
        None,
        False,
        id="the controller cannot patch a DagRun spec",
    ),
    pytest.param(
        "controller", "create", "triggers.zonda.dev", None, None, True, id="the controller creates Triggers"
    ),
    pytest.param("controller", "create", "pods", None, None, True, id="the controller creates task pods"),
    pytest.param("controller", "get", "pods", "log", None, True, id="the controller reads task pod logs"),
    # patch: only to remove a deleted task pod's finalizer zonda.dev/try-tracking (zonda.passes.try_tracking)
    pytest.param("controller", "patch", "pods", None, None, True, id="the controller patches pods"),
    pytest.param(
        "controller", "create", "pods", "exec", None, False, id="the controller cannot exec into pods"
    ),
    pytest.param("controller", "create", "events", None, None, True, id="the controller records core events"),
    pytest.param(
        "controller",
        "patch",
        "events.events.k8s.io",
        None,
        None,
        True,
        id="the controller records events.k8s.io events",
    ),
    pytest.param(
        "controller",
        "update",
        "leases.coordination.k8s.io",
        None,
        None,
        True,
        id="the controller renews its leader Lease",
    ),
    pytest.param(
        "controller",
        "delete",
        "leases.coordination.k8s.io",
        None,
        None,
        True,
        id="the sharded controller deletes a long-gone replica's member Lease",
    ),
    pytest.param(
        "controller",
        "list",
        "customresourcedefinitions.apiextensions.k8s.io",
        None,
        None,
        False,
        id="the controller needs no cluster-scoped read of CRDs (kopf scanning is off)",
    ),
    pytest.param(
        "controller", "get", "secrets", None, None, False, id="the controller cannot get a Secret by name"
    ),
    pytest.param(
        "controller",
        "get",
        "xcomchunks.zonda.dev",
        None,
        None,
        True,
        id="the controller reads XComChunks by name (a mapped KubernetesPodOperator's items)",
    ),
    pytest.param(
        "controller",
        "create",
        "xcomchunks.zonda.dev",
        None,
        None,
        False,
        id="the controller writes no XComChunks",
    ),
    pytest.param(
        "controller",
        "list",
        "secrets",
        None,
        None,
        True,
        id="the controller lists Secrets to find labelled connections and variables",
    ),
    pytest.param(
        "controller", "watch", "secrets", None, None, False, id="the controller cannot watch Secrets"
    ),
    pytest.param(
        "controller",
        "list",
        "configmaps",
        None,
        None,
        True,
        id="the controller lists ConfigMaps to find labelled variables",
    ),
    pytest.param(
        "controller",
        "list",
        "secrets",
        None,
        OTHER,
        False,
        id="the controller cannot list Secrets in another namespace",
    ),
    pytest.param(
        "controller",
        "list",
        "namespaces",
        None,
        None,
        False,
        id="a namespaced controller cannot list namespaces",
    ),
    pytest.param(
        "controller",
        "list",
        "dags.zonda.dev",
        None,
        OTHER,
        False,
        id="the controller cannot see DAGs in another namespace",
    ),
    pytest.param(
        "controller",
        "create",
        "pods",
        None,
        OTHER,
        False,
        id="the controller cannot create pods in another namespace",
    ),
    pytest.param(
        "controller",
        "create",
        "leases.coordination.k8s.io",
        None,
        OTHER,
        False,
        id="the controller cannot take Leases in another namespace",
    ),
    pytest.param(
        "controller",
        "create",
        "roles.rbac.authorization.k8s.io",
        None,
        None,
        False,
        id="the controller cannot grant itself more",
    ),
    pytest.param(
        "triggerer", "watch", "triggers.zonda.dev", None, None, True, id="the triggerer watches Triggers"
    ),
    pytest.param(
        "triggerer",
        "patch",
        "triggers.zonda.dev",
        "status",
        None,
        True,
        id="the triggerer patches Trigger status",
    ),
    pytest.param(
        "triggerer",
        "patch",
        "triggers.zonda.dev",
        None,
        None,
        False,
        id="the triggerer cannot patch a Trigger spec",
    ),
    pytest.param(
        "triggerer",
        "create",
        "triggers.zonda.dev",
        None,
        None,
        False,
        id="the triggerer cannot create Triggers",
    ),
    pytest.param(
        "triggerer",
        "delete",
        "leases.coordination.k8s.io",
        None,
        None,
        True,
        id="the triggerer releases shard Leases",
    ),
    pytest.param("triggerer", "create", "events", None, None, True, id="the triggerer records events"),
    pytest.param(
        "triggerer", "list", "dags.zonda.dev", None, None, False, id="the triggerer cannot read DAGs"
    ),
    pytest.param("triggerer", "create", "pods", None, None, False, id="the triggerer cannot create pods"),
    pytest.param("triggerer", "get", "secrets", None, None, False, id="the triggerer cannot read Secrets"),
    pytest.param(
        "triggerer",
        "list",
        "triggers.zonda.dev",
        None,
        OTHER,
        False,
        id="the triggerer cannot see Triggers in another namespace",
    ),
    pytest.param("task", "list", "pods", None, None, False, id="task pods cannot list pods"),
    pytest.param("task", "get", "secrets", None, None, False, id="task pods cannot read Secrets"),
    pytest.param("task", "list", "dags.zonda.dev", None, None, False, id="task pods cannot read DAGs"),
    pytest.param(
        "task", "create", "dagruns.zonda.dev", None, None, False, id="task pods cannot trigger DagRuns"
    ),
    pytest.param(
        "task",
        "list",
        "dagruns.zonda.dev",
        None,
        None,
        True,
        id="task pods read DagRuns (include_prior_dates)",
    ),
    pytest.param(
        "task",
        "patch",
        "dagruns.zonda.dev",
        "status",
        None,
        False,
        id="task pods cannot write a DagRun's status",
    ),
    pytest.param("task", "create", "xcomchunks.zonda.dev", None, None, True, id="task pods write XComChunks"),
    pytest.param(
        "task", "get", "xcomchunks.zonda.dev", None, None, True, id="task pods read XComChunks by name"
    ),
    pytest.param(
        "task", "list", "xcomchunks.zonda.dev", None, None, False, id="task pods cannot list XComChunks"
    ),
    pytest.param(
        "task",
        "delete",
        "xcomchunks.zonda.dev",
        None,
        None,
        False,
        id="task pods cannot delete XComChunks (they go with their run)",
    ),
    pytest.param(
        "task",
        "create",
        "xcomchunks.zonda.dev",
        None,
        OTHER,
        False,
        id="task pods cannot write XComChunks in another namespace",
    ),
]


@pytest.mark.parametrize(
    ("identity", "verb", "resource", "subresource", "where", "allowed"), NAMESPACED_CASES
)
def test_namespaced_install_grants_least_privilege(
    namespaced_install: Install,
    identity: str,
    verb: str,
    resource: str,
    subresource: str | None,
    where: str | None,
    allowed: bool,
) -> None:
    answer = namespaced_install.can_i(identity, verb, resource, namespace=where, subresource=subresource)
    assert answer is allowed


CLUSTER_WIDE_CASES = [
    pytest.param(
        "controller",
        "list",
        "dags.zonda.dev",
        None,
        OTHER,
        True,
        id="a cluster-wide controller sees DAGs in every namespace",
    ),
    pytest.param(
        "controller",
        "create",
        "pods",
        None,
        OTHER,
        True,
        id="a cluster-wide controller creates task pods in every namespace",
    ),
    pytest.param(
        "controller",
        "watch",
        "namespaces",
        None,
        None,
        True,
        id="a cluster-wide controller watches namespaces",
    ),
    pytest.param(
        "controller",
        "get",
        "secrets",
        None,
        OTHER,
        False,
        id="a cluster-wide controller still cannot read Secrets",
    ),
    pytest.param(
        "controller",
        "patch",
        "dags.zonda.dev",
        None,
        OTHER,
        False,
        id="a cluster-wide controller still cannot patch a DAG spec",
    ),
    pytest.param(
        "controller",
        "create",
        "leases.coordination.k8s.io",
        None,
        OTHER,
        False,
        id="a cluster-wide controller keeps its Lease in the release namespace",
    ),
    pytest.param(
        "triggerer",
        "patch",
        "triggers.zonda.dev",
        "status",
        OTHER,
        True,
        id="a cluster-wide triggerer patches Trigger status in every namespace",
    ),
    pytest.param(
        "triggerer",
        "delete",
        "leases.coordination.k8s.io",
        None,
        OTHER,
        False,
        id="a cluster-wide triggerer keeps its Leases in the release namespace",
    ),
]


@pytest.mark.parametrize(
    ("identity", "verb", "resource", "subresource", "where", "allowed"), CLUSTER_WIDE_CASES
)
def test_cluster_wide_install_grants_every_namespace_but_no_more(
    cluster_wide_install: Install,
    identity: str,
    verb: str,
    resource: str,
    subresource: str | None,
    where: str | None,
    allowed: bool,
) -> None:
    answer = cluster_wide_install.can_i(identity, verb, resource, namespace=where, subresource=subresource)
    assert answer is allowed
