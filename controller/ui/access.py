"""Who is looking, and what they may do: every action runs with the viewer's own Kubernetes identity.

Three ways to know the viewer (`--auth`):
- `kubeconfig` (local `zonda ui`): the viewer is whoever owns the kubeconfig the server was started
  with; the server acts with it, so RBAC sees the user exactly as `kubectl` would.
- `token` (in a cluster behind an OIDC proxy): the viewer's bearer token arrives in `Authorization:
  Bearer` or `X-Forwarded-Access-Token`; reads are checked with a SelfSubjectAccessReview made with
  that token and actions are made with it, so the API refuses what the viewer may not do.
- `impersonate` (behind a proxy that authenticates and sets `X-Forwarded-User`/`-Groups`): reads
  are checked with a SubjectAccessReview, actions carry Impersonate-User; the UI's account needs the
  `impersonate` verb, and only a trusted proxy may reach the UI (the chart's NetworkPolicy note).
A request without an identity in `token`/`impersonate` mode is refused (401), never served as the
UI's own account. Read-only mode refuses every action before the API is called.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass

from controller.kube import Kube
from zonda.resources.models import GROUP

#: Resources the UI reads outside our own API group.
_CORE_RESOURCES = frozenset({"pods", "events"})


def api_group(resource: str) -> str:
    return "" if resource in _CORE_RESOURCES else GROUP


class AuthMode(enum.StrEnum):
    KUBECONFIG = "kubeconfig"
    TOKEN = "token"
    IMPERSONATE = "impersonate"


class NoIdentity(Exception):
    """The request carries no identity in a mode that needs one."""


@dataclass(frozen=True)
class Viewer:
    """The person behind a request: a bearer token, an impersonated user, or the kubeconfig's owner."""

    mode: AuthMode
    token: str | None = None
    user: str | None = None
    groups: tuple[str, ...] = ()

    @property
    def cache_key(self) -> str:
        return f"{self.mode}:{self.token or ''}:{self.user or ''}:{','.join(self.groups)}"

    @property
    def display(self) -> str:
        if self.mode is AuthMode.KUBECONFIG:
            return "you (kubeconfig)"
        if self.mode is AuthMode.IMPERSONATE:
            return self.user or "?"
        return "bearer token"


def viewer_from_headers(mode: AuthMode, headers: Mapping[str, str]) -> Viewer:
    """The viewer a request says it is, per `mode`; `NoIdentity` if it says nothing usable."""
    if mode is AuthMode.KUBECONFIG:
        return Viewer(mode)
    if mode is AuthMode.TOKEN:
        authorization = headers.get("Authorization", "")
        token = authorization[7:].strip() if authorization.lower().startswith("bearer ") else ""
        token = token or headers.get("X-Forwarded-Access-Token", "").strip()
        if not token:
            raise NoIdentity("no bearer token (Authorization or X-Forwarded-Access-Token header)")
        return Viewer(mode, token=token)
    user = headers.get("X-Forwarded-User", "").strip()
    if not user:
        raise NoIdentity("no X-Forwarded-User header from the authenticating proxy")
    groups = tuple(g.strip() for g in headers.get("X-Forwarded-Groups", "").split(",") if g.strip())
    return Viewer(mode, user=user, groups=groups)


class Access:
    """Answers "may this viewer ...?" (cached briefly) and gives the API client to act as them."""

    def __init__(self, kube: Kube, mode: AuthMode, *, read_only: bool, ttl: float = 30.0) -> None:
        self.kube = kube
        self.mode = mode
        self.read_only = read_only
        self.ttl = ttl
        self._answers: dict[tuple[str, str, str, str], tuple[float, bool, str]] = {}

    def acting_as(self, viewer: Viewer) -> Kube:
        """An API client that authenticates as the viewer (close it unless it is `self.kube`)."""
        if viewer.mode is AuthMode.TOKEN and viewer.token:
            return self.kube.as_bearer(viewer.token)
        if viewer.mode is AuthMode.IMPERSONATE and viewer.user:
            return self.kube.impersonating(viewer.user, viewer.groups)
        return self.kube

    async def allowed(
        self, viewer: Viewer, verb: str, resource: str, namespace: str, subresource: str = ""
    ) -> tuple[bool, str]:
        """Whether RBAC lets the viewer `verb` `resource` in `namespace`, and the API's reason."""
        if viewer.mode is AuthMode.KUBECONFIG:
            return True, ""  # the server's own credentials are the viewer's: the API decides per call
        key = (viewer.cache_key, verb, f"{resource}/{subresource}", namespace)
        cached = self._answers.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1], cached[2]
        if viewer.mode is AuthMode.TOKEN:
            as_viewer = self.acting_as(viewer)
            try:
                allowed, reason = await as_viewer.access_review(
                    verb=verb,
                    resource=resource,
                    group=api_group(resource),
                    namespace=namespace,
                    subresource=subresource,
                )
            finally:
                await as_viewer.close()
        else:
            allowed, reason = await self.kube.access_review(
                verb=verb,
                resource=resource,
                group=api_group(resource),
                namespace=namespace,
                subresource=subresource,
                user=viewer.user,
                groups=viewer.groups,
            )
        if len(self._answers) > 10_000:
            self._answers.clear()
        self._answers[key] = (time.monotonic() + self.ttl, allowed, reason)
        return allowed, reason
