"""Turn what a DAG resource says (``schedule: "@daily"``, ``timetable: {class, params}``) into a Timetable."""

from __future__ import annotations

import importlib
import re
from datetime import timedelta
from typing import Any

from zonda.resources.durations import DURATION_PATTERN, parse_duration
from zonda.timetables.base import AirflowTimetableInvalid, Timetable
from zonda.timetables.cron import CRON_PRESETS
from zonda.timetables.interval import CronDataIntervalTimetable, DeltaDataIntervalTimetable
from zonda.timetables.simple import ContinuousTimetable, NullTimetable, OnceTimetable

__all__ = ["load_timetable", "timetable_for_schedule"]

_DURATION = re.compile(DURATION_PATTERN)
_CLASS_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*([.:][A-Za-z_][\w]*)$")


def timetable_for_schedule(schedule: str | None, timezone: str) -> Timetable:
    """Read ``schedule`` as Airflow 2.x does: ``None``, ``@once``, ``@continuous``, preset, cron or duration.

    A cron expression or preset becomes a ``CronDataIntervalTimetable`` in ``timezone`` (runs at the end of
    each interval, Airflow 2's default); a duration such as ``30m`` or ``1h30m`` becomes a
    ``DeltaDataIntervalTimetable``. Anything else raises :class:`AirflowTimetableInvalid`.
    """
    if schedule is None:
        return NullTimetable()
    text = schedule.strip()
    if text == "@once":
        return OnceTimetable()
    if text == "@continuous":
        return ContinuousTimetable()
    if text in CRON_PRESETS:
        return CronDataIntervalTimetable(text, timezone)
    if _DURATION.fullmatch(text):
        delta = parse_duration(text)
        if delta <= timedelta(0):
            raise AirflowTimetableInvalid(
                f"invalid schedule {schedule!r}: a duration schedule must be positive"
            )
        return DeltaDataIntervalTimetable(delta)
    if text.startswith("@"):
        raise AirflowTimetableInvalid(
            f"unknown schedule preset {schedule!r}: expected one of @once, @continuous, "
            f"{', '.join(CRON_PRESETS)}"
        )
    if len(text.split()) == 1:
        raise AirflowTimetableInvalid(
            f"invalid schedule {schedule!r}: expected a cron expression such as '0 2 * * *', a preset "
            "such as '@daily', or a duration such as '30m' or '1h30m'"
        )
    return CronDataIntervalTimetable(text, timezone)


def load_timetable(class_path: str, params: dict[str, Any]) -> Timetable:
    """Import a user's Timetable subclass (``pkg.mod.Class`` or ``pkg.mod:Class``) and ``deserialize`` params.

    This is Airflow's plugin registration without the plugin: the class is named where it lives, and its
    ``serialize``/``deserialize`` pair is the contract for the parameters, so a resource stores exactly
    what ``serialize()`` returns. The result is validated before it is returned.
    """
    if not isinstance(class_path, str) or not _CLASS_PATH.match(class_path.strip()):
        raise AirflowTimetableInvalid(
            f"invalid timetable class path {class_path!r}: expected 'package.module.Class' or "
            "'package.module:Class'"
        )
    path = class_path.strip()
    if ":" in path:
        module_name, _, attribute = path.partition(":")
    else:
        module_name, _, attribute = path.rpartition(".")
    if not module_name:
        raise AirflowTimetableInvalid(
            f"invalid timetable class path {class_path!r}: it names no module; "
            "expected 'package.module.Class'"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # An ImportError, or any error raised while the module body runs.
        raise AirflowTimetableInvalid(
            f"timetable class {class_path!r} cannot be imported: module {module_name!r} failed to import "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    try:
        cls = getattr(module, attribute)
    except AttributeError as exc:
        raise AirflowTimetableInvalid(
            f"timetable class {class_path!r} cannot be imported: module {module_name!r} has no attribute "
            f"{attribute!r}"
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, Timetable)):
        raise AirflowTimetableInvalid(
            f"{class_path!r} is not a Timetable: it is {cls!r}; subclass zonda.timetables.Timetable"
        )
    if not isinstance(params, dict):
        raise AirflowTimetableInvalid(
            f"timetable params for {class_path!r} must be a mapping, not {params!r}"
        )
    try:
        timetable = cls.deserialize(dict(params))
    except AirflowTimetableInvalid:
        raise
    except Exception as exc:  # KeyError for a missing param, TypeError/ValueError for a bad one...
        raise AirflowTimetableInvalid(
            f"timetable {class_path!r} rejected params {params!r}: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(timetable, Timetable):
        raise AirflowTimetableInvalid(
            f"{class_path}.deserialize returned {timetable!r}, which is not a Timetable"
        )
    timetable.validate()
    return timetable
