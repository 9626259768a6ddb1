"""XComs beyond the return value: pushed keys, Airflow's JSON, values too large for status in a backend."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cli.xcom import find_xcom
from controller.xcom.backends import XComStore
from tests.paths import REPO_ROOT
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.invocations import RESULT_LIMIT_BYTES, TaskInvocation, TaskResult
from zonda.resources.models import TaskInstanceState
from zonda.resources.run_types import RunType
from zonda.tries import xcoms

REPO = REPO_ROOT

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=30,
)


def invocation(**fields: Any) -> TaskInvocation:
    defaults: dict[str, Any] = {
        "dag_name": "etl",
        "run_name": "etl-manual-1",
        "namespace": "team-a",
        "run_type": RunType.MANUAL,
        "task_id": "extract",
        "try_number": 2,
        "operator": "PythonOperator",
        "logical_date": datetime(2024, 1, 2, tzinfo=UTC),
        "data_interval_start": datetime(2024, 1, 2, tzinfo=UTC),
        "data_interval_end": datetime(2024, 1, 3, tzinfo=UTC),
    }
    return TaskInvocation(**{**defaults, **fields})


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        pytest.param(datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), '"2024-01-02T03:04:05+00:00"', id="datetime"),
        pytest.param(date(2024, 1, 2), '"2024-01-02"', id="date"),
        pytest.param((1, "a"), '[1,"a"]', id="a tuple is a list"),
        pytest.param({"é": [None, True, 1.5]}, '{"é":[null,true,1.5]}', id="JSON as is, UTF-8"),
    ],
)
def test_values_are_stored_as_airflows_json(value: Any, stored: str) -> None:
    assert xcoms.serialize("k", value) == stored.encode()


ROWS_WITH = {"rows": [{"when": "2024-01-02"}] * 3}


def rows_with(bad: Any) -> dict[str, Any]:
    """A value whose one bad part sits at ["rows"][3]["when"]."""
    return {"rows": [*ROWS_WITH["rows"], {"when": bad}]}


class Reading:
    pass


@pytest.mark.parametrize(
    ("value", "where", "what", "instead"),
    [
        pytest.param({1, 2}, "", "set {1, 2}", "return a list instead: sorted(value)", id="a set"),
        pytest.param(
            rows_with(b"\x00\x01"),
            ' at ["rows"][3]["when"]',
            r"bytes b'\x00\x01'",
            "it is 2 bytes: return text",
            id="bytes deep inside",
        ),
        pytest.param(
            rows_with(datetime(2024, 1, 2)),
            ' at ["rows"][3]["when"]',
            "naive datetime '2024-01-02T00:00:00'",
            "return an aware datetime instead",
            id="a naive datetime",
        ),
        pytest.param(
            {1: "a"}, "", "mapping key 1 is not a string", "use string keys instead", id="a non-string key"
        ),
        pytest.param(
            {"rows": [{"n": 1, 2: "b"}]},
            ' at ["rows"][0]',
            "mapping key 2",
            "string keys",
            id="a key inside a list",
        ),
        pytest.param(
            {"mean": float("nan")},
            ' at ["mean"]',
            "float nan: JSON has no NaN or infinity",
            "return None, or a string",
            id="NaN",
        ),
        pytest.param(
            [1.0, float("-inf")],
            " at [1]",
            "float -inf: JSON has no NaN or infinity",
            "return None",
            id="infinity",
        ),
        pytest.param(
            {"t": Decimal("1.10")}, ' at ["t"]', "Decimal Decimal('1.10')", "str(value)", id="Decimal"
        ),
        pytest.param({"t": timedelta(1)}, ' at ["t"]', "timedelta", "value.total_seconds()", id="timedelta"),
        pytest.param({"p": [Path("/x")]}, ' at ["p"][0]', "PosixPath", "return str(value)", id="a Path"),
        pytest.param(
            {'é"': Reading()}, ' at ["é\\""]', "Reading <", "as dicts, lists", id="an object, odd key"
        ),
    ],
)
def test_a_value_json_cannot_hold_fails_naming_key_path_type_and_what_to_return(
    value: Any, where: str, what: str, instead: str
) -> None:
    with pytest.raises(xcoms.XComError) as raised:
        xcoms.serialize("k", value)
    message = str(raised.value)
    assert message.startswith(f"XCom 'k'{where}: {what}"), message
    assert instead in message and "An XCom must be JSON" in message


def test_a_huge_value_is_named_by_a_repr_cut_to_80_characters() -> None:
    huge = rows_with(b"\xff" * 10_000_000)
    with pytest.raises(xcoms.XComError) as raised:
        xcoms.serialize("return_value", huge)
    message = str(raised.value)
    quoted = message.split("bytes ", 1)[1].split(" is not JSON", 1)[0]
    assert quoted.startswith("b'\\xff") and quoted.endswith("...") and len(quoted) == 80
    assert "it is 10000000 bytes" in message and len(message) < 600, len(message)
    long_set = {"s": set(range(100_000))}
    with pytest.raises(xcoms.XComError, match=r'^XCom \'k\' at \["s"\]: set \{0, 1, .{0,70} is not JSON'):
        xcoms.serialize("k", long_set)


def test_the_value_is_named_even_when_its_repr_raises() -> None:
    class Unprintable:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    with pytest.raises(xcoms.XComError, match=r"XCom 'k' at \[0\]: Unprintable .* is not JSON-serializable"):
        xcoms.serialize("k", [Unprintable()])


@given(JSON_VALUES)
def test_a_value_reads_back_equal_whether_inline_or_stored(value: Any) -> None:
    store = XComStore(base_url="memory://zonda-xcom-property", inline_limit=0)
    prepared = store.prepare(invocation(), "return_value", value)
    assert xcoms.is_stored(prepared)
    assert (
        XComStore().load(prepared)
        == value
        == XComStore().load(XComStore(inline_limit=10**9).prepare(invocation(), "return_value", value))
    )


def test_a_small_value_stays_inline_and_a_large_one_goes_to_the_backend(tmp_path: Path) -> None:
    store = XComStore(base_url=f"file://{tmp_path}/xcom")
    assert store.prepare(invocation(), "rows", list(range(10))) == list(range(10))
    large = "x" * 100_000
    reference = store.prepare(invocation(), "return_value", large)
    url = f"file://{tmp_path}/xcom/team-a/etl-manual-1/extract/2/return_value.json"
    assert reference == {xcoms.STORED_MARKER: {"url": url, "bytes": 100_002}}
    assert len(json.dumps(reference)) < 200  # what the run's status keeps
    assert XComStore().load(reference) == large  # read without configuration: the URL is in the reference


def test_a_value_over_the_maximum_fails_with_its_size_and_the_limit(tmp_path: Path) -> None:
    store = XComStore(base_url=f"file://{tmp_path}", max_bytes=50_000)
    with pytest.raises(xcoms.XComError, match="XCom 'big' is 60002 bytes; the limit is 50000 bytes"):
        store.prepare(invocation(), "big", "x" * 60_000)
    assert not list(tmp_path.iterdir())  # nothing written


def test_without_a_backend_a_large_value_fails_saying_how_to_configure_one() -> None:
    with pytest.raises(xcoms.XComError, match=r"2002 bytes; values over 1024 bytes need an XCom backend"):
        XComStore(backend="none").prepare(invocation(), "return_value", "x" * 2000)


def test_the_backend_is_kubernetes_unless_a_url_or_another_is_chosen() -> None:
    assert XComStore().chosen_backend == "kubernetes"
    assert XComStore(base_url="s3://bucket/x").chosen_backend == "fsspec"
    assert XComStore(backend="none", base_url="s3://bucket/x").chosen_backend == "none"
    with pytest.raises(xcoms.XComError, match="unknown XCom backend 'etcd': one of kubernetes, fsspec, none"):
        XComStore(backend="etcd")
    with pytest.raises(xcoms.XComError, match="the fsspec XCom backend needs a base URL"):
        XComStore(backend="fsspec")


def test_a_try_with_no_cluster_keeps_a_large_value_in_memory_for_the_process() -> None:
    """`zonda dags test` runs every try in one process with no apiserver: the Kubernetes backend's
    values stay in fsspec's memory filesystem there."""
    reference = XComStore().prepare(invocation(namespace=None), "return_value", "m" * 3000)
    assert xcoms.stored_url(reference).startswith("memory://zonda-xcom/default/etl-manual-1/extract/2/")
    assert XComStore().load(reference) == "m" * 3000


def test_a_missing_stored_value_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(xcoms.XComError, match="cannot read the stored XCom at file://"):
        XComStore().load(xcoms.stored_reference(f"file://{tmp_path}/gone.json", 10))


def test_multiple_outputs_needs_a_dict_with_string_keys() -> None:
    assert xcoms.multiple_outputs({"a": 1}) == {"a": 1}
    with pytest.raises(xcoms.XComError, match="expected dictionary for multiple_outputs"):
        xcoms.multiple_outputs([1])
    with pytest.raises(xcoms.XComError, match="keys must be strings when using multiple_outputs"):
        xcoms.multiple_outputs({1: "a"})


def test_a_try_pulls_what_status_holds_a_finished_trys_xcoms_and_a_deferred_trys_pushes() -> None:
    done = TaskInstanceStatus(state=TaskInstanceState.SUCCESS, xcom=1, xcoms={"k": "v"})
    running = TaskInstanceStatus(state=TaskInstanceState.RUNNING)  # a new try has reported nothing yet
    waiting = TaskInstanceStatus(state=TaskInstanceState.DEFERRED, xcoms={"run_id": "child"})
    assert xcoms.upstream_xcoms({"a": done, "b": running, "c": waiting}) == (
        {"a": 1},
        {"a": {"k": "v"}, "c": {"run_id": "child"}},
    )


HELPERS = """
def push_and_return(ti, size):
    ti.xcom_push(key="path", value="/data/part-1")
    ti.xcom_push(key="blob", value="y" * size)
    return "x" * size


def measure(big, blob, path):
    return {"big": len(big), "blob": len(blob), "path": path}
"""


def run_runner(tmp_path: Path, wire: TaskInvocation, backend: str | None, **extra_env: str) -> dict[str, Any]:
    """Run the runner on `wire`; `backend` is the fsspec URL, or `none`, or None (Kubernetes)."""
    (tmp_path / "xcom_helpers.py").write_text(HELPERS)
    result_path = tmp_path / "termination-log"
    env = {key: value for key, value in os.environ.items() if not key.startswith("ZONDA_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]),
        ZONDA_RESULT_PATH=str(result_path),
        ZONDA_TASK_INVOCATION=wire.encode().decode(),
    )
    if backend == "none":
        env["ZONDA_XCOM_BACKEND"] = backend
    elif backend:
        env["ZONDA_XCOM_BACKEND_URL"] = backend
    env.update(extra_env)
    process = subprocess.run(
        [sys.executable, "-m", "controller.runner"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    payload = result_path.read_bytes()
    assert len(payload) <= RESULT_LIMIT_BYTES
    result: dict[str, Any] = json.loads(payload)
    TaskResult.from_wire(result)
    assert process.returncode == (1 if result["outcome"] == "failed" else 0), process.stderr
    return result


def test_a_100_kb_value_and_pushed_keys_travel_through_the_backend_to_the_next_task(tmp_path: Path) -> None:
    backend = f"file://{tmp_path}/store"
    pushed = run_runner(
        tmp_path,
        invocation(args={"python_callable": "xcom_helpers:push_and_return", "op_kwargs": {"size": 100_000}}),
        backend,
    )
    assert pushed["outcome"] == "success", pushed
    assert pushed["xcom"][xcoms.STORED_MARKER]["bytes"] == 100_002
    assert pushed["xcoms"]["path"] == "/data/part-1"
    assert xcoms.is_stored(pushed["xcoms"]["blob"])
    args = {
        "python_callable": "xcom_helpers:measure",
        "op_kwargs": {
            "big": "{{ ti.xcom_pull('extract') }}",
            "blob": "{{ ti.xcom_pull('extract', key='blob') }}",
            "path": "{{ ti.xcom_pull(task_ids='extract', key='path') }}",
        },
    }
    pulled = run_runner(
        tmp_path,
        invocation(
            task_id="load",
            try_number=1,
            args=args,
            xcoms={"extract": pushed["xcom"]},
            keyed_xcoms={"extract": pushed["xcoms"]},
        ),
        None,  # reading needs no configuration
    )
    assert pulled["outcome"] == "success", pulled
    assert pulled["xcom"] == {"big": 100_000, "blob": 100_000, "path": "/data/part-1"}


def test_a_large_value_without_a_backend_fails_the_task_with_its_size(tmp_path: Path) -> None:
    result = run_runner(
        tmp_path,
        invocation(args={"python_callable": "xcom_helpers:push_and_return", "op_kwargs": {"size": 5000}}),
        "none",
    )
    assert result["outcome"] == "failed"
    assert result["message"] == (
        "PythonOperator: XCom 'return_value' is 5002 bytes; values over 1024 bytes need an XCom backend: "
        "set xcom.backend in the chart ($ZONDA_XCOM_BACKEND), or return less"
    )


def test_the_kubernetes_backend_without_credentials_fails_the_task_saying_so(tmp_path: Path) -> None:
    result = run_runner(
        tmp_path,
        invocation(args={"python_callable": "xcom_helpers:push_and_return", "op_kwargs": {"size": 5000}}),
        None,
        HOME=str(tmp_path),
        KUBECONFIG="",
        KUBERNETES_SERVICE_HOST="",
    )
    assert result["outcome"] == "failed"
    assert result["message"].startswith(
        "cannot write to the XCom backend: OSError: XCom 'return_value' (5002 bytes) not written as "
        "XComChunks: "
        "no Kubernetes credentials"
    ), result["message"]


DEFERRING = """
from datetime import timedelta

from zonda.operators.base import BaseOperator
from zonda.sensors.base import BaseSensorOperator
from zonda.triggers import TimeDeltaTrigger


class PushThenDefer(BaseOperator):
    def execute(self, context):
        context["ti"].xcom_push(key="run_id", value="child-1")
        context["ti"].xcom_push(key="shared", value="before")
        context["ti"].xcom_push(key="blob", value="b" * 5000)
        self.defer(trigger=TimeDeltaTrigger(timedelta(seconds=1)), method_name="execute_complete")

    def execute_complete(self, context, event=None):
        ti = context["ti"]
        ti.xcom_push(key="shared", value="after")
        return {
            "run_id": ti.xcom_pull(task_ids=self.task_id, key="run_id"),
            "shared": ti.xcom_pull(task_ids=self.task_id, key="shared"),
            "blob": len(ti.xcom_pull(task_ids=self.task_id, key="blob")),
        }


class PushingPoke(BaseSensorOperator):
    def poke(self, context):
        context["ti"].xcom_push(key="poked", value=True)
        return False
"""


def test_a_deferring_try_reports_its_pushes_and_the_resumed_try_pulls_them(tmp_path: Path) -> None:
    (tmp_path / "deferring.py").write_text(DEFERRING)
    backend = f"file://{tmp_path}/store"
    first = run_runner(tmp_path, invocation(operator="deferring.PushThenDefer", args={}), backend)
    assert first["outcome"] == "deferred", first
    assert first["deferral"]["triggerClasspath"] == "zonda.triggers.temporal.DateTimeTrigger"
    assert {key: value for key, value in first["xcoms"].items() if key != "blob"} == {
        "run_id": "child-1", "shared": "before"
    }  # fmt: skip
    assert xcoms.stored_size(first["xcoms"]["blob"]) == 5002, "a large push goes to the backend at once"
    resumed = run_runner(
        tmp_path,
        invocation(
            operator="deferring.PushThenDefer",
            args={},
            next_method="execute_complete",
            next_kwargs={"event": None},
            keyed_xcoms={"extract": first["xcoms"]},  # the controller's status after the deferral
        ),
        backend,
    )
    assert resumed["outcome"] == "success", resumed
    assert resumed["xcom"] == {"run_id": "child-1", "shared": "after", "blob": 5000}
    assert resumed["xcoms"] == {"shared": "after"}, "only its own pushes: the controller merges them"


def test_a_rescheduled_poke_reports_its_pushes(tmp_path: Path) -> None:
    (tmp_path / "deferring.py").write_text(DEFERRING)
    args = {"mode": "reschedule", "poke_interval": 60}
    result = run_runner(tmp_path, invocation(operator="deferring.PushingPoke", args=args), None)
    assert result["outcome"] == "reschedule", result
    assert result["xcoms"] == {"poked": True}


def finished_run(tmp_path: Path) -> DagRunStatus:
    stored = XComStore(base_url=f"file://{tmp_path}").prepare(invocation(), "return_value", "z" * 5000)
    return DagRunStatus(
        task_instances={
            "extract": TaskInstanceStatus(state=TaskInstanceState.SUCCESS, xcom=stored, xcoms={"path": "/p"}),
            "load": TaskInstanceStatus(state=TaskInstanceState.RUNNING),
        }
    )


@pytest.mark.parametrize(
    ("task_id", "key", "map_index", "error"),
    [
        pytest.param(
            "nope", "return_value", -1, "run r1 has no task 'nope' (its tasks: extract, load)", id="task"
        ),
        pytest.param(
            "load", "return_value", -1, "task 'load' is running: its XComs exist once", id="running"
        ),
        pytest.param(
            "extract", "other", -1, "has no XCom 'other'; its keys: return_value, path", id="a missing key"
        ),
        pytest.param("extract", "return_value", 3, "task 'extract' is not mapped", id="a map index"),
    ],
)
def test_xcom_get_says_why_there_is_no_value(
    tmp_path: Path, task_id: str, key: str, map_index: int, error: str
) -> None:
    with pytest.raises(click.ClickException, match=re.escape(error)):
        find_xcom(finished_run(tmp_path), "r1", task_id, key, map_index)


def test_xcom_get_finds_the_return_value_and_pushed_keys(tmp_path: Path) -> None:
    status = finished_run(tmp_path)
    assert XComStore().load(find_xcom(status, "r1", "extract", "return_value", -1)) == "z" * 5000
    assert find_xcom(status, "r1", "extract", "path", -1) == "/p"


def test_xcom_get_reads_a_deferred_tasks_pushes_before_it_finishes() -> None:
    status = DagRunStatus(
        task_instances={"wait": TaskInstanceStatus(state=TaskInstanceState.DEFERRED, xcoms={"run_id": "c"})}
    )
    assert find_xcom(status, "r1", "wait", "run_id", -1) == "c"
    with pytest.raises(click.ClickException, match="task 'wait' is deferred: its XComs exist once"):
        find_xcom(status, "r1", "wait", "return_value", -1)


def test_multiple_outputs_pushes_each_key_after_the_callables_own_pushes(tmp_path: Path) -> None:
    (tmp_path / "mo_helpers.py").write_text(
        "def split(ti):\n    ti.xcom_push(key='a', value='pushed')\n    return {'a': 1, 'b': [2]}\n"
        "def nothing():\n    return None\n"
    )
    args = {"python_callable": "mo_helpers:split", "multiple_outputs": True}
    result = run_runner(tmp_path, invocation(args=args), None)
    assert result["xcom"] == {"a": 1, "b": [2]}
    assert result["xcoms"] == {"a": 1, "b": [2]}  # Airflow's decorated operator pushes each key last
    none = run_runner(tmp_path, invocation(args={**args, "python_callable": "mo_helpers:nothing"}), None)
    assert none["outcome"] == "success" and not none.get("xcoms")


def test_multiple_outputs_of_a_list_fails_the_task(tmp_path: Path) -> None:
    (tmp_path / "mo_list.py").write_text("def listing():\n    return [1]\n")
    args = {"python_callable": "mo_list:listing", "multiple_outputs": True}
    result = run_runner(tmp_path, invocation(args=args), None)
    assert result["outcome"] == "failed"
    assert "expected dictionary for multiple_outputs" in result["message"]
