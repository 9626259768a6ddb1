"""Benchmark: the task runner's CPU per try inside Zonda's own image, as a task pod's container runs it.

    python bench/bench_runner_image.py [--archive ~/.cache/zonda/image/<key>/zonda.oci.tar] [--tries 15]

`bench/bench_runner.py` measures the runner with this machine's interpreter and site-packages; a pod
runs the image's Debian Python with the wheel installed (bytecode compiled by pip, no editable-install
finder). This bench unpacks the OCI archive `hack/node/build-image.sh` caches (the newest by default),
and runs `python3 -m controller.runner` for a `BashOperator(bash_command="true")` try in a chroot of
that file system, as the image's user (10001), with the image's environment. It prints the CPU per try
(user + sys of the reaped child, chroot's own ~3 ms included), its wall time, and the interpreter
alone (`python3 -c pass`) for scale. Needs root (chroot, /proc and /dev bind mounts, undone at the end).

Measured 2026-11-30 (image of main 17be22c, load 1.4): a `true` try p50 120 ms CPU (min 113, max 134),
wall p50 123 ms; the interpreter alone 16 ms. (An earlier run at load 1.3: p50 125, min 100, max 164 ms.)

It prints numbers and the machine's load; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from zonda.resources.invocations import INVOCATION_ENV, RESULT_PATH_ENV, TaskInvocation  # noqa: E402
from zonda.resources.run_types import RunType  # noqa: E402

IMAGE_CACHE = Path.home() / ".cache" / "zonda" / "image"
IMAGE_USER = "10001:10001"


def newest_archive() -> Path:
    archives = sorted(IMAGE_CACHE.glob("*/zonda.oci.tar"), key=lambda path: path.stat().st_mtime)
    if not archives:
        raise SystemExit(f"no image archive under {IMAGE_CACHE}: build one with hack/node/build-image.sh")
    return archives[-1]


def unpack(archive: Path, into: Path) -> tuple[Path, dict[str, str]]:
    """The image's root file system (layers applied in order) and its configured environment."""
    layout, rootfs = into / "oci", into / "rootfs"
    rootfs.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(layout, filter="tar")
    blob = lambda digest: layout / "blobs" / "sha256" / digest.split(":", 1)[1]  # noqa: E731
    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads(blob(index["manifests"][0]["digest"]).read_text())
    config = json.loads(blob(manifest["config"]["digest"]).read_text())["config"]
    for layer in manifest["layers"]:  # tar(1) applies whiteouts and ownership as root does
        subprocess.run(["tar", "-xf", str(blob(layer["digest"])), "-C", str(rootfs)], check=True)
    env = dict(item.split("=", 1) for item in config.get("Env", []))
    return rootfs, {**env, "HOME": config.get("WorkingDir") or "/"}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def invocation(task_id: str) -> TaskInvocation:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    return TaskInvocation(
        dag_name="bench", run_name="bench-run", run_type=RunType.MANUAL, task_id=task_id, try_number=1,
        operator="BashOperator", args={"bash_command": "true"},
        logical_date=moment, data_interval_start=moment, data_interval_end=moment,
    )  # fmt: skip


def summary(label: str, values_s: list[float]) -> str:
    ms = sorted(value * 1000 for value in values_s)
    return f"  {label:34s} p50 {statistics.median(ms):6.0f} ms   min {ms[0]:6.0f} ms   max {ms[-1]:6.0f} ms"


def measure(rootfs: Path, env: dict[str, str], tries: int) -> None:
    results = rootfs / "tmp" / "bench-results"
    results.mkdir(parents=True, exist_ok=True)
    results.chmod(0o1777)
    in_image = ["chroot", f"--userspec={IMAGE_USER}", str(rootfs)]
    cpus, walls, bare = [], [], []
    for number in range(tries):
        task_id = f"t{number}"
        try_env = {**env, INVOCATION_ENV: invocation(task_id).encode().decode(),
                   RESULT_PATH_ENV: f"/tmp/bench-results/{task_id}"}  # fmt: skip
        cpu_before, started = children_cpu(), time.monotonic()
        done = subprocess.run([*in_image, "python3", "-m", "controller.runner"], env=try_env,
                              capture_output=True, text=True, cwd="/")  # fmt: skip
        walls.append(time.monotonic() - started)
        cpus.append(children_cpu() - cpu_before)
        outcome = json.loads((results / task_id).read_text())["outcome"] if done.returncode == 0 else None
        if outcome != "success":
            raise SystemExit(f"try {task_id} did not succeed (exit {done.returncode}): {done.stderr[-2000:]}")
        cpu_before = children_cpu()
        subprocess.run([*in_image, "python3", "-c", "pass"], env=env, check=True, cwd="/")
        bare.append(children_cpu() - cpu_before)
    print(f"a `true` try in the image, {tries} tries (python3 -m controller.runner, chroot, {IMAGE_USER}):")
    print(summary("whole try (CPU, user+sys)", cpus))
    print(summary("whole try (wall)", walls))
    print(summary("the interpreter alone (CPU)", bare))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, default=None)
    parser.add_argument("--tries", type=int, default=15)
    args = parser.parse_args()
    archive = args.archive or newest_archive()
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"image archive: {archive}")
    with tempfile.TemporaryDirectory(prefix="zonda-bench-image-") as work:
        rootfs, env = unpack(archive, Path(work))
        mounts = [(["--bind", "/dev"], rootfs / "dev"), (["-t", "proc", "proc"], rootfs / "proc")]
        mounted: list[Path] = []
        try:
            for options, target in mounts:
                subprocess.run(["mount", *options, str(target)], check=True)
                mounted.append(target)
            measure(rootfs, env, args.tries)
        finally:
            for target in reversed(mounted):
                subprocess.run(["umount", str(target)], check=False)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
