"""The controller's client keeps an idle connection to the apiserver past a minute
(`controller.kube.client.IDLE_CONNECTION_SECONDS`), so a `* * * * *` boundary's creates reuse the
connections of the minute before instead of opening new TLS connections in the burst.

Real: `Kube.connect` from a kubeconfig (the controller's path), kubernetes_asyncio and aiohttp,
talking HTTP to a local server on loopback that records which client connection (its port) each
request came on. Only aiohttp's idea of "now" (`aiohttp.connector.monotonic`, which it compares with
a connection's last use) is moved forward, as the minute between two boundaries would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controller.devtools.control_plane_files import write_kubeconfig
from controller.kube import Kube
from controller.kube.client import IDLE_CONNECTION_SECONDS

ANSWER = json.dumps({"apiVersion": "zonda.dev/v1alpha1", "kind": "DagRun", "metadata": {"name": "r"}})


@contextlib.asynccontextmanager
async def recording_server() -> AsyncIterator[tuple[int, list[int]]]:
    """An HTTP/1.1 server answering every request 201 with keep-alive; yields its port and the client
    port of each request, in order."""
    client_ports: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                await reader.readexactly(length)
                client_ports.append(writer.get_extra_info("peername")[1])
                body = ANSWER.encode()
                writer.write(
                    b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        writer.close()

    listening = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with listening:
        yield listening.sockets[0].getsockname()[1], client_ports


async def ports_of_two_creates_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, idle_seconds: float
) -> list[int]:
    """Two DagRun creates `idle_seconds` apart by aiohttp's clock; the client port of each."""
    async with recording_server() as (port, client_ports):
        write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}", None, "t")
        kube = await Kube.connect(str(tmp_path / "kubeconfig"))
        try:
            await kube.create_custom("dagruns", "ns", {"metadata": {"name": "r1"}})
            monkeypatch.setattr("aiohttp.connector.monotonic", lambda: time.monotonic() + idle_seconds)
            await kube.create_custom("dagruns", "ns", {"metadata": {"name": "r2"}})
        finally:
            await kube.close()
    return client_ports


async def test_a_connection_idle_for_a_minute_is_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = await ports_of_two_creates_apart(tmp_path, monkeypatch, idle_seconds=60.0)
    assert second == first  # the same connection: no new TCP (and, to an apiserver, TLS) handshake


async def test_a_connection_idle_past_the_limit_is_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The positive control: the test tells a new connection from a reused one."""
    first, second = await ports_of_two_creates_apart(
        tmp_path, monkeypatch, idle_seconds=IDLE_CONNECTION_SECONDS + 5
    )
    assert second != first
