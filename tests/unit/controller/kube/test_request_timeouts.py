"""Ordinary API calls are bounded in time (`controller.kube.timeouts`).

Real: `Kube` with kubernetes_asyncio and aiohttp, talking HTTP to a local server on loopback that
accepts a connection and then says nothing (or sends an answer's headers and never its body), as a
half-open connection or a proxy that stopped forwarding does. Nothing of the client is mocked; the
timeouts are made short (a fraction of a second) so the test takes about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from kubernetes_asyncio import client

from controller.kube import Kube, NotFound
from controller.kube.timeouts import RequestTimeouts

SHORT = RequestTimeouts(connect=0.2, total=0.3)


@dataclass
class SilentServer:
    """A TCP server that accepts and reads, then never answers (`headers`: answers a 200's headers
    and never the body). `arrived` is set once a request's first bytes came: the call really got
    through to a server that stalls."""

    headers: bool = False
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    held: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.held.append(writer)  # kept open: the client sees no FIN, no RST
        if await reader.read(1):  # the first byte of a request (or of a TLS ClientHello)
            self.arrived.set()
        if self.headers:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            await writer.drain()


@contextlib.asynccontextmanager
async def serving(silent: SilentServer) -> AsyncIterator[tuple[SilentServer, int]]:
    listening = await asyncio.start_server(silent.handle, "127.0.0.1", 0)
    async with listening:
        yield silent, listening.sockets[0].getsockname()[1]
        for writer in silent.held:
            writer.close()


@pytest.fixture(params=[False, True], ids=["silent", "headers-then-silent"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[tuple[SilentServer, int]]:
    async with serving(SilentServer(headers=request.param)) as served:
        yield served


async def list_pods_read_whole(api: client.CoreV1Api, **options: object) -> bytes:
    """A raw LIST and its body read to the end (what `Kube._json` does)."""
    response = await api.list_namespaced_pod("ns", _preload_content=False, **options)  # type: ignore[arg-type]
    body: bytes = await response.read()
    return body


def api_client(url: str) -> client.ApiClient:
    configuration = client.Configuration(host=url)
    configuration.verify_ssl = False
    return client.ApiClient(configuration)


#: Each kind of call path of `Kube`: the typed models read whole, raw bodies read after the headers
#: (`_preload_content=False`), a GET whose 404 means "gone", and `ApiClient.call_api` directly.
CALLS: dict[str, Callable[[Kube], Awaitable[object]]] = {
    "get a DAG (404 is None)": lambda kube: kube.get_custom("dags", "ns", "etl"),
    "list pods (raw body)": lambda kube: kube.list_pods("ns", "zonda.dev/dagrun=x"),
    "renew a Lease (raw body)": lambda kube: kube.replace_lease(
        "ns", {"metadata": {"name": "l", "resourceVersion": "1"}, "spec": {}}
    ),
    "delete a pod": lambda kube: kube.delete_pod("ns", "p"),
    "get any path": lambda kube: kube.get_path("/apis/zonda.dev/v1alpha1"),
    "create a task pod (a pass's own write)": lambda kube: kube.create_pod("ns", {"metadata": {"name": "p"}}),
    "replace a DagRun's status (a pass's own write)": lambda kube: kube.replace_custom_status(
        "dags", "ns", {"metadata": {"name": "etl", "resourceVersion": "1"}, "status": {}}
    ),
}


async def test_without_a_timeout_a_call_to_a_silent_server_hangs(server: tuple[SilentServer, int]) -> None:
    """The positive control: kubernetes_asyncio's own default (no `bound`) waits as long as the server
    says nothing."""
    silent, port = server
    api = client.CoreV1Api(api_client(f"http://127.0.0.1:{port}"))
    try:
        call = asyncio.ensure_future(list_pods_read_whole(api))
        await asyncio.wait_for(silent.arrived.wait(), 5)
        done, _ = await asyncio.wait([call], timeout=4 * SHORT.total)
        assert not done, "the unbounded call ended"
        call.cancel()
    finally:
        await api.api_client.close()


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
async def test_a_call_to_a_silent_server_times_out_as_a_transient_failure(
    server: tuple[SilentServer, int], call: Callable[[Kube], Awaitable[object]]
) -> None:
    """Bounded: `TimeoutError` after the total timeout, never None or NotFound ("gone")."""
    silent, port = server
    async with Kube(api_client(f"http://127.0.0.1:{port}"), SHORT) as kube:
        started = time.monotonic()
        with pytest.raises(TimeoutError) as raised:
            await asyncio.wait_for(call(kube), 10)  # the test's own guard, far past the bound
        took = time.monotonic() - started
    assert silent.arrived.is_set()
    assert not isinstance(raised.value, NotFound)
    assert SHORT.total * 0.9 <= took < SHORT.total + 2, f"timed out after {took:.2f}s"


async def test_a_tls_handshake_that_never_answers_times_out_at_the_connect_timeout() -> None:
    """The connect timeout covers TCP and TLS: an https server that accepts and never answers the
    ClientHello fails the call after `connect`, long before `total`."""
    timeouts = RequestTimeouts(connect=0.3, total=30)
    async with serving(SilentServer()) as (silent, port):
        async with Kube(api_client(f"https://127.0.0.1:{port}"), timeouts) as kube:
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(kube.list_pods("ns", "a=b"), 10)
            took = time.monotonic() - started
        assert silent.arrived.is_set()
    assert took < 5, f"timed out after {took:.2f}s, not at the connect timeout"


async def test_a_call_naming_its_own_timeout_keeps_it(server: tuple[SilentServer, int]) -> None:
    """Watches and followed logs name theirs: the default does not replace it."""
    silent, port = server
    async with Kube(api_client(f"http://127.0.0.1:{port}"), RequestTimeouts(connect=0.1, total=0.1)) as kube:
        own = RequestTimeouts(connect=0.1, total=1.0).ordinary()
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await list_pods_read_whole(kube.core, _request_timeout=own)
        took = time.monotonic() - started
    assert silent.arrived.is_set()
    assert 0.9 <= took < 5, f"timed out after {took:.2f}s, not at its own 1 s"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, RequestTimeouts(connect=10.0, total=60.0)),
        (
            {"ZONDA_API_TIMEOUT_SECONDS": "5", "ZONDA_API_CONNECT_TIMEOUT_SECONDS": "1.5"},
            RequestTimeouts(1.5, 5),
        ),
        ({"ZONDA_API_TIMEOUT_SECONDS": " "}, RequestTimeouts()),
    ],
)
def test_the_timeouts_come_from_the_environment(environ: dict[str, str], expected: RequestTimeouts) -> None:
    assert RequestTimeouts.from_environment(environ) == expected


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "inf"])
def test_a_bad_timeout_in_the_environment_is_an_error_naming_it(value: str) -> None:
    with pytest.raises(ValueError, match=r"\$ZONDA_API_TIMEOUT_SECONDS must be a positive number"):
        RequestTimeouts.from_environment({"ZONDA_API_TIMEOUT_SECONDS": value})
