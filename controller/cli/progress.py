"""The progress display of the CLI's long commands: one rich bar on stderr (stdout stays the
command's result, for pipes), with the count done of the total and the time taken.

Used by `zonda backfill` (runs finished), `zonda trigger --wait` (task instances finished), `zonda
dags apply` (DAGs applied) and `zonda dags delete` (runs deleted). On a terminal the bar redraws in
place; elsewhere (a pipe, CI's log) rich prints its last state once, when the command is done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from controller.cli.common import connect, run_kube


@dataclass(frozen=True)
class Step:
    """How far a followed object is, read from its status."""

    finished: int
    total: int | None  # None: not known yet (the bar pulses)
    description: str
    done: bool


def progress_bar() -> Progress:
    """A bar to use as a context manager; `add_task(description, total=...)` starts one."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=Console(stderr=True), transient=False)


def follow(
    resource: str,
    namespace: str,
    name: str,
    kubeconfig: str | None,
    measure: Callable[[Mapping[str, Any]], Step],
    *,
    kind: str,
    interval: float = 1.0,
) -> dict[str, Any]:
    """Read the object every `interval`, redrawing the bar, until `measure` says it is done; its last
    body. Ctrl-C raises KeyboardInterrupt to the caller, which says what goes on without it."""

    async def watch() -> dict[str, Any]:
        async with await connect(kubeconfig) as kube:
            with progress_bar() as progress:
                bar = progress.add_task(name, total=None)
                while True:
                    body = await kube.get_custom(resource, namespace, name)
                    if body is None:
                        raise click.ClickException(f"{kind} {name} was deleted")
                    step = measure(body)
                    progress.update(
                        bar, total=step.total, completed=step.finished, description=step.description
                    )
                    if step.done:
                        return body
                    await asyncio.sleep(interval)

    result: dict[str, Any] = run_kube(watch())
    return result
