"""A fault proxy on loopback between one client (the controller) and the kube-apiserver.

It terminates TLS with the apiserver's own serving certificate (the local control plane's, signed by
its CA: the client's kubeconfig keeps the CA and the token, only `server` changes) and forwards every
request over a TLS connection of its own, streaming responses (watches included). It records every
request it answered (method, path, status, the body's resourceVersion precondition), the wire-level
record of what the client wrote, and on demand hurts the next N requests (those `where` accepts, if
given: the next N Lease calls, say):

- `drop`: close the connection without an answer;
- `reset`: a TCP RST (SO_LINGER 0, then close);
- `stall`: hold the request `stall_seconds` (or until the proxy stops), then reset it (a hung
  apiserver or network; `stalling` counts the requests held now);
- `429` (with Retry-After: 1), `500`, `504`: the apiserver's error answers, as Status objects;
- `lost-reply`: forward the request (a write is done), then reset instead of answering: the client
  cannot know whether its create or replace happened, and must retry idempotently;
- `too-large`: the next replace of a DagRun's status is answered 413 as the apiserver refuses a request
  body past its limit (its Status and message): the status write refused as too large, whatever its
  size (other requests pass until one comes).

`break_connections()` closes every open connection at once (every watch of the client breaks). Written
on aiohttp, already a dependency (the Kubernetes client's transport); it runs its own event loop in a
thread of the test process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from controller.devtools.control_plane_files import write_kubeconfig

FAULTS = ("drop", "reset", "stall", "429", "500", "504", "lost-reply", "too-large")
#: What the apiserver answers a request body past its limit (`k8s.io/apiserver`'s `limitedReadBody`).
TOO_LARGE_MESSAGE = "Request entity too large: limit is 3145728"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "host"}
REASONS = {"429": "TooManyRequests", "500": "InternalError", "504": "Timeout"}
#: Which requests a pending fault may hit: (method, path) -> whether this one.
Where = Callable[[str, str], bool]


@dataclass(frozen=True)
class Request:
    """One request the proxy answered (or hurt)."""

    at: float  # time.monotonic() when it arrived
    method: str
    path: str
    query: str
    status: int | None  # None when the proxy dropped, reset or stalled it
    fault: str | None
    #: metadata.resourceVersion of a write's body: the precondition a replace is checked against; of a
    #: DELETE, its DeleteOptions.preconditions (`uid=...`, `resourceVersion=...`, comma-separated).
    precondition: str | None
    name: str | None = None  # metadata.name of a write's body (a create's object)


class FaultProxy:
    def __init__(self, upstream: str, ca_file: Path, cert: Path, key: Path) -> None:
        self.upstream = upstream.rstrip("/")
        self.ca_file, self.cert, self.key = ca_file, cert, key
        self.requests: list[Request] = []
        self.injected: Counter[str] = Counter()
        self.stall_seconds = 5.0
        #: Requests held by a `stall` now (accepted, not answered).
        self.stalling = 0
        #: The faults the next requests get, one each, with the (method, path) test each must pass.
        self._pending: list[tuple[str, Where | None]] = []
        self._lock = threading.Lock()
        self._transports: set[asyncio.Transport] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self.port = 0
        self._thread = threading.Thread(target=self._run, daemon=True, name="fault-proxy")

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig for the client: the apiserver's CA and `token`, the proxy as server."""
        write_kubeconfig(path, self.url, self.ca_file, token)
        return path

    # ---------------------------------------------------------------- control (from the test's thread)

    def hurt(self, fault: str, count: int, where: Where | None = None) -> None:
        """The next `count` requests (that `where(method, path)` accepts) get `fault` (one of FAULTS)."""
        assert fault in FAULTS, fault
        with self._lock:
            self._pending.extend([(fault, where)] * count)

    def healed(self) -> bool:
        with self._lock:
            return not self._pending

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()

    def break_connections(self) -> int:
        """Reset every open client connection (every watch breaks); how many there were."""

        async def reset_all() -> int:
            transports = [t for t in self._transports if not t.is_closing()]
            self._transports.clear()
            for transport in transports:
                _reset(transport)
            return len(transports)

        return asyncio.run_coroutine_threadsafe(reset_all(), self._loop).result(10)

    def writes(self, since: float = 0.0) -> list[Request]:
        """Every write (POST, PUT, PATCH, DELETE) that arrived at or after `since` (monotonic)."""
        return [r for r in list(self.requests) if r.at >= since and r.method not in ("GET", "HEAD")]

    # ---------------------------------------------------------------------------------- the server

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        assert self._ready.wait(30), "the fault proxy did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        upstream_tls = ssl.create_default_context(cafile=str(self.ca_file))
        serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        serving.load_cert_chain(str(self.cert), str(self.key))
        connector = aiohttp.TCPConnector(ssl=upstream_tls, limit=0)
        async with aiohttp.ClientSession(
            connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None)
        ) as session:
            app = web.Application(client_max_size=64 * 1024 * 1024)

            async def forward(request: web.Request) -> web.StreamResponse:
                return await self._forward(session, request)

            app.router.add_route("*", "/{path:.*}", forward)
            runner = web.AppRunner(app, handle_signals=False, access_log=None)
            await runner.setup()
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            self.port = listener.getsockname()[1]
            site = web.SockSite(runner, listener, ssl_context=serving)
            await site.start()
            self._ready.set()
            await self._stopped.wait()
            await runner.cleanup()

    def _next_fault(self, method: str, path: str) -> str | None:
        """The next pending fault; a lost reply waits for a write (a watch's reply never ends), a
        refusal as too large for a replace of a DagRun's status."""
        with self._lock:
            if not self._pending:
                return None
            fault, where = self._pending[0]
            if fault == "lost-reply" and method == "GET":
                return None
            if fault == "too-large" and not _is_run_status_write(method, path):
                return None
            if where is not None and not where(method, path):
                return None
            return self._pending.pop(0)[0]

    async def _forward(self, session: aiohttp.ClientSession, request: web.Request) -> web.StreamResponse:
        arrived = time.monotonic()
        transport = request.transport
        if transport is not None:
            self._transports.add(transport)
        body = await request.read()
        precondition, name = _written(body) if request.method in ("PUT", "PATCH", "POST") else (None, None)
        if request.method == "DELETE":
            precondition = _delete_preconditions(body)

        def record(status: int | None, fault: str | None) -> None:
            self.requests.append(
                Request(
                    arrived,
                    request.method,
                    request.path,
                    request.query_string,
                    status,
                    fault,
                    precondition,
                    name,
                )
            )

        url = f"{self.upstream}{request.path_qs}"
        fault = self._next_fault(request.method, request.path)
        if fault == "lost-reply":
            self.injected[fault] += 1
            async with session.request(
                request.method,
                url,
                headers=_forwarded(request),
                data=body or None,
            ) as upstream:
                await upstream.read()
                record(upstream.status, fault)
            if transport is not None:
                _reset(transport)
            return web.Response()  # never sent: the connection is gone
        if fault == "too-large":
            self.injected[fault] += 1
            record(413, fault)
            return web.json_response(
                {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": TOO_LARGE_MESSAGE, "reason": "RequestEntityTooLarge", "code": 413},
                status=413,
            )  # fmt: skip
        if fault is not None:
            self.injected[fault] += 1
            record(int(fault) if fault.isdigit() else None, fault)
            if fault.isdigit():
                status = int(fault)
                headers = {"Retry-After": "1"} if status == 429 else {}
                return web.json_response(
                    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": f"injected by the fault proxy ({status})", "reason": REASONS[fault],
                     "code": status, **({"details": {"retryAfterSeconds": 1}} if status == 429 else {})},
                    status=status,
                    headers=headers,
                )  # fmt: skip
            if fault == "stall":  # the fault itself: a request that hangs
                self.stalling += 1
                with contextlib.suppress(TimeoutError):
                    assert self._stopped is not None
                    await asyncio.wait_for(self._stopped.wait(), self.stall_seconds)
                self.stalling -= 1
            if transport is not None:
                (transport.close if fault == "drop" else lambda: _reset(transport))()
            return web.Response()  # never sent: the connection is gone
        async with session.request(
            request.method,
            url,
            headers=_forwarded(request),
            data=body or None,
        ) as upstream:
            record(upstream.status, None)
            response = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP},
            )
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except (aiohttp.ClientError, ConnectionError):  # one side went away mid-stream (a watch)
                if transport is not None:
                    _reset(transport)  # the client sees its stream break, as from the apiserver
            return response


def _is_run_status_write(method: str, path: str) -> bool:
    return method == "PUT" and "/dagruns/" in path and path.endswith("/status")


def _forwarded(request: web.Request) -> dict[str, str]:
    return {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}


def _reset(transport: asyncio.BaseTransport) -> None:
    """Close with a TCP RST instead of a FIN."""
    try:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except (AttributeError, OSError):  # already closed underneath
        pass
    if isinstance(transport, asyncio.Transport):
        transport.abort()


def _delete_preconditions(body: bytes) -> str | None:
    """A DELETE body's DeleteOptions.preconditions as `uid=...,resourceVersion=...` (None: none)."""
    try:
        parsed: Any = json.loads(body) if body else {}
    except ValueError:
        return None
    given = (parsed.get("preconditions") or {}) if isinstance(parsed, dict) else {}
    return ",".join(f"{key}={value}" for key, value in sorted(given.items()) if value) or None


def _written(body: bytes) -> tuple[str | None, str | None]:
    """A write body's (metadata.resourceVersion, metadata.name)."""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return None, None
    meta = (parsed.get("metadata") or {}) if isinstance(parsed, dict) else {}
    version, name = meta.get("resourceVersion"), meta.get("name")
    return (str(version) if version else None), (str(name) if name else None)
