"""The UI server against a real apiserver: every endpoint's permission check, CSRF, read-only, escaping.

Real: kube-apiserver with RBAC, ServiceAccount tokens (`kubectl create token`), the controller (local
executor) moving runs to success, the UI's aiohttp app in this process (`--auth token`: each request
carries a viewer's bearer token, as behind an OIDC proxy). Three viewers: `reader` (get/list/watch
Zonda objects, pod logs and Events), `operator` (reader plus create runs, patch DAGs, write run
status) and `nobody` (no Role at all).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from controller.devtools.devcluster import Cluster
from controller.kube import Kube
from controller.ui.access import AuthMode
from controller.ui.app_state import STORE, UiSettings
from controller.ui.server import create_app
from tests.cluster.zonda_processes import apply, controller, get, wait_for, wait_run_finished

SCRIPT = "<script>alert('xss')</script>"

READ_RULES = [
    {"apiGroups": ["zonda.dev"], "resources": ["dags", "dagruns"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods", "pods/log", "events"], "verbs": ["get", "list"]},
]
OPERATE_RULES = [
    *READ_RULES,
    {"apiGroups": ["zonda.dev"], "resources": ["dagruns"], "verbs": ["create"]},
    {"apiGroups": ["zonda.dev"], "resources": ["dags"], "verbs": ["patch"]},
    {"apiGroups": ["zonda.dev"], "resources": ["dagruns/status"], "verbs": ["update", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]


def service_account_token(cluster: Cluster, namespace: str, name: str, rules: list[dict[str, Any]]) -> str:
    cluster.kubectl("create", "serviceaccount", name, "-n", namespace)
    if rules:
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": rules,
        }
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }
        apply(cluster, namespace, role)
        apply(cluster, namespace, binding)
    return str(cluster.kubectl("create", "token", name, "-n", namespace).stdout).strip()


def ui_dag(name: str = "ui-dag") -> dict[str, Any]:
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name},
        "spec": {
            "schedule": None,
            "docMd": f"# Doc {SCRIPT}",
            "params": {"who": "world", "n": 1},
            "paramsSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "tasks": [
                {
                    "id": "hello",
                    "operator": "BashOperator",
                    "args": {"bash_command": "echo hello-from-task {{ params.who }}"},
                },
                {"id": "after", "operator": "EmptyOperator", "dependsOn": ["hello"], "docMd": SCRIPT},
            ],
        },
    }


class Viewer:
    """A browser-like client: the viewer's token on every request, the page's CSRF token on actions."""

    def __init__(self, client: TestClient, token: str | None, **headers: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.headers.update(headers)

    async def get(self, path: str) -> tuple[int, str]:
        response = await self.client.get(path, headers=self.headers)
        return response.status, await response.text()

    async def csrf(self) -> str:
        status, html = await self.get("/dags")
        assert status == 200, html
        return html.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]

    async def post(self, path: str, body: dict[str, Any], **headers: str) -> tuple[int, Any]:
        sent = {
            **self.headers,
            "X-CSRF-Token": await self.csrf(),
            "Content-Type": "application/json",
            **headers,
        }
        response = await self.client.post(path, data=json.dumps(body), headers=sent)
        text = await response.text()
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, text


@pytest.fixture
async def ui(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> AsyncIterator[tuple[TestClient, dict[str, Viewer]]]:
    tokens = {
        "reader": service_account_token(cluster, namespace, "reader", READ_RULES),
        "operator": service_account_token(cluster, namespace, "operator", OPERATE_RULES),
        "nobody": service_account_token(cluster, namespace, "nobody", []),
    }
    apply(cluster, namespace, ui_dag())
    kube = await Kube.connect(str(cluster.kubeconfig), component="zonda-ui-test")
    settings = UiSettings(namespaces=[namespace], auth=AuthMode.TOKEN, state_dir=tmp_path / "state")
    client = TestClient(TestServer(create_app(kube, settings)))
    await client.start_server()
    try:
        await wait_until(lambda: (namespace, "ui-dag") in client.app[STORE].dags, "ui-dag in the UI's store")
        yield client, {name: Viewer(client, token) for name, token in tokens.items()}
    finally:
        await client.close()
        await kube.close()


async def wait_until(condition: Callable[[], bool], what: str, within: float = 60) -> None:
    """Poll `condition` on the event loop (the UI under test runs on it) until it holds."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.1)


async def wait_in_store(client: TestClient, namespace: str, run: str, state: str) -> None:
    def reached() -> bool:
        body = client.app[STORE].runs.get((namespace, run))
        return bool(body and (body.get("status") or {}).get("state") == state)

    await wait_until(reached, f"{run} to reach {state} in the UI's store")


async def test_a_request_without_a_token_is_refused_and_nothing_is_served_as_the_ui(
    ui: tuple[TestClient, dict[str, Viewer]], namespace: str
) -> None:
    client, _ = ui
    anonymous = Viewer(client, None)
    for path in ("/dags", f"/dags/{namespace}/ui-dag", "/api/changes"):
        status, text = await anonymous.get(path)
        assert status == 401, (path, text)
    assert (await anonymous.get("/healthz"))[0] == 200  # probes need no identity


async def test_every_read_endpoint_checks_the_viewers_rbac(
    cluster: Cluster, namespace: str, tmp_path: Path, ui: tuple[TestClient, dict[str, Viewer]]
) -> None:
    client, viewers = ui
    with controller(cluster, namespace, tmp_path, executor="local"):
        status, created = await viewers["operator"].post(
            f"/api/dags/{namespace}/ui-dag/trigger", {"conf": {"note": SCRIPT}}
        )
        assert status == 201, created
        run = created["run"]
        wait_run_finished(cluster, namespace, run)
        await wait_in_store(client, namespace, run, "success")

    pages = [
        f"/dags/{namespace}/ui-dag",
        f"/dags/{namespace}/ui-dag/graph",
        f"/dags/{namespace}/ui-dag/graph.dot?run={run}",
        f"/dags/{namespace}/ui-dag/trigger",
        f"/runs/{namespace}/{run}",
        f"/runs/{namespace}/{run}/tasks/hello",
        f"/runs/{namespace}/{run}/tasks/after",
    ]
    for path in pages:
        status, text = await viewers["reader"].get(path)
        assert status == 200, (path, text[:500])
        status, text = await viewers["nobody"].get(path)
        assert status == 403, (path, text[:500])
        assert "You may not" in text and namespace in text

    # The DAG list shows only what the viewer may list: nobody sees no DAG, and is told why.
    status, html = await viewers["reader"].get("/dags")
    assert status == 200 and f'href="/dags/{namespace}/ui-dag"' in html
    status, html = await viewers["nobody"].get("/dags")
    assert status == 200 and "ui-dag" not in html and "hidden: RBAC" in html

    # Logs: local files are read for a viewer allowed to read the run (tmp_path/state is the executor's).
    status, text = await viewers["reader"].get(f"/runs/{namespace}/{run}/tasks/hello/log?try=1")
    assert status == 200 and "hello-from-task" in text
    assert (await viewers["nobody"].get(f"/runs/{namespace}/{run}/tasks/hello/log?try=1"))[0] == 403

    # User text is escaped: the conf on the run page, doc_md on the task page (rendered, sanitised).
    _, run_html = await viewers["reader"].get(f"/runs/{namespace}/{run}")
    _, task_html = await viewers["reader"].get(f"/runs/{namespace}/{run}/tasks/after")
    for html in (run_html, task_html):
        assert SCRIPT not in html and "<script>alert" not in html
    assert task_html.count("&lt;script&gt;alert(") == 2  # the DAG's and the task's doc_md, as text
    assert "<h1>Doc &lt;script&gt;" in task_html
    assert "&lt;script&gt;" in run_html
    # The task page shows the bash_command rendered with the run's params, as the try rendered it.
    _, hello_html = await viewers["reader"].get(f"/runs/{namespace}/{run}/tasks/hello")
    assert "Rendered bash_command" in hello_html and "echo hello-from-task world" in hello_html


async def test_actions_run_as_the_viewer_and_a_refusal_changes_nothing(
    cluster: Cluster, namespace: str, tmp_path: Path, ui: tuple[TestClient, dict[str, Viewer]]
) -> None:
    client, viewers = ui
    trigger = f"/api/dags/{namespace}/ui-dag/trigger"

    status, answer = await viewers["reader"].post(trigger, {"conf": {}})
    assert status == 403 and "cannot create resource" in answer["error"], answer
    status, answer = await viewers["nobody"].post(trigger, {"conf": {}})
    assert status == 403, answer
    assert get(cluster, namespace, "dagruns")["items"] == []

    status, answer = await viewers["operator"].post(trigger, {"conf": {"n": "not a number"}})
    assert status == 422 and "param 'n': 'not a number' is not of type 'integer'" in answer["error"]

    status, answer = await viewers["reader"].post(f"/api/dags/{namespace}/ui-dag/paused", {"paused": True})
    assert status == 403 and "cannot patch" in answer["error"]
    assert not get(cluster, namespace, "dag", "ui-dag")["spec"].get("paused")
    status, answer = await viewers["operator"].post(f"/api/dags/{namespace}/ui-dag/paused", {"paused": True})
    assert status == 200 and get(cluster, namespace, "dag", "ui-dag")["spec"]["paused"] is True
    await viewers["operator"].post(f"/api/dags/{namespace}/ui-dag/paused", {"paused": False})

    with controller(cluster, namespace, tmp_path, executor="local"):
        status, created = await viewers["operator"].post(trigger, {"conf": {"who": "ui", "n": 2}})
        assert status == 201, created
        run = created["run"]
        assert get(cluster, namespace, "dagrun", run)["spec"]["conf"] == {"who": "ui", "n": 2}
        wait_run_finished(cluster, namespace, run)
        await wait_in_store(client, namespace, run, "success")

        clear = f"/api/runs/{namespace}/{run}/clear"
        status, preview = await viewers["reader"].post(
            clear, {"tasks": ["hello"], "downstream": True, "dry_run": True}
        )
        assert status == 200 and preview["tasks"] == ["hello", "after"]
        assert (await viewers["nobody"].post(clear, {"tasks": ["hello"], "dry_run": True}))[0] == 403

        status, answer = await viewers["reader"].post(clear, {"tasks": ["hello"], "downstream": True})
        assert status == 403, answer
        assert get(cluster, namespace, "dagrun", run)["status"]["state"] == "success"

        status, answer = await viewers["operator"].post(
            f"/api/runs/{namespace}/{run}/mark", {"task": "after", "state": "failed"}
        )
        assert status == 200 and answer["tasks"] == ["after"], answer
        status, answer = await viewers["operator"].post(clear, {"tasks": ["hello"], "downstream": True})
        assert status == 200 and answer["tasks"] == ["hello", "after"], answer
        ran_again = wait_for(
            lambda: (
                (
                    get(cluster, namespace, "dagrun", run)["status"]["taskInstances"]["hello"].get(
                        "tryNumber"
                    )
                    or 0
                )
                >= 2
                and get(cluster, namespace, "dagrun", run)["status"].get("state") == "success"
            ),
            "the cleared task to run again and the run to succeed",
            timeout=90,
        )
        assert ran_again


async def test_actions_need_the_pages_csrf_token_same_origin_and_json(
    namespace: str, ui: tuple[TestClient, dict[str, Viewer]]
) -> None:
    client, viewers = ui
    operator = viewers["operator"]
    path = f"/api/dags/{namespace}/ui-dag/paused"
    no_token = await client.post(
        path,
        data=json.dumps({"paused": True}),
        headers={**operator.headers, "Content-Type": "application/json"},
    )
    assert no_token.status == 403 and "CSRF" in await no_token.text()
    status, _ = await operator.post(path, {"paused": True}, Origin="https://evil.example")
    assert status == 403
    form = await client.post(
        path,
        data="paused=true",
        headers={
            **operator.headers,
            "X-CSRF-Token": await operator.csrf(),
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    assert form.status == 415
    # A token is bound to its viewer: the reader's token does not authorise the operator's request.
    reader_token = await viewers["reader"].csrf()
    stolen = await client.post(
        path,
        data=json.dumps({"paused": True}),
        headers={**operator.headers, "X-CSRF-Token": reader_token, "Content-Type": "application/json"},
    )
    assert stolen.status == 403


async def test_read_only_mode_refuses_actions_before_the_api(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    token = service_account_token(cluster, namespace, "operator", OPERATE_RULES)
    apply(cluster, namespace, ui_dag())
    kube = await Kube.connect(str(cluster.kubeconfig))
    settings = UiSettings(namespaces=[namespace], auth=AuthMode.TOKEN, read_only=True)
    client = TestClient(TestServer(create_app(kube, settings)))
    await client.start_server()
    try:
        viewer = Viewer(client, token)
        status, html = await viewer.get("/dags")
        assert status == 200 and "read-only" in html
        status, answer = await viewer.post(f"/api/dags/{namespace}/ui-dag/trigger", {"conf": {}})
        assert status == 403 and "read-only" in answer["error"]
        assert get(cluster, namespace, "dagruns")["items"] == []
    finally:
        await client.close()
        await kube.close()


async def test_impersonation_reads_and_acts_as_the_proxys_user(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    service_account_token(cluster, namespace, "reader", READ_RULES)
    apply(cluster, namespace, ui_dag())
    kube = await Kube.connect(str(cluster.kubeconfig))  # the UI's account: admin here, RBAC checks the user
    settings = UiSettings(namespaces=[namespace], auth=AuthMode.IMPERSONATE)
    client = TestClient(TestServer(create_app(kube, settings)))
    await client.start_server()
    try:
        await wait_until(lambda: (namespace, "ui-dag") in client.app[STORE].dags, "ui-dag in the UI's store")
        groups = "system:serviceaccounts,system:authenticated"
        reader = Viewer(
            client,
            None,
            **{"X-Forwarded-User": f"system:serviceaccount:{namespace}:reader", "X-Forwarded-Groups": groups},
        )
        stranger = Viewer(client, None, **{"X-Forwarded-User": "mallory", "X-Forwarded-Groups": groups})
        assert (await Viewer(client, None).get("/dags"))[0] == 401
        assert (await reader.get(f"/dags/{namespace}/ui-dag"))[0] == 200
        status, text = await stranger.get(f"/dags/{namespace}/ui-dag")
        assert status == 403 and "You may not" in text
        status, answer = await reader.post(f"/api/dags/{namespace}/ui-dag/trigger", {"conf": {}})
        assert status == 403 and "cannot create resource" in answer["error"], answer
        assert get(cluster, namespace, "dagruns")["items"] == []
    finally:
        await client.close()
        await kube.close()


async def read_changes(
    client: TestClient, viewer: Viewer, received: bytearray, until: Callable[[str], bool], seconds: float
) -> None:
    """Append what the live-update stream sends this viewer to `received` until `until(text)` holds or
    `seconds` pass (or the task is cancelled: `received` keeps what came)."""
    async with client.get("/api/changes", headers=viewer.headers) as response:
        assert response.status == 200
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                async for chunk in response.content.iter_any():
                    received += chunk
                    if until(received.decode()):
                        return


async def test_live_updates_reach_only_viewers_who_may_list_them(
    cluster: Cluster, namespace: str, ui: tuple[TestClient, dict[str, Viewer]]
) -> None:
    """The reader's stream is read until the change arrives (generous on a loaded machine); the stream of
    the viewer without list rights stays open as long and 2 s more, and must have received no change."""
    client, viewers = ui
    reader_saw, nobody_saw = bytearray(), bytearray()

    def has_change(text: str) -> bool:
        return '"name": "ui-dag"' in text and "event: change" in text

    reader = asyncio.create_task(read_changes(client, viewers["reader"], reader_saw, has_change, 60))
    nobody = asyncio.create_task(read_changes(client, viewers["nobody"], nobody_saw, lambda _: False, 90))
    # Both streams subscribed (the server says so first): a change made before would never be sent.
    opened = b": connected"
    await wait_until(lambda: opened in reader_saw and opened in nobody_saw, "both streams to open")
    changed = ui_dag()
    changed["spec"]["tags"] = ["changed"]
    await asyncio.to_thread(apply, cluster, namespace, changed)
    await reader
    assert has_change(reader_saw.decode())
    await asyncio.sleep(2)  # a change sent to both would have reached the other stream by now
    nobody.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await nobody
    assert "event: change" not in nobody_saw.decode() and "ui-dag" not in nobody_saw.decode()


async def test_a_stored_xcom_value_is_linked_from_the_task_page_and_read_from_its_chunks(
    cluster: Cluster, namespace: str, ui: tuple[TestClient, dict[str, Viewer]]
) -> None:
    """A value the Kubernetes XCom backend stored (XComChunks written as a task runner writes them) is
    shown by reference on the page and served, whole, to a viewer who may get XComChunks."""
    from controller.kube.rest import KubeRest
    from controller.xcom import chunks

    client, viewers = ui
    run = {"apiVersion": "zonda.dev/v1alpha1", "kind": "DagRun", "metadata": {"name": "with-xcom"},
           "spec": {"dagName": "ui-dag", "runType": "manual"}}  # fmt: skip
    apply(cluster, namespace, run)
    uid = get(cluster, namespace, "dagrun", "with-xcom")["metadata"]["uid"]
    value = {"rows": list(range(300_000))}  # ~2 MB: three chunks
    data = json.dumps(value, separators=(",", ":")).encode()
    url = chunks.write(
        KubeRest.connect(str(cluster.kubeconfig)), data, namespace=namespace, run_name="with-xcom",
        run_uid=uid, task_id="hello", map_index=-1, try_number=1, key="return_value",
    )  # fmt: skip
    reference = {"__zonda_xcom_stored__": {"url": url, "bytes": len(data)}}
    status = {"state": "success", "taskInstances": {"hello": {"state": "success", "xcom": reference}}}
    cluster.kubectl("patch", "dagrun", "with-xcom", "-n", namespace, "--subresource=status",
                    "--type=merge", "-p", json.dumps({"status": status}))  # fmt: skip
    await wait_in_store(client, namespace, "with-xcom", "success")
    chunk_reader = Viewer(client, service_account_token(cluster, namespace, "chunk-reader", [
        *READ_RULES, {"apiGroups": ["zonda.dev"], "resources": ["xcomchunks"], "verbs": ["get"]},
    ]))  # fmt: skip

    status_code, html = await chunk_reader.get(f"/runs/{namespace}/with-xcom/tasks/hello")
    link = f"/runs/{namespace}/with-xcom/tasks/hello/xcom?key=return_value"
    assert status_code == 200 and f'href="{link}"' in html and f"{len(data)} bytes" in html
    status_code, text = await chunk_reader.get(link)
    assert status_code == 200 and json.loads(text) == value
    status_code, text = await viewers["reader"].get(link)
    assert status_code == 403 and "You may not get xcomchunks" in text
    status_code, text = await chunk_reader.get(link.replace("return_value", "nope"))
    assert status_code == 404 and "has no XCom 'nope'" in text
