"""A minimal synchronous Kubernetes REST client for the task runner (and the CLI's XCom reads).

The task runner must start fast and stay light (`.importlinter`: no kopf, no Kubernetes client
libraries), yet the Kubernetes XCom backend has it write and read `XComChunk` objects. What it needs
is four calls with JSON bodies, so this speaks HTTPS with the standard library, over one kept-alive
connection, with the credentials a pod or a developer has:

- inside a Pod (`$KUBERNETES_SERVICE_HOST` set and no `$KUBECONFIG`): the ServiceAccount's token
  (re-read for each request: projected tokens rotate) and CA;
- otherwise a kubeconfig (`kubeconfig` argument, `$KUBECONFIG`'s first file, or ~/.kube/config): its
  current context's server, CA (file or data, or insecure-skip-tls-verify), and a bearer token
  (`token`/`tokenFile`) or a client certificate. Exec plugins and auth providers are not supported:
  the error says so (the runner of the local executor inherits the controller's kubeconfig).
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import tempfile
import threading
from base64 import b64decode
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TIMEOUT_SECONDS = 30.0


class KubeRestError(Exception):
    """A call the apiserver refused (with its status code and message) or could not be made."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Credentials:
    server: str
    ca_file: str | None = None
    insecure: bool = False
    token: str | None = None
    token_file: str | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None

    def bearer(self) -> str | None:
        if self.token_file:
            return Path(self.token_file).read_text().strip()
        return self.token


def in_cluster() -> Credentials:
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    host = f"[{host}]" if ":" in host else host
    return Credentials(
        server=f"https://{host}:{port}",
        ca_file=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
        token_file=str(SERVICE_ACCOUNT_DIR / "token"),
    )


def _data_file(data: str, directory: Path, name: str) -> str:
    path = directory / name
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(b64decode(data))
    return str(path)


def from_kubeconfig(path: str) -> Credentials:
    """The current context's server and user; file paths resolved relative to the kubeconfig."""
    config = yaml.safe_load(Path(path).read_text()) or {}
    base = Path(path).resolve().parent

    def named(section: str, name: str | None) -> Mapping[str, Any]:
        for item in config.get(section) or []:
            if item.get("name") == name:
                return dict(item.get(section[:-1]) or {})
        raise KubeRestError(f"{path}: no {section[:-1]} named {name!r}")

    context = named("contexts", config.get("current-context"))
    cluster = named("clusters", context.get("cluster"))
    user = named("users", context.get("user"))
    if "exec" in user or "auth-provider" in user:
        raise KubeRestError(f"{path}: exec and auth-provider credentials are not supported here; use a token")
    secrets = Path(tempfile.mkdtemp(prefix="zonda-kube-"))

    def file_of(key: str) -> str | None:
        if cluster.get(f"{key}-data") or user.get(f"{key}-data"):
            return _data_file(cluster.get(f"{key}-data") or user[f"{key}-data"], secrets, key)
        value = cluster.get(key) or user.get(key)
        return str(base / value) if value else None

    token_file = user.get("tokenFile")
    return Credentials(
        server=str(cluster["server"]),
        ca_file=file_of("certificate-authority"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        token=user.get("token"),
        token_file=str(base / token_file) if token_file else None,
        client_cert_file=file_of("client-certificate"),
        client_key_file=file_of("client-key"),
    )


def credentials(kubeconfig: str | None = None) -> Credentials:
    """Chosen as `controller.kube.Kube.connect` chooses: in-cluster unless a kubeconfig is named."""
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
        return in_cluster()
    path = kubeconfig or (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0]
    path = path or str(Path.home() / ".kube" / "config")
    if not Path(path).is_file():
        raise KubeRestError(f"no Kubernetes credentials: not in a Pod, and no kubeconfig at {path}")
    return from_kubeconfig(path)


class KubeRest:
    """JSON calls to the apiserver over one HTTPS connection (reopened when the server closed it)."""

    def __init__(self, creds: Credentials, user_agent: str = "zonda-runner") -> None:
        self.creds = creds
        self.user_agent = user_agent
        parts = urlsplit(creds.server)
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._https = parts.scheme == "https"
        self._prefix = parts.path.rstrip("/")
        self._connection: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, kubeconfig: str | None = None, user_agent: str = "zonda-runner") -> KubeRest:
        return cls(credentials(kubeconfig), user_agent)

    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.creds.ca_file)
        if self.creds.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.creds.client_cert_file:
            context.load_cert_chain(self.creds.client_cert_file, self.creds.client_key_file)
        return context

    def _open(self) -> http.client.HTTPConnection:
        if self._connection is None:
            if self._https:
                self._connection = http.client.HTTPSConnection(
                    self._host, self._port, timeout=TIMEOUT_SECONDS, context=self._ssl_context()
                )
            else:
                self._connection = http.client.HTTPConnection(self._host, self._port, timeout=TIMEOUT_SECONDS)
        return self._connection

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any] | None:
        """The JSON answer; None for 404; KubeRestError for any other failure."""
        url = self._prefix + path + (f"?{urlencode(query)}" if query else "")
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if token := self.creds.bearer():
            headers["Authorization"] = f"Bearer {token}"
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        if payload is not None:
            headers["Content-Type"] = content_type
        with self._lock:
            for attempt in (1, 2):  # a kept-alive connection the server closed is reopened once
                connection = self._open()
                try:
                    connection.request(method, url, body=payload, headers=headers)
                    response = connection.getresponse()
                    data = response.read()
                    break
                except (http.client.HTTPException, ConnectionError) as error:
                    self.close()
                    if attempt == 2:
                        raise KubeRestError(f"{method} {path}: {error}") from error
                except OSError as error:
                    self.close()
                    raise KubeRestError(f"{method} {path}: {error}") from error
        if response.status == 404:
            return None
        answer = json.loads(data) if data else {}
        if response.status >= 400:
            message = answer.get("message") if isinstance(answer, dict) else None
            message = message or data[:200].decode(errors="replace")
            raise KubeRestError(f"{method} {path}: {response.status} {message}", response.status)
        return answer if isinstance(answer, dict) else {}

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # Custom resources of one group/version, by plural.

    @staticmethod
    def custom_path(group: str, version: str, namespace: str, plural: str, name: str | None = None) -> str:
        path = f"/apis/{group}/{version}/namespaces/{quote(namespace, safe='')}/{plural}"
        return f"{path}/{quote(name, safe='')}" if name else path

    def get_custom(
        self, group: str, version: str, namespace: str, plural: str, name: str
    ) -> dict[str, Any] | None:
        return self.request("GET", self.custom_path(group, version, namespace, plural, name))

    def list_custom(
        self, group: str, version: str, namespace: str, plural: str, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        query = {"labelSelector": label_selector} if label_selector else None
        answer = self.request("GET", self.custom_path(group, version, namespace, plural), query=query)
        return list((answer or {}).get("items") or [])

    def create_custom(
        self, group: str, version: str, plural: str, body: Mapping[str, Any], field_manager: str
    ) -> dict[str, Any] | None:
        """POST: KubeRestError with status 409 when the object exists."""
        path = self.custom_path(group, version, body["metadata"]["namespace"], plural)
        return self.request("POST", path, body, query={"fieldManager": field_manager})

    def apply_custom(
        self, group: str, version: str, plural: str, body: Mapping[str, Any], field_manager: str
    ) -> dict[str, Any] | None:
        """Server-side apply: creates the object or makes it what `body` says (idempotent)."""
        meta = body["metadata"]
        return self.request(
            "PATCH",
            self.custom_path(group, version, meta["namespace"], plural, meta["name"]),
            body,
            query={"fieldManager": field_manager, "force": "true"},
            content_type="application/apply-patch+yaml",
        )
