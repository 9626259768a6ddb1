"""Airflow's task exceptions, with Airflow's names, so operators and sensors ported from Airflow work.

The task runner maps them to a `TaskOutcome`: `AirflowSkipException` skips, `AirflowFailException` and
`AirflowSensorTimeout` fail without retry, `TaskDeferred` defers, `AirflowRescheduleException`
reschedules a sensor, and any other exception fails the try (retried while tries remain).
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta
from typing import Any

#: `next_method` of a deferred task whose trigger failed or timed out: resuming it raises (Airflow's).
TRIGGER_FAIL_REPR = "__fail__"


class TriggerFailureReason(enum.StrEnum):
    """The `error` the scheduler puts in `next_kwargs` when it resumes a task with `__fail__`."""

    TRIGGER_TIMEOUT = "Trigger timeout"
    TRIGGER_FAILURE = "Trigger failure"


class AirflowException(Exception):
    """Base class of Airflow's errors: raising it fails the try, which is retried while tries remain."""


class AirflowSkipException(AirflowException):
    """The task should be skipped (Bash exit code 99, a soft-failing sensor...)."""


class AirflowFailException(AirflowException):
    """The task should fail without retrying: a retry could not succeed."""


class AirflowSensorTimeout(AirflowException):
    """A sensor waited longer than its `timeout`; fails without retry, as in Airflow."""


class AirflowRescheduleException(AirflowException):
    """A sensor in reschedule mode gives its slot back and asks to poke again at `reschedule_date`."""

    def __init__(self, reschedule_date: datetime) -> None:
        super().__init__(f"Rescheduled to {reschedule_date.isoformat()}")
        self.reschedule_date = reschedule_date


class AirflowTaskTimeout(AirflowException):
    """The task ran longer than its `execution_timeout`."""


class TaskDeferralError(AirflowException):
    """A deferred task's trigger failed; the task fails when it resumes."""


class TaskDeferralTimeout(TaskDeferralError):
    """A deferred task's trigger timed out; a sensor turns it into `AirflowSensorTimeout`."""


class AirflowTaskTerminated(BaseException):
    """The try received SIGTERM: its Pod or process is being killed.

    A `BaseException`, so that no `except Exception` in the operator's code keeps the task running.
    """


class TaskDeferred(BaseException):
    """Raised by `BaseOperator.defer`: the try hands its wait to a trigger and resumes in `method_name`.

    A `BaseException`, as in Airflow, so that a broad `except Exception` in the operator's own code,
    however deep the call that defers, does not swallow the deferral.
    """

    def __init__(
        self,
        trigger: Any,
        method_name: str,
        kwargs: dict[str, Any] | None = None,
        timeout: timedelta | None = None,
    ) -> None:
        super().__init__()
        if timeout is not None and not isinstance(timeout, timedelta):
            raise ValueError("Timeout value must be a timedelta")
        self.trigger = trigger
        self.method_name = method_name
        self.kwargs = kwargs
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"<TaskDeferred trigger={self.trigger} method={self.method_name}>"


class AirflowConfigException(AirflowException):
    """An Airflow configuration option that is not set (`airflow.configuration.conf.get`)."""


class HITLTriggerEventError(Exception):
    """A human-in-the-loop trigger's event is an error (Airflow's standard provider exception)."""


class HITLTimeoutError(HITLTriggerEventError):
    """A human-in-the-loop request's response timeout passed with no answer and no defaults."""


class HITLRejectException(AirflowException):
    """An ApprovalOperator with `fail_on_reject=True` was answered "Reject"."""
