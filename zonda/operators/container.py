"""`ContainerOperator`: a Python DAG's way to write a task with no operator, whose container runs as-is.

In a DAG manifest such a task has no `operator`, only `container` (Kubernetes container fields, in the
API's camelCase). The class exists for authoring: `zonda.authoring.manifests` compiles its arguments
into `container`, and the controller runs the container itself, never the task runner. Airflow's
nearest equivalent is `KubernetesPodOperator`, which Zonda also has.
"""

from __future__ import annotations

from typing import Any, NoReturn

from zonda.context import Context
from zonda.exceptions import AirflowException
from zonda.operators.base import BaseOperator


class ContainerOperator(BaseOperator):
    """Run `image` with `command`/`args` as the task; any other Kubernetes container field in `container`.

    :param image: the container image.
    :param command: the entrypoint (Kubernetes `command`).
    :param args: arguments (Kubernetes `args`).
    :param env: environment variables, a name -> value mapping.
    :param container: further container fields (`resources`, `volumeMounts`...), camelCase.
    """

    def __init__(
        self,
        *,
        image: str,
        command: list[str] | None = None,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        container: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        fields: dict[str, Any] = {**(container or {}), "image": image}
        if command is not None:
            fields["command"] = list(command)
        if args is not None:
            fields["args"] = list(args)
        if env:
            fields["env"] = [{"name": name, "value": str(value)} for name, value in env.items()]
        self.container = fields

    def execute(self, context: Context) -> NoReturn:
        raise AirflowException("a ContainerOperator task runs its container, not the task runner")
