"""The one place that talks to the Kubernetes API (kopf's watches aside).

`client.Kube` wraps kubernetes_asyncio and returns plain dicts; errors are translated into the small
`KubeError` family (`errors.py`) so callers can treat 409 AlreadyExists as "done" and 409 Conflict as
"decide again".
"""

from controller.kube.client import Kube
from controller.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from controller.kube.protocol import KubeApi
from zonda.models import BACKFILLS, DAGRUNS, DAGS, POOLS, TRIGGERS

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
