"""`KubeApi`: what the rest of the controller may ask of the Kubernetes API, as a Protocol.

`client.Kube` is the real implementation; `fake.FakeKube` an in-memory one for adapter unit tests
(the cluster tier stays the proof that the real one behaves the same). Bodies are plain dicts;
errors are `controller.kube.errors.KubeError` subclasses (404 NotFound, 409 AlreadyExists/Conflict).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any, Protocol

Body = dict[str, Any]


class KubeApi(Protocol):
    async def get_custom(self, plural: str, namespace: str, name: str) -> Body | None:
        """The object, or None when it does not exist."""

    async def list_custom(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> list[Body]: ...

    async def list_custom_with_version(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> tuple[list[Body], str | None]: ...

    async def create_custom(self, plural: str, namespace: str, body: Body) -> Body:
        """Create; AlreadyExists when the name is taken (the idempotent case)."""

    async def patch_custom_status(
        self, plural: str, namespace: str, name: str, status: Body, *, resource_version: str | None = None
    ) -> Body: ...

    async def replace_custom_status(self, plural: str, namespace: str, body: Body) -> Body:
        """Replace the status; Conflict unless the body's resourceVersion is the stored one."""

    async def delete_custom(
        self,
        plural: str,
        namespace: str,
        name: str,
        *,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> bool:
        """Delete; False if it was already gone. With `resource_version`/`uid` (the apiserver's
        DeleteOptions.preconditions) only the object as it was read: Conflict if it changed since."""

    async def list_objects(
        self, plural: str, namespace: str | None, label_selector: str | None = None
    ) -> tuple[list[Body], str | None]:
        """Pods (`pods`) or our objects as stored, with `kind` and `apiVersion`, and the list's
        resourceVersion to watch from."""

    def watch_objects(
        self,
        plural: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = False,
    ) -> AsyncGenerator[tuple[str, Body], None]:
        """(type, object) after `resource_version`; KubeError 410 when it is too old to resume."""
        ...

    async def create_pod(self, namespace: str, body: Body) -> Body: ...

    async def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> bool: ...

    async def list_pods(self, namespace: str, label_selector: str) -> list[Body]: ...

    async def patch_pod(self, namespace: str, name: str, patch: list[Body]) -> Body | None: ...

    async def pod_logs(self, namespace: str, name: str, *, container: str | None = None) -> str: ...

    async def get_lease(self, namespace: str, name: str) -> Body | None: ...

    async def create_lease(self, namespace: str, body: Body) -> Body: ...

    async def replace_lease(self, namespace: str, body: Body) -> Body: ...

    async def delete_lease(self, namespace: str, name: str) -> bool: ...

    async def list_leases(self, namespace: str, label_selector: str) -> list[Body]: ...

    async def get_path(self, path: str) -> Any: ...

    async def emit_event(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        warning: bool = False,
        component: str = "zonda",
    ) -> None:
        """Record an Event about `involved` (best effort)."""
