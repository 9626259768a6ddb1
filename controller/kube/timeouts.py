"""How long an ordinary API call may take: a connect timeout and a total one.

kubernetes_asyncio gives every request `aiohttp.ClientTimeout()` (no limit of any kind) unless the
call names `_request_timeout`, and that explicit value overrides the session's own default. So an
apiserver, or a network path, that accepts a connection and then says nothing (a half-open TCP
connection after a node or load balancer died, a proxy that stopped forwarding) held the call, and
the pass, Lease renewal or CLI command waiting on it, for ever. `bound` gives every request of a
client that names no timeout of its own `RequestTimeouts.ordinary()`; watches and followed logs name
theirs (`Kube.watch_objects`, `Kube.follow_pod_log`).

The defaults: 10 s to connect (TCP and the TLS handshake: client-go's TLS handshake timeout) and 60 s
in all (the apiserver's own `--request-timeout` for a request that is not a watch: it answers 504 past
it, so a call it serves never legitimately lasts longer; and kopf's `request_timeout`, which the
controller sets to the same). client-go sets no total timeout by default (nor does kubectl's
`--request-timeout`): Go's HTTP/2 transport finds a dead connection with pings (30 s idle, 15 s to
answer), which aiohttp, on HTTP/1.1, cannot do, and TCP keepalive takes hours at the kernel's
defaults. Leases bound their calls tighter (`controller.coordination.leases`: under the renew deadline).

A timed-out call raises `TimeoutError` (aiohttp's timeout errors are subclasses): never `NotFound`, so
no caller takes it for "the object is gone"; the work queue retries the pass with back-off, the Lease
loops at their next round, the CLI says so. `$ZONDA_API_TIMEOUT_SECONDS` and
`$ZONDA_API_CONNECT_TIMEOUT_SECONDS` change them for any process (controller, triggerer, UI, CLI).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio.client import rest

TOTAL_ENV = "ZONDA_API_TIMEOUT_SECONDS"
CONNECT_ENV = "ZONDA_API_CONNECT_TIMEOUT_SECONDS"


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    given = environ.get(name, "").strip()
    if not given:
        return default
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"${name} must be a positive number of seconds, not {given!r}")
    return seconds


@dataclass(frozen=True)
class RequestTimeouts:
    """Seconds to connect (TCP and TLS) and seconds in all (connecting, sending, the answer read)."""

    connect: float = 10.0
    total: float = 60.0

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> RequestTimeouts:
        """The defaults, or `$ZONDA_API_TIMEOUT_SECONDS` / `$ZONDA_API_CONNECT_TIMEOUT_SECONDS`; a value
        that is not a positive number is an error naming the variable."""
        return cls(
            connect=_seconds(environ, CONNECT_ENV, cls.connect),
            total=_seconds(environ, TOTAL_ENV, cls.total),
        )

    def ordinary(self) -> aiohttp.ClientTimeout:
        """A GET, LIST, create, replace, patch or delete: its answer is read whole within `total`."""
        return aiohttp.ClientTimeout(total=self.total, sock_connect=self.connect)

    def streaming(self) -> aiohttp.ClientTimeout:
        """A stream that may rightly stay quiet (a followed log): bounded to connect only; its reader
        bounds the rest."""
        return aiohttp.ClientTimeout(sock_connect=self.connect)


def bound(client: rest.RESTClientObject, timeouts: RequestTimeouts) -> None:
    """Every request `client` makes without a `_request_timeout` of its own gets `timeouts.ordinary()`.

    The client's `request` (which its GET, POST, ... and `ApiClient.call_api` all go through) is
    wrapped on this instance: the one place every call of the generated API passes, whatever method
    made it."""
    unbounded: Callable[..., Awaitable[Any]] = client.request
    default = timeouts.ordinary()

    async def request(*args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        return await unbounded(*args, _request_timeout=_request_timeout or default, **kwargs)

    client.request = request  # type: ignore[method-assign]
