"""The progress display of the CLI's long commands: one rich bar on stderr (stdout stays the
command's result, for pipes), with the count done of the total and the time taken.

Used by `zonda backfill` (runs finished), `zonda trigger --wait` (task instances finished), `zonda
dags apply` (DAGs applied) and `zonda dags delete` (runs deleted). On a terminal the bar redraws in
place; elsewhere (a pipe, CI's log) rich prints its last state once, when the command is done.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def progress_bar() -> Progress:
    """A bar to use as a context manager; `add_task(description, total=...)` starts one."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=Console(stderr=True), transient=False)
