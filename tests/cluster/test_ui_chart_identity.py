"""The UI as the chart runs it: its Deployment's arguments, as the chart's UI ServiceAccount.

`tests/unit/chart/test_chart_ui.py` pins the UI account's grants on paper; here `zonda ui` really runs with
a token of that account (list+watch of DAGs and DagRuns, Events, nothing else) behind the chart's
defaults (`--auth=token --read-only`), and a viewer's token drives it over HTTP. A 403 in the UI's
log would mean the chart forgot a permission the UI uses.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from controller.devtools.devcluster import Cluster, free_port
from tests.cluster.test_chart_identities import DENIED, RELEASE, with_options, write_token_kubeconfig
from tests.cluster.test_helm_rbac import CHART, run_helm
from tests.cluster.test_ui_server import READ_RULES, service_account_token, ui_dag
from tests.cluster.zonda_processes import ZondaProcess, apply, get, wait_for


def fetch(url: str, token: str, body: dict[str, object] | None = None, csrf: str = "") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers |= {"Content-Type": "application/json", "X-CSRF-Token": csrf}
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:  # not listening yet
        return 0, str(error)


def test_the_chart_ui_serves_a_viewer_with_only_its_read_grants(cluster: Cluster, tmp_path: Path) -> None:
    namespace = f"t-chart-ui-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", namespace)
    try:
        values = {
            "watch": {"namespaces": [namespace]},
            "controller": {"replicas": 0},
            "triggerer": {"replicas": 0},
            "ui": {"replicas": 0},
        }
        installed = run_helm(
            cluster, "install", RELEASE, str(CHART), "--namespace", namespace, "--skip-crds", values=values
        )
        assert installed.returncode == 0, installed.stderr
        ui_token = str(cluster.kubectl("create", "token", f"{RELEASE}-ui", "-n", namespace).stdout).strip()
        kubeconfig = write_token_kubeconfig(cluster.kubeconfig, ui_token, tmp_path / "ui.kubeconfig")
        pools = {"apiGroups": ["zonda.dev"], "resources": ["pools"], "verbs": ["list"]}
        viewer = service_account_token(cluster, namespace, "viewer", [*READ_RULES, pools])
        apply(cluster, namespace, ui_dag())
        pool = {"kind": "Pool", "metadata": {"name": "warehouse"}, "spec": {"slots": 3}}
        apply(cluster, namespace, {"apiVersion": "zonda.dev/v1alpha1", **pool})
        run = {
            "apiVersion": "zonda.dev/v1alpha1",
            "kind": "DagRun",
            "metadata": {"name": "ui-dag-manual-1"},
            "spec": {"dagName": "ui-dag", "conf": {"from": "test"}},
        }
        apply(cluster, namespace, run)

        deployment = get(cluster, namespace, "deployment", f"{RELEASE}-ui")
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        port = free_port()
        args = with_options(container["args"], host="127.0.0.1", port=str(port), kubeconfig=str(kubeconfig))
        env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
        env |= {"POD_NAMESPACE": namespace, "KUBECONFIG": str(kubeconfig)}
        process = ZondaProcess("ui", args, cluster, tmp_path, env=env).start()
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(lambda: fetch(f"{url}/readyz", "")[0] == 200, "the UI to list DAGs and DagRuns", 90)
            status, html = fetch(f"{url}/dags", viewer)
            assert status == 200 and f"/dags/{namespace}/ui-dag" in html and "read-only" in html
            assert fetch(f"{url}/dags/{namespace}/ui-dag", viewer)[0] == 200
            status, html = fetch(f"{url}/runs/{namespace}/ui-dag-manual-1", viewer)
            assert status == 200 and "could not list Events" not in html, html[-2000:]
            wait_for(  # listed and watched with the UI's own account
                lambda: (
                    (page := fetch(f"{url}/pools", viewer))[0] == 200
                    and f'data-pool="{namespace}/warehouse"' in page[1]
                ),
                "the Pools page to show the pool the chart's UI account watches",
            )
            csrf = html.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]
            status, text = fetch(f"{url}/api/dags/{namespace}/ui-dag/trigger", viewer, {"conf": {}}, csrf)
            assert status == 403 and "read-only" in text  # the chart's default
        finally:
            process.stop()
        assert not DENIED.search(process.log()), process.log()[-3000:]
    finally:
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
