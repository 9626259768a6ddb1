"""The fault suite's records and its mixed workload (tests/cluster/test_faults.py).

Records, from etcd itself (its v3 JSON gateway's watch, from a revision read before the controller
starts), never from Zonda's counters: every key created under a prefix (pods, DagRuns, AssetEvents,
Triggers) and every write that fired a Trigger.

The mixed workload, on kwok (a pod's annotations say how its try ends: controller/devtools/data/
kwok-stages.yaml): a producer DAG `mixed` with a chain, a task that fails its first try by design and
succeeds its second, a branch (one path followed, the other skipped), a task that returns a list and a
task mapped over it (three instances), a fan-out in a Pool of two slots, a sensor in reschedule mode
(its first poke reschedules 2 s ahead, its second succeeds), a deferrable sensor (its first pod
defers on a DateTimeTrigger due 4 s later; the triggerer fires it, a resuming pod succeeds), and a
join that publishes an asset; a DAG success callback (a callback try: a pod of its own). Its
scheduled runs over a fixed window of the past (startDate to endDate, catchup) and a Backfill of the
dates before it; a consumer DAG `orders` scheduled on the asset. The window is fixed once per test
session, so the run names, and with them every pod, Trigger and AssetEvent name, are the same in the
reference run (no faults) and in every faulted one: the audit compares them name for name.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Self

from controller.devtools.devcluster import Cluster, ClusterError
from tests.cluster.zonda_processes import get
from zonda.resources import xcom_refs
from zonda.resources.asset_models import DEFAULT_EVENTS_HISTORY_LIMIT
from zonda.resources.invocations import DeferralRequest, TaskOutcome, TaskResult
from zonda.resources.names import attempt_name, is_callback_name, trigger_name

PRODUCER = "mixed"
CONSUMER = "orders"
CONSUMER_TASK = "use"
POOL = "faults"
POOL_SLOTS = 2
ASSET = "faults://orders"
BACKFILL = "mixed-earlier"
#: The task that fails its first try by design, and the branch's two paths.
RETRIED, FOLLOWED, NOT_FOLLOWED = "b", "left", "right"
MAPPED, MAPPED_LENGTH = "each", 3
RESCHEDULED, DEFERRED_TASK = "poke", "wait"
ENDED = ("success", "failed", "skipped", "upstream_failed")
#: Tries a task of the workload may take (`retries` + 1): a pod fault never hits the last one, so a
#: task instance the schedule hits often still ends as the reference's.
TRIES = 4


class EtcdKeys:
    """Every key created under `/registry/<resource>/<namespace>/`, counted from etcd itself: name ->
    how many times its key was created (a PUT whose create and mod revisions are equal). Under the
    apiserver, so an apiserver restart loses nothing (its watch cache restarts at the current revision
    and would answer an older watch 410 Gone); an etcd restart resumes at the next revision. History
    compacted away before the watch resumed is recorded in `gap`, and the audit fails."""

    def __init__(self, cluster: Cluster, namespace: str, resource: str = "pods") -> None:
        args = cluster.processes["etcd"].args
        assert isinstance(args, list)
        self.url = next(arg.split("=", 1)[1] for arg in args if arg.startswith("--advertise-client-urls="))
        self.prefix = f"/registry/{resource}/{namespace}/"
        self.created: Counter[str] = Counter()
        #: Every PUT seen (created or changed): what the schedule's cheap progress signal counts.
        self.puts = 0
        self.gap: str | None = None
        self.resumed = 0
        self._revision = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._record, daemon=True)

    def _post(self, path: str, body: dict[str, Any], timeout: float) -> Any:
        request = urllib.request.Request(f"{self.url}{path}", data=json.dumps(body).encode())
        return urllib.request.urlopen(request, timeout=timeout)

    def _seen(self, name: str, kv: dict[str, Any], created: bool) -> None:
        if created:
            self.created[name] += 1

    def _record(self) -> None:
        key = base64.b64encode(self.prefix.encode()).decode()
        end = base64.b64encode(self.prefix[:-1].encode() + b"0").decode()  # the prefix's range end
        while not self._stop.is_set():
            body = {"create_request": {"key": key, "range_end": end, "start_revision": self._revision + 1}}
            try:
                with self._post("/v3/watch", body, timeout=3600) as stream:
                    for line in stream:
                        result = json.loads(line).get("result") or {}
                        if result.get("compact_revision"):
                            self.gap = f"etcd compacted past {self._revision} ({result['compact_revision']})"
                            return
                        for event in result.get("events") or []:
                            kv = event["kv"]
                            if event.get("type", "PUT") == "PUT":
                                name = base64.b64decode(kv["key"]).decode()[len(self.prefix) :]
                                self._seen(name, kv, kv["create_revision"] == kv["mod_revision"])
                                self.puts += 1
                            self._revision = int(kv["mod_revision"])
            except (OSError, ValueError):
                self.resumed += 1
                time.sleep(0.2)  # etcd restarting: a retry's backoff, not a signal

    def __enter__(self) -> Self:
        with self._post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()}, timeout=10) as reply:
            self._revision = int(json.loads(reply.read())["header"]["revision"])
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


class TriggerFirings(EtcdKeys):
    """Every write of the namespace's Triggers that set `status.state: fired`, from etcd's watch (a
    CRD's objects are stored as JSON): trigger name -> how many writes made it fired, with the holders
    that wrote them. Exactly once is one such write per Trigger."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        super().__init__(cluster, namespace, "zonda.dev/triggers")
        self.fired: Counter[str] = Counter()
        self.holders: dict[str, list[str]] = {}
        self._state: dict[str, str | None] = {}

    def _seen(self, name: str, kv: dict[str, Any], created: bool) -> None:
        if created:
            self.created[name] += 1
        status = json.loads(base64.b64decode(kv["value"])).get("status") or {}
        if status.get("state") == "fired" and self._state.get(name) != "fired":
            self.fired[name] += 1
            self.holders.setdefault(name, []).append(str(status.get("holder")))
        self._state[name] = status.get("state")


@dataclass
class Records:
    """The etcd records of one workload's life."""

    pods: EtcdKeys
    runs: EtcdKeys
    asset_events: EtcdKeys
    triggers: TriggerFirings

    @classmethod
    def watch(cls, cluster: Cluster, namespace: str) -> Records:
        return cls(
            EtcdKeys(cluster, namespace),
            EtcdKeys(cluster, namespace, "zonda.dev/dagruns"),
            EtcdKeys(cluster, namespace, "zonda.dev/assetevents"),
            TriggerFirings(cluster, namespace),
        )

    def all(self) -> list[EtcdKeys]:
        return [self.pods, self.runs, self.asset_events, self.triggers]


# ------------------------------------------------------------------------------------ the workload


@dataclass(frozen=True)
class Window:
    """The producer's runs: `backfill` dates from `first` by the Backfill, then `scheduled` ones by the
    DAG's own schedule (startDate to endDate, catchup), every `interval`: all in the past."""

    first: datetime
    interval: timedelta
    backfill: int
    scheduled: int

    @classmethod
    def before(cls, now: datetime, interval_minutes: int, scheduled: int) -> Window:
        interval = timedelta(minutes=interval_minutes)
        backfill = max(1, scheduled // 2)
        last_due = now - interval  # its run-after (the interval's end) has passed
        last_due = last_due.replace(second=0, microsecond=0)
        last_due -= timedelta(minutes=last_due.minute % interval_minutes)
        return cls(last_due - (backfill + scheduled - 1) * interval, interval, backfill, scheduled)

    @property
    def runs(self) -> int:
        return self.backfill + self.scheduled

    def date(self, index: int) -> str:
        return (self.first + index * self.interval).strftime("%Y-%m-%dT%H:%M:%SZ")


def kwok_task(
    task_id: str,
    depends_on: list[str],
    duration_ms: int,
    *,
    result: TaskResult | str | None = None,
    annotations: dict[str, str] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A task whose pod kwok runs `duration_ms` and ends with `result` (its termination message)."""
    notes = {"kwok.zonda.dev/duration-ms": str(duration_ms), **(annotations or {})}
    if result is not None:
        notes["kwok.zonda.dev/termination-message"] = (
            result if isinstance(result, str) else result.encode().decode()
        )
    return {
        "id": task_id,
        "operator": "BashOperator",
        "args": {"bash_command": "true"},  # never run: kwok plays the pod
        "podOverride": {"metadata": {"annotations": notes}},
        "dependsOn": depends_on,
        "retries": TRIES - 1,
        "retryDelay": "1s",
        **fields,
    }


#: The deferring try's result: wait on a DateTimeTrigger whose moment kwok sets to the pod's end
#: plus `kwok.zonda.dev/moment-delay`.
DEFERRED = TaskResult(
    outcome=TaskOutcome.DEFERRED,
    deferral=DeferralRequest(
        trigger_classpath="zonda.triggers.temporal.DateTimeTrigger",
        trigger_kwargs={"moment": "KWOK_MOMENT", "end_from_trigger": False},
    ),
)
#: A poke that reschedules (a datetime field: written by hand for kwok's KWOK_MOMENT).
RESCHEDULE = json.dumps({"outcome": TaskOutcome.RESCHEDULE.value, "rescheduleAt": "KWOK_MOMENT"})


def deferrable_task(task_id: str, depends_on: list[str], duration_ms: int) -> dict[str, Any]:
    """A deferrable sensor on kwok: its first pod ends deferred (a trigger due 4 s later), the pod that
    resumes it (its invocation has a nextMethod) succeeds."""
    task = kwok_task(task_id, depends_on, duration_ms, result=DEFERRED,
                     annotations={"kwok.zonda.dev/moment-delay": "4s"})  # fmt: skip
    task.update(operator="DateTimeSensorAsync", args={"target_time": "2000-01-01T00:00:00+00:00"})
    return task


def mixed_workload(window: Window, duration_ms: int) -> list[dict[str, Any]]:
    """The Pool, the consumer DAG, the producer DAG and its Backfill, in the order to apply them."""
    # an asset keeps its newest 100 events (`eventsHistoryLimit`): past that the oldest are deleted and
    # the audit, which lists them, would wait forever for the events of the first runs
    assert window.runs <= DEFAULT_EVENTS_HISTORY_LIMIT, (
        f"{window.runs} producer runs: at most {DEFAULT_EVENTS_HISTORY_LIMIT} (ZONDA_FAULT_MIXED_RUNS <= 66)"
    )
    fan = [f"fan{index}" for index in range(3)]
    tasks = [
        kwok_task("a", [], duration_ms),
        # fails its first try by design (exit 1), succeeds the second
        kwok_task(RETRIED, ["a"], duration_ms, annotations={"kwok.zonda.dev/first-try-exit-code": "1"}),
        kwok_task("choose", [RETRIED], duration_ms,
                  result=TaskResult(outcome=TaskOutcome.SUCCESS, follow_task_ids=[FOLLOWED])),
        kwok_task(FOLLOWED, ["choose"], duration_ms),
        kwok_task(NOT_FOLLOWED, ["choose"], duration_ms),
        kwok_task("make", ["a"], duration_ms, result=TaskResult(
            outcome=TaskOutcome.SUCCESS, xcom=["x", "y", "z"], xcom_lengths={"return_value": MAPPED_LENGTH})),
        {**kwok_task(MAPPED, ["make"], duration_ms),
         "args": {}, "expand": {"kwargs": {"bash_command": xcom_refs.reference("make")}}},
        *(kwok_task(name, ["a"], duration_ms, pool=POOL) for name in fan),
        {**kwok_task(RESCHEDULED, ["a"], duration_ms, result=RESCHEDULE,
                     annotations={"kwok.zonda.dev/moment-delay": "2s"}),
         "operator": "TimeDeltaSensor", "args": {"delta": "1s", "mode": "reschedule", "poke_interval": 1}},
        deferrable_task(DEFERRED_TASK, ["a"], duration_ms),
        kwok_task("publish", [FOLLOWED, NOT_FOLLOWED, MAPPED, *fan, RESCHEDULED, DEFERRED_TASK], duration_ms,
                  triggerRule="none_failed_min_one_success", outlets=[{"uri": ASSET}]),
    ]  # fmt: skip
    producer = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": PRODUCER},
        "spec": {
            "schedule": f"{int(window.interval.total_seconds() // 60)}m",
            "startDate": window.date(window.backfill),
            "endDate": window.date(window.runs - 1),
            "catchup": True,
            "maxActiveRuns": 3,
            "onSuccessCallback": ["tests.cluster.callback_targets:on_dag_success"],
            "tasks": tasks,
        },
    }
    consumer = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": CONSUMER},
        "spec": {"assetSchedule": {"uri": ASSET}, "tasks": [kwok_task(CONSUMER_TASK, [], duration_ms)]},
    }
    pool = {"apiVersion": "zonda.dev/v1alpha1", "kind": "Pool", "metadata": {"name": POOL},
            "spec": {"slots": POOL_SLOTS}}  # fmt: skip
    backfill = {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "Backfill",
        "metadata": {"name": BACKFILL},
        "spec": {"dagName": PRODUCER, "fromDate": window.date(0), "toDate": window.date(window.backfill - 1),
                 "maxActiveRuns": 2},
    }  # fmt: skip
    return [pool, consumer, producer, backfill]


def quietly(read: Any, default: Any) -> Any:
    """A read of the apiserver that may fail while the fault is on (it is restarting)."""
    try:
        return read()
    except (ClusterError, KeyError):
        return default


@dataclass
class Snapshot:
    """The workload's objects once everything has ended."""

    runs: list[dict[str, Any]]
    asset_events: list[dict[str, Any]]

    def of(self, dag: str) -> list[dict[str, Any]]:
        return [run for run in self.runs if run["spec"]["dagName"] == dag]


def mixed_finished(cluster: Cluster, namespace: str, window: Window) -> Snapshot | None:
    """Every producer run ended, every AssetEvent consumed by a consumer run, every consumer run ended."""

    def read() -> Snapshot | None:
        runs = get(cluster, namespace, "dagruns")["items"]
        if any((run.get("status") or {}).get("state") not in ("success", "failed") for run in runs):
            return None
        snapshot = Snapshot(runs, get(cluster, namespace, "assetevents")["items"])
        producer = snapshot.of(PRODUCER)
        published = sum(1 for run in producer if run["status"]["state"] == "success")
        consumed = {e["name"] for run in snapshot.of(CONSUMER)
                    for e in run["spec"].get("triggeringAssetEvents") or []}  # fmt: skip
        events = {event["metadata"]["name"] for event in snapshot.asset_events}
        if len(producer) < window.runs or len(events) < published or not events <= consumed:
            return None
        return snapshot

    found: Snapshot | None = quietly(read, None)
    return found


def all_progress(cluster: Cluster, namespace: str) -> int:
    """Runs created plus task instances ended, over every DAG: what a working controller increases."""

    def count() -> int:
        runs = get(cluster, namespace, "dagruns")["items"]
        done = sum(
            1
            for run in runs
            for ti in ((run.get("status") or {}).get("taskInstances") or {}).values()
            if ti["state"] in ENDED
        )
        return len(runs) + done

    value: int = quietly(count, -1)
    return value


# ------------------------------------------------------------------------------------ the outcome


@dataclass(frozen=True)
class FailedTry:
    """A try the fault itself failed: its pod deleted or evicted while Running."""

    run: str
    key: str  # the task instance's key: task id, `task[i]` for a mapped instance
    try_number: int
    pod: str
    fault: str = ""  # the fault type that failed it (a mixed schedule names each strike's)


@dataclass
class Outcome:
    """What a workload ended with, from the apiserver's objects and etcd's records."""

    #: (run name, task instance key) -> the task instance's status, for the producer's runs.
    tis: dict[tuple[str, str], dict[str, Any]]
    #: Each consumer run's task states (its name depends on when it was created).
    consumer_states: list[dict[str, str]]
    #: Consumer run name -> its one task instance's try.
    consumer_tries: dict[str, int]
    #: Consumer run name -> the AssetEvents it consumed.
    consumed: dict[str, list[str]]
    #: AssetEvent name -> (source run, source task).
    asset_events: dict[str, tuple[str, str]]
    pods: Counter[str]
    runs_created: Counter[str]
    events_created: Counter[str]
    triggers_created: Counter[str]
    triggers_fired: Counter[str]
    run_states: dict[str, str]
    gaps: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, snapshot: Snapshot, records: Records) -> Outcome:
        producer = snapshot.of(PRODUCER)
        consumer = snapshot.of(CONSUMER)
        return cls(
            tis={
                (run["metadata"]["name"], key): ti
                for run in producer
                for key, ti in run["status"]["taskInstances"].items()
            },
            consumer_states=[
                {key: ti["state"] for key, ti in run["status"]["taskInstances"].items()} for run in consumer
            ],
            consumer_tries={
                run["metadata"]["name"]: run["status"]["taskInstances"][CONSUMER_TASK].get("tryNumber", 0)
                for run in consumer
            },
            consumed={
                run["metadata"]["name"]: [e["name"] for e in run["spec"].get("triggeringAssetEvents") or []]
                for run in consumer
            },
            asset_events={
                event["metadata"]["name"]: (event["spec"].get("sourceRun"), event["spec"].get("sourceTask"))
                for event in snapshot.asset_events
            },
            pods=Counter(records.pods.created),
            runs_created=Counter(records.runs.created),
            events_created=Counter(records.asset_events.created),
            triggers_created=Counter(records.triggers.created),
            triggers_fired=Counter(records.triggers.fired),
            run_states={run["metadata"]["name"]: run["status"]["state"] for run in snapshot.runs},
            gaps=[keys.gap for keys in records.all() if keys.gap],
        )

    @property
    def producer_runs(self) -> set[str]:
        return {run for run, _ in self.tis}


def chain(run: str, key: str, try_number: int, depth: int = 3) -> list[str]:
    """A try's attempts: its first, then each resuming one (a deferral resumed, a poke rescheduled),
    named after the attempt it follows (`zonda.passes.run_pass`'s `_launch`)."""
    names = [attempt_name(run, key, try_number)]
    for _ in range(depth):
        names.append(attempt_name(run, f"{key}~{names[-1]}", try_number))
    return names


def check_reference(reference: Outcome, window: Window) -> None:
    """The positive controls: the fault-free run did what each part of the workload is for, so the
    comparison below compares something."""
    assert not reference.gaps, reference.gaps
    runs = reference.producer_runs
    assert len(runs) == window.runs, f"{window.runs} producer runs expected: {sorted(runs)}"
    assert sum(1 for run in runs if "backfill" in run) == window.backfill, sorted(runs)
    for run in runs:
        ti = {key: t for (name, key), t in reference.tis.items() if name == run}
        assert all(t["state"] in ("success", "skipped") for t in ti.values()), ti
        assert ti[RETRIED]["tryNumber"] == 2, "the task that fails once by design ran twice"
        assert ti[NOT_FOLLOWED]["state"] == "skipped" and ti[FOLLOWED]["state"] == "success"
        assert sorted(k for k in ti if k.startswith(f"{MAPPED}[")) == [
            f"{MAPPED}[{i}]" for i in range(MAPPED_LENGTH)
        ]
        assert ti[DEFERRED_TASK]["deferralCount"] == 1
        poke = chain(run, RESCHEDULED, 1)
        assert ti[RESCHEDULED]["podName"] != poke[0] and poke[1] in reference.pods, "the sensor rescheduled"
        callbacks = [pod for pod in reference.pods if is_callback_name(pod) and pod.startswith(run[:20])]
        assert callbacks, f"{run}: no DAG success callback try"
    assert len(reference.asset_events) == window.runs, reference.asset_events
    assert reference.consumed and all(
        states == {CONSUMER_TASK: "success"} for states in reference.consumer_states
    )
    # and the comparison sees what it is for: nothing against itself; a pod created twice, a task
    # instance ended otherwise, an asset event consumed twice, each against the reference
    assert compare(reference, reference, []).differences == []
    some_pod, (some_ti, ti) = next(iter(reference.pods)), next(iter(reference.tis.items()))
    assert (
        compare(replace(reference, pods=reference.pods + Counter([some_pod])), reference, []).duplicates == 1
    )
    failed = {**reference.tis, some_ti: {**ti, "state": "failed"}}
    assert compare(replace(reference, tis=failed), reference, []).lost == 1
    run, events = next(iter(reference.consumed.items()))
    twice = {**reference.consumed, f"{run}-again": events}
    assert compare(replace(reference, consumed=twice), reference, []).duplicates == len(events)
    retried = {**reference.consumer_tries, run: 2}  # a consumer's second try no fault explains
    assert compare(replace(reference, consumer_tries=retried), reference, []).differences


@dataclass
class Comparison:
    """How a faulted outcome differs from the reference, beyond what the fault itself changed."""

    differences: list[str] = field(default_factory=list)
    duplicates: int = 0
    lost: int = 0
    stuck: int = 0

    def add(self, what: str) -> None:
        self.differences.append(what)


def compare(outcome: Outcome, reference: Outcome, failed: list[FailedTry]) -> Comparison:
    """Every producer task instance ends as in the reference (state, branch, mapped instances, deferrals),
    at the reference's try plus one per try the fault failed that would have been the last; every pod,
    Trigger, AssetEvent and DagRun created at most once; the pods created are the reference's, but for
    the task instances the fault hit (whose tries 1..n each have a pod, and nothing else); every
    callback try the reference made, once; each AssetEvent (one per producer run) consumed by exactly
    one consumer run, each of which ends as the reference's did; every fired Trigger fired by one write."""
    result = Comparison()
    if outcome.gaps:
        result.add(f"etcd history lost: {outcome.gaps}")
    created = [outcome.pods, outcome.runs_created, outcome.events_created, outcome.triggers_created]
    twice = {name: count for counter in created for name, count in counter.items() if count > 1}
    twice |= {f"fired {name}": count for name, count in outcome.triggers_fired.items() if count > 1}
    result.duplicates = len(twice)
    if twice:
        result.add(f"created (or fired) more than once: {twice}")
    if outcome.producer_runs != reference.producer_runs:
        result.add(f"producer runs {sorted(outcome.producer_runs)} != {sorted(reference.producer_runs)}")
    hits: dict[tuple[str, str], list[FailedTry]] = {}
    for hit in failed:
        hits.setdefault((hit.run, hit.key), []).append(hit)
    for ti_id, expected in reference.tis.items():
        got = outcome.tis.get(ti_id)
        if got is None:
            result.lost += 1
            result.add(f"{ti_id}: no task instance")
            continue
        if got["state"] not in ENDED:
            result.stuck += 1
        if got["state"] != expected["state"]:
            result.lost += 1
            result.add(f"{ti_id}: {got['state']} ({got.get('message')}), reference {expected['state']}")
        tries = expected.get("tryNumber", 0) + sum(
            1 for hit in hits.get(ti_id, []) if hit.try_number >= expected.get("tryNumber", 0)
        )
        if got.get("tryNumber", 0) != tries:
            result.add(f"{ti_id}: try {got.get('tryNumber')}, expected {tries} (hits {hits.get(ti_id)})")
        for name in ("followTaskIds", "deferralCount", "xcomLengths"):
            if ti_id not in hits and got.get(name) != expected.get(name):
                result.add(f"{ti_id}: {name} {got.get(name)!r}, reference {expected.get(name)!r}")
    extra = set(outcome.tis) - set(reference.tis)
    if extra:
        result.add(f"task instances the reference has not: {sorted(extra)}")
    # pods: the reference's, but for the task instances hit (each of their tries has a pod); a consumer
    # run's name (so its pods') depends on when it was created: each try of its one task, one pod
    hit_pods = {
        name
        for (run, key), ti in outcome.tis.items()
        if (run, key) in hits
        for n in range(1, ti.get("tryNumber", 0) + 1)
        for name in chain(run, key, n)
    }
    reference_pods = {pod for pod in reference.pods if not pod.startswith(CONSUMER)}
    ours = {pod for pod in outcome.pods if not pod.startswith(CONSUMER)}
    strays = sorted(ours - reference_pods - hit_pods)
    missing = sorted(reference_pods - ours - hit_pods)
    if strays:
        result.add(f"pods the reference did not make (and no hit explains): {strays}")
    if missing:
        result.add(f"pods the reference made and this run did not: {missing}")
    # a consumer run's task: one try, and one more per try the fault failed (its pods hit too)
    consumer_pods = {pod for pod in outcome.pods if pod.startswith(CONSUMER)}
    consumer_tries = {run: 1 + len(hits.get((run, CONSUMER_TASK), [])) for run in outcome.consumed}
    if consumer_pods != {attempt_name(run, CONSUMER_TASK, n) for run, tries in consumer_tries.items()
                         for n in range(1, tries + 1)}:  # fmt: skip
        result.add(f"consumer pods {sorted(consumer_pods)} for runs {consumer_tries}")
    if wrong := {
        run: tried for run, tried in outcome.consumer_tries.items() if tried != consumer_tries.get(run)
    }:
        result.add(f"consumer runs' tries {wrong}, expected {consumer_tries}")
    for (run, key), ti in outcome.tis.items():
        if (run, key) in hits:
            absent = [attempt_name(run, key, n) for n in range(1, ti["tryNumber"] + 1)
                      if attempt_name(run, key, n) not in outcome.pods]  # fmt: skip
            if absent:
                result.add(f"{run} {key}: tries recorded without a pod: {absent}")
    # asset events: one per producer run's publish, each consumed once
    sources = sorted(outcome.asset_events.values())
    if sources != sorted(reference.asset_events.values()):
        result.add(f"asset events from {sources}, reference {sorted(reference.asset_events.values())}")
    consumed = Counter(name for names in outcome.consumed.values() for name in names)
    if set(consumed) != set(outcome.asset_events) or any(count > 1 for count in consumed.values()):
        result.add(f"asset events consumed {dict(consumed)} of {sorted(outcome.asset_events)}")
        result.duplicates += sum(count - 1 for count in consumed.values())
    if any(states != reference.consumer_states[0] for states in outcome.consumer_states):
        result.add(f"consumer runs ended {outcome.consumer_states}, reference {reference.consumer_states[0]}")
    # triggers: every one created fired (once: above), each deferred task instance's last among them
    # (named after its try and its deferrals so far: a try the fault failed after it deferred counts)
    unfired = sorted(set(outcome.triggers_created) - set(outcome.triggers_fired))
    if unfired:
        result.add(f"triggers never fired: {unfired}")
    deferred = {trigger_name(run, key, ti["tryNumber"], ti["deferralCount"])  # the run's deferrals so far
                for (run, key), ti in outcome.tis.items() if ti.get("deferralCount")}  # fmt: skip
    if absent_triggers := sorted(deferred - set(outcome.triggers_created)):
        result.add(f"deferred task instances without their Trigger: {absent_triggers}")
    return result
