"""A task pod's invocation reaches its runner whole: past 128 KiB (a 1 MB conf) and with `$` in it.

Two things stood between the pod spec and the runner. Linux refuses to exec a process with one
environment string past 128 KiB (MAX_ARG_STRLEN), so a 1 MB conf in the one `ZONDA_TASK_INVOCATION`
variable stopped the container's entrypoint itself ("Argument list too long"), on the Kubernetes
executor only (the local executor hands such a runner a file). And the kubelet expands `$(NAME)` and
turns `$$` into `$` in every env value, so `echo $$` in a bash_command reached bash as `echo $`.

Real: the kernel's exec limit (the runner is exec'd with the environment the container gets) and
the runner. Modelled: the kubelet's expansion, `kubelet_expand` below, a line-by-line port of
Kubernetes' `third_party/forked/golang/expansion/expand.go` (v1.36.3) with its mapping function.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest

from controller.executors import pods
from tests.paths import REPO_ROOT
from tests.unit.controller.executors.test_pod_snapshot import DEFAULTS, OWNER, invocation, task
from zonda.resources.invocations import (
    INVOCATION_ENV,
    INVOCATION_PARTS_ENV,
    MAX_ENV_STRING,
    invocation_env,
    pop_invocation_env,
)

BLOB = "x" * 1_000_000
#: `$$` is bash's PID, `$(HOSTNAME)` a variable the kubelet would substitute, `$` alone at the end.
COMMAND = "echo \"pid $$ blob {{ dag_run.conf.blob | length }}\" '{{ dag_run.conf.dollars }}'"


def kubelet_expand(value: str, defined: Mapping[str, str]) -> str:
    """What the kubelet makes of an env value (`expansion.Expand` with `MappingFuncFor(defined)`)."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(value):
        if value[cursor] == "$" and cursor + 1 < len(value):
            out.append(value[checkpoint:cursor])
            rest = value[cursor + 1 :]
            if rest[0] == "$":
                read, is_var, advance = "$", False, 1
            elif rest[0] == "(":
                closer = rest.find(")", 1)
                if closer >= 0:
                    read, is_var, advance = rest[1:closer], True, closer + 1
                else:
                    read, is_var, advance = "$(", False, 1
            else:
                read, is_var, advance = "$" + rest[0], False, 1
            out.append((defined.get(read, f"$({read})")) if is_var else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + value[checkpoint:]


def container_environment(pod: Mapping[str, Any]) -> dict[str, str]:
    """The environment the kubelet gives the pod's first container (values in order, expanded)."""
    env: dict[str, str] = {}
    for entry in pod["spec"]["containers"][0].get("env", []):
        env[entry["name"]] = kubelet_expand(entry.get("value", ""), env)
    return env


def test_the_model_of_the_kubelet_expands_as_kubernetes_documents() -> None:
    # The cases of Kubernetes' own expand_test.go that matter here.
    defined = {"VAR_A": "A", "VAR_B": "B"}
    assert kubelet_expand("$(VAR_A)", defined) == "A"
    assert kubelet_expand("___$(VAR_B)___", defined) == "___B___"
    assert kubelet_expand("$$(VAR_A)", defined) == "$(VAR_A)"
    assert kubelet_expand("$$$$", defined) == "$$"
    assert kubelet_expand("echo $$", defined) == "echo $"
    assert kubelet_expand("$(VAR_DOES_NOT_EXIST)", defined) == "$(VAR_DOES_NOT_EXIST)"
    assert kubelet_expand("$(VAR_A", defined) == "$(VAR_A"
    assert kubelet_expand("$", defined) == "$"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("{}", id="small: one variable"),
        pytest.param("a" * (MAX_ENV_STRING - 1), id="one byte under the limit: one variable"),
        pytest.param("a" * MAX_ENV_STRING, id="at the limit: parts"),
        pytest.param("é" * 300_000, id="two-byte characters across part boundaries"),
        pytest.param("a" + "😀" * 200_000, id="four-byte characters, cut off their boundary by one"),
    ],
)
def test_an_invocation_goes_in_parts_each_under_the_kernel_limit_and_comes_back_whole(text: str) -> None:
    env = invocation_env(text)
    assert all(len(value.encode()) < MAX_ENV_STRING for value in env.values())
    if len(text.encode()) < MAX_ENV_STRING:
        assert env == {INVOCATION_ENV: text}
    else:
        assert INVOCATION_ENV not in env and int(env[INVOCATION_PARTS_ENV]) == len(env) - 1 > 1
    taken = {"OTHER": "kept", **env}
    assert pop_invocation_env(taken) == text
    assert taken == {"OTHER": "kept"}, "the invocation is taken out of the task's environment"


def test_a_missing_part_is_named() -> None:
    env = invocation_env("a" * 3 * MAX_ENV_STRING)
    del env[f"{INVOCATION_ENV}_1"]
    with pytest.raises(ValueError, match=r"says 4 parts; part\(s\) \[1\] are not set"):
        pop_invocation_env(env)


def bash_pod(conf: dict[str, Any]) -> dict[str, Any]:
    resolved = task("say", "BashOperator", {"bash_command": COMMAND})
    return pods.build_task_pod(
        invocation=msgspec.structs.replace(
            invocation("say", "BashOperator", {"bash_command": COMMAND}), conf=conf
        ),
        task=resolved,
        namespace="data",
        name="etl-say",
        owner=OWNER,
        defaults=DEFAULTS,
    )


def exec_runner(env: Mapping[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`python -m controller.runner` exec'd with the container's environment (and this interpreter's
    path), as the container's entrypoint is."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ZONDA_")}
    return subprocess.run(
        [sys.executable, "-m", "controller.runner"],
        env={**base, "PYTHONPATH": str(REPO_ROOT), **env, "ZONDA_RESULT_PATH": str(tmp_path / "result")},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_task_pod_with_a_1_mb_conf_and_dollars_runs_its_bash_command_as_written(tmp_path: Path) -> None:
    conf = {"blob": BLOB, "dollars": "$(HOSTNAME) costs $$5 and $"}
    pod = bash_pod(conf)
    assert len(json.dumps(pod).encode()) < 1_400_000, "the pod fits the apiserver's 1.5 MiB"
    env = container_environment(pod)
    assert INVOCATION_PARTS_ENV in env and INVOCATION_ENV not in env
    assert all(len(f"{k}={v}".encode()) < 128 * 1024 for k, v in env.items())
    ran = exec_runner({**env, "HOSTNAME": "the-pod"}, tmp_path)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    said = [line for line in ran.stdout.splitlines() if line.startswith("pid ")]
    pid, words = said[-1].removeprefix("pid ").split(" blob ")
    assert pid.isdigit(), said  # bash's $$, not "$"
    assert words == "1000000 $(HOSTNAME) costs $$5 and $", said  # the conf as data, not expanded


def test_the_same_conf_in_one_variable_could_not_even_be_execed(tmp_path: Path) -> None:
    """The positive control: the pod as built before, one unescaped variable."""
    pod = bash_pod({"blob": BLOB, "dollars": ""})
    text = pop_invocation_env(container_environment(pod))
    assert text is not None and len(text.encode()) > 1_000_000
    with pytest.raises(OSError) as refused:
        exec_runner({INVOCATION_ENV: text}, tmp_path)
    assert refused.value.errno == errno.E2BIG  # "Argument list too long"


def test_unescaped_dollars_reach_the_runner_changed() -> None:
    """The positive control of the escaping: the kubelet changes an invocation written as is."""
    written = invocation("say", "BashOperator", {"bash_command": COMMAND}).encode().decode()
    assert "pid $$ blob" in written
    assert "pid $ blob" in kubelet_expand(written, {})
    assert pods.escape_env_value(written) != written
    assert kubelet_expand(pods.escape_env_value(written), {"HOSTNAME": "x"}) == written
