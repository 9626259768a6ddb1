"""The Kubernetes executor: one Pod per try, named deterministically, owned by the DagRun.

The manifest comes from the pure builder `controller.executors.pods`; this module only submits,
lists and deletes. A 409 AlreadyExists is that try's pod when it is this run's (same uid label): it is
adopted (kept for the next pass to observe), so a launch is idempotent and never makes a second try;
a pod of that name left by another run (deleted and made again under the same name) is an error
until the garbage collector removes it (`AttemptNameTaken`). A pod the apiserver refuses for good
(`zonda.passes.launch_refusals`: 422 Invalid, a 403 of admission...) is not an error of the pass:
the executor reports that try as a failed attempt from then on, so the pass fails the try with the
apiserver's words and its retries apply (a refusal of the moment, quota or 5xx, raises as before:
the reconcile is retried with backoff).

A task pod carries the finalizer `zonda.dev/try-tracking` (`zonda.passes.try_tracking`): deleted or
evicted, it stays (Terminating) and is observed as its try's end (failed, if it had not ended), so a
pass whose status write never recorded that try (refused, or its reply lost) does not create it again
under the same name (one try, two pods), even when the deletion fell in a gap of the pod watch or
while the controller was down: the next pass adopts and fails it, its retries apply. The finalizer
is removed (`release`) after a status write that accounts for the pod (`release_recorded`: a pod
`kill` deleted too, as it may be an orphan), at once after `delete_finished` (deleteWorkerPods),
and by the pod watch's handler for a run that no pass will record it in (gone, being deleted,
finished: `controller.manager.main`). A pod the pod watch saw removed (one made before the
finalizer, or whose finalizer a user removed) is still reported from its last state
(`pod_deleted`). A pod gets the variables and connections its task names as references
(`zonda.tries.secret_refs`), never their values.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from controller.executors import pods, references
from controller.kube import AlreadyExists, Conflict, Kube, KubeError
from controller.kube.cache import LabelledObjects, copy_body
from zonda.passes import launch_refusals, try_tracking
from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources.dagrun_models import DagRunStatus
from zonda.resources.invocations import TaskInvocation
from zonda.resources.wire import ANNOTATION_TASK_ID, LABEL_DAGRUN_UID, LABEL_TRY
from zonda.specs.dags import ResolvedTask
from zonda.tries import secret_refs

logger = logging.getLogger(__name__)

#: Reports kept in memory per map (`AttemptReports`: refused launches, deleted pods; the newest), and runs
#: whose held pods are kept: one is read by the run's next pass, moments after.
REFUSALS_KEPT = 4096
#: What a pod deleted before it ended is reported as (its try failed: the executor gave up on it).
DELETED_BEFORE_ITS_END = try_tracking.DELETED_BEFORE_ITS_END


class AttemptNameTaken(KubeError):
    """The pod name of a try is held by a pod that is not this run's."""

    def __init__(self, namespace: str, name: str, owner_uid: str | None, run_uid: str) -> None:
        super().__init__(
            409,
            f"pod {namespace}/{name} exists but belongs to run uid {owner_uid or '(none)'}, not {run_uid}: "
            "the try is launched once it is gone (a run deleted and created again under the same name "
            "waits for the garbage collector)",
        )


def _observe(pod: Mapping[str, Any]) -> ObservedAttempt:
    meta = pod["metadata"]
    task_id = meta.get("annotations", {}).get(ANNOTATION_TASK_ID, "")
    try_number = int(meta.get("labels", {}).get(LABEL_TRY, "0"))
    observed = pods.observe_pod(pod, task_id=task_id, try_number=try_number)
    return try_tracking.observe_held(pod, dataclasses.replace(observed, uid=meta.get("uid")))


class AttemptReports:
    """Reports of tries kept in memory by (run uid, attempt name), the newest `REFUSALS_KEPT` of them:
    what `observe` adds to the pods it finds for a run."""

    def __init__(self) -> None:
        self._reports: OrderedDict[tuple[str, str], ObservedAttempt] = OrderedDict()

    def remember(self, run_uid: str, name: str, report: ObservedAttempt) -> None:
        self._reports.pop((run_uid, name), None)
        self._reports[(run_uid, name)] = report
        while len(self._reports) > REFUSALS_KEPT:
            self._reports.popitem(last=False)

    def forget(self, run_uid: str, name: str) -> None:
        self._reports.pop((run_uid, name), None)

    def of_run(self, run_uid: str) -> dict[str, ObservedAttempt]:
        return {name: report for (uid, name), report in self._reports.items() if uid == run_uid}

    def __len__(self) -> int:
        return len(self._reports)


class PodNews(enum.Enum):
    """What a task pod's watch event means for its run (`KubernetesExecutor.news`)."""

    NONE = "none"  # nothing a pass would observe differently: no pass
    STARTED = "started"  # only that its try started running: a pass may wait a little
    CHANGED = "changed"  # a pass now


class KubernetesExecutor:
    name = "kubernetes"

    def __init__(self, kube: Kube, defaults: pods.PodDefaults) -> None:
        self.kube = kube
        self.defaults = defaults
        self.references = references.PodReferences(kube)  # one read per namespace for a pass's launches
        #: The task pods by run uid, kept by the controller's pod watch (None: list them each pass).
        #: A pass listed its run's pods: with a 20-task chain, 20 pods read for each task's launch.
        self.pods: LabelledObjects | None = None
        #: Tries whose pod the apiserver refused for good, by (run uid, attempt name): reported failed.
        #: In memory: after a restart, the try's pod is missing and the pass fails it as a zombie.
        self.refused = AttemptReports()
        #: The last report of each task pod the watch saw deleted, by (run uid, attempt name): a try
        #: whose pod was deleted before it ended is failed, whether or not a status recorded it (a
        #: pass that launched it and whose status write was refused or lost leaves an orphan: gone
        #: before the next pass adopts it, that pass would create the same try again). In memory: after
        #: a restart, such an orphan is created again (one try, two pods), as before.
        self.deleted = AttemptReports()
        #: The held pods (deleted, our finalizer kept) the last `observe` of each run saw, by run uid:
        #: what `release_recorded` looks at after that pass's write (none in the normal flow).
        self.held: dict[str, list[dict[str, Any]]] = {}
        #: Each kept pod's observation, by (namespace, name): (its resourceVersion, `_observe` of it).
        self._observations: dict[tuple[str, str], tuple[str, ObservedAttempt]] = {}

    async def _pods_of(self, namespace: str, run_uid: str) -> list[dict[str, Any]]:
        """The run's pods, to read only (the kept bodies themselves when the watch keeps them)."""
        if self.pods is None:
            return await self.kube.list_pods(namespace, f"{LABEL_DAGRUN_UID}={run_uid}")
        if (kept := self.pods.kept(namespace, run_uid)) is not None:
            return kept
        every = await self.kube.list_pods(namespace, LABEL_DAGRUN_UID)  # the namespace's task pods
        self.pods.seed(namespace, [copy_body(pod) for pod in every])
        return self.pods.kept(namespace, run_uid) or []

    async def observe(self, run: Mapping[str, Any]) -> dict[str, ObservedAttempt]:
        meta = run["metadata"]
        found = await self._pods_of(meta["namespace"], meta["uid"])
        if held := [pod for pod in found if try_tracking.held(pod)]:
            self.held[meta["uid"]] = held
            while len(self.held) > REFUSALS_KEPT:  # runs deleted after a pass that did not write
                del self.held[next(iter(self.held))]
        else:
            self.held.pop(meta["uid"], None)
        reported = self.refused.of_run(meta["uid"]) | self.deleted.of_run(meta["uid"])
        return reported | {pod["metadata"]["name"]: self.observed(pod) for pod in found}

    def pod_deleted(self, pod: Mapping[str, Any]) -> None:
        """A task pod's DELETED event (its last state): remembered as its try's last report, failed if
        it had not ended."""
        meta = pod.get("metadata") or {}
        uid = (meta.get("labels") or {}).get(LABEL_DAGRUN_UID)
        if uid is None:
            return
        self.deleted.remember(uid, meta.get("name", ""), try_tracking.gone(_observe(pod)))
        self._observations.pop((meta.get("namespace", ""), meta.get("name", "")), None)

    def observed(self, pod: Mapping[str, Any]) -> ObservedAttempt:
        """What a pass observes of this pod's try: worked out once per pod version (the watch's pods
        are read on every event and by every pass of their run, 20 a pass for a 20-task chain)."""
        meta = pod["metadata"]
        version = meta.get("resourceVersion")
        if self.pods is None or version is None:
            return _observe(pod)
        key = (meta.get("namespace", ""), meta.get("name", ""))
        kept = self._observations.get(key)
        if kept is not None and kept[0] == version:
            return kept[1]
        observation = _observe(pod)
        self._observations[key] = (version, observation)
        return observation

    def news(self, pod: Mapping[str, Any]) -> PodNews:
        """What a task pod's watch event tells a pass, against the pod kept (call before keeping it).

        A task pod's watch events are about four per try (ADDED, scheduled, Running, Succeeded); the
        first is our own create, already kept from its answer, and the scheduler's binding changes
        nothing a pass reads: NONE, no pass is needed. STARTED: only that its try started running
        (the status shows it a moment later, usually in the same write as the try's end). CHANGED:
        anything else a pass would observe differently, or a pod not kept."""
        if self.pods is None:
            return PodNews.CHANGED
        meta = pod.get("metadata") or {}
        kept = self.pods.objects.get((meta.get("namespace", ""), meta.get("name", "")))
        if kept is None:
            return PodNews.CHANGED
        before, now = self.observed(kept[1]), self.observed(pod)
        if before == now:
            return PodNews.NONE
        if before.phase is AttemptPhase.PENDING and now.phase is AttemptPhase.RUNNING:
            return PodNews.STARTED
        return PodNews.CHANGED

    async def launch(
        self, run: Mapping[str, Any], *, task: ResolvedTask, invocation: TaskInvocation, attempt_name: str
    ) -> str | None:
        meta = run["metadata"]
        self.refused.forget(meta["uid"], attempt_name)
        self.deleted.forget(meta["uid"], attempt_name)
        manifest = pods.build_task_pod(
            invocation=invocation,
            task=task,
            namespace=meta["namespace"],
            name=attempt_name,
            owner=run,
            defaults=self.defaults,
        )
        manifest["metadata"]["labels"][LABEL_DAGRUN_UID] = meta["uid"]
        secret_refs.apply_references(manifest, await self.references(meta["namespace"], task))
        try:
            created = await self.kube.create_pod(meta["namespace"], manifest)
        except AlreadyExists:
            created = await self._adopt(meta["namespace"], meta["uid"], attempt_name)
        except KubeError as error:
            words = launch_refusals.refusal(error.status, error.api_message)
            if words is None:
                raise  # the moment's: the reconcile is retried with backoff
            annotations = manifest["metadata"].get("annotations", {})
            refused = launch_refusals.refused_attempt(
                task_id=annotations.get(ANNOTATION_TASK_ID, invocation.task_id),
                try_number=invocation.try_number,
                name=attempt_name,
                words=words,
                now=datetime.now(UTC),
            )
            self.refused.remember(meta["uid"], attempt_name, refused)
            return words
        if self.pods is not None:
            self.pods.observed(copy_body(created))
        return None

    async def _adopt(self, namespace: str, run_uid: str, name: str) -> dict[str, Any]:
        """The pod a create met (409): this run's try, created before (by a pass whose status write
        never happened, or seen late by the watch), to adopt; anyone else's is an error."""
        ours = await self.kube.list_pods(namespace, f"{LABEL_DAGRUN_UID}={run_uid}")
        found = next((pod for pod in ours if pod["metadata"]["name"] == name), None)
        if found is None:
            every = await self.kube.list_pods(namespace, LABEL_DAGRUN_UID)
            other = next((pod for pod in every if pod["metadata"]["name"] == name), None)
            labels = (other or {}).get("metadata", {}).get("labels") or {}
            raise AttemptNameTaken(namespace, name, labels.get(LABEL_DAGRUN_UID), run_uid)
        return found

    async def release_recorded(
        self, run: Mapping[str, Any], observed: Mapping[str, ObservedAttempt], written: DagRunStatus
    ) -> int:
        """After a pass's status write: remove the finalizer of the run's pods being deleted whose try
        the status written accounts for (`try_tracking.release_after_write`); how many were released."""
        meta = run["metadata"]
        found = self.held.pop(meta["uid"], [])  # as this pass observed them: no read in the normal flow
        held = [
            pod for pod in found if try_tracking.release_after_write(pod, observed, written, meta["name"])
        ]
        return sum([await self.release(pod) for pod in held])

    async def release(self, pod: Mapping[str, Any]) -> bool:
        """Remove our finalizer from this pod as read (its uid and the finalizer's place tested): True
        when removed now. A pod gone, or changed since (a 422 of the test: its finalizer list moved or
        another pod took the name) is left to the watch's next report of it."""
        patch = try_tracking.removal_patch(pod)
        if patch is None:
            return False
        meta = pod["metadata"]
        try:
            patched = await self.kube.patch_pod(meta["namespace"], meta["name"], patch)
        except KubeError as error:
            if error.status != 422:
                raise
            logger.info("pod %s/%s: finalizer not removed: %s", meta["namespace"], meta["name"], error)
            return False
        if patched is not None and self.pods is not None:
            self.pods.observed(copy_body(patched))
        return patched is not None

    async def kill(self, run: Mapping[str, Any], attempt_name: str, *, uid: str | None) -> None:
        """The pod stays held: a killed attempt may be one no status recorded (an orphan a pass did
        not adopt), so it goes only once a status accounts for it (`release_recorded`: the pod's
        event wakes its run's pass)."""
        await self._delete(run, attempt_name, uid, grace_period_seconds=5, release=False)

    async def delete_finished(self, run: Mapping[str, Any], attempt_name: str, *, uid: str | None) -> bool:
        return await self._delete(run, attempt_name, uid, release=True)

    async def _delete(
        self,
        run: Mapping[str, Any],
        name: str,
        uid: str | None,
        grace_period_seconds: int | None = None,
        *,
        release: bool,
    ) -> bool:
        """Delete the pod the pass observed, at its uid; a pod it did not observe (uid None: gone, or not
        delivered to this replica yet) is left, as is one of that name created again since (409)."""
        if uid is None:
            return False
        namespace = run["metadata"]["namespace"]
        try:
            deleted = await self.kube.delete_pod(
                namespace, name, grace_period_seconds=grace_period_seconds, uid=uid
            )
        except Conflict as conflict:
            logger.info("pod %s/%s not deleted: %s", namespace, name, conflict.api_message)
            return False
        if deleted and release:  # a finished run's recorded try: nothing to hold the pod for
            await self._release_named(run, name, uid)
        return deleted

    async def _release_named(self, run: Mapping[str, Any], name: str, uid: str) -> None:
        """Remove the finalizer of the run's pod `name` at `uid` (as kept by the watch, else listed)."""
        meta = run["metadata"]
        found = await self._pods_of(meta["namespace"], meta["uid"])
        pod = next((p for p in found if p["metadata"]["name"] == name), None)
        if pod is None:
            listed = await self.kube.list_pods(meta["namespace"], f"{LABEL_DAGRUN_UID}={meta['uid']}")
            pod = next((p for p in listed if p["metadata"]["name"] == name), None)
        if pod is not None and pod["metadata"].get("uid") == uid:
            await self.release(pod)
