"""The chart's web UI: Deployment, Service, optional Ingress, and its least-privilege RBAC.

Rendered by the real `helm` (see test_chart_template.py for how, and why it never skips in CI).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.chart.test_chart_template import (
    RELEASE_NAMESPACE,
    container,
    grants_of,
    named,
    of_kind,
    render,
    table,
)
from tests.unit.chart.test_chart_template import helm as helm_fixture

helm = helm_fixture  # the session fixture, registered under this name for the tests below

UI_READS = {
    ("zonda.dev", "dags"): "get list watch",
    ("zonda.dev", "dagruns"): "get list watch",
    ("zonda.dev", "dagrunshards"): "get list watch",
    ("zonda.dev", "xcomchunks"): "get",
    ("zonda.dev", "pools"): "get list watch",
    ("zonda.dev", "assets"): "get list watch",
    ("", "pods"): "get list",
    ("", "events"): "get list",
    ("", "pods/log"): "get",
}
IMPERSONATION = {
    ("authorization.k8s.io", "subjectaccessreviews"): "create",
    ("", "users"): "impersonate",
    ("", "groups"): "impersonate",
}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param(
            {},
            table(RELEASE_NAMESPACE, UI_READS),
            id="by default the UI only reads, in the release namespace",
        ),
        pytest.param(
            {"watch": {"namespaces": ["team-a", "team-b"]}},
            table("team-a", UI_READS) | table("team-b", UI_READS),
            id="it reads each watched namespace",
        ),
        pytest.param(
            {"watch": {"clusterWide": True}}, table("*", UI_READS), id="cluster-wide it reads every namespace"
        ),
        pytest.param(
            {"ui": {"auth": "impersonate"}},
            table(RELEASE_NAMESPACE, UI_READS) | table("*", IMPERSONATION),
            id="impersonation adds access reviews and impersonating users and groups",
        ),
    ],
)
def test_the_ui_account_gets_exactly_its_grants(
    helm: Path, tmp_path: Path, values: dict[str, Any], expected: set[tuple[str, str, str, str]]
) -> None:
    manifests = render(helm, tmp_path, values)
    assert grants_of(manifests, "zonda-ui", RELEASE_NAMESPACE) == expected


def test_the_ui_is_read_only_by_default_with_probes_on_one_port(helm: Path, tmp_path: Path) -> None:
    manifests = render(helm, tmp_path)
    ui = container(manifests, "ui")
    assert ui["args"][:1] == ["ui"]
    assert {"--read-only", "--auth=token", "--host=0.0.0.0", "--port=8080"} <= set(ui["args"])
    assert f"--namespace={RELEASE_NAMESPACE}" in ui["args"]
    assert ui["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert ui["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert ui["securityContext"]["readOnlyRootFilesystem"] is True
    service = named(manifests, "Service", "zonda-ui")
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
        {"name": "metrics", "port": 8080, "targetPort": "http", "protocol": "TCP"},
    ]
    assert service["metadata"]["labels"]["zonda.dev/metrics"] == "true"  # scraped like the others
    assert of_kind(manifests, "Ingress") == []


def test_actions_and_an_ingress_are_opt_in(helm: Path, tmp_path: Path) -> None:
    manifests = render(
        helm,
        tmp_path,
        {
            "ui": {
                "readOnly": False,
                "ingress": {"enabled": True, "host": "zonda.example.com", "className": "nginx"},
            }
        },
    )
    assert "--read-only" not in container(manifests, "ui")["args"]
    ingress = named(manifests, "Ingress", "zonda-ui")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "zonda.example.com"
    assert rule["http"]["paths"][0]["backend"]["service"] == {"name": "zonda-ui", "port": {"name": "http"}}


def test_the_ui_can_be_left_out(helm: Path, tmp_path: Path) -> None:
    manifests = render(helm, tmp_path, {"ui": {"enabled": False}})
    assert not [m for m in manifests if m["metadata"]["name"].endswith("-ui")]
