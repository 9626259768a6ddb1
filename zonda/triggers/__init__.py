"""Triggers: Airflow's trigger authoring API (`airflow.triggers.*`), with Airflow's names.

Deferrable operators hand a trigger to `BaseOperator.defer`; the triggerer (`controller.triggerer`)
rebuilds it with `load_trigger` from a `Trigger` resource and runs it until its first event.
"""

from zonda.resources.json_values import from_json_safe, to_json_safe
from zonda.triggers import timezone
from zonda.triggers.base import (
    BaseEventTrigger,
    BaseTaskEndEvent,
    BaseTrigger,
    TaskFailedEvent,
    TaskSkippedEvent,
    TaskSuccessEvent,
    TriggerEvent,
    import_trigger_class,
    load_trigger,
    serialize_trigger,
)
from zonda.triggers.file import DirectoryFileDeleteTrigger, FileDeleteTrigger, FileTrigger
from zonda.triggers.temporal import DateTimeTrigger, TimeDeltaTrigger

__all__ = [
    "BaseEventTrigger",
    "BaseTaskEndEvent",
    "BaseTrigger",
    "DateTimeTrigger",
    "DirectoryFileDeleteTrigger",
    "FileDeleteTrigger",
    "FileTrigger",
    "TaskFailedEvent",
    "TaskSkippedEvent",
    "TaskSuccessEvent",
    "TimeDeltaTrigger",
    "TriggerEvent",
    "from_json_safe",
    "import_trigger_class",
    "load_trigger",
    "serialize_trigger",
    "timezone",
    "to_json_safe",
]
