"""Airflow's `BaseNotifier` (`airflow.sdk.bases.notifier`, Airflow 2's `airflow.notifications.basenotifier`).

A notifier is a callback object: `notifier(context)` renders its `template_fields` with the context
(in place, as Airflow's `Templater` does) and calls `notify(context)`; an error there is logged, not
raised, as in Airflow. Used as `on_*_callback=` (the manifest references the object in the DAG file,
which the task runner re-imports) or as a human-in-the-loop operator's `notifiers=`, called when the
request is made.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping, Sequence
from typing import Any


class BaseNotifier(abc.ABC):
    """Subclass it, set `template_fields`, implement `notify(context)`."""

    template_fields: Sequence[str] = ()
    template_ext: Sequence[str] = ()

    @property
    def log(self) -> logging.Logger:
        return logging.getLogger(f"airflow.task.notifier.{type(self).__name__}")

    @abc.abstractmethod
    def notify(self, context: Mapping[str, Any]) -> None:
        """Send the notification."""

    def render_template_fields(self, context: Mapping[str, Any], jinja_env: Any = None) -> None:
        """Render each of `template_fields` in place with the context (the task's Jinja environment when
        the context's task has one)."""
        from zonda.tries import templating  # templating imports Jinja: only when a notifier is called

        task = context.get("task")
        environment = jinja_env or (getattr(task, "__dict__", {}).get("_template_environment"))
        for name in self.template_fields:
            value = getattr(self, name)
            setattr(self, name, templating.render(value, context, field=name, environment=environment))

    def __call__(self, *args: Any) -> None:
        """Airflow's: one argument is the context; the five of an SLA-miss callback make one."""
        if len(args) == 1:
            context: Mapping[str, Any] = args[0]
        else:
            dag, task_list, blocking_task_list, slas, blocking_tis = args
            context = {
                "dag": dag,
                "task_list": task_list,
                "blocking_task_list": blocking_task_list,
                "slas": slas,
                "blocking_tis": blocking_tis,
            }
        self.render_template_fields(context)
        try:
            self.notify(context)
        except Exception as error:
            self.log.exception("Failed to send notification: %s", error)
