"""`free_port` never hands out a port twice, even when the kernel offers the same one again."""

from __future__ import annotations

from typing import Any

import pytest

from controller.devtools import devcluster, ports


class OfferedPorts:
    """Stands in for `socket.socket`: each probe is offered the next of `ports`."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = iter(ports)

    def __call__(self) -> OfferedPorts:
        return self

    def __enter__(self) -> OfferedPorts:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def bind(self, address: Any) -> None:
        self.port = next(self.ports)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_a_port_offered_again_before_its_taker_bound_it_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_HANDED_OUT", set())
    monkeypatch.setattr(ports.socket, "socket", OfferedPorts([40001, 40001, 40001, 40002]))
    assert [devcluster.free_port(), ports.free_port("")] == [40001, 40002], (
        "devcluster and realnode share one set"
    )
