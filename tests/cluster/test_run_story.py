"""What a user reads about a run: `kubectl describe dagrun` lists its Events in the order they happened.

Real apiserver, real kubectl, kwok pods. Events are posted through the events.k8s.io/v1 API with a
microsecond `eventTime`, which `kubectl describe` sorts by; core/v1 timestamps have whole seconds,
so Events of the same second used to come out shuffled (RunStarted after TaskQueued).
"""

from __future__ import annotations

import re
from pathlib import Path

from controller.devtools.devcluster import Cluster
from tests.cluster.test_controller import container_task, dag
from tests.cluster.zonda_processes import apply, controller, trigger, wait_for, wait_run_finished

_EVENT_LINE = re.compile(r"^\s+(Normal|Warning)\s+(\w+)\s+\S+\s+\S+\s+(.*)$")


def described_events(cluster: Cluster, namespace: str, run: str) -> list[tuple[str, str]]:
    """(reason, message) of each Event row of `kubectl describe dagrun`, top to bottom."""
    text = cluster.kubectl("describe", "dagrun", run, "-n", namespace).stdout
    section = text.split("\nEvents:", 1)[1] if "\nEvents:" in text else ""
    return [(m.group(2), m.group(3)) for line in section.splitlines() if (m := _EVENT_LINE.match(line))]


def test_describe_tells_a_runs_story_in_order(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    tasks = [
        container_task("first", duration_ms=50),
        container_task("second", depends_on=["first"], duration_ms=50),
        container_task("broken", depends_on=["second"], exit_code=2, duration_ms=50),
        container_task("never", depends_on=["broken"]),
    ]
    apply(cluster, namespace, dag("story", tasks))
    with controller(cluster, namespace, tmp_path):
        run = trigger(cluster, namespace, "story")
        assert wait_run_finished(cluster, namespace, run)["status"]["state"] == "failed"
        events = wait_for(
            lambda: (e := described_events(cluster, namespace, run)) and e[-1][0] == "RunFailed" and e,
            "the run's last Event",
            timeout=30,
        )
    reasons = [reason for reason, _ in events]
    assert reasons[0] == "RunStarted", events
    assert reasons[-1] == "RunFailed", events
    story = " | ".join(message for _, message in events)
    # whether an attempt was seen running before it finished depends on timing: match around it
    chapters = [
        "started",
        "Task first (",
        "Task second (scheduled -> queued)",
        "Task second (",
        "Task broken (scheduled -> queued)",
        "Task broken (",
        "Task never (none -> upstream_failed)",
        "failed: leaf task(s) never did not succeed",
    ]
    position = -1
    for chapter in chapters:
        position = story.find(chapter, position + 1)
        assert position != -1, f"{chapter!r} is missing or out of order in: {story}"
    assert "TaskRunning" not in reasons  # progress alone is read from the status, not posted
