"""The one place that talks to the Kubernetes API (kopf's watches aside): both clients.

`client.Kube` wraps kubernetes_asyncio and returns plain dicts (the manager, the triggerer, the UI, the
CLI); `rest` is the task runner's small standard-library client (no client library in a task pod).
Errors are translated into the small `KubeError` family (`errors.py`) so callers can treat 409
AlreadyExists as "done" and 409 Conflict as "decide again"; `protocol.KubeApi` is what reconcilers need,
and `fake.FakeKube` its in-memory double for adapter unit tests.

May import: kubernetes_asyncio, `zonda` — nothing else of `controller` (the bottom layer).
"""

from controller.kube.client import Kube
from controller.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from controller.kube.protocol import KubeApi
from zonda.resources.models import BACKFILLS, DAGRUNS, DAGS, POOLS, TRIGGERS

__all__ = [
    "BACKFILLS",
    "DAGRUNS",
    "DAGS",
    "POOLS",
    "TRIGGERS",
    "AlreadyExists",
    "Conflict",
    "Kube",
    "KubeApi",
    "KubeError",
    "NotFound",
]
