"""Benchmark: one DAG of thousands of plain (unmapped) tasks, from its file to the end of a run.

    python bench/bench_big_dag.py [--tasks 1000,3000,5000] [--width 100] [--operator empty|bash] [--cluster]

For each size, a generated Airflow 3 DAG file of `--tasks` EmptyOperators (or BashOperators) in
layers of `--width` (task i depends on task i - width; `max_active_tasks` is the width), then:

- render: the file loaded and compiled to its manifest (`zonda dags render`'s work), the manifest's
  JSON bytes;
- validation: the manifest's spec parsed and resolved (`resolve_dag`: what the DAG reconciler and a
  run's start do);
- passes in process: `compose_pass` driven to the run's end as `zonda dags test` drives it
  (EmptyOperators succeed inside the pass; a BashOperator's try is reported succeeded to the next
  pass, so the subject is the pass itself, invocations built): passes, time per pass p50 / max, and
  the status bytes at the end against the 1.5 MiB an object may have;
- with `--cluster`: one local control plane and `zonda controller`; the DAG applied (create time,
  or the apiserver's refusal), its `Valid` condition awaited, one run created and watched to its end:
  wall, status writes the apiserver made (the watch's MODIFIED events of the run and, past
  `--inline-task-instances`, of its DagRunShards), the largest object written, the controller's API
  writes per task instance (the apiserver's `apiserver_request_total`, by resource), its CPU over
  the run, and how the run ended (a status too large to store is reported by the run's
  `StatusWritten=False` condition).

It prints numbers; it asserts nothing (performance is measured here, not in tests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pendulum

from zonda.authoring import compat, dag_files, manifests
from zonda.passes import compose, plans
from zonda.passes.decisions import AttemptPhase, ObservedAttempt
from zonda.resources.dagrun_models import DagRunSpec, DagRunStatus
from zonda.resources.invocations import TaskOutcome, TaskResult
from zonda.resources.models import DagRunState
from zonda.resources.run_types import RunType
from zonda.specs.dags import parse_dag_spec, resolve_dag

#: The resources whose writes are counted per task instance (the controller's, and kwok's pod status).
OURS = ("dagruns", "dagrunshards", "pods", "events")
OBJECT_LIMIT_BYTES = 3 * 512 * 1024  # 1.5 MiB: etcd's default request limit
TREE = Path(__file__).resolve().parents[1]


#: What each task is: EmptyOperators succeed in the pass itself; BashOperators are launched, and each
#: try is reported succeeded to the next pass (as an executor whose tries take no time).
OPERATORS = {
    "empty": ("airflow.providers.standard.operators.empty", "EmptyOperator", ""),
    "bash": ("airflow.providers.standard.operators.bash", "BashOperator", ', bash_command="true"'),
}


def dag_file(tasks: int, width: int, operator: str) -> str:
    module, cls, args = OPERATORS[operator]
    return textwrap.dedent(
        f"""
        import pendulum
        from airflow.sdk import DAG
        from {module} import {cls}

        with DAG("big_{tasks}", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
                 max_active_tasks={width}):
            ops = [{cls}(task_id=f"t{{i:05d}}"{args}) for i in range({tasks})]
            for i in range({width}, {tasks}):
                ops[i - {width}] >> ops[i]
        """
    )


def wire_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), default=str))


def succeeded(launch: compose.Launch) -> ObservedAttempt:
    return ObservedAttempt(
        task_id=launch.task.task_id,
        try_number=launch.launch.try_number,
        name=launch.launch.attempt_name,
        phase=AttemptPhase.SUCCEEDED,
        result=TaskResult(outcome=TaskOutcome.SUCCESS),
        exit_code=0,
    )


def pure_phases(tasks: int, width: int, operator: str, folder: Path) -> dict[str, Any]:
    path = folder / f"big_{tasks}_{operator}.py"
    path.write_text(dag_file(tasks, width, operator))
    started = time.perf_counter()
    with compat.airflow_imports(enabled=True, dialect=compat.file_dialect(path.read_text())):
        (result,) = dag_files.load_file(path, folder)
    assert result.failure is None, result.failure
    manifest = manifests.dag_manifest(result.dags[0], dags_folder=folder)
    render_s = time.perf_counter() - started
    started = time.perf_counter()
    name = manifest["metadata"]["name"]
    dag_spec = parse_dag_spec(manifest["spec"])
    dag = resolve_dag(name, dag_spec)
    validate_s = time.perf_counter() - started
    now = pendulum.now("UTC")
    run_spec = DagRunSpec(dag_name=name, run_type=RunType.MANUAL, logical_date=now)
    start = plans.start_run(
        run_spec,
        DagRunStatus(),
        plans.DagRef(spec=manifest["spec"], generation=1),
        namespace="bench",
        created_at=now,
        generation=1,
        now=now,
    )
    status = start.status
    pass_ms: list[float] = []
    attempts: dict[str, ObservedAttempt] = {}
    while status.state not in (DagRunState.SUCCESS, DagRunState.FAILED) and len(pass_ms) < 10 * tasks:
        gathered = compose.Gathered(
            dag=dag,
            dag_spec=dag_spec,
            spec=run_spec,
            status=status,
            run_name=f"{name}-1",
            now=now,
            attempts=dict(attempts),
        )
        began = time.perf_counter()
        plan = compose.compose_pass(gathered)
        for launch in plan.launches:
            assert launch.invocation is not None  # built lazily: a pass's whole work includes them
        pass_ms.append((time.perf_counter() - began) * 1000)
        status = plan.status
        attempts.update({launch.launch.attempt_name: succeeded(launch) for launch in plan.launches})
    return {
        "manifest": manifest,
        "render_s": render_s,
        "manifest_bytes": wire_bytes(manifest),
        "validate_s": validate_s,
        "passes": len(pass_ms),
        "pass_p50_ms": statistics.median(pass_ms),
        "pass_max_ms": max(pass_ms),
        "state": status.state.value if status.state else "?",
        "status_bytes": wire_bytes(status.to_wire()),
    }


async def cluster_phase(manifest: dict[str, Any], tmp: Path) -> dict[str, Any]:
    from bench.bench_controller import api_writes
    from bench.bench_scale import Api, controller, cpu_seconds, free_port
    from controller.devtools.devcluster import connect_cluster

    out: dict[str, Any] = {}
    with connect_cluster("local") as cluster:
        api = Api(cluster)
        namespace = f"big-{int(time.time() * 1000) % 10**8}"
        await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
        base = f"/apis/zonda.dev/v1alpha1/namespaces/{namespace}"
        name = manifest["metadata"]["name"]
        writes: list[int] = []
        shard_writes: list[int] = []
        finished = asyncio.Event()
        final: dict[str, Any] = {}

        def on_event(type: str, body: dict[str, Any], _monotonic: float) -> None:
            status = body.get("status") or {}
            if type == "MODIFIED":
                writes.append(wire_bytes(status))
            conditions = {c.get("type"): c for c in status.get("conditions") or []}
            refused = (conditions.get("StatusWritten") or {}).get("status") == "False"
            if status.get("state") in ("success", "failed") or refused:
                final.update(state=status.get("state"), refused=refused)
                finished.set()

        def on_shard(type: str, body: dict[str, Any], _monotonic: float) -> None:
            if type in ("ADDED", "MODIFIED"):
                shard_writes.append(wire_bytes(body))

        ready, shards_ready = asyncio.Event(), asyncio.Event()
        watcher = asyncio.create_task(api.watch(f"{base}/dagruns", on_event, ready))
        shard_watcher = asyncio.create_task(api.watch(f"{base}/dagrunshards", on_shard, shards_ready))
        await ready.wait()
        await shards_ready.wait()
        port = free_port()
        with controller(cluster, TREE, namespace, tmp / "controller.log", port) as pid:
            began = time.perf_counter()
            try:
                await api.request("POST", f"{base}/dags", manifest)
            except RuntimeError as refused:
                out["apply"] = f"refused: {str(refused)[:200]}"
                watcher.cancel()
                shard_watcher.cancel()
                await api.close()
                return out
            out["apply_s"] = time.perf_counter() - began
            for _ in range(600):
                dag = await api.request("GET", f"{base}/dags/{name}")
                valid = {c["type"]: c for c in (dag.get("status") or {}).get("conditions") or []}.get("Valid")
                if valid is not None:
                    out["valid"] = f"{valid['status']} after {time.perf_counter() - began:.1f} s"
                    break
                await asyncio.sleep(0.2)
            run = {
                "apiVersion": "zonda.dev/v1alpha1",
                "kind": "DagRun",
                "metadata": {"name": f"{name}-1", "labels": {"zonda.dev/dag": name}},
                "spec": {"dagName": name, "runType": "manual", "logicalDate": "2026-01-01T00:00:00Z"},
            }
            cpu_before = cpu_seconds(pid)
            api_before = api_writes(cluster)
            began = time.perf_counter()
            await api.request("POST", f"{base}/dagruns", run)
            ended = asyncio.create_task(finished.wait())
            await asyncio.wait([ended, watcher], timeout=1800, return_when=asyncio.FIRST_COMPLETED)
            if watcher.done():
                watcher.result()  # the watch failed: say why instead of waiting for nothing
            if not ended.done():
                final.update(state="not finished in 1800 s")
            out["run_wall_s"] = time.perf_counter() - began
            out["controller_cpu_s"] = cpu_seconds(pid) - cpu_before
            api_after = api_writes(cluster)
            await asyncio.sleep(1)  # the last shard writes' watch events
        out.update(final)
        out["api_writes"] = {
            k: api_after[k] - api_before.get(k, 0)
            for k in sorted(api_after)
            if api_after[k] - api_before.get(k, 0) and k.split("/")[0] in OURS
        }
        out["status_writes"] = len(writes)
        out["largest_status_bytes"] = max(writes, default=0)
        out["status_bytes_written"] = sum(writes)
        out["shard_writes"] = len(shard_writes)
        out["largest_shard_bytes"] = max(shard_writes, default=0)
        out["shard_bytes_written"] = sum(shard_writes)
        watcher.cancel()
        shard_watcher.cancel()
        await api.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", default="1000,3000,5000")
    parser.add_argument("--width", type=int, default=100)
    parser.add_argument("--operator", choices=sorted(OPERATORS), default="empty")
    parser.add_argument("--cluster", action="store_true", help="also apply and run it on a local cluster")
    args = parser.parse_args()
    operator = OPERATORS[args.operator][1]
    print(f"load {os.getloadavg()[0]:.1f} at start; layers of {args.width} {operator}s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for tasks in (int(t) for t in args.tasks.split(",")):
            found = pure_phases(tasks, args.width, args.operator, Path(tmp))
            print(
                f"{tasks} tasks: render {found['render_s']:.2f} s, manifest {found['manifest_bytes']:,} B; "
                f"validate {found['validate_s']:.2f} s; {found['passes']} passes in process, "
                f"p50 {found['pass_p50_ms']:.0f} ms max {found['pass_max_ms']:.0f} ms, "
                f"{found['state']}, status {found['status_bytes']:,} B "
                f"({found['status_bytes'] / OBJECT_LIMIT_BYTES:.0%} of 1.5 MiB)",
                flush=True,
            )
            if args.cluster:
                run_dir = Path(tmp) / f"cluster-{tasks}"
                run_dir.mkdir()
                measured = asyncio.run(cluster_phase(found["manifest"], run_dir))
                print(f"  on the apiserver (load {os.getloadavg()[0]:.1f}): {measured}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
