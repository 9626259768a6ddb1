"""Where XCom values too large for the DagRun's status are written: Kubernetes, or object storage.

`$ZONDA_XCOM_BACKEND` (the chart's `xcom.backend`) chooses:
- `kubernetes` (the default): `XComChunk` objects owned by the DagRun, deleted with it
  (`zonda.resources.xcom_chunks`, written and read by `controller.xcom.chunks` with the pod's ServiceAccount
  or the local executor's kubeconfig). A try with no cluster behind it (`zonda dags test`) keeps
  its large values in this process's memory instead (fsspec's `memory://`).
- `fsspec`: the base URL in `$ZONDA_XCOM_BACKEND_URL` (`xcom.backendUrl`), any URL fsspec opens —
  `s3://bucket/xcom`, `gcs://...`, `abfs://...` with their fsspec package installed, or
  `file:///mnt/xcom` on a shared volume. Setting only the URL chooses this backend.
- `none`: a value larger than the inline limit fails the task saying so.
`$ZONDA_XCOM_MAX_BYTES` caps a value (default `zonda.tries.xcoms.DEFAULT_MAX_BYTES`).

A reference holds the value's full URL (`xcomchunks://...` or the object's), so reading needs no
configuration: `zonda xcom get` and a downstream task read what the upstream wrote wherever they run
(given the cluster's or the storage's credentials).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zonda.resources import wire
from zonda.resources.invocations import TaskInvocation
from zonda.tries import xcoms
from zonda.tries.task_context import EarlierXComReader, XComReader

if TYPE_CHECKING:  # imported where a large value is written or read: a try with small XComs skips them
    from controller.kube.rest import KubeRest

BACKEND_ENV = "ZONDA_XCOM_BACKEND"
BACKEND_URL_ENV = "ZONDA_XCOM_BACKEND_URL"
MAX_BYTES_ENV = "ZONDA_XCOM_MAX_BYTES"
KUBERNETES, FSSPEC, NONE = "kubernetes", "fsspec", "none"
BACKENDS = (KUBERNETES, FSSPEC, NONE)
#: Where the Kubernetes backend keeps values of a try that has no cluster (`zonda dags test`).
IN_PROCESS_URL = "memory://zonda-xcom"
DAGRUNS = "dagruns"


def task_environment(environ: Mapping[str, str]) -> tuple[dict[str, str], ...]:
    """The controller's XCom settings as env entries for task pods (local tries inherit them)."""
    names = (BACKEND_ENV, BACKEND_URL_ENV, MAX_BYTES_ENV)
    return tuple({"name": name, "value": environ[name]} for name in names if environ.get(name))


@dataclass(frozen=True)
class XComStore:
    """Writes values over the inline limit to the backend and reads references back.

    `backend` defaults to fsspec when `base_url` is given, else Kubernetes; `kubeconfig` (default:
    in-cluster, or `$KUBECONFIG`) is the Kubernetes backend's credentials, for writes and reads.
    """

    base_url: str | None = None
    max_bytes: int = xcoms.DEFAULT_MAX_BYTES
    inline_limit: int = xcoms.INLINE_LIMIT_BYTES
    backend: str | None = None
    kubeconfig: str | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _kube: list[KubeRest] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.backend is not None and self.backend not in BACKENDS:
            raise xcoms.XComError(f"unknown XCom backend {self.backend!r}: one of {', '.join(BACKENDS)}")
        if self.chosen_backend == FSSPEC and not self.base_url:
            raise xcoms.XComError(f"the fsspec XCom backend needs a base URL (${BACKEND_URL_ENV})")

    @property
    def chosen_backend(self) -> str:
        return self.backend or (FSSPEC if self.base_url else KUBERNETES)

    @classmethod
    def from_environment(cls) -> XComStore:
        max_bytes = os.environ.get(MAX_BYTES_ENV)
        return cls(
            base_url=os.environ.get(BACKEND_URL_ENV) or None,
            max_bytes=int(max_bytes) if max_bytes else xcoms.DEFAULT_MAX_BYTES,
            backend=os.environ.get(BACKEND_ENV) or None,
        )

    def kube(self) -> KubeRest:
        """The Kubernetes client, connected on first use (a try with small XComs never connects)."""
        if not self._kube:
            from controller.kube.rest import KubeRest

            self._kube.append(KubeRest.connect(self.kubeconfig))
        return self._kube[0]

    def prepare(self, invocation: TaskInvocation, key: str, value: Any) -> Any:
        """The value as the result carries it: its JSON form inline, or a reference to what was written.

        Raises `XComError` for a value that is not JSON, over the maximum, or too large without a backend.
        """
        data = xcoms.serialize(key, value)
        xcoms.check_size(key, len(data), self.max_bytes)
        if len(data) <= self.inline_limit:
            return xcoms.deserialize(data)
        backend = self.chosen_backend
        if backend == NONE:
            raise xcoms.XComError(
                f"XCom {key!r} is {len(data)} bytes; values over {self.inline_limit} bytes need an XCom "
                f"backend: set xcom.backend in the chart (${BACKEND_ENV}), or return less"
            )
        map_index = invocation.map_index
        if backend == KUBERNETES and invocation.namespace:
            from controller.kube.rest import KubeRestError
            from controller.xcom import chunks

            try:
                run_uid = invocation.run_uid or self._run_uid(invocation.namespace, invocation.run_name)
                url = chunks.write(
                    self.kube(), data, namespace=invocation.namespace, run_name=invocation.run_name,
                    run_uid=run_uid, task_id=invocation.task_id, map_index=map_index,
                    try_number=invocation.try_number, key=key,
                )  # fmt: skip
            except KubeRestError as error:
                message = f"XCom {key!r} ({len(data)} bytes) not written as XComChunks: {error}"
                raise OSError(message) from error
            return xcoms.stored_reference(url, len(data))
        base_url = self.base_url if backend == FSSPEC and self.base_url else IN_PROCESS_URL
        path = xcoms.object_path(
            invocation.namespace or "default",
            invocation.run_name,
            invocation.task_id,
            invocation.try_number,
            key,
            map_index,
        )
        url = f"{base_url.rstrip('/')}/{path}"
        import fsspec  # only for a large value: a try that writes none does not pay for the import

        with fsspec.open(url, "wb", auto_mkdir=True) as stream:
            stream.write(data)
        return xcoms.stored_reference(url, len(data))

    def load(self, value: Any) -> Any:
        """A value read from status: a reference is read from its backend (once per URL), any other as is."""
        if not xcoms.is_stored(value):
            return value
        url = xcoms.stored_url(value)
        if url not in self._cache:
            from controller.kube.rest import KubeRestError
            from controller.xcom import chunks
            from zonda.resources import xcom_chunks

            try:
                if xcom_chunks.is_chunk_url(url):
                    data = chunks.read(self.kube(), url, xcoms.stored_size(value))
                else:
                    import fsspec

                    with fsspec.open(url, "rb") as stream:
                        data = stream.read()
                self._cache[url] = xcoms.deserialize(data)
            except (OSError, ValueError, KubeRestError) as error:
                raise xcoms.XComError(f"cannot read the stored XCom at {url}: {error}") from error
        return self._cache[url]

    def loading(self, reader: XComReader) -> XComReader:
        """`reader`, with stored references read back."""

        def read(task_id: str, key: str) -> Any:
            return self.load(reader(task_id, key))

        return read

    def earlier_reader(self, invocation: TaskInvocation) -> EarlierXComReader:
        """`include_prior_dates`: the XComs of the DAG's other runs in the namespace, read back.

        The runs are listed once, at the first such pull (the task identity may `list` DagRuns), by
        the DAG's label (`zonda.resources.dagrun_models.dagrun_labels`): a namespace's other DAGs' runs are
        never read; a try with no cluster (`zonda dags test`) has no other run to see.
        """
        runs: list[xcoms.EarlierRun] = []
        listed: list[bool] = []

        def read(ti_key: str, key: str) -> list[Any]:
            at = invocation.logical_date or invocation.run_after
            if not invocation.namespace or at is None:
                return []
            if not listed:
                runs.extend(self._runs_of(invocation.namespace, invocation.dag_name))
                listed.append(True)
            values = xcoms.earlier_xcoms(runs, ti_key, key, at=at, this_run=invocation.run_name)
            return [self.load(value) for value in values]

        return read

    def _run_uid(self, namespace: str, run_name: str) -> str:
        """The owner's uid when the invocation lacks it: chunks without an owner would never be deleted."""
        from controller.kube.rest import KubeRestError
        from zonda.resources.models import GROUP, VERSION

        run = self.kube().get_custom(GROUP, VERSION, namespace, DAGRUNS, run_name)
        if run is None:
            raise KubeRestError(f"DagRun {namespace}/{run_name} not found: its XComs would have no owner")
        return str(run["metadata"]["uid"])

    def _runs_of(self, namespace: str, dag_name: str) -> list[xcoms.EarlierRun]:
        from controller.kube.rest import KubeRestError
        from zonda.resources.dagrun_models import DagRunStatus  # pydantic: only for include_prior_dates
        from zonda.resources.models import GROUP, VERSION

        selector = f"{wire.LABEL_DAG}={wire.label_value(dag_name)}"  # the DAG's runs, not the namespace's
        try:
            bodies = self.kube().list_custom(GROUP, VERSION, namespace, DAGRUNS, label_selector=selector)
        except KubeRestError as error:
            raise xcoms.XComError(f"include_prior_dates: cannot list the DAG's runs: {error}") from error
        runs = []
        for body in bodies:
            if (body.get("spec") or {}).get("dagName") != dag_name:
                continue  # another DAG whose name shares the label value's first 63 characters
            status = DagRunStatus.model_validate(body.get("status") or {})
            when = status.logical_date or status.run_after  # Airflow 3: coalesce(logical_date, run_after)
            if when is not None:
                meta = body["metadata"]
                runs.append(xcoms.EarlierRun(meta["name"], when, meta.get("creationTimestamp", ""), status))
        return runs
