"""What Prometheus and the kubelet see: the components' /metrics after a real run, and their probes.

One deferred run (example-deferrable: an EmptyOperator, a TimeDeltaSensorAsync that defers to the
triggerer, a Bash task) goes through a real `zonda controller` and a real `zonda triggerer`; then
their /metrics pages are read the way Prometheus reads them (the text exposition format, parsed by
prometheus_client's parser) and each test checks one family of numbers. The probe paths are taken
from the rendered Helm chart, so a chart that probes a path the process does not serve fails here
rather than on a real kubelet.

What is real: the apiserver, both processes and their HTTP servers, helm (to render the chart).
"""

from __future__ import annotations

import contextlib
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from controller.devtools.devcluster import Cluster, free_port
from tests.cluster.test_helm_rbac import CHART, run_helm
from tests.cluster.zonda_processes import (
    ZondaProcess,
    apply,
    controller,
    deferrable_example,
    release_task_pods,
    trigger,
    triggerer,
    wait_for,
    wait_run_finished,
)

#: The controller's and the triggerer's default shard count: one triggerer holds them all.
SHARDS = 16
#: Sample name and labels -> value, as Prometheus would store one scrape.
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def http_get(port: int, path: str) -> tuple[int, str]:
    """(status, body) of GET http://127.0.0.1:port/path; (0, error) while nothing listens yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except OSError as error:
        return 0, str(error)


def scrape(port: int) -> Samples:
    status, text = http_get(port, "/metrics")
    assert status == 200, text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; 0 when absent (a labelled series has no line until first used)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def exported(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value, which must be on the page: a zero read through `value` is also what a series
    never exported reads, so a check that something is 0 is made with this (the positive control)."""
    key = (name, frozenset(labels.items()))
    assert key in samples, f"{name}{labels} is not exported"
    return samples[key]


def total(samples: Samples, name: str) -> float:
    """The sum over every label set of `name`."""
    return sum(v for (sample_name, _), v in samples.items() if sample_name == name)


@dataclass(frozen=True)
class Component:
    process: ZondaProcess
    metrics_port: int
    health_port: int


@contextlib.contextmanager
def serving(start: Callable[..., Any], *args: Any, **kwargs: Any) -> Iterator[Component]:
    """A controller or triggerer (`start` is zonda_processes.controller/triggerer) on free ports."""
    metrics_port, health_port = free_port(), free_port()
    extra = ["--metrics-port", str(metrics_port), "--health-port", str(health_port)]
    with start(*args, extra=extra, **kwargs) as process:
        yield Component(process, metrics_port, health_port)


# ----------------------------------------------------------------------- after a deferred run


@dataclass(frozen=True)
class Scrapes:
    """What the two components reported once the run succeeded."""

    namespace: str
    controller: Samples
    triggerer: Samples
    healthz: dict[str, tuple[int, str]]


@pytest.fixture(scope="module")
def after_a_deferred_run(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scrapes]:
    namespace = f"t-metrics-{uuid.uuid4().hex[:8]}"
    tmp_path = tmp_path_factory.mktemp("metrics")
    cluster.kubectl("create", "namespace", namespace)
    try:
        apply(cluster, namespace, deferrable_example())
        with (
            serving(controller, cluster, namespace, tmp_path, executor="local") as the_controller,
            serving(triggerer, cluster, namespace, tmp_path) as the_triggerer,
        ):
            run = trigger(cluster, namespace, "example-deferrable")
            body = wait_run_finished(cluster, namespace, run, timeout=60)
            assert body["status"]["state"] == "success", body["status"]
            controller_samples = wait_for(
                lambda: (
                    (samples := scrape(the_controller.metrics_port))
                    and value(samples, "zonda_dag_runs", namespace=namespace, state="success") == 1
                    and samples
                ),
                "the controller to count the run as a success",
                timeout=30,
            )
            scrapes = Scrapes(
                namespace=namespace,
                controller=controller_samples,
                triggerer=scrape(the_triggerer.metrics_port),
                healthz={
                    "controller": http_get(the_controller.health_port, "/healthz"),
                    "triggerer": http_get(the_triggerer.health_port, "/healthz"),
                },
            )
        yield scrapes  # with both processes stopped: the tests only read what was scraped
    finally:
        release_task_pods(cluster, namespace)  # no controller left to release them
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.mark.parametrize(
    ("state", "runs"),
    [
        pytest.param("success", 1, id="the succeeded run is counted as success"),
        pytest.param("running", 0, id="it is no longer counted as running"),
    ],
)
def test_the_controller_counts_runs_by_state(after_a_deferred_run: Scrapes, state: str, runs: int) -> None:
    """The run was running, then succeeded: both series are on the page (one counted it, then let go)."""
    samples, namespace = after_a_deferred_run.controller, after_a_deferred_run.namespace
    assert exported(samples, "zonda_dag_runs", namespace=namespace, state=state) == runs


@pytest.mark.parametrize("state", ["failed", "queued"])
def test_a_state_no_run_took_has_no_series(after_a_deferred_run: Scrapes, state: str) -> None:
    """Nothing failed, and the run's first pass already started it (it is never recorded as queued):
    no series at all for either, rather than one that could read 0 by accident."""
    samples, namespace = after_a_deferred_run.controller, after_a_deferred_run.namespace
    assert exported(samples, "zonda_dag_runs", namespace=namespace, state="success") == 1  # the control
    assert ("zonda_dag_runs", frozenset({"namespace": namespace, "state": state})) not in samples


def test_the_controller_counts_task_instances_and_the_attempts_it_launched(
    after_a_deferred_run: Scrapes,
) -> None:
    samples, namespace = after_a_deferred_run.controller, after_a_deferred_run.namespace
    assert value(samples, "zonda_task_instances", namespace=namespace, state="success") == 3
    # wait was deferred (the series exists) and is no longer
    assert exported(samples, "zonda_task_instances", namespace=namespace, state="deferred") == 0
    # wait's first attempt and its resumption once the trigger fired, then done; start is an
    # EmptyOperator, which succeeds without being launched.
    assert value(samples, "zonda_task_attempts_created_total") == 3
    assert value(samples, "zonda_reconciles_total", kind="run") >= 1


def test_the_controller_measures_scheduling_delay_of_downstream_tasks(after_a_deferred_run: Scrapes) -> None:
    samples = after_a_deferred_run.controller
    delays = {"kind": "upstream_done_to_pod_created"}
    count = value(samples, "zonda_scheduling_delay_seconds_count", **delays)
    assert count >= 2, "start -> wait and wait -> done"
    assert value(samples, "zonda_scheduling_delay_seconds_bucket", le="+Inf", **delays) == count
    assert value(samples, "zonda_scheduling_delay_seconds_sum", **delays) > 0


def test_a_deferral_is_not_counted_as_scheduling_delay(after_a_deferred_run: Scrapes) -> None:
    samples = after_a_deferred_run.controller
    delays = {"kind": "upstream_done_to_pod_created"}
    assert value(samples, "zonda_scheduling_delay_seconds_count", **delays) == 2, (
        "one observation per downstream try: start -> wait, wait -> done"
    )
    # A delay counted across the deferral (most of its 10 s) would exceed 5 s; a real one stays under it
    # even when a loaded machine takes seconds to launch a try (a 2 s bound failed there).
    assert value(samples, "zonda_scheduling_delay_seconds_bucket", le="5.0", **delays) == 2


def test_the_triggerer_counts_the_event_it_fired(after_a_deferred_run: Scrapes) -> None:
    samples = after_a_deferred_run.triggerer
    assert value(samples, "zonda_triggerer_events_fired_total") == 1
    assert exported(samples, "zonda_triggerer_triggers_failed_total") == 0
    assert exported(samples, "zonda_triggerer_duplicate_events_total") == 0
    assert value(samples, "zonda_triggerer_shards_held") == SHARDS
    running = [key for key in samples if key[0] == "zonda_triggerer_running_triggers"]
    assert running, "the trigger was counted as running while it ran (the series exists)"
    assert total(samples, "zonda_triggerer_running_triggers") == 0, "the fired trigger no longer runs"


@pytest.mark.parametrize(
    "component",
    [
        pytest.param("controller", id="the controller is live after the run"),
        pytest.param("triggerer", id="the triggerer is live after the run"),
    ],
)
def test_both_components_answer_healthz(after_a_deferred_run: Scrapes, component: str) -> None:
    status, body = after_a_deferred_run.healthz[component]
    assert status == 200, body


# ------------------------------------------------------------------------------------ probes


@pytest.mark.parametrize(
    ("component", "probe"),
    [
        pytest.param("controller", "livenessProbe", id="the controller serves the chart's liveness probe"),
        pytest.param("controller", "readinessProbe", id="the controller serves the chart's readiness probe"),
        pytest.param("triggerer", "livenessProbe", id="the triggerer serves the chart's liveness probe"),
        pytest.param("triggerer", "readinessProbe", id="the triggerer serves the chart's readiness probe"),
    ],
)
def test_the_components_serve_the_paths_the_chart_probes(
    cluster: Cluster, namespace: str, tmp_path: Path, component: str, probe: str
) -> None:
    rendered = run_helm(cluster, "template", "zonda", str(CHART), "--namespace", namespace)
    assert rendered.returncode == 0, rendered.stderr
    deployment = next(
        doc
        for doc in yaml.safe_load_all(rendered.stdout)
        if doc and doc["kind"] == "Deployment" and doc["metadata"]["name"] == f"zonda-{component}"
    )
    http = deployment["spec"]["template"]["spec"]["containers"][0][probe]["httpGet"]
    assert http["port"] == "health", "the chart probes the health port (here: a free port)"
    start = controller if component == "controller" else triggerer
    options = {"executor": "local"} if component == "controller" else {}
    with serving(start, cluster, namespace, tmp_path, **options) as running:
        # the kubelet retries probes: a starting component may answer 503 first, but must reach 200
        status, text = wait_for(
            lambda: (answer := http_get(running.health_port, http["path"]))[0] == 200 and answer,
            f"the {component}'s {http['path']} to answer 200",
            timeout=20,
        )
    assert status == 200, f"GET {http['path']} -> {status}: {text}"
