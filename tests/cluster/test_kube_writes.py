"""The controller's writes of a pass (`Kube._send`: a task pod's create, a DagRun's create, a DagRun
status replace) answer as the generated client did, refusals included.

Real: kube-apiserver, etcd, Zonda's CRDs. Each refusal is asked of the apiserver twice, through
`Kube`'s own path and through kubernetes_asyncio's generated call (what `Kube` used before): the same
exception, status and message, and the same object when it is accepted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from controller.devtools.devcluster import Cluster
from controller.kube.client import Kube
from controller.kube.errors import AlreadyExists, Conflict, KubeError, NotFound, translate
from tests.kube_contract import dagrun, pod
from zonda.resources.models import DAGRUNS, GROUP, VERSION

TOO_LARGE = "x" * (3 * 2**20 + 1024)  # over the apiserver's 3 MiB request limit: 413


async def _call(awaitable: Awaitable[Any]) -> Any:
    """A generated client's call, its exception translated as `Kube` did before `_send`."""
    try:
        return await awaitable
    except ApiException as exc:
        raise translate(exc) from exc


async def refusal(call: Awaitable[Any]) -> KubeError:
    with pytest.raises(KubeError) as refused:
        await call
    return refused.value


def same(ours: KubeError, theirs: KubeError, kind: type[KubeError], status: int) -> None:
    assert type(ours) is type(theirs) is kind, (ours, theirs)
    assert ours.status == theirs.status == status, (ours, theirs)
    assert str(ours) == str(theirs), (ours, theirs)


def test_the_writes_of_a_pass_answer_and_refuse_as_the_generated_client(
    cluster: Cluster, namespace: str
) -> None:
    async def run() -> None:
        async with await Kube.connect(str(cluster.kubeconfig), component="zonda-writes") as kube:
            core, custom = kube.core, kube.custom

            def generated_pod(body: dict[str, Any]) -> Awaitable[Any]:
                return _call(core.create_namespaced_pod(namespace, body))  # type: ignore[arg-type]

            def generated_run(body: dict[str, Any]) -> Awaitable[Any]:
                return _call(custom.create_namespaced_custom_object(GROUP, VERSION, namespace, DAGRUNS, body))

            def generated_status(body: dict[str, Any]) -> Awaitable[Any]:
                name = body["metadata"]["name"]
                return _call(
                    custom.replace_namespaced_custom_object_status(
                        GROUP, VERSION, namespace, DAGRUNS, name, body
                    )
                )

            # accepted: the same object as a GET reads
            created = await kube.create_pod(namespace, pod("p", {"run": "one"}))
            assert created["metadata"]["uid"] and created["spec"]["containers"][0]["name"] == "base"
            run = await kube.create_custom(DAGRUNS, namespace, dagrun("r"))
            replaced = await kube.replace_custom_status(
                DAGRUNS, namespace, {**run, "status": {"state": "queued"}}
            )
            assert replaced["status"] == {"state": "queued"}
            assert replaced == await _call(
                custom.get_namespaced_custom_object(GROUP, VERSION, namespace, DAGRUNS, "r")
            )

            Write = Callable[[dict[str, Any]], Awaitable[Any]]
            writes: dict[str, tuple[Write, Write]] = {  # each write: Kube's own path, the generated call
                "create a pod": (lambda body: kube.create_pod(namespace, body), generated_pod),
                "create a run": (lambda body: kube.create_custom(DAGRUNS, namespace, body), generated_run),
                "replace a status": (
                    lambda body: kube.replace_custom_status(DAGRUNS, namespace, body),
                    generated_status,
                ),
            }
            gone = {**replaced, "metadata": {**replaced["metadata"], "name": "gone"}}
            invalid = pod("bad", {})
            invalid["spec"]["containers"] = []
            no_dag = {**dagrun("bad"), "spec": {}}
            huge = pod("huge", {})
            huge["metadata"]["annotations"] = {"a": TOO_LARGE}  # over the apiserver's request limit
            huge_status = {**replaced, "status": {"state": "running", "message": TOO_LARGE}}
            refusals: list[tuple[str, dict[str, Any], type[KubeError], int]] = [
                ("create a pod", pod("p", {}), AlreadyExists, 409),  # a taken name
                ("create a run", dagrun("r"), AlreadyExists, 409),
                ("replace a status", run, Conflict, 409),  # a stale resourceVersion
                ("replace a status", gone, NotFound, 404),
                ("create a pod", invalid, KubeError, 422),
                ("create a run", no_dag, KubeError, 422),
                ("create a pod", huge, KubeError, 413),
                ("replace a status", huge_status, KubeError, 413),
            ]
            for write, body, kind, status in refusals:
                ours, theirs = writes[write]
                same(await refusal(ours(body)), await refusal(theirs(body)), kind, status)
            # 403: an identity RBAC does not allow
            nobody = kube.impersonating("system:serviceaccount:default:nobody")
            try:
                same(
                    await refusal(nobody.create_pod(namespace, pod("q", {}))),
                    await refusal(_call(nobody.core.create_namespaced_pod(namespace, pod("q", {})))),  # type: ignore[arg-type]
                    KubeError, 403,
                )  # fmt: skip
            finally:
                await nobody.close()

    asyncio.run(run())
