"""`controller.manager.served`: the controller waits for the apiserver to serve its resources before
kopf resolves them once (a start during an apiserver restart watched nothing, forever)."""

from __future__ import annotations

import asyncio
from typing import Any

from controller.kube import KubeError
from controller.manager.served import wait_until_served


class Discovery:
    """The answers a restarting apiserver gives to GET /apis/zonda.dev/v1alpha1, one per read."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.paths: list[str] = []

    async def get_path(self, path: str) -> Any:
        self.paths.append(path)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_it_reads_discovery_until_every_watched_resource_is_served() -> None:
    discovery = Discovery(
        ConnectionRefusedError("connection refused"),  # the apiserver is down
        KubeError(503, "the request has been made before all known HTTP paths have been installed"),
        None,  # 404: the group is not installed yet
        {"resources": [{"name": "dags"}]},  # partly
        {"resources": [{"name": "dags"}, {"name": "dagruns"}, {"name": "dagruns/status"}]},
    )
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    reads = asyncio.run(wait_until_served(discovery, ["dags", "dagruns"], sleep=sleep))  # type: ignore[arg-type]
    assert reads == 5 and len(slept) == 4
    assert set(discovery.paths) == {"/apis/zonda.dev/v1alpha1"}
    assert discovery.answers == []


def test_a_served_group_is_read_once() -> None:
    discovery = Discovery({"resources": [{"name": "dags"}]})
    assert asyncio.run(wait_until_served(discovery, ["dags"])) == 1  # type: ignore[arg-type]
