"""What refusing a template past a limit costs: wall time, CPU and peak memory, per kind of template.

Each template is rendered as a task's try renders it (`zonda.tries.templating.render_fields` with
the default limits, or the time limit lowered for the loops), in a fresh child process per template,
so the peak resident memory (`ru_maxrss`) is that template's, on top of an interpreter with Zonda's
templating imported (printed as the baseline). Figures go to docs/security.md, "Templates".

    python bench/bench_template_limits.py [--timeout-seconds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

TEMPLATES = {
    "'a' * 10**9 (the issue's 1 GB bash_command)": "echo {{ 'a' * 10**9 }}",
    "[1] * 10**9": "{{ [1] * 10**9 }}",
    "'x'.ljust(10**9)": "{{ 'x'.ljust(10**9) }}",
    "10 ** (10 ** 9)": "{{ 10 ** (10 ** 9) }}",
    "a loop's output past 4 M characters": (
        "{% for i in range(99999) %}{% for j in range(99999) %}{{ 'abcdefghij' * 9 }}{% endfor %}{% endfor %}"
    ),
    "a loop that outputs nothing (the time limit)": (
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
    ),
    "baseline: {{ ds }}": "{{ ds }}",
}

CHILD = """
import json, resource, sys, time
from tests.unit.zonda.tries.test_templating import invocation
from zonda.tries.task_context import build_context
from zonda.tries.templating import TemplateError, TemplateLimits, render_fields
limits = TemplateLimits.from_environ(__import__("os").environ)
context = build_context(invocation())
before = resource.getrusage(resource.RUSAGE_SELF)
wall = time.monotonic()
try:
    render_fields({"bash_command": sys.argv[1]}, ["bash_command"], context, limits=limits)
    said = "rendered"
except TemplateError as error:
    said = str(error)
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
wall = time.monotonic() - wall
print(json.dumps({"wall": wall, "cpu": cpu, "maxrss_kib": after.ru_maxrss, "said": said[:160]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--timeout-seconds", default="30", help="ZONDA_TEMPLATE_TIMEOUT_SECONDS for the loops"
    )
    options = parser.parse_args()
    print(f"load {os.getloadavg()}")
    env = {**os.environ, "PYTHONPATH": str(REPO), "ZONDA_TEMPLATE_TIMEOUT_SECONDS": options.timeout_seconds}
    baseline = None
    for name, template in reversed(TEMPLATES.items()):
        ran = subprocess.run(
            [sys.executable, "-c", CHILD, template], env=env, capture_output=True, text=True, timeout=600
        )
        if ran.returncode != 0:
            print(f"{name}: child failed: {ran.stderr[-500:]}")
            continue
        got = json.loads(ran.stdout.strip().splitlines()[-1])
        if baseline is None:
            baseline = got["maxrss_kib"]
        extra = (got["maxrss_kib"] - baseline) / 1024
        print(
            f"{name}: {got['wall']:.2f} s wall, {got['cpu']:.2f} s CPU, peak RSS "
            f"{got['maxrss_kib'] / 1024:.0f} MiB (+{extra:.0f} MiB over the baseline): {got['said']}"
        )
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
