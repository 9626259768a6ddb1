"""The errors a Kubernetes API call raises, translated from kubernetes_asyncio's `ApiException`.

Apart from `client.py` so that `fake.FakeKube` and `leases.py` raise and catch the same family without
importing the real client: callers treat 409 AlreadyExists as "done" and 409 Conflict as "decide again".
"""

from __future__ import annotations

import json

from kubernetes_asyncio.client.exceptions import ApiException


class KubeError(Exception):
    """An API call failed; `status` is the HTTP status and `reason` the API's message."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason

    @property
    def api_message(self) -> str:
        """The `message` of the API's Status body (the whole reason when it is not one)."""
        try:
            message = json.loads(self.reason).get("message")
        except (ValueError, AttributeError):
            return self.reason.strip()
        return str(message) if message else self.reason.strip()


class NotFound(KubeError):
    pass


class AlreadyExists(KubeError):
    pass


class Conflict(KubeError):
    """The object changed since it was read (resourceVersion precondition failed)."""


def translate(exc: ApiException) -> KubeError:
    """Our exception for the client's: 404 NotFound, 409 AlreadyExists or Conflict, else KubeError."""
    reason = str(exc.body or exc.reason)
    if exc.status == 404:
        return NotFound(404, reason)
    if exc.status == 409:
        if "AlreadyExists" in reason or "already exists" in reason:
            return AlreadyExists(409, reason)
        return Conflict(409, reason)
    return KubeError(int(exc.status or 0), reason)
