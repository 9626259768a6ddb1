"""TaskFlow: `@task` and its variants turn a Python function into a task; calling it makes the task.

Calling a decorated function inside a DAG creates a task whose `python_callable` is the function and
returns an `XComArg` for its return value. Passing an `XComArg` to another task (TaskFlow call or any
operator argument) makes that task depend on it and gives it the value at run time.

- `@task` -> `PythonOperator`; `@task.branch` -> `BranchPythonOperator`;
  `@task.short_circuit` -> `ShortCircuitOperator`; `@task.sensor` -> `PythonSensor` (the function
  returns a bool or a `PokeReturnValue`).
- `@task.kubernetes(image=...)`: the function runs in a Pod of that image (which must hold the DAGs
  folder and Zonda, e.g. a user image `FROM zonda`); it is a `PythonOperator` task whose container
  image is the one given, so it runs under Zonda's task runner like any other task.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from zonda.authoring import contexts
from zonda.authoring.relations import DependencyMixin, Node
from zonda.operators.base import BaseOperator
from zonda.operators.bash import BashDecoratedOperator
from zonda.operators.python import (
    BranchExternalPythonOperator,
    BranchPythonOperator,
    BranchPythonVirtualenvOperator,
    ExternalPythonOperator,
    PythonOperator,
    PythonVirtualenvOperator,
    ShortCircuitOperator,
)
from zonda.resources import xcom_refs
from zonda.sensors.python import PythonSensor

#: Arguments of `@task.kubernetes` that shape the task's container (Airflow's KubernetesPodOperator).
_CONTAINER_ARGUMENTS = {
    "image": "image",
    "image_pull_policy": "imagePullPolicy",
    "container_resources": "resources",
    "env_vars": "env",
}


#: No `fillvalue` given to `XComArg.zip` (None is a fill value).
NOTSET: Any = object()


class XComArg(DependencyMixin):
    """A task's return value (or one key of it), used as an argument of another task."""

    def __init__(self, operator: BaseOperator, key: str = xcom_refs.RETURN_KEY) -> None:
        self.operator = operator
        self.key = key

    def __repr__(self) -> str:
        return f"XComArg({self.operator.task_id!r}, key={self.key!r})"

    def __getitem__(self, key: str) -> XComArg:
        return XComArg(self.operator, key)

    def roots(self) -> list[Node]:
        return [self.operator]

    def leaves(self) -> list[Node]:
        return [self.operator]

    def to_reference(self) -> dict[str, Any]:
        return xcom_refs.reference(self.operator.task_id or "", self.key)

    def map(self, function: Callable[[Any], Any]) -> XComArg:
        """Airflow's `XComArg.map`: each item through `function`, in the mapped instance's own try."""
        from zonda.authoring.mapped import MapXComArg

        return MapXComArg(self, function)

    def zip(self, *others: Any, fillvalue: Any = NOTSET) -> XComArg:
        """Airflow's `XComArg.zip`: items paired up, as long as the shortest source (the longest with a
        `fillvalue`)."""
        from zonda.authoring.mapped import ZipXComArg

        return ZipXComArg([self, *others], fillvalue)

    def as_setup(self) -> XComArg:
        """The task as a setup (Airflow's `XComArg.as_setup`)."""
        self.operator.as_setup()
        return self

    def as_teardown(self, *, setups: Any = None, on_failure_fail_dagrun: bool | None = None) -> XComArg:
        """The task as a teardown of `setups` (Airflow's `XComArg.as_teardown`)."""
        self.operator.as_teardown(setups=setups, on_failure_fail_dagrun=on_failure_fail_dagrun)
        return self

    def __enter__(self) -> Any:
        """`with setup_task() >> teardown_task():` wires the block's tasks between them (Airflow 2.7+)."""
        return self.operator.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.operator.__exit__(*exc)


class _DecoratedTask:
    """A function decorated with `@task`; each call inside a DAG adds a task and returns its XComArg."""

    def __init__(
        self, function: Callable[..., Any], operator_class: type[BaseOperator], options: dict[str, Any]
    ) -> None:
        self.function = function
        self.operator_class = operator_class
        self.options = options
        #: `@setup` / `@teardown`: each call's task is a setup, or a teardown (failing the run or not).
        self.setup = False
        self.teardown: bool | None = None  # the teardown's on_failure_fail_dagrun when one
        functools.update_wrapper(self, function)

    def partial(self, **kwargs: Any) -> Any:
        """Airflow's dynamic task mapping: the function's arguments every instance shares."""
        from zonda.authoring.mapped import PartialTask

        return PartialTask(self, kwargs)

    def expand(self, **mapped: Any) -> XComArg:
        """One task instance per item (or combination of items) of the sources, Airflow's `.expand`."""
        return self.partial().expand(**mapped)  # type: ignore[no-any-return]

    def expand_kwargs(self, source: Any) -> XComArg:
        """One task instance per dict of arguments, Airflow's `.expand_kwargs`."""
        return self.partial().expand_kwargs(source)  # type: ignore[no-any-return]

    def override(self, **options: Any) -> _DecoratedTask:
        """The same task with other operator arguments (`task_id`, `retries`...), Airflow's `.override`."""
        return self._with(options=options)

    def _with(
        self, *, options: dict[str, Any] | None = None, setup: bool = False, teardown: bool | None = None
    ) -> _DecoratedTask:
        copied = _DecoratedTask(self.function, self.operator_class, {**self.options, **(options or {})})
        copied.setup = self.setup or setup
        copied.teardown = self.teardown if teardown is None else teardown
        return copied

    def __call__(self, *args: Any, **kwargs: Any) -> XComArg:
        options = dict(self.options)
        multiple_outputs = options.pop("multiple_outputs", None)
        if multiple_outputs is None:
            multiple_outputs = _returns_a_dict(self.function)
        container = {
            field: options.pop(name) for name, field in _CONTAINER_ARGUMENTS.items() if name in options
        }
        for unsupported in ("namespace", "do_xcom_push_sidecar", "in_cluster", "kubernetes_conn_id"):
            options.pop(unsupported, None)
        task_id = options.pop("task_id", None) or self.function.__name__
        dag = options.get("dag") or contexts.current_dag()
        if dag is not None:
            group = options.get("task_group") or contexts.current_group(dag)
            full_id = group.child_id(task_id) if group is not None else task_id
            task_id += dag.unique_task_id(full_id)[len(full_id) :]  # `__1` on a second call
        if "env" in container and isinstance(container["env"], dict):
            container["env"] = [{"name": k, "value": str(v)} for k, v in container["env"].items()]
        if args:
            options["op_args"] = list(args)
        if kwargs:
            options["op_kwargs"] = kwargs
        if multiple_outputs and issubclass(self.operator_class, PythonOperator | BashDecoratedOperator):
            # An argument, so the task runner pushes each key too (only when on: manifests stay short).
            options["multiple_outputs"] = True
        operator = self.operator_class(task_id=task_id, python_callable=self.function, **options)
        operator.multiple_outputs = bool(multiple_outputs)
        operator.container = container
        if self.setup:
            operator.as_setup()
        if self.teardown is not None:
            operator.as_teardown(on_failure_fail_dagrun=self.teardown)
        return XComArg(operator)


def _returns_a_dict(function: Callable[..., Any]) -> bool:
    """Airflow infers `multiple_outputs` from a `-> dict[...]` return annotation."""
    annotation = inspect.signature(function).return_annotation
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return str(text).split("[")[0].strip().lower() in {"dict", "typing.dict"}


def _decorator(operator_class: type[BaseOperator]) -> Callable[..., Any]:
    def decorate(python_callable: Callable[..., Any] | None = None, **options: Any) -> Any:
        if python_callable is not None:
            return _DecoratedTask(python_callable, operator_class, options)
        return lambda function: _DecoratedTask(function, operator_class, options)

    return decorate


class _TaskDecoratorCollection:
    """`@task`, `@task(...)`, `@task.branch`, `@task.short_circuit`, `@task.sensor`, `@task.kubernetes`,
    `@task.bash`, `@task.virtualenv`, `@task.external_python`, `@task.branch_virtualenv`,
    `@task.branch_external_python`."""

    python = staticmethod(_decorator(PythonOperator))
    branch = staticmethod(_decorator(BranchPythonOperator))
    short_circuit = staticmethod(_decorator(ShortCircuitOperator))
    sensor = staticmethod(_decorator(PythonSensor))
    kubernetes = staticmethod(_decorator(PythonOperator))
    bash = staticmethod(_decorator(BashDecoratedOperator))
    virtualenv = staticmethod(_decorator(PythonVirtualenvOperator))
    external_python = staticmethod(_decorator(ExternalPythonOperator))
    branch_virtualenv = staticmethod(_decorator(BranchPythonVirtualenvOperator))
    branch_external_python = staticmethod(_decorator(BranchExternalPythonOperator))

    def __call__(self, python_callable: Callable[..., Any] | None = None, **options: Any) -> Any:
        return self.python(python_callable, **options)


task = _TaskDecoratorCollection()


def _decorated(function: Callable[..., Any] | _DecoratedTask) -> _DecoratedTask:
    return function if isinstance(function, _DecoratedTask) else task(function)


def setup(function: Callable[..., Any] | _DecoratedTask) -> _DecoratedTask:
    """Airflow's `@setup`: every call of the (`@task`) function adds a setup task."""
    return _decorated(function)._with(setup=True)


def teardown(
    function: Callable[..., Any] | _DecoratedTask | None = None, *, on_failure_fail_dagrun: bool = False
) -> Any:
    """Airflow's `@teardown` / `@teardown(on_failure_fail_dagrun=True)`: every call adds a teardown task."""

    def mark(target: Callable[..., Any] | _DecoratedTask) -> _DecoratedTask:
        return _decorated(target)._with(teardown=on_failure_fail_dagrun)

    return mark(function) if function is not None else mark
