"""Wait, before kopf starts, until the apiserver serves every Zonda resource the controller watches.

kopf resolves the resources of its handlers once, when it starts, and with scanning off (no
cluster-wide CRD watch: least privilege) never again: a controller started while the apiserver was
restarting, before the CRDs' paths were installed again, logged "Unresolved resources cannot be
served" and watched nothing, forever, while looking healthy (found by the fault suite's apiserver
restarts, `tests/cluster/test_faults.py`). So the discovery document of zonda.dev is read first, until
it lists them all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

import aiohttp

from controller.kube import KubeApi, KubeError
from zonda.resources.models import GROUP, VERSION

logger = logging.getLogger(__name__)


async def wait_until_served(
    kube: KubeApi,
    plurals: Iterable[str],
    *,
    retry_seconds: float = 1.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> int:
    """Read /apis/zonda.dev/<version> until it lists every one of `plurals`; how many reads it took."""
    wanted = set(plurals)
    reads = 0
    while True:
        reads += 1
        try:
            found = await kube.get_path(f"/apis/{GROUP}/{VERSION}")
            missing = sorted(wanted - {r.get("name") for r in (found or {}).get("resources", [])})
            why = f"not served yet: {', '.join(missing)}"
        except (KubeError, OSError, aiohttp.ClientError, TimeoutError) as error:
            missing, why = sorted(wanted), f"discovery failed: {error}"
        if not missing:
            return reads
        if reads == 1 or reads % 30 == 0:
            logger.warning("waiting for the apiserver to serve %s/%s (%s)", GROUP, VERSION, why)
        await sleep(retry_seconds)
