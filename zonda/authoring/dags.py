"""Airflow 2.x's `DAG` object and `@dag` decorator, collecting tasks for `zonda.authoring.manifests`.

The DAG records what its file said; it schedules nothing. Arguments Zonda cannot honour are accepted
(so an Airflow file still imports) and listed in `unsupported`, which `zonda dags render --report`
prints; an argument Airflow does not have is a TypeError, as in Airflow.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, tzinfo
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pendulum

from zonda.authoring import contexts
from zonda.authoring.params import NOTSET

if TYPE_CHECKING:
    from zonda.authoring.task_groups import TaskGroup
    from zonda.operators.base import BaseOperator

#: Airflow 2's default schedule (`schedule` unset): once a day. Airflow 3's is None (manual runs only).
DEFAULT_SCHEDULE = timedelta(days=1)

#: Airflow `DAG` arguments Zonda accepts but does not act on, with what to do instead.
UNSUPPORTED_DAG_ARGUMENTS = {
    "access_control": "use Kubernetes RBAC on DAG and DagRun resources",
    "default_view": "UI setting; ignored",
    "orientation": "UI setting; ignored",
    "template_undefined": "Zonda's templates always use StrictUndefined",
    "jinja_environment_kwargs": "the Jinja environment is fixed",
    "owner_links": "UI setting; ignored",
    "full_filepath": "ignored",
    "fail_stop": "not implemented",
}


class DAG:
    """A DAG being written: `with DAG("id", ...) as dag:`, `DAG(...)` passed as `dag=`, or `@dag`."""

    def __init__(
        self,
        dag_id: str,
        description: str | None = None,
        schedule_interval: Any = NOTSET,
        *,
        schedule: Any = NOTSET,
        timetable: Any = None,
        start_date: datetime | None = None,
        end_date: datetime | None = None,
        default_args: dict[str, Any] | None = None,
        concurrency: int | None = None,
        max_active_tasks: int = 16,
        max_active_runs: int = 16,
        dagrun_timeout: timedelta | None = None,
        catchup: Any = NOTSET,
        doc_md: str | None = None,
        params: dict[str, Any] | None = None,
        tags: Iterable[str] | None = None,
        is_paused_upon_creation: bool | None = None,
        user_defined_macros: dict[str, Any] | None = None,
        user_defined_filters: dict[str, Any] | None = None,
        render_template_as_native_obj: bool = False,
        on_success_callback: Any = None,
        on_failure_callback: Any = None,
        sla_miss_callback: Any = None,
        auto_register: bool = True,
        dag_display_name: str | None = None,
        template_searchpath: str | Iterable[str] | None = None,
        **others: Any,
    ) -> None:
        unknown = sorted(set(others) - set(UNSUPPORTED_DAG_ARGUMENTS))
        if unknown:
            raise TypeError(f"DAG.__init__() got unexpected keyword argument(s) {', '.join(unknown)}")
        #: "3" or "2" when read from an Airflow file (`zonda.authoring.compat.file_dialect`), else None.
        self.airflow_version = contexts.airflow_version()
        airflow3 = self.airflow_version == "3"
        if airflow3 and schedule_interval is not NOTSET:
            raise TypeError(
                "DAG.__init__() got an unexpected keyword argument 'schedule_interval' (removed in Airflow "
                "3: use schedule=; this file is read as Airflow 3, see docs/authoring.md)"
            )
        if schedule is not NOTSET and schedule_interval is not NOTSET:
            raise ValueError("Do not use both schedule and schedule_interval")
        self.dag_id = dag_id
        self.description = description
        given = schedule if schedule is not NOTSET else schedule_interval
        if timetable is not None and given is not NOTSET:
            raise ValueError("set either a schedule or a timetable, not both")
        default = None if airflow3 else DEFAULT_SCHEDULE
        self.schedule_interval: Any = default if given is NOTSET and timetable is None else given
        if self.schedule_interval is NOTSET:
            self.schedule_interval = None
        if _is_timetable(self.schedule_interval):  # Airflow 2.4+: `schedule=` takes a timetable too
            timetable, self.schedule_interval = self.schedule_interval, None
        self.timetable = timetable
        self.dag_display_name = dag_display_name
        self.default_args: dict[str, Any] = dict(default_args or {})
        self.start_date = start_date if start_date is not None else self.default_args.get("start_date")
        self.end_date = end_date if end_date is not None else self.default_args.get("end_date")
        self.max_active_tasks = concurrency if concurrency is not None else max_active_tasks
        self.max_active_runs = max_active_runs
        self.dagrun_timeout = dagrun_timeout
        #: Airflow's `catchup_by_default`: True in Airflow 2, False in Airflow 3.
        self.catchup = (not airflow3) if catchup is NOTSET else catchup
        self.doc_md = doc_md
        self.params: dict[str, Any] = dict(params or {})
        self.tags = list(tags or [])
        self.is_paused_upon_creation = is_paused_upon_creation
        #: Written to the manifest as import paths (the task runner imports them).
        self.user_defined_macros: dict[str, Any] = dict(user_defined_macros or {})
        self.user_defined_filters: dict[str, Any] = dict(user_defined_filters or {})
        self.render_template_as_native_obj = render_template_as_native_obj
        #: Folders template files are also looked for in, after the DAG file's (Airflow's; read when the
        #: DAG is rendered: `zonda.authoring.template_files`).
        self.template_searchpath: list[str] = (
            [template_searchpath] if isinstance(template_searchpath, str) else list(template_searchpath or ())
        )
        #: Airflow's DAG callbacks (a callable or a list), written to the manifest as references.
        self.on_success_callback = on_success_callback
        self.on_failure_callback = on_failure_callback
        self.sla_miss_callback = sla_miss_callback
        #: Loaded from its file when used as a context manager, even if not bound to a global name.
        self.auto_register = auto_register
        self.unsupported = {name: UNSUPPORTED_DAG_ARGUMENTS[name] for name in others if others[name]}
        #: What rendering it found worth saying and not fatal (a template file not found), as sentences.
        self.warnings: list[str] = []
        self.task_dict: dict[str, BaseOperator] = {}
        self.task_groups: list[TaskGroup] = []
        self.fileloc = _caller_file()

    def __repr__(self) -> str:
        return f"<DAG: {self.dag_id}>"

    def __enter__(self) -> DAG:
        contexts.push_dag(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        contexts.pop_dag(self)

    @property
    def timezone(self) -> tzinfo:
        """The DAG's timezone: `start_date`'s, as in Airflow (UTC when naive or unset)."""
        zone = self.start_date.tzinfo if self.start_date is not None else None
        return zone if zone is not None else pendulum.UTC

    @property
    def tasks(self) -> list[BaseOperator]:
        return list(self.task_dict.values())

    @property
    def task_ids(self) -> list[str]:
        return list(self.task_dict)

    def get_task(self, task_id: str) -> BaseOperator:
        try:
            return self.task_dict[task_id]
        except KeyError:
            raise KeyError(f"Task {task_id} not found in DAG {self.dag_id}") from None

    def has_task(self, task_id: str) -> bool:
        return task_id in self.task_dict

    def add_task(self, task: BaseOperator) -> None:
        task_id = task.task_id or ""
        if task_id in self.task_dict and self.task_dict[task_id] is not task:
            raise DuplicateTaskIdFound(f"Task id '{task_id}' has already been added to the DAG {self.dag_id}")
        self.task_dict[task_id] = task

    def add_tasks(self, tasks: Iterable[BaseOperator]) -> None:
        for task in tasks:
            self.add_task(task)

    def unique_task_id(self, task_id: str) -> str:
        """`task_id`, or `task_id__N` if taken (TaskFlow calls of one function, as Airflow names them)."""
        if task_id not in self.task_dict:
            return task_id
        number = 1
        while f"{task_id}__{number}" in self.task_dict:
            number += 1
        return f"{task_id}__{number}"

    def test(self, **kwargs: Any) -> Any:
        """Run one DAG run in this process, as `zonda dags test` does; print and return the states.

        It runs through the controller's own code (`decide()` and the task runner), which ships in the
        same distribution and registers it as the `zonda.dag_test` entry point: `zonda` never names
        `controller` (the layering contract), and only this convenience needs it.
        """
        found = importlib.metadata.entry_points(group="zonda.dag_test", name="runs")
        if not found:
            raise RuntimeError(
                "dag.test() needs the zonda distribution installed (entry point zonda.dag_test)"
            )
        runs = next(iter(found)).load()
        outcome = runs.run_dag(self, **kwargs)
        print(runs.format_states(outcome))
        return outcome


class DuplicateTaskIdFound(ValueError):
    """Two tasks of one DAG with the same id (Airflow's `DuplicateTaskIdFound`)."""


def dag(*dag_args: Any, **dag_kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., DAG]]:
    """Airflow's `@dag`: the decorated function builds the DAG's tasks; calling it returns the DAG.

    The dag id defaults to the function's name, `doc_md` to its docstring, and its parameters (with
    their defaults) become DAG params; inside, each is the template ``{{ params.<name> }}``.
    """

    def decorate(function: Callable[..., Any]) -> Callable[..., DAG]:
        @functools.wraps(function)
        def factory(*args: Any, **kwargs: Any) -> DAG:
            signature = inspect.signature(function)
            bound = signature.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            options = dict(dag_kwargs)
            options.setdefault("dag_id", dag_args[0] if dag_args else function.__name__)
            if function.__doc__ and "doc_md" not in options:
                options["doc_md"] = inspect.cleandoc(function.__doc__)
            params = dict(options.pop("params", None) or {})
            for name, value in bound.arguments.items():
                params.setdefault(name, value)
            with DAG(params=params, **options) as built:
                built.fileloc = inspect.getsourcefile(function) or built.fileloc
                function(**{name: f"{{{{ params.{name} }}}}" for name in bound.arguments})
            return built

        return factory

    return decorate


def _caller_file() -> str:
    """The file that created the DAG (Airflow's `fileloc`): the first frame outside zonda.authoring."""
    frame = sys._getframe(1)
    here = os.path.dirname(__file__)
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == here:
        frame = frame.f_back  # type: ignore[assignment]
    return frame.f_code.co_filename if frame is not None else ""


def _is_timetable(value: Any) -> bool:
    from zonda.timetables.base import Timetable

    return isinstance(value, Timetable)
