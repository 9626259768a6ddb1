"""Benchmark: the same DAGs in Zonda (local executor), Airflow 2.10.5 and Airflow 3.3.2 (each with the
LocalExecutor on Postgres), back to back in one run.

    bench/setup_airflow_side_by_side.sh    # once: both Airflows in their own venvs, Postgres from apt
    python bench/bench_airflow_side_by_side.py [--runs 2] [--fanout 50] [--chain 20] [--parallelism 16]
                                               [--systems airflow2,airflow3,zonda]

Two DAGs of `BashOperator(bash_command="true")` tasks: a fan-out of `--fanout` independent tasks and
a chain of `--chain` tasks. Each system runs each DAG `--runs` times, one run at a time, alone on the
machine (each Airflow's processes and its Postgres are stopped before the next system starts):

- Airflow 2.10.5: `airflow scheduler` (which parses the DAG files itself) with the LocalExecutor on a
  Postgres started here (initdb in a temporary directory, as the `postgres` user, Unix socket only,
  Debian's default settings), runs created with `airflow dags trigger`;
- Airflow 3.3.2: the same Postgres set-up, and the three processes Airflow 3 splits the work into
  (its docs' architecture overview): `airflow api-server` (its Execution API is how every task
  reports its state: `[core] execution_api_server_url` points at it, on loopback, and the scheduler and
  the API server share one `[api_auth] jwt_secret`), `airflow dag-processor` (parses the files) and
  `airflow scheduler` (LocalExecutor); runs created with `airflow dags trigger`. Everything else is
  Airflow's default;
- Zonda: `zonda controller --executor local` against the local control plane (kube-apiserver + etcd,
  `$ZONDA_BIN_DIR`), runs created with `zonda trigger`.

All get the same limits: `--parallelism` tries at once (Airflow's `core.parallelism`, Zonda's
`--parallelism`) and 16 active tasks per DAG (their defaults). For every run it prints the run's own
timestamps, which each system records the same way: queued -> end (from the trigger's write to the
last task's end) and start -> end (from the scheduler starting the run), and the machine's load; then
medians per system and DAG, and each Airflow's median over Zonda's (> 1: Zonda faster).

It re-runs itself in a network namespace of its own with only loopback (bench/private_network.py:
Airflow's log server binds 0.0.0.0:8793); `--no-netns` skips that.

Not part of CI: it installs nothing and asserts nothing; performance is measured here, not in tests.
Measured figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import private_network, processes  # noqa: E402
from controller.devtools.devcluster import start_local_cluster  # noqa: E402
from controller.devtools.ports import free_port  # noqa: E402
from tests.cluster.zonda_processes import apply, controller, get, trigger, wait_for  # noqa: E402

FANOUT_DAG, CHAIN_DAG = "bench_fanout", "bench_chain"

AIRFLOW_DAG_FILE = """
from datetime import datetime

{imports}

for dag_id, size, chained in (("{fanout_dag}", {fanout}, False), ("{chain_dag}", {chain}, True)):
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
             is_paused_upon_creation=False) as dag:
        tasks = [BashOperator(task_id=f"t{{i}}", bash_command="true") for i in range(size)]
        if chained:
            for upstream, downstream in zip(tasks, tasks[1:]):
                upstream >> downstream
    globals()[dag_id] = dag
"""


@dataclass(frozen=True)
class Airflow:
    """One Airflow version: its venv, how its DAG file imports, and the processes it runs as."""

    system: str
    venv: Path
    imports: str
    #: Airflow 3: api-server + dag-processor + scheduler; Airflow 2: the scheduler parses files itself.
    split: bool


AIRFLOWS = {
    "airflow2": Airflow(
        "airflow2",
        Path(os.environ.get("AIRFLOW_VENV", Path.home() / ".cache/zonda/airflow-2.10.5")),
        "from airflow import DAG\nfrom airflow.operators.bash import BashOperator",
        split=False,
    ),
    "airflow3": Airflow(
        "airflow3",
        Path(os.environ.get("AIRFLOW3_VENV", Path.home() / ".cache/zonda/airflow-3.3.2")),
        "from airflow.providers.standard.operators.bash import BashOperator\nfrom airflow.sdk import DAG",
        split=True,
    ),
}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ------------------------------------------------------------------------------------------ Postgres


@contextlib.contextmanager
def postgres(work: Path) -> Iterator[Path]:
    """A throwaway Postgres (Debian's package) listening on a Unix socket in `work`; yields the socket's
    directory. Postgres refuses to run as root, so as root it runs as the `postgres` user."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not candidates:
        raise SystemExit("no Postgres: run bench/setup_airflow_side_by_side.sh (apt-get install postgresql)")
    bin_dir = candidates[-1].parent
    data, sockets, logs = work / "pgdata", work / "pgsocket", work / "pglog"
    sockets.mkdir()
    logs.mkdir()
    prefix: list[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        work.chmod(0o755)
        os.chown(sockets, owner.pw_uid, owner.pw_gid)
        os.chown(logs, owner.pw_uid, owner.pw_gid)
        data.mkdir()
        os.chown(data, owner.pw_uid, owner.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    options = f"-k {sockets} -c listen_addresses='' -c max_connections=200"
    subprocess.run(
        [
            *prefix,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(logs / "postgres.log"),
            "-w",
            "start",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    try:
        yield sockets
    finally:
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            check=False,
            stdout=subprocess.DEVNULL,
        )


def psql(sockets: Path, sql: str, database: str = "airflow") -> list[list[str]]:
    out = subprocess.run(
        ["psql", "-h", str(sockets), "-U", "postgres", "-d", database, "-AtF", "\t", "-c", sql],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split("\t") for line in out.splitlines() if line]


# ------------------------------------------------------------------------------------------- Airflow


def airflow_env(work: Path, sockets: Path, parallelism: int, airflow: Airflow) -> dict[str, str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHONPATH"))},
        "AIRFLOW_HOME": str(work / "airflow"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://postgres@/airflow?host={sockets}",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__DAGS_FOLDER": str(work / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": str(parallelism),
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "16",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
    }
    if airflow.split:
        # Tasks report to the API server's Execution API with a token the scheduler signs: both must
        # share the secret (Airflow's docs: an unset one is random per process, and tasks fail).
        port = free_port()
        env |= {
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        }
    return env


def airflow_process(airflow: Path, command: str, env: dict[str, str], work: Path) -> Any:
    """`airflow <command>` in its own process group, its output in `work/airflow-<command>.log`."""
    log = work / f"airflow-{command}.log"
    return processes.running(
        [str(airflow), command],
        log,
        ready=lambda _: True,
        what=f"airflow {command}",
        env=env,
        stop_timeout=60,
    )


def bench_airflow(work: Path, options: argparse.Namespace, version: Airflow) -> list[dict[str, Any]]:
    airflow = version.venv / "bin" / "airflow"
    if not airflow.exists():
        raise SystemExit(f"no Airflow in {version.venv}: run bench/setup_airflow_side_by_side.sh first")
    (work / "dags").mkdir()
    (work / "dags" / "bench_dags.py").write_text(
        AIRFLOW_DAG_FILE.format(
            imports=version.imports,
            fanout_dag=FANOUT_DAG,
            chain_dag=CHAIN_DAG,
            fanout=options.fanout,
            chain=options.chain,
        )
    )
    results = []
    with postgres(work) as sockets, contextlib.ExitStack() as processes:
        psql(sockets, "CREATE DATABASE airflow", database="postgres")
        env = airflow_env(work, sockets, options.parallelism, version)
        say(f"{version.system}: airflow db migrate ...")
        subprocess.run([str(airflow), "db", "migrate"], env=env, check=True, stdout=subprocess.DEVNULL)
        for command in ("api-server", "dag-processor", "scheduler") if version.split else ("scheduler",):
            processes.enter_context(airflow_process(airflow, command, env, work))
        say(f"{version.system}: waiting for the DAGs to be parsed ...")
        wait_for(lambda: len(psql(sockets, "SELECT dag_id FROM serialized_dag")) >= 2, "the DAGs", 300)
        if version.split:
            api = f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}/api/v2/version"
            wait_for(lambda: answers(api), "the API server", 120)
        time.sleep(5)  # let the scheduler settle into its loop, as a running Airflow would be
        for number in range(options.runs):
            for dag_id in (FANOUT_DAG, CHAIN_DAG):
                run_id = f"bench-{number}"
                triggered = time.time()
                subprocess.run(
                    [str(airflow), "dags", "trigger", dag_id, "--run-id", run_id],
                    env=env,
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                query = (
                    "SELECT state, extract(epoch from queued_at), extract(epoch from start_date), "
                    f"extract(epoch from end_date) FROM dag_run WHERE dag_id = '{dag_id}' "
                    f"AND run_id = '{run_id}'"
                )
                row = wait_for(
                    lambda q=query: finished_row(psql(sockets, q)), f"run {run_id} of {dag_id}", 600, 0.2
                )
                results.append(record(version.system, dag_id, row[0], *map(float, row[1:]), triggered))
    return results


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except urllib.error.HTTPError:
        return True  # it answered (401 without a token is an answer)
    except OSError:
        return False


def finished_row(rows: list[list[str]]) -> list[str] | None:
    return rows[0] if rows and rows[0][0] in ("success", "failed") else None


# --------------------------------------------------------------------------------------------- Zonda


def zonda_dag(name: str, size: int, chained: bool) -> dict[str, Any]:
    tasks = [
        {
            "id": f"t{i}",
            "operator": "BashOperator",
            "args": {"bash_command": "true"},
            "dependsOn": [f"t{i - 1}"] if chained and i else [],
        }
        for i in range(size)
    ]
    return {
        "apiVersion": "zonda.dev/v1alpha1",
        "kind": "DAG",
        "metadata": {"name": name.replace("_", "-")},
        "spec": {"schedule": None, "maxActiveTasks": 16, "tasks": tasks},
    }


def bench_zonda(work: Path, options: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    cluster = start_local_cluster(nodes=False)  # the local executor runs no pods: etcd + apiserver
    try:
        namespace = "bench"
        cluster.kubectl("create", "namespace", namespace)
        for name, size, chained in ((FANOUT_DAG, options.fanout, False), (CHAIN_DAG, options.chain, True)):
            apply(cluster, namespace, zonda_dag(name, size, chained))
        extra = ["--parallelism", str(options.parallelism)]
        with controller(cluster, namespace, work, executor="local", extra=extra):
            time.sleep(5)  # as for Airflow: a controller already running when the runs are triggered
            for _number in range(options.runs):
                for name in (FANOUT_DAG, CHAIN_DAG):
                    triggered = time.time()
                    run = trigger(cluster, namespace, name.replace("_", "-"))
                    status = wait_for(
                        lambda r=run: finished_status(get(cluster, namespace, "dagrun", r)),
                        f"run {run}",
                        600,
                        0.2,
                    )
                    times = [parse(status.get(key)) for key in ("queuedAt", "startDate", "endDate")]
                    results.append(record("zonda", name, status["state"], *times, triggered))
    finally:
        cluster.stop()
    return results


def finished_status(run: dict[str, Any]) -> dict[str, Any] | None:
    status: dict[str, Any] = run.get("status") or {}
    return status if status.get("state") in ("success", "failed") else None


def parse(value: str | None) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else float("nan")


# -------------------------------------------------------------------------------------------- common


def record(
    system: str, dag: str, state: str, queued: float, started: float, ended: float, triggered: float
) -> dict[str, Any]:
    result = {
        "system": system,
        "dag": dag,
        "state": state,
        "queued_to_end_s": ended - queued,
        "start_to_end_s": ended - started,
        "trigger_command_to_end_s": ended - triggered,
        "load": load(),
    }
    say(json.dumps(result))
    return result


def report(results: list[dict[str, Any]]) -> None:
    print(
        f"\n{'system':8s} {'dag':14s} {'runs':>4s} {'queued->end p50':>16s} {'start->end p50':>15s}  states"
    )
    medians: dict[tuple[str, str], float] = {}
    for system in (*AIRFLOWS, "zonda"):
        for dag in (FANOUT_DAG, CHAIN_DAG):
            rows = [r for r in results if r["system"] == system and r["dag"] == dag]
            if not rows:
                continue
            queued = statistics.median(r["queued_to_end_s"] for r in rows)
            started = statistics.median(r["start_to_end_s"] for r in rows)
            medians[(system, dag)] = queued
            states = ",".join(sorted({r["state"] for r in rows}))
            print(f"{system:8s} {dag:14s} {len(rows):4d} {queued:15.2f}s {started:14.2f}s  {states}")
    for system in AIRFLOWS:
        for dag in (FANOUT_DAG, CHAIN_DAG):
            if (system, dag) in medians and ("zonda", dag) in medians:
                ratio = medians[(system, dag)] / medians[("zonda", dag)]
                print(f"{dag}: {system} / zonda = {ratio:.1f} (queued -> end, medians; > 1: Zonda faster)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--fanout", type=int, default=50)
    parser.add_argument("--chain", type=int, default=20)
    parser.add_argument("--parallelism", type=int, default=16)
    parser.add_argument(
        "--systems",
        default="airflow2,airflow3,zonda",
        help="comma-separated, run in this order: airflow2 (2.10.5; `airflow` too), airflow3 (3.3.2), zonda",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    parser.add_argument("--no-netns", action="store_true", help="run where we are (not in a private netns)")
    options = parser.parse_args()
    if not options.no_netns and not private_network.inside():
        return private_network.rerun_inside()
    print(f"machine: {os.cpu_count()} CPUs, load average {load()}")
    work = Path(tempfile.mkdtemp(prefix="bench-side-by-side-"))
    work.chmod(0o755)  # Postgres runs as its own user and must reach its directories
    results: list[dict[str, Any]] = []
    try:
        for system in options.systems.split(","):
            system = "airflow2" if system == "airflow" else system
            print(f"# {system}: load average {load()}", flush=True)
            (work / system).mkdir()
            if system == "zonda":
                results += bench_zonda(work / system, options)
            else:
                results += bench_airflow(work / system, options, AIRFLOWS[system])
    finally:
        report(results)
        print(f"load average after: {load()}")
        if options.keep:
            print(f"logs in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
