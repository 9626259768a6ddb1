"""Airflow 2.x's timetable API on Zonda: port a timetable by pointing its ``airflow.timetables`` imports here.

Everything Airflow's ``airflow.timetables.base``, ``.simple``, ``.interval``, ``.trigger`` and ``.events``
export for timetable authors is here under the same names and signatures. The differences that matter:

* no hidden clock: ``zonda.timetables.base.utcnow()`` is pinned by ``zonda.schedules.scheduling`` (see
``base``);
* exact daylight-saving semantics for cron schedules (see ``cron``);
* invalid cron expressions, timezones and deltas fail when the timetable is built, not later.
"""

from zonda.timetables.base import (
    AirflowTimetableInvalid,
    DagRunInfo,
    DataInterval,
    TimeRestriction,
    Timetable,
)
from zonda.timetables.cron import CRON_PRESETS
from zonda.timetables.events import EventsTimetable
from zonda.timetables.interval import CronDataIntervalTimetable, DeltaDataIntervalTimetable
from zonda.timetables.schedules import load_timetable, timetable_for_schedule
from zonda.timetables.simple import ContinuousTimetable, NullTimetable, OnceTimetable
from zonda.timetables.trigger import CronPartitionTimetable, CronTriggerTimetable, DeltaTriggerTimetable

__all__ = [
    "CRON_PRESETS",
    "AirflowTimetableInvalid",
    "ContinuousTimetable",
    "CronDataIntervalTimetable",
    "CronPartitionTimetable",
    "CronTriggerTimetable",
    "DagRunInfo",
    "DataInterval",
    "DeltaDataIntervalTimetable",
    "DeltaTriggerTimetable",
    "EventsTimetable",
    "NullTimetable",
    "OnceTimetable",
    "TimeRestriction",
    "Timetable",
    "load_timetable",
    "timetable_for_schedule",
]
