"""Variables and connections for a pass's launches: the labelled ConfigMaps and Secrets are read once.

Real: the executors' reference gathering (`controller.executors.references`) and the Kubernetes
executor's launch. The API is `FakeKube` with the list paths `references` reads served from its
objects, each read recorded, so a test counts the API calls a fan-out costs.
"""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from controller.executors import pods, references
from controller.executors.kubernetes import KubernetesExecutor
from controller.kube import KubeError
from controller.kube.fake import FakeKube
from zonda.resources.invocations import TaskInvocation
from zonda.resources.run_types import RunType
from zonda.specs.dags import ResolvedTask
from zonda.variables import LABEL_CONNECTIONS, LABEL_VARIABLES

NAMESPACE = "team"


class ListingKube(FakeKube):
    """FakeKube answering `get_path` for namespaced list paths, and recording every path read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.failures = 0

    async def get_path(self, path: str) -> Any:
        self.reads.append(path)
        if self.failures:
            self.failures -= 1
            raise KubeError(500, "etcd is unwell")
        url = urlsplit(path)
        *_, namespace, plural = url.path.split("/")
        selector = parse_qs(url.query)["labelSelector"][0]
        return {"items": self._list(plural, namespace, selector)}


def labelled(kind: str, name: str, label: str, data: dict[str, str]) -> dict[str, Any]:
    if kind == "secrets":
        data = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
    return {"metadata": {"name": name, "labels": {label: "true"}}, "data": data}


@pytest.fixture
def kube() -> ListingKube:
    kube = ListingKube()
    kube._create("configmaps", NAMESPACE, labelled("configmaps", "vars", LABEL_VARIABLES, {"region": "eu"}))
    kube._create("secrets", NAMESPACE, labelled("secrets", "s-vars", LABEL_VARIABLES, {"token": "t0k3n"}))
    kube._create(
        "secrets", NAMESPACE, labelled("secrets", "conns", LABEL_CONNECTIONS, {"db": "postgres://x"})
    )
    return kube


def task(task_id: str) -> ResolvedTask:
    return ResolvedTask(
        task_id=task_id,
        operator="BashOperator",
        args={"bash_command": "echo {{ var.value.token }}"},
        upstream=frozenset(),
        downstream=frozenset(),
        connections=("db",),
    )


def invocation(task_id: str) -> TaskInvocation:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    return TaskInvocation(
        dag_name="etl", run_name="etl-run", run_type=RunType.MANUAL, task_id=task_id, try_number=1,
        operator="BashOperator", logical_date=moment, data_interval_start=moment, data_interval_end=moment,
    )  # fmt: skip


async def test_a_fan_out_reads_the_labelled_objects_once_not_three_lists_per_pod(kube: ListingKube) -> None:
    executor = KubernetesExecutor(kube, pods.PodDefaults())
    run = {"metadata": {"name": "etl-run", "namespace": NAMESPACE, "uid": "u-1"}, "kind": "DagRun"}
    task_ids = [f"t{i}" for i in range(20)]
    await asyncio.gather(
        *(
            executor.launch(run, task=task(t), invocation=invocation(t), attempt_name=f"etl-run-{t}")
            for t in task_ids
        )
    )
    assert len(kube.reads) == 3  # ConfigMaps, variable Secrets, connection Secrets: once for 20 pods
    created = [body for (kind, _, _), body in kube.objects.items() if kind == "pods"]
    assert len(created) == 20
    env = {entry["name"]: entry for entry in created[0]["spec"]["containers"][0].get("env", [])}
    assert env["AIRFLOW_CONN_DB"]["valueFrom"]["secretKeyRef"] == {"name": "conns", "key": "db"}
    assert env["AIRFLOW_VAR_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "s-vars", "key": "token"}


async def test_a_read_serves_launches_for_its_max_age_then_the_next_launch_reads_again() -> None:
    reads: list[str] = []
    now = [0.0]

    async def read(namespace: str) -> int:
        reads.append(namespace)
        return len(reads)

    memo = references.NamespaceMemo(read, max_age=1.0, stale=0.0, clock=lambda: now[0])
    assert [await memo.get("a"), await memo.get("a"), await memo.get("b")] == [1, 1, 2]
    now[0] = 0.9
    assert await memo.get("a") == 1
    now[0] = 1.5
    assert await memo.get("a") == 3, "an older read is not used again"
    assert reads == ["a", "b", "a"]


async def test_while_a_newer_read_is_in_flight_launches_take_the_last_one_unless_it_is_too_old() -> None:
    now = [0.0]
    answers: list[asyncio.Future[int]] = []

    started = asyncio.Event()

    async def read(namespace: str) -> int:
        answers.append(asyncio.get_running_loop().create_future())
        started.set()
        return await answers[-1]

    async def reading(count: int) -> None:
        """Until the memo's `count`th read has started (it runs as a task of its own)."""
        while len(answers) < count:
            started.clear()
            await started.wait()

    memo = references.NamespaceMemo(read, max_age=1.0, stale=5.0, clock=lambda: now[0])
    first = asyncio.ensure_future(memo.get("a"))
    await reading(1)
    answers[0].set_result(1)
    assert await first == 1, "nothing read before: the first launch waits"
    now[0] = 2.0
    assert await memo.get("a") == 1, "a newer read is in flight: the last one, 2 s old, serves"
    await reading(2)
    answers[1].set_result(2)
    await asyncio.sleep(0)
    assert await memo.get("a") == 2
    now[0] = 8.0  # the last good read (at 2.0) is 6 s old: too old to serve while the next one reads
    waiting = asyncio.ensure_future(memo.get("a"))
    await reading(3)
    assert not waiting.done()
    answers[2].set_result(3)
    assert await waiting == 3


async def test_a_failed_read_fails_its_launches_and_the_next_launch_reads_again(kube: ListingKube) -> None:
    pod_references = references.PodReferences(kube)
    kube.failures = 1
    with pytest.raises(KubeError):
        await pod_references(NAMESPACE, task("t"))
    found = await pod_references(NAMESPACE, task("t"))
    assert [entry["name"] for entry in found.env] == ["AIRFLOW_CONN_DB", "AIRFLOW_VAR_TOKEN"]


async def test_the_local_executor_gets_the_values_a_kubelet_would_from_one_read(kube: ListingKube) -> None:
    environment_for = references.LocalEnvironment(kube)
    first = await environment_for(NAMESPACE, task("a"))
    second = await environment_for(NAMESPACE, task("b"))
    assert (
        first
        == second
        == {
            "AIRFLOW_VAR_region": "eu",  # a ConfigMap key keeps its case, as envFrom with a prefix does
            "AIRFLOW_VAR_TOKEN": "t0k3n",
            "AIRFLOW_CONN_DB": "postgres://x",
        }
    )
    assert len(kube.reads) == 3
