"""In a pod, the controller's kopf login names the apiserver by the `kubernetes` Service's address
from the environment (as client-go does), not by `kubernetes.default.svc`, which needs cluster DNS."""

from __future__ import annotations

import pytest

from controller.kube.client import in_cluster_server


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}, "https://10.96.0.1:443"),
        ({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, "https://[fd00::1]:443"),
        ({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, None),
        ({}, None),
    ],
)
def test_the_in_cluster_server_is_the_kubernetes_services_address(
    environ: dict[str, str], expected: str | None
) -> None:
    assert in_cluster_server(environ) == expected
