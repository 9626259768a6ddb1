"""Airflow's `PythonSensor`: waits until a Python callable returns a truthy value."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from zonda.context import Context
from zonda.operators.python import context_merge, determine_kwargs, resolve_python_callable
from zonda.sensors.base import BaseSensorOperator, PokeReturnValue


class PythonSensor(BaseSensorOperator):
    """Poke by calling `python_callable`, which gets arguments as `PythonOperator`'s does.

    :param python_callable: a callable, or an import path `"pkg.module:function"`; it returns a bool,
        or a `PokeReturnValue` to give an XCom value.
    :param op_args: positional arguments. (templated)
    :param op_kwargs: keyword arguments. (templated)
    :param templates_dict: rendered, then given as the context variable `templates_dict`. (templated)
    """

    template_fields: Sequence[str] = ("templates_dict", "op_args", "op_kwargs")

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any] | str,
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        templates_dict: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.python_callable = resolve_python_callable(python_callable)
        self.op_args: Collection[Any] = op_args or ()
        self.op_kwargs: Mapping[str, Any] = op_kwargs or {}
        self.templates_dict = templates_dict

    def poke(self, context: Context) -> PokeReturnValue:
        context_merge(context, self.op_kwargs, templates_dict=self.templates_dict)
        self.op_kwargs = determine_kwargs(self.python_callable, self.op_args, context)
        self.log.info("Poking callable: %s", self.python_callable)
        return_value = self.python_callable(*self.op_args, **self.op_kwargs)
        if isinstance(return_value, PokeReturnValue):
            return return_value
        return PokeReturnValue(bool(return_value))
