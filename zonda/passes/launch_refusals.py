"""A try whose pod the apiserver refuses: failed for good, or launched again later? Purely computational.

Airflow's KubernetesExecutor (`KubernetesExecutor.sync`, apache-airflow-providers-cncf-kubernetes)
fails the task instance when creating its pod raises an `ApiException` (400 BadRequest, 403 Forbidden,
404, 422 Invalid...), so its retries and failure callbacks apply and the run ends; it queues the pod
again only for a 403 "exceeded quota" (and a 409 conflict or a 500 from a webhook) while
`task_publish_max_retries` allows. The KubernetesPodOperator's `PodManager.run_pod_async` logs the
exception and raises it again, which fails the try. Zonda does the same, with one difference: what
belongs to the cluster's moment rather than to the pod as built waits, as Kubernetes' Job controller
waits for quota:

- **fails the try**: 400 BadRequest, 413 (the pod is too large), 422 Invalid (a bad resource quantity,
  an env name Kubernetes refuses, limits below requests: the spec itself), and a 403 from admission
  that judged this pod's spec (Pod Security, LimitRanger's bounds, a ServiceAccount that does not
  exist, an admission webhook's denial): creating the same pod again is refused the same way;
- **launched again, with the reconcile's backoff** (0.5 s ... 5 min, the run's `Reconciled=False`
  condition saying why after the third failure): a 403 "exceeded quota" (running pods end and free
  it), a 403 of the controller's own RBAC ("cannot create resource": the operator's setup, fixed
  without touching any DAG; failing every try in the cluster meanwhile would fail every run), 409s
  other than our own name's (adopted by the executor), 429, 5xx and a connection that broke (the
  fault suite, `tests/cluster/test_faults.py`, proves those are ridden out).
"""

from __future__ import annotations

from datetime import datetime

from zonda.passes.decisions import AttemptPhase, ObservedAttempt

#: The spec itself is refused: 400 BadRequest, 413 Request Entity Too Large, 422 Invalid.
REFUSED_FOR_GOOD = frozenset({400, 413, 422})
#: Words of a 403 that is about the cluster's state or the controller's identity, not the pod.
_WAIT_403 = ("exceeded quota", "cannot create resource")


def refusal(status: int, message: str) -> str | None:
    """The words a try fails with when the apiserver refused its pod for good; None when the refusal
    is a moment's (launch it again later). `message` is the API's Status message."""
    permanent = status in REFUSED_FOR_GOOD or (
        status == 403 and not any(words in message for words in _WAIT_403)
    )
    if not permanent:
        return None
    return f"the apiserver refused its pod ({status}): {message}"


def refused_attempt(
    *, task_id: str, try_number: int, name: str, words: str, now: datetime
) -> ObservedAttempt:
    """What the executor reports of a try whose pod was refused for good: a failed attempt that never
    ran (no start, no exit code), ended when it was refused; the pass fails the try with `words`."""
    return ObservedAttempt(
        task_id=task_id,
        try_number=try_number,
        name=name,
        phase=AttemptPhase.FAILED,
        message=words,
        finished_at=now,
    )
