"""Airflow's `PythonOperator`, `BranchPythonOperator` and `ShortCircuitOperator`.

A DAG written in YAML cannot hold a function, so `python_callable` may also be an import path,
`"pkg.module:function"`, imported where the task runs, or (as `zonda dags render` writes for functions
defined in a DAG file, nested ones and lambdas) `"dagfile:<file>?dag_id=..&task_id=.."`: the runner
re-imports that DAG file from `$ZONDA_DAGS_FOLDER` and takes the function from the task.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from zonda.context import Context
from zonda.exceptions import AirflowException
from zonda.operators.base import BaseOperator, SkipMixin
from zonda.specs.imports import import_string
from zonda.tries import asset_events

#: Prefix of a callable reference into a DAG file (`zonda.authoring.manifests` writes them).
DAG_FILE_SCHEME = "dagfile:"


def resolve_python_callable(python_callable: Callable[..., Any] | str) -> Callable[..., Any]:
    """The callable itself, or the one an import path names; anything else is an `AirflowException`."""
    if isinstance(python_callable, str) and python_callable.startswith(DAG_FILE_SCHEME):
        from zonda.authoring.dag_files import load_task_callable  # imports the user's DAG file

        try:
            python_callable = load_task_callable(python_callable)
        except ImportError as error:
            raise AirflowException(f"Cannot load python_callable {python_callable!r}: {error}") from error
    elif isinstance(python_callable, str):
        try:
            python_callable = import_string(python_callable)
        except ImportError as error:
            raise AirflowException(f"Cannot import python_callable {python_callable!r}: {error}") from error
    if not callable(python_callable):
        raise AirflowException("`python_callable` param must be callable")
    return python_callable


def determine_kwargs(
    func: Callable[..., Any], args: Collection[Any], kwargs: Mapping[str, Any]
) -> Mapping[str, Any]:
    """The keyword arguments `func` asks for: all of `kwargs` if it has `**kwargs`, else those it names.

    Airflow's `determine_kwargs`: a function declaring `ti` and `ds` receives just those context
    variables. A positional argument may not share its name with a keyword one.
    """
    signature = inspect.signature(func)
    for name, parameter in itertools.islice(signature.parameters.items(), len(args)):
        if parameter.kind in (parameter.KEYWORD_ONLY, parameter.VAR_KEYWORD):
            continue
        if name in kwargs:
            raise ValueError(f"The key {name!r} in args is a part of kwargs and therefore reserved.")
    if any(parameter.kind == parameter.VAR_KEYWORD for parameter in signature.parameters.values()):
        return kwargs
    return {name: kwargs[name] for name in signature.parameters if name in kwargs}


def context_merge(context: Context, *args: Mapping[str, Any], **kwargs: Any) -> None:
    """Merge mappings into the context in place (Airflow's `context_merge`)."""
    for mapping in args:
        context.update(mapping)
    context.update(kwargs)


class PythonOperator(BaseOperator):
    """Call a Python function; its return value is the task's XCom.

    The function receives `op_args`, `op_kwargs`, and the context variables its signature names (all of
    them if it takes `**kwargs`), as in Airflow.

    :param python_callable: a callable, or an import path `"pkg.module:function"`.
    :param op_args: positional arguments. (templated)
    :param op_kwargs: keyword arguments. (templated)
    :param templates_dict: rendered, then given to the callable as the context variable
        `templates_dict`. (templated)
    :param templates_exts: Airflow's template file extensions; ignored.
    :param show_return_value_in_logs: log the return value (turn off for large values).
    :param multiple_outputs: each key of the returned dict is also an XCom of its own (set by `@task`,
        as Airflow's decorated operator; `xcom_pull(key=...)` then reads it).
    """

    template_fields: Sequence[str] = ("templates_dict", "op_args", "op_kwargs")

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any] | str,
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        templates_dict: dict[str, Any] | None = None,
        templates_exts: Sequence[str] | None = None,
        show_return_value_in_logs: bool = True,
        multiple_outputs: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.multiple_outputs = multiple_outputs
        self.python_callable = resolve_python_callable(python_callable)
        self.op_args: Collection[Any] = op_args or ()
        self.op_kwargs: Mapping[str, Any] = op_kwargs or {}
        self.templates_dict = templates_dict
        self.show_return_value_in_logs = show_return_value_in_logs

    def execute(self, context: Context) -> Any:
        context_merge(context, self.op_kwargs, templates_dict=self.templates_dict)
        self.op_kwargs = self.determine_kwargs(context)
        return_value = self.execute_callable()
        if inspect.isgenerator(return_value):  # a task that yields Metadata(asset, extra)
            return_value = asset_events.drain_metadata(return_value, context.get("outlet_events"))
        if self.show_return_value_in_logs:
            self.log.info("Done. Returned value was: %s", return_value)
        else:
            self.log.info("Done. Returned value not shown")
        return return_value

    def determine_kwargs(self, context: Mapping[str, Any]) -> Mapping[str, Any]:
        return determine_kwargs(self.python_callable, self.op_args, context)

    def execute_callable(self) -> Any:
        return self.python_callable(*self.op_args, **self.op_kwargs)


class BranchPythonOperator(PythonOperator, SkipMixin):
    """Follow the direct downstream task(s) whose id(s) the callable returns; skip the others.

    The callable returns a task id, a list of task ids, or None (skip every direct downstream task).
    """

    def execute(self, context: Context) -> Any:
        branch = super().execute(context)
        self.skip_all_except(context.get("ti"), branch)
        return branch


class ShortCircuitOperator(PythonOperator, SkipMixin):
    """Go on downstream only if the callable returns a truthy value.

    :param ignore_downstream_trigger_rules: on a falsy value, skip every downstream task whatever its
        trigger rule (default); if False, skip only the direct downstream tasks and let the trigger
        rules of the tasks after them decide.
    """

    def __init__(self, *, ignore_downstream_trigger_rules: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ignore_downstream_trigger_rules = ignore_downstream_trigger_rules

    def execute(self, context: Context) -> Any:
        condition = super().execute(context)
        self.log.info("Condition result is %s", condition)
        if condition:
            self.log.info("Proceeding with downstream tasks...")
            return condition
        self.log.info("Skipping downstream tasks")
        self.skip_downstream(ignore_downstream_trigger_rules=self.ignore_downstream_trigger_rules)
        return condition
