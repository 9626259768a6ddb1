"""What the CLI's command modules share: the default namespace and options, the state dir, the API."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import click

from controller.kube import Kube, KubeError, timeouts
from controller.manager.settings import DEFAULTS

#: The local executor's default state dir (`zonda controller --state-dir`, `$ZONDA_STATE_DIR`).
STATE_DIR: Path = DEFAULTS.state_dir


def namespace_or_default(namespace: str | None) -> str:
    return namespace or os.environ.get("POD_NAMESPACE") or "default"


def kubeconfig_option(command: Any) -> Any:
    """`--kubeconfig` (default `$KUBECONFIG`, else ~/.kube/config or in-cluster credentials)."""
    return click.option("--kubeconfig", envvar="KUBECONFIG", default=None)(command)


def namespace_options(command: Any) -> Any:
    """`--namespace/-n` then `--kubeconfig`, as every command that reads one namespace takes them."""
    return click.option("--namespace", "-n", default=None)(kubeconfig_option(command))


async def connect(kubeconfig: str | None) -> Kube:
    return await Kube.connect(kubeconfig, component="zonda-cli")


def run_kube(coro: Any) -> Any:
    """Run a coroutine that talks to the API; an API error, or a call the API did not answer in time
    (`controller.kube.timeouts`), becomes a one-line CLI error."""
    try:
        return asyncio.run(coro)
    except KubeError as exc:
        raise click.ClickException(str(exc.reason)) from exc
    except TimeoutError as exc:
        raise click.ClickException(
            f"the Kubernetes API did not answer in time (${timeouts.TOTAL_ENV}, ${timeouts.CONNECT_ENV})"
        ) from exc


def parse_conf(text: str | None) -> dict[str, Any]:
    """`--conf`: a JSON object (Airflow's dag_run.conf), or a usage error that says what is wrong."""
    if not text:
        return {}
    try:
        conf = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--conf") from exc
    if not isinstance(conf, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--conf")
    return conf
